package io.membus.samples.demo;

import io.membus.codec.Codecs;
import io.membus.collections.DsmLongArray;
import io.membus.collections.DsmMap;
import io.membus.collections.DsmMapOptions;
import org.HdrHistogram.Histogram;

import java.io.PrintStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * {@code membus demo kv}: an inventory service on one {@link DsmMap} of SKU to stock
 * count. Every node writes its share of the SKUs ({@code put} and {@code remove},
 * one writer per SKU, so each SKU's writes have one order) and reads every SKU from
 * reader threads through its handle's validated read cache.
 *
 * <p>Checks: <b>no stale read</b> — after each completed write the writer publishes
 * the write's sequence number in a {@link DsmLongArray}; a reader reads that number
 * first, then the SKU, and a value older than a write that had completed before the
 * read began is stale (a removed SKU reads as absent, which this check does not
 * judge); <b>final contents</b> — each writer replays its own log in order into a
 * plain {@code TreeMap}; the union of those replays must equal the map's entries.
 * A value is the sequence number of the put that wrote it.
 *
 * <p>The map is found by name ({@code DsmCollections.map}): the first node to bind the
 * name creates it, the others open it.
 *
 * <p><b>Note:</b> stateless; a node's map handle is kept in its {@link DemoNode} state.
 */
final class KvApp implements DemoApp {
    static final int SKUS = 64;
    static final int READERS_PER_NODE = 2;

    @Override
    public String name() {
        return "kv";
    }

    @Override
    public String title() {
        return "an inventory in one DsmMap: every node puts, reads (leased, cached) and removes; no stale read";
    }

    /** This node's handle of the map (its read cache is per handle). */
    private static final class Handle implements AutoCloseable {
        final DsmMap<String, Long> map;

        Handle(DsmMap<String, Long> map) {
            this.map = map;
        }

        @Override
        public void close() {
            map.close();
        }
    }

    private static String sku(int i) {
        return String.format(Locale.ROOT, "sku-%03d", i);
    }

    private static DsmLongArray versions(DemoNode node, String suffix) {
        return node.membus().collections().longArray("kv-versions-" + suffix, SKUS);
    }

    private static DsmMap<String, Long> map(DemoNode node, String suffix) {
        return node.state(Handle.class, () -> new Handle(node.membus().collections().map("kv-inventory-" + suffix,
                Codecs.strings(), Codecs.longs(), DsmMapOptions.defaults().readCacheEntries(4 * SKUS).leasedReads(true))))
                .map;
    }

    @Override
    public String onNode(DemoNode node, int nodes, String phase, List<String> args) {
        String suffix = args.get(0);
        switch (phase) {
            case "open" -> {
                return Long.toString(map(node, suffix).rootPtr());
            }
            case "work" -> {
                return work(node, nodes, suffix, Integer.parseInt(args.get(1)), Long.parseLong(args.get(2)));
            }
            case "contents" -> {
                StringBuilder sb = new StringBuilder();
                new TreeMap<>(map(node, suffix)).forEach((k, v) -> sb.append(sb.length() == 0 ? "" : ",").append(k)
                        .append('=').append(v));
                return sb.length() == 0 ? "-" : sb.toString();
            }
            case "close" -> {
                int pending = map(node, suffix).pendingReclamation();
                try {
                    node.closeState(Handle.class);
                } catch (Exception e) {
                    throw new IllegalStateException("closing the map handle failed: " + e.getMessage(), e);
                }
                return Integer.toString(pending);
            }
            default -> throw new IllegalArgumentException("kv has no phase " + phase);
        }
    }

    /**
     * The writer and the readers of this node. Answers: puts removes reads cacheHits stale
     * get-p50 get-p99 get-p999 (µs) replay (the writer's SKUs after replaying its log).
     */
    private static String work(DemoNode node, int nodes, String suffix, int writes, long seed) {
        DsmMap<String, Long> map = map(node, suffix);
        DsmLongArray versions = versions(node, suffix);
        int me = node.nodeId();
        SplittableRandom seeds = new SplittableRandom(seed ^ me * 0x9E3779B97F4A7C15L);
        AtomicBoolean writing = new AtomicBoolean(true);
        AtomicLong puts = new AtomicLong();
        AtomicLong removes = new AtomicLong();
        AtomicLong reads = new AtomicLong();
        AtomicLong stale = new AtomicLong();
        Histogram get = new Histogram(60_000_000_000L, 3);
        Map<String, Long> replay = new TreeMap<>();
        long hitsBefore = map.readCacheHits();
        SplittableRandom w = seeds.split();
        CompletableFuture<Void> writer = CompletableFuture.runAsync(() -> {
            try {
                List<Integer> mine = new ArrayList<>();
                for (int i = me - 1; i < SKUS; i += nodes) {
                    mine.add(i);
                }
                long[] sequence = new long[SKUS];
                for (int op = 0; op < writes; op++) {
                    int i = mine.get(w.nextInt(mine.size()));
                    long seq = ++sequence[i];
                    if (w.nextInt(5) == 0) {
                        map.remove(sku(i));
                        replay.remove(sku(i));
                        removes.incrementAndGet();
                    } else {
                        map.put(sku(i), seq);
                        replay.put(sku(i), seq);
                        puts.incrementAndGet();
                    }
                    versions.set(i, seq); // published once the write has completed
                }
            } finally {
                writing.set(false);
            }
        }, r -> new Thread(r, "kv-writer").start());
        List<CompletableFuture<Void>> readers = new ArrayList<>();
        for (int t = 0; t < READERS_PER_NODE; t++) {
            SplittableRandom r = seeds.split();
            readers.add(CompletableFuture.runAsync(() -> {
                do {
                    int i = r.nextInt(SKUS);
                    long completed = versions.get(i);
                    long t0 = System.nanoTime();
                    Long v = map.get(sku(i));
                    long took = System.nanoTime() - t0;
                    synchronized (get) {
                        get.recordValue(Math.max(1, took));
                    }
                    reads.incrementAndGet();
                    if (v != null && v < completed) {
                        stale.incrementAndGet();
                        System.err.println("kv: stale read of " + sku(i) + ": " + v + " after write " + completed
                                + " had completed");
                    }
                } while (writing.get());
            }, r2 -> new Thread(r2, "kv-reader").start()));
        }
        writer.join();
        CompletableFuture.allOf(readers.toArray(new CompletableFuture<?>[0])).join();
        StringBuilder sb = new StringBuilder();
        replay.forEach((k, v) -> sb.append(sb.length() == 0 ? "" : ",").append(k).append('=').append(v));
        synchronized (get) {
            return puts.get() + " " + removes.get() + " " + reads.get() + " " + (map.readCacheHits() - hitsBefore) + " "
                    + stale.get() + " " + get.getValueAtPercentile(50) / 1000.0 + " "
                    + get.getValueAtPercentile(99) / 1000.0 + " " + get.getValueAtPercentile(99.9) / 1000.0 + " "
                    + (sb.length() == 0 ? "-" : sb);
        }
    }

    @Override
    public boolean drive(Driver d) throws Exception {
        PrintStream out = d.out();
        String suffix = Long.toHexString(d.options().seed());
        int writes = Math.max(50, Math.min(20_000, d.options().ops() / 20));
        d.onNode(1, "open", List.of(suffix));
        d.onEveryNode("open", List.of(suffix));
        out.printf("  %d SKUs in one DsmMap<String, Long> (leased reads: up to %d entries cached per node, served"
                + " under the coherence layer's leases, invalidated by every change); every node writes its"
                + " share (%,d puts and removes, one writer per SKU) while %d readers per node read every SKU%n%n",
                SKUS, 4 * SKUS, writes, READERS_PER_NODE);
        List<String> results = d.onEveryNode("work", List.of(suffix, Integer.toString(writes),
                Long.toString(d.options().seed())));
        String header = String.format(Locale.ROOT, "%-5s %7s %8s %9s %11s %6s %11s %11s %12s", "node", "puts",
                "removes", "reads", "cache hits", "stale", "get p50 us", "get p99 us", "get p99.9 us");
        out.println(header);
        out.println("-".repeat(header.length()));
        long stale = 0;
        TreeMap<String, String> expected = new TreeMap<>();
        for (int n = 1; n <= results.size(); n++) {
            String[] f = results.get(n - 1).split(" ");
            stale += Long.parseLong(f[4]);
            out.printf(Locale.ROOT, "%-5d %,7d %,8d %,9d %,11d %,6d %11.1f %11.1f %12.1f%n", n, Long.parseLong(f[0]),
                    Long.parseLong(f[1]), Long.parseLong(f[2]), Long.parseLong(f[3]), Long.parseLong(f[4]),
                    Double.parseDouble(f[5]), Double.parseDouble(f[6]), Double.parseDouble(f[7]));
            if (!f[8].equals("-")) {
                for (String kv : f[8].split(",")) {
                    expected.put(kv.substring(0, kv.indexOf('=')), kv.substring(kv.indexOf('=') + 1));
                }
            }
        }
        String contents = d.onNode(d.nodes(), "contents", List.of(suffix));
        TreeMap<String, String> actual = new TreeMap<>();
        if (!contents.equals("-")) {
            for (String kv : contents.split(",")) {
                actual.put(kv.substring(0, kv.indexOf('=')), kv.substring(kv.indexOf('=') + 1));
            }
        }
        out.printf("%n  final inventory (read by node %d): %d SKUs in stock, e.g. %s%n%nVerified%n", d.nodes(),
                actual.size(), actual.entrySet().stream().limit(4).map(Object::toString).toList());
        boolean ok = CountersApp.check(out, "stale reads (older than a completed write)", stale, 0);
        int differing = 0;
        for (String k : new java.util.TreeSet<>(List.copyOf(expected.keySet()))) {
            differing += expected.get(k).equals(actual.get(k)) ? 0 : 1;
        }
        for (String k : actual.keySet()) {
            differing += expected.containsKey(k) ? 0 : 1;
        }
        ok &= CountersApp.check(out, "SKUs whose final value differs from the writers' replay", differing, 0);
        ok &= CountersApp.check(out, "SKUs in stock", actual.size(), expected.size());
        d.onEveryNode("close", List.of(suffix)); // removed entries' blocks go back while every heap is there
        return ok;
    }
}
