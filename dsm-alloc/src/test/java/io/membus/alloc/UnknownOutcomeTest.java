package io.membus.alloc;

import io.membus.core.RemoteMemory;
import io.membus.core.RemotePtr;
import io.membus.core.error.DsmTimeoutException;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.function.LongPredicate;

import static io.membus.alloc.HeapLayout.SMALL;
import static io.membus.alloc.HeapLayout.classOf;
import static io.membus.alloc.HeapLayout.stateOf;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Verbs whose deadline fired: the verb may have been executed or not. A chunk claim
 * cut short that way must leave the table usable (the chunk is neither leaked nor
 * owned with the previous claim's free list), and a restarted node and an adopter
 * of its earlier chunks must never both own one.
 */
class UnknownOutcomeTest extends WithAllocCluster {
    private static final int CHUNK = 16 << 10;
    /**
     * No refills ahead: each fault below targets the next matching verb of the test's own calls,
     * which a refill ahead's verbs on the allocator's threads (a free list's pop CAS) could take
     * first (PoolConcurrencyTest covers refills ahead racing trims).
     */
    private static final AllocatorConfig CONFIG = AllocatorConfig.builder().heapSegments(AllocCluster.HEAP)
            .chunkSize(CHUNK).refillAhead(false).build();

    /** Verbs that fail on demand, once: a CAS that executes and then reports a timeout, a write or read that fails. */
    static final class FaultyRemote extends Remote {
        volatile LongPredicate casExecutesThenTimesOut;
        volatile boolean failNextRead;
        volatile int failWriteOfLength = -1;
        volatile Runnable beforeNextCas;
        /** When set, each verb fails with this probability: half before it runs, half after (reads: before). */
        volatile SplittableRandom chaos;
        volatile double chaosRate;

        /** 0: no fault; 1: fail before the verb runs; 2: fail after it ran. */
        private int chaosRoll() {
            SplittableRandom r = chaos;
            if (r == null || r.nextDouble() >= chaosRate) {
                return 0;
            }
            return r.nextBoolean() ? 1 : 2;
        }

        FaultyRemote(RemoteMemory memory) {
            super(memory);
        }

        private static DsmTimeoutException timeout(String op, long ptr) {
            return new DsmTimeoutException(op, RemotePtr.nodeId(ptr), Duration.ofMillis(1));
        }

        @Override
        long compareAndSwap(long ptr, long expected, long update) {
            Runnable before = beforeNextCas;
            if (before != null) {
                beforeNextCas = null;
                before.run();
            }
            int roll = chaosRoll();
            if (roll == 1) {
                throw timeout("compareAndSwap", ptr);
            }
            long w = super.compareAndSwap(ptr, expected, update);
            if (roll == 2) {
                throw timeout("compareAndSwap", ptr);
            }
            LongPredicate p = casExecutesThenTimesOut;
            if (p != null && p.test(update)) {
                casExecutesThenTimesOut = null;
                throw timeout("compareAndSwap", ptr);
            }
            return w;
        }

        @Override
        byte[] read(long ptr, int length) {
            if (failNextRead) {
                failNextRead = false;
                throw timeout("read", ptr);
            }
            if (chaosRoll() != 0) {
                throw timeout("read", ptr);
            }
            return super.read(ptr, length);
        }

        @Override
        long fetchAndAdd(long ptr, long delta) {
            int roll = chaosRoll();
            if (roll == 1) {
                throw timeout("fetchAndAdd", ptr);
            }
            long old = super.fetchAndAdd(ptr, delta);
            if (roll == 2) {
                throw timeout("fetchAndAdd", ptr);
            }
            return old;
        }

        @Override
        void write(long ptr, byte[] src) {
            if (src.length == failWriteOfLength) {
                failWriteOfLength = -1;
                throw timeout("write", ptr);
            }
            int roll = chaosRoll();
            if (roll == 1) {
                throw timeout("write", ptr);
            }
            super.write(ptr, src);
            if (roll == 2) {
                throw timeout("write", ptr);
            }
        }
    }

    private enum Fault { CAS_RESOLVED_BY_READ, CAS_AND_READ_FAIL, RESET_WRITE_FAILS }

    @Test
    void claimCasThatTimedOutButWasExecutedIsFinished() {
        claimCutShort(Fault.CAS_RESOLVED_BY_READ);
    }

    @Test
    void claimWhoseOutcomeStaysUnknownIsRolledBackLater() {
        claimCutShort(Fault.CAS_AND_READ_FAIL);
    }

    @Test
    void claimWhoseResetWriteFailedIsRolledBackLater() {
        claimCutShort(Fault.RESET_WRITE_FAILS);
    }

    private void claimCutShort(Fault fault) {
        cluster = new AllocCluster(1, 1 << 20, CONFIG);
        FaultyRemote[] faulty = new FaultyRemote[1];
        GlobalAllocator two = cluster.addNode(2, 1 << 20, CONFIG, m -> faulty[0] = new FaultyRemote(m));
        GlobalAllocator one = cluster.node(1);

        // chunk 0 of node 1: claimed for 100-byte blocks, all freed and released, so it is FREE
        // with the words of that claim (bump, a non-empty free list, a count) still in it
        List<BlockRef> first = new ArrayList<>();
        for (int i = 0; i < 20; i++) {
            first.add(two.allocate(100, Placement.node(1)));
        }
        first.forEach(one::free);
        assertEquals(1, two.trim(), "the empty chunk is released");
        int otherClass = SizeClasses.classFor(300 + HeapLayout.BLOCK_HEADER_LENGTH);

        switch (fault) {
            case CAS_RESOLVED_BY_READ -> faulty[0].casExecutesThenTimesOut =
                    u -> stateOf(u) == SMALL && classOf(u) == otherClass;
            case CAS_AND_READ_FAIL -> {
                faulty[0].casExecutesThenTimesOut = u -> {
                    if (stateOf(u) == SMALL && classOf(u) == otherClass) {
                        faulty[0].failNextRead = true; // the read that would resolve the outcome fails too
                        return true;
                    }
                    return false;
                };
            }
            case RESET_WRITE_FAILS -> faulty[0].failWriteOfLength = 3 * Long.BYTES;
        }
        List<BlockRef> live = new ArrayList<>();
        if (fault == Fault.CAS_RESOLVED_BY_READ) {
            live.add(two.allocate(300, Placement.node(1)));
        } else {
            assertThrows(DsmTimeoutException.class, () -> two.allocate(300, Placement.node(1)));
        }

        // the heap keeps working for both classes on both nodes, with no block handed out twice
        for (int i = 0; i < 300; i++) {
            GlobalAllocator a = i % 2 == 0 ? two : one;
            live.add(a.allocate(i % 3 == 0 ? 100 : 300, Placement.node(1)));
        }
        Set<Long> starts = new HashSet<>();
        for (int i = 0; i < live.size(); i++) {
            BlockRef r = live.get(i);
            assertTrue(starts.add(r.ptr()), "block handed out twice: " + r);
            two.writeLong(r, 0, i);
        }
        for (int i = 0; i < live.size(); i++) {
            assertEquals(i, one.readLong(live.get(i), 0));
        }
        // nothing is leaked: once every block is freed and both nodes trim, every chunk is FREE
        live.forEach(one::free);
        one.trim();
        two.trim();
        HeapUsage.SegmentUsage u = one.usage().segments().stream().filter(s -> s.nodeId() == 1).findFirst()
                .orElseThrow();
        assertEquals(Map.of(), u.chunksByOwner(), "no chunk stays owned: " + u);
    }

    @Test
    void aReleaseWhoseCasTimedOutAfterExecutingNeverPopsTheFreeChunk() {
        cluster = new AllocCluster(1, 1 << 20, CONFIG);
        FaultyRemote[] faulty = new FaultyRemote[1];
        GlobalAllocator two = cluster.addNode(2, 1 << 20, CONFIG, m -> faulty[0] = new FaultyRemote(m));
        GlobalAllocator one = cluster.node(1);
        int perChunk = CHUNK / 112; // 100-byte payloads are 112-byte blocks
        List<BlockRef> blocks = new ArrayList<>();
        for (int i = 0; i < perChunk; i++) {
            blocks.add(two.allocate(100, Placement.node(1))); // exactly chunk 0, carved to the end
        }
        blocks.forEach(one::free); // onto chunk 0's free list; its hint bit is set
        faulty[0].casExecutesThenTimesOut = u -> stateOf(u) == HeapLayout.FREE;
        assertThrows(DsmTimeoutException.class, two::trim, "the release CAS ran, but node 2 saw a timeout");

        // node 2 must not take the list of a chunk that is FREE (anyone may claim it and carve it anew)
        List<BlockRef> live = new ArrayList<>();
        for (int i = 0; i < 20; i++) {
            live.add(two.allocate(100, Placement.node(1)));
            live.add(one.allocate(300, Placement.node(1))); // claims a FREE chunk: chunk 0 first
        }
        TreeMap<Long, BlockRef> byStart = new TreeMap<>();
        for (BlockRef r : live) {
            byStart.put(r.ptr(), r);
        }
        long end = 0;
        for (BlockRef r : byStart.values()) {
            assertTrue(r.ptr() >= end, "two live blocks overlap at " + r);
            end = r.payload() + r.capacity();
        }
        live.forEach(one::free);
    }

    @Test
    void anAdopterRollsBackAClaimTheDepartedNodeNeverFinished() {
        cluster = new AllocCluster(2, 1 << 20, CONFIG);
        FaultyRemote[] faulty = new FaultyRemote[1];
        GlobalAllocator three = cluster.addNode(3, 1 << 20, CONFIG, m -> faulty[0] = new FaultyRemote(m));
        faulty[0].casExecutesThenTimesOut = u -> {
            if (stateOf(u) == SMALL && HeapLayout.isPending(u)) {
                faulty[0].failNextRead = true; // and the read that would resolve it fails: the entry stays pending
                return true;
            }
            return false;
        };
        assertThrows(DsmTimeoutException.class, () -> three.allocate(100, Placement.node(1)));
        assertEquals(Map.of(3, 1), usageOfNode1().chunksByOwner(), "a pending claim of node 3");

        cluster.leave(3);
        assertEquals(1, cluster.node(2).adoptOrphans(3));
        assertEquals(Map.of(), usageOfNode1().chunksByOwner(), "the adopter rolled the unfinished claim back");
        BlockRef r = cluster.node(2).allocate(100, Placement.node(1)); // and the chunk is claimable again
        cluster.node(1).free(r);
    }

    private HeapUsage.SegmentUsage usageOfNode1() {
        return cluster.node(1).usage().segments().stream().filter(s -> s.nodeId() == 1).findFirst().orElseThrow();
    }

    @Test
    void aRestartedNodeAndAnAdopterNeverBothOwnItsEarlierChunk() {
        cluster = new AllocCluster(1, 1 << 20, CONFIG);
        FaultyRemote[] adopterVerbs = new FaultyRemote[1];
        GlobalAllocator adopter = cluster.addNode(2, 1 << 20, CONFIG, m -> adopterVerbs[0] = new FaultyRemote(m));
        cluster.addNode(3, 1 << 20, CONFIG);
        BlockRef kept = cluster.node(3).allocate(100, Placement.node(1)); // keeps node 3's chunk from release
        GlobalAllocator restarted = cluster.reopen(3, CONFIG);

        // the directory lost node 3 for a moment: node 2 adopts what it believes are orphans, and between
        // its read of the table and its CAS the restarted node 3 finds its earlier chunk and takes it over
        cluster.directory.removeMember(3, "test: missed heartbeats");
        BlockRef[] fresh = new BlockRef[1];
        adopterVerbs[0].beforeNextCas = () -> fresh[0] = restarted.allocate(100, Placement.node(1));
        assertEquals(0, adopter.adoptOrphans(3), "the restarted node took its chunk over first");
        assertEquals(chunkOf(kept), chunkOf(fresh[0]), "the earlier incarnation's chunk is reused");
        cluster.directory.addMember(cluster.transports.get(3).self());
        assertEquals(Map.of(3, 1), cluster.node(1).usage().segments().stream().filter(s -> s.nodeId() == 1)
                .findFirst().orElseThrow().chunksByOwner());
        adopter.free(kept);
        restarted.free(fresh[0]);
    }

    @Test
    void anAdopterThatWinsKeepsTheChunkFromTheRestartedNode() {
        cluster = new AllocCluster(3, 1 << 20, CONFIG);
        BlockRef kept = cluster.node(3).allocate(100, Placement.node(1));
        GlobalAllocator restarted = cluster.reopen(3, CONFIG);
        cluster.directory.removeMember(3, "test: missed heartbeats");
        assertEquals(1, cluster.node(2).adoptOrphans(3));
        cluster.directory.addMember(cluster.transports.get(3).self());
        BlockRef fresh = restarted.allocate(100, Placement.node(1));
        assertTrue(chunkOf(fresh) != chunkOf(kept), "the adopted chunk is node 2's now: " + fresh);
        BlockRef adopterBlock = cluster.node(2).allocate(100, Placement.node(1));
        assertEquals(chunkOf(kept), chunkOf(adopterBlock), "the adopter carves from the chunk it adopted");
        restarted.free(kept);
    }

    private static long chunkOf(BlockRef r) {
        long dataStart = HeapLayout.dataStart(HeapLayout.chunkCount(1 << 20, Integer.numberOfTrailingZeros(CHUNK)));
        return (RemotePtr.offset(r.ptr()) - dataStart) / CHUNK;
    }
}
