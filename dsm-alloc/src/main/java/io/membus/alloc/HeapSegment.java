package io.membus.alloc;

import io.membus.core.RemotePtr;
import io.membus.core.SegmentDescriptor;
import io.membus.core.Words;
import io.membus.core.error.DsmException;
import io.membus.core.error.DsmTimeoutException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;

import static io.membus.alloc.HeapLayout.BLOCK_HEADER_LENGTH;
import static io.membus.alloc.HeapLayout.BUMP_WORD;
import static io.membus.alloc.HeapLayout.COUNT_WORD;
import static io.membus.alloc.HeapLayout.ENTRY_LENGTH;
import static io.membus.alloc.HeapLayout.FREE;
import static io.membus.alloc.HeapLayout.FREE_HEAD_WORD;
import static io.membus.alloc.HeapLayout.LARGE_HEAD;
import static io.membus.alloc.HeapLayout.LARGE_TAIL;
import static io.membus.alloc.HeapLayout.PENDING;
import static io.membus.alloc.HeapLayout.SMALL;
import static io.membus.alloc.HeapLayout.chunkCount;
import static io.membus.alloc.HeapLayout.classOf;
import static io.membus.alloc.HeapLayout.dataStart;
import static io.membus.alloc.HeapLayout.epochOf;
import static io.membus.alloc.HeapLayout.head;
import static io.membus.alloc.HeapLayout.headIndex;
import static io.membus.alloc.HeapLayout.headTag;
import static io.membus.alloc.HeapLayout.isPending;
import static io.membus.alloc.HeapLayout.ownerOf;
import static io.membus.alloc.HeapLayout.state;
import static io.membus.alloc.HeapLayout.stateOf;

/**
 * A heap segment as this node sees it: its geometry (read once from its header),
 * the verbs on its chunk table, hint bitmap and free lists, its usage row, and this
 * node's {@link ClassPool}s of its size classes. Large objects are {@link LargeObjects}',
 * a pointer's block {@link BlockLookup}'s (both act on this segment's geometry and
 * verbs). Cached by {@link HeapFinder} per segment and incarnation.
 *
 * <p><b>Note:</b> thread-safe: the geometry is immutable; every shared word is in
 * remote memory and changed only by CAS or fetch-and-add; the pools guard their own
 * state. {@link #trim()} takes every pool's lock, in class order.
 */
final class HeapSegment {
    static final int MAX_CAS_RETRIES = 100_000;
    static final int SCAN_SLICE = 256;
    static final int TABLE_READ_PIECE = 1 << 20;
    /** BUMP, FREE_HEAD and COUNT of a fresh claim (a write copies its buffer: shared). */
    private static final byte[] ZERO_WORDS = new byte[ENTRY_LENGTH - BUMP_WORD];
    private static final Logger LOG = LoggerFactory.getLogger(HeapSegment.class);

    final Remote remote;
    final int self;
    final AllocatorConfig config;
    final int node;
    final int segment;
    final long incarnation;
    final boolean formatted;
    final long checkedAt;
    final long base;
    final int chunkShift;
    final int chunkCount;
    final long dataStart;
    final int smallLimit;
    final ClassPool[] pools;
    /** Where the last claim succeeded: scans for a free chunk start there. */
    volatile int claimHint;
    /**
     * Chunks a thread of this node is claiming (from a small claim's CAS until the claim
     * is finished) or rolling back: marked before the first verb, unmarked after the
     * last. A thread that finds a chunk marked leaves it alone, so this node never rolls
     * back a claim one of its threads is still making, and never runs two rollbacks of
     * one chunk (a late reset of the second would land on the next claimer's words). No
     * thread waits on a mark, and no lock is held across these verbs.
     */
    private final Set<Integer> claiming = ConcurrentHashMap.newKeySet();

    /** An unformatted segment. */
    HeapSegment(Remote remote, int self, AllocatorConfig config, SegmentDescriptor d) {
        this(remote, self, config, d, false, 0, 0, 0);
    }

