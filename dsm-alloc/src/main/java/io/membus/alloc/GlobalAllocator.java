package io.membus.alloc;

import io.membus.core.RemoteMemory;
import io.membus.core.RemotePtr;
import io.membus.core.Segment;
import io.membus.core.SegmentDescriptor;
import io.membus.core.Words;
import io.membus.core.directory.DirectoryListener;
import io.membus.core.directory.SegmentDirectory;
import io.membus.core.error.DsmConfigException;
import io.membus.core.error.DsmClosedException;
import io.membus.core.error.DsmException;
import io.membus.core.directory.PeerInfo;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;

import static io.membus.alloc.HeapLayout.BLOCK_HEADER_LENGTH;
import static io.membus.alloc.HeapLayout.KIND_LARGE;
import static io.membus.alloc.HeapLayout.KIND_SMALL;
import static io.membus.alloc.HeapLayout.blockClassOf;
import static io.membus.alloc.HeapLayout.generationOf;
import static io.membus.alloc.HeapLayout.kindOf;

/**
 * The global allocator of one node: allocates blocks in the heap segments of any
 * node of the cluster, with no coordinator. Every decision that other nodes must
 * agree on is one remote atomic on the target segment's chunk table or on a block
 * header (see {@link HeapLayout} and docs/allocator.md):
 * <ul>
 *   <li>a chunk is claimed with one CAS on its table entry (owner node, epoch);</li>
 *   <li>the owner carves blocks of one size class from it in batches with one
 *       fetch-and-add on the chunk's bump word, and hands them out from a local cache,
 *       so most allocations make no remote access at all;</li>
 *   <li>a block is freed, from any node, with one CAS on its header that moves its
 *       generation on (the linearization point of the free: a second free or a use
 *       through the old reference fails from then on), then pushed on the chunk's
 *       free list in remote memory (a tagged Treiber stack); the owner takes the whole
 *       list with one CAS when its batches run out;</li>
 *   <li>large objects take a run of whole chunks, each claimed by CAS, rolled back
 *       when another node wins one of them.</li>
 * </ul>
 *
 * <p>One allocator per node (per transport instance); it learns about members and
 * segments only through the {@link SegmentDirectory} SPI, so a replicated directory
 * drops in. Every remote operation is one synchronous verb with the deadline of
 * {@link RemoteMemory}; each waits for the one before it, so no step depends on the
 * order of verbs in flight.
 *
 * <p><b>Note:</b> thread-safe: any number of threads may allocate, free, read and
 * write concurrently. A block's bytes written through {@link #write} by one node are
 * seen by a {@link #read} on any node issued after the write returned (the
 * visibility rule of the verbs); {@link #allocate} and {@link #free} are atomic with
 * respect to each other on every node.
 */
