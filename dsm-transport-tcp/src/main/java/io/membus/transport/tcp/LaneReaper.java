package io.membus.transport.tcp;

import io.membus.core.transport.TransportThreads;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.LockSupport;

/**
 * Enforces the deadlines of {@link TcpLane}s. A lane's socket is in plain blocking
 * mode — a read is one system call, as on the floor of a synchronous round trip;
 * with {@code SO_TIMEOUT} the JDK would switch it to non-blocking reads and a poll
 * per wait — so the deadline is kept here instead: one daemon thread looks at every
 * open lane every {@link #PERIOD_NANOS} and closes the socket of one whose verb (or
 * connect, or handshake) outlived its deadline, which wakes the blocked caller. A
 * deadline is thus kept to within one period.
 *
 * <p>The thread runs while lanes exist and stops when the last one closed.
 *
 * <p><b>Note:</b> thread-safe. A lane publishes its deadline through a volatile
 * field; the reaper only reads it and closes the lane.
 */
final class LaneReaper {
    static final long PERIOD_NANOS = 10_000_000L;
    private static final Set<TcpLane> LANES = ConcurrentHashMap.newKeySet();
    private static final Object START = new Object();
    private static Thread thread; // guarded by START

    private LaneReaper() {
    }

    static void watch(TcpLane lane) {
        LANES.add(lane);
        synchronized (START) {
            if (thread == null) {
                thread = TransportThreads.startDaemon("membus-tcp-lane-reaper", LaneReaper::run);
            }
        }
    }

    static void forget(TcpLane lane) {
        LANES.remove(lane);
    }

    private static void run() {
        while (true) {
            LockSupport.parkNanos(PERIOD_NANOS);
            long now = System.nanoTime();
            for (TcpLane lane : LANES) {
                lane.expireIfDue(now);
            }
            synchronized (START) {
                if (LANES.isEmpty()) {
                    thread = null; // the next lane starts another
                    return;
                }
            }
        }
    }
}
