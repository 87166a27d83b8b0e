package io.membus.core.directory;

import io.membus.core.SegmentDescriptor;
import io.membus.core.directory.PeerInfo;

/**
 * Changes to a {@link SegmentDirectory}. Callbacks must not block.
 *
 * <p><b>Note:</b> called from the directory's own thread(s); implementations must
 * be thread-safe.
 */
public interface DirectoryListener {

    default void memberUp(PeerInfo member) {
    }

    /** The member was downed or left: its segments are gone from the directory. */
    default void memberRemoved(PeerInfo member, String reason) {
    }

    default void segmentAdded(SegmentDescriptor segment) {
    }

    default void segmentRemoved(SegmentDescriptor segment) {
    }

    /**
     * A replica group's view changed (primary, epoch, state, in-sync or joining set).
     *
     * @param before the view before, or {@code null} for a group first seen
     * @param after  the view now, or {@code null} for a group no longer known (unexported)
     */
    default void groupChanged(ReplicaGroupView before, ReplicaGroupView after) {
    }
}
