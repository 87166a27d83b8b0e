package io.membus.bench.alloc;

import io.membus.bench.BenchCluster;
import io.membus.alloc.BlockRef;
import io.membus.alloc.GlobalAllocator;
import io.membus.alloc.HeapUsage;
import io.membus.alloc.OutOfRemoteMemoryException;
import io.membus.alloc.Placement;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;

/**
 * Fragmentation after a randomized workload: three nodes allocate and free blocks of
 * random sizes (mostly small, some spanning chunks) in every placement until a
 * steady state, then the report compares the bytes the live blocks asked for with
 * the bytes of the blocks they got (internal fragmentation: size-class rounding and
 * headers) and with the bytes of the chunks claimed to hold them (chunk
 * fragmentation: partly used chunks, blocks on free lists and in node caches), before
 * and after {@link GlobalAllocator#trim()}.
 *
 * <p>Run: {@code java -cp dsm-bench/target/benchmarks.jar io.membus.bench.alloc.FragmentationReport [seed] [ops]}
 *
 * <p><b>Note:</b> a program entry point.
 */
public final class FragmentationReport {
    private FragmentationReport() {
    }

    public static void main(String[] args) {
        long seed = args.length > 0 ? Long.parseLong(args[0]) : 42;
        int ops = args.length > 1 ? Integer.parseInt(args[1]) : 200_000;
        SplittableRandom rnd = new SplittableRandom(seed);
        try (BenchCluster cluster = new BenchCluster("local", 3, 32L << 20, "alloc-bench")) {
            List<BlockRef> live = new ArrayList<>();
            List<Long> asked = new ArrayList<>();
            int ooms = 0;
            for (int i = 0; i < ops; i++) {
                GlobalAllocator a = cluster.node(1 + rnd.nextInt(3));
                boolean alloc = live.size() < 2000 || (live.size() < 40_000 && rnd.nextInt(100) < 52);
                if (alloc) {
                    long size = rnd.nextInt(50) == 0 ? 20_000 + rnd.nextInt(200_000) : 8 + rnd.nextInt(rnd.nextBoolean()
                            ? 120 : 2000);
                    Placement p = switch (rnd.nextInt(3)) {
                        case 0 -> Placement.local();
                        case 1 -> Placement.roundRobin();
                        default -> Placement.byKey(rnd.nextLong());
                    };
                    try {
                        live.add(a.allocate(size, p));
                        asked.add(size);
                    } catch (OutOfRemoteMemoryException e) {
                        ooms++;
                    }
                } else {
                    int k = rnd.nextInt(live.size());
                    a.free(live.get(k));
                    live.set(k, live.get(live.size() - 1));
                    live.remove(live.size() - 1);
                    asked.set(k, asked.get(asked.size() - 1));
                    asked.remove(asked.size() - 1);
                }
            }
            long askedBytes = asked.stream().mapToLong(Long::longValue).sum();
            long blockBytes = live.stream().mapToLong(r -> r.capacity() + 8).sum();
            long smallAsked = 0;
            long smallBlocks = 0;
            for (int i = 0; i < live.size(); i++) {
                if (!live.get(i).isLarge()) {
                    smallAsked += asked.get(i);
                    smallBlocks += live.get(i).capacity() + 8;
                }
            }
            HeapUsage before = cluster.node(1).usage();
            cluster.allocators.forEach(GlobalAllocator::trim);
            HeapUsage after = cluster.node(1).usage();
            System.out.printf(Locale.ROOT, "seed=%d ops=%d liveBlocks=%d outOfMemory=%d%n", seed, ops, live.size(), ooms);
            System.out.printf(Locale.ROOT, "asked=%d B, blocks=%d B (internal overhead %.1f%%)%n", askedBytes,
                    blockBytes, 100.0 * (blockBytes - askedBytes) / blockBytes);
            System.out.printf(Locale.ROOT, "  small blocks: asked=%d B, blocks=%d B (overhead %.1f%%);"
                            + " large objects: asked=%d B, chunks=%d B (overhead %.1f%%)%n", smallAsked, smallBlocks,
                    100.0 * (smallBlocks - smallAsked) / smallBlocks, askedBytes - smallAsked, blockBytes - smallBlocks,
                    100.0 * ((blockBytes - smallBlocks) - (askedBytes - smallAsked)) / (blockBytes - smallBlocks));
            System.out.printf(Locale.ROOT, "claimed chunks before trim=%d B: live blocks fill %.1f%% of them%n",
                    before.usedBytes(), 100.0 * blockBytes / before.usedBytes());
            System.out.printf(Locale.ROOT, "claimed chunks after trim=%d B: live blocks fill %.1f%% of them%n",
                    after.usedBytes(), 100.0 * blockBytes / after.usedBytes());
            for (io.membus.alloc.HeapUsage.SegmentUsage u : after.segments()) { // the report lays out the rows
                System.out.printf(Locale.ROOT, "node %d seg %d: chunks=%d free=%d small=%d large=%d used=%.1f%%"
                                + " blocks-used=%d blocks-free=%d objects=%d owners=%s%n", u.nodeId(), u.segment(),
                        u.chunks(), u.freeChunks(), u.smallChunks(), u.largeChunks(), u.usedPercent(), u.blocksInUse(),
                        u.blocksFree(), u.largeObjects(), u.chunksByOwner());
            }
        }
    }
}
