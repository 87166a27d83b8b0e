package io.membus.bench.replication;

import io.membus.core.RemoteMemory;
import io.membus.core.directory.ReplicaGroupView;
import io.membus.core.error.DsmConfigException;
import io.membus.core.replication.ReplicationConfig;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Re-replication online (docs/replication.md §6, §15.4): how fast a primary builds a new copy
 * of a large segment while writers change it, and what the writers get meanwhile. Three tcp
 * nodes of this JVM on loopback, one backup ({@link ReplCluster}): node 2 exports a segment
 * of {@code mib} MiB and, as the only memory node, serves it alone (its group short of its
 * copy); node 1 runs {@value #WRITERS} writer threads (64 B writes at random offsets through
 * its {@link RemoteMemory}); the timed part starts node 3, a memory node, and ends when node 3
 * holds an in-sync copy of node 2's segment. MiB/s = {@code mib} / the time.
 *
 * <p>Printed per invocation ({@code [rereplication]} lines): the copy's MiB/s, the writers'
 * writes per second during the copy, before it (1 s after a first uncounted second, no copy to
 * forward to) and after it (1 s, the copy in sync).
 *
 * <p><b>Note:</b> JMH state, one benchmark thread; the writers are started and joined per invocation.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.SingleShotTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Warmup(iterations = 1)
@Measurement(iterations = 3)
@Fork(1)
public class RereplicationBenchmark {
    static final int WRITERS = 4;

    /** The segment's size in MiB. */
    @Param({"256"})
    public int mib;

    private ReplCluster cluster;
    private ReplCluster.Node primary;
    private final List<Thread> writers = new ArrayList<>();
    private volatile boolean stop;
    private final AtomicLong writes = new AtomicLong();
    private final AtomicLong failures = new AtomicLong();
    private double writesPerSecondAlone;
    private long copyStart;
    private long writesAtCopyStart;
    private long copyEnd;
    private long writesAtCopyEnd;

    @Setup(Level.Invocation)
    public void setUp() throws InterruptedException {
        if (mib < 1 || mib > 4096) {
            throw new DsmConfigException("mib", mib, "1..4096 (two copies must fit the machine's memory)");
        }
        long size = (long) mib << 20;
        cluster = new ReplCluster(ReplicationConfig.DEFAULT);
        primary = cluster.start(2, 0, size);
        RemoteMemory client = cluster.start(1, 0, 0).memory;
        cluster.awaitSettled(primary.group(), 2, 0); // served alone: no other memory node
        stop = false;
        writes.set(0);
        failures.set(0);
        for (int w = 0; w < WRITERS; w++) {
            long seed = 27L * 1000 + w;
            Thread t = new Thread(() -> {
                SplittableRandom rnd = new SplittableRandom(seed);
                byte[] value = new byte[64];
                while (!stop) {
                    rnd.nextBytes(value);
                    long offset = rnd.nextLong(size / 64) * 64;
                    try {
                        client.write(primary.segment.pointer(offset), value);
                        writes.incrementAndGet();
                    } catch (io.membus.core.error.DsmException e) {
                        failures.incrementAndGet();
                    }
                }
            }, "repl-bench-writer-" + w);
            t.setDaemon(true);
            writers.add(t);
            t.start();
        }
        Thread.sleep(1000); // the writers' first second (connections, compilation) is not counted
        long w0 = writes.get();
        long t0 = System.nanoTime();
        Thread.sleep(1000);
        writesPerSecondAlone = (writes.get() - w0) / ((System.nanoTime() - t0) / 1e9);
        copyStart = System.nanoTime();
        writesAtCopyStart = writes.get();
    }

    @TearDown(Level.Invocation)
    public void tearDown() throws InterruptedException {
        long copied = writesAtCopyEnd - writesAtCopyStart;
        long w0 = writes.get();
        long t0 = System.nanoTime();
        Thread.sleep(1000); // one more second with the copy in sync: every write now waits for it
        double writesPerSecondReplicated = (writes.get() - w0) / ((System.nanoTime() - t0) / 1e9);
        stop = true;
        for (Thread t : writers) {
            t.join(TimeUnit.SECONDS.toMillis(60));
            if (t.isAlive()) {
                throw new IllegalStateException(t.getName() + " did not stop within 60 s");
            }
        }
        writers.clear();
        cluster.close();
        double seconds = (copyEnd - copyStart) / 1e9;
        System.out.printf("%n[rereplication] %d MiB in sync on the new copy in %.2f s: %.1f MiB/s; %d writers: %.0f"
                        + " writes/s during the copy, %.0f writes/s before it (no copy), %.0f writes/s after it (1 copy in sync);"
                        + " %d failed writes%n", mib, seconds, mib / seconds, WRITERS, copied / seconds,
                writesPerSecondAlone, writesPerSecondReplicated, failures.get());
    }

    @Benchmark
    public int copyWhileWriting() {
        ReplCluster.Node holder = cluster.start(3, 0, 64 << 10);
        ReplCluster.await("node 3 in sync for node 2's segment", () -> {
            ReplicaGroupView v = cluster.view(primary.group());
            return v != null && v.inSync().length == 1 && v.inSync()[0] == 3;
        });
        copyEnd = System.nanoTime();
        writesAtCopyEnd = writes.get();
        return holder.id;
    }
}
