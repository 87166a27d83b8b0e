package io.membus.test.check;

import io.membus.test.history.History;
import io.membus.test.history.Operation;
import io.membus.test.history.Outcome;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class LinearizabilityCheckerTest {
    private final LinearizabilityChecker checker = new LinearizabilityChecker();

    private Verdict register(Ops ops) {
        return checker.checkKey("r", ops.list(), Models.register(0L)).verdict();
    }

    @Test
    void aReadConcurrentWithAWriteMaySeeEitherValue() {
        assertEquals(Verdict.LINEARIZABLE, register(new Ops("r")
                .ok(1, "write", 1L, null, 0, 10)
                .ok(2, "read", null, 0L, 2, 4)
                .ok(3, "read", null, 1L, 3, 5)));
    }

    @Test
    void aStaleReadAfterACompletedWriteIsAViolationAndTheExplanationNamesIt() {
        KeyResult r = checker.checkKey("r", new Ops("r")
                .ok(1, "write", 1L, null, 0, 10)
                .ok(2, "read", null, 0L, 20, 30).list(), Models.register(0L));
        assertEquals(Verdict.VIOLATION, r.verdict());
        assertEquals(1, r.longestPrefix().size(), "the write is the longest prefix");
        assertEquals("read", r.stuck().get(0).f());
        assertTrue(r.explanation().contains("cannot be placed"), r.explanation());
    }

    @Test
    void readsMustNotGoBackInTimeEvenWhenEachAloneIsConcurrentWithTheWrite() {
        // the classic: a write of 1 overlaps two sequential reads that see 1 then 0
        assertEquals(Verdict.VIOLATION, register(new Ops("r")
                .ok(1, "write", 1L, null, 0, 100)
                .ok(2, "read", null, 1L, 10, 20)
                .ok(2, "read", null, 0L, 30, 40)));
    }

    @Test
    void anIndeterminateWriteMayExplainALaterReadOrNeverHappen() {
        assertEquals(Verdict.LINEARIZABLE, register(new Ops("r")
                .info(1, "write", 5L, 0)
                .ok(2, "read", null, 0L, 10, 20)
                .ok(2, "read", null, 5L, 30, 40)));
        assertEquals(Verdict.LINEARIZABLE, register(new Ops("r")
                .info(1, "write", 5L, 0)
                .ok(2, "read", null, 0L, 10, 20)));
        // but it cannot take effect twice, nor before its invocation
        assertEquals(Verdict.VIOLATION, register(new Ops("r")
                .ok(2, "read", null, 5L, 0, 5)
                .info(1, "write", 5L, 10)));
        assertEquals(Verdict.VIOLATION, register(new Ops("r")
                .info(1, "write", 5L, 0)
                .ok(2, "read", null, 5L, 10, 20)
                .ok(2, "read", null, 0L, 30, 40)));
    }

    @Test
    void aFailedOperationNeverTookEffect() {
        assertEquals(Verdict.VIOLATION, register(new Ops("r")
                .fail(1, "write", 5L, 0, 5)
                .ok(2, "read", null, 5L, 10, 20)));
    }

    @Test
    void compareAndSetOutcomesAreChecked() {
        assertEquals(Verdict.LINEARIZABLE, register(new Ops("r")
                .ok(1, "cas", List.of(0L, 1L), true, 0, 10)
                .ok(2, "cas", List.of(0L, 2L), false, 0, 10)
                .ok(3, "read", null, 1L, 20, 30)));
        assertEquals(Verdict.VIOLATION, register(new Ops("r")
                .ok(1, "cas", List.of(0L, 1L), true, 0, 10)
                .ok(2, "cas", List.of(0L, 2L), true, 0, 10)));
    }

    @Test
    void aLostUpdateOnACounterIsCaught() {
        Model<Long> counter = Models.counter(0);
        assertEquals(Verdict.LINEARIZABLE, checker.checkKey("c", new Ops("c")
                .ok(1, "incrementAndGet", 1L, 1L, 0, 10)
                .ok(2, "incrementAndGet", 1L, 2L, 0, 10)
                .ok(3, "read", null, 2L, 20, 30).list(), counter).verdict());
        assertEquals(Verdict.VIOLATION, checker.checkKey("c", new Ops("c")
                .ok(1, "incrementAndGet", 1L, 1L, 0, 10)
                .ok(2, "incrementAndGet", 1L, 1L, 0, 10)
                .ok(3, "read", null, 1L, 20, 30).list(), counter).verdict(), "two increments both returned 1");
    }

    /**
     * Twenty increments of unknown outcome, then reads of 10 and, later, 5: a violation
     * (a counter never goes back). Without placing interchangeable indeterminate
     * operations in invocation order, proving it means trying each of the 2^20 subsets
     * of increments; with it, 21. A budget of 200,000 steps is far below the first and
     * far above the second, so this catches the reduction missing.
     */
    @Test
    void interchangeableIndeterminateOperationsAreTriedInInvocationOrderOnly() {
        LinearizabilityChecker bounded = new LinearizabilityChecker(200_000, Duration.ofSeconds(30));
        Model<Long> counter = Models.counter(0);
        Ops bad = new Ops("c");
        Ops good = new Ops("c");
        for (int i = 0; i < 20; i++) {
            bad.info(10 + i, "incrementAndGet", 1L, i);
            good.info(10 + i, "incrementAndGet", 1L, i);
        }
        bad.ok(1, "read", null, 10L, 100, 110).ok(1, "read", null, 5L, 120, 130);
        good.ok(1, "read", null, 10L, 100, 110).ok(1, "read", null, 12L, 120, 130);
        KeyResult b = bounded.checkKey("c", bad.list(), counter);
        assertEquals(Verdict.VIOLATION, b.verdict(), b.explanation());
        assertEquals(Verdict.LINEARIZABLE, bounded.checkKey("c", good.list(), counter).verdict());
        // twins still take effect only after their own invocation
        assertEquals(Verdict.LINEARIZABLE, checker.checkKey("c", new Ops("c")
                .info(1, "incrementAndGet", 1L, 0)
                .ok(2, "read", null, 1L, 10, 20)
                .info(3, "incrementAndGet", 1L, 50)
                .ok(2, "read", null, 2L, 60, 70).list(), counter).verdict());
        assertEquals(Verdict.VIOLATION, checker.checkKey("c", new Ops("c")
                .info(1, "incrementAndGet", 1L, 0)
                .ok(2, "read", null, 2L, 10, 20)
                .info(3, "incrementAndGet", 1L, 50).list(), counter).verdict());
    }

    /**
     * Twenty offers of unknown outcome whose elements nobody took, around a queue's
     * checked traffic: pruned, they never took effect, and the history is decided at once
     * within a budget the whole search exceeds. Pruning never makes a violation: a
     * history that is bad without the unseen offers is still judged on all of them.
     */
    @Test
    void aQueueCheckPrunesUnknownOffersNobodyTook() {
        LinearizabilityChecker bounded = new LinearizabilityChecker(100_000, Duration.ofSeconds(30));
        Model<List<Object>> queue = Models.fifoQueue(64);
        Ops ops = new Ops("q");
        for (int i = 0; i < 20; i++) {
            ops.info(10 + i, "offer", 1000L + i, i);
        }
        for (long v = 0; v < 30; v++) {
            ops.ok(1, "offer", v, true, 100 + 10 * v, 105 + 10 * v);
            ops.ok(2, "poll", null, v, 106 + 10 * v, 109 + 10 * v);
        }
        KeyResult r = bounded.checkKey("q", ops.list(), queue);
        assertEquals(Verdict.LINEARIZABLE, r.verdict(), r.explanation());
        assertEquals(80, r.operations(), "the whole history is reported");
        // out of order: bad with or without the unseen offers
        Ops bad = new Ops("q").info(9, "offer", 99L, 0)
                .ok(1, "offer", 1L, true, 10, 20).ok(1, "offer", 2L, true, 30, 40)
                .ok(2, "poll", null, 2L, 50, 60);
        assertEquals(Verdict.VIOLATION, bounded.checkKey("q", bad.list(), queue).verdict());
        // an unseen unknown offer that must have happened (it filled the queue): still linearizable
        Model<List<Object>> one = Models.fifoQueue(1);
        assertEquals(Verdict.LINEARIZABLE, checker.checkKey("q", new Ops("q").info(9, "offer", 99L, 0)
                .ok(1, "offer", 1L, false, 10, 20).list(), one).verdict());
    }

    @Test
    void mapKeysFollowConcurrentMapSemantics() {
        Model<Object> key = Models.mapKey();
        assertEquals(Verdict.LINEARIZABLE, checker.checkKey("k", new Ops("k")
                .ok(1, "putIfAbsent", "a", null, 0, 10)
                .ok(2, "putIfAbsent", "b", "a", 5, 15)
                .ok(3, "replaceIf", List.of("a", "c"), true, 20, 30)
                .ok(1, "remove", null, "c", 40, 50)
                .ok(2, "get", null, null, 60, 70).list(), key).verdict());
        assertEquals(Verdict.VIOLATION, checker.checkKey("k", new Ops("k")
                .ok(1, "putIfAbsent", "a", null, 0, 10)
                .ok(2, "putIfAbsent", "b", null, 20, 30).list(), key).verdict(), "two winners of putIfAbsent");
    }

    @Test
    void aQueueDeliversEachElementOnceInFifoOrder() {
        Model<List<Object>> q = Models.fifoQueue(10);
        assertEquals(Verdict.LINEARIZABLE, checker.checkKey("q", new Ops("q")
                .ok(1, "offer", "a", true, 0, 10)
                .ok(1, "offer", "b", true, 20, 30)
                .ok(2, "poll", null, "a", 40, 50)
                .ok(3, "poll", null, "b", 45, 55)
                .ok(2, "poll", null, null, 60, 70).list(), q).verdict());
        assertEquals(Verdict.VIOLATION, checker.checkKey("q", new Ops("q")
                .ok(1, "offer", "a", true, 0, 10)
                .ok(2, "poll", null, "a", 20, 30)
                .ok(3, "poll", null, "a", 40, 50).list(), q).verdict(), "delivered twice");
        assertEquals(Verdict.VIOLATION, checker.checkKey("q", new Ops("q")
                .ok(1, "offer", "a", true, 0, 10)
                .ok(1, "offer", "b", true, 20, 30)
                .ok(2, "poll", null, "b", 40, 50).list(), q).verdict(), "out of FIFO order");
    }

    @Test
    void lockHoldersNeverOverlapAndTokensGrow() {
        Model<Models.LockState> lock = Models.lock();
        assertEquals(Verdict.LINEARIZABLE, checker.checkKey("l", new Ops("l")
                .ok(1, "acquire", null, 1L, 0, 10)
                .ok(2, "acquire", null, 2L, 5, 40)
                .ok(1, "release", 1L, null, 20, 30)
                .ok(2, "release", 2L, null, 50, 60).list(), lock).verdict());
        assertEquals(Verdict.VIOLATION, checker.checkKey("l", new Ops("l")
                .ok(1, "acquire", null, 1L, 0, 10)
                .ok(2, "acquire", null, 2L, 20, 30)
                .ok(1, "release", 1L, null, 40, 50).list(), lock).verdict(), "overlapping holders");
        assertEquals(Verdict.VIOLATION, checker.checkKey("l", new Ops("l")
                .ok(1, "acquire", null, 5L, 0, 10)
                .ok(1, "release", 5L, null, 20, 30)
                .ok(2, "acquire", null, 3L, 40, 50).list(), lock).verdict(), "a token that went backwards");
    }

    @Test
    void historiesArePartitionedByKeyAndTheVerdictNamesTheBadKey() {
        List<Operation> ops = new ArrayList<>();
        ops.addAll(new Ops("good").ok(1, "write", 1L, null, 0, 10).ok(2, "read", null, 1L, 20, 30).list());
        int base = ops.size();
        for (Operation o : new Ops("bad").ok(1, "write", 1L, null, 0, 10).ok(2, "read", null, 0L, 20, 30).list()) {
            ops.add(new Operation(base + o.id(), o.process(), o.key(), o.f(), o.input(), o.output(), o.outcome(),
                    o.invokeNanos(), o.completeNanos()));
        }
        CheckResult r = checker.check(new History(ops), Models.register(0L));
        assertEquals(Verdict.VIOLATION, r.verdict());
        assertEquals(List.of("bad"), r.keysWith(Verdict.VIOLATION));
        assertEquals(List.of("good"), r.keysWith(Verdict.LINEARIZABLE));
        assertTrue(r.summary().contains("key bad"), r.summary());
    }

    @Test
    void anExhaustedBudgetIsUnknownNeverAGuess() {
        LinearizabilityChecker tiny = new LinearizabilityChecker(3, Duration.ofSeconds(10));
        Ops ops = new Ops("r");
        for (int i = 0; i < 20; i++) {
            ops.ok(i, "write", (long) i, null, 0, 100);
        }
        ops.ok(99, "read", null, 7L, 200, 300);
        assertEquals(Verdict.UNKNOWN, tiny.checkKey("r", ops.list(), Models.register(0L)).verdict());
    }

    @Test
    void badLimitsAreRefusedWithWhatIsAllowed() {
        io.membus.core.error.DsmConfigException steps = assertThrows(io.membus.core.error.DsmConfigException.class,
                () -> new LinearizabilityChecker(0, java.time.Duration.ofSeconds(1)));
        assertEquals("bad config: key=checker maxStepsPerKey, value=0, allowed=1 or more search steps",
                steps.getMessage());
        io.membus.core.error.DsmConfigException budget = assertThrows(io.membus.core.error.DsmConfigException.class,
                () -> new LinearizabilityChecker(10, java.time.Duration.ZERO));
        assertEquals("bad config: key=checker timeBudget, value=PT0S, allowed=a positive duration", budget.getMessage());
    }

    @Test
    void anUnknownFunctionIsRefusedNamingWhatTheModelKnows() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> register(new Ops("r").ok(1, "frobnicate", null, null, 0, 1)));
        assertTrue(e.getMessage().contains("model=register") && e.getMessage().contains("read, write, cas"),
                e.getMessage());
        assertEquals(Outcome.OK, new Ops("r").ok(1, "read", null, 0L, 0, 1).list().get(0).outcome());
    }
}
