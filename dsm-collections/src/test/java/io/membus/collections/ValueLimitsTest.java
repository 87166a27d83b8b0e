package io.membus.collections;

import io.membus.alloc.GlobalAllocator;
import io.membus.alloc.HeapUsage;
import io.membus.alloc.OutOfRemoteMemoryException;
import io.membus.codec.Codec;
import io.membus.codec.Codecs;
import io.membus.core.error.BadLengthException;
import io.membus.core.error.DsmConfigException;
import io.membus.core.error.ValueTooLargeException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Values too large for a structure are refused by the structure, before anything is
 * claimed; and a put or offer that fails at any step leaves every heap segment's usage
 * exactly as it was.
 */
class ValueLimitsTest {
    private MapCluster cluster;
    private final Map<Integer, RoundTripTransport> transports = new TreeMap<>();

    @AfterEach
    void close() {
        if (cluster != null) {
            cluster.close();
        }
    }

    /** Two nodes of {@code heapBytes} each; node 1's collections (names in the cluster's directory). */
    private DsmCollections start(long heapBytes) {
        cluster = new MapCluster("local", 2, heapBytes, Duration.ofSeconds(10), (id, t) -> {
            RoundTripTransport r = new RoundTripTransport(t);
            transports.put(id, r);
            return r;
        });
        GlobalAllocator a = cluster.node(1);
        return new DsmCollections(a.memory(), a, cluster.directory);
    }

    /** Per node and segment: free chunks, large chunks, small blocks in use, large objects (after every cache is trimmed). */
    private List<String> usage() {
        for (GlobalAllocator a : cluster.allocators.values()) {
            a.trim();
        }
        List<String> rows = new ArrayList<>();
        for (HeapUsage.SegmentUsage s : cluster.node(1).usage().segments()) {
            rows.add("node=" + s.nodeId() + " segment=" + s.segment() + " freeChunks=" + s.freeChunks()
                    + " largeChunks=" + s.largeChunks() + " blocksInUse=" + s.blocksInUse()
                    + " largeObjects=" + s.largeObjects());
        }
        return rows;
    }

    @Test
    void aHundredMebibyteMapValueIsRefusedByTheMapNamingTheLimitAndTheSetting() {
        DsmCollections c = start(8 << 20);
        DsmMap<String, byte[]> m = c.map("blobs", Codecs.strings(), Codecs.bytes());
        m.put("small", new byte[100]);
        List<String> before = usage();
        ValueTooLargeException e = assertThrows(ValueTooLargeException.class,
                () -> m.put("big", new byte[100 << 20]));
        assertEquals(DsmCollections.DEFAULT_MAX_VALUE_SIZE, e.limit());
        assertEquals(DsmCollections.MAX_VALUE_SIZE_SETTING, e.setting());
        assertTrue(e.size() > 100 << 20, e.getMessage());
        assertTrue(e.getMessage().contains("blobs") && e.getMessage().contains("membus.collections.max-value-size"),
                e.getMessage());
        assertEquals(false, e.mayHaveRun());
        assertEquals(before, usage(), "nothing claimed by the refused put");
        assertEquals(1, m.size());
    }

    @Test
    void theLimitIsConfigurablePerCollectionsAndPerMapHandle() {
        DsmCollections c = start(8 << 20).maxValueSize(1000);
        DsmMap<String, byte[]> m = c.map("blobs", Codecs.strings(), Codecs.bytes());
        m.put("k", new byte[900]);
        ValueTooLargeException e = assertThrows(ValueTooLargeException.class, () -> m.put("k", new byte[1000]));
        assertEquals(1000, e.limit());
        m.maxEntryBytes(5000).put("k", new byte[4000]);
        assertEquals(4000, m.get("k").length);
        assertEquals(5000, assertThrows(ValueTooLargeException.class,
                () -> m.compute("k", (k, v) -> new byte[5000])).limit());
        assertTrue(assertThrows(ValueTooLargeException.class, () -> m.compute("k", (k, v) -> new byte[5000]))
                .setting().startsWith("DsmMap.maxEntryBytes"));
        assertEquals(4000, m.get("k").length, "the refused compute changed nothing");
        assertThrows(DsmConfigException.class, () -> c.maxValueSize(0));
        assertThrows(DsmConfigException.class, () -> c.maxValueSize(DsmCollections.MAX_VALUE_SIZE_LIMIT + 1));
        assertThrows(DsmConfigException.class, () -> m.maxEntryBytes(-1));
    }

