package io.membus.core;

import io.membus.core.directory.ReplicaGroupView;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.SegmentLostException;
import io.membus.core.replication.Ballot;
import io.membus.core.replication.GroupId;
import io.membus.core.test.Seeds;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.Transports;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.RepeatedTest;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;

import static io.membus.core.GroupViewDirectory.view;
import static io.membus.core.directory.ReplicaGroupView.State.LOST;
import static io.membus.core.directory.ReplicaGroupView.State.PROMOTING;
import static io.membus.core.directory.ReplicaGroupView.State.SERVING;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Routing of verbs to a replica group's primary in {@link RemoteMemory} (issue 27,
 * docs/replication.md §2.3), on {@code local} nodes, with group views set by hand
 * ({@link GroupViewDirectory}) and targets that serve another node's group on their own
 * memory ({@link ServingTransport}, until the replication engine does it in
 * {@code SegmentTable}). Without groups, {@link RemoteMemoryTest} is the check that
 * nothing changed.
 */
class RemoteMemoryRoutingTest {
    private static final long EPOCH_3 = Ballot.initial(3);
    private static final long EPOCH_2 = Ballot.of(2, 2);
    private static final Duration WAIT = Duration.ofSeconds(10);

    private final Map<Integer, Transport> nodes = new LinkedHashMap<>();
    private final GroupViewDirectory directory = new GroupViewDirectory();
    private final String fabric = "routing-" + System.nanoTime();

    private void nodes(int... ids) {
        for (int id : ids) {
            Transport t = Transports.create("local",
                    TransportConfig.builder(id).property("local.fabric", fabric).build());
            nodes.put(id, t);
            directory.base().addMember(t.self());
            directory.base().addSegment(t.export(SegmentSpec.of(0, 4096)).descriptor());
        }
    }

    @AfterEach
    void close() {
        nodes.values().forEach(Transport::close);
    }

    private SegmentDescriptor logical(int node) {
        return nodes.get(node).table().get(0).descriptor();
    }

    /** The word at {@code offset} of node {@code node}'s own segment 0, read on its table. */
    private long wordAt(int node, long offset) {
        return nodes.get(node).table().readLong(RemotePtr.pack(node, 0, offset), logical(node).remoteKey());
    }

    @Test
    void aVerbGoesToThePrimaryTheViewNamesEvenAfterThePointersNodeLeft() {
        nodes(1, 2, 3);
        ServingTransport st = new ServingTransport(nodes.get(1), nodes);
        RemoteMemory one = new RemoteMemory(st.transport(), directory, Duration.ofSeconds(5));
        int group = GroupId.of(3, 0);
        long ptr = RemotePtr.pack(3, 0, 64);
        st.serve(2, group);
        directory.put(view(logical(3), SERVING, 2, EPOCH_2, 1));

        one.writeLong(ptr, 41);
        assertEquals(41, wordAt(2, 64), "the write landed at the primary");
        assertEquals(0, wordAt(3, 64), "not at the pointer's node");
        assertEquals(41, one.fetchAndAdd(ptr, 1));
        assertEquals(42, RemoteMemory.await(one.compareAndSwapAsync(ptr, 42, 43), WAIT));
        RemoteMemory.RemoteBatch batch = one.batch();
        CompletableFuture<byte[]> batched = batch.read(ptr, 8);
        batch.submit();
        assertEquals(43, Words.getLong(RemoteMemory.await(batched, WAIT), 0));

        directory.base().removeMember(3, "downed");
        SegmentDescriptor d = one.segmentOf(ptr);
        assertEquals(3, d.nodeId(), "the logical descriptor names the pointer's segment");
        assertEquals(logical(3).remoteKey(), d.remoteKey(), "the group's key, unchanged by the promotion");
        assertEquals(43, one.readLong(ptr), "served while the pointer's node is gone");
        assertEquals(List.of(2, 2, 2, 2, 2), st.nodesFor(ptr), "every verb went to the primary, none to node 3");

        long unreplicated = RemotePtr.pack(2, 0, 8); // no group: the pointer's node, as without replication
        one.writeLong(unreplicated, 5);
        assertEquals(5, wordAt(2, 8));
        assertEquals(List.of(2), st.nodesFor(unreplicated));
    }

