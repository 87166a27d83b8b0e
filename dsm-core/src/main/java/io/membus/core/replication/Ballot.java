package io.membus.core.replication;

/**
 * A replica group's epoch: a 64-bit ballot {@code round << 16 | coordinator}, where the
 * coordinator is the node id that made the configuration. Two coordinators never mint
 * the same ballot, and ballots are totally ordered as {@code long}s (a higher round wins;
 * within a round, the higher node id). A group starts at {@link #initial(int)} of its
 * exporting node; every move of its primary goes to a higher round.
 *
 * <p><b>Note:</b> static helpers only; thread-safe.
 */
public final class Ballot {
    /** No epoch: a group not held. Lower than every real ballot. */
    public static final long NONE = 0;

    private Ballot() {
    }

    public static long of(long round, int coordinator) {
        if (round < 1 || round > (Long.MAX_VALUE >>> 16)) {
            throw new IllegalArgumentException("ballot round out of range: " + round);
        }
        if (coordinator < 1 || coordinator > 0xFFFF) {
            throw new IllegalArgumentException("ballot coordinator out of range: " + coordinator);
        }
        return round << 16 | coordinator;
    }

    /** The first epoch of a group exported by {@code node}. */
    public static long initial(int node) {
        return of(1, node);
    }

    public static long round(long ballot) {
        return ballot >>> 16;
    }

    public static int coordinator(long ballot) {
        return (int) (ballot & 0xFFFF);
    }

    /** The smallest ballot of coordinator {@code node} above every ballot in {@code seen}. */
    public static long next(long highestSeen, int node) {
        return of(round(highestSeen) + 1, node);
    }

    /** {@code round.coordinator}, as logs and {@code membus status} print an epoch; {@code -} for {@link #NONE}. */
    public static String toString(long ballot) {
        return ballot == NONE ? "-" : round(ballot) + "." + coordinator(ballot);
    }
}