    HeapSegment(Remote remote, int self, AllocatorConfig config, SegmentDescriptor d, int chunkShift, int chunkCount,
                long dataStart) {
        this(remote, self, config, d, true, chunkShift, chunkCount, dataStart);
    }

    private HeapSegment(Remote remote, int self, AllocatorConfig config, SegmentDescriptor d, boolean formatted,
                        int chunkShift, int chunkCount, long dataStart) {
        this.remote = remote;
        this.self = self;
        this.config = config;
        this.node = d.nodeId();
        this.segment = d.index();
        this.incarnation = d.incarnation();
        this.formatted = formatted;
        this.checkedAt = System.nanoTime();
        this.base = d.pointer(0);
        this.chunkShift = chunkShift;
        this.chunkCount = chunkCount;
        this.dataStart = dataStart;
        this.smallLimit = formatted ? (1 << chunkShift) / 4 : 0;
        this.pools = new ClassPool[formatted ? SizeClasses.count() : 0];
    }

    long maxObject() {
        return ((long) chunkCount << chunkShift) - BLOCK_HEADER_LENGTH;
    }

    long entry(int chunk) {
        return base + HeapLayout.entryOffset(chunk);
    }

    long chunk(int chunk) {
        return base + dataStart + ((long) chunk << chunkShift);
    }

    /** The chunk {@code ptr} falls in, or -1. */
    int chunkOf(long ptr) {
        long off = RemotePtr.offset(ptr) - dataStart;
        if (off < 0) {
            return -1;
        }
        long c = off >> chunkShift;
        return c < chunkCount ? (int) c : -1;
    }

    int perChunk(int cls) {
        return cls < SizeClasses.count() ? (1 << chunkShift) / SizeClasses.blockSize(cls) : 0;
    }

    /** The whole chunk table: four words per chunk. */
    long[] readTable() {
        return readEntries(0, chunkCount);
    }

    /** Entries {@code from .. from+count-1}: four words each, validated. */
    long[] readEntries(int from, int count) {
        long[] t = new long[count * 4];
        long bytes = (long) count * ENTRY_LENGTH;
        long at = base + HeapLayout.entryOffset(from);
        for (long off = 0; off < bytes; off += TABLE_READ_PIECE) {
            int len = (int) Math.min(TABLE_READ_PIECE, bytes - off);
            byte[] b = remote.read(at + off, len);
            for (int i = 0; i < len; i += 8) {
                t[(int) ((off + i) >> 3)] = Words.getLong(b, i);
            }
        }
        for (int c = 0; c < count; c++) {
            long st = t[c * 4];
            int state = stateOf(st);
            if (state > LARGE_TAIL || (state == SMALL && classOf(st) >= SizeClasses.count())) {
                throw new HeapCorruptedException(node, segment, "chunk table entry in no valid state: chunk="
                        + (from + c) + ", state=0x" + Long.toHexString(st));
            }
        }
        return t;
    }

    /** The free-list hint bitmap. */
    long[] readHints() {
        int words = HeapLayout.hintWords(chunkCount);
        byte[] b = remote.read(base + HeapLayout.hintsOffset(chunkCount), words * 8);
        long[] bits = new long[words];
        for (int i = 0; i < words; i++) {
            bits[i] = Words.getLong(b, i * 8);
        }
        return bits;
    }

    /** Sets ({@code set}) or clears chunk {@code c}'s hint bit with a CAS loop on its word. */
    void hint(int c, boolean set) {
        long word = base + HeapLayout.hintsOffset(chunkCount) + (long) (c >>> 6) * 8;
        long bit = 1L << (c & 63);
        try {
            long w = remote.readLong(word);
            for (int tries = 0; tries < MAX_CAS_RETRIES; tries++) {
                if (((w & bit) != 0) == set) {
                    return;
                }
                long witness = remote.compareAndSwap(word, w, set ? w | bit : w & ~bit);
                if (witness == w) {
                    return;
                }
                w = witness;
            }
        } catch (DsmException e) {
            // a hint only: the free it follows is complete; the owner's table scan finds the list anyway
            LOG.debug("free-list hint not updated: node={}, segment={}, chunk={}: {}", node, segment, c, e.toString());
            return;
        }
        LOG.warn("free-list hint not updated after {} tries: node={}, segment={}, chunk={} (a hint only)",
                MAX_CAS_RETRIES, node, segment, c);
    }