    /**
     * Verbs issued while the group promotes are held (none sent, none complete) and reach
     * the new primary in issue order once the view serves; verbs issued while the release
     * runs (from another thread, at a seeded point) queue behind the held ones. A run of
     * fetch-and-adds on one word returns 0, 1, 2, ... in issue order; each read of a cell
     * sees the last write issued before it.
     */
    @RepeatedTest(12) // a fresh seed each time (each printed); -Dmembus.routing.seed=... replays one in all of them
    void verbsHeldWhileTheGroupPromotesReachTheNewPrimaryInIssueOrder() throws Exception {
        SplittableRandom random = Seeds.random("membus.routing.seed",
                "verbsHeldWhileTheGroupPromotesReachTheNewPrimaryInIssueOrder");
        nodes(1, 2, 3);
        ServingTransport st = new ServingTransport(nodes.get(1), nodes);
        RemoteMemory one = new RemoteMemory(st.transport(), directory, Duration.ofSeconds(10));
        int group = GroupId.of(3, 0);
        long counter = RemotePtr.pack(3, 0, 0);
        long cell = RemotePtr.pack(3, 0, 8);
        st.serve(2, group);
        directory.put(view(logical(3), SERVING, 3, EPOCH_3, 2));
        directory.base().removeMember(3, "downed");
        directory.put(view(logical(3), PROMOTING, 0, EPOCH_3, 2));

        int n = 20 + random.nextInt(60);
        int releaseAt = random.nextInt(n + 1);
        CountDownLatch go = new CountDownLatch(1);
        Thread releaser = new Thread(() -> {
            try {
                go.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
            directory.put(view(logical(3), SERVING, 2, EPOCH_2));
        }, "routing-test-releaser");
        releaser.start();
        List<CompletableFuture<Long>> adds = new ArrayList<>();
        List<CompletableFuture<byte[]>> reads = new ArrayList<>();
        List<Long> expectedReads = new ArrayList<>();
        List<CompletableFuture<?>> all = new ArrayList<>();
        long lastWritten = 0;
        try {
            for (int i = 0; i < n; i++) {
                if (i == releaseAt) {
                    assertTrue(all.stream().noneMatch(CompletableFuture::isDone), "held verbs stay pending");
                    assertEquals(List.of(), st.sent, "and are not sent");
                    go.countDown();
                }
                switch (random.nextInt(3)) {
                    case 0 -> {
                        CompletableFuture<Long> f = one.fetchAndAddAsync(counter, 1);
                        adds.add(f);
                        all.add(f);
                    }
                    case 1 -> {
                        byte[] b = new byte[8];
                        lastWritten = i + 1;
                        Words.putLong(b, 0, lastWritten);
                        all.add(one.writeAsync(cell, b));
                        Words.putLong(b, 0, -1); // the caller may reuse its buffer once the call returned
                    }
                    default -> {
                        CompletableFuture<byte[]> f = one.readAsync(cell, 8);
                        reads.add(f);
                        expectedReads.add(lastWritten);
                        all.add(f);
                    }
                }
            }
            go.countDown();
        } finally {
            go.countDown();
            releaser.join(WAIT.toMillis());
        }
        assertFalse(releaser.isAlive());
        for (int i = 0; i < adds.size(); i++) {
            assertEquals(i, RemoteMemory.await(adds.get(i), WAIT), "fetch-and-add " + i + " in issue order");
        }
        for (int i = 0; i < reads.size(); i++) {
            assertEquals(expectedReads.get(i), Words.getLong(RemoteMemory.await(reads.get(i), WAIT), 0),
                    "read " + i + " sees the last write issued before it");
        }
        all.forEach(f -> RemoteMemory.await(f, WAIT));
        assertEquals(adds.size(), wordAt(2, 0), "every fetch-and-add ran once, at the new primary");
        assertEquals(lastWritten, wordAt(2, 8));
        assertTrue(st.nodesFor(counter).stream().allMatch(node -> node == 2), "all went to node 2: " + st.sent);
        assertEquals(n, st.nodesFor(counter).size(), "each verb sent once");
    }

    @Test
    void aVerbHeldPastItsDeadlineFailsAsATimeoutNotSent() {
        nodes(1, 2, 3);
        ServingTransport st = new ServingTransport(nodes.get(1), nodes);
        RemoteMemory one = new RemoteMemory(st.transport(), directory, Duration.ofMillis(300));
        long ptr = RemotePtr.pack(3, 0, 16);
        st.serve(2, GroupId.of(3, 0));
        directory.put(view(logical(3), PROMOTING, 0, EPOCH_3, 2));

        CompletableFuture<Long> async = one.fetchAndAddAsync(ptr, 1);
        DsmTimeoutException e = assertThrows(DsmTimeoutException.class, () -> RemoteMemory.await(async, WAIT));
        assertFalse(e.mayHaveRun(), e.getMessage());
        assertTrue(e.getMessage().contains("promotion in progress for segment 3/0"), e.getMessage());
        DsmTimeoutException blocking = assertThrows(DsmTimeoutException.class, () -> one.fetchAndAdd(ptr, 1));
        assertFalse(blocking.mayHaveRun(), blocking.getMessage());
        assertTrue(blocking.getMessage().contains("promotion in progress"), blocking.getMessage());
        assertEquals(List.of(), st.sent, "neither verb was sent");

        directory.put(view(logical(3), SERVING, 2, EPOCH_2));
        assertEquals(0, one.readLong(ptr), "neither ran");
        assertEquals(List.of(2), st.nodesFor(ptr));
    }

    @Test
    void aLostGroupFailsEveryVerbTypedAtOnce() {
        nodes(1, 2, 3);
        ServingTransport st = new ServingTransport(nodes.get(1), nodes);
        RemoteMemory one = new RemoteMemory(st.transport(), directory, Duration.ofSeconds(5));
        long ptr = RemotePtr.pack(3, 0, 0);
        directory.put(view(logical(3), LOST, 0, EPOCH_3));

        SegmentLostException e = assertThrows(SegmentLostException.class, () -> one.readLong(ptr));
        assertEquals(GroupId.of(3, 0), e.group());
        assertFalse(e.mayHaveRun());
        assertThrows(SegmentLostException.class, () -> one.writeLong(ptr, 1));
        assertThrows(SegmentLostException.class, () -> RemoteMemory.await(one.fetchAndAddAsync(ptr, 1), WAIT));
        assertThrows(SegmentLostException.class, () -> one.segmentOf(ptr));
        RemoteMemory.RemoteBatch batch = one.batch();
        CompletableFuture<Long> batched = batch.compareAndSwap(ptr, 0, 1);
        batch.submit();
        assertThrows(SegmentLostException.class, () -> RemoteMemory.await(batched, WAIT));
        assertEquals(List.of(), st.sent, "nothing was sent");
    }

    @Test
    void aNotPrimaryAnswerIsReissuedToTheHintedPrimary() {
        nodes(1, 2, 3);
        ServingTransport st = new ServingTransport(nodes.get(1), nodes);
        RemoteMemory one = new RemoteMemory(st.transport(), directory, Duration.ofSeconds(5));
        int group = GroupId.of(3, 0);
        long ptr = RemotePtr.pack(3, 0, 24);
        directory.put(view(logical(3), SERVING, 3, EPOCH_3, 2)); // the directory has not seen the promotion yet
        st.refuse(3, group, 2);
        st.serve(2, group);

        one.writeLong(ptr, 7);
        assertEquals(7, wordAt(2, 24));
        assertEquals(0, wordAt(3, 24), "the refused verb did not run at node 3");
        assertEquals(7, RemoteMemory.await(one.fetchAndAddAsync(ptr, 1), WAIT));
        RemoteMemory.RemoteBatch batch = one.batch();
        CompletableFuture<Long> batched = batch.fetchAndAdd(ptr, 1);
        batch.submit();
        assertEquals(8, RemoteMemory.await(batched, WAIT));
        assertEquals(List.of(3, 2, 3, 2, 3, 2), st.nodesFor(ptr), "each refused once, then run at the hint");
    }

    @Test
    void aNotPrimaryAnswerWithoutAUsableHintWaitsForTheDirectoryToNameAnotherPrimary() {
        nodes(1, 2, 3);
        ServingTransport st = new ServingTransport(nodes.get(1), nodes);
        RemoteMemory one = new RemoteMemory(st.transport(), directory, Duration.ofSeconds(10));
        int group = GroupId.of(3, 0);
        long ptr = RemotePtr.pack(3, 0, 32);
        directory.put(view(logical(3), SERVING, 3, EPOCH_3, 2));
        st.refuse(3, group, 9); // a hint that is not a member
        st.serve(2, group);

        CompletableFuture<Long> first = one.fetchAndAddAsync(ptr, 1);
        CompletableFuture<Long> second = one.fetchAndAddAsync(ptr, 1);
        assertFalse(first.isDone(), "held: node 3 refused it and node 9 is not a member");
        assertFalse(second.isDone());
        directory.put(view(logical(3), SERVING, 2, EPOCH_2));
        assertEquals(0, RemoteMemory.await(first, WAIT));
        assertEquals(1, RemoteMemory.await(second, WAIT), "in issue order");
        assertEquals(2, wordAt(2, 32));
        assertEquals(List.of(3, 2, 2), st.nodesFor(ptr), "the second verb queued behind the held first, not sent to 3");
    }

    @Test
    void aBatchHoldsTheVerbsOfAPromotingGroupAndRunsTheOthersAtOnce() {
        nodes(1, 2, 3);
        ServingTransport st = new ServingTransport(nodes.get(1), nodes);
        RemoteMemory one = new RemoteMemory(st.transport(), directory, Duration.ofSeconds(10));
        long held = RemotePtr.pack(3, 0, 40);
        long free = RemotePtr.pack(2, 0, 40);
        st.serve(2, GroupId.of(3, 0));
        directory.put(view(logical(3), PROMOTING, 0, EPOCH_3, 2));

        byte[] bytes = {1, 2, 3, 4, 5, 6, 7, 8};
        RemoteMemory.RemoteBatch batch = one.batch();
        CompletableFuture<Void> write = batch.write(held, bytes, 0, 8);
        CompletableFuture<Long> other = batch.fetchAndAdd(free, 5);
        batch.submit();
        bytes[0] = 99; // read at submit: a held write keeps what was there then
        assertEquals(0, RemoteMemory.await(other, WAIT));
        assertFalse(write.isDone());
        directory.put(view(logical(3), SERVING, 2, EPOCH_2));
        RemoteMemory.await(write, WAIT);
        assertArrayEquals(new byte[]{1, 2, 3, 4, 5, 6, 7, 8}, one.read(held, 8));
    }

    @Test
    void twoVerbPathsAcrossTwoPrimariesFallBackToOrderedSingleVerbs() {
        nodes(1, 2, 3, 4);
        ServingTransport st = new ServingTransport(nodes.get(1), nodes);
        RemoteMemory one = new RemoteMemory(st.transport(), directory, Duration.ofSeconds(5));
        long a = RemotePtr.pack(3, 0, 48);
        long b = RemotePtr.pack(4, 0, 48);
        st.serve(2, GroupId.of(3, 0));
        directory.put(view(logical(3), SERVING, 2, EPOCH_2));
        directory.put(view(logical(4), SERVING, 4, Ballot.initial(4)));
        one.writeLong(a, 11);
        one.writeLong(b, 12);
        byte[] da = new byte[8];
        byte[] db = new byte[8];
        one.readInOrder(a, da, b, db);
        assertEquals(11, Words.getLong(da, 0));
        assertEquals(12, Words.getLong(db, 0));

        byte[] fill = new byte[8];
        Words.putLong(fill, 0, 99);
        assertEquals(0, one.writeThenCompareAndSwap(RemotePtr.pack(3, 0, 56), fill, RemotePtr.pack(3, 0, 64), 0, 1));
        assertEquals(99, wordAt(2, 56));
        assertEquals(1, wordAt(2, 64));
        assertEquals(List.of(2, 2, 2, 2), st.nodesFor(a), "group 3/0 only at its primary: write, read, write, CAS");
    }

    /** readEach routes each pointer as read does: a group's reads to its primary, a refused one re-issued at the hint. */
    @Test
    void readEachGoesToEachGroupsPrimaryAndAReadRefusedAsNotPrimaryIsReissued() {
        nodes(1, 2, 3, 4);
        ServingTransport st = new ServingTransport(nodes.get(1), nodes);
        RemoteMemory one = new RemoteMemory(st.transport(), directory, Duration.ofSeconds(5));
        st.serve(2, GroupId.of(3, 0));
        directory.put(view(logical(3), SERVING, 2, EPOCH_2));
        directory.put(view(logical(4), SERVING, 4, Ballot.initial(4), 2)); // the directory has not seen the promotion
        st.refuse(4, GroupId.of(4, 0), 2);
        st.serve(2, GroupId.of(4, 0));
        long[] ptrs = {RemotePtr.pack(3, 0, 256), RemotePtr.pack(4, 0, 512), RemotePtr.pack(3, 0, 264),
            RemotePtr.pack(2, 0, 1024)};
        for (int i = 0; i < ptrs.length; i++) {
            one.writeLong(ptrs[i], 100 + i);
        }
        byte[][] dsts = new byte[ptrs.length][8];
        one.readEach(ptrs, dsts);
        for (int i = 0; i < ptrs.length; i++) {
            assertEquals(100 + i, Words.getLong(dsts[i], 0), "read " + i);
        }
        assertEquals(101, wordAt(2, 512), "group 4/0 is served at node 2");
        assertEquals(0, wordAt(4, 512), "nothing ran at node 4, which refused");
        assertEquals(List.of(2, 2, 2, 2), st.nodesFor(ptrs[0]), "group 3/0: two writes and two reads, at its primary");
        assertEquals(List.of(4, 2, 4, 2), st.nodesFor(ptrs[1]), "group 4/0: refused once each, then run at the hint");
    }

    @Test
    void heldVerbsFailTypedWhenTheGroupIsLostAndGoToThePointersNodeWhenItIsNoLongerReplicated() {
        nodes(1, 2, 3);
        ServingTransport st = new ServingTransport(nodes.get(1), nodes);
        RemoteMemory one = new RemoteMemory(st.transport(), directory, Duration.ofSeconds(10));
        long onThree = RemotePtr.pack(3, 0, 72);
        long onTwo = RemotePtr.pack(2, 0, 72);
        directory.put(view(logical(3), PROMOTING, 0, EPOCH_3, 2));
        directory.put(view(logical(2), PROMOTING, 0, Ballot.initial(2), 3));

        CompletableFuture<Long> lost = one.fetchAndAddAsync(onThree, 1);
        CompletableFuture<Long> back = one.fetchAndAddAsync(onTwo, 1);
        assertFalse(lost.isDone());
        assertFalse(back.isDone());
        directory.put(view(logical(3), LOST, 0, EPOCH_3));
        SegmentLostException e = assertThrows(SegmentLostException.class, () -> RemoteMemory.await(lost, WAIT));
        assertFalse(e.mayHaveRun());
        assertFalse(back.isDone(), "another group's verbs stay held");
        directory.remove(GroupId.of(2, 0));
        assertEquals(0, RemoteMemory.await(back, WAIT));
        assertEquals(1, wordAt(2, 72));
        assertEquals(List.of(2), st.nodesFor(onTwo));
        assertEquals(List.of(), st.nodesFor(onThree));
    }

    @Test
    void aNodeServingItsOwnGroupRunsItsVerbsOnItsOwnTableAndPeersReachIt() {
        nodes(1, 2);
        RemoteMemory one = new RemoteMemory(nodes.get(1), directory, Duration.ofSeconds(5));
        ServingTransport st = new ServingTransport(nodes.get(2), nodes);
        RemoteMemory two = new RemoteMemory(st.transport(), directory, Duration.ofSeconds(5));
        long ptr = RemotePtr.pack(1, 0, 80);
        directory.put(view(logical(1), SERVING, 1, Ballot.initial(1), 2));

        assertTrue(one.runsDirect(ptr), "the primary's own verbs run on its table");
        one.writeLong(ptr, 3);
        assertEquals(3, RemoteMemory.await(one.fetchAndAddAsync(ptr, 1), WAIT));
        assertEquals(4, two.readLong(ptr));
        assertEquals(List.of(1), st.nodesFor(ptr));
    }

    /**
     * Every segment a group served by its own node (what replication with no failure looks
     * like to routing): a seeded mix of blocking, asynchronous and batched verbs from one
     * node on every node's memory gives what a plain model of the words says, as without
     * groups (the replicated paths: group lookups, copied write sources, the NotPrimary
     * wrapper, the two-verb paths).
     */
    @Test
    void withEverySegmentAGroupServedByItsOwnNodeVerbsBehaveAsWithout() {
        SplittableRandom random = Seeds.random("membus.routing.seed",
                "withEverySegmentAGroupServedByItsOwnNodeVerbsBehaveAsWithout");
        nodes(1, 2, 3);
        for (int n = 1; n <= 3; n++) {
            directory.put(view(logical(n), SERVING, n, Ballot.initial(n)));
        }
        RemoteMemory one = new RemoteMemory(nodes.get(1), directory, Duration.ofSeconds(5));
        long[] model = new long[3 * 8];
        for (int step = 0; step < 400; step++) {
            int w = random.nextInt(model.length);
            long ptr = RemotePtr.pack(1 + w / 8, 0, 8L * (w % 8));
            long value = random.nextLong();
            String what = "step " + step + " word " + w;
            switch (random.nextInt(7)) {
                case 0 -> {
                    one.writeLong(ptr, value);
                    model[w] = value;
                }
                case 1 -> assertEquals(model[w], one.readLong(ptr), what);
                case 2 -> {
                    assertEquals(model[w], one.fetchAndAdd(ptr, value), what);
                    model[w] += value;
                }
                case 3 -> {
                    long expected = random.nextBoolean() ? model[w] : value;
                    long found = RemoteMemory.await(one.compareAndSwapAsync(ptr, expected, value), WAIT);
                    assertEquals(model[w], found, what);
                    if (expected == model[w]) {
                        model[w] = value;
                    }
                }
                case 4 -> {
                    byte[] b = new byte[8];
                    Words.putLong(b, 0, value);
                    RemoteMemory.await(one.writeAsync(ptr, b), WAIT);
                    model[w] = value;
                }
                case 5 -> {
                    int v = random.nextInt(model.length);
                    long other = RemotePtr.pack(1 + v / 8, 0, 8L * (v % 8));
                    RemoteMemory.RemoteBatch batch = one.batch();
                    CompletableFuture<Long> a = batch.fetchAndAdd(ptr, 1);
                    CompletableFuture<byte[]> b = batch.read(other, 8);
                    batch.submit();
                    assertEquals(model[w], RemoteMemory.await(a, WAIT), what);
                    model[w] += 1;
                    assertEquals(model[v], Words.getLong(RemoteMemory.await(b, WAIT), 0), what);
                }
                default -> {
                    int v = random.nextInt(model.length);
                    long other = RemotePtr.pack(1 + v / 8, 0, 8L * (v % 8));
                    byte[] da = new byte[8];
                    byte[] db = new byte[8];
                    one.readInOrder(ptr, da, other, db);
                    assertEquals(model[w], Words.getLong(da, 0), what);
                    assertEquals(model[v], Words.getLong(db, 0), what);
                }
            }
        }
    }

    /**
     * Verbs held after a refusal with no usable hint wait for the directory to change; when
     * it does not change by their deadlines, they fail not sent and the hold goes, so later
     * verbs follow the directory again (here the refusal was transient: node 3 serves).
     */
    @Test
    void aHoldWhoseVerbsAllTimedOutLetsLaterVerbsFollowTheDirectoryAgain() {
        nodes(1, 2, 3);
        ServingTransport st = new ServingTransport(nodes.get(1), nodes);
        RemoteMemory one = new RemoteMemory(st.transport(), directory, Duration.ofMillis(300));
        int group = GroupId.of(3, 0);
        long ptr = RemotePtr.pack(3, 0, 88);
        directory.put(view(logical(3), SERVING, 3, EPOCH_3, 2));
        st.refuse(3, group, 0);

        DsmTimeoutException e = assertThrows(DsmTimeoutException.class, () -> one.fetchAndAdd(ptr, 1));
        assertFalse(e.mayHaveRun(), e.getMessage());
        assertTrue(e.getMessage().contains("refused it as not primary"), e.getMessage());
        st.stopRefusing(3, group);
        for (int attempt = 1; ; attempt++) { // the hold leaves at the wheel's tick after the deadline: until then verbs queue
            try {
                assertEquals(0, one.fetchAndAdd(ptr, 1));
                break;
            } catch (DsmTimeoutException queuedBehindTheLastOne) { // each such attempt waited out its own deadline
                assertFalse(queuedBehindTheLastOne.mayHaveRun());
                assertTrue(attempt < 10, "the hold never left: " + queuedBehindTheLastOne);
            }
        }
        assertEquals(1, wordAt(3, 88));
    }
}
