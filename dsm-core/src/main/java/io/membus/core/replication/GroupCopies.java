package io.membus.core.replication;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;

/**
 * The copies of one {@link ReplicaGroup} as its primary tracks them: on which node, through
 * which {@link CopyStream}, what each acknowledged, whether it is in sync, and how far a
 * joining copy's chunks went. It answers what the group asks of the set: a copy by node, the
 * in-sync minimum (the watermark's candidate), the node lists, and the streams a change
 * appends to.
 *
 * <p><b>Note:</b> not thread-safe by itself: every method but {@link #streams()} is called
 * under the owning group's lock. {@link #streams()} is a volatile read of an array rebuilt
 * under that lock whenever the set changes, so a change reads the streams without locking
 * and sees a whole array.
 */
final class GroupCopies implements Iterable<GroupCopies.Copy> {
    private final List<Copy> copies = new ArrayList<>();
    /** The copies' streams, rebuilt under the lock when the copy set changes: what a change reads without locking. */
    private volatile CopyStream[] streams = new CopyStream[0];

    /** One copy of the group, as the primary tracks it (guarded by the group lock). */
    static final class Copy {
        final int node;
        final CopyStream stream;
        long applied;
        boolean inSync;
        /** Joining: bytes of the memory sent as chunks; effects below it are forwarded. */
        long cursor;
        /** Joining: the sequence of the DONE record, or -1 before it is sent. */
        long doneSeq = -1;

        Copy(int node, CopyStream stream) {
            this.node = node;
            this.stream = stream;
        }
    }

    /** The copies' streams (no lock needed: see the class comment). */
    CopyStream[] streams() {
        return streams;
    }

    boolean isEmpty() {
        return copies.isEmpty();
    }

    @Override
    public Iterator<Copy> iterator() {
        return copies.iterator();
    }

    void add(Copy c) {
        copies.add(c);
        copiesChanged();
    }

    void remove(Copy c) {
        copies.remove(c);
        copiesChanged();
    }

    /** Rebuilds {@link #streams} (under the lock, after the copy set changed). */
    private void copiesChanged() {
        CopyStream[] s = new CopyStream[copies.size()];
        for (int i = 0; i < s.length; i++) {
            s[i] = copies.get(i).stream;
        }
        streams = s;
    }

    /** The copy on {@code node}, or null. */
    Copy find(int node) {
        for (Copy c : copies) {
            if (c.node == node) {
                return c;
            }
        }
        return null;
    }

    /** The least applied sequence of the in-sync copies, or {@code Long.MAX_VALUE} with none in sync. */
    long minInSyncApplied() {
        long min = Long.MAX_VALUE;
        for (Copy c : copies) {
            if (c.inSync) {
                min = Math.min(min, c.applied);
            }
        }
        return min;
    }

    /** The in-sync copies' node ids, in the order they became in sync. */
    int[] inSync() {
        return copies.stream().filter(c -> c.inSync).mapToInt(c -> c.node).toArray();
    }

    /** The joining copies' node ids. */
    int[] joining() {
        return copies.stream().filter(c -> !c.inSync).mapToInt(c -> c.node).toArray();
    }

    /** Every copy's node (in sync and joining). */
    int[] holders() {
        return copies.stream().mapToInt(c -> c.node).toArray();
    }

    /** Each copy's node, applied sequence and sync state (diagnostics). */
    void describe(StringBuilder b) {
        for (Copy c : copies) {
            b.append(" copy{node=").append(c.node).append(", applied=").append(c.applied).append(", inSync=")
                    .append(c.inSync).append('}');
        }
    }
}