    /**
     * A CAS whose update only this node can write (it names this node as owner at a new
     * epoch, or undoes such a word). When the verb fails (its deadline fired, the
     * connection broke while it was in flight: {@link DsmException#mayHaveRun()}) its outcome is unknown: the word is read again — the read follows
     * the CAS on the same connection, so it sees the CAS if it was executed — and the
     * witness is inferred: {@code expected} when the word holds {@code update}. When the
     * word still holds {@code expected} (the CAS was not executed) or cannot be read, the
     * first error is thrown and nothing changed.
     */
    long casResolved(long ptr, long expected, long update) {
        try {
            return remote.compareAndSwap(ptr, expected, update);
        } catch (DsmException e) {
            if (!e.mayHaveRun()) {
                throw e; // refused before it was sent: nothing changed
            }
            long now;
            try {
                now = remote.readLong(ptr);
            } catch (DsmException again) {
                e.addSuppressed(again);
                throw e;
            }
            if (now == update) {
                return expected;
            }
            if (now == expected) {
                throw e;
            }
            return now;
        }
    }

    /**
     * Claims FREE chunk {@code c} (whose STATE word was {@code st}) for class {@code cls}:
     * CAS to {@code SMALL|PENDING(cls, me, e+1)}, reset BUMP/FREE_HEAD/COUNT, CAS the
     * pending bit away. A claim that fails half-way (a verb timed out) leaves the entry
     * pending and owned by this node; {@link #recoverPending} rolls it back later.
     *
     * @return the chunk's new epoch, or -1 when another node won it
     */
    long claimSmall(int c, long st, int cls) {
        long epoch = (epochOf(st) + 1) & HeapLayout.EPOCH_MASK;
        long pending = state(SMALL, cls, self, epoch) | PENDING;
        if (!claiming.add(c)) {
            return -1; // another thread of this node is claiming or rolling back this chunk
        }
        try {
            if (casResolved(entry(c), st, pending) != st) {
                return -1;
            }
            // the chunk is ours: no other node touches its words until we give it back
            remote.write(entry(c) + BUMP_WORD, ZERO_WORDS);
            if (casResolved(entry(c), pending, state(SMALL, cls, self, epoch)) != pending) {
                return -1; // adopted by another node meanwhile (it rolls the claim back)
            }
            claimHint = c;
            return epoch;
        } finally {
            claiming.remove(c);
        }
    }

    /**
     * Rolls back an unfinished claim of this node (SMALL, PENDING, owner = this node):
     * resets the words and sets the entry FREE at the claim's epoch. Nothing was carved
     * from a pending chunk, so nothing is lost.
     */
    void recoverPending(int c) {
        if (!claiming.add(c)) {
            return; // being claimed or rolled back by another thread of this node
        }
        try {
            long st = remote.readLong(entry(c));
            if (stateOf(st) != SMALL || !isPending(st) || ownerOf(st) != self) {
                return;
            }
            remote.write(entry(c) + BUMP_WORD, ZERO_WORDS);
            if (remote.compareAndSwap(entry(c), st, state(FREE, 0, 0, epochOf(st))) == st) {
                LOG.info("rolled back an unfinished chunk claim: node={}, segment={}, chunk={}", node, segment, c);
            }
        } finally {
            claiming.remove(c);
        }
    }

    /**
     * Takes over a SMALL chunk that carries this node's id but that this allocator did
     * not claim (an earlier incarnation's), by moving its epoch on with one CAS: an
     * adopter's CAS expects the old word, so exactly one of them owns the chunk. Blocks
     * carved from now on start above every generation the chunk has had.
     *
     * @return whether this node owns the chunk now
     */
    boolean reown(int c, long st) {
        long mine = state(SMALL, classOf(st), self, (epochOf(st) + 1) & HeapLayout.EPOCH_MASK);
        return casResolved(entry(c), st, mine) == st;
    }

