package io.membus.samples.demo;

import io.membus.samples.cluster.StatusText;
import io.membus.alloc.BlockRef;
import io.membus.alloc.GlobalAllocator;
import io.membus.alloc.Placement;
import io.membus.core.RemoteMemory;
import io.membus.core.Segment;
import io.membus.core.SegmentDescriptor;
import io.membus.core.error.DsmException;
import io.membus.core.error.NodeUnavailableException;
import org.HdrHistogram.Histogram;

import java.io.PrintStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * {@code membus demo counters}: the raw verbs. Every node increments a counter word
 * on the next memory node of a ring and a shared counter on node 1 with one-sided
 * fetch-and-add, allocates blocks in that node's heap with the global allocator,
 * writes them and reads them back; the demo then checks every counter and every
 * block. A client (no memory) takes part as an initiator only: the ring runs over the
 * memory nodes ({@code node % memoryNodes + 1}), so a memory node may be the target of
 * a memory node and a client.
 *
 * <pre>
 * segment 0 of every demo node (raw words):
 *   0     ring counter     (fetch-and-add by the previous node of the ring)
 *   8     shared counter   (node 1 only: fetch-and-add by every node)
 * segment 1 of every demo node: a heap of the global allocator
 * </pre>
 *
 * <p><b>Note:</b> stateless; a node's blocks are kept in its {@link DemoNode} state.
 */
final class CountersApp implements DemoApp {
    static final long RING_COUNTER = 0;
    static final long SHARED_COUNTER = 8;

    /**
     * What a node did.
     *
     * @param nodeId         the node
     * @param pid            its process
     * @param ringTarget     the node whose ring counter it incremented
     * @param adds           fetch-and-adds issued (ring + shared)
     * @param blocksWritten  blocks allocated in the ring target's heap and written
     * @param blocksVerified blocks read back and found equal
     * @param p50Micros      median fetch-and-add latency
     * @param p99Micros      99th percentile fetch-and-add latency
     * @param millis         time of the work
     */
    record Result(int nodeId, long pid, int ringTarget, long adds, long blocksWritten, long blocksVerified,
                  double p50Micros, double p99Micros, long millis) {
        String encode() {
            return String.join("|", Integer.toString(nodeId), Long.toString(pid), Integer.toString(ringTarget),
                    Long.toString(adds), Long.toString(blocksWritten), Long.toString(blocksVerified),
                    Double.toString(p50Micros), Double.toString(p99Micros), Long.toString(millis));
        }

        static Result decode(String s) {
            String[] f = s.split("\\|");
            return new Result(Integer.parseInt(f[0]), Long.parseLong(f[1]), Integer.parseInt(f[2]),
                    Long.parseLong(f[3]), Long.parseLong(f[4]), Long.parseLong(f[5]), Double.parseDouble(f[6]),
                    Double.parseDouble(f[7]), Long.parseLong(f[8]));
        }
    }

    /** The blocks a node allocated, freed before any node leaves (or when the node closes). */
    static final class Blocks implements AutoCloseable {
        private final GlobalAllocator allocator;
        final List<BlockRef> refs = new ArrayList<>();

        Blocks(GlobalAllocator allocator) {
            this.allocator = allocator;
        }

        int free() {
            int freed = 0;
            try {
                for (BlockRef ref : refs) {
                    allocator.free(ref);
                    freed++;
                }
            } finally {
                refs.clear();
            }
            return freed;
        }

        @Override
        public void close() {
            free();
        }
    }

    @Override
    public String name() {
        return "counters";
    }

    @Override
    public String title() {
        return "one-sided fetch-and-add on other nodes' words, and blocks in other nodes' heaps";
    }

    @Override
    public String onNode(DemoNode node, int nodes, String phase, List<String> args) {
        return switch (phase) {
            case "work" -> work(node, target(node.nodeId(), Integer.parseInt(args.get(3))), Integer.parseInt(args.get(0)),
                    Integer.parseInt(args.get(1)), Integer.parseInt(args.get(2))).encode();
            case "counters" -> {
                Segment s = node.node().localSegment(0);
                yield s.readLong(RING_COUNTER) + " " + s.readLong(SHARED_COUNTER);
            }
            case "heap" -> StatusText.heapTable(node.node().allocator().usage()).replace('\n', '\t');
            case "free" -> Integer.toString(node.state(Blocks.class, () -> new Blocks(node.node().allocator())).free());
            default -> throw new IllegalArgumentException("counters has no phase " + phase);
        };
    }

    private static SegmentDescriptor segmentOf(DemoNode node, int nodeId) {
        return node.node().directory().segment(nodeId, 0).orElseThrow(() -> new NodeUnavailableException(nodeId,
                "no segment 0 of node " + nodeId + " in the directory; is it running?"));
    }

    /** The memory node whose ring counter {@code node} increments and in whose heap it allocates. */
    static int target(int node, int memoryNodes) {
        return node % memoryNodes + 1;
    }

