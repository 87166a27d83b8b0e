package io.membus.alloc;

import io.membus.core.RemotePtr;
import io.membus.core.Words;
import io.membus.core.error.DsmException;
import io.membus.core.error.ErrorCode;

import java.util.Arrays;
import java.util.BitSet;
import java.util.concurrent.locks.ReentrantLock;

import static io.membus.alloc.HeapLayout.BLOCK_HEADER_LENGTH;
import static io.membus.alloc.HeapLayout.BUMP_WORD;
import static io.membus.alloc.HeapLayout.COUNT_WORD;
import static io.membus.alloc.HeapLayout.ENTRY_LENGTH;
import static io.membus.alloc.HeapLayout.FREE;
import static io.membus.alloc.HeapLayout.FREE_HEAD_WORD;
import static io.membus.alloc.HeapLayout.KIND_SMALL;
import static io.membus.alloc.HeapLayout.SMALL;
import static io.membus.alloc.HeapLayout.blockClassOf;
import static io.membus.alloc.HeapLayout.blockHeader;
import static io.membus.alloc.HeapLayout.classOf;
import static io.membus.alloc.HeapLayout.epochOf;
import static io.membus.alloc.HeapLayout.head;
import static io.membus.alloc.HeapLayout.headIndex;
import static io.membus.alloc.HeapLayout.headTag;
import static io.membus.alloc.HeapLayout.kindOf;
import static io.membus.alloc.HeapLayout.ownerOf;
import static io.membus.alloc.HeapLayout.state;
import static io.membus.alloc.HeapLayout.stateOf;
import static io.membus.alloc.HeapSegment.MAX_CAS_RETRIES;
import static io.membus.alloc.HeapSegment.SCAN_SLICE;

/**
 * This node's blocks of one size class in one heap segment: a cache of blocks
 * ready to hand out, the chunks of this class it owns, and the chunk it carves from.
 *
 * <p><b>Note:</b> thread-safe: every field is guarded by {@link #lock}; methods that
 * say "caller holds the lock" are called by {@link HeapSegment#trim()} with it held.
 * A pool never takes another pool's lock.
 */
final class ClassPool {
    private final Remote remote;
    private final int self;
    final HeapSegment heap;
    final int cls;
    final int blockSize;
    final int perChunk;
    final int batch;
    final int cacheLimit;
    final ReentrantLock lock = new ReentrantLock();
    /** Chunks of this class this node owns (as far as it knows). */
    final BitSet owned = new BitSet();
    /** Owned chunks whose bump word may still be below the capacity. */
    final BitSet roomy = new BitSet();
    long[] ptrs = new long[64];
    long[] headers = new long[64];
    int size;
    int cursor = -1;
    long cursorEpoch;

    ClassPool(HeapSegment heap, int cls) {
        this.heap = heap;
        this.remote = heap.remote;
        this.self = heap.self;
        this.cls = cls;
        this.blockSize = SizeClasses.blockSize(cls);
        this.perChunk = heap.perChunk(cls);
        this.batch = Math.max(1, Math.min(64, Math.min(perChunk, heap.config.batchBytes() / blockSize)));
        this.cacheLimit = Math.max(32, 4 * batch);
    }

    BlockRef allocate() {
        lock.lock();
        try {
            if (size == 0 && !refill()) {
                return null;
            }
            size--;
            return new BlockRef(ptrs[size], headers[size], blockSize - BLOCK_HEADER_LENGTH);
        } finally {
            lock.unlock();
        }
    }

    /** Takes a block freed by this node into the cache when this node owns its chunk. */
    boolean cacheFreed(int chunk, long ptr, long header) {
        lock.lock();
        try {
            if (size >= cacheLimit || !owned.get(chunk)) {
                return false;
            }
            add(ptr, header);
            return true;
        } finally {
            lock.unlock();
        }
    }

