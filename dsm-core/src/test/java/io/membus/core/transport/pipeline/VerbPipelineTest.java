package io.membus.core.transport.pipeline;

import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.time.TimerWheel;
import io.membus.core.transport.CountingObserver;
import io.membus.core.transport.VerbObserver;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The pipeline on a fake wire that records what is posted and answers only when the test says so. */
class VerbPipelineTest {
    private static final int PEER = 7;
    private static final Duration LONG = Duration.ofSeconds(30);
    private static final long WAIT_NANOS = TimeUnit.SECONDS.toNanos(10);

    private final TimerWheel wheel = new TimerWheel("test-wheel");

    /** Records posts; refuses them while {@code room} is false; flushes counted. */
    private static final class FakeWire implements Wire<Verb> {
        final List<Verb> posted = Collections.synchronizedList(new ArrayList<>());
        volatile boolean room = true;
        final AtomicInteger flushes = new AtomicInteger();

        @Override
        public boolean post(Verb v) {
            if (!room) {
                return false;
            }
            posted.add(v);
            return true;
        }

        @Override
        public void flush() {
            flushes.incrementAndGet();
        }
    }

    private VerbPipeline<Verb> pipeline(FakeWire wire, int window, Duration timeout, VerbObserver observer) {
        return new VerbPipeline<>(PEER, timeout, window, observer, wire, true, wheel);
    }

    private static Verb faa(long delta) {
        return new Verb(VerbObserver.FAA, 0x1000, 42, 8, delta, 0, null, 0);
    }

    private static Verb read(int length) {
        return new Verb(VerbObserver.READ, 0x1000, 42, length, 0, 0, null, 0);
    }

