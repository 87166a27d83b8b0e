package io.membus.coherence;

import io.membus.core.RemoteMemory;
import io.membus.core.Words;
import io.membus.core.error.DsmException;
import io.membus.core.time.TimerWheel;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.TimeUnit;

/**
 * This node's clock against its peers' (see "Clocks" in {@code docs/coherence.md}): answers
 * the peers' clock requests on the {@link CoherentHeap#CLOCK_CHANNEL}, measures its skew to
 * every live peer NTP style ({@link SkewEstimator}: up to {@value #SKEW_SAMPLES} samples a
 * check, the shortest round trip counts), and raises the caching problem once a skew beyond
 * ε is proven in {@value #SKEW_PERSISTENCE} consecutive checks (every copy is dropped then),
 * clearing it after as many checks within ε.
 *
 * <p>Checks are scheduled on the JVM's shared {@link TimerWheel} (no thread of its own):
 * every {@code skew-interval}, or while a verdict is pending every fifth of it, at most
 * 100 ms. A check does not block the wheel: its clock requests are asynchronous, one
 * after the other (a sample's round trip is timed from its request to its answer's
 * arrival), and it goes on in their completions. {@link #checkSkew()} runs one check and
 * waits for it (the tests, and a caller that wants a fresh verdict).
 *
 * <p><b>Note:</b> thread-safe. Checks never run at once: a check starts when the one
 * before it ended (a queue of checks under {@link #lock}), so the estimators, touched only
 * by the running check, are handed from one check to the next through that lock (and the
 * completions of its requests, which happen-after their issue). The verdict fields are
 * volatile, written at the end of a check: a reader sees the last check's.
 */
final class SkewMonitor {
    private static final Logger LOG = LoggerFactory.getLogger(CoherentHeap.class);
    /** Clock samples per peer and check (one window) at most, of which the shortest round trip counts. */
    static final int SKEW_SAMPLES = 16;
    /** Consecutive checks whose verdict must agree to stop caching for a skew, or to start again. */
    static final int SKEW_PERSISTENCE = 3;

    private final HeapContext ctx;
    private final CopyCache cache;
    private final Object lock = new Object();
    /** The verdict per peer (touched only by the running check; handed over through {@link #lock}). */
    private final Map<Integer, SkewEstimator> estimators = new HashMap<>();
    /** When the last check queued ends (guarded by lock): the next one starts then. */
    private CompletableFuture<Long> lastCheck = CompletableFuture.completedFuture(0L);
    private final Tick tick = new Tick();
    private volatile boolean pending;
    private volatile long measuredMicros;
    private volatile long atLeastMicros;
    private volatile String problem;

    SkewMonitor(HeapContext ctx, CopyCache cache) {
        this.ctx = ctx;
        this.cache = cache;
    }

    /** Answers the peers' clock requests (a heap with messages). */
    void register() {
        ctx.messaging.register(CoherentHeap.CLOCK_CHANNEL, "coherence-clock", (from, payload) -> {
            byte[] now = new byte[8];
            Words.putLong(now, 0, ctx.clock.nowMicros());
            return now;
        });
    }

    /** Schedules the first check now, and each next one when a check ends (a heap with messages and skew checks). */
    void start() {
        TimerWheel.SHARED.arm(tick, System.nanoTime());
    }

    /** Stops the checks (a check running ends after its requests) and the clock channel's answers. */
    void close() {
        TimerWheel.SHARED.cancel(tick);
        if (ctx.messaging != null) {
            ctx.messaging.unregister(CoherentHeap.CLOCK_CHANNEL);
        }
    }

    /** Why this node may not serve cached reads for its clock (a proven skew), or null. */
    String problem() {
        return problem;
    }

    long measuredMicros() {
        return measuredMicros;
    }

    long atLeastMicros() {
        return atLeastMicros;
    }

    /** See {@link CoherentHeap#checkSkew()}: runs one check after any running one, and waits for it. */
    long checkSkew() {
        if (ctx.messaging == null) {
            return 0;
        }
        CompletableFuture<Long> check = queueCheck();
        // each clock request ends by its own deadline (the operation timeout): one per sample and peer at most,
        // for this check and the one it may queue behind
        int peers = Math.max(1, ctx.memory.directory().members().size());
        Duration bound = ctx.config.timeout().multipliedBy(2L * (SKEW_SAMPLES * (long) peers + 1));
        return RemoteMemory.await(check, bound);
    }

    /** Queues a check after the last one queued; the future completes with its upper bound when it ends. */
    private CompletableFuture<Long> queueCheck() {
        CompletableFuture<Long> done = new CompletableFuture<>();
        CompletableFuture<Long> before;
        synchronized (lock) {
            before = lastCheck;
            lastCheck = done;
        }
        before.whenComplete((v, e) -> {
            try {
                new Check(done).next();
            } catch (RuntimeException f) {
                done.completeExceptionally(f);
            }
        });
        return done;
    }

    /**
     * One check: every live peer in turn, up to {@link #SKEW_SAMPLES} clock requests each
     * (fewer once its window's verdict cannot change), one at a time; runs in the completions
     * of its requests (a request answered at once is handled in the loop, not by recursion).
     */
    private final class Check {
        private final CompletableFuture<Long> done;
        private final List<Integer> peers = new ArrayList<>();
        private int peer = -1;
        private int sample;
        private SkewEstimator estimator;
        private long worst;
        private long atLeast;
        private String found;
        private boolean anyPending;