    private void add(long ptr, long header) {
        if (size == ptrs.length) {
            ptrs = Arrays.copyOf(ptrs, size * 2);
            headers = Arrays.copyOf(headers, size * 2);
        }
        ptrs[size] = ptr;
        headers[size++] = header;
    }

    /** Caller holds the lock. Pushes every cached block back on its chunk's free list. */
    void returnCached() {
        while (size > 0) {
            long p = ptrs[--size]; // out of the cache first: a push that fails may still have run
            int c = heap.chunkOf(p);
            heap.push(c, p, (p - heap.chunk(c)) / blockSize);
        }
        cursor = -1;
    }

    /** A chunk this node adopted: it is ours now, and may have room to carve. */
    void adopted(int chunk) {
        lock.lock();
        try {
            owned.set(chunk);
            roomy.set(chunk);
        } finally {
            lock.unlock();
        }
    }

    /**
     * Caller holds the lock. Fills the cache: carve from an owned chunk with room;
     * else take the free lists the hint bitmap points at; else scan the table from
     * the claim hint, claiming a free chunk (and finding owned chunks this node did
     * not know of, e.g. after a restart).
     */
    private boolean refill() {
        if (carve()) {
            return true;
        }
        if (!owned.isEmpty()) {
            long[] bits = heap.readHints();
            for (int w = 0; w < bits.length && size < batch; w++) {
                long word = bits[w];
                while (word != 0 && size < batch) {
                    int c = (w << 6) + Long.numberOfTrailingZeros(word);
                    word &= word - 1;
                    if (owned.get(c)) {
                        heap.hint(c, false); // before the pop: a later push sets it again
                        popAll(c, remote.readLong(heap.entry(c) + FREE_HEAD_WORD));
                    }
                }
            }
            if (size > 0) {
                return true;
            }
        }
        return scanAndClaim();
    }

    /** Carves from the cursor chunk, or from the next owned chunk that may have room. */
    private boolean carve() {
        while (true) {
            if (cursor < 0) {
                int c = roomy.nextSetBit(0);
                if (c < 0) {
                    return false;
                }
                long st = remote.readLong(heap.entry(c));
                if (stateOf(st) != SMALL || ownerOf(st) != self || classOf(st) != cls || HeapLayout.isPending(st)) {
                    roomy.clear(c);
                    owned.clear(c);
                    continue;
                }
                cursor = c;
                cursorEpoch = epochOf(st);
            }
            if (bump()) {
                return true;
            }
        }
    }

    private boolean scanAndClaim() {
        int n = heap.chunkCount;
        int slices = (n + SCAN_SLICE - 1) / SCAN_SLICE;
        int first = Math.floorMod(heap.claimHint, n) / SCAN_SLICE;
        for (int i = 0; i < slices; i++) {
            int from = ((first + i) % slices) * SCAN_SLICE;
            int count = Math.min(SCAN_SLICE, n - from);
            long[] t = heap.readEntries(from, count);
            for (int j = 0; j < count; j++) {
                int c = from + j;
                long st = t[j * 4];
                if (stateOf(st) == SMALL && ownerOf(st) == self && HeapLayout.isPending(st)) {
                    heap.recoverPending(c); // a claim of this node that did not finish (a verb timed out)
                } else if (stateOf(st) == SMALL && ownerOf(st) == self && classOf(st) == cls) {
                    if (!owned.get(c)) {
                        // not claimed by this allocator (an earlier incarnation's): take it over with a
                        // CAS, so that an adopter of the earlier incarnation's chunks and we never both own it
                        if (!heap.reown(c, st)) {
                            continue;
                        }
                        owned.set(c);
                        if (t[j * 4 + 1] < perChunk) {
                            roomy.set(c);
                        }
                    }
                    if (headIndex(t[j * 4 + 2]) != 0 && size < batch) {
                        heap.hint(c, false);
                        popAll(c, t[j * 4 + 2]);
                    }
                } else if (stateOf(st) == FREE) {
                    if (size > 0) {
                        return true; // found freed blocks before a free chunk: use them first
                    }
                    long epoch = heap.claimSmall(c, st, cls);
                    if (epoch >= 0) {
                        owned.set(c);
                        roomy.set(c);
                        cursor = c;
                        cursorEpoch = epoch;
                        if (bump()) {
                            return true;
                        }
                    }
                } else {
                    owned.clear(c);
                    roomy.clear(c);
                }
            }
            if (size > 0 || carve()) {
                return true;
            }
        }
        return false;
    }

