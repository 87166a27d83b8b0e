package io.membus.collections;

import io.membus.core.Segment;
import io.membus.core.transport.message.MessageEndpoint;
import io.membus.core.transport.Batch;
import io.membus.core.transport.Connection;
import io.membus.core.fault.FaultInjector;
import io.membus.core.directory.PeerInfo;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.SegmentTable;
import io.membus.core.transport.Transport;

import java.util.Collection;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * A transport that counts, per calling thread, the verbs issued and the <b>round trips</b>
 * they took: every verb goes through a connection (this node's own segments too: local
 * atomics are reported not coherent, so no verb runs on a memory path), and each verb's
 * future notes the thread's current <em>wave</em>. Waiting for the result of a verb of the
 * current wave (a {@code get} or {@code join} on its future, which is what
 * {@link io.membus.core.RemoteMemory#await} does) ends the wave; a verb issued afterwards
 * starts a new one. Round trips = waves in which verbs were issued. Two reads issued
 * together and then awaited are one round trip; a read awaited before the next is issued
 * makes two — whatever the timing, so the count is exact on a loaded machine.
 *
 * <p><b>Note:</b> thread-safe; counts are per thread (read them on the thread that ran
 * the operation).
 */
final class RoundTripTransport implements Transport {
    /** A thread's counts. */
    static final class Counts {
        long verbs;
        long reads;
        long roundTrips;
        /** Round trips in which at least one read was issued. */
        long readRoundTrips;
        private long wave;
        private long lastWaveUsed = -1;
        private long lastReadWave = -1;

        void reset() {
            verbs = 0;
            reads = 0;
            roundTrips = 0;
            readRoundTrips = 0;
        }

        @Override
        public String toString() {
            return "verbs=" + verbs + ", reads=" + reads + ", roundTrips=" + roundTrips + ", readRoundTrips="
                    + readRoundTrips;
        }
    }

    private static final ThreadLocal<Counts> COUNTS = ThreadLocal.withInitial(Counts::new);

    private final Transport delegate;
    private final Map<Connection, Connection> wrapped = new ConcurrentHashMap<>();

    RoundTripTransport(Transport delegate) {
        this.delegate = delegate;
    }

    /** Writes longer than this are refused before they are sent (a {@code BadLengthException}), as tcp's are. */
    volatile int refuseWritesOver = Integer.MAX_VALUE;

    /**
     * A compare-and-swap this test predicate picks, given {@code {ptr, expected, update}},
     * fails before it is sent (a not-sent timeout: it did not run); null: none.
     */
    volatile java.util.function.Predicate<long[]> failCas;

    /**
     * A compare-and-swap (not batched) this test predicate picks, given {@code {ptr, expected,
     * update}}, is held: sent only at {@link #releaseHeld}; null: none.
     */
    volatile java.util.function.Predicate<long[]> holdCas;
    private final java.util.List<Runnable> held = new java.util.concurrent.CopyOnWriteArrayList<>();

    /** How many compare-and-swaps are held ({@link #holdCas}). */
    int heldCount() {
        return held.size();
    }

    /** Sends the compare-and-swaps held ({@link #holdCas}). */
    void releaseHeld() {
        for (Runnable r : held) {
            held.remove(r);
            r.run();
        }
    }

    /**
     * Which reads count as reads ({@link Counts#reads}, {@link Counts#readRoundTrips}), by the
     * address read; the others count as verbs only. Null: every read.
     */
    volatile java.util.function.LongPredicate countReadsOf;

    /** The calling thread's counts (live: reset them before an operation). */
    static Counts counts() {
        return COUNTS.get();
    }

    private static <T> CompletableFuture<T> counted(CompletableFuture<T> inner, boolean read) {
        Counts c = COUNTS.get();
        c.verbs++;
        if (read) {
            c.reads++;
            if (c.lastReadWave != c.wave) {
                c.lastReadWave = c.wave;
                c.readRoundTrips++;
            }
        }
        if (c.lastWaveUsed != c.wave) {
            c.lastWaveUsed = c.wave;
            c.roundTrips++;
        }
        Waved<T> f = new Waved<>(c.wave);
        inner.whenComplete((v, e) -> {
            if (e != null) {
                f.completeExceptionally(e);
            } else {
                f.complete(v);
            }
        });
        return f;
    }

    /** A verb's future that ends its issuing thread's wave when that thread waits for it. */
    private static final class Waved<T> extends CompletableFuture<T> {
        private final long wave;

        Waved(long wave) {
            this.wave = wave;
        }

        private void awaited() {
            Counts c = COUNTS.get();
            if (c.wave == wave) {
                c.wave++;
            }
        }

        @Override
        public T get() throws InterruptedException, ExecutionException {
            awaited();
            return super.get();
        }

        @Override
        public T get(long timeout, TimeUnit unit) throws InterruptedException, ExecutionException, TimeoutException {
            awaited();
            return super.get(timeout, unit);
        }

        @Override
        public T join() {
            awaited();
            return super.join();
        }
    }

    private final class Counting implements Connection {
        private final Connection c;

        Counting(Connection c) {
            this.c = c;
        }

        @Override
        public PeerInfo peer() {
            return c.peer();
        }

        @Override
        public CompletableFuture<byte[]> read(long ptr, long remoteKey, int length) {
            java.util.function.LongPredicate filter = countReadsOf;
            return counted(c.read(ptr, remoteKey, length), filter == null || filter.test(ptr));
        }

        @Override
        public CompletableFuture<Void> write(long ptr, long remoteKey, byte[] src, int offset, int length) {
            int max = refuseWritesOver;
            if (length > max) { // as tcp refuses a write longer than its frames, before sending anything
                return CompletableFuture.failedFuture(new io.membus.core.error.BadLengthException(ptr, length, max));
            }
            return counted(c.write(ptr, remoteKey, src, offset, length), false);
        }

        @Override
        public CompletableFuture<Long> compareAndSwap(long ptr, long remoteKey, long expected, long update) {
            CompletableFuture<Long> injected = injectedCasFailure(ptr, expected, update);
            if (injected != null) {
                return injected;
            }
            java.util.function.Predicate<long[]> hold = holdCas;
            if (hold != null && hold.test(new long[] {ptr, expected, update})) {
                CompletableFuture<Long> f = new CompletableFuture<>();
                held.add(() -> c.compareAndSwap(ptr, remoteKey, expected, update).whenComplete((v, e) -> {
                    if (e != null) {
                        f.completeExceptionally(e);
                    } else {
                        f.complete(v);
                    }
                }));
                return counted(f, false);
            }
            return counted(c.compareAndSwap(ptr, remoteKey, expected, update), false);
        }

        @Override
        public CompletableFuture<Long> fetchAndAdd(long ptr, long remoteKey, long delta) {
            return counted(c.fetchAndAdd(ptr, remoteKey, delta), false);
        }

        /** The not-sent timeout {@link #failCas} picks for this CAS, or null. */
        private CompletableFuture<Long> injectedCasFailure(long ptr, long expected, long update) {
            java.util.function.Predicate<long[]> fault = failCas;
            if (fault != null && fault.test(new long[] {ptr, expected, update})) {
                return CompletableFuture.failedFuture(io.membus.core.error.DsmTimeoutException.notSent(
                        "compareAndSwap (injected by the test)", c.peer().nodeId(), java.time.Duration.ZERO));
            }
            return null;
        }

        @Override
        public CompletableFuture<Void> send(short channel, byte[] payload) {
            return c.send(channel, payload);
        }

        @Override
        public CompletableFuture<byte[]> request(short channel, byte[] payload) {
            return c.request(channel, payload);
        }

        /**
         * A batch whose verbs are issued, in order, through this connection at {@code submit()}:
         * the verbs of one wave (one round trip), counted on the thread that adds them.
         */
        @Override
        public Batch batch() {
            return new Batch() {
                private final java.util.List<Runnable> issue = new java.util.ArrayList<>();

                private <T> CompletableFuture<T> add(java.util.function.Supplier<CompletableFuture<T>> verb) {
                    CompletableFuture<T> f = new CompletableFuture<>();
                    issue.add(() -> verb.get().whenComplete((v, e) -> {
                        if (e != null) {
                            f.completeExceptionally(e);
                        } else {
                            f.complete(v);
                        }
                    }));
                    return counted(f, false);
                }

                @Override
                public CompletableFuture<byte[]> read(long ptr, long remoteKey, int length) {
                    return add(() -> c.read(ptr, remoteKey, length));
                }

                @Override
                public CompletableFuture<Void> write(long ptr, long remoteKey, byte[] src, int offset, int length) {
                    return add(() -> c.write(ptr, remoteKey, src, offset, length));
                }

                @Override
                public CompletableFuture<Long> compareAndSwap(long ptr, long remoteKey, long expected, long update) {
                    CompletableFuture<Long> injected = injectedCasFailure(ptr, expected, update);
                    return injected != null ? injected : add(() -> c.compareAndSwap(ptr, remoteKey, expected, update));
                }

                @Override
                public CompletableFuture<Long> fetchAndAdd(long ptr, long remoteKey, long delta) {
                    return add(() -> c.fetchAndAdd(ptr, remoteKey, delta));
                }

                /**
                 * Issues the verbs; their wave ends here (the futures a caller awaits are the
                 * batch layer's own, which this transport does not see: its callers await a
                 * batch before they issue more).
                 */
                @Override
                public void submit() {
                    issue.forEach(Runnable::run);
                    issue.clear();
                    COUNTS.get().wave++;
                }

                @Override
                public int size() {
                    return issue.size();
                }
            };
        }

        @Override
        public boolean isOpen() {
            return c.isOpen();
        }

        @Override
        public void close() {
            c.close();
        }

        @Override
        public void close(String reason) {
            c.close(reason);
        }
    }

    @Override
    public CompletableFuture<Connection> connect(PeerInfo peer) {
        CompletableFuture<Connection> f = delegate.connect(peer);
        if (f.isDone() && !f.isCompletedExceptionally()) {
            return CompletableFuture.completedFuture(wrapped.computeIfAbsent(f.join(), Counting::new));
        }
        return f.thenApply(c -> wrapped.computeIfAbsent(c, Counting::new));
    }

    @Override
    public boolean localAtomicsCoherent() {
        return false;
    }

    @Override
    public String name() {
        return delegate.name();
    }

    @Override
    public io.membus.core.capability.TransportCapabilities capabilities() {
        return delegate.capabilities();
    }

    @Override
    public int nodeId() {
        return delegate.nodeId();
    }

    @Override
    public long incarnation() {
        return delegate.incarnation();
    }

    @Override
    public String localAddress() {
        return delegate.localAddress();
    }

    @Override
    public Segment export(SegmentSpec spec) {
        return delegate.export(spec);
    }

    @Override
    public boolean unexport(int index, boolean keepFile) {
        return delegate.unexport(index, keepFile);
    }

    @Override
    public Collection<Segment> segments() {
        return delegate.segments();
    }

    @Override
    public void fence(int nodeId, String reason) {
        delegate.fence(nodeId, reason);
    }

    @Override
    public void unfence(int nodeId) {
        delegate.unfence(nodeId);
    }

    @Override
    public boolean isFenced(int nodeId) {
        return delegate.isFenced(nodeId);
    }

    @Override
    public SegmentTable table() {
        return delegate.table();
    }

    @Override
    public MessageEndpoint messages() {
        return delegate.messages();
    }

    @Override
    public FaultInjector faults() {
        return delegate.faults();
    }

    @Override
    public void close() {
        delegate.close();
    }
}
