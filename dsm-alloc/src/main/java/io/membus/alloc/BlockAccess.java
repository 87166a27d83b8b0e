package io.membus.alloc;

import io.membus.core.Words;

import java.util.Arrays;

import static io.membus.alloc.HeapLayout.BLOCK_HEADER_LENGTH;
import static io.membus.alloc.HeapLayout.blockClassOf;
import static io.membus.alloc.HeapLayout.generationOf;
import static io.membus.alloc.HeapLayout.kindOf;

/**
 * Reads and writes the payload of a block through its {@link BlockRef}, checked against
 * the block's header so that a stale reference never returns or overwrites a later
 * owner's bytes: a read returns its bytes only when the header read with (or before) them
 * and again after them both equal the reference's; a write checks the header before (a
 * stale reference writes nothing) and after (a racing free is reported after the fact).
 * The public forms and their contracts are {@link GlobalAllocator#read},
 * {@link GlobalAllocator#write} and {@link GlobalAllocator#isLive}.
 *
 * <p><b>Note:</b> stateless apart from its verbs, and thread-safe: every call is a few
 * synchronous verbs, each awaited before the next, so the header read after the bytes is
 * ordered after them (the visibility rule of the verbs).
 */
final class BlockAccess {
    private final Remote remote;

    BlockAccess(Remote remote) {
        this.remote = remote;
    }

    byte[] read(BlockRef ref, long offset, int length) {
        checkBounds(ref, offset, length);
        long ptr = ref.ptr();
        byte[] out;
        if (offset <= 256) {
            byte[] b = remote.read(ptr, (int) (BLOCK_HEADER_LENGTH + offset + length));
            checkHeader(ref, Words.getLong(b, 0), "read");
            out = Arrays.copyOfRange(b, (int) (BLOCK_HEADER_LENGTH + offset), b.length);
        } else {
            checkHeader(ref, remote.readLong(ptr), "read");
            out = remote.read(ref.payload() + offset, length);
        }
        checkHeader(ref, remote.readLong(ptr), "read");
        return out;
    }

    void write(BlockRef ref, long offset, byte[] src) {
        checkBounds(ref, offset, src.length);
        long ptr = ref.ptr();
        checkHeader(ref, remote.readLong(ptr), "write");
        remote.write(ref.payload() + offset, src);
        checkHeader(ref, remote.readLong(ptr), "write");
    }

    boolean isLive(BlockRef ref) {
        return remote.readLong(ref.ptr()) == HeapLayout.seal(ref.header(), ref.ptr());
    }

    private static void checkBounds(BlockRef ref, long offset, long length) {
        if (offset < 0 || length < 0 || offset > ref.capacity() - length) {
            throw new BlockBoundsException(ref.ptr(), offset, length, ref.capacity());
        }
    }

    /** Checks the header word {@code raw} as read from memory (sealed) against the reference's. */
    private static void checkHeader(BlockRef ref, long raw, String op) {
        if (raw == HeapLayout.seal(ref.header(), ref.ptr())) {
            return;
        }
        long header = HeapLayout.unseal(raw, ref.ptr());
        if (kindOf(header) == kindOf(ref.header()) && blockClassOf(header) == blockClassOf(ref.header())
                && generationOf(header) < generationOf(ref.header())) {
            throw new InvalidBlockException(ref.ptr(), "the reference's generation " + ref.generation()
                    + " is newer than the block's " + generationOf(header) + ": it was not made by allocate");
        }
        boolean sameKind = kindOf(header) == kindOf(ref.header()) && blockClassOf(header) == blockClassOf(ref.header());
        throw new UseAfterFreeException(ref.ptr(), ref.generation(), sameKind ? generationOf(header) : -1, op);
    }
}
