package io.membus.bench.replication;

import io.membus.core.RemoteMemory;
import io.membus.core.directory.ReplicaGroupView;
import io.membus.core.error.DsmException;
import io.membus.core.replication.ReplicationConfig;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

/**
 * How long a segment is out of reach when its primary dies (docs/replication.md §5, §15.4;
 * issue 27's goal: promotion after detection at most 1 s). Three tcp nodes of this JVM on
 * loopback, one backup ({@link ReplCluster}): node 1 the client, node 2 the primary of the
 * word the verbs reach, node 3 its copy. Each invocation builds a fresh cluster (setup, not
 * timed) and measures one failure:
 * <ul>
 *   <li>{@link #downingToFirstVerb}: node 2 already crashed (replicator and transport closed); timed from the
 *       downing event (node 2 removed from the directory, what membership does once it decided) to the first
 *       fetch-and-add node 1 gets answered, by node 3 promoted: detection is not in it, promotion and re-routing
 *       are;</li>
 *   <li>{@link #unavailableUnderLoad}: a client thread on node 1 issues fetch-and-adds back to back; timed from
 *       the crash (close of node 2, then at once its downing) to the first fetch-and-add answered after the crash.
 *       The same run prints the client's gap: its last answer before the crash to its first after.</li>
 * </ul>
 * Detection itself (phi-accrual over Pekko, seconds) is measured in the cluster section of BENCHMARKS.md.
 *
 * <p><b>Note:</b> JMH state, one benchmark thread; the load thread is started and joined per invocation.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.SingleShotTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Warmup(iterations = 1)
@Measurement(iterations = 5)
@Fork(1)
public class PromotionBenchmark {
    private static final long SEGMENT = 1 << 20;

    private ReplCluster cluster;
    private ReplCluster.Node primary;
    private RemoteMemory client;
    private long word;
    private Thread load;
    private volatile boolean stop;
    /** Completion time (nanoTime) of the load's last answered verb; written by the load thread. */
    private final AtomicLong lastAnswer = new AtomicLong();
    private final AtomicLong answers = new AtomicLong();
    private final AtomicLong failures = new AtomicLong();
    /** nanoTime once the primary's transport is closed (0 before); written by the benchmark thread. */
    private volatile long crashedAt;
    /** Completion time of the load's first verb answered after {@link #crashedAt}; 0 before. */
    private final AtomicLong firstAfterCrash = new AtomicLong();

    /** Three nodes, node 2's segment in sync on node 3, node 1 connected to both. */
    private void build() {
        cluster = new ReplCluster(ReplicationConfig.DEFAULT);
        primary = cluster.start(2, 0, SEGMENT);
        ReplCluster.Node holder = cluster.start(3, 0, SEGMENT);
        client = cluster.start(1, 0, 0).memory;
        cluster.awaitSettled(primary.group(), 2, 1);
        cluster.awaitSettled(holder.group(), 3, 1);
        if (cluster.view(primary.group()).inSync()[0] != 3) {
            throw new IllegalStateException("the copy of node 2's segment is not on node 3: "
                    + cluster.view(primary.group()));
        }
        word = primary.segment.pointer(0);
        for (int i = 0; i < 100; i++) { // both connections open and warm: the first verb after the failure is not a connect
            client.fetchAndAdd(word, 1);
            client.fetchAndAdd(holder.segment.pointer(0), 1);
        }
    }

    @Setup(Level.Invocation)
    public void setUp(org.openjdk.jmh.infra.BenchmarkParams params) {
        build();
        if (params.getBenchmark().endsWith("downingToFirstVerb")) {
            cluster.kill(primary); // crashed, not yet downed
        } else {
            startLoad();
        }
    }

    private void startLoad() {
        stop = false;
        crashedAt = 0;
        firstAfterCrash.set(0);
        answers.set(0);
        failures.set(0);
        load = new Thread(() -> {
            while (!stop) {
                try {
                    client.fetchAndAdd(word, 1);
                    long now = System.nanoTime();
                    long crash = crashedAt;
                    if (crash != 0 && now - crash > 0 && firstAfterCrash.get() == 0) {
                        firstAfterCrash.set(now);
                    }
                    lastAnswer.set(now);
                    answers.incrementAndGet();
                } catch (DsmException e) {
                    failures.incrementAndGet(); // sent to the dead primary, or refused while promoting: the client retries
                }
            }
        }, "repl-bench-load");
        load.setDaemon(true);
        load.start();
        long start = answers.get();
        ReplCluster.await("the client's load running", () -> answers.get() > start + 100);
    }

    @TearDown(Level.Invocation)
    public void tearDown() throws InterruptedException {
        stop = true;
        if (load != null) {
            load.join(TimeUnit.SECONDS.toMillis(60));
            if (load.isAlive()) {
                throw new IllegalStateException("the load thread did not stop within 60 s");
            }
            load = null;
        }
        cluster.close();
    }

    private void checkPromoted() {
        ReplicaGroupView v = cluster.view(primary.group());
        if (v.state() != ReplicaGroupView.State.SERVING || v.primary() != 3) {
            throw new IllegalStateException("after the first answer, node 2's segment is not served by node 3: " + v);
        }
    }

    @Benchmark
    public long downingToFirstVerb() {
        cluster.down(primary);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (true) {
            try {
                long v = client.fetchAndAdd(word, 1);
                checkPromoted();
                return v;
            } catch (DsmException e) {
                if (System.nanoTime() - deadline > 0) {
                    throw e;
                }
                LockSupport.parkNanos(100_000L);
            }
        }
    }

    @Benchmark
    public long unavailableUnderLoad() {
        cluster.kill(primary);
        long crashed = System.nanoTime();
        long lastBefore = lastAnswer.get();
        crashedAt = crashed;
        cluster.down(primary);
        ReplCluster.await("an answer after the crash", () -> firstAfterCrash.get() != 0);
        checkPromoted();
        System.out.printf("%n[promotion] client gap %.1f ms (its last answer before the crash to its first after),"
                + " %d failed verbs retried%n", (firstAfterCrash.get() - lastBefore) / 1e6, failures.get());
        return firstAfterCrash.get();
    }
}