    private static Throwable failure(CompletableFuture<?> f) throws InterruptedException {
        try {
            f.get(10, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            return e.getCause();
        } catch (java.util.concurrent.TimeoutException e) {
            throw new AssertionError("the verb did not fail within 10 s");
        }
        throw new AssertionError("the verb succeeded");
    }

    private static void pollUntil(BooleanSupplier condition, String message) {
        long start = System.nanoTime();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() - start > WAIT_NANOS) {
                throw new AssertionError(message);
            }
            Thread.onSpinWait();
            try {
                Thread.sleep(1);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError(e);
            }
        }
    }

    @Test
    void verbsArePostedInIssueOrderWithinTheWindowAndCompleteInThatOrder() throws Exception {
        FakeWire wire = new FakeWire();
        CountingObserver observer = new CountingObserver(PEER);
        VerbPipeline<Verb> p = pipeline(wire, 4, LONG, observer);
        int n = 100;
        List<Verb> verbs = new ArrayList<>();
        List<Integer> completionOrder = Collections.synchronizedList(new ArrayList<>());
        for (int i = 0; i < n; i++) {
            Verb v = faa(i);
            verbs.add(v);
            int index = i;
            p.issue(v, 0);
            v.<Long>future().whenComplete((r, e) -> {
                // the contract: when a verb completes, every verb issued before it has completed
                for (int j = 0; j < index; j++) {
                    assertTrue(verbs.get(j).future().isDone(), "verb " + j + " before verb " + index);
                }
                completionOrder.add(index);
            });
        }
        assertEquals(4, wire.posted.size(), "the window holds four");
        assertEquals(4, p.inFlight());
        assertEquals(n - 4, p.backlog());
        int answered = 0;
        while (answered < n) {
            Verb v = wire.posted.get(answered);
            assertSame(verbs.get(answered), v, "posted in issue order");
            assertEquals(answered + 1, v.seq());
            assertSame(v, p.answering(v.seq()));
            assertTrue(p.completeLong(v, v.a * 10));
            answered++;
            p.pump(); // a wire pumps when answers free the window (tcp: once per read batch)
            assertTrue(wire.posted.size() - answered <= 4, "never more than the window on the wire");
        }
        for (int i = 0; i < n; i++) {
            assertEquals(i * 10L, verbs.get(i).<Long>future().get());
        }
        assertEquals(n, completionOrder.size());
        for (int i = 0; i < n; i++) {
            assertEquals(i, completionOrder.get(i));
        }
        assertEquals(n, observer.completed.get());
        assertEquals(8L * n, observer.bytes.get());
        assertEquals(0, p.pending());
        assertEquals(0, p.kept());
    }

    @Test
    void aWireWithoutRoomKeepsVerbsInTheBacklogUntilItHasRoom() throws Exception {
        FakeWire wire = new FakeWire();
        VerbPipeline<Verb> p = pipeline(wire, Integer.MAX_VALUE, LONG, VerbObserver.NONE);
        wire.room = false;
        Verb a = read(16);
        Verb b = read(32);
        p.issue(a, 0);
        p.issue(b, 0);
        assertEquals(0, wire.posted.size());
        assertEquals(2, p.backlog());
        wire.room = true;
        p.pump();
        assertEquals(List.of(a, b), wire.posted);
        assertEquals(1, wire.flushes.get(), "one flush for the burst");
        byte[] r = new byte[16];
        p.complete(a, r);
        p.complete(b, new byte[32]);
        assertSame(r, a.<byte[]>future().get());
        assertEquals(32, b.<byte[]>future().get().length);
    }

    @Test
    void deadlinesFireFromOneWheelEntryPerPipelineNotOneTaskPerVerb() throws Exception {
        FakeWire wire = new FakeWire();
        CountingObserver observer = new CountingObserver(PEER);
        VerbPipeline<Verb> p = pipeline(wire, 16, Duration.ofMillis(300), observer);
        int n = 1000;
        List<Verb> verbs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            Verb v = faa(1);
            verbs.add(v);
            p.issue(v, 0);
        }
        assertEquals(1, wheel.armedCount(), "1000 verbs, one entry on the wheel");
        assertEquals(16, p.inFlight());
        for (Verb v : verbs) {
            DsmTimeoutException e = assertInstanceOf(DsmTimeoutException.class, failure(v.future()));
            assertEquals(PEER, e.nodeId());
            assertTrue(e.getMessage().contains("operation=fetchAndAdd"), e.getMessage());
        }
        pollUntil(() -> observer.timedOut.get() == n, "every timeout reported");
        // with nothing left to expire the entry is not re-armed: an idle connection costs the wheel nothing
        pollUntil(() -> wheel.armedCount() == 0, "the entry stays armed with nothing to expire");
        assertEquals(0, p.inFlight());
        assertEquals(0, p.backlog());
        // 16 went out before their deadline; the others timed out in the backlog and were never posted
        assertTrue(wire.posted.size() < n, "posted=" + wire.posted.size());
        assertEquals(0, p.kept(), "timed-out verbs are forgotten");
    }

    @Test
    void aLateAnswerAfterTheDeadlineIsIgnoredAndDoesNotCompleteTheVerbTwice() throws Exception {
        FakeWire wire = new FakeWire();
        CountingObserver observer = new CountingObserver(PEER);
        VerbPipeline<Verb> p = pipeline(wire, 4, Duration.ofMillis(100), observer);
        Verb v = faa(1);
        p.issue(v, 0);
        assertInstanceOf(DsmTimeoutException.class, failure(v.future()));
        assertNull(p.answering(v.seq()), "the late answer names a forgotten verb");
        assertFalse(p.completeLong(v, 99), "a late outcome is ignored");
        assertFalse(p.fail(v, new IllegalStateException("late")));
        assertInstanceOf(DsmTimeoutException.class, failure(v.future()));
        assertThrows(IllegalArgumentException.class, () -> p.answering(v.seq() + 1), "never sent");
        Verb w = faa(2);
        p.issue(w, 0);
        assertSame(w, p.answering(w.seq()));
        p.completeLong(w, 5);
        assertEquals(5L, w.<Long>future().get());
        pollUntil(() -> observer.timedOut.get() == 1 && observer.completed.get() == 1, "one timeout, one completion");
    }

    @Test
    void aDelayedVerbHoldsEveryLaterVerbBehindItAndTheWheelReleasesIt() throws Exception {
        FakeWire wire = new FakeWire();
        VerbPipeline<Verb> p = pipeline(wire, Integer.MAX_VALUE, LONG, VerbObserver.NONE);
        Verb held = faa(1);
        p.issue(held, TimeUnit.MILLISECONDS.toNanos(150));
        List<Verb> later = new ArrayList<>();
        for (int i = 0; i < 5; i++) {
            Verb v = faa(2 + i);
            later.add(v);
            p.issue(v, 0);
        }
        assertEquals(0, wire.posted.size(), "nothing overtakes the held verb");
        assertEquals(6, p.backlog());
        assertTrue(p.pending() > 0);
        pollUntil(() -> wire.posted.size() == 6, "the wheel released the held verb and the ones behind it");
        assertSame(held, wire.posted.get(0));
        for (int i = 0; i < 5; i++) {
            assertSame(later.get(i), wire.posted.get(i + 1));
        }
        for (Verb v : wire.posted) {
            p.completeLong(v, v.a);
        }
        assertEquals(1L, held.<Long>future().get());
        assertEquals(0, p.pending());
    }

    @Test
    void aDroppedVerbIsNeverPostedAndTimesOutWhileLaterVerbsComplete() throws Exception {
        FakeWire wire = new FakeWire();
        VerbPipeline<Verb> p = pipeline(wire, 4, Duration.ofMillis(200), VerbObserver.NONE);
        Verb dropped = faa(1);
        p.issue(dropped, VerbPipeline.DROP);
        Verb next = faa(2);
        p.issue(next, 0);
        assertEquals(List.of(next), wire.posted);
        p.completeLong(next, 7);
        assertEquals(7L, next.<Long>future().get());
        assertInstanceOf(DsmTimeoutException.class, failure(dropped.future()));
        assertFalse(wire.posted.contains(dropped));
    }

    @Test
    void aTimedOutVerbSaysWhetherItWasSent() throws Exception {
        FakeWire wire = new FakeWire();
        VerbPipeline<Verb> p = pipeline(wire, 1, Duration.ofMillis(200), VerbObserver.NONE);
        Verb sent = faa(1);
        p.issue(sent, 0);
        Verb waiting = faa(2); // the window of 1 is full: it stays in the backlog
        // ... and its deadline (an operation's, 50 ms) passes well before the sent verb's 200 ms frees the window:
        // with equal deadlines the window could free first and send it, which is right but not what is tested here
        long scope = io.membus.core.OperationDeadline.enter(Duration.ofMillis(50));
        try {
            p.issue(waiting, 0);
        } finally {
            io.membus.core.OperationDeadline.exit(scope);
        }
        Verb dropped = faa(3);
        p.issue(dropped, VerbPipeline.DROP);
        assertTrue(failure(sent.future()).getClass() == DsmTimeoutException.class);
        assertTrue(((DsmTimeoutException) failure(sent.future())).mayHaveRun(), "it was on the wire");
        assertFalse(((DsmTimeoutException) failure(waiting.future())).mayHaveRun(), "it never left the backlog");
        assertFalse(((DsmTimeoutException) failure(dropped.future())).mayHaveRun(), "a fault rule dropped it");
    }

    @Test
    void aVerbIssuedUnderAnEarlierOperationDeadlineTimesOutThenNotAtTheConnectionsTimeout() throws Exception {
        FakeWire wire = new FakeWire();
        VerbPipeline<Verb> p = pipeline(wire, 4, Duration.ofSeconds(20), VerbObserver.NONE);
        Verb first = faa(1); // the connection's 20 s
        p.issue(first, 0);
        Verb held = faa(2);
        Verb sent = faa(3);
        long scope = io.membus.core.OperationDeadline.enter(Duration.ofMillis(150));
        long start = System.nanoTime();
        try {
            p.issue(held, VerbPipeline.DROP);
            p.issue(sent, 0);
        } finally {
            io.membus.core.OperationDeadline.exit(scope);
        }
        Throwable h = failure(held.future());
        Throwable s = failure(sent.future());
        long tookMs = (System.nanoTime() - start) / 1_000_000;
        assertInstanceOf(DsmTimeoutException.class, h);
        assertInstanceOf(DsmTimeoutException.class, s);
        assertFalse(((DsmTimeoutException) h).mayHaveRun());
        assertTrue(((DsmTimeoutException) s).mayHaveRun());
        assertTrue(tookMs < 5_000, "they failed at their operation's deadline, not the connection's: " + tookMs + " ms");
        assertFalse(first.future().isDone(), "the verb issued before keeps its own deadline");
        Verb later = faa(4); // no scope: the connection's timeout again, and the pipeline goes on
        p.issue(later, 0);
        p.completeLong(first, 1);
        p.completeLong(later, 2);
        assertEquals(1L, first.<Long>future().get());
        assertEquals(2L, later.<Long>future().get());
    }

    @Test
    void anAnswerThatSkipsVerbsFreesTheirSlotsAndTheSkippedOnesTimeOut() throws Exception {
        FakeWire wire = new FakeWire();
        VerbPipeline<Verb> p = pipeline(wire, 3, Duration.ofMillis(200), VerbObserver.NONE);
        Verb a = faa(1);
        Verb b = faa(2);
        Verb c = faa(3);
        Verb d = faa(4);
        for (Verb v : List.of(a, b, c, d)) {
            p.issue(v, 0);
        }
        assertEquals(3, wire.posted.size());
        // the target dropped a and b (an injected fault there): the answer to c is the next to come
        assertSame(c, p.answering(c.seq()));
        p.completeLong(c, 30);
        assertEquals(30L, c.<Long>future().get());
        assertEquals(0, p.inFlight(), "a and b no longer hold window slots");
        p.pump();
        assertSame(d, wire.posted.get(3));
        assertSame(d, p.answering(d.seq()));
        p.completeLong(d, 40);
        assertInstanceOf(DsmTimeoutException.class, failure(a.future()));
        assertInstanceOf(DsmTimeoutException.class, failure(b.future()));
    }

    @Test
    void closeFailsEveryVerbInIssueOrderAndEveryLaterVerb() throws Exception {
        FakeWire wire = new FakeWire();
        CountingObserver observer = new CountingObserver(PEER);
        VerbPipeline<Verb> p = pipeline(wire, 2, LONG, observer);
        List<Verb> verbs = new ArrayList<>();
        List<Integer> order = Collections.synchronizedList(new ArrayList<>());
        for (int i = 0; i < 5; i++) {
            Verb v = read(8);
            verbs.add(v);
            int index = i;
            p.issue(v, 0);
            v.future().whenComplete((r, e) -> order.add(index));
        }
        NodeUnavailableException lost = new NodeUnavailableException(PEER, "lost");
        NodeUnavailableException notSent = NodeUnavailableException.notSent(PEER, "not sent");
        assertTrue(p.close(lost, notSent, () -> NodeUnavailableException.notSent(PEER, "closed")));
        assertFalse(p.close(lost, notSent, () -> null), "the first close wins");
        assertEquals(List.of(0, 1, 2, 3, 4), order);
        assertSame(lost, failure(verbs.get(0).future()));
        assertSame(lost, failure(verbs.get(1).future()));
        for (int i = 2; i < 5; i++) {
            assertSame(notSent, failure(verbs.get(i).future()), "verb " + i + " was still in the backlog");
            assertFalse(((NodeUnavailableException) failure(verbs.get(i).future())).mayHaveRun());
        }
        Verb after = faa(1);
        p.issue(after, 0);
        NodeUnavailableException e = assertInstanceOf(NodeUnavailableException.class, failure(after.future()));
        assertTrue(e.getMessage().contains("closed"), e.getMessage());
        assertFalse(p.completeLong(verbs.get(0), 1), "an answer after close is ignored");
        assertEquals(6, observer.failed.get());
        assertEquals(0, p.pending());
        assertEquals(2, wire.posted.size(), "nothing was posted after close");
    }

    @Test
    void atomicsCompleteWithAPrimitiveThroughALongCompletion() throws Exception {
        FakeWire wire = new FakeWire();
        VerbPipeline<Verb> p = pipeline(wire, 8, LONG, VerbObserver.NONE);
        long[] got = new long[2];
        Throwable[] failures = new Throwable[2];
        AtomicInteger calls = new AtomicInteger();
        Verb ok = new Verb(VerbObserver.CAS, 0x1000, 42, 8, 1, 2, null, 0, (value, failure) -> {
            got[0] = value;
            failures[0] = failure;
            calls.incrementAndGet();
        });
        Verb bad = new Verb(VerbObserver.FAA, 0x1000, 42, 8, 1, 0, null, 0, (value, failure) -> {
            got[1] = value;
            failures[1] = failure;
            calls.incrementAndGet();
        });
        assertNull(ok.future(), "a verb with a sink has no future");
        p.issue(ok, 0);
        p.issue(bad, 0);
        p.completeLong(ok, 1234567890123L);
        IllegalStateException refused = new IllegalStateException("refused");
        p.fail(bad, refused);
        assertEquals(2, calls.get());
        assertEquals(1234567890123L, got[0]);
        assertNull(failures[0]);
        assertSame(refused, failures[1]);
    }

    @Test
    void aCallbackThatWaitsForAVerbItIssuesOnAnInlineWireDoesNotWaitForItself() throws Exception {
        // a wire that answers inside post, as the direct connections do: the callback's verb is resolved while
        // this thread is delivering, and must be delivered by the same loop, in order
        AtomicReference<VerbPipeline<Verb>> ref = new AtomicReference<>();
        Wire<Verb> inline = v -> {
            ref.get().completeLong(v, v.a * 2);
            return true;
        };
        VerbPipeline<Verb> p = new VerbPipeline<>(PEER, LONG, Integer.MAX_VALUE, VerbObserver.NONE, inline, true, wheel);
        ref.set(p);
        List<Long> seen = Collections.synchronizedList(new ArrayList<>());
        Verb first = faa(1);
        CompletableFuture<Long> nested = new CompletableFuture<>();
        first.<Long>future().thenAccept(value -> {
            seen.add(value);
            Verb second = faa(2);
            p.issue(second, 0);
            seen.add(second.<Long>future().join()); // would never return if its outcome waited for this callback
            nested.complete(second.<Long>future().join());
        });
        Verb held = faa(3);
        p.issue(held, TimeUnit.MILLISECONDS.toNanos(20)); // the wheel thread will post both, and deliver
        p.issue(first, 0);
        assertEquals(4L, nested.get(10, TimeUnit.SECONDS));
        assertEquals(List.of(2L, 4L), seen);
        assertEquals(6L, held.<Long>future().get());
        pollUntil(() -> p.pending() == 0, "pending() counts a verb until its delivery has returned");
    }

    @Test
    void aLargeBacklogGrowsTheRingAndKeepsOrderAcrossItsGrowthAndShrink() throws Exception {
        FakeWire wire = new FakeWire();
        VerbPipeline<Verb> p = pipeline(wire, 1, LONG, VerbObserver.NONE);
        int n = 10_000; // the ring doubles from 16 past 8,192 while verbs wait, then shrinks once empty
        List<Verb> verbs = new ArrayList<>();
        for (int round = 0; round < 2; round++) {
            verbs.clear();
            for (int i = 0; i < n; i++) {
                Verb v = faa(i);
                verbs.add(v);
                p.issue(v, 0);
            }
            assertEquals(n - 1, p.backlog());
            for (int i = 0; i < n; i++) {
                Verb v = wire.posted.get(round * n + i);
                assertSame(verbs.get(i), v, "posted in issue order");
                assertSame(v, p.answering(v.seq()));
                p.completeLong(v, i);
                p.pump();
            }
            for (int i = 0; i < n; i++) {
                assertEquals((long) i, verbs.get(i).<Long>future().get());
            }
            assertEquals(0, p.kept());
        }
    }

    @Test
    void failAllKeepsThePipelineUsable() throws Exception {
        FakeWire wire = new FakeWire();
        VerbPipeline<Verb> p = pipeline(wire, 8, LONG, VerbObserver.NONE);
        Verb a = faa(1);
        p.issue(a, 0);
        p.failAll(new NodeUnavailableException(PEER, "lost"), NodeUnavailableException.notSent(PEER, "down"));
        assertInstanceOf(NodeUnavailableException.class, failure(a.future()));
        assertNull(p.answering(a.seq()), "an answer to a verb of the lost channel is ignored");
        Verb b = faa(2);
        p.issue(b, 0);
        assertSame(b, p.answering(b.seq()));
        p.completeLong(b, 3);
        assertEquals(3L, b.<Long>future().get());
    }

    @Test
    void verbsIssuedFromManyThreadsAllCompleteOnce() throws Exception {
        FakeWire wire = new FakeWire();
        VerbPipeline<Verb> p = pipeline(wire, 64, LONG, VerbObserver.NONE);
        int threads = 4;
        int perThread = 5000;
        AtomicInteger completions = new AtomicInteger();
        Thread answerer = new Thread(() -> {
            int next = 0;
            while (next < threads * perThread) {
                if (next < wire.posted.size()) {
                    Verb v = wire.posted.get(next++);
                    Verb a = p.answering(v.seq());
                    assertSame(v, a);
                    p.completeLong(v, v.a);
                    p.pump();
                } else {
                    Thread.onSpinWait();
                }
            }
        });
        answerer.start();
        List<Thread> issuers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            Thread th = new Thread(() -> {
                for (int i = 0; i < perThread; i++) {
                    p.issue(new Verb(VerbObserver.FAA, 0, 0, 8, i, 0, null, 0, (value, failure) -> {
                        assertNull(failure);
                        completions.incrementAndGet();
                    }), 0);
                }
            });
            issuers.add(th);
            th.start();
        }
        for (Thread th : issuers) {
            th.join();
        }
        answerer.join(TimeUnit.SECONDS.toMillis(30));
        assertFalse(answerer.isAlive());
        assertEquals(threads * perThread, completions.get());
        assertEquals(0, p.pending());
    }
    @Test
    void anOwnersVerbsAreSettledWhenAnsweredDroppedOrLostButOneTimedOutOnTheWireHoldsUntilTheNextEpoch()
            throws Exception {
        FakeWire wire = new FakeWire();
        VerbPipeline<Verb> p = pipeline(wire, 8, Duration.ofMillis(200), VerbObserver.NONE);
        VerbOwner mine = new VerbOwner();
        VerbOwner other = new VerbOwner();
        assertTrue(p.settledFor(mine), "nothing issued");

        Verb answered = faa(1);
        answered.owner = mine;
        Verb dropped = faa(2);
        dropped.owner = mine;
        Verb theirs = faa(3);
        theirs.owner = other;
        p.issue(dropped, 0);
        p.issue(answered, 0);
        p.issue(theirs, 0);
        assertFalse(p.settledFor(mine), "two of mine on the wire");
        assertFalse(p.settledFor(other));
        // the answer to the second passes over the first: the target dropped it, it never runs
        assertSame(answered, p.answering(answered.seq()));
        assertTrue(p.completeLong(answered, 5));
        assertTrue(p.settledFor(mine), "answered, and passed over by a later answer");
        assertFalse(p.settledFor(other), "another owner's verb is still on the wire");

        // a verb that times out on the wire may still run: its owner is held until the next epoch
        Verb late = faa(4);
        late.owner = mine;
        p.issue(late, 0);
        assertInstanceOf(DsmTimeoutException.class, failure(late.future()));
        assertFalse(p.settledFor(mine), "timed out on the wire: it may still run");
        assertSame(null, p.answering(late.seq()), "its late answer is ignored");
        assertFalse(p.settledFor(mine), "a late answer does not lift it either");
        p.failAll(new IllegalStateException("lost"), new IllegalStateException("not sent"));
        assertTrue(p.settledFor(mine), "the channel ended: nothing of the old one can run");
        assertTrue(p.settledFor(other), "failed with the channel");

        // one that times out before it was posted never ran: it settles at once
        wire.room = false;
        Verb queued = faa(5);
        queued.owner = mine;
        p.issue(queued, 0);
        assertInstanceOf(DsmTimeoutException.class, failure(queued.future()));
        assertTrue(p.settledFor(mine), "never posted");
    }
}