    /**
     * Takes over the chunks of this segment that {@code nodeId} (a node that left) owned,
     * one CAS on each chunk's table entry that puts this node in the owner field ({@link
     * GlobalAllocator#adoptOrphans}): a SMALL chunk whose claim never finished is recovered,
     * one with blocks goes to this node's pool of its class.
     *
     * @return the number of chunks this call adopted
     */
    int adoptChunksOf(int nodeId) {
        int adopted = 0;
        long[] t = readTable();
        for (int c = 0; c < chunkCount; c++) {
            long st = t[c * 4];
            if (stateOf(st) != FREE && ownerOf(st) == nodeId) {
                long mine = (st & ~(0xffffL << 36)) | ((long) self << 36);
                if (casResolved(entry(c), st, mine) == st) {
                    adopted++;
                    if (stateOf(st) == SMALL && HeapLayout.isPending(st)) {
                        recoverPending(c); // its claim never finished: nothing was carved
                    } else if (stateOf(st) == SMALL) {
                        pool(classOf(st)).adopted(c);
                    }
                }
            }
        }
        return adopted;
    }

    /**
     * The block allocated at {@code ptr}, a pointer into this segment ({@link
     * GlobalAllocator#ref(long)}): reads the chunk-table entry and the header ({@link BlockLookup}).
     */
    BlockRef refAt(long ptr) {
        return BlockLookup.refAt(this, ptr);
    }

    /** This segment's row of {@link HeapUsage}: one read of the chunk table. */
    HeapUsage.SegmentUsage usage() {
        long[] t = readTable();
        int free = 0;
        int small = 0;
        int large = 0;
        int objects = 0;
        long inUse = 0;
        long onLists = 0;
        Map<Integer, Integer> owners = new TreeMap<>();
        for (int c = 0; c < chunkCount; c++) {
            long st = t[c * 4];
            switch (stateOf(st)) {
                case FREE -> free++;
                case SMALL -> {
                    small++;
                    if (HeapLayout.isPending(st)) {
                        break; // a claim in progress: its words are not this claim's yet
                    }
                    long carved = Math.min(t[c * 4 + 1], perChunk(classOf(st)));
                    long count = Math.max(0, t[c * 4 + 3]);
                    onLists += count;
                    inUse += Math.max(0, carved - count);
                }
                case LARGE_HEAD -> {
                    large++;
                    objects++;
                }
                case LARGE_TAIL -> large++;
                default -> {
                }
            }
            if (stateOf(st) != FREE) {
                owners.merge(ownerOf(st), 1, Integer::sum);
            }
        }
        return new HeapUsage.SegmentUsage(node, segment, 1 << chunkShift, chunkCount, free, small, large, inUse,
                onLists, objects, owners, null);
    }

    ClassPool pool(int cls) {
        ClassPool p = pools[cls];
        if (p == null) {
            synchronized (pools) {
                p = pools[cls];
                if (p == null) {
                    p = new ClassPool(this, cls);
                    pools[cls] = p;
                }
            }
        }
        return p;
    }

    BlockRef allocate(long size) {
        int cls = SizeClasses.classFor(size + BLOCK_HEADER_LENGTH);
        if (cls >= 0 && SizeClasses.blockSize(cls) <= smallLimit) {
            return pool(cls).allocate();
        }
        return allocateLarge(size);
    }

    /** A large object of {@code size} payload bytes: a run of whole chunks ({@link LargeObjects}); null if none is free. */
    BlockRef allocateLarge(long size) {
        return LargeObjects.allocate(this, size);
    }

    /** Frees the large object whose first chunk is {@code chunk} ({@link LargeObjects}). */
    void freeLarge(int chunk) {
        LargeObjects.free(this, chunk);
    }

    void freeSmall(int chunk, long ptr, int cls, long blockIndex, long freedHeader) {
        if (cacheOrKeep(chunk, ptr, cls, freedHeader, false)) {
            return;
        }
        push(chunk, ptr, blockIndex);
    }

