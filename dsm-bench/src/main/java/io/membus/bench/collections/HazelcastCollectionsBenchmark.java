package io.membus.bench.collections;

import com.hazelcast.collection.IQueue;
import com.hazelcast.cp.IAtomicLong;
import com.hazelcast.cp.lock.FencedLock;
import com.hazelcast.map.EntryProcessor;
import com.hazelcast.map.IMap;
import io.membus.bench.hazelcast.HazelcastPair;
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

import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The Hazelcast 5.7 peers of {@link CollectionsBenchmark}: two members and a client in
 * the fork ({@link HazelcastPair}, loopback), the operations issued by the client,
 * average time per operation.
 * <ul>
 *   <li>{@code queueOfferPoll}: {@code IQueue<Long>.offer} then {@code poll} (peer of
 *       {@code DsmQueue});</li>
 *   <li>{@code entryProcessorIncrement}: {@code IMap.executeOnKey} with an entry processor that
 *       adds one to a {@code Long} (Hazelcast's open-source counter; peer of
 *       {@code DsmAtomicLong.incrementAndGet});</li>
 *   <li>{@code mapKeyLockUnlock}: {@code IMap.lock(key)} then {@code unlock(key)}, the lock open
 *       source Hazelcast 5 has (peer of {@code DsmLock}, without fencing tokens);</li>
 *   <li>{@code fencedLockUnlock} and {@code cpAtomicIncrement}: the CP subsystem's
 *       {@code FencedLock} and {@code IAtomicLong} (in unsafe mode, no CP members). Hazelcast
 *       5.7 open source refuses them (the CP subsystem is an Enterprise feature there): their
 *       setup fails with Hazelcast's error, which JMH prints. They run as written with an
 *       Enterprise license.</li>
 * </ul>
 *
 * <p><b>Note:</b> JMH state shared by the benchmark threads.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 2, time = 1)
@Measurement(iterations = 3, time = 1)
@Fork(1) // the peers' JVM flags come from BenchMain.forkFlags()
public class HazelcastCollectionsBenchmark {
    private static final String COUNTER_KEY = "bench-counter";
    private static final String LOCK_KEY = "bench-lock";

    HazelcastPair hazelcast;
    private IQueue<Long> queue;
    private IMap<String, Long> counters;
    private IMap<String, Boolean> locks;
    private final Long element = 42L;

    /** Adds one to a {@code Long} entry on the member that owns it; returns the new value. */
    static final class Increment implements EntryProcessor<String, Long, Long> {
        private static final long serialVersionUID = 1L;

        @Override
        public Long process(Map.Entry<String, Long> entry) {
            long v = (entry.getValue() == null ? 0L : entry.getValue()) + 1;
            entry.setValue(v);
            return v;
        }
    }

    private static final Increment INCREMENT = new Increment();

    /** The CP subsystem's structures, got through the client: a state of their own so that its failure stops only their benchmarks. */
    @State(Scope.Benchmark)
    public static class Cp {
        FencedLock lock;
        IAtomicLong atomic;

        @Setup(Level.Trial)
        public void setUp(HazelcastCollectionsBenchmark bench) {
            lock = bench.hazelcast.client.getCPSubsystem().getLock("bench-fenced-lock");
            atomic = bench.hazelcast.client.getCPSubsystem().getAtomicLong("bench-atomic");
        }
    }

    @Setup(Level.Trial)
    public void setUp() {
        hazelcast = HazelcastPair.start(cc -> { });
        queue = hazelcast.client.getQueue("bench-queue");
        counters = hazelcast.client.getMap("bench-counters");
        counters.put(COUNTER_KEY, 0L);
        locks = hazelcast.client.getMap("bench-locks");
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        hazelcast.close();
    }

    @Benchmark
    public Long queueOfferPoll() {
        queue.offer(element);
        return queue.poll();
    }

    @Benchmark
    public Long entryProcessorIncrement() {
        return counters.executeOnKey(COUNTER_KEY, INCREMENT);
    }

    @Benchmark
    public boolean mapKeyLockUnlock() {
        locks.lock(LOCK_KEY);
        locks.unlock(LOCK_KEY);
        return true;
    }

    @Benchmark
    public long fencedLockUnlock(Cp cp) {
        long fence = cp.lock.lockAndGetFence();
        cp.lock.unlock();
        return fence;
    }

    @Benchmark
    public long cpAtomicIncrement(Cp cp) {
        return cp.atomic.incrementAndGet();
    }
}
