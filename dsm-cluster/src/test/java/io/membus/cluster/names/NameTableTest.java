package io.membus.cluster.names;

import io.membus.alloc.Placement;
import io.membus.cluster.InvalidNameException;
import io.membus.core.RemotePtr;
import io.membus.core.error.InvalidPointerException;
import io.membus.core.error.NameTableFullException;
import io.membus.core.test.Seeds;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The name table over {@code local} nodes without Pekko: first binder wins under
 * concurrent binds from many threads of many nodes, lookup, unbind, compare-and-unbind,
 * rebind, a full table, records with a wrong tag, and publication after the write.
 */
class NameTableTest {
    private TableNodes nodes;
    private ExecutorService pool;

    @AfterEach
    void tearDown() throws InterruptedException {
        if (pool != null) {
            pool.shutdownNow();
            assertTrue(pool.awaitTermination(30, TimeUnit.SECONDS), "test threads stopped");
        }
        if (nodes != null) {
            nodes.close();
        }
    }

    private static long ptr(int node, long offset) {
        return RemotePtr.pack(node, 0, offset);
    }

    @Test
    void concurrentBindsOfOneNameHaveOneWinnerThatEveryBinderReturns() throws Exception {
        SplittableRandom random = Seeds.random("membus.names.seed", "concurrentBindsOfOneNameHaveOneWinner");
        int nodeCount = 3;
        int threadsPerNode = 3;
        // a small table so that names collide on their probe sequences too
        nodes = new TableNodes(nodeCount, 64);
        pool = Executors.newFixedThreadPool(nodeCount * threadsPerNode);
        int names = 12;
        List<String> order = new ArrayList<>();
        for (int n = 0; n < names; n++) {
            order.add("name-" + random.nextInt(1000) + "-" + n);
        }
        for (int round = 0; round < names; round++) {
            String name = order.get(round);
            CountDownLatch start = new CountDownLatch(1);
            List<Future<Long>> results = new ArrayList<>();
            Set<Long> offered = new HashSet<>();
            for (int node = 1; node <= nodeCount; node++) {
                NameTable table = nodes.table(node);
                for (int t = 0; t < threadsPerNode; t++) {
                    long mine = ptr(node, 8L * (1 + random.nextInt(1 << 20)));
                    offered.add(mine);
                    results.add(pool.submit(() -> {
                        start.await();
                        return table.bind(name, mine);
                    }));
                }
            }
            start.countDown();
            Set<Long> returned = new HashSet<>();
            for (Future<Long> f : results) {
                returned.add(f.get(60, TimeUnit.SECONDS));
            }
            assertEquals(1, returned.size(), "every binder of " + name + " returns the one winner: " + returned);
            long winner = returned.iterator().next();
            assertTrue(offered.contains(winner), "the winner is one of the binders' pointers");
            for (int node = 1; node <= nodeCount; node++) {
                assertEquals(Optional.of(winner), nodes.table(node).lookup(name), "node " + node + " sees the winner");
            }
        }
        Map<String, Long> all = nodes.table(2).bindings();
        assertEquals(new HashSet<>(order), all.keySet(), "one binding per name, no second record of any");
        long records = 0;
        for (long s : nodes.slots()) {
            if (s != 0 && s != NameTable.TOMBSTONE) {
                records++;
            }
        }
        assertEquals(names, records, "losers' records were never published");
    }