    @Test
    void aQueueRefusesAnElementOverTheLimitBeforeClaimingItsBlock() {
        DsmCollections c = start(8 << 20).maxValueSize(64 << 10);
        DsmQueue<byte[]> q = c.queue("jobs", Codecs.bytes(), 16);
        assertTrue(q.offer(new byte[10_000])); // a block of its own (not inline)
        List<String> before = usage();
        ValueTooLargeException e = assertThrows(ValueTooLargeException.class, () -> q.offer(new byte[200_000]));
        assertEquals(64 << 10, e.limit());
        assertTrue(e.getMessage().contains("queue \"jobs\""), e.getMessage());
        assertEquals(before, usage(), "nothing claimed by the refused offer");
        assertEquals(1, q.size());
    }

    /**
     * An offer whose publishing CAS fails (before it is sent: it did not run) gives its
     * slot back and frees its element's block exactly once: the error thrown is the
     * publish's own (not a double free's), and the heap is as it was.
     */
    @Test
    void anOfferWhosePublishFailsFreesItsElementOnceAndThrowsThePublishError() {
        DsmCollections c = start(8 << 20);
        DsmQueue<byte[]> q = c.queue("jobs", Codecs.bytes(), 16);
        assertTrue(q.offer(new byte[10_000])); // a block of its own (not inline)
        assertEquals(10_000, q.poll().length);
        List<String> before = usage();
        java.util.concurrent.atomic.AtomicInteger failed = new java.util.concurrent.atomic.AtomicInteger();
        // the publishing CAS: WRITING(t, node) -> FULL(t); once
        transports.values().forEach(t -> t.failCas = v -> SlotState.phase(v[1]) == SlotState.WRITING
                && SlotState.phase(v[2]) == SlotState.FULL && failed.getAndIncrement() == 0);
        io.membus.core.error.DsmException e;
        try {
            e = assertThrows(io.membus.core.error.DsmException.class, () -> q.offer(new byte[20_000]));
        } finally {
            transports.values().forEach(t -> t.failCas = null);
        }
        assertEquals(1, failed.get(), "the publishing CAS was failed once");
        assertTrue(e instanceof io.membus.core.error.DsmTimeoutException && !e.mayHaveRun()
                && e.getMessage().contains("injected by the test"), "the publish's own error: " + e);
        assertEquals(List.of(), List.of(e.getSuppressed()), "no second free (a double free is refused by the"
                + " block's generation, and its error was added to or thrown over the first)");
        assertEquals(before, usage(), "the element's block freed, once");
        assertEquals(0, q.size(), "nothing enqueued");
        assertTrue(q.offer(new byte[30_000]), "the slot was given back");
        assertEquals(30_000, q.poll().length);
        assertEquals(before, usage(), "after another offer and poll");
    }

    @Test
    void aPutThatFailsAtAnyStepLeavesTheHeapAsItWas() {
        DsmCollections c = start(2 << 20).maxValueSize(DsmCollections.MAX_VALUE_SIZE_LIMIT);
        Codec<byte[]> failing = new Codec<>() {
            @Override
            public String id() {
                return "failing-bytes";
            }

            @Override
            public Class<byte[]> type() {
                return byte[].class;
            }

            @Override
            public byte[] encode(byte[] value) {
                if (value.length == 13) {
                    throw new IllegalStateException("encode failed (test)");
                }
                return value.clone();
            }

            @Override
            public byte[] decode(byte[] src, int offset, int length) {
                return java.util.Arrays.copyOfRange(src, offset, offset + length);
            }
        };
        DsmMap<String, byte[]> m = c.map("steps", Codecs.strings(), failing);
        m.put("warm", new byte[100]);
        m.put("warm-large", new byte[100_000]);
        List<String> before = usage();

        // 1. encoding fails
        assertThrows(IllegalStateException.class, () -> m.put("k", new byte[13]));
        assertEquals(before, usage(), "after a failed encode");

        // 2. allocation fails: larger than any node's heap, under the limit; then more than is free
        assertThrows(io.membus.alloc.AllocationSizeException.class, () -> m.put("k", new byte[3 << 20]));
        assertEquals(before, usage(), "after a refused allocation size");
        assertThrows(OutOfRemoteMemoryException.class, () -> m.put("k", new byte[2_020_000]));
        assertEquals(before, usage(), "after a failed allocation");

        // 3. the entry's write is refused before it is sent (as tcp refuses a write longer than its frames)
        transports.values().forEach(t -> t.refuseWritesOver = 50_000);
        try {
            assertThrows(BadLengthException.class, () -> m.put("k", new byte[200_000]));
            assertThrows(BadLengthException.class, () -> m.put("warm-large", new byte[200_000]));
            assertThrows(BadLengthException.class, () -> m.compute("warm", (k, v) -> new byte[300_000]));
        } finally {
            transports.values().forEach(t -> t.refuseWritesOver = Integer.MAX_VALUE);
        }
        assertEquals(before, usage(), "after refused writes");

        // and the map is as it was
        assertEquals(2, m.size());
        assertEquals(100_000, m.get("warm-large").length);
        assertEquals(100, m.get("warm").length);
    }
}
