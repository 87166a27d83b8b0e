package io.membus.bench.collections;

import io.membus.bench.BenchFiles;
import io.membus.alloc.AllocatorConfig;
import io.membus.alloc.GlobalAllocator;
import io.membus.codec.Codecs;
import io.membus.collections.DsmAtomicLong;
import io.membus.collections.DsmCollections;
import io.membus.collections.DsmLock;
import io.membus.collections.DsmQueue;
import io.membus.core.RemoteMemory;
import io.membus.core.directory.StaticDirectory;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.Transports;
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

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
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

    private final List<Transport> transports = new ArrayList<>();
    private final List<GlobalAllocator> allocators = new ArrayList<>();
    private Path shmDir;
    private DsmAtomicLong counter;
    private DsmQueue<Long> queue;
    private DsmLock lock;
    private final AtomicLong jucCounter = new AtomicLong();
    private final ArrayBlockingQueue<Long> jucQueue = new ArrayBlockingQueue<>(1024);
    private final ReentrantLock jucLock = new ReentrantLock();
    private final Long element = 42L;

    @Setup(Level.Trial)
    public void setUp() {
        StaticDirectory directory = new StaticDirectory();
        String fabric = "coll-bench-" + System.nanoTime();
        shmDir = Path.of("/dev/shm", "membus-coll-bench-" + ProcessHandle.current().pid() + "-" + System.nanoTime());
        for (int id = 1; id <= 2; id++) {
            Transport t = Transports.create(transport, TransportConfig.builder(id).property("local.fabric", fabric)
                    .property("shm.dir", shmDir.toString()).property("tcp.secret", "coll-bench-secret-0123456789")
                    .property("tcp.host", "127.0.0.1").property("tcp.port", "0").build());
            transports.add(t);
            directory.addMember(t.self());
            directory.addSegment(t.export(SegmentSpec.of(1, 16L << 20)).descriptor());
        }
        DsmCollections node2 = null;
        for (Transport t : transports) {
            RemoteMemory memory = new RemoteMemory(t, directory, Duration.ofSeconds(5));
            GlobalAllocator a = new GlobalAllocator(memory, AllocatorConfig.builder().heapSegments(1).build());
            a.formatLocalSegments();
            allocators.add(a);
            node2 = new DsmCollections(memory, a, directory);
        }
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
        allocators.forEach(GlobalAllocator::close);
        transports.forEach(Transport::close);
        BenchFiles.deleteTree(shmDir);
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
