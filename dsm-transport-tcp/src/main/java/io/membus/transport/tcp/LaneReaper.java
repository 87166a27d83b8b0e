package io.membus.transport.tcp;

import io.membus.core.time.TimerWheel;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Enforces the deadlines of {@link TcpLane}s. A lane's socket is in plain blocking
 * mode — a read is one system call, as on the floor of a synchronous round trip;
 * with {@code SO_TIMEOUT} the JDK would switch it to non-blocking reads and a poll
 * per wait — so the deadline is kept here instead: one entry of the shared
 * {@link TimerWheel} looks at every open lane every {@link #PERIOD_NANOS} and closes the
 * socket of one whose verb (or connect, or handshake) outlived its deadline, which wakes
 * the blocked caller. A deadline is thus kept to within one period (plus the wheel's
 * tick). The lanes' hot path never touches the wheel: a verb only writes its lane's
 * volatile deadline; the entry is armed while lanes exist and left unarmed when the last
 * one closed.
 *
 * <p><b>Note:</b> thread-safe. A lane publishes its deadline through a volatile
 * field; the reaper only reads it and closes the lane's socket (which does not wait for
 * the blocked reader: it is signalled and fails). Whether the entry is armed is guarded by
 * the class's lock, so a lane watched while the last scan found none re-arms it.
 */
final class LaneReaper {
    static final long PERIOD_NANOS = 10_000_000L;
    private static final Set<TcpLane> LANES = ConcurrentHashMap.newKeySet();
    private static final Object LOCK = new Object();
    private static final Scan SCAN = new Scan();
    private static boolean armed; // guarded by LOCK

    private LaneReaper() {
    }

    static void watch(TcpLane lane) {
        LANES.add(lane);
        synchronized (LOCK) {
            if (!armed) {
                armed = true;
                TimerWheel.SHARED.arm(SCAN, System.nanoTime() + PERIOD_NANOS);
            }
        }
    }

    static void forget(TcpLane lane) {
        LANES.remove(lane);
    }

    /** The wheel entry: one scan of every lane, re-armed while lanes exist. */
    private static final class Scan extends TimerWheel.Timeout {
        @Override
        protected void expired() {
            long now = System.nanoTime();
            for (TcpLane lane : LANES) {
                lane.expireIfDue(now);
            }
            synchronized (LOCK) {
                if (LANES.isEmpty()) {
                    armed = false; // the next lane arms it again
                } else {
                    TimerWheel.SHARED.arm(this, now + PERIOD_NANOS);
                }
            }
        }
    }
}
