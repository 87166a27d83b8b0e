package io.membus.test.nemesis;

import io.membus.test.history.FaultWindow;
import io.membus.test.history.HistoryRecorder;

import java.time.Duration;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Runs nemeses on a seeded schedule while a workload runs: quiet for {@code quiet},
 * then one fault of a randomly chosen nemesis for {@code faultFor}, healed, and again,
 * until {@link #close()}, which heals whatever is active (a run always ends healed).
 * Every fault's window is recorded in the history (for reports), and a fault that
 * could not be started or healed is kept as {@link #failure()}.
 *
 * <pre>{@code
 * try (NemesisSchedule nemesis = NemesisSchedule.start(List.of(partition, skew), recorder, seed,
 *         Duration.ofSeconds(1), Duration.ofSeconds(2))) {
 *     runClients(Duration.ofSeconds(20));
 * }
 * }</pre>
 *
 * <p><b>Note:</b> thread-safe; the schedule runs on one daemon thread of its own.
 */
public final class NemesisSchedule implements AutoCloseable {
    private final List<Nemesis> nemeses;
    private final HistoryRecorder recorder;
    private final Random random;
    private final Duration quiet;
    private final Duration faultFor;
    private final Thread thread;
    private final AtomicReference<Fault> active = new AtomicReference<>();
    private final AtomicReference<RuntimeException> failure = new AtomicReference<>();
    private volatile long activeSince;
    private volatile boolean stopping;
    private volatile int faults;

    private NemesisSchedule(List<Nemesis> nemeses, HistoryRecorder recorder, long seed, Duration quiet,
                            Duration faultFor) {
        this.nemeses = List.copyOf(nemeses);
        this.recorder = recorder;
        this.random = new Random(seed);
        this.quiet = quiet;
        this.faultFor = faultFor;
        this.thread = new Thread(this::run, "membus-nemesis");
        this.thread.setDaemon(true);
    }

    /** Starts the schedule; with no nemeses it does nothing until closed. */
    public static NemesisSchedule start(List<Nemesis> nemeses, HistoryRecorder recorder, long seed, Duration quiet,
                                        Duration faultFor) {
        NemesisSchedule s = new NemesisSchedule(nemeses, recorder, seed, quiet, faultFor);
        s.thread.start();
        return s;
    }

    private void run() {
        try {
            while (!stopping && !nemeses.isEmpty()) {
                if (pause(quiet)) {
                    return;
                }
                Nemesis n = nemeses.get(random.nextInt(nemeses.size()));
                long start = recorder.now();
                Fault f = n.start(random);
                activeSince = start;
                active.set(f);
                faults++;
                pause(faultFor);
                healActive();
            }
        } catch (RuntimeException e) {
            failure.compareAndSet(null, e);
            healActive();
        }
    }

    /** Sleeps, waking early when stopping; returns whether it is stopping. */
    private boolean pause(Duration d) {
        long end = System.nanoTime() + d.toNanos();
        while (!stopping) {
            long left = end - System.nanoTime();
            if (left <= 0) {
                return false;
            }
            try {
                TimeUnit.NANOSECONDS.sleep(Math.min(left, 50_000_000L));
            } catch (InterruptedException e) {
                return true;
            }
        }
        return true;
    }

    private void healActive() {
        Fault f = active.getAndSet(null);
        if (f != null) {
            try {
                f.heal();
            } catch (RuntimeException e) {
                failure.compareAndSet(null, e);
            } finally {
                recorder.fault(new FaultWindow(f.kind(), f.targets(), activeSince, recorder.now()));
            }
        }
    }

    /** How many faults were started so far. */
    public int faultsStarted() {
        return faults;
    }

    /** The first fault that could not be started or healed, or null. */
    public RuntimeException failure() {
        return failure.get();
    }

    /** Stops the schedule, heals the active fault and waits for the schedule's thread (at most a minute). */
    @Override
    public void close() {
        stopping = true;
        try {
            thread.join(TimeUnit.MINUTES.toMillis(1));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        healActive();
    }
}