public final class GlobalAllocator implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(GlobalAllocator.class);
    /** The nodes with an open allocator: their transports ({@link RemoteMemory#transport()}), by identity. */
    private static final Set<Object> IN_USE = Collections.newSetFromMap(new IdentityHashMap<>());

    private final RemoteMemory memory;
    private final Remote remote;
    private final SegmentDirectory directory;
    private final AllocatorConfig config;
    private final int self;
    /** The heap segments found so far, by node and segment, and the placements' choice among them. */
    private final HeapFinder heaps;
    private final HeapFormat format;
    /** Checked reads and writes of a block's payload. */
    private final BlockAccess blocks;
    /** The usage rows of the heaps, read from their chunk tables. */
    private final UsageReader usage;
    private final Set<Integer> orphaned = ConcurrentHashMap.newKeySet();
    private final DirectoryListener listener;
    private volatile boolean closed;
    /** Runs the *Async forms and orphan adoption: daemon threads that end when idle. */
    private final AsyncCalls async;

    /**
     * An allocator for the node of {@code memory}'s transport. Registers a directory
     * listener (removed by {@link #close()}).
     *
     * @throws DsmConfigException when another open allocator uses the same transport
     */
    public GlobalAllocator(RemoteMemory memory, AllocatorConfig config) {
        this(memory, config, new Remote(memory));
    }

    /** With the verbs of {@code remote} (tests inject verbs whose outcome a deadline leaves unknown). */
    GlobalAllocator(RemoteMemory memory, AllocatorConfig config, Remote remote) {
        this.memory = memory;
        this.remote = remote;
        this.directory = memory.directory();
        this.config = config;
        this.self = memory.localNodeId();
        this.format = new HeapFormat(remote, self, config);
        this.heaps = new HeapFinder(memory, remote, config, format);
        this.blocks = new BlockAccess(remote);
        this.usage = new UsageReader(heaps, config);
        this.async = new AsyncCalls(self);
        if (config.refillAhead()) {
            remote.ahead = async::execute;
        }
        synchronized (IN_USE) {
            if (!IN_USE.add(memory.transport())) {
                throw new DsmConfigException("alloc", "node " + self, "one open GlobalAllocator per node:"
                        + " close the other one, or share it between threads (it is thread-safe)");
            }
        }
        this.listener = new DirectoryListener() {
            @Override
            public void memberUp(PeerInfo member) {
                heaps.changed();
            }

            @Override
            public void memberRemoved(PeerInfo member, String reason) {
                heaps.forgetNode(member.nodeId());
                if (member.nodeId() != self) {
                    orphaned.add(member.nodeId());
                    if (GlobalAllocator.this.config.adoptOrphans()) {
                        runAsync(() -> adoptOrphans(member.nodeId())).exceptionally(e -> {
                            LOG.warn("adopting the chunks of node {} failed; call adoptOrphans({}) again",
                                    member.nodeId(), member.nodeId(), e);
                            return null;
                        });
                    }
                }
            }

            @Override
            public void segmentAdded(SegmentDescriptor segment) {
                heaps.changed();
            }

            @Override
            public void segmentRemoved(SegmentDescriptor segment) {
                heaps.changed();
                heaps.forgetSegment(segment.nodeId(), segment.index());
            }
        };
        directory.addListener(listener);
    }

    public AllocatorConfig config() {
        return config;
    }

    public RemoteMemory memory() {
        return memory;
    }

    // ------------------------------------------------------------------ formatting

    /**
     * Formats this node's heap segments that are not formatted yet (their data area
     * must be zero, as a fresh segment is). A segment already formatted is left as it
     * is, with the chunk size it was formatted with (its blocks stay valid).
     *
     * @return how many segments were formatted by this call
     * @throws DsmConfigException     when none of the configured heap segments is exported
     *                                here, or the chunk size does not fit a segment
     * @throws HeapCorruptedException when a segment's header is neither zero nor a valid heap header
     */
    public synchronized int formatLocalSegments() {
        checkOpen();
        int formatted = 0;
        int present = 0;
        for (int index : config.heapSegments()) {
            Segment s = memory.localSegment(index);
            if (s == null) {
                continue;
            }
            present++;
            SegmentDescriptor d = s.descriptor();
            boolean done = format.format(d);
            heaps.forgetSegment(d.nodeId(), d.index()); // found again with its geometry on next use
            if (done) {
                formatted++;
            }
        }
        if (present == 0) {
            throw new DsmConfigException("alloc.heap-segments", Arrays.toString(config.heapSegments()),
                    "indexes of segments this node exports (node " + self + " exports "
                            + memory.localSegments().stream().map(Segment::index).toList()
                            + "); export the heap segments before formatting them");
        }
        heaps.changed();
        return formatted;
    }

    // ------------------------------------------------------------------ allocation

    /**
     * The largest payload one block can have, in bytes: the largest object of the heaps this
     * node reaches now (0 when it reaches none). An {@link #allocate} of more fails with
     * {@link AllocationSizeException}; one of less may still find every heap full. Reads the
     * header of a heap not seen before; thread-safe.
     */
    public long largestObject() {
        List<HeapSegment> all = new ArrayList<>();
        for (int node : heaps.heapNodes()) {
            heaps.addReachableHeapsOf(node, all);
        }
        return all.stream().mapToLong(HeapSegment::maxObject).max().orElse(0);
    }

    /** Allocates {@code size} payload bytes with the configured default placement. */
    public BlockRef allocate(long size) {
        return allocate(size, config.defaultPlacement());
    }

    /**
     * Allocates a block of at least {@code size} payload bytes where the placement says.
     * The contents of the block are unspecified (zero for a block never used before).
     *
     * @throws AllocationSizeException     when size is not positive or larger than any heap can hold
     * @throws PlacementException          when the placement names no usable heap
     * @throws OutOfRemoteMemoryException  when every heap the placement allows is full
     */
    public BlockRef allocate(long size, Placement placement) {
        checkOpen();
        if (size <= 0 || size > Integer.MAX_VALUE - BLOCK_HEADER_LENGTH) {
            throw new AllocationSizeException(size, Integer.MAX_VALUE - BLOCK_HEADER_LENGTH);
        }
        // roundRobin, byKey and localFirst move on past a heap that is full or cannot be reached; local and node do not
        boolean spread = placement.kind() == Placement.Kind.ROUND_ROBIN || placement.kind() == Placement.Kind.KEY
                || placement.kind() == Placement.Kind.LOCAL_FIRST;
        List<HeapSegment> targets = null;
        for (int round = 0; round < 2; round++) {
            targets = heaps.targets(placement);
            long largest = 0;
            DsmException unreachable = null;
            int tried = 0;
            for (HeapSegment h : targets) {
                largest = Math.max(largest, h.maxObject());
                if (size <= h.maxObject()) {
                    tried++;
                    try {
                        BlockRef r = h.allocate(size);
                        if (r != null) {
                            return r;
                        }
                    } catch (HeapCorruptedException e) {
                        throw e;
                    } catch (DsmException e) {
                        if (!spread) {
                            throw e;
                        }
                        if (unreachable == null) {
                            unreachable = e;
                        } else {
                            unreachable.addSuppressed(e);
                        }
                    }
                }
            }
            if (size > largest) {
                throw new AllocationSizeException(size, largest);
            }
            if (unreachable != null && tried == 1 + unreachable.getSuppressed().length) {
                throw unreachable; // every heap that could hold it failed: none was full
            }
            if (round == 0 && trimReachable() == 0) {
                break; // nothing released here: a retry cannot succeed
            }
        }
        throw new OutOfRemoteMemoryException(size, placement.toString(), usage.of(targets));
    }

    /** {@link #trim()} of every heap that can be reached (before an out-of-memory is reported). */
    private int trimReachable() {
        int released = 0;
        for (HeapSegment h : heaps.values()) {
            if (h.formatted) {
                try {
                    released += h.trim();
                } catch (HeapCorruptedException e) {
                    throw e;
                } catch (DsmException e) {
                    LOG.debug("trim before out-of-memory skipped node={} segment={}: {}", h.node, h.segment,
                            e.toString());
                }
            }
        }
        return released;
    }

    /**
     * Frees a block, from any node. The free takes effect (for every node) at the CAS
     * that moves the block's generation on; the block is then on its chunk's free list
     * or in its owner's cache, and will be handed out again.
     *
     * @throws DoubleFreeException   when the block was freed since {@code ref} was allocated
     * @throws InvalidBlockException when {@code ref} names no block of a heap
     */
    public void free(BlockRef ref) {
        checkOpen();
        long ptr = ref.ptr();
        long expected = ref.header();
        int kind = kindOf(expected);
        HeapSegment h = heaps.heapOfPointer(ptr);
        int chunk = checkFreeable(h, ref);
        long freed = HeapLayout.nextHeader(expected);
        long witness = HeapLayout.unseal(remote.compareAndSwap(ptr, HeapLayout.seal(expected, ptr),
                HeapLayout.seal(freed, ptr)), ptr);
        if (witness != expected) {
            throw wrongHeader(ref, witness);
        }
        if (kind == KIND_LARGE) {
            h.freeLarge(chunk);
        } else {
            h.freeSmall(chunk, ptr, blockClassOf(expected), blockIndexOf(h, chunk, ref), freed);
        }
    }

    /**
     * Frees many blocks at once, from any node: for each, what {@link #free} does, with the
     * verbs of all of them issued together. Every block's generation CAS goes out in one
     * {@link RemoteMemory#batch()} (one batch per node, on the pipelined path: N frees to one
     * node cost about one round trip and no blocking lane); the blocks that then go on a free
     * list are pushed per chunk as one pre-linked chain, every chunk's steps issued together
     * ({@link HeapSegment#pushChains}: the list heads read in one batch, the links written in
     * one, the head CASes in one, the counts' fetch-and-adds in one: about four round trips for
     * all the chunks, where {@link #free} takes four per block, plus the hint of each chunk whose
     * list was empty: a read and a CAS on a blocking lane, chunk after chunk); the blocks the owner's cache takes cost no verb past the CAS. Each block's
     * free takes effect at its own generation CAS, as {@link #free}'s: a block is never freed
     * twice or freed as another block's, whatever happens to the others of the call.
     *
     * @param refs the blocks; a null entry is skipped
     * @return per block, null when it was freed (its CAS landed; if its push then failed, it
     *         stays freed and is never handed out again, as {@link #free}'s), else the typed
     *         error {@link #free} would have thrown for it — {@link DoubleFreeException} when it
     *         was freed since its reference was taken, {@link InvalidBlockException} when the
     *         reference names no block, the verb's own error (timeout, node unavailable: then
     *         {@link DsmException#mayHaveRun()} says whether the CAS may have landed)
     */
    public DsmException[] freeAll(BlockRef[] refs) {
        checkOpen();
        int n = refs.length;
        DsmException[] errors = new DsmException[n];
        HeapSegment[] heapOf = new HeapSegment[n];
        int[] chunkOf = new int[n];
        long[] ptrs = new long[n];
        long[] expected = new long[n];
        long[] updates = new long[n];
        int[] at = new int[n];
        int m = 0;
        for (int i = 0; i < n; i++) {
            BlockRef ref = refs[i];
            if (ref == null) {
                continue;
            }
            try {
                HeapSegment h = heaps.heapOfPointer(ref.ptr());
                int chunk = checkFreeable(h, ref);
                heapOf[i] = h;
                chunkOf[i] = chunk;
                ptrs[m] = ref.ptr();
                expected[m] = HeapLayout.seal(ref.header(), ref.ptr());
                updates[m] = HeapLayout.seal(HeapLayout.nextHeader(ref.header()), ref.ptr());
                at[m++] = i;
            } catch (DsmException e) {
                errors[i] = e;
            }
        }
        DsmException[] casErrors = new DsmException[m];
        long[] witnesses = m == 0 ? new long[0] : remote.compareAndSwapAll(ptrs, expected, updates, m, casErrors);
        // the blocks to push, grouped by heap segment and chunk (in call order within a chunk)
        java.util.Map<HeapSegment, java.util.Map<Integer, List<Integer>>> pushes = new java.util.LinkedHashMap<>();
        for (int j = 0; j < m; j++) {
            int i = at[j];
            BlockRef ref = refs[i];
            if (casErrors[j] != null) {
                errors[i] = casErrors[j];
                continue;
            }
            long witness = HeapLayout.unseal(witnesses[j], ref.ptr());
            if (witness != ref.header()) {
                errors[i] = wrongHeader(ref, witness);
                continue;
            }
            HeapSegment h = heapOf[i];
            if (kindOf(ref.header()) == KIND_LARGE) {
                try {
                    h.freeLarge(chunkOf[i]);
                } catch (DsmException e) {
                    LOG.warn("freed large object block={} stays retired: its chunks' release failed: {}",
                            RemotePtr.toString(ref.ptr()), e.getMessage());
                }
            } else if (!h.cacheOrKeep(chunkOf[i], ref.ptr(), blockClassOf(ref.header()),
                    HeapLayout.nextHeader(ref.header()), true)) {
                pushes.computeIfAbsent(h, k -> new java.util.TreeMap<>())
                        .computeIfAbsent(chunkOf[i], k -> new ArrayList<>()).add(i);
            }
        }
        List<HeapSegment.Chain> chains = new ArrayList<>();
        for (java.util.Map.Entry<HeapSegment, java.util.Map<Integer, List<Integer>>> byHeap : pushes.entrySet()) {
            HeapSegment h = byHeap.getKey();
            for (java.util.Map.Entry<Integer, List<Integer>> byChunk : byHeap.getValue().entrySet()) {
                int chunk = byChunk.getKey();
                List<Integer> idx = byChunk.getValue();
                long[] ps = new long[idx.size()];
                long[] bs = new long[idx.size()];
                for (int k = 0; k < ps.length; k++) {
                    BlockRef ref = refs[idx.get(k)];
                    ps[k] = ref.ptr();
                    bs[k] = blockIndexOf(h, chunk, ref);
                }
                chains.add(new HeapSegment.Chain(h, chunk, ps, bs));
            }
        }
        if (!chains.isEmpty()) {
            // as free's push: a chain whose push fails is freed (generations moved on) but on no list: retired
            HeapSegment.pushChains(remote, chains);
        }
        return errors;
    }

    /** The chunk of {@code ref}'s block in {@code h}, after {@link #free}'s checks of the reference. */
    private static int checkFreeable(HeapSegment h, BlockRef ref) {
        long ptr = ref.ptr();
        long expected = ref.header();
        int kind = kindOf(expected);
        int chunk = h.chunkOf(ptr);
        if (chunk < 0) {
            throw new InvalidBlockException(ptr, "outside the chunks of the heap");
        }
        long inChunk = RemotePtr.offset(ptr) - h.dataStart - ((long) chunk << h.chunkShift);
        if (kind == KIND_SMALL) {
            int cls = blockClassOf(expected);
            if (cls >= SizeClasses.count() || inChunk % SizeClasses.blockSize(cls) != 0) {
                throw new InvalidBlockException(ptr, "not at a block boundary of class " + cls);
            }
        } else if (kind != KIND_LARGE || inChunk != 0) {
            throw new InvalidBlockException(ptr, "the reference's header is not a block header: header=0x"
                    + Long.toHexString(expected));
        }
        return chunk;
    }

    private static long blockIndexOf(HeapSegment h, int chunk, BlockRef ref) {
        long inChunk = RemotePtr.offset(ref.ptr()) - h.dataStart - ((long) chunk << h.chunkShift);
        return inChunk / SizeClasses.blockSize(blockClassOf(ref.header()));
    }

    /** The error of a generation CAS on {@code ref}'s block that found {@code witness} there. */
    private static DsmException wrongHeader(BlockRef ref, long witness) {
        long expected = ref.header();
        if (kindOf(witness) == kindOf(expected) && blockClassOf(witness) == blockClassOf(expected)
                && generationOf(witness) > generationOf(expected)) {
            return new DoubleFreeException(ref.ptr(), ref.generation(), generationOf(witness));
        }
        return new InvalidBlockException(ref.ptr(), "the header there is not this reference's block: header=0x"
                + Long.toHexString(witness) + ", expected=0x" + Long.toHexString(expected)
                + " (freed long ago and its chunk reused for other sizes, or never allocated)");
    }

    /**
     * {@link #allocate(long, Placement)} without blocking the caller: an allocation is a
     * short chain of dependent verbs, run on the allocator's own threads (at most
     * {@value AsyncCalls#THREADS} at once, {@value AsyncCalls#QUEUE} waiting; past that the stage
     * fails at once with a typed error). The stage fails as {@code allocate} throws.
     */
    public CompletionStage<BlockRef> allocateAsync(long size, Placement placement) {
        return supplyAsync(() -> allocate(size, placement));
    }

    /** {@link #allocate(long)} without blocking the caller (see {@link #allocateAsync(long, Placement)}). */
    public CompletionStage<BlockRef> allocateAsync(long size) {
        return supplyAsync(() -> allocate(size));
    }

    /** {@link #free(BlockRef)} without blocking the caller (see {@link #allocateAsync(long, Placement)}). */
    public CompletionStage<Void> freeAsync(BlockRef ref) {
        return runAsync(() -> free(ref));
    }

    private CompletableFuture<Void> runAsync(Runnable task) {
        return supplyAsync(() -> {
            task.run();
            return null;
        });
    }

    private <T> CompletableFuture<T> supplyAsync(java.util.function.Supplier<T> task) {
        try {
            checkOpen();
        } catch (DsmException e) {
            return CompletableFuture.failedFuture(e);
        }
        return async.supply(task);
    }

    /**
     * Reads {@code length} payload bytes from {@code offset}. The block's header is read
     * with (or before) the bytes and again after them; the bytes are returned only when
     * both equal the reference's, so nothing written by a later owner of the block is
     * ever returned.
     *
     * @throws UseAfterFreeException when the block was freed since {@code ref} was allocated
     * @throws BlockBoundsException  when the range leaves the block
     */
    public byte[] read(BlockRef ref, long offset, int length) {
        return blocks.read(ref, offset, length);
    }

    /** Reads the little-endian payload word at {@code offset} (checked like {@link #read}). */
    public long readLong(BlockRef ref, long offset) {
        return Words.getLong(read(ref, offset, Long.BYTES), 0);
    }

    /**
     * Writes {@code src} at payload {@code offset}. The header is checked before the
     * write (a stale reference writes nothing) and after it: a free that races with
     * this write (an application data race on the block) is reported after the fact.
     *
     * @throws UseAfterFreeException when the block was freed since {@code ref} was allocated
     * @throws BlockBoundsException  when the range leaves the block
     */
    public void write(BlockRef ref, long offset, byte[] src) {
        blocks.write(ref, offset, src);
    }

    /** Writes the little-endian payload word at {@code offset} (checked like {@link #write}). */
    public void writeLong(BlockRef ref, long offset, long value) {
        byte[] b = new byte[Long.BYTES];
        Words.putLong(b, 0, value);
        write(ref, offset, b);
    }

    /**
     * A stored pointer ({@link BlockRef#ptr()}, e.g. one bound to a name) as a checked
     * reference again: reads the block's chunk-table entry and header (two verbs) and
     * returns the reference of the block allocated there, with its header word and the
     * capacity of its size class (or of the chunks a large object spans).
     *
     * <p>What a pointer cannot say: it carries no generation, so a small block that was
     * freed and handed out again (its chunk still in use) is returned as the block it is
     * now. To notice such reuse, keep the header word too ({@link BlockRef#header()}) and
     * rebuild with {@link BlockRef#of}, whose every use checks it. A freed small block
     * still on its chunk's free list, or in its owner's cache, looks like an allocated one
     * (the header moves on at the free and keeps that value at the next allocation).
     *
     * @throws FreedBlockException   when the block is not allocated any more: its chunk was given
     *                               back or claimed again, the object was freed, or the block is retired
     * @throws InvalidBlockException when no block was ever handed out there: not a heap segment,
     *                               outside the chunks, not at a block boundary of its chunk's size
     *                               class, inside a large object, or never carved
     * @throws DsmException          the typed failure of a verb (an unknown node or segment, a deadline)
     */
    public BlockRef ref(long ptr) {
        checkOpen();
        HeapSegment h = heaps.heapOfPointer(ptr);
        return h.refAt(ptr);
    }

    /** Whether {@code ref}'s block is still the one it was allocated as (one read of the header). */
    public boolean isLive(BlockRef ref) {
        return blocks.isLive(ref);
    }

    // ------------------------------------------------------------------ orphans, trim, usage

    /**
     * Takes over the chunks that {@code nodeId} owned in every live heap segment: the
     * blocks it allocated stay valid (their headers are untouched), blocks freed into
     * those chunks are reused by this node, and large objects can be freed as before.
     * Blocks the departed node had carved but not yet handed out are lost (at most one
     * batch per size class and chunk). Any number of nodes may call this at once: each
     * chunk goes to exactly one of them (one CAS per chunk).
     *
     * @return the number of chunks this call adopted
     * @throws PlacementException when {@code nodeId} is a live member (its chunks are not orphans)
     */
    public int adoptOrphans(int nodeId) {
        checkOpen();
        if (nodeId == self) {
            return 0; // a restarted node finds its chunks by their owner field: nothing to adopt
        }
        if (directory.member(nodeId).isPresent()) {
            throw new PlacementException("adopt(" + nodeId + ")", nodeId, "the node is a live member; only the"
                    + " chunks of a node that left the cluster can be adopted");
        }
        int adopted = 0;
        for (int node : heaps.heapNodes()) {
            for (int seg : config.heapSegments()) {
                HeapSegment h = heaps.heap(node, seg);
                if (h == null) {
                    continue;
                }
                adopted += h.adoptChunksOf(nodeId);
            }
        }
        orphaned.remove(nodeId);
        if (adopted > 0) {
            LOG.info("adopted orphaned chunks: fromNode={}, chunks={}, byNode={}", nodeId, adopted, self);
        }
        return adopted;
    }

    /** Members that left since this allocator started and whose chunks this node has not adopted. */
    public Set<Integer> orphanedNodes() {
        return Set.copyOf(orphaned);
    }

    /**
     * Returns this node's cached blocks to their chunks' free lists and gives back
     * every chunk this node owns whose blocks are all free, so other nodes and other
     * size classes can claim it.
     *
     * @return the number of chunks released
     */
    public int trim() {
        int released = 0;
        for (HeapSegment h : heaps.values()) {
            if (h.formatted) {
                released += h.trim();
            }
        }
        return released;
    }

    /** Usage of every heap segment of every live member (one table read per segment). */
    public HeapUsage usage() {
        return usage.all();
    }

    /**
     * Usage of this node's own heap segment {@code segment} (its chunk table, read in local
     * memory): what the node's meters report ({@code membus.heap.*}).
     */
    public HeapUsage.SegmentUsage localUsage(int segment) {
        return usage.of(self, segment);
    }

    private void checkOpen() {
        if (closed) {
            throw new DsmClosedException("the allocator of node " + self);
        }
    }

    /**
     * Returns cached blocks to their free lists and releases empty chunks (best effort:
     * segments that cannot be reached are skipped), then detaches from the directory.
     * Blocks allocated through this allocator stay valid. Idempotent.
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        try {
            for (HeapSegment h : heaps.values()) {
                if (h.formatted) {
                    try {
                        h.trim();
                    } catch (DsmException e) {
                        LOG.warn("allocator close: cached blocks of node={} segment={} not returned (they stay"
                                + " unused until their chunk is adopted): {}", h.node, h.segment, e.getMessage());
                    }
                }
            }
        } finally {
            closed = true;
            async.shutdown();
            directory.removeListener(listener);
            synchronized (IN_USE) {
                IN_USE.remove(memory.transport());
            }
        }
    }

}