    /**
     * The first half of {@link #freeSmall}: true when the freed block needs no push (its
     * generations are used up, or its owner's cache took it), false when it goes on its
     * chunk's free list ({@link #push}, or {@link #pushChains} with others of its chunk).
     * {@code batched}: a batched free's, whose blocks the owner's cache keeps up to
     * {@link ClassPool#BATCHED_CACHE_FACTOR} times its usual limit (each block pushed instead costs the refill that pops it one read).
     */
    boolean cacheOrKeep(int chunk, long ptr, int cls, long freedHeader, boolean batched) {
        if (HeapLayout.generationExhausted(freedHeader)) {
            return true; // retired: its generations are used up; never handed out again
        }
        AllocatorCounts.frees.increment();
        ClassPool p = pools[cls];
        return p != null && p.cacheFreed(chunk, ptr, freedHeader,
                batched ? ClassPool.BATCHED_CACHE_FACTOR * p.cacheLimit : p.cacheLimit);
    }

    /** Pushes a free block on its chunk's free list (tagged Treiber stack), then counts it. */
    void push(int chunk, long ptr, long blockIndex) {
        long e = entry(chunk);
        long top = remote.readLong(e + FREE_HEAD_WORD);
        for (int tries = 0; tries < MAX_CAS_RETRIES; tries++) {
            remote.writeLong(ptr + BLOCK_HEADER_LENGTH, headIndex(top));
            long w = remote.compareAndSwap(e + FREE_HEAD_WORD, top, head(headTag(top) + 1, blockIndex + 1));
            if (w == top) {
                AllocatorCounts.pushes.increment();
                remote.fetchAndAdd(e + COUNT_WORD, 1);
                if (headIndex(top) == 0) {
                    hint(chunk, true); // the list was empty: tell the owner where to look
                }
                return;
            }
            top = w;
        }
        throw DsmTimeoutException.afterTries("free-list push (it kept losing its CAS): segment=" + segment + ", chunk="
                + chunk, node, MAX_CAS_RETRIES, "the block stays freed (retired); the free list is contended: retry");
    }

    /**
     * Pushes the free blocks {@code ptrs[0..n)} (block indexes {@code blockIndexes}) of chunk
     * {@code chunk} on its free list as one pre-linked chain: each block's link to the next is
     * written first (those writes issued together, one batch per node), then the last block's link
     * to the list's top and one CAS that makes the first block the top, then one fetch-and-add of
     * the count by {@code n}. Four round trips for the whole chain where {@link #push} takes four
     * per block; a lost CAS rewrites only the last link. The chain is invisible until the CAS, so
     * no reader of the list sees a half-linked one. The chain's own verbs (head read, link writes,
     * CAS, count) go on the pipelined path (no blocking lane of a connection: the batched free runs
     * beside callers that want them); the hint, when the list was empty ({@link #hint}: a read and
     * a CAS, two more round trips), goes on a blocking lane.
     */
    void pushAll(int chunk, long[] ptrs, long[] blockIndexes, int n) {
        long e = entry(chunk);
        long top = remote.readLongPosted(e + FREE_HEAD_WORD);
        long[] at = new long[n];
        long[] links = new long[n];
        for (int i = 0; i < n; i++) {
            at[i] = ptrs[i] + BLOCK_HEADER_LENGTH;
            links[i] = i + 1 < n ? blockIndexes[i + 1] + 1 : headIndex(top);
        }
        remote.writeLongs(at, links, n);
        for (int tries = 0; tries < MAX_CAS_RETRIES; tries++) {
            long w = remote.compareAndSwapPosted(e + FREE_HEAD_WORD, top, head(headTag(top) + 1, blockIndexes[0] + 1));
            if (w == top) {
                AllocatorCounts.pushes.add(n);
                remote.fetchAndAddPosted(e + COUNT_WORD, n);
                if (headIndex(top) == 0) {
                    hint(chunk, true); // the list was empty: tell the owner where to look
                }
                return;
            }
            top = w;
            remote.writeLongs(new long[]{at[n - 1]}, new long[]{headIndex(top)}, 1);
        }
        throw DsmTimeoutException.afterTries("free-list push of " + n + " blocks (it kept losing its CAS): segment="
                + segment + ", chunk=" + chunk, node, MAX_CAS_RETRIES,
                "the blocks stay freed (retired); the free list is contended: retry");
    }