        Check(CompletableFuture<Long> done) {
            this.done = done;
            for (var member : ctx.memory.directory().members()) {
                if (member.nodeId() != ctx.self) {
                    peers.add(member.nodeId());
                }
            }
        }

        /** Issues the next request, or ends the window of the peer and goes on, or ends the check. */
        void next() {
            while (true) {
                if (estimator == null || sample >= SKEW_SAMPLES || estimator.decided()) {
                    if (estimator != null) {
                        endWindow();
                    }
                    if (++peer >= peers.size() || ctx.closed()) {
                        finish();
                        return;
                    }
                    estimator = estimators.computeIfAbsent(peers.get(peer),
                            k -> new SkewEstimator(ctx.epsMicros, SKEW_PERSISTENCE));
                    sample = 0;
                }
                int n = peers.get(peer);
                long t0 = ctx.clock.nowMicros();
                CompletableFuture<byte[]> answer;
                try {
                    answer = ctx.messaging.requestAsync(n, CoherentHeap.CLOCK_CHANNEL, new byte[0]);
                } catch (DsmException e) {
                    answer = CompletableFuture.failedFuture(e);
                }
                if (!answer.isDone()) {
                    answer.whenComplete((r, e) -> {
                        try {
                            if (answered(t0, r, e)) {
                                next();
                            }
                        } catch (RuntimeException f) {
                            done.completeExceptionally(f);
                        }
                    });
                    return;
                }
                byte[] r = null;
                Throwable e = null;
                try {
                    r = answer.join();
                } catch (CompletionException | java.util.concurrent.CancellationException f) {
                    e = f;
                }
                if (!answered(t0, r, e)) {
                    return;
                }
            }
        }

        /** Records one answer (or, for a failed request, ends the peer's samples); true to go on. */
        private boolean answered(long t0, byte[] r, Throwable e) {
            long t1 = ctx.clock.nowMicros();
            if (e != null) {
                Throwable cause = e instanceof CompletionException && e.getCause() != null ? e.getCause() : e;
                LOG.debug("clock check of node {} failed: {}", peers.get(peer), cause.getMessage());
                sample = SKEW_SAMPLES; // no more samples of this peer in this check
                return true;
            }
            estimator.sample(t0, Words.getLong(r, 0), t1);
            sample++;
            return true;
        }

        private void endWindow() {
            int n = peers.get(peer);
            SkewEstimator.Window w = estimator.endWindow();
            estimator = null;
            if (w == null) {
                return; // no answer: the verdict on this peer stays as it was
            }
            worst = Math.max(worst, w.atMostMicros());
            atLeast = Math.max(atLeast, w.atLeastMicros());
            SkewEstimator e = estimators.get(n);
            anyPending |= e.pending();
            if (w.alarmed()) {
                found = "clock skew to node " + n + " is at least " + w.atLeastMicros() + "us (measured offset "
                        + w.offsetMicros() + "us, uncertain by half its round trip of " + w.rttMicros()
                        + "us, the shortest of " + w.samples() + " samples), above the clock bound " + ctx.epsMicros
                        + "us (membus.coherence.clock-bound) in " + SKEW_PERSISTENCE + " consecutive checks";
            } else if (e.alarmed()) {
                found = "clock skew to node " + n + " was above the clock bound " + ctx.epsMicros + "us";
            }
        }

        private void finish() {
            estimators.keySet().retainAll(new HashSet<>(peers)); // a peer that left takes its verdict with it
            measuredMicros = worst;
            atLeastMicros = atLeast;
            pending = anyPending;
            String before = problem;
            problem = found;
            if (found != null && before == null) {
                cache.dropAll(); // (versionIfValid also refuses while the problem is set)
                LOG.warn("node {} stops serving cached reads (validated reads only): {}; fix the clocks (NTP)",
                        ctx.self, found);
            } else if (found == null && before != null) {
                LOG.info("node {} serves cached reads again: the clock skew was within the bound in {} consecutive"
                        + " checks (at most {}us now)", ctx.self, SKEW_PERSISTENCE, worst);
            }
            done.complete(worst);
        }
    }

    /**
     * The scheduled check, on the wheel (it must not block: it only queues a check), then
     * the next: after the skew interval, or while a verdict is pending after a fifth of it,
     * at most 100 ms (a proven skew stops caching about 200 ms after the check that first
     * saw it, not two intervals later).
     */
    private final class Tick extends TimerWheel.Timeout {
        @Override
        protected void expired() {
            if (ctx.closed()) {
                return;
            }
            queueCheck().whenComplete((v, e) -> {
                if (e != null) {
                    LOG.debug("clock check failed: {}", e.toString());
                }
                if (!ctx.closed()) {
                    long every = ctx.config.skewInterval().toMillis();
                    long delay = pending ? Math.max(1, Math.min(every / 5, 100)) : every;
                    TimerWheel.SHARED.arm(this, System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(delay));
                }
            });
        }
    }
}
