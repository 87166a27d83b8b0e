package io.membus.core.replication;

import java.util.Collection;

/**
 * Where a replica group's next copy goes: the live memory node, other than the primary
 * and the group's current holders, with the highest rendezvous score
 * {@code hash(group, node)}. Rendezvous hashing spreads a node's groups evenly over the
 * others and moves only the groups of a node that comes or goes.
 *
 * <p><b>Note:</b> static helpers only; thread-safe.
 */
public final class GroupPlacement {
    private GroupPlacement() {
    }

    /** The rendezvous score of {@code node} for {@code group}: a 64-bit mix of both. */
    public static long score(int group, int node) {
        long z = ((long) group << 20) ^ node ^ 0x9E3779B97F4A7C15L;
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }

    /**
     * The best target for a new copy of {@code group}, or 0 when no candidate is left.
     *
     * @param candidates live memory nodes
     * @param exclude    the primary and the nodes holding a copy (in sync or joining)
     */
    public static int target(int group, Collection<Integer> candidates, int... exclude) {
        int best = 0;
        long bestScore = 0;
        outer:
        for (int n : candidates) {
            for (int e : exclude) {
                if (e == n) {
                    continue outer;
                }
            }
            long s = score(group, n);
            if (best == 0 || Long.compareUnsigned(s, bestScore) > 0) {
                best = n;
                bestScore = s;
            }
        }
        return best;
    }
}