    /** The free blocks of one chunk to push as one chain ({@link #pushChains}). */
    record Chain(HeapSegment heap, int chunk, long[] ptrs, long[] blockIndexes) {
    }

    /**
     * Pushes every chain of {@code chains} (of any chunks, segments and nodes) as {@link #pushAll}
     * does, each step of all of them issued together: the list heads read in one batch per node,
     * every link written in one, every head CAS in one (the losers' last links rewritten and
     * their CASes sent again, together), every count's fetch-and-add in one, all on the pipelined
     * path; then the hint of each chunk whose list was empty, one chunk after another, each a read
     * and a CAS on a blocking lane ({@link #hint}). About four round trips for the lot, plus two
     * per chunk whose list was empty (every chunk, when the lists were empty). A chain whose head read or
     * link writes fail is pushed on its own by {@link #pushAll} (which writes its links again); a
     * chain that still fails stays freed and on no list (retired), logged.
     */
    static void pushChains(Remote remote, List<Chain> chains) {
        int n = chains.size();
        if (n == 1) {
            pushOne(chains.get(0));
            return;
        }
        long[] heads = new long[n];
        for (int i = 0; i < n; i++) {
            heads[i] = chains.get(i).heap.entry(chains.get(i).chunk) + FREE_HEAD_WORD;
        }
        DsmException[] errors = new DsmException[n];
        byte[][] tops = remote.readAll(heads, Long.BYTES, n, errors);
        List<Integer> live = new ArrayList<>();
        long[] top = new long[n];
        for (int i = 0; i < n; i++) {
            if (errors[i] != null) {
                pushOne(chains.get(i));
            } else {
                top[i] = Words.getLong(tops[i], 0);
                live.add(i);
            }
        }
        int links = 0;
        for (int i : live) {
            links += chains.get(i).ptrs.length;
        }
        long[] at = new long[links];
        long[] values = new long[links];
        int k = 0;
        for (int i : live) {
            Chain c = chains.get(i);
            for (int j = 0; j < c.ptrs.length; j++, k++) {
                at[k] = c.ptrs[j] + BLOCK_HEADER_LENGTH;
                values[k] = j + 1 < c.ptrs.length ? c.blockIndexes[j + 1] + 1 : headIndex(top[i]);
            }
        }
        try {
            remote.writeLongs(at, values, links);
        } catch (DsmException e) {
            live.forEach(i -> pushOne(chains.get(i)));
            return;
        }
        List<Integer> pushed = new ArrayList<>();
        for (int tries = 0; tries < MAX_CAS_RETRIES && !live.isEmpty(); tries++) {
            int m = live.size();
            long[] ptrs = new long[m];
            long[] expected = new long[m];
            long[] updates = new long[m];
            for (int j = 0; j < m; j++) {
                int i = live.get(j);
                ptrs[j] = heads[i];
                expected[j] = top[i];
                updates[j] = head(headTag(top[i]) + 1, chains.get(i).blockIndexes[0] + 1);
            }
            DsmException[] casErrors = new DsmException[m];
            long[] witnesses = remote.compareAndSwapAll(ptrs, expected, updates, m, casErrors);
            List<Integer> lost = new ArrayList<>();
            for (int j = 0; j < m; j++) {
                int i = live.get(j);
                Chain c = chains.get(i);
                if (casErrors[j] != null) {
                    LOG.warn("{} freed blocks of node={} segment={} chunk={} stay retired: their free-list push failed: {}",
                            c.ptrs.length, c.heap.node, c.heap.segment, c.chunk, casErrors[j].getMessage());
                } else if (witnesses[j] == top[i]) {
                    pushed.add(i);
                } else {
                    top[i] = witnesses[j];
                    lost.add(i);
                }
            }
            if (!lost.isEmpty()) {
                long[] last = new long[lost.size()];
                long[] link = new long[lost.size()];
                for (int j = 0; j < last.length; j++) {
                    Chain c = chains.get(lost.get(j));
                    last[j] = c.ptrs[c.ptrs.length - 1] + BLOCK_HEADER_LENGTH;
                    link[j] = headIndex(top[lost.get(j)]);
                }
                try {
                    remote.writeLongs(last, link, last.length);
                } catch (DsmException e) {
                    lost.forEach(i -> pushOne(chains.get(i)));
                    lost.clear();
                }
            }
            live = lost;
        }
        for (int i : live) {
            Chain c = chains.get(i);
            LOG.warn("{} freed blocks of node={} segment={} chunk={} stay retired: their free-list push kept losing its CAS",
                    c.ptrs.length, c.heap.node, c.heap.segment, c.chunk);
        }
        int m = pushed.size();
        long[] counts = new long[m];
        long[] deltas = new long[m];
        for (int j = 0; j < m; j++) {
            Chain c = chains.get(pushed.get(j));
            counts[j] = c.heap.entry(c.chunk) + COUNT_WORD;
            deltas[j] = c.ptrs.length;
            AllocatorCounts.pushes.add(c.ptrs.length);
        }
        remote.fetchAndAddAll(counts, deltas, m, new DsmException[m]); // a failed count only keeps the chunk (as push's)
        for (int i : pushed) {
            if (headIndex(top[i]) == 0) {
                Chain c = chains.get(i);
                c.heap.hint(c.chunk, true); // the list was empty: tell the owner where to look
            }
        }
    }

