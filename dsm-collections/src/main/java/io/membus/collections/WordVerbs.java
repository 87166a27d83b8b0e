package io.membus.collections;

import io.membus.core.RemoteMemory;

/**
 * Word operations shared by the counters, arrays, queue and lock: how to store a
 * word that other nodes change with atomics. Where the transport promises that a
 * plain write lands whole against atomics on the same word
 * ({@link io.membus.core.capability.TransportCapabilities#plainWritesAtomicWithAtomics()}:
 * {@code local}, {@code shm}, {@code tcp}) a store is one write; where it does not
 * ({@code rdma}: InfiniBand atomics are atomic only among atomics) a store is a CAS loop.
 *
 * <p><b>Note:</b> thread-safe; each method is one or more verbs with the ordering
 * of {@link io.membus.core.transport.Verbs}.
 */
final class WordVerbs {
    private final RemoteMemory memory;
    private final boolean plainWriteAtomic;

    WordVerbs(RemoteMemory memory) {
        this.memory = memory;
        this.plainWriteAtomic = memory.capabilities().plainWritesAtomicWithAtomics();
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
