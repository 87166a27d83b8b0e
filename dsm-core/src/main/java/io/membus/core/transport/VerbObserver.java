package io.membus.core.transport;

/**
 * What a transport's verbs did, reported to metrics. A transport calls its
 * observer ({@link AbstractTransport#observer()}) once for each verb's outcome
 * and once for each reconnect; the node installs one that counts (see the
 * metrics of {@code membus status}).
 *
 * <p>Kinds are {@link #READ}, {@link #WRITE}, {@link #CAS} and {@link #FAA};
 * {@code bytes} is the verb's payload length (8 for the atomics).
 *
 * <p><b>Note:</b> implementations must be thread-safe, cheap and non-blocking:
 * they run on the threads that complete verbs (callers, I/O and completion
 * threads). {@link #NONE} does nothing and costs nothing.
 */
public interface VerbObserver {
    int READ = 0;
    int WRITE = 1;
    int CAS = 2;
    int FAA = 3;

    /** Observes nothing. */
    VerbObserver NONE = new VerbObserver() {
    };

    /** A verb to {@code peer} completed with its result {@code latencyNanos} after it was issued. */
    default void completed(int peer, int kind, int bytes, long latencyNanos) {
    }

    /** A verb to {@code peer} failed with its deadline (it may have run). */
    default void timedOut(int peer, int kind) {
    }

    /** A verb to {@code peer} failed with an error (refused by the target, or the connection was lost). */
    default void failed(int peer, int kind) {
    }

    /** A connection to {@code peer} came back after it was lost. */
    default void reconnected(int peer) {
    }

    /** The short name of a verb kind, for metric tags. */
    static String kindName(int kind) {
        return switch (kind) {
            case READ -> "read";
            case WRITE -> "write";
            case CAS -> "cas";
            case FAA -> "faa";
            default -> throw new IllegalArgumentException("kind=" + kind + " is not a verb kind");
        };
    }
}
