package io.membus.alloc;

import io.membus.core.error.DsmException;

import static io.membus.alloc.HeapLayout.BLOCK_HEADER_LENGTH;
import static io.membus.alloc.HeapLayout.COUNT_WORD;
import static io.membus.alloc.HeapLayout.FREE;
import static io.membus.alloc.HeapLayout.KIND_LARGE;
import static io.membus.alloc.HeapLayout.LARGE_CLASS;
import static io.membus.alloc.HeapLayout.LARGE_HEAD;
import static io.membus.alloc.HeapLayout.LARGE_TAIL;
import static io.membus.alloc.HeapLayout.blockHeader;
import static io.membus.alloc.HeapLayout.epochOf;
import static io.membus.alloc.HeapLayout.state;
import static io.membus.alloc.HeapLayout.stateOf;

/**
 * Large objects in a {@link HeapSegment}: a run of whole free chunks, each claimed with
 * one CAS on its table entry (the head chunk LARGE_HEAD, the rest LARGE_TAIL), rolled back
 * (FREE under a new epoch) when another node wins one of them; the span is written in the
 * head's COUNT word and the object's header at its first byte. A free sets every chunk of
 * the run FREE again, by CAS, retrying when an adoption changed a chunk's owner meanwhile.
 * See docs/allocator.md.
 *
 * <p><b>Note:</b> stateless and thread-safe: every shared word is in remote memory and
 * changed only by CAS; each verb is awaited before the next.
 */
final class LargeObjects {
    private LargeObjects() {
    }

    /** A large object of {@code size} payload bytes in {@code h}, or null when no free run is long enough. */
    static BlockRef allocate(HeapSegment h, long size) {
        long chunkSize = 1L << h.chunkShift;
        int span = (int) ((size + BLOCK_HEADER_LENGTH + chunkSize - 1) >> h.chunkShift);
        if (span > h.chunkCount) {
            return null;
        }
        for (int attempt = 0; attempt < h.config.claimAttempts(); attempt++) {
            long[] t = h.readTable();
            int start = freeRun(h, t, span);
            if (start < 0) {
                return null;
            }
            long epoch = epochOf(t[start * 4]) + 1;
            int claimed = 0;
            try {
                for (; claimed < span; claimed++) {
                    long w = t[(start + claimed) * 4];
                    long mine = state(claimed == 0 ? LARGE_HEAD : LARGE_TAIL, 0, h.self, epochOf(w) + 1);
                    if (h.casResolved(h.entry(start + claimed), w, mine) != w) {
                        break;
                    }
                }
            } catch (DsmException e) {
                try {
                    rollBack(h, t, start, claimed); // the chunk whose CAS is unknown stays ours (see docs)
                } catch (DsmException again) {
                    e.addSuppressed(again);
                }
                throw e;
            }
            if (claimed < span) {
                rollBack(h, t, start, claimed);
                continue;
            }
            h.remote.writeLong(h.entry(start) + COUNT_WORD, span);
            long hdr = blockHeader(HeapLayout.firstGeneration(epoch), LARGE_CLASS, KIND_LARGE);
            h.remote.writeLong(h.chunk(start), HeapLayout.seal(hdr, h.chunk(start)));
            return new BlockRef(h.chunk(start), hdr, ((long) span << h.chunkShift) - BLOCK_HEADER_LENGTH);
        }
        return null;
    }

    /** Sets the first {@code claimed} chunks of a large claim that lost a race FREE again (new epoch). */
    private static void rollBack(HeapSegment h, long[] t, int start, int claimed) {
        for (int i = 0; i < claimed; i++) {
            long w = t[(start + i) * 4];
            long mine = state(i == 0 ? LARGE_HEAD : LARGE_TAIL, 0, h.self, epochOf(w) + 1);
            long back = h.casResolved(h.entry(start + i), mine, state(FREE, 0, 0, epochOf(w) + 1));
            if (back != mine && !(stateOf(back) == FREE || epochOf(back) > epochOf(mine))) {
                // (FREE or a later epoch: our rollback was executed, its verb timed out, someone claimed it since)
                throw new HeapCorruptedException(h.node, h.segment, "a chunk claimed by this node changed"
                        + " under it: chunk=" + (start + i) + ", state=0x" + Long.toHexString(back));
            }
        }
    }

    private static int freeRun(HeapSegment h, long[] t, int span) {
        int run = 0;
        for (int c = 0; c < h.chunkCount; c++) {
            run = stateOf(t[c * 4]) == FREE ? run + 1 : 0;
            if (run == span) {
                return c - span + 1;
            }
        }
        return -1;
    }

    /** Frees the large object whose first chunk is {@code chunk}: every chunk of its run FREE again, by CAS. */
    static void free(HeapSegment h, int chunk) {
        long head = h.remote.readLong(h.entry(chunk));
        long span = h.remote.readLong(h.entry(chunk) + COUNT_WORD);
        if (stateOf(head) != LARGE_HEAD || span < 1 || span > h.chunkCount - chunk) {
            throw new HeapCorruptedException(h.node, h.segment, "large object's chunk entry is wrong: chunk=" + chunk
                    + ", state=0x" + Long.toHexString(head) + ", span=" + span);
        }
        for (int i = 0; i < span; i++) {
            long e = h.entry(chunk + i);
            long st = i == 0 ? head : h.remote.readLong(e);
            for (int tries = 0; ; tries++) {
                int s = stateOf(st);
                if (s != (i == 0 ? LARGE_HEAD : LARGE_TAIL) || tries > HeapSegment.MAX_CAS_RETRIES) {
                    throw new HeapCorruptedException(h.node, h.segment, "large object's chunk entry is wrong: chunk="
                            + (chunk + i) + ", state=0x" + Long.toHexString(st));
                }
                long w = h.remote.compareAndSwap(e, st, state(FREE, 0, 0, epochOf(st)));
                if (w == st) {
                    break;
                }
                st = w; // an adoption changed the owner: retry with the new word
            }
        }
    }
}
