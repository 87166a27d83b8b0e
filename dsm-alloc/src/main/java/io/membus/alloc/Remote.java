package io.membus.alloc;

import io.membus.core.RemoteMemory;
import io.membus.core.Words;

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
}
