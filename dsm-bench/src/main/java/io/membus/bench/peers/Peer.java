package io.membus.bench.peers;

/**
 * One system measured by {@link PeersBenchmark}: started per trial, reached by each benchmark
 * thread through a {@link Conn} of its own (a connection for Redis and the floor; the shared,
 * thread-safe handles for Membus and Hazelcast), closed at the trial's end.
 *
 * <p><b>Note:</b> {@link #connect()} and {@link #close()} are called by JMH's setup and
 * teardown threads, never concurrently with each other; a {@link Conn} is used by one
 * benchmark thread at a time. The happens-before between a thread's operations and the
 * trial's checks is JMH's (its iteration barriers) and each system's own (a completed
 * operation is visible to every later one of every client).
 */
interface Peer extends AutoCloseable {
    /** A map of {@code Long} keys to 64-byte values, a counter and a queue of 64-byte elements, as a client sees them. */
    interface Conn extends AutoCloseable {
        /** The value of {@code key} (null when absent). */
        byte[] get(long key);

        /** Writes {@code value} under {@code key} (its previous value is returned where the API does so). */
        Object set(long key, byte[] value);

        /** Adds one to the counter; returns the new value. */
        long increment();

        /** Appends {@code element} to the queue (at its tail). */
        void offer(byte[] element);

        /** Takes the queue's head, or null when it is empty. */
        byte[] poll();

        /** The counter's value (for the trial's check). */
        long counter();

        @Override
        void close();
    }

    /** A short description for the run's log: the system, its version, its topology. */
    String describe();

    /** Whether the operations' results can be checked (false for the floor, which stores nothing). */
    default boolean stores() {
        return true;
    }

    /** Starts the counts {@link #counts()} reports (after the trial's fill); nothing for most peers. */
    default void markCounts() {
    }

    /**
     * What the peer counted of its own work since {@link #markCounts()} (Membus: its allocator's
     * refills and frees, the map's entries waiting for reclamation), for the run's log; {@code null}
     * when it counts nothing.
     */
    default String counts() {
        return null;
    }

    /** A connection (or handle) for one benchmark thread. */
    Conn connect();

    @Override
    void close();
}
