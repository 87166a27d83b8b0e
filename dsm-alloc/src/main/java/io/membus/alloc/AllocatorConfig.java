package io.membus.alloc;

import io.membus.core.RemotePtr;
import io.membus.core.error.DsmConfigException;

import java.util.Arrays;

/**
 * Settings of a {@link GlobalAllocator}. Every node of a cluster must use the same
 * {@link Builder#heapSegments heap segment indexes}; the chunk size is read from
 * each segment's header, so the chunk size here only matters to the node that
 * formats its own segments.
 *
 * <pre>{@code
 * AllocatorConfig cfg = AllocatorConfig.builder().heapSegments(1).chunkSize(64 << 10).build();
 * }</pre>
 *
 * <p><b>Note:</b> immutable; thread-safe: every field is final (final-field semantics:
 * any publication makes it visible). The builder is not thread-safe.
 */
public final class AllocatorConfig {
    public static final int DEFAULT_CHUNK_SIZE = 64 << 10;
    public static final int DEFAULT_BATCH_BYTES = 8 << 10;

    private final int[] heapSegments;
    private final int chunkShift;
    private final int batchBytes;
    private final int claimAttempts;
    private final Placement defaultPlacement;
    private final boolean adoptOrphans;
    private final boolean refillAhead;

    private AllocatorConfig(Builder b) {
        this.heapSegments = b.heapSegments.clone();
        this.chunkShift = Integer.numberOfTrailingZeros(b.chunkSize);
        this.batchBytes = b.batchBytes;
        this.claimAttempts = b.claimAttempts;
        this.defaultPlacement = b.defaultPlacement;
        this.adoptOrphans = b.adoptOrphans;
        this.refillAhead = b.refillAhead;
    }

    public static Builder builder() {
        return new Builder();
    }

    /** The segment indexes that are heaps, on every node. */
    public int[] heapSegments() {
        return heapSegments.clone();
    }

    boolean isHeapSegment(int index) {
        for (int s : heapSegments) {
            if (s == index) {
                return true;
            }
        }
        return false;
    }

    public int chunkSize() {
        return 1 << chunkShift;
    }

    public int chunkShift() {
        return chunkShift;
    }

    /** Bytes of blocks a node carves from a chunk with one fetch-and-add (at least one block, at most 64). */
    public int batchBytes() {
        return batchBytes;
    }

    /** How often a contended large-object claim is retried before the heap counts as full. */
    public int claimAttempts() {
        return claimAttempts;
    }

    public Placement defaultPlacement() {
        return defaultPlacement;
    }

    /** Whether chunks of a member that left are adopted automatically (in the background). */
    public boolean adoptOrphans() {
        return adoptOrphans;
    }

    /**
     * Whether a size class's cache is refilled ahead of need on the allocator's threads: an
     * allocation that leaves less than two batches cached hands a carve from a chunk this node
     * already owns (or the free lists of its chunks) to them, so callers rarely find the cache
     * empty; claiming a new chunk stays with the caller that does (docs/allocator.md).
     */
    public boolean refillAhead() {
        return refillAhead;
    }

    @Override
    public String toString() {
        return "AllocatorConfig{heapSegments=" + Arrays.toString(heapSegments) + ", chunkSize=" + chunkSize()
                + ", batchBytes=" + batchBytes + ", claimAttempts=" + claimAttempts + ", defaultPlacement="
                + defaultPlacement + ", adoptOrphans=" + adoptOrphans + ", refillAhead=" + refillAhead + "}";
    }

    /**
     * Builder of an {@link AllocatorConfig}; every setter checks its value and fails
     * with a {@link DsmConfigException} naming the key.
     *
     * <p><b>Note:</b> not thread-safe.
     */
    public static final class Builder {
        private int[] heapSegments = {};
        private int chunkSize = DEFAULT_CHUNK_SIZE;
        private int batchBytes = DEFAULT_BATCH_BYTES;
        private int claimAttempts = 8;
        private Placement defaultPlacement = Placement.local();
        private boolean adoptOrphans;
        private boolean refillAhead = true;

        private Builder() {
        }

        /** The segment indexes (0..255) that are heaps on every node; at least one. */
        public Builder heapSegments(int... indexes) {
            if (indexes.length == 0) {
                throw new DsmConfigException("alloc.heap-segments", "[]", "at least one segment index in 0.."
                        + RemotePtr.MAX_SEGMENT_INDEX);
            }
            for (int i : indexes) {
                if (i < 0 || i > RemotePtr.MAX_SEGMENT_INDEX) {
                    throw new DsmConfigException("alloc.heap-segments", i, "segment indexes in 0.."
                            + RemotePtr.MAX_SEGMENT_INDEX);
                }
            }
            this.heapSegments = Arrays.stream(indexes).distinct().toArray();
            return this;
        }

        /** Chunk size in bytes: a power of two from 4 KiB to 1 GiB; default 64 KiB. */
        public Builder chunkSize(int bytes) {
            if (bytes < (1 << HeapLayout.MIN_CHUNK_SHIFT) || Integer.bitCount(bytes) != 1) {
                throw new DsmConfigException("alloc.chunk-size", bytes, "a power of two from 4096 to 1073741824");
            }
            this.chunkSize = bytes;
            return this;
        }

        /** Bytes carved per fetch-and-add: 16 B .. 1 MiB; default 8 KiB. */
        public Builder batchBytes(int bytes) {
            if (bytes < 16 || bytes > (1 << 20)) {
                throw new DsmConfigException("alloc.batch-bytes", bytes, "16..1048576");
            }
            this.batchBytes = bytes;
            return this;
        }

        public Builder claimAttempts(int attempts) {
            if (attempts < 1 || attempts > 1000) {
                throw new DsmConfigException("alloc.claim-attempts", attempts, "1..1000");
            }
            this.claimAttempts = attempts;
            return this;
        }

        public Builder defaultPlacement(Placement placement) {
            this.defaultPlacement = java.util.Objects.requireNonNull(placement, "placement");
            return this;
        }

        public Builder adoptOrphans(boolean adopt) {
            this.adoptOrphans = adopt;
            return this;
        }

        /** Refill a size class's cache ahead of need on the allocator's threads; default true. */
        public Builder refillAhead(boolean ahead) {
            this.refillAhead = ahead;
            return this;
        }

        public AllocatorConfig build() {
            if (heapSegments.length == 0) {
                throw new DsmConfigException("alloc.heap-segments", "<missing>", "at least one segment index, e.g. "
                        + "AllocatorConfig.builder().heapSegments(1)");
            }
            return new AllocatorConfig(this);
        }
    }
}
