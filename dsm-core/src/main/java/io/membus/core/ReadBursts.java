package io.membus.core;

import io.membus.core.error.BadLengthException;
import io.membus.core.error.DsmException;
import io.membus.core.error.NotPrimaryException;
import io.membus.core.error.UnknownSegmentException;
import io.membus.core.error.WrongRemoteKeyException;
import io.membus.core.transport.BlockingVerbs;
import io.membus.core.transport.SegmentTable;

import java.util.concurrent.CompletableFuture;

/**
 * {@link RemoteMemory#readEach}: many reads grouped by the node that serves them (with
 * replication, each pointer's replica group's primary, {@link GroupRouter#route}), each
 * node's reads run as one burst on the caller's thread where a path offers blocking verbs
 * ({@link BlockingVerbs#readEach}: a memory path reads them one after the other, a tcp lane
 * sends them in one write and reads the answers itself), every other node's posted as one
 * {@link RemoteMemory.RemoteBatch} (one flush per node) and awaited. The posted ones are
 * submitted first, so their round trips overlap the bursts run on this thread. One
 * deadline covers the call.
 *
 * <p><b>Note:</b> thread-safe (no state of its own; {@link BlockingPath}'s caches are).
 * Ordering: a burst runs its reads in array order at its node; posted reads of one node
 * run in issue order on its connection, except a read re-issued after a
 * {@link NotPrimaryException} (replication), which may run after the reads issued after it.
 */
record ReadBursts(RemoteMemory memory, GroupRouter router, BlockingPath blocking) {

    void readEach(long[] ptrs, byte[][] dsts) {
        if (ptrs.length != dsts.length) {
            throw new IllegalArgumentException("ptrs.length=" + ptrs.length + " but dsts.length=" + dsts.length
                    + ": pass one destination per pointer");
        }
        int n = ptrs.length;
        for (int i = 0; i < n; i++) { // refused before anything is sent
            if (dsts[i] == null) {
                throw new IllegalArgumentException("dsts[" + i + "] is null: pass one destination array per pointer");
            }
            BadLengthException bad = SegmentTable.lengthError(ptrs[i], dsts[i].length);
            if (bad != null) {
                throw bad;
            }
        }
        if (n == 0) {
            return;
        }
        long timeoutNanos = memory.operationTimeout().toNanos();
        long scope = OperationDeadline.enterNanos(timeoutNanos); // every burst and every posted read: one deadline
        try {
            run(ptrs, dsts, OperationDeadline.until(System.nanoTime(), timeoutNanos));
        } finally {
            OperationDeadline.exit(scope);
        }
    }

    private void run(long[] ptrs, byte[][] dsts, long until) {
        int n = ptrs.length;
        int first = router.route(ptrs[0]);
        boolean oneNode = first != GroupRouter.HELD;
        for (int i = 1; i < n && oneNode; i++) {
            oneNode = router.route(ptrs[i]) == first;
        }
        if (oneNode) { // the common case: one burst, no grouping arrays
            BlockingVerbs path = blocking.direct(ptrs[0]);
            if (path != null) {
                Failure failure = new Failure();
                if (burst(ptrs, dsts, null, 0, true, path, failure)) {
                    failure.throwIfAny();
                    return;
                }
            }
        }
        // group[i]: the index of the first pointer served by the same node (routed now; a lost group throws)
        int[] group = new int[n];
        int[] node = new int[n];
        int[] leaders = new int[n];
        int groups = 0;
        for (int i = 0; i < n; i++) {
            node[i] = router.route(ptrs[i]);
            group[i] = i;
            for (int k = 0; k < groups; k++) { // a cluster's few nodes: a scan of the leaders
                if (node[leaders[k]] == node[i]) {
                    group[i] = leaders[k];
                    break;
                }
            }
            if (group[i] == i) {
                leaders[groups++] = i;
            }
        }
        BlockingVerbs[] direct = new BlockingVerbs[n]; // per group leader: where its burst runs, or null: posted
        boolean anyPosted = false;
        for (int i = 0; i < n; i++) {
            if (group[i] == i) {
                direct[i] = node[i] == GroupRouter.HELD ? null : blocking.direct(ptrs[i]);
                anyPosted |= direct[i] == null;
            }
        }
        Failure failure = new Failure();
        @SuppressWarnings("unchecked")
        CompletableFuture<byte[]>[] posted = new CompletableFuture[n];
        if (anyPosted) {
            post(ptrs, dsts, group, direct, posted, null);
        }
        for (int g = 0; g < n; g++) {
            if (group[g] != g || direct[g] == null) {
                continue;
            }
            if (!burst(ptrs, dsts, group, g, groups == 1, direct[g], failure)) { // refused before any effect: posted
                boolean[] only = new boolean[n];
                only[g] = true;
                post(ptrs, dsts, group, direct, posted, only);
            }
        }
        for (int i = 0; i < n; i++) {
            if (posted[i] == null) {
                continue;
            }
            try {
                byte[] b = blocking.awaitUntil(posted[i], until);
                System.arraycopy(b, 0, dsts[i], 0, dsts[i].length);
            } catch (DsmException e) {
                failure.offer(group[i], e);
            }
        }
        failure.throwIfAny();
    }

    /**
     * Runs group {@code g}'s reads as one burst on {@code path}; false when the path refused
     * them before any effect with a stale key or a group that moved (they are to be posted).
     */
    private boolean burst(long[] ptrs, byte[][] dsts, int[] group, int g, boolean whole, BlockingVerbs path,
                          Failure failure) {
        int n = ptrs.length;
        long[] p = whole ? ptrs : new long[n];
        byte[][] d = whole ? dsts : new byte[n][];
        long[] keys = new long[n];
        int count = 0;
        try {
            for (int i = g; i < n; i++) {
                if (whole || group[i] == g) {
                    p[count] = ptrs[i];
                    d[count] = dsts[i];
                    keys[count] = blocking.directKey(ptrs[i]); // an unknown segment is refused here, typed
                    count++;
                }
            }
            path.readEach(p, keys, d, count);
            for (int i = 0; i < count; i++) {
                blocking.awaitGate(path, p[i]);
            }
            return true;
        } catch (WrongRemoteKeyException | UnknownSegmentException | NotPrimaryException e) {
            for (int i = 0; i < count; i++) {
                blocking.forgetKey(p[i]);
            }
            return false;
        } catch (DsmException e) {
            failure.offer(g, e);
            return true;
        }
    }

    /** Posts the reads of every group with no direct path ({@code only}: of those groups instead), one batch. */
    private void post(long[] ptrs, byte[][] dsts, int[] group, BlockingVerbs[] direct,
                      CompletableFuture<byte[]>[] posted, boolean[] only) {
        RemoteMemory.RemoteBatch batch = memory.batch();
        for (int i = 0; i < ptrs.length; i++) {
            int g = group[i];
            if (only == null ? direct[g] == null : only[g]) {
                posted[i] = batch.read(ptrs[i], dsts[i].length);
            }
        }
        batch.submit();
    }

    /**
     * The failure to throw: of the group whose first pointer comes first; within a group, the
     * first one seen (a burst's lowest index, the posted reads' lowest index).
     *
     * <p><b>Note:</b> not thread-safe: one call's thread.
     */
    private static final class Failure {
        private int group = Integer.MAX_VALUE;
        private DsmException failure;

        void offer(int g, DsmException e) {
            if (g < group) {
                group = g;
                failure = e;
            }
        }

        void throwIfAny() {
            if (failure != null) {
                throw failure;
            }
        }
    }
}