    private static void pushOne(Chain c) {
        try {
            c.heap.pushAll(c.chunk, c.ptrs, c.blockIndexes, c.ptrs.length);
        } catch (DsmException e) {
            LOG.warn("{} freed blocks of node={} segment={} chunk={} stay retired: their free-list push failed: {}",
                    c.ptrs.length, c.heap.node, c.heap.segment, c.chunk, e.getMessage());
        }
    }

    /**
     * Returns this node's cached blocks of this segment to their free lists and gives back
     * every chunk it owns whose blocks are all on its free list. Correct without a lock
     * held across its verbs: it first makes itself the busy thread of every pool (waiting,
     * with no lock held, for refills in flight to end), so no thread of this node carves,
     * takes a free list or claims in this segment until it is done; other nodes only push
     * onto free lists. Blocks freed into a cache meanwhile are not on the free list, so
     * their chunk's COUNT stays below the carved count and the chunk is kept.
     */
    int trim() {
        // every class's pool, created if it is not there yet: a pool created after a snapshot of the
        // array would not be made busy, could find a chunk of its class by its scan and pop from it while
        // this trim releases that chunk (found by PoolConcurrencyTest: a free list that left its chunk)
        ClassPool[] ps = new ClassPool[pools.length];
        for (int cls = 0; cls < ps.length; cls++) {
            ps[cls] = pool(cls);
        }
        List<ClassPool> busy = new ArrayList<>();
        try {
            for (ClassPool p : ps) {
                if (p != null) {
                    p.beginBusy(); // in class order, as every trim: two trims never wait on each other
                    busy.add(p);
                    p.returnCached();
                }
            }
            int released = 0;
            long[] t = readTable();
            for (int c = 0; c < chunkCount; c++) {
                long st = t[c * 4];
                if (stateOf(st) == SMALL && ownerOf(st) == self && !isPending(st)) {
                    int cls = classOf(st);
                    long carved = Math.min(t[c * 4 + 1], perChunk(cls));
                    if (t[c * 4 + 3] == carved) {
                        // forget the chunk before the CAS: if the CAS runs but its verb fails, this node
                        // must not pop the list of a FREE chunk (another node may claim and carve it). If
                        // it did not run, a later scan finds the chunk again and takes it over.
                        if (ps[cls] != null) {
                            ps[cls].forget(c);
                        }
                        if (remote.compareAndSwap(entry(c), st, state(FREE, 0, 0, epochOf(st))) == st) {
                            released++;
                        }
                    }
                }
            }
            return released;
        } finally {
            for (ClassPool p : busy) {
                p.endBusy();
            }
        }
    }
}
