package io.membus.bench.collections;

import io.membus.bench.BenchCluster;
import io.membus.alloc.GlobalAllocator;
import io.membus.codec.Codecs;
import io.membus.collections.DsmAtomicLong;
import io.membus.collections.DsmCollections;
import io.membus.collections.DsmLock;
import io.membus.collections.DsmQueue;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.IntFunction;
import java.util.function.ToIntFunction;

/**
 * The collections beside their {@code java.util.concurrent} counterparts, one thread,
 * average time per operation: two nodes in this JVM over {@code local}, {@code shm} or
 * {@code tcp} (loopback, ephemeral ports: the peer of {@link HazelcastCollectionsBenchmark}'s
 * client-server figures); the structures are used from node 2 and their roots live on node
 * 1 (names are picked so that placement by name puts them there), so every operation is a
 * verb to the other node.
 * <ul>
 *   <li>{@code atomicIncrement}: {@link DsmAtomicLong#incrementAndGet()} (one fetch-and-add) vs
 *       {@code AtomicLong.incrementAndGet};</li>
 *   <li>{@code queueOfferPoll}: {@link DsmQueue#offer} then {@link DsmQueue#poll} of a {@code Long}
 *       (two round trips each) vs {@code ArrayBlockingQueue};</li>
 *   <li>{@code lockUnlock}: {@link DsmLock#lock()} then {@code unlock()} (one CAS each, plus the
 *       local gate) vs {@code ReentrantLock}.</li>
 * </ul>
 *
 * <p><b>Note:</b> JMH state shared by the benchmark threads (run with {@code -t 1} and {@code -t 8}).
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
public class CollectionsBenchmark {
    @Param({"local", "shm", "tcp"})
    public String transport;

    private BenchCluster cluster;
    private DsmAtomicLong counter;
    private DsmQueue<Long> queue;
    private DsmLock lock;
    private final AtomicLong jucCounter = new AtomicLong();
    private final ArrayBlockingQueue<Long> jucQueue = new ArrayBlockingQueue<>(1024);
    private final ReentrantLock jucLock = new ReentrantLock();
    private final Long element = 42L;

    @Setup(Level.Trial)
    public void setUp() {
        cluster = new BenchCluster(transport, 2, 16L << 20, "coll-bench");
        GlobalAllocator two = cluster.node(2);
        DsmCollections node2 = new DsmCollections(two.memory(), two, cluster.directory);
        // names whose roots rendezvous hashing places on node 1: every operation from node 2 crosses the transport
        DsmCollections from = node2;
        counter = onNode1(i -> from.atomicLong("bench-counter-" + i), c -> c.root().block().nodeId());
        queue = onNode1(i -> from.queue("bench-queue-" + i, Codecs.longs(), 1024), q -> q.root().block().nodeId());
        lock = onNode1(i -> from.lock("bench-lock-" + i), l -> l.root().block().nodeId());
    }

    private static <T> T onNode1(IntFunction<T> byIndex, ToIntFunction<T> nodeOf) {
        for (int i = 0; i < 64; i++) {
            T t = byIndex.apply(i);
            if (nodeOf.applyAsInt(t) == 1) {
                return t;
            }
        }
        throw new IllegalStateException("none of 64 names placed on node 1");
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        cluster.close();
    }

    @Benchmark
    public long atomicIncrement() {
        return counter.incrementAndGet();
    }

    @Benchmark
    public long jucAtomicIncrement() {
        return jucCounter.incrementAndGet();
    }

    @Benchmark
    public Long queueOfferPoll() {
        queue.offer(element);
        return queue.poll();
    }

    @Benchmark
    public Long jucQueueOfferPoll() {
        jucQueue.offer(element);
        return jucQueue.poll();
    }

    @Benchmark
    public boolean lockUnlock() {
        lock.lock();
        lock.unlock();
        return true;
    }

    @Benchmark
    public boolean jucLockUnlock() {
        jucLock.lock();
        jucLock.unlock();
        return true;
    }
}
