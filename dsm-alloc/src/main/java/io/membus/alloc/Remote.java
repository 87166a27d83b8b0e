package io.membus.alloc;

import io.membus.core.RemoteMemory;
import io.membus.core.Words;
import io.membus.core.error.DsmException;

import java.util.concurrent.CompletableFuture;

/**
 * The synchronous verbs the allocator uses, on {@link RemoteMemory} (which rethrows
 * every failure as its typed {@link io.membus.core.error.DsmException} and bounds
 * every wait by the operation deadline). Each call waits for its verb, so the
 * allocator never has two verbs in flight and never depends on their order.
 *
 * <p>Not final so that tests can inject a verb that executes and then reports a
 * timeout (the outcome a deadline leaves unknown).
 *
 * <p><b>Note:</b> stateless apart from the memory; thread-safe.
 */
class Remote {
    private final RemoteMemory memory;

    Remote(RemoteMemory memory) {
        this.memory = memory;
    }

    byte[] read(long ptr, int length) {
        return memory.read(ptr, length);
    }

    long readLong(long ptr) {
        return Words.getLong(read(ptr, Long.BYTES), 0);
    }

    void write(long ptr, byte[] src) {
        memory.write(ptr, src);
    }

    void writeLong(long ptr, long value) {
        byte[] b = new byte[Long.BYTES];
        Words.putLong(b, 0, value);
        write(ptr, b);
    }

    long compareAndSwap(long ptr, long expected, long update) {
        return memory.compareAndSwap(ptr, expected, update);
    }

    long fetchAndAdd(long ptr, long delta) {
        return memory.fetchAndAdd(ptr, delta);
    }

    /**
     * {@link #readLong} on the pipelined path ({@link RemoteMemory#readAsync}, awaited): no
     * blocking lane of a connection is taken. For the batched free's verbs, which run on a
     * freeing thread beside callers that want the lanes.
     */
    long readLongPosted(long ptr) {
        return Words.getLong(memory.await(memory.readAsync(ptr, Long.BYTES)), 0);
    }

    /** {@link #compareAndSwap} on the pipelined path (see {@link #readLongPosted}). */
    long compareAndSwapPosted(long ptr, long expected, long update) {
        return memory.await(memory.compareAndSwapAsync(ptr, expected, update));
    }

    /** {@link #fetchAndAdd} on the pipelined path (see {@link #readLongPosted}). */
    long fetchAndAddPosted(long ptr, long delta) {
        return memory.await(memory.fetchAndAddAsync(ptr, delta));
    }

    /**
     * The CASes {@code ptrs[i]: expected[i] -> updates[i]} for {@code i < n}, issued together
     * ({@link RemoteMemory#batch()}: one batch per node, on the pipelined path) and each awaited:
     * its witness in the result, or its typed failure in {@code errors[i]} (then the result's
     * entry is meaningless). Used by the batched free ({@link GlobalAllocator#freeAll}), whose
     * CASes are independent of each other.
     */
    long[] compareAndSwapAll(long[] ptrs, long[] expected, long[] updates, int n, DsmException[] errors) {
        RemoteMemory.RemoteBatch batch = memory.batch();
        @SuppressWarnings("unchecked")
        CompletableFuture<Long>[] fs = new CompletableFuture[n];
        for (int i = 0; i < n; i++) {
            fs[i] = batch.compareAndSwap(ptrs[i], expected[i], updates[i]);
        }
        batch.submit();
        long[] witnesses = new long[n];
        for (int i = 0; i < n; i++) {
            try {
                witnesses[i] = memory.await(fs[i]);
            } catch (DsmException e) {
                errors[i] = e;
            }
        }
        return witnesses;
    }

    /**
     * The fetch-and-adds {@code ptrs[i] += deltas[i]} for {@code i < n}, issued together (one batch
     * per node) and each awaited; their failures in {@code errors[i]}.
     */
    void fetchAndAddAll(long[] ptrs, long[] deltas, int n, DsmException[] errors) {
        RemoteMemory.RemoteBatch batch = memory.batch();
        @SuppressWarnings("unchecked")
        CompletableFuture<Long>[] fs = new CompletableFuture[n];
        for (int i = 0; i < n; i++) {
            fs[i] = batch.fetchAndAdd(ptrs[i], deltas[i]);
        }
        batch.submit();
        for (int i = 0; i < n; i++) {
            try {
                memory.await(fs[i]);
            } catch (DsmException e) {
                errors[i] = e;
            }
        }
    }

    /**
     * Reads {@code length} bytes at each of {@code ptrs[0..n)}, issued together (one batch per
     * node) and each awaited: the bytes, or null with the typed failure in {@code errors[i]}.
     */
    byte[][] readAll(long[] ptrs, int length, int n, DsmException[] errors) {
        RemoteMemory.RemoteBatch batch = memory.batch();
        @SuppressWarnings("unchecked")
        CompletableFuture<byte[]>[] fs = new CompletableFuture[n];
        for (int i = 0; i < n; i++) {
            fs[i] = batch.read(ptrs[i], length);
        }
        batch.submit();
        byte[][] out = new byte[n][];
        for (int i = 0; i < n; i++) {
            try {
                out[i] = memory.await(fs[i]);
            } catch (DsmException e) {
                errors[i] = e;
            }
        }
        return out;
    }

    /**
     * Writes the little-endian word {@code values[i]} at {@code ptrs[i]} for {@code i < n}, issued
     * together (one batch per node) and all awaited; throws the first failure once every write ended.
     */
    void writeLongs(long[] ptrs, long[] values, int n) {
        RemoteMemory.RemoteBatch batch = memory.batch();
        @SuppressWarnings("unchecked")
        CompletableFuture<Void>[] fs = new CompletableFuture[n];
        for (int i = 0; i < n; i++) {
            byte[] b = new byte[Long.BYTES];
            Words.putLong(b, 0, values[i]);
            fs[i] = batch.write(ptrs[i], b, 0, b.length);
        }
        batch.submit();
        DsmException first = null;
        for (int i = 0; i < n; i++) {
            try {
                memory.await(fs[i]);
            } catch (DsmException e) {
                first = first == null ? e : first;
            }
        }
        if (first != null) {
            throw first;
        }
    }
}
