package io.membus.bench.replication;

import io.membus.alloc.AllocatorConfig;
import io.membus.alloc.GlobalAllocator;
import io.membus.alloc.Placement;
import io.membus.codec.Codecs;
import io.membus.collections.DsmMap;
import io.membus.collections.DsmMapOptions;
import io.membus.core.RemoteMemory;
import io.membus.core.RemotePtr;
import io.membus.core.error.DsmConfigException;
import io.membus.core.replication.GroupId;
import io.membus.core.replication.ReplicationConfig;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * What one backup costs a verb (docs/replication.md §3.5, §15.4; issue 27's goal: a changing
 * verb with one backup at most 1.6x the same verb with none, reads the same). Three tcp nodes
 * of this JVM on loopback ({@link ReplCluster}): node 1 the initiator (no memory of its own),
 * node 2 the primary of the memory the verbs reach (its heap segment 1), node 3 a memory node
 * that holds the copy when {@code backups = 1}. With {@code backups = 0} the same
 * {@code Replicator}s run with replication off: today's single-copy path.
 *
 * <p>Every verb goes through node 1's {@link RemoteMemory} (routing by the group's view, tcp's
 * blocking lanes for the sequential ones, the verb pipeline for the asynchronous ones) to a
 * 4 KiB block the allocator placed on node 2.
 * <ul>
 *   <li>{@code seq*}: one verb in flight, the caller waits (latency; sampled, read the median);</li>
 *   <li>{@code pipelined*}: {@value #PIPELINE} asynchronous verbs issued back to back, then the caller
 *       waits for the last (completion is in issue order); time per verb;</li>
 *   <li>{@code mapPut}: {@link DsmMap#put} of a present {@code Long} key with a 64 B value, a handle without a
 *       read cache, the map's table and entries on node 2.</li>
 * </ul>
 *
 * <p><b>Note:</b> JMH state, one benchmark thread; the cluster is built per trial.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 2, time = 1)
@Measurement(iterations = 3, time = 1)
@Fork(1)
public class ReplicationBenchmark {
    static final int PIPELINE = 64;
    static final int KEYS = 10_000;
    private static final long HEAP = 64L << 20;

    @Param({"0", "1"})
    public int backups;

    private ReplCluster cluster;
    private GlobalAllocator onPrimary;
    private GlobalAllocator onInitiator;
    private RemoteMemory memory;
    private DsmMap<Long, byte[]> created;
    private DsmMap<Long, byte[]> map;
    private long block;
    private long casWord;
    private long faaWord;
    private long counter;
    private final byte[] value = new byte[64];
    private final byte[] readBuffer = new byte[64];
    private final CompletableFuture<?>[] window = new CompletableFuture<?>[PIPELINE];
    private final SplittableRandom rnd = new SplittableRandom(27);

    @Setup(Level.Trial)
    public void setUp() {
        if (backups < 0 || backups > 1) {
            throw new DsmConfigException("backups", backups, "0 or 1 (three nodes: one initiator, a primary, a copy)");
        }
        cluster = new ReplCluster(ReplicationConfig.OFF.withBackups(backups));
        ReplCluster.Node primary = cluster.start(2, 1, HEAP);   // heap segment 1: the allocator's
        ReplCluster.Node holder = cluster.start(3, 0, 64 << 10); // not a heap segment: a memory node for the copy
        ReplCluster.Node initiator = cluster.start(1, 0, 0);
        cluster.awaitSettled(primary.group(), 2, backups);
        cluster.awaitSettled(holder.group(), 3, backups);
        if (backups == 1 && cluster.view(primary.group()).inSync()[0] != 3) {
            throw new IllegalStateException("the copy of " + GroupId.toString(primary.group())
                    + " is not on node 3: " + cluster.view(primary.group()));
        }
        AllocatorConfig ac = AllocatorConfig.builder().heapSegments(1).build();
        onPrimary = new GlobalAllocator(primary.memory, ac);
        onPrimary.formatLocalSegments();
        onInitiator = new GlobalAllocator(initiator.memory, ac);
        memory = initiator.memory;
        block = onInitiator.allocate(4096, Placement.node(2)).ptr();
        if (RemotePtr.nodeId(block) != 2) {
            throw new IllegalStateException("the verbs' block is not on node 2: " + RemotePtr.toString(block));
        }
        casWord = RemotePtr.plus(block, 64);
        faaWord = RemotePtr.plus(block, 128);
        memory.writeLong(casWord, 0);
        // created on node 2 (its table there), used from node 1: its entries placed by key hash, all on node 2
        created = DsmMap.create(onPrimary, Codecs.longs(), Codecs.bytes(),
                DsmMapOptions.defaults().initialSlots(1 << 15));
        map = DsmMap.open(onInitiator, created.rootPtr(), Codecs.longs(), Codecs.bytes(),
                DsmMapOptions.defaults().readCacheEntries(0).entryPlacement(DsmMapOptions.EntryPlacement.KEY));
        for (long k = 0; k < KEYS; k++) {
            map.put(k, value);
        }
        if (map.tableNode() != 2) {
            throw new IllegalStateException("the map's table is not on node 2 but on node " + map.tableNode());
        }
        cluster.awaitSettled(primary.group(), 2, backups);
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        if (map != null) {
            map.close();
        }
        if (created != null) {
            created.close();
        }
        if (onInitiator != null) {
            onInitiator.close();
        }
        if (onPrimary != null) {
            onPrimary.close();
        }
        cluster.close();
    }

    @Benchmark
    @BenchmarkMode(Mode.SampleTime)
    public Object seqWrite64() {
        memory.write(block, value);
        return memory;
    }

    @Benchmark
    @BenchmarkMode(Mode.SampleTime)
    public long seqCas() {
        long c = counter;
        counter = c + 1;
        return memory.compareAndSwap(casWord, c, c + 1);
    }

    @Benchmark
    @BenchmarkMode(Mode.SampleTime)
    public long seqFaa() {
        return memory.fetchAndAdd(faaWord, 1);
    }

    @Benchmark
    @BenchmarkMode(Mode.SampleTime)
    public byte[] seqRead64() {
        memory.read(block, readBuffer, 0, 64);
        return readBuffer;
    }

    @Benchmark
    @OperationsPerInvocation(PIPELINE)
    public Object pipelinedWrite64() {
        for (int i = 0; i < PIPELINE; i++) {
            window[i] = memory.writeAsync(block, value);
        }
        return memory.await(window[PIPELINE - 1]); // completion is in issue order: the last completes last
    }

    @Benchmark
    @OperationsPerInvocation(PIPELINE)
    public Object pipelinedCas() {
        for (int i = 0; i < PIPELINE; i++) {
            long c = counter;
            counter = c + 1;
            window[i] = memory.compareAndSwapAsync(casWord, c, c + 1);
        }
        return memory.await(window[PIPELINE - 1]);
    }

    @Benchmark
    @OperationsPerInvocation(PIPELINE)
    public Object pipelinedFaa() {
        for (int i = 0; i < PIPELINE; i++) {
            window[i] = memory.fetchAndAddAsync(faaWord, 1);
        }
        return memory.await(window[PIPELINE - 1]);
    }

    @Benchmark
    @OperationsPerInvocation(PIPELINE)
    public Object pipelinedRead64() {
        for (int i = 0; i < PIPELINE; i++) {
            window[i] = memory.readAsync(block, 64);
        }
        return memory.await(window[PIPELINE - 1]);
    }

    @Benchmark
    @BenchmarkMode(Mode.SampleTime)
    public byte[] mapPut() {
        return map.put((long) rnd.nextInt(KEYS), value);
    }
}
