package io.membus.alloc;

import io.membus.core.RemoteMemory;
import io.membus.core.RemotePtr;
import io.membus.core.Segment;
import io.membus.core.SegmentDescriptor;
import io.membus.core.Words;
import io.membus.core.directory.DirectoryListener;
import io.membus.core.directory.SegmentDirectory;
import io.membus.core.error.DsmConfigException;
import io.membus.core.error.DsmException;
import io.membus.core.error.ErrorCode;
import io.membus.core.transport.PeerInfo;
import io.membus.core.transport.Transport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.BitSet;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.ReentrantLock;

import static io.membus.alloc.HeapLayout.BLOCK_HEADER_LENGTH;
import static io.membus.alloc.HeapLayout.BUMP_WORD;
import static io.membus.alloc.HeapLayout.COUNT_WORD;
import static io.membus.alloc.HeapLayout.ENTRY_LENGTH;
import static io.membus.alloc.HeapLayout.FREE;
import static io.membus.alloc.HeapLayout.FREE_HEAD_WORD;
import static io.membus.alloc.HeapLayout.KIND_LARGE;
import static io.membus.alloc.HeapLayout.KIND_SMALL;
import static io.membus.alloc.HeapLayout.LARGE_CLASS;
import static io.membus.alloc.HeapLayout.LARGE_HEAD;
import static io.membus.alloc.HeapLayout.LARGE_TAIL;
import static io.membus.alloc.HeapLayout.SMALL;
import static io.membus.alloc.HeapLayout.blockClassOf;
import static io.membus.alloc.HeapLayout.blockHeader;
import static io.membus.alloc.HeapLayout.classOf;
import static io.membus.alloc.HeapLayout.epochOf;
import static io.membus.alloc.HeapLayout.generationOf;
import static io.membus.alloc.HeapLayout.head;
import static io.membus.alloc.HeapLayout.headIndex;
import static io.membus.alloc.HeapLayout.headTag;
import static io.membus.alloc.HeapLayout.kindOf;
import static io.membus.alloc.HeapLayout.ownerOf;
import static io.membus.alloc.HeapLayout.state;
import static io.membus.alloc.HeapLayout.stateOf;

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
 * <p>One allocator per node (per {@link Transport}); it learns about members and
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
    private static final Set<Transport> IN_USE = Collections.newSetFromMap(new IdentityHashMap<>());
    private static final long UNFORMATTED_RECHECK_NANOS = 200_000_000L;
    private static final int TABLE_READ_PIECE = 1 << 20;
    private static final int MAX_CAS_RETRIES = 100_000;
    private static final int SCAN_SLICE = 256;

    private final RemoteMemory memory;
    private final Remote remote;
    private final SegmentDirectory directory;
    private final AllocatorConfig config;
    private final int self;
    private final Map<Long, Heap> heaps = new ConcurrentHashMap<>();
    private final AtomicInteger roundRobin = new AtomicInteger();
    private final Set<Integer> orphaned = ConcurrentHashMap.newKeySet();
    private final DirectoryListener listener;
    private volatile int[] heapNodes;
    private volatile boolean closed;

    /**
     * An allocator for the node of {@code memory}'s transport. Registers a directory
     * listener (removed by {@link #close()}).
     *
     * @throws DsmConfigException when another open allocator uses the same transport
     */
    public GlobalAllocator(RemoteMemory memory, AllocatorConfig config) {
        this.memory = memory;
        this.remote = new Remote(memory);
        this.directory = memory.directory();
        this.config = config;
        this.self = memory.localNodeId();
        synchronized (IN_USE) {
            if (!IN_USE.add(memory.transport())) {
                throw new DsmConfigException("alloc", "node " + self, "one open GlobalAllocator per node:"
                        + " close the other one, or share it between threads (it is thread-safe)");
            }
        }
        this.listener = new DirectoryListener() {
            @Override
            public void memberUp(PeerInfo member) {
                heapNodes = null;
            }

            @Override
            public void memberRemoved(PeerInfo member, String reason) {
                heapNodes = null;
                heaps.keySet().removeIf(k -> (int) (k >>> 8) == member.nodeId());
                if (member.nodeId() != self) {
                    orphaned.add(member.nodeId());
                    if (GlobalAllocator.this.config.adoptOrphans()) {
                        CompletableFuture.runAsync(() -> adoptOrphans(member.nodeId())).exceptionally(e -> {
                            LOG.warn("adopting the chunks of node {} failed; call adoptOrphans({}) again",
                                    member.nodeId(), member.nodeId(), e);
                            return null;
                        });
                    }
                }
            }

            @Override
            public void segmentAdded(SegmentDescriptor segment) {
                heapNodes = null;
            }

            @Override
            public void segmentRemoved(SegmentDescriptor segment) {
                heapNodes = null;
                heaps.remove(key(segment.nodeId(), segment.index()));
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
            Segment s = memory.transport().table().get(index);
            if (s == null) {
                continue;
            }
            present++;
            if (format(s.descriptor())) {
                formatted++;
            }
        }
        if (present == 0) {
            throw new DsmConfigException("alloc.heap-segments", Arrays.toString(config.heapSegments()),
                    "indexes of segments this node exports (node " + self + " exports "
                            + memory.transport().table().all().stream().map(Segment::index).toList()
                            + "); export the heap segments before formatting them");
        }
        heapNodes = null;
        return formatted;
    }

    private boolean format(SegmentDescriptor d) {
        long base = d.pointer(0);
        byte[] hdr = remote.read(base, HeapLayout.HEADER_LENGTH);
        long magic = Words.getLong(hdr, HeapLayout.MAGIC_OFFSET);
        if (magic != 0) {
            geometry(d, hdr); // validates, throws HeapCorruptedException
            heaps.remove(key(d.nodeId(), d.index()));
            return false;
        }
        for (byte b : hdr) {
            if (b != 0) {
                throw new HeapCorruptedException(d.nodeId(), d.index(), "the header holds bytes that are not a heap"
                        + " header (magic=0), so the segment is in use for something else");
            }
        }
        int shift = config.chunkShift();
        int count = HeapLayout.chunkCount(d.size(), shift);
        if (count < 1) {
            throw new DsmConfigException("alloc.chunk-size", config.chunkSize(), "at most about "
                    + (d.size() - HeapLayout.HEADER_LENGTH - ENTRY_LENGTH) + " bytes: segment " + d.index()
                    + " has " + d.size() + " bytes, too small for one chunk");
        }
        long dataStart = HeapLayout.dataStart(count);
        for (long off = HeapLayout.TABLE_OFFSET; off < dataStart; off += TABLE_READ_PIECE) {
            remote.write(base + off, new byte[(int) Math.min(TABLE_READ_PIECE, dataStart - off)]);
        }
        byte[] fields = new byte[HeapLayout.HEADER_LENGTH - 8];
        Words.putInt(fields, HeapLayout.VERSION_OFFSET - 8, HeapLayout.LAYOUT_VERSION);
        Words.putInt(fields, HeapLayout.CHUNK_SHIFT_OFFSET - 8, shift);
        Words.putLong(fields, HeapLayout.CHUNK_COUNT_OFFSET - 8, count);
        Words.putLong(fields, HeapLayout.DATA_START_OFFSET - 8, dataStart);
        Words.putLong(fields, HeapLayout.CHECK_OFFSET - 8,
                HeapLayout.checkWord(HeapLayout.LAYOUT_VERSION, shift, count, dataStart));
        remote.write(base + 8, fields);
        remote.writeLong(base + HeapLayout.MAGIC_OFFSET, HeapLayout.MAGIC); // last: readers that see it see the rest
        heaps.remove(key(d.nodeId(), d.index()));
        LOG.info("formatted heap segment: node={}, segment={}, chunkSize={}, chunks={}", d.nodeId(), d.index(),
                1 << shift, count);
        return true;
    }

    /** The heap geometry in a header with the magic, validated. */
    private Heap geometry(SegmentDescriptor d, byte[] hdr) {
        long magic = Words.getLong(hdr, HeapLayout.MAGIC_OFFSET);
        int version = Words.getInt(hdr, HeapLayout.VERSION_OFFSET);
        int shift = Words.getInt(hdr, HeapLayout.CHUNK_SHIFT_OFFSET);
        long count = Words.getLong(hdr, HeapLayout.CHUNK_COUNT_OFFSET);
        long dataStart = Words.getLong(hdr, HeapLayout.DATA_START_OFFSET);
        long check = Words.getLong(hdr, HeapLayout.CHECK_OFFSET);
        if (magic != HeapLayout.MAGIC) {
            throw new HeapCorruptedException(d.nodeId(), d.index(), "wrong magic: magic=0x" + Long.toHexString(magic)
                    + ", expected=0x" + Long.toHexString(HeapLayout.MAGIC));
        }
        if (version != HeapLayout.LAYOUT_VERSION) {
            throw new HeapCorruptedException(d.nodeId(), d.index(), "layout version=" + version + ", expected="
                    + HeapLayout.LAYOUT_VERSION + " (formatted by another Membus version)");
        }
        if (check != HeapLayout.checkWord(version, shift, count, dataStart)
                || shift < HeapLayout.MIN_CHUNK_SHIFT || shift > HeapLayout.MAX_CHUNK_SHIFT || count < 1
                || count > Integer.MAX_VALUE || dataStart != HeapLayout.dataStart(count)
                || dataStart + (count << shift) > d.size()) {
            throw new HeapCorruptedException(d.nodeId(), d.index(), "header fields do not agree: chunkShift=" + shift
                    + ", chunkCount=" + count + ", dataStart=" + dataStart + ", segmentSize=" + d.size()
                    + ", checkWordValid=" + (check == HeapLayout.checkWord(version, shift, count, dataStart)));
        }
        return new Heap(d, shift, (int) count, dataStart);
    }

    // ------------------------------------------------------------------ finding heaps

    private static long key(int node, int segment) {
        return ((long) node << 8) | segment;
    }

    private SegmentDescriptor descriptor(int node, int segment) {
        if (node == self) {
            Segment s = memory.transport().table().get(segment);
            return s == null ? null : s.descriptor();
        }
        return directory.segment(node, segment).orElse(null);
    }

    /** The formatted heap in that segment, or {@code null} when it is not exported or not formatted. */
    private Heap heap(int node, int segment) {
        SegmentDescriptor d = descriptor(node, segment);
        if (d == null) {
            return null;
        }
        long k = key(node, segment);
        Heap h = heaps.get(k);
        if (h != null && h.incarnation == d.incarnation()
                && (h.formatted || System.nanoTime() - h.checkedAt < UNFORMATTED_RECHECK_NANOS)) {
            return h.formatted ? h : null;
        }
        synchronized (heaps) {
            h = heaps.get(k);
            if (h == null || h.incarnation != d.incarnation() || !h.formatted) {
                byte[] hdr = remote.read(d.pointer(0), HeapLayout.HEADER_LENGTH);
                h = Words.getLong(hdr, HeapLayout.MAGIC_OFFSET) == 0 ? new Heap(d) : geometry(d, hdr);
                heaps.put(k, h);
            }
        }
        return h.formatted ? h : null;
    }

    private Heap heapOfPointer(long ptr) {
        int node = RemotePtr.nodeId(ptr);
        int seg = RemotePtr.segmentIndex(ptr);
        if (ptr == RemotePtr.NULL || !config.isHeapSegment(seg)) {
            throw new InvalidBlockException(ptr, "not in a heap segment (heap segments: "
                    + Arrays.toString(config.heapSegments()) + ")");
        }
        Heap h = heap(node, seg);
        if (h == null) {
            memory.segmentOf(ptr); // throws the typed error of a missing node or segment
            throw new InvalidBlockException(ptr, "the segment is not a formatted heap");
        }
        return h;
    }

    /** Nodes with at least one heap segment, ascending. */
    private int[] heapNodes() {
        int[] nodes = heapNodes;
        if (nodes == null) {
            TreeSet<Integer> set = new TreeSet<>();
            for (int seg : config.heapSegments()) {
                if (memory.transport().table().get(seg) != null) {
                    set.add(self);
                }
            }
            for (SegmentDescriptor d : directory.segments()) {
                if (config.isHeapSegment(d.index()) && d.nodeId() != self) {
                    set.add(d.nodeId());
                }
            }
            nodes = set.stream().mapToInt(Integer::intValue).toArray();
            heapNodes = nodes;
        }
        return nodes;
    }

    private void addHeapsOf(int node, List<Heap> out) {
        for (int seg : config.heapSegments()) {
            Heap h = heap(node, seg);
            if (h != null) {
                out.add(h);
            }
        }
    }

    /** The heaps a placement may use, in the order to try them. */
    private List<Heap> targets(Placement placement) {
        List<Heap> out = new ArrayList<>(4);
        switch (placement.kind()) {
            case LOCAL -> addHeapsOf(self, out);
            case NODE -> {
                int n = placement.nodeId();
                if (n != self && directory.member(n).isEmpty()) {
                    throw new PlacementException(placement.toString(), n, "not a live member of the cluster");
                }
                addHeapsOf(n, out);
            }
            case ROUND_ROBIN -> {
                int[] nodes = heapNodes();
                int start = nodes.length == 0 ? 0 : Math.floorMod(roundRobin.getAndIncrement(), nodes.length);
                for (int i = 0; i < nodes.length; i++) {
                    addHeapsOf(nodes[(start + i) % nodes.length], out);
                }
            }
            case KEY -> {
                int[] nodes = heapNodes();
                Integer[] order = new Integer[nodes.length];
                for (int i = 0; i < nodes.length; i++) {
                    order[i] = nodes[i];
                }
                long key = placement.keyHash();
                Arrays.sort(order, (a, b) -> Long.compareUnsigned(Placement.score(key, b), Placement.score(key, a)));
                for (int n : order) {
                    addHeapsOf(n, out);
                }
            }
            default -> throw new IllegalStateException("unknown placement " + placement);
        }
        if (out.isEmpty()) {
            int node = placement.kind() == Placement.Kind.NODE ? placement.nodeId() : self;
            throw new PlacementException(placement.toString(), node, "no formatted heap segment "
                    + Arrays.toString(config.heapSegments()) + " is exported"
                    + (placement.kind() == Placement.Kind.LOCAL || placement.kind() == Placement.Kind.NODE
                    ? " by that node" : " by any live member"));
        }
        return out;
    }

    // ------------------------------------------------------------------ allocation

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
        List<Heap> targets = null;
        for (int round = 0; round < 2; round++) {
            targets = targets(placement);
            long largest = 0;
            for (Heap h : targets) {
                largest = Math.max(largest, h.maxObject());
                if (size <= h.maxObject()) {
                    BlockRef r = h.allocate(size);
                    if (r != null) {
                        return r;
                    }
                }
            }
            if (size > largest) {
                throw new AllocationSizeException(size, largest);
            }
            if (round == 0 && trim() == 0) {
                break; // nothing released here: a retry cannot succeed
            }
        }
        throw new OutOfRemoteMemoryException(size, placement.toString(), usageOf(targets));
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
        Heap h = heapOfPointer(ptr);
        int chunk = h.chunkOf(ptr);
        long inChunk = RemotePtr.offset(ptr) - h.dataStart - ((long) chunk << h.chunkShift);
        if (chunk < 0) {
            throw new InvalidBlockException(ptr, "outside the chunks of the heap");
        }
        if (kind == KIND_SMALL) {
            int cls = blockClassOf(expected);
            if (cls >= SizeClasses.count() || inChunk % SizeClasses.blockSize(cls) != 0) {
                throw new InvalidBlockException(ptr, "not at a block boundary of class " + cls);
            }
        } else if (kind != KIND_LARGE || inChunk != 0) {
            throw new InvalidBlockException(ptr, "the reference's header is not a block header: header=0x"
                    + Long.toHexString(expected));
        }
        long freed = HeapLayout.nextHeader(expected);
        long witness = remote.compareAndSwap(ptr, expected, freed);
        if (witness != expected) {
            if (kindOf(witness) == kind && blockClassOf(witness) == blockClassOf(expected)
                    && generationOf(witness) > generationOf(expected)) {
                throw new DoubleFreeException(ptr, ref.generation(), generationOf(witness));
            }
            throw new InvalidBlockException(ptr, "the header there is not this reference's block: header=0x"
                    + Long.toHexString(witness) + ", expected=0x" + Long.toHexString(expected)
                    + " (freed long ago and its chunk reused for other sizes, or never allocated)");
        }
        if (kind == KIND_LARGE) {
            h.freeLarge(chunk);
        } else {
            h.freeSmall(chunk, ptr, blockClassOf(expected), inChunk / SizeClasses.blockSize(blockClassOf(expected)),
                    freed);
        }
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
        checkBounds(ref, offset, src.length);
        long ptr = ref.ptr();
        checkHeader(ref, remote.readLong(ptr), "write");
        remote.write(ref.payload() + offset, src);
        checkHeader(ref, remote.readLong(ptr), "write");
    }

    /** Writes the little-endian payload word at {@code offset} (checked like {@link #write}). */
    public void writeLong(BlockRef ref, long offset, long value) {
        byte[] b = new byte[Long.BYTES];
        Words.putLong(b, 0, value);
        write(ref, offset, b);
    }

    /** Whether {@code ref}'s block is still the one it was allocated as (one read of the header). */
    public boolean isLive(BlockRef ref) {
        return remote.readLong(ref.ptr()) == ref.header();
    }

    private static void checkBounds(BlockRef ref, long offset, long length) {
        if (offset < 0 || length < 0 || offset > ref.capacity() - length) {
            throw new BlockBoundsException(ref.ptr(), offset, length, ref.capacity());
        }
    }

    private static void checkHeader(BlockRef ref, long header, String op) {
        if (header == ref.header()) {
            return;
        }
        if (kindOf(header) == kindOf(ref.header()) && blockClassOf(header) == blockClassOf(ref.header())
                && generationOf(header) < generationOf(ref.header())) {
            throw new InvalidBlockException(ref.ptr(), "the reference's generation " + ref.generation()
                    + " is newer than the block's " + generationOf(header) + ": it was not made by allocate");
        }
        boolean sameKind = kindOf(header) == kindOf(ref.header()) && blockClassOf(header) == blockClassOf(ref.header());
        throw new UseAfterFreeException(ref.ptr(), ref.generation(), sameKind ? generationOf(header) : -1, op);
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
        for (int node : heapNodes()) {
            for (int seg : config.heapSegments()) {
                Heap h = heap(node, seg);
                if (h == null) {
                    continue;
                }
                long[] t = h.readTable();
                for (int c = 0; c < h.chunkCount; c++) {
                    long st = t[c * 4];
                    if (stateOf(st) != FREE && ownerOf(st) == nodeId) {
                        long mine = (st & ~(0xffffL << 36)) | ((long) self << 36);
                        if (remote.compareAndSwap(h.entry(c), st, mine) == st) {
                            adopted++;
                            if (stateOf(st) == SMALL) {
                                h.pool(classOf(st)).adopted(c);
                            }
                        }
                    }
                }
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
        for (Heap h : heaps.values()) {
            if (h.formatted) {
                released += h.trim();
            }
        }
        return released;
    }

    /** Usage of every heap segment of every live member (one table read per segment). */
    public HeapUsage usage() {
        List<HeapUsage.SegmentUsage> rows = new ArrayList<>();
        for (int node : heapNodes()) {
            for (int seg : config.heapSegments()) {
                if (descriptor(node, seg) != null) {
                    rows.add(usageOf(node, seg));
                }
            }
        }
        return new HeapUsage(rows);
    }

    private HeapUsage usageOf(List<Heap> targets) {
        List<HeapUsage.SegmentUsage> rows = new ArrayList<>();
        for (Heap h : targets) {
            rows.add(usageOf(h.node, h.segment));
        }
        return new HeapUsage(rows);
    }

    private HeapUsage.SegmentUsage usageOf(int node, int seg) {
        try {
            Heap h = heap(node, seg);
            if (h == null) {
                return new HeapUsage.SegmentUsage(node, seg, 0, 0, 0, 0, 0, 0, 0, 0, Map.of(), "not formatted");
            }
            long[] t = h.readTable();
            int free = 0;
            int small = 0;
            int large = 0;
            int objects = 0;
            long inUse = 0;
            long onLists = 0;
            Map<Integer, Integer> owners = new TreeMap<>();
            for (int c = 0; c < h.chunkCount; c++) {
                long st = t[c * 4];
                switch (stateOf(st)) {
                    case FREE -> free++;
                    case SMALL -> {
                        small++;
                        long carved = Math.min(t[c * 4 + 1], h.perChunk(classOf(st)));
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
            return new HeapUsage.SegmentUsage(node, seg, 1 << h.chunkShift, h.chunkCount, free, small, large, inUse,
                    onLists, objects, owners, null);
        } catch (DsmException e) {
            return new HeapUsage.SegmentUsage(node, seg, 0, 0, 0, 0, 0, 0, 0, 0, Map.of(),
                    "unreadable: " + e.code() + " " + e.getMessage());
        }
    }

    private void checkOpen() {
        if (closed) {
            throw new DsmException(ErrorCode.CONFIG, "allocator closed: node=" + self
                    + "; create a new GlobalAllocator for this node");
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
            for (Heap h : heaps.values()) {
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
            directory.removeListener(listener);
            synchronized (IN_USE) {
                IN_USE.remove(memory.transport());
            }
        }
    }

    // ------------------------------------------------------------------ one heap segment

    /** A heap segment as this node sees it: geometry, and this node's pools of its size classes. */
    private final class Heap {
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
        final Pool[] pools;
        /** Where the last claim succeeded: scans for a free chunk start there. */
        volatile int claimHint;

        /** An unformatted segment. */
        Heap(SegmentDescriptor d) {
            this.node = d.nodeId();
            this.segment = d.index();
            this.incarnation = d.incarnation();
            this.formatted = false;
            this.checkedAt = System.nanoTime();
            this.base = d.pointer(0);
            this.chunkShift = 0;
            this.chunkCount = 0;
            this.dataStart = 0;
            this.smallLimit = 0;
            this.pools = new Pool[0];
        }

        Heap(SegmentDescriptor d, int chunkShift, int chunkCount, long dataStart) {
            this.node = d.nodeId();
            this.segment = d.index();
            this.incarnation = d.incarnation();
            this.formatted = true;
            this.checkedAt = System.nanoTime();
            this.base = d.pointer(0);
            this.chunkShift = chunkShift;
            this.chunkCount = chunkCount;
            this.dataStart = dataStart;
            this.smallLimit = (1 << chunkShift) / 4;
            this.pools = new Pool[SizeClasses.count()];
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
            LOG.warn("free-list hint not updated after {} tries: node={}, segment={}, chunk={} (a hint only)",
                    MAX_CAS_RETRIES, node, segment, c);
        }

        Pool pool(int cls) {
            Pool p = pools[cls];
            if (p == null) {
                synchronized (pools) {
                    p = pools[cls];
                    if (p == null) {
                        p = new Pool(this, cls);
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

        BlockRef allocateLarge(long size) {
            long chunkSize = 1L << chunkShift;
            int span = (int) ((size + BLOCK_HEADER_LENGTH + chunkSize - 1) >> chunkShift);
            if (span > chunkCount) {
                return null;
            }
            for (int attempt = 0; attempt < config.claimAttempts(); attempt++) {
                long[] t = readTable();
                int start = freeRun(t, span);
                if (start < 0) {
                    return null;
                }
                long epoch = epochOf(t[start * 4]) + 1;
                int claimed = 0;
                for (; claimed < span; claimed++) {
                    long w = t[(start + claimed) * 4];
                    long mine = state(claimed == 0 ? LARGE_HEAD : LARGE_TAIL, 0, self, epochOf(w) + 1);
                    if (remote.compareAndSwap(entry(start + claimed), w, mine) != w) {
                        break;
                    }
                }
                if (claimed < span) {
                    for (int i = 0; i < claimed; i++) { // roll back: these chunks are free again (new epoch)
                        long w = t[(start + i) * 4];
                        long mine = state(i == 0 ? LARGE_HEAD : LARGE_TAIL, 0, self, epochOf(w) + 1);
                        long back = remote.compareAndSwap(entry(start + i), mine, state(FREE, 0, 0, epochOf(w) + 1));
                        if (back != mine) {
                            throw new HeapCorruptedException(node, segment, "a chunk claimed by this node changed"
                                    + " under it: chunk=" + (start + i) + ", state=0x" + Long.toHexString(back));
                        }
                    }
                    continue;
                }
                remote.writeLong(entry(start) + COUNT_WORD, span);
                long hdr = blockHeader(HeapLayout.firstGeneration(epoch), LARGE_CLASS, KIND_LARGE);
                remote.writeLong(chunk(start), hdr);
                return new BlockRef(chunk(start), hdr, ((long) span << chunkShift) - BLOCK_HEADER_LENGTH);
            }
            return null;
        }

        private int freeRun(long[] t, int span) {
            int run = 0;
            for (int c = 0; c < chunkCount; c++) {
                run = stateOf(t[c * 4]) == FREE ? run + 1 : 0;
                if (run == span) {
                    return c - span + 1;
                }
            }
            return -1;
        }

        void freeLarge(int chunk) {
            long head = remote.readLong(entry(chunk));
            long span = remote.readLong(entry(chunk) + COUNT_WORD);
            if (stateOf(head) != LARGE_HEAD || span < 1 || span > chunkCount - chunk) {
                throw new HeapCorruptedException(node, segment, "large object's chunk entry is wrong: chunk=" + chunk
                        + ", state=0x" + Long.toHexString(head) + ", span=" + span);
            }
            for (int i = 0; i < span; i++) {
                long e = entry(chunk + i);
                long st = i == 0 ? head : remote.readLong(e);
                for (int tries = 0; ; tries++) {
                    int s = stateOf(st);
                    if (s != (i == 0 ? LARGE_HEAD : LARGE_TAIL) || tries > MAX_CAS_RETRIES) {
                        throw new HeapCorruptedException(node, segment, "large object's chunk entry is wrong: chunk="
                                + (chunk + i) + ", state=0x" + Long.toHexString(st));
                    }
                    long w = remote.compareAndSwap(e, st, state(FREE, 0, 0, epochOf(st)));
                    if (w == st) {
                        break;
                    }
                    st = w; // an adoption changed the owner: retry with the new word
                }
            }
        }

        void freeSmall(int chunk, long ptr, int cls, long blockIndex, long freedHeader) {
            if (HeapLayout.generationExhausted(freedHeader)) {
                return; // retired: its generations are used up; never handed out again
            }
            Pool p = pools[cls];
            if (p != null && p.cacheFreed(chunk, ptr, freedHeader)) {
                return;
            }
            push(chunk, ptr, blockIndex);
        }

        /** Pushes a free block on its chunk's free list (tagged Treiber stack), then counts it. */
        void push(int chunk, long ptr, long blockIndex) {
            long e = entry(chunk);
            long top = remote.readLong(e + FREE_HEAD_WORD);
            for (int tries = 0; tries < MAX_CAS_RETRIES; tries++) {
                remote.writeLong(ptr + BLOCK_HEADER_LENGTH, headIndex(top));
                long w = remote.compareAndSwap(e + FREE_HEAD_WORD, top, head(headTag(top) + 1, blockIndex + 1));
                if (w == top) {
                    remote.fetchAndAdd(e + COUNT_WORD, 1);
                    if (headIndex(top) == 0) {
                        hint(chunk, true); // the list was empty: tell the owner where to look
                    }
                    return;
                }
                top = w;
            }
            throw new DsmException(ErrorCode.TIMEOUT, "free-list push kept losing its CAS: node=" + node + ", segment="
                    + segment + ", chunk=" + chunk + ", tries=" + MAX_CAS_RETRIES + "; the block stays freed (retired)");
        }

        int trim() {
            Pool[] ps = pools.clone();
            List<Pool> locked = new ArrayList<>();
            try {
                for (Pool p : ps) {
                    if (p != null) {
                        p.lock.lock();
                        locked.add(p);
                        p.returnCached();
                    }
                }
                int released = 0;
                long[] t = readTable();
                for (int c = 0; c < chunkCount; c++) {
                    long st = t[c * 4];
                    if (stateOf(st) == SMALL && ownerOf(st) == self) {
                        int cls = classOf(st);
                        long carved = Math.min(t[c * 4 + 1], perChunk(cls));
                        if (t[c * 4 + 3] == carved
                                && remote.compareAndSwap(entry(c), st, state(FREE, 0, 0, epochOf(st))) == st) {
                            released++;
                            if (ps[cls] != null) {
                                ps[cls].owned.clear(c);
                                ps[cls].roomy.clear(c);
                            }
                        }
                    }
                }
                return released;
            } finally {
                for (Pool p : locked) {
                    p.lock.unlock();
                }
            }
        }
    }

    // ------------------------------------------------------------------ one size class of one heap

    /**
     * This node's blocks of one size class in one heap segment: a cache of blocks
     * ready to hand out, and the chunk it carves from. Guarded by {@link #lock}.
     */
    private final class Pool {
        final Heap heap;
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

        Pool(Heap heap, int cls) {
            this.heap = heap;
            this.cls = cls;
            this.blockSize = SizeClasses.blockSize(cls);
            this.perChunk = heap.perChunk(cls);
            this.batch = Math.max(1, Math.min(64, Math.min(perChunk, config.batchBytes() / blockSize)));
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
                long p = ptrs[size - 1];
                int c = heap.chunkOf(p);
                heap.push(c, p, (p - heap.chunk(c)) / blockSize);
                size--;
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
                    if (stateOf(st) != SMALL || ownerOf(st) != self || classOf(st) != cls) {
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
                    if (stateOf(st) == SMALL && ownerOf(st) == self && classOf(st) == cls) {
                        owned.set(c);
                        if (t[j * 4 + 1] < perChunk) {
                            roomy.set(c);
                        }
                        if (headIndex(t[j * 4 + 2]) != 0 && size < batch) {
                            heap.hint(c, false);
                            popAll(c, t[j * 4 + 2]);
                        }
                    } else if (stateOf(st) == FREE) {
                        if (size > 0) {
                            return true; // found freed blocks before a free chunk: use them first
                        }
                        long epoch = epochOf(st) + 1;
                        if (remote.compareAndSwap(heap.entry(c), st, state(SMALL, cls, self, epoch)) == st) {
                            // the chunk is ours: no other node touches its words until we give it back
                            remote.write(heap.entry(c) + BUMP_WORD, new byte[ENTRY_LENGTH - BUMP_WORD]);
                            heap.claimHint = c;
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
                remote.writeLong(first, hdr);
            } else {
                byte[] region = new byte[k * blockSize];
                for (int i = 0; i < k; i++) {
                    Words.putLong(region, i * blockSize, hdr);
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
                long hdr = Words.getLong(b, 0);
                if (kindOf(hdr) != KIND_SMALL || blockClassOf(hdr) != cls) {
                    throw new HeapCorruptedException(heap.node, heap.segment, "free block with a wrong header: chunk="
                            + chunk + ", block=" + RemotePtr.toString(p) + ", header=0x" + Long.toHexString(hdr));
                }
                add(p, hdr);
                count++;
                index = Words.getLong(b, 8);
            }
            remote.fetchAndAdd(e + COUNT_WORD, -count);
        }
    }
}