    private static Result work(DemoNode demoNode, int nextId, int ops, int blocks, int blockSize) {
        int me = demoNode.nodeId();
        SegmentDescriptor next = segmentOf(demoNode, nextId);
        SegmentDescriptor first = segmentOf(demoNode, 1);
        RemoteMemory mem = demoNode.node().remoteMemory();
        Histogram latency = new Histogram(60_000_000_000L, 3);
        long start = System.nanoTime();
        long adds = 0;
        long ring = next.pointer(RING_COUNTER);
        long shared = first.pointer(SHARED_COUNTER);
        for (int i = 0; i < ops; i++) {
            long t0 = System.nanoTime();
            mem.fetchAndAdd(ring, 1);
            latency.recordValue(Math.max(1, System.nanoTime() - t0));
            mem.fetchAndAdd(shared, 1);
            adds += 2;
        }
        GlobalAllocator alloc = demoNode.node().allocator();
        Blocks mine = demoNode.state(Blocks.class, () -> new Blocks(alloc));
        Placement onNext = Placement.node(nextId);
        int firstBlock = mine.refs.size();
        for (int b = 0; b < blocks; b++) {
            BlockRef ref = alloc.allocate(blockSize, onNext);
            mine.refs.add(ref);
            alloc.write(ref, 0, pattern(me, b, blockSize));
        }
        long verified = 0;
        for (int b = 0; b < blocks; b++) {
            byte[] back = alloc.read(mine.refs.get(firstBlock + b), 0, blockSize);
            if (Arrays.equals(back, pattern(me, b, blockSize))) {
                verified++;
            }
        }
        long millis = (System.nanoTime() - start) / 1_000_000;
        return new Result(me, ProcessHandle.current().pid(), nextId, adds, blocks, verified,
                latency.getValueAtPercentile(50) / 1000.0, latency.getValueAtPercentile(99) / 1000.0, millis);
    }

    /** The bytes writer {@code writer} puts in its block {@code block}: recognisable, never all zero. */
    static byte[] pattern(int writer, int block, int size) {
        byte[] b = new byte[size];
        for (int i = 0; i < size; i++) {
            b[i] = (byte) (writer * 31 + block * 7 + i + 1);
        }
        return b;
    }

    @Override
    public boolean drive(Driver d) throws Exception {
        DemoOptions o = d.options();
        PrintStream out = d.out();
        int nodes = d.nodes();
        int memoryNodes = o.memoryNodes(nodes);
        out.printf("  each node: %,d fetch-and-adds on the next memory node's ring counter and %,d on node 1's shared"
                + " counter, %d blocks of %,d B allocated in that node's heap (global allocator), written and read"
                + " back%s%n%n", o.ops(), o.ops(), o.blocks(), o.blockSize(), memoryNodes == nodes ? ""
                : memoryNodes + 1 == nodes ? "; client node " + nodes + " has no counter or heap of its own"
                : "; client nodes " + (memoryNodes + 1) + ".." + nodes + " have no counter or heap of their own");
        List<Result> results = new ArrayList<>();
        for (String line : d.onEveryNode("work", List.of(Integer.toString(o.ops()), Integer.toString(o.blocks()),
                Integer.toString(o.blockSize()), Integer.toString(memoryNodes)))) {
            results.add(Result.decode(line));
        }
        List<Integer> memory = new ArrayList<>();
        for (int n = 1; n <= memoryNodes; n++) {
            memory.add(n);
        }
        List<long[]> counters = new ArrayList<>();
        for (String line : d.onNodes(memory, "counters", List.of())) {
            String[] f = line.split(" ");
            counters.add(new long[]{Long.parseLong(f[0]), Long.parseLong(f[1])});
        }
        boolean ok = report(out, nodes, o, results, counters);
        out.printf("%nHeap segments after the work (global allocator; read by node 1 from every chunk table):%n");
        for (String l : d.onNode(1, "heap", List.of()).split("\t")) {
            out.println("  " + l);
        }
        // every node frees its blocks while every heap is still there, then they leave
        d.onEveryNode("free", List.of());
        return ok;
    }

    private static boolean report(PrintStream out, int nodes, DemoOptions o, List<Result> results,
                                  List<long[]> counters) {
        String header = String.format(Locale.ROOT, "%-5s %-8s %-6s %15s %9s %9s %12s %12s %8s",
                "node", "pid", "ring->", "fetch-and-adds", "allocated", "verified", "FAA p50 us", "FAA p99 us", "ms");
        out.println(header);
        out.println("-".repeat(header.length()));
        long verified = 0;
        for (Result r : results) {
            out.printf(Locale.ROOT, "%-5d %-8d %-6d %,15d %9d %9d %12.2f %12.2f %8d%n", r.nodeId(), r.pid(),
                    r.ringTarget(), r.adds(), r.blocksWritten(), r.blocksVerified(), r.p50Micros(), r.p99Micros(),
                    r.millis());
            verified += r.blocksVerified();
        }
        out.println();
        out.println("Verified totals");
        boolean ok = true;
        for (int i = 0; i < counters.size(); i++) {
            List<Integer> by = new ArrayList<>();
            for (int n = 1; n <= nodes; n++) {
                if (target(n, counters.size()) == i + 1) {
                    by.add(n);
                }
            }
            ok &= check(out, String.format("ring counter on node %d (incremented by node%s %s)", i + 1,
                    by.size() == 1 ? "" : "s", by.toString().replaceAll("[\\[\\]]", "")), counters.get(i)[0],
                    (long) o.ops() * by.size());
        }
        ok &= check(out, "shared counter on node 1 (incremented by every node)", counters.get(0)[1],
                (long) o.ops() * nodes);
        ok &= check(out, "heap blocks read back equal to what was written", verified, (long) o.blocks() * nodes);
        return ok;
    }

    static boolean check(PrintStream out, String what, long actual, long expected) {
        boolean ok = actual == expected;
        out.printf(Locale.ROOT, "  %-62s %,12d  expected %,12d  %s%n", what, actual, expected, ok ? "OK" : "MISMATCH");
        return ok;
    }
}
