package io.membus.core.time;

import io.membus.core.transport.TransportThreads;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.LongSupplier;

/**
 * A hashed timer wheel with one daemon thread ("membus-wheel"), shared by every
 * {@link io.membus.core.transport.pipeline.VerbPipeline} of the JVM for verb deadlines and injected delays,
 * and the JVM's one timer for everything else timed ({@link Deadlines}, the collections'
 * and the coherence layer's reapers and periodic checks): it sits beside {@link Clock} on
 * the application side, so both those and the transports may use it.
 *
 * <p>Entries are {@link Timeout} objects the caller owns and re-arms (intrusive: arming
 * allocates nothing). A pipeline arms its one entry at its oldest verb's deadline (all
 * verbs of a connection share one timeout, so the oldest verb's deadline is the
 * earliest) or at the release time of a held verb, and re-arms it when it fires: one
 * entry per connection, not one task per verb. An entry fires at the first tick at or
 * after its time (ticks of {@link #TICK_NANOS}); the thread sleeps until the earliest
 * armed entry's tick, or indefinitely when none is armed.
 *
 * <p><b>Note:</b> thread-safe: any thread may arm or cancel; {@link Timeout#expired()}
 * runs on the wheel thread, outside the wheel's lock, and must not block. An entry is in
 * at most one bucket; arming an armed entry moves it.
 */
public final class TimerWheel {
    private static final Logger LOG = LoggerFactory.getLogger(TimerWheel.class);
    /** Resolution of the wheel: 1 ms. */
    public static final long TICK_NANOS = TimeUnit.MILLISECONDS.toNanos(1);
    private static final int BUCKETS = 512; // a power of two: half a second per round at 1 ms
    private static final long NOT_ARMED = Long.MIN_VALUE;
    private static final long PARK_UNTIL_ARMED = -1; // nothing armed: an arm unparks the thread

    /** The wheel of the JVM's pipelines. */
    public static final TimerWheel SHARED = new TimerWheel("membus-wheel");

    /** One entry of the wheel, owned and re-armed by its user. */
    public abstract static class Timeout {
        private long tick = NOT_ARMED; // guarded by the wheel's lock
        private long at;
        private Timeout prev;
        private Timeout next;
        private Timeout nextExpired;

        /** Runs on the wheel thread when the entry's time has come; must not block. */
        protected abstract void expired();
    }

    private final Object lock = new Object();
    private final Timeout[] heads = new Timeout[BUCKETS]; // guarded by lock
    private final LongSupplier clock;                    // System::nanoTime but in tests
    private final long origin;
    private long processedTick;                          // guarded by lock: every bucket up to it was visited
    private long sleepUntilTick = Long.MAX_VALUE;        // guarded by lock: when the thread wakes by itself
    private int armed;                                   // guarded by lock
    private final Thread thread;

    /**
     * A wheel of its own with a thread named {@code name} (a pipeline's test gives its verbs
     * one so that nothing else is armed on it); everything else uses {@link #SHARED}.
     */
    public TimerWheel(String name) {
        this(name, System::nanoTime);
    }

    /** A wheel reading {@code clock} instead of {@link System#nanoTime()} (tests drive time with it). */
    TimerWheel(String name, LongSupplier clock) {
        this.clock = clock;
        this.origin = clock.getAsLong();
        this.processedTick = tickOf(origin);
        this.thread = TransportThreads.startDaemon(name, this::run);
    }

    private long tickOf(long nanos) {
        long d = nanos - origin;
        return d <= 0 ? 0 : (d + TICK_NANOS - 1) / TICK_NANOS; // the first tick at or after nanos
    }

    /** Arms (or moves) {@code t} to fire at {@code atNanos} ({@link System#nanoTime()} scale). */
    public void arm(Timeout t, long atNanos) {
        boolean wake;
        synchronized (lock) {
            if (t.tick != NOT_ARMED) {
                unlink(t);
            }
            long tick = Math.max(tickOf(atNanos), processedTick + 1);
            t.tick = tick;
            t.at = atNanos;
            int b = (int) (tick & (BUCKETS - 1));
            Timeout h = heads[b];
            t.prev = null;
            t.next = h;
            if (h != null) {
                h.prev = t;
            }
            heads[b] = t;
            armed++;
            wake = tick < sleepUntilTick;
            if (wake) {
                sleepUntilTick = tick;
            }
        }
        if (wake) {
            LockSupport.unpark(thread);
        }
    }

    /** Disarms {@code t}; nothing when it is not armed. */
    public void cancel(Timeout t) {
        synchronized (lock) {
            if (t.tick != NOT_ARMED) {
                unlink(t);
            }
        }
    }

    /** Whether {@code t} is armed, and if so when it fires ({@link Long#MIN_VALUE} when not armed). */
    public long armedAt(Timeout t) {
        synchronized (lock) {
            return t.tick == NOT_ARMED ? NOT_ARMED : t.at;
        }
    }

    /** The wheel's thread (for tests). */
    Thread thread() {
        return thread;
    }

    /** Entries armed now (for tests). */
    public int armedCount() {
        synchronized (lock) {
            return armed;
        }
    }

    private void unlink(Timeout t) {
        int b = (int) (t.tick & (BUCKETS - 1));
        if (t.prev != null) {
            t.prev.next = t.next;
        } else {
            heads[b] = t.next;
        }
        if (t.next != null) {
            t.next.prev = t.prev;
        }
        t.prev = null;
        t.next = null;
        t.tick = NOT_ARMED;
        armed--;
    }

    private void run() {
        while (true) {
            Timeout expired = null;
            long sleepNanos;
            synchronized (lock) {
                long now = clock.getAsLong();
                long nowTick = Math.max(0, (now - origin) / TICK_NANOS); // the last tick that has begun
                long from = processedTick + 1;
                long to = Math.min(nowTick, processedTick + BUCKETS); // one round visits every bucket
                for (long tick = from; tick <= to; tick++) {
                    Timeout t = heads[(int) (tick & (BUCKETS - 1))];
                    while (t != null) {
                        Timeout next = t.next;
                        if (t.tick <= nowTick) {
                            unlink(t);
                            t.nextExpired = expired;
                            expired = t;
                        }
                        t = next;
                    }
                }
                processedTick = Math.max(processedTick, nowTick);
                long earliest = Long.MAX_VALUE;
                if (armed > 0) {
                    for (Timeout h : heads) { // entries are per connection, not per verb: few
                        for (Timeout t = h; t != null; t = t.next) {
                            earliest = Math.min(earliest, t.tick);
                        }
                    }
                }
                sleepUntilTick = expired != null ? processedTick : earliest;
                if (expired != null) {
                    sleepNanos = 0;
                } else if (earliest == Long.MAX_VALUE) {
                    sleepNanos = PARK_UNTIL_ARMED;
                } else {
                    // the earliest tick may have begun while this pass ran: then look again at once,
                    // never park without a deadline while an entry is armed
                    sleepNanos = Math.max(0, origin + earliest * TICK_NANOS - clock.getAsLong());
                }
            }
            while (expired != null) {
                Timeout t = expired;
                expired = t.nextExpired;
                t.nextExpired = null;
                try {
                    t.expired();
                } catch (Throwable e) { // a broken entry must not stop every other connection's deadlines
                    LOG.error("timer entry {} failed", t, e);
                }
            }
            if (sleepNanos == PARK_UNTIL_ARMED) {
                LockSupport.park(this);
            } else if (sleepNanos > 0) {
                LockSupport.parkNanos(this, sleepNanos);
            }
        }
    }
}
