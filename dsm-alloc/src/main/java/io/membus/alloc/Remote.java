package io.membus.alloc;

import io.membus.core.RemoteMemory;
import io.membus.core.Words;
import io.membus.core.error.DsmException;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.BiFunction;

/**
 * The synchronous verbs the allocator uses, on {@link RemoteMemory} (which rethrows
 * every failure as its typed {@link io.membus.core.error.DsmException} and bounds
 * every wait by the operation deadline). Each call waits for its verb, so the
 * allocator never has two verbs in flight and never depends on their order.
 *
 * <p>Not final so that tests can inject a verb that executes and then reports a
 * timeout (the outcome a deadline leaves unknown).
 *
 * <p>It also carries the allocator's background executor ({@link #ahead}), so that every
 * {@link ClassPool} reached through it can hand a refill ahead of need to the allocator's
 * threads.
 *
 * <p><b>Note:</b> stateless apart from the memory and the executor; thread-safe
 * ({@link #ahead} is volatile: set once by the allocator, read by its pools).
 */
class Remote {
    private final RemoteMemory memory;
    /** Runs a size class's refill ahead of need; false when it ran nothing. Null: no refill ahead. */
    volatile java.util.function.Predicate<Runnable> ahead;

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
     * The verbs {@code verb(batch, i)} for {@code i < n}, added to one {@link RemoteMemory#batch()}
     * (one batch per node, on the pipelined path), submitted together and each awaited: the
     * results, with a failed verb's entry null and its typed failure in {@code errors[i]}.
     */
    private <T> List<T> all(int n, BiFunction<RemoteMemory.RemoteBatch, Integer, CompletableFuture<T>> verb,
                            DsmException[] errors) {
        RemoteMemory.RemoteBatch batch = memory.batch();
        List<CompletableFuture<T>> fs = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            fs.add(verb.apply(batch, i));
        }
        batch.submit();
        List<T> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            try {
                out.add(memory.await(fs.get(i)));
            } catch (DsmException e) {
                errors[i] = e;
                out.add(null);
            }
        }
        return out;
    }

    /**
     * The CASes {@code ptrs[i]: expected[i] -> updates[i]} for {@code i < n}, issued together
     * ({@link #all}) and each awaited: its witness in the result, or its typed failure in
     * {@code errors[i]} (then the result's entry is meaningless). Used by the batched free
     * ({@link GlobalAllocator#freeAll}), whose CASes are independent of each other.
     */
    long[] compareAndSwapAll(long[] ptrs, long[] expected, long[] updates, int n, DsmException[] errors) {
        List<Long> w = all(n, (b, i) -> b.compareAndSwap(ptrs[i], expected[i], updates[i]), errors);
        long[] witnesses = new long[n];
        for (int i = 0; i < n; i++) {
            witnesses[i] = w.get(i) == null ? 0 : w.get(i);
        }
        return witnesses;
    }

    /** The fetch-and-adds {@code ptrs[i] += deltas[i]} for {@code i < n}, issued together ({@link #all}); failures in {@code errors[i]}. */
    void fetchAndAddAll(long[] ptrs, long[] deltas, int n, DsmException[] errors) {
        all(n, (b, i) -> b.fetchAndAdd(ptrs[i], deltas[i]), errors);
    }

    /** Reads {@code length} bytes at each of {@code ptrs[0..n)}, issued together ({@link #all}): null and {@code errors[i]} for a failure. */
    byte[][] readAll(long[] ptrs, int length, int n, DsmException[] errors) {
        return all(n, (b, i) -> b.read(ptrs[i], length), errors).toArray(new byte[0][]);
    }

    /**
     * Writes the little-endian word {@code values[i]} at {@code ptrs[i]} for {@code i < n}, issued
     * together ({@link #all}) and all awaited; throws the first failure once every write ended.
     */
    void writeLongs(long[] ptrs, long[] values, int n) {
        DsmException[] errors = new DsmException[n];
        all(n, (b, i) -> {
            byte[] w = new byte[Long.BYTES];
            Words.putLong(w, 0, values[i]);
            return b.write(ptrs[i], w, 0, w.length);
        }, errors);
        for (DsmException e : errors) {
            if (e != null) {
                throw e;
            }
        }
    }
}
