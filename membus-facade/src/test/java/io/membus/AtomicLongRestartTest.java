package io.membus;

import io.membus.core.test.TestFiles;
import com.typesafe.config.ConfigFactory;
import io.membus.collections.DsmAtomicLong;
import io.membus.core.error.DsmException;
import io.membus.core.test.TestJvm;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link DsmAtomicLong} stays exact across a crash and restart of the node that owns
 * it, when that node's heap segment is file-backed ({@code membus.segments.file-backed}).
 *
 * <p>Nodes 1 and 2 run in this JVM, node 3 in a child JVM with a file-backed heap; the
 * counters' roots are placed on node 3. Two threads per node in this JVM increment the
 * counters without pause while node 3 (itself incrementing before its crash and after
 * its restart) is killed with SIGKILL, downed by the cluster, and started again as a new
 * incarnation that maps the same segment file. Every increment is tallied by its
 * outcome: returned (counted), failed with {@link DsmException#mayHaveRun()} (may
 * count or not) or failed before it was sent (never counts). The final value of each
 * counter, read from both nodes of this JVM, lies between the returned increments and
 * the returned plus the maybe-run ones: no acknowledged increment is lost, none is
 * invented.
 */
@Tag("slow") // multi-process: the slow tier (failsafe, mvn verify)
class AtomicLongRestartTest {

    @ParameterizedTest
    @ValueSource(strings = {"tcp", "shm"})
    @Timeout(value = 240, unit = TimeUnit.SECONDS)
    void countersOnAFileBackedNodeAreExactAcrossItsCrashAndRestart(String transport) throws Exception {
        Path dir = MembusTest.processDir(transport, "membus-restart-test-");
        try {
            run(transport, dir);
        } finally {
            TestFiles.deleteTree(dir);
        }
    }

    private static String config(int id, int port, int seed, String transport, Path dir) {
        return MembusTest.processConfig("restart-test", id, port, seed, transport, dir)
                + "membus.segments.count = 2\n"
                + "membus.segments.size = 4MiB\n"
                + "membus.segments.dir = \"" + dir.resolve("segments") + "\"\n"
                + "membus.heap.segments = [1]\n";
    }

