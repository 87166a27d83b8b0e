package io.membus.test.check;

import io.membus.test.history.History;
import io.membus.test.history.Operation;
import io.membus.test.history.Outcome;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * Histories made from a sequential run: every operation gets a real-time interval
 * that contains its point in the run, so the history is linearizable by
 * construction; then one read is corrupted to return a value nobody wrote, which
 * the checker must catch. Seed printed; {@code -Dmembus.seed=N} replays.
 */
class RandomizedCheckerTest {

    @Test
    void linearizableByConstructionPassesAndOneCorruptedReadIsCaught() {
        long seed = Long.getLong("membus.seed", System.nanoTime());
        System.out.println("RandomizedCheckerTest seed=" + seed + " (replay with -Dmembus.seed=" + seed + ")");
        Random rnd = new Random(seed);
        LinearizabilityChecker checker = new LinearizabilityChecker();
        for (int round = 0; round < 30; round++) {
            List<Operation> ops = new ArrayList<>();
            String[] keys = {"a", "b", "c", "d"};
            long[] values = new long[keys.length];
            long t = 0;
            int readIndex = -1;
            for (int i = 0; i < 200; i++) {
                int k = rnd.nextInt(keys.length);
                t += 10;
                long invoke = t - rnd.nextInt(40);   // starts up to 40 ns before its point ...
                long complete = t + rnd.nextInt(40); // ... and ends up to 40 ns after: intervals overlap
                Operation op;
                switch (rnd.nextInt(3)) {
                    case 0 -> {
                        long v = rnd.nextInt(5);
                        values[k] = v;
                        op = new Operation(i, i % 8, keys[k], "write", v, null, Outcome.OK, invoke, complete);
                    }
                    case 1 -> {
                        long expect = rnd.nextInt(5);
                        long update = rnd.nextInt(5);
                        boolean ok = values[k] == expect;
                        if (ok) {
                            values[k] = update;
                        }
                        op = new Operation(i, i % 8, keys[k], "cas", List.of(expect, update), ok, Outcome.OK, invoke,
                                complete);
                    }
                    default -> {
                        op = new Operation(i, i % 8, keys[k], "read", null, values[k], Outcome.OK, invoke, complete);
                        readIndex = i;
                    }
                }
                ops.add(op);
            }
            CheckResult good = checker.check(new History(ops), Models.register(0L));
            assertEquals(Verdict.LINEARIZABLE, good.verdict(), "seed=" + seed + " round=" + round + ": " + good.summary());
            if (readIndex >= 0) {
                Operation r = ops.get(readIndex);
                ops.set(readIndex, new Operation(r.id(), r.process(), r.key(), r.f(), r.input(), 99L, r.outcome(),
                        r.invokeNanos(), r.completeNanos()));
                CheckResult bad = checker.check(new History(ops), Models.register(0L));
                assertEquals(Verdict.VIOLATION, bad.verdict(), "seed=" + seed + " round=" + round
                        + ": a read of a value never written must be caught");
                assertEquals(List.of(r.key()), bad.keysWith(Verdict.VIOLATION), "seed=" + seed);
            }
        }
    }

    @Test
    void aFewThousandConcurrentOperationsCheckWithinTheBudget() {
        long seed = Long.getLong("membus.seed", System.nanoTime());
        System.out.println("RandomizedCheckerTest.bulk seed=" + seed);
        Random rnd = new Random(seed);
        List<Operation> ops = new ArrayList<>();
        long[] counters = new long[8];
        long t = 0;
        for (int i = 0; i < 4000; i++) {
            int k = rnd.nextInt(counters.length);
            t += 5;
            long invoke = t - rnd.nextInt(30);
            long complete = t + rnd.nextInt(30);
            if (rnd.nextBoolean()) {
                counters[k]++;
                ops.add(new Operation(i, i % 16, "c" + k, "incrementAndGet", 1L, counters[k], Outcome.OK, invoke,
                        complete));
            } else {
                ops.add(new Operation(i, i % 16, "c" + k, "read", null, counters[k], Outcome.OK, invoke, complete));
            }
        }
        CheckResult r = new LinearizabilityChecker().check(new History(ops), Models.counter(0));
        assertEquals(Verdict.LINEARIZABLE, r.verdict(), "seed=" + seed + ": " + r.summary());
    }
}
