package io.membus.collections;

import io.membus.core.RemoteMemory;

import java.util.Set;

/**
 * Word operations shared by the counters, arrays, queue and lock: how to store a
 * word that other nodes change with atomics. The verbs' contract makes a plain
 * write atomic against atomics on {@code local}, {@code shm} and {@code tcp}, but
 * not on {@code rdma} (InfiniBand atomics are atomic only among atomics), so there
 * a store is a CAS loop.
 *
 * <p><b>Note:</b> thread-safe; each method is one or more verbs with the ordering
 * of {@link io.membus.core.transport.Verbs}.
 */
final class WordVerbs {
    /** Transports whose plain 8-byte aligned write lands whole against atomics on the same word. */
    private static final Set<String> PLAIN_WRITE_ATOMIC = Set.of("local", "shm", "tcp");

    private final RemoteMemory memory;
    private final boolean plainWriteAtomic;

    WordVerbs(RemoteMemory memory) {
        this.memory = memory;
        this.plainWriteAtomic = PLAIN_WRITE_ATOMIC.contains(memory.transport().name());
    }

    /** Whether a plain write of a word lands whole against atomics on it (see the class comment). */
    boolean plainWriteAtomic() {
        return plainWriteAtomic;
    }

    RemoteMemory memory() {
        return memory;
    }

    /** Stores {@code value} at {@code ptr}: one write, or a CAS loop where writes race atomics. */
    void store(long ptr, long value) {
        if (plainWriteAtomic) {
            memory.writeLong(ptr, value);
        } else {
            swap(ptr, value);
        }
    }

    /** Stores {@code value} and returns the word it replaced (a CAS loop). */
    long swap(long ptr, long value) {
        long seen = memory.readLong(ptr);
        while (true) {
            long witness = memory.compareAndSwap(ptr, seen, value);
            if (witness == seen) {
                return seen;
            }
            seen = witness;
        }
    }
}