    @Test
    void bindsUnbindsAndLookupsInterleavedNeverLeaveTwoLiveRecordsOfAName() throws Exception {
        long seed = Seeds.seed("membus.names.seed", "bindsUnbindsAndLookupsInterleaved");
        nodes = new TableNodes(3, 512);
        int threads = 6;
        pool = Executors.newFixedThreadPool(threads);
        String[] names = {"a", "b", "c", "d"};
        List<Future<?>> work = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int node = 1 + t % 3;
            SplittableRandom random = new SplittableRandom(seed + t);
            NameTable table = nodes.table(node);
            work.add(pool.submit(() -> {
                for (int op = 0; op < 40; op++) {
                    String name = names[random.nextInt(names.length)];
                    long mine = ptr(node, 8L * (1 + random.nextInt(1 << 16)));
                    switch (random.nextInt(4)) {
                        case 0, 1 -> {
                            long won = table.bind(name, mine);
                            assertTrue(won != 0 && won != NameTable.TOMBSTONE, "a bind returns a pointer");
                        }
                        case 2 -> table.unbind(name, random.nextBoolean() ? 0 : table.lookup(name).orElse(mine));
                        default -> table.lookup(name);
                    }
                }
                return null;
            }));
        }
        for (Future<?> f : work) {
            f.get(120, TimeUnit.SECONDS);
        }
        // the invariant: at most one live record per name; bindings() and lookups agree
        Map<String, Integer> live = new java.util.HashMap<>();
        var memory = nodes.memories.get(1);
        for (long s : nodes.slots()) {
            if (s != 0 && s != NameTable.TOMBSTONE) {
                long w0 = memory.readLong(RemotePtr.plus(s, 8));
                String name = new String(memory.read(RemotePtr.plus(s, 8 + NameTable.RECORD_HEADER), (int) w0),
                        StandardCharsets.UTF_8);
                live.merge(name, 1, Integer::sum);
            }
        }
        live.forEach((name, count) -> assertEquals(1, count, "live records of " + name + " (seed " + seed + ")"));
        Map<String, Long> all = nodes.table(3).bindings();
        assertEquals(live.keySet(), all.keySet());
        for (String name : names) {
            assertEquals(Optional.ofNullable(all.get(name)), nodes.table(2).lookup(name));
        }
    }

    @Test
    void lookupUnbindCompareAndUnbindAndRebind() {
        nodes = new TableNodes(2, 128);
        NameTable a = nodes.table(1);
        NameTable b = nodes.table(2);
        assertEquals(Optional.empty(), a.lookup("orders"));
        assertEquals(ptr(1, 64), a.bind("orders", ptr(1, 64)));
        assertEquals(ptr(1, 64), b.bind("orders", ptr(2, 64)), "second binder gets the first's pointer");
        assertEquals(Optional.of(ptr(1, 64)), b.lookup("orders"));
        assertFalse(b.unbind("orders", ptr(2, 64)), "compare-and-unbind of another pointer leaves the binding");
        assertEquals(Optional.of(ptr(1, 64)), a.lookup("orders"));
        assertTrue(b.unbind("orders", ptr(1, 64)), "compare-and-unbind of the bound pointer removes it");
        assertEquals(Optional.empty(), a.lookup("orders"));
        assertFalse(a.unbind("orders", 0), "nothing left to unbind");
        assertEquals(ptr(2, 128), b.bind("orders", ptr(2, 128)), "a name unbound can be bound again");
        assertEquals(Optional.of(ptr(2, 128)), a.lookup("orders"));
        assertEquals(ptr(2, 128), a.bind("orders", ptr(1, 128)));
        assertTrue(a.unbind("orders", 0), "unconditional unbind");
        assertEquals(Optional.empty(), b.lookup("orders"));
        assertEquals(Map.of(), a.bindings());
        assertThrows(InvalidNameException.class, () -> a.bind("", ptr(1, 8)));
        assertThrows(InvalidNameException.class, () -> a.lookup("x".repeat(NameTable.MAX_NAME + 1)));
        assertThrows(InvalidPointerException.class, () -> a.bind("null", RemotePtr.NULL));
        String unicode = "zählerstand-\u263a-\uD83D\uDE00";
        assertEquals(ptr(1, 256), a.bind(unicode, ptr(1, 256)));
        assertEquals(Map.of(unicode, ptr(1, 256)), b.bindings());
    }

    @Test
    void aFullTableFailsTypedNamingTheCapacityKey() {
        nodes = new TableNodes(1, 8);
        NameTable t = nodes.table(1);
        for (int i = 0; i < 8; i++) {
            assertEquals(ptr(1, 8L * (i + 1)), t.bind("n" + i, ptr(1, 8L * (i + 1))));
        }
        NameTableFullException e = assertThrows(NameTableFullException.class, () -> t.bind("one-more", ptr(1, 800)));
        assertTrue(e.getMessage().contains("membus.names.capacity"), e.getMessage());
        assertEquals(8, e.capacity());
        assertFalse(e.mayHaveRun());
        assertEquals(ptr(1, 8), t.bind("n0", ptr(1, 999 * 8)), "a bound name still answers in a full table");
        assertTrue(t.unbind("n0", 0));
        // tombstones are not reused: a full table stays full for new names
        assertThrows(NameTableFullException.class, () -> t.bind("n0", ptr(1, 800)));
        assertEquals(Optional.empty(), t.lookup("n0"));
        assertEquals(Optional.of(ptr(1, 16)), t.lookup("n1"));
    }

    @Test
    void aRecordWithAWrongTagIsIgnoredByLookupsBindsAndUnbinds() {
        nodes = new TableNodes(2, 64);
        NameTable forger = nodes.table(2, TableNodes.tags(0xbad));
        NameTable honest = nodes.table(1);
        assertEquals(ptr(2, 8), forger.bind("settings", ptr(2, 8)));
        assertEquals(Optional.of(ptr(2, 8)), forger.lookup("settings"), "the forger sees its own record");
        assertEquals(Optional.empty(), honest.lookup("settings"), "a record without the secret's tag is no binding");
        assertFalse(honest.unbind("settings", 0));
        assertEquals(ptr(1, 8), honest.bind("settings", ptr(1, 8)), "bound past the forged record");
        assertEquals(ptr(1, 8), nodes.table(2).bind("settings", ptr(2, 16)), "every honest binder sees that one");
        assertEquals(Map.of("settings", ptr(1, 8)), nodes.table(2).bindings());
    }

    @Test
    void aRecordIsPublishedOnlyAfterItIsWrittenCompletely() throws Exception {
        // node 2 binds, its records are placed on node 3 with every verb to node 3 delayed: the write is slow,
        // while node 1 watches the table (on node 1) and reads every record a slot points at at once
        nodes = new TableNodes(3, 16, Map.of(2, Placement.node(3)));
        nodes.transports.get(2).faults().delay(3, Duration.ofMillis(40));
        pool = Executors.newFixedThreadPool(2);
        AtomicBoolean done = new AtomicBoolean();
        Future<Integer> watcher = pool.submit(() -> {
            int seen = 0;
            var memory = nodes.memories.get(1);
            while (true) {
                boolean last = done.get(); // a pass that starts after the binds ended sees them all
                for (long s : nodes.slots()) {
                    if (s == 0 || s == NameTable.TOMBSTONE) {
                        continue;
                    }
                    byte[] rec = memory.read(RemotePtr.plus(s, 8), NameTable.RECORD_HEADER);
                    ByteBuffer r = ByteBuffer.wrap(rec).order(ByteOrder.LITTLE_ENDIAN);
                    long w0 = r.getLong(0);
                    assertEquals(NameTable.RECORD_MAGIC, (int) (w0 >>> 32), "a published record is whole");
                    String name = new String(memory.read(RemotePtr.plus(s, 8 + NameTable.RECORD_HEADER), (int) w0),
                            StandardCharsets.UTF_8);
                    long[] tag = TableNodes.TAGS.tag(name, r.getLong(8));
                    assertEquals(tag[0], r.getLong(16), "tag written before publication");
                    assertEquals(tag[1], r.getLong(24));
                    seen = Math.max(seen, Integer.parseInt(name.substring(5)) + 1);
                }
                if (last) {
                    return seen;
                }
            }
        });
        NameTable t = nodes.table(2);
        for (int i = 0; i < 4; i++) {
            assertEquals(ptr(2, 8L * (i + 1)), t.bind("slow-" + i, ptr(2, 8L * (i + 1))));
        }
        done.set(true);
        assertEquals(4, watcher.get(60, TimeUnit.SECONDS), "the watcher read every record once published");
    }

    @Test
    void openRefusesMemoryThatHoldsNoTable() {
        nodes = new TableNodes(1, 8);
        var a = nodes.allocators.get(1);
        assertThrows(InvalidPointerException.class, () -> NameTable.open(nodes.memories.get(1), () -> a,
                RemotePtr.pack(1, TableNodes.SYSTEM_SEGMENT, 1024), TableNodes.TAGS, TableNodes.TIMEOUT));
    }
}
