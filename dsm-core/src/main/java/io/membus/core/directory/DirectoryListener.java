package io.membus.core.directory;

import io.membus.core.SegmentDescriptor;
import io.membus.core.transport.PeerInfo;

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
}
