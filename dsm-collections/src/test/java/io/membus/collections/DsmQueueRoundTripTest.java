package io.membus.collections;

import io.membus.alloc.GlobalAllocator;
import io.membus.alloc.HeapUsage;
import io.membus.codec.Codec;
import io.membus.codec.Codecs;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Issue 28: with default options an offer and a poll of an element up to 256 encoded
 * bytes take at most two round trips each and allocate nothing (the element is inline in
 * its slot); the slot size is set per queue, kept in the queue, and an opener naming
 * another one gets a typed error naming both. Round trips are counted exactly by
 * {@link RoundTripTransport} (waves of verbs per thread, whatever the timing).
 *
 * <p>An operation may also make the lifecycle's periodic look at the queue's root (a
 * checked block read: two reads one after the other, at most every quarter second per
 * handle, {@link Lifecycle}); such an operation shows exactly two reads more than the
 * queue's own verbs make and is allowed those two round trips more. The test fails if more
 * than a quarter of the operations made one (and an offer into a block is caught by the
 * allocator's count of blocks in use).
 */
class DsmQueueRoundTripTest {
    /** Reads an offer makes itself: the takers' waiters word (in the publish's round trip). */
    private static final int OFFER_READS = 1;
    /** Reads a poll makes itself: the slot's data (with its claim) and the putters' waiters word. */
    private static final int POLL_READS = 2;

    private MapCluster cluster;

    @AfterEach
    void close() {
        if (cluster != null) {
            cluster.close();
        }
    }

    /** Two nodes, every verb counted; node {@code id}'s collections. */
    private DsmCollections start(String transport, int id) {
        cluster = new MapCluster(transport, 2, 16 << 20, Duration.ofSeconds(10), (n, t) -> new RoundTripTransport(t));
        return collections(id);
    }

    private DsmCollections collections(int id) {
        GlobalAllocator a = cluster.node(id);
        return new DsmCollections(a.memory(), a, cluster.directory);
    }

    /** Small blocks in use over every heap segment (after every cache is trimmed). */
    private long blocksInUse() {
        for (GlobalAllocator a : cluster.allocators.values()) {
            a.trim();
        }
        long n = 0;
        for (HeapUsage.SegmentUsage s : cluster.node(1).usage().segments()) {
            n += s.blocksInUse() + s.largeObjects();
        }
        return n;
    }

    private static byte[] element(int size, int i) {
        byte[] b = new byte[size];
        Arrays.fill(b, (byte) i);
        b[0] = (byte) (i >> 8);
        return b;
    }

    @ParameterizedTest
    @ValueSource(strings = {"local", "tcp"})
    void offersAndPollsOfElementsUpTo256BytesTakeTwoRoundTripsAndAllocateNothing(String transport) {
        DsmCollections one = start(transport, 1);
        DsmCollections two = collections(2);
        Codec<byte[]> codec = Codecs.bytes();
        DsmQueue<byte[]> created = one.queue("rt", codec, 64); // the root is placed by the name's hash
        DsmQueue<byte[]> q = two.queue("rt", codec, 64);
        assertEquals(256, q.inlineBytes(), "the default slot keeps 256 encoded bytes inline");
        assertEquals(QueueOptions.DEFAULT_SLOT_BYTES, created.slotBytes());
        RoundTripTransport.Counts c = RoundTripTransport.counts();
        int ops = 0;
        int looks = 0;
        List<String> problems = new ArrayList<>();
        for (int size : new int[] {64, 256}) {
            assertEquals(size, codec.encode(element(size, 0)).length, "the bytes codec adds nothing");
            q.offer(element(size, 0)); // warm: connections, hints
            assertArrayEquals(element(size, 0), q.poll());
            long blocksBefore = blocksInUse();
            for (int i = 1; i <= 40; i++) {
                c.reset();
                assertTrue(q.offer(element(size, i)));
                ops++;
                looks += check("offer of " + size + " B #" + i, c, OFFER_READS, problems);
            }
            assertEquals(blocksBefore, blocksInUse(), size + "-byte elements must not be put in blocks");
            for (int i = 1; i <= 40; i++) {
                c.reset();
                byte[] e = q.poll();
                ops++;
                looks += check("poll of " + size + " B #" + i, c, POLL_READS, problems);
                assertArrayEquals(element(size, i), e, "element " + i + " of " + size + " B");
            }
            assertEquals(blocksBefore, blocksInUse(), "polls of " + size + "-byte elements free nothing");
        }
        assertTrue(problems.isEmpty(), String.join("\n", problems));
        assertTrue(looks * 4 <= ops, looks + " of " + ops + " operations made a lifecycle look");
    }

    /** Checks one operation's counts; returns 1 when it made a lifecycle look (two reads more). */
    private static int check(String what, RoundTripTransport.Counts c, int ownReads, List<String> problems) {
        int look = c.reads == ownReads + 2 ? 1 : 0;
        if (c.reads != ownReads + 2 * look) {
            problems.add(what + ": " + c + " (expected " + ownReads + " reads: an element outside its slot?)");
        }
        if (c.roundTrips > 2 + 2 * look) {
            problems.add(what + ": " + c + " (at most 2 round trips" + (look == 1 ? " + the lifecycle look" : "") + ")");
        }
        return look;
    }

    @Test
    void theSlotSizeIsSetPerQueueKeptInItAndAnotherOneIsRefusedNamingBoth() {
        DsmCollections one = start("local", 1);
        DsmCollections two = collections(2);
        DsmQueue<byte[]> big = one.queue("big", Codecs.bytes(), QueueOptions.capacity(8).inlineBytes(512));
        assertEquals(520, big.slotBytes());
        assertEquals(512, big.inlineBytes());
        // another node opening it without a slot size uses the stored one
        DsmQueue<byte[]> bigTwo = two.queue("big", Codecs.bytes(), 8);
        assertEquals(520, bigTwo.slotBytes());
        RoundTripTransport.Counts c = RoundTripTransport.counts();
        bigTwo.offer(element(512, 1));
        bigTwo.poll();
        List<String> problems = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            c.reset();
            bigTwo.offer(element(512, i));
            check("offer of 512 B into 520-byte slots", c, OFFER_READS, problems);
            c.reset();
            assertArrayEquals(element(512, i), bigTwo.poll());
            check("poll of 512 B from 520-byte slots", c, POLL_READS, problems);
        }
        assertTrue(problems.isEmpty(), String.join("\n", problems));
        // a 513-byte element does not fit: it goes to a block and comes back whole
        bigTwo.offer(element(513, 7));
        assertArrayEquals(element(513, 7), big.poll());

        QueueSlotSizeMismatchException e = assertThrows(QueueSlotSizeMismatchException.class,
                () -> two.queue("big", Codecs.bytes(), QueueOptions.capacity(8).slotBytes(264)));
        assertEquals(520, e.existingSlotBytes());
        assertEquals(264, e.requestedSlotBytes());
        assertTrue(e.getMessage().contains("slotBytes=520") && e.getMessage().contains("slotBytes=264"), e.getMessage());
        // on the node whose handle is cached too
        assertThrows(QueueSlotSizeMismatchException.class,
                () -> one.queue("big", Codecs.bytes(), QueueOptions.capacity(8).slotBytes(264)));
        assertEquals(520, one.queue("big", Codecs.bytes(), QueueOptions.capacity(8).slotBytes(520)).slotBytes());

        CollectionArgumentException bad = assertThrows(CollectionArgumentException.class,
                () -> QueueOptions.capacity(8).slotBytes(100));
        assertEquals("slotBytes", bad.argument());
        assertTrue(bad.getMessage().contains(QueueOptions.MIN_SLOT_BYTES + " .. " + QueueOptions.MAX_SLOT_BYTES),
                bad.getMessage());
        assertThrows(CollectionArgumentException.class, () -> QueueOptions.capacity(8).slotBytes(8));
        assertThrows(CollectionArgumentException.class,
                () -> QueueOptions.capacity(8).slotBytes(QueueOptions.MAX_SLOT_BYTES + 8));
        assertEquals("capacity", assertThrows(CollectionArgumentException.class,
                () -> QueueOptions.capacity(0)).argument());
        assertEquals("inlineBytes", assertThrows(CollectionArgumentException.class,
                () -> QueueOptions.capacity(8).inlineBytes(-1)).argument());
    }
}