    /** Carves the next batch from the cursor chunk with one fetch-and-add. */
    private boolean bump() {
        long old = remote.fetchAndAdd(heap.entry(cursor) + BUMP_WORD, batch);
        if (old >= perChunk) {
            roomy.clear(cursor);
            cursor = -1;
            return false;
        }
        int k = (int) Math.min(batch, perChunk - old);
        long first = heap.chunk(cursor) + old * blockSize;
        long hdr = blockHeader(HeapLayout.firstGeneration(cursorEpoch), cls, KIND_SMALL);
        if (k == 1) {
            remote.writeLong(first, HeapLayout.seal(hdr, first));
        } else {
            byte[] region = new byte[k * blockSize];
            for (int i = 0; i < k; i++) {
                Words.putLong(region, i * blockSize, HeapLayout.seal(hdr, first + (long) i * blockSize));
            }
            remote.write(first, region);
        }
        for (int i = k - 1; i >= 0; i--) {
            add(first + (long) i * blockSize, hdr);
        }
        if (old + k >= perChunk) {
            roomy.clear(cursor);
            cursor = -1;
        }
        return true;
    }

    /** Takes the whole free list of a chunk this node owns with one CAS, then walks it. */
    private void popAll(int chunk, long top) {
        long e = heap.entry(chunk);
        for (int tries = 0; ; tries++) {
            if (headIndex(top) == 0) {
                return;
            }
            long w = remote.compareAndSwap(e + FREE_HEAD_WORD, top, head(headTag(top) + 1, 0));
            if (w == top) {
                break;
            }
            if (tries > MAX_CAS_RETRIES) {
                throw new DsmException(ErrorCode.TIMEOUT, "free-list pop kept losing its CAS: node=" + heap.node
                        + ", segment=" + heap.segment + ", chunk=" + chunk + ", tries=" + tries);
            }
            top = w;
        }
        // the chain is ours now. Its blocks join the cache only once COUNT has been lowered by as many:
        // if a read or the fetch-and-add fails, they are dropped (leaked, still counted, so a release
        // of the chunk recovers them) and COUNT never under-states what is live or cached.
        int start = size;
        try {
            long chunkBase = heap.chunk(chunk);
            long index = headIndex(top);
            int count = 0;
            while (index != 0) {
                if (index > perChunk || count >= perChunk) {
                    throw new HeapCorruptedException(heap.node, heap.segment, "free list leaves its chunk or loops:"
                            + " chunk=" + chunk + ", index=" + (index - 1) + ", walked=" + count);
                }
                long p = chunkBase + (index - 1) * blockSize;
                byte[] b = remote.read(p, 16);
                long hdr = HeapLayout.unseal(Words.getLong(b, 0), p);
                if (kindOf(hdr) != KIND_SMALL || blockClassOf(hdr) != cls) {
                    throw new HeapCorruptedException(heap.node, heap.segment, "free block with a wrong header: chunk="
                            + chunk + ", block=" + RemotePtr.toString(p) + ", header=0x" + Long.toHexString(hdr));
                }
                add(p, hdr);
                count++;
                index = Words.getLong(b, 8);
            }
            remote.fetchAndAdd(e + COUNT_WORD, -count);
        } catch (RuntimeException x) {
            size = start;
            throw x;
        }
    }
}