    private void run(String transport, Path dir) throws Exception {
        int seed = MembusTest.freePort();
        Path conf3 = dir.resolve("node-3.conf");
        Files.writeString(conf3, config(3, MembusTest.freePort(), seed, transport, dir)
                + "membus.segments.file-backed = true\n");
        try (Membus one = Membus.start(ConfigFactory.parseString(config(1, seed, seed, transport, dir)));
             Membus two = Membus.start(ConfigFactory.parseString(config(2, MembusTest.freePort(), seed, transport, dir)));
             TestJvm jvm = new TestJvm()) {
            Process first = jvm.start(CounterNodeProcess.class, List.of(conf3.toString()));
            awaitOutput(jvm, 0, "READY", Duration.ofSeconds(60));
            await(jvm, 0, "node 3 in both directories", Duration.ofSeconds(60),
                    () -> one.node().directory().member(3).isPresent() && two.node().directory().member(3).isPresent());
            long incarnation1 = one.node().directory().member(3).orElseThrow().incarnation();

            // counters whose roots live on node 3 (names are placed by rendezvous hashing)
            List<String> names = new ArrayList<>();
            for (int i = 0; i < 64 && names.size() < 2; i++) {
                if (one.atomicLong("restart-hits-" + i).root().block().nodeId() == 3) {
                    names.add("restart-hits-" + i);
                }
            }
            assertEquals(2, names.size(), "two of 64 names placed on node 3");
            int n = names.size();
            AtomicLongArray ok = new AtomicLongArray(n);
            AtomicLongArray maybe = new AtomicLongArray(n);
            AtomicLongArray refused = new AtomicLongArray(n);
            AtomicBoolean stop = new AtomicBoolean();
            AtomicReference<Throwable> unexpected = new AtomicReference<>();
            List<Thread> workers = new ArrayList<>();
            for (Membus node : List.of(one, two)) {
                for (int t = 0; t < 2; t++) {
                    List<DsmAtomicLong> counters = names.stream().map(node::atomicLong).toList();
                    Thread w = new Thread(() -> {
                        try {
                            for (long i = 0; !stop.get(); i++) {
                                int k = (int) (i % n);
                                try {
                                    counters.get(k).incrementAndGet();
                                    ok.incrementAndGet(k);
                                } catch (DsmException e) {
                                    (e.mayHaveRun() ? maybe : refused).incrementAndGet(k);
                                    Thread.sleep(1); // the owner is down: do not spin
                                }
                            }
                        } catch (Throwable e) {
                            unexpected.compareAndSet(null, e);
                        }
                    }, "incrementer-" + node.node().nodeId() + "-" + t);
                    workers.add(w);
                    w.start();
                }
            }
            try {
                // node 3 counts too; then it is killed while this JVM's nodes keep counting
                send(first, "COUNT 300 " + String.join(" ", names));
                awaitOutput(jvm, 0, "COUNT-DONE", Duration.ofSeconds(60));
                await(jvm, 0, "this JVM's nodes count before the kill", Duration.ofSeconds(60), () -> sum(ok) > 400);
                long okBeforeKill = sum(ok);
                long kill = System.nanoTime();
                first.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
                await(jvm, 0, "node 3 downed after its process was killed", Duration.ofSeconds(60),
                        () -> one.node().directory().member(3).isEmpty() && two.node().directory().member(3).isEmpty());

                Process second = jvm.start(CounterNodeProcess.class, List.of(conf3.toString()));
                awaitOutput(jvm, 1, "READY", Duration.ofSeconds(60));
                await(jvm, 1, "node 3's new incarnation in both directories", Duration.ofSeconds(60), () ->
                        one.node().directory().member(3).filter(m -> m.incarnation() != incarnation1).isPresent()
                                && two.node().directory().member(3).filter(m -> m.incarnation() != incarnation1)
                                .isPresent());
                long okAtRestart = sum(ok);
                System.out.printf("MEASURE %s: returned by this JVM's nodes before the kill %d, from kill to the new"
                        + " incarnation in both directories %d ms (returned meanwhile %d, refused %d)%n", transport,
                        okBeforeKill, (System.nanoTime() - kill) / 1_000_000, okAtRestart - okBeforeKill, sum(refused));
                send(second, "COUNT 300 " + String.join(" ", names));
                awaitOutput(jvm, 1, "COUNT-DONE", Duration.ofSeconds(60));
                await(jvm, 1, "this JVM's nodes count after the restart", Duration.ofSeconds(60),
                        () -> sum(ok) > okAtRestart + 400);
                assertTrue(okBeforeKill > 0, "this JVM's nodes counted before the kill");
                long settled = sum(ok);
                Thread.sleep(1000); // one more second of counting on the restarted node's memory
                System.out.printf("MEASURE %s: returned by this JVM's nodes after the restart %d, in its last second"
                        + " %d%n", transport, sum(ok) - okAtRestart, sum(ok) - settled);
            } finally {
                stop.set(true);
                for (Thread w : workers) {
                    w.join(30_000);
                }
            }
            if (unexpected.get() != null) {
                throw new AssertionError("an incrementer failed", unexpected.get());
            }
            for (int k = 0; k < n; k++) {
                String name = names.get(k);
                long childOk = 0;
                long childMaybe = 0;
                for (int child = 0; child < 2; child++) {
                    for (String line : jvm.output(child).lines().toList()) {
                        String[] f = line.split(" ");
                        if (f.length == 4 && f[0].equals("COUNTED") && f[1].equals(name)) {
                            childOk += Long.parseLong(f[2]);
                            childMaybe += Long.parseLong(f[3]);
                        }
                    }
                }
                long atLeast = ok.get(k) + childOk;
                long atMost = atLeast + maybe.get(k) + childMaybe;
                long value = one.atomicLong(name).get();
                assertEquals(value, two.atomicLong(name).get());
                System.out.printf("MEASURE %s counter %s: value=%d, returned=%d (node 3: %d), maybe-run=%d,"
                        + " refused-before-sending=%d%n", transport, name, value, atLeast, childOk,
                        maybe.get(k) + childMaybe, refused.get(k));
                assertTrue(value >= atLeast && value <= atMost, name + ": value " + value + " outside ["
                        + atLeast + ", " + atMost + "]");
            }
            assertTrue(sum(refused) > 0, "increments were refused while node 3 was down (the test saw the outage)");
        }
    }

    private static long sum(AtomicLongArray a) {
        long s = 0;
        for (int i = 0; i < a.length(); i++) {
            s += a.get(i);
        }
        return s;
    }

    private static void send(Process p, String line) throws IOException {
        OutputStream out = p.getOutputStream();
        out.write((line + "\n").getBytes(StandardCharsets.UTF_8));
        out.flush();
    }

    private static void awaitOutput(TestJvm jvm, int child, String text, Duration timeout) {
        await(jvm, child, "child " + child + " printed " + text, timeout, () -> jvm.output(child).contains(text));
    }

    /** Polls every 20 ms; fails with the child's output at the deadline or when the condition cannot come true. */
    private static void await(TestJvm jvm, int child, String what, Duration timeout, BooleanSupplier condition) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() - deadline > 0) {
                throw new AssertionError("timed out after " + timeout.toMillis() + " ms waiting for: " + what
                        + "; child output:\n" + jvm.output(child));
            }
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError("interrupted waiting for: " + what);
            }
        }
    }
}
