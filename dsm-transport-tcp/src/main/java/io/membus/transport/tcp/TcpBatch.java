package io.membus.transport.tcp;

import io.membus.core.transport.Batch;
import io.membus.core.transport.VerbObserver;
import io.membus.core.transport.Verbs;
import io.membus.core.transport.pipeline.Verb;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * A batch of a {@link TcpConnection}: verbs kept until {@link #submit()}, then issued
 * together ({@link TcpConnection#submit(List)}): one wake-up of the I/O thread, one flush.
 *
 * <p><b>Note:</b> not thread-safe: one thread builds and submits a batch (the
 * {@link Batch} contract); the verbs' futures complete as any other verb's.
 */
final class TcpBatch implements Batch {
    private final TcpConnection connection;
    private final List<Verb> verbs = new ArrayList<>();
    private boolean submitted;

    TcpBatch(TcpConnection connection) {
        this.connection = connection;
    }

    @Override
    public CompletableFuture<byte[]> read(long ptr, long remoteKey, int length) {
        return add(new Verb(VerbObserver.READ, ptr, remoteKey, length, 0, 0, null, 0));
    }

    @Override
    public CompletableFuture<Void> write(long ptr, long remoteKey, byte[] src, int offset, int length) {
        IllegalArgumentException badRange = Verbs.sourceRangeError(src, offset, length);
        if (badRange != null) {
            return CompletableFuture.failedFuture(badRange);
        }
        return add(new Verb(VerbObserver.WRITE, ptr, remoteKey, length, 0, 0,
                java.util.Arrays.copyOfRange(src, offset, offset + length), 0));
    }

    @Override
    public CompletableFuture<Long> compareAndSwap(long ptr, long remoteKey, long expected, long update) {
        return add(new Verb(VerbObserver.CAS, ptr, remoteKey, 8, expected, update, null, 0));
    }

    @Override
    public CompletableFuture<Long> fetchAndAdd(long ptr, long remoteKey, long delta) {
        return add(new Verb(VerbObserver.FAA, ptr, remoteKey, 8, delta, 0, null, 0));
    }

    private <T> CompletableFuture<T> add(Verb v) {
        if (submitted) {
            throw new IllegalStateException("batch already submitted: start a new batch");
        }
        verbs.add(v);
        return v.future();
    }

    @Override
    public void submit() {
        if (submitted) {
            throw new IllegalStateException("batch already submitted: start a new batch");
        }
        submitted = true;
        connection.submit(verbs);
        verbs.clear();
    }

    @Override
    public int size() {
        return submitted ? 0 : verbs.size();
    }
}
