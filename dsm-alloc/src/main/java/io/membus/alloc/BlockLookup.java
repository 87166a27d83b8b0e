package io.membus.alloc;

import io.membus.core.RemotePtr;
import io.membus.core.Words;
import io.membus.core.error.DsmException;

import static io.membus.alloc.HeapLayout.BLOCK_HEADER_LENGTH;
import static io.membus.alloc.HeapLayout.ENTRY_LENGTH;
import static io.membus.alloc.HeapLayout.KIND_LARGE;
import static io.membus.alloc.HeapLayout.KIND_SMALL;
import static io.membus.alloc.HeapLayout.LARGE_HEAD;
import static io.membus.alloc.HeapLayout.LARGE_TAIL;
import static io.membus.alloc.HeapLayout.SMALL;
import static io.membus.alloc.HeapLayout.blockClassOf;
import static io.membus.alloc.HeapLayout.classOf;
import static io.membus.alloc.HeapLayout.generationOf;
import static io.membus.alloc.HeapLayout.kindOf;
import static io.membus.alloc.HeapLayout.stateOf;

/**
 * A stored pointer of a {@link HeapSegment} as the block allocated there
 * ({@link GlobalAllocator#ref(long)}): reads the pointer's chunk-table entry and the header
 * at the pointer (two verbs) and returns the block's reference with its header word and
 * capacity, or says why there is none: freed ({@link FreedBlockException}: a block header
 * lies there), never handed out ({@link InvalidBlockException}), or a table that
 * contradicts itself ({@link HeapCorruptedException}).
 *
 * <p><b>Note:</b> stateless and thread-safe: it reads remote memory only, each verb awaited
 * before the next.
 */
final class BlockLookup {
    private BlockLookup() {
    }

    /**
     * The block allocated at {@code ptr}, a pointer into this segment ({@link
     * GlobalAllocator#ref(long)}) of heap {@code h}: reads the chunk-table entry and the header.
     */
    static BlockRef refAt(HeapSegment h, long ptr) {
        int chunk = h.chunkOf(ptr);
        if (chunk < 0) {
            throw new InvalidBlockException(ptr, "outside the chunks of the heap (its header, chunk table or tail)");
        }
        long inChunk = RemotePtr.offset(ptr) - h.dataStart - ((long) chunk << h.chunkShift);
        byte[] entry = h.remote.read(h.entry(chunk), ENTRY_LENGTH);
        long st = Words.getLong(entry, HeapLayout.STATE_WORD);
        switch (stateOf(st)) {
            case SMALL -> {
                int cls = classOf(st);
                if (cls >= SizeClasses.count()) {
                    throw new HeapCorruptedException(h.node, h.segment, "chunk " + chunk + " has size class " + cls);
                }
                int blockSize = SizeClasses.blockSize(cls);
                if (inChunk % blockSize != 0) {
                    throw new InvalidBlockException(ptr, "not at a block boundary of its chunk's size class " + cls
                            + " (" + blockSize + " bytes)");
                }
                long header = HeapLayout.unseal(h.remote.readLong(ptr), ptr);
                long carved = HeapLayout.isPending(st) ? 0
                        : Math.min(Words.getLong(entry, HeapLayout.BUMP_WORD), h.perChunk(cls));
                if (inChunk / blockSize >= carved) {
                    throw freedOrNever(ptr, header, "the block is past those carved from chunk " + chunk
                            + " since it was last claimed");
                }
                if (kindOf(header) != KIND_SMALL || blockClassOf(header) != cls) {
                    throw freedOrNever(ptr, header, "the header there is not a block of class " + cls);
                }
                if ((generationOf(header) >>> HeapLayout.GENERATION_COUNT_BITS)
                        != (HeapLayout.epochOf(st) & (HeapLayout.GENERATION_MASK >>> HeapLayout.GENERATION_COUNT_BITS))) {
                    throw new FreedBlockException(ptr, generationOf(header), "the header is from an earlier claim of"
                            + " chunk " + chunk);
                }
                if ((generationOf(header) & HeapLayout.GENERATION_COUNT_MASK) == HeapLayout.GENERATION_COUNT_MASK) {
                    throw new FreedBlockException(ptr, generationOf(header), "the block is retired (its generations"
                            + " are used up)");
                }
                return new BlockRef(ptr, header, blockSize - BLOCK_HEADER_LENGTH);
            }
            case LARGE_HEAD -> {
                if (inChunk != 0) {
                    throw new InvalidBlockException(ptr, "inside a large object (chunk " + chunk + ")");
                }
                long header = HeapLayout.unseal(h.remote.readLong(ptr), ptr);
                long live = HeapLayout.blockHeader(HeapLayout.firstGeneration(HeapLayout.epochOf(st)),
                        HeapLayout.LARGE_CLASS, KIND_LARGE);
                if (header != live) {
                    throw freedOrNever(ptr, header, "the object's header is not the one its claim wrote (it was freed)");
                }
                long span = Words.getLong(entry, HeapLayout.COUNT_WORD);
                if (span < 1 || chunk + span > h.chunkCount) {
                    throw new HeapCorruptedException(h.node, h.segment, "large object at chunk " + chunk + " spans "
                            + span + " chunks of " + h.chunkCount);
                }
                return new BlockRef(ptr, header, (span << h.chunkShift) - BLOCK_HEADER_LENGTH);
            }
            case LARGE_TAIL -> throw new InvalidBlockException(ptr, "inside a large object (chunk " + chunk
                    + " continues one that starts before it)");
            default -> throw freedOrNever(ptr, HeapLayout.unseal(h.remote.readLong(ptr), ptr), "its chunk " + chunk
                    + " is free");
        }
    }

    /** {@link FreedBlockException} when a block header lies at {@code ptr} (a block was there), else invalid. */
    private static DsmException freedOrNever(long ptr, long header, String reason) {
        boolean wasBlock = (kindOf(header) == KIND_SMALL && blockClassOf(header) < SizeClasses.count())
                || (kindOf(header) == KIND_LARGE && blockClassOf(header) == HeapLayout.LARGE_CLASS);
        return wasBlock ? new FreedBlockException(ptr, generationOf(header), reason)
                : new InvalidBlockException(ptr, "no block was ever handed out there: " + reason);
    }
}
