package io.membus.core.transport;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.Supplier;

/**
 * A {@link Batch} for connections whose verbs cost nothing to post one by one (a
 * direct memory operation, a prepared work request): it keeps the verbs until
 * {@link #submit()} and then issues them on the connection in the order they were
 * added. A write's bytes are copied when it is added, so the caller may reuse its
 * buffer at once. A source range outside the array fails that verb's future with
 * {@link IllegalArgumentException}, as {@link Verbs#write} does.
 *
 * <p><b>Note:</b> not thread-safe, like every {@link Batch}; the futures complete on
 * whatever thread completes the connection's verbs.
 */
public final class DeferredBatch implements Batch {
    private final Verbs connection;
    private final List<Runnable> posts = new ArrayList<>();
    private boolean submitted;

    public DeferredBatch(Verbs connection) {
        this.connection = connection;
    }

    @Override
    public CompletableFuture<byte[]> read(long ptr, long remoteKey, int length) {
        return add(() -> connection.read(ptr, remoteKey, length));
    }

    @Override
    public CompletableFuture<Void> write(long ptr, long remoteKey, byte[] src, int offset, int length) {
        IllegalArgumentException badRange = Verbs.sourceRangeError(src, offset, length);
        if (badRange != null) {
            checkOpen();
            return CompletableFuture.failedFuture(badRange);
        }
        byte[] copy = Arrays.copyOfRange(src, offset, offset + length);
        return add(() -> connection.write(ptr, remoteKey, copy, 0, length));
    }

    @Override
    public CompletableFuture<Long> compareAndSwap(long ptr, long remoteKey, long expected, long update) {
        return add(() -> connection.compareAndSwap(ptr, remoteKey, expected, update));
    }

    @Override
    public CompletableFuture<Long> fetchAndAdd(long ptr, long remoteKey, long delta) {
        return add(() -> connection.fetchAndAdd(ptr, remoteKey, delta));
    }

    private void checkOpen() {
        if (submitted) {
            throw new IllegalStateException("batch already submitted: start a new batch");
        }
    }

    private <T> CompletableFuture<T> add(Supplier<CompletableFuture<T>> post) {
        checkOpen();
        CompletableFuture<T> result = new CompletableFuture<>();
        posts.add(() -> post.get().whenComplete((v, e) -> {
            if (e != null) {
                result.completeExceptionally(e);
            } else {
                result.complete(v);
            }
        }));
        return result;
    }

    @Override
    public void submit() {
        checkOpen();
        submitted = true;
        posts.forEach(Runnable::run);
        posts.clear();
    }

    @Override
    public int size() {
        return submitted ? 0 : posts.size();
    }
}
