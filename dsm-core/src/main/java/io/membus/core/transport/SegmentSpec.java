package io.membus.core.transport;

import io.membus.core.Access;
import io.membus.core.RemotePtr;

import java.nio.file.Path;

/**
 * What segment to export.
 *
 * @param index segment index on this node (0..255)
 * @param size  bytes in the data area
 * @param flags {@link Access} flags for remote peers
 * @param file  backing file for persistence, or {@code null} for the transport's default
 *              (native memory; for {@code shm}, a file in its shared directory)
 *
 * <p><b>Note:</b> immutable value; thread-safe.
 */
public record SegmentSpec(int index, long size, int flags, Path file) {
    public SegmentSpec {
        if (index < 0 || index > RemotePtr.MAX_SEGMENT_INDEX) {
            throw new IllegalArgumentException("segment index out of range: index=" + index + ", allowed=0.."
                    + RemotePtr.MAX_SEGMENT_INDEX);
        }
        if (size <= 0 || size - 1 > RemotePtr.MAX_OFFSET) {
            throw new IllegalArgumentException("segment size out of range: size=" + size);
        }
        Access.validate(flags);
    }

    public static SegmentSpec of(int index, long size) {
        return new SegmentSpec(index, size, Access.ALL, null);
    }
}
