package io.membus.bench.verbs;

import io.membus.bench.BenchFiles;
import io.membus.core.Access;
import io.membus.core.RemoteMemory;
import io.membus.core.Segment;
import io.membus.core.directory.StaticDirectory;
import io.membus.core.transport.Connection;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.Transports;
import net.openhft.chronicle.bytes.BytesStore;
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

import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;

/**
 * One verb, one thread, synchronous: the latency of read 8 B and 4 KiB, write 8 B
 * and 4 KiB, compare-and-swap and fetch-and-add over a transport, beside the
 * same memory operation on a plain Chronicle Bytes native store ({@code floor}).
 *
 * <p>The {@code rm*} methods run the same verbs through {@link RemoteMemory}, the path
 * every layer above calls: its blocking forms, which on {@code local} and {@code shm}
 * run on the caller's thread with no future and no result array, and the posted form
 * ({@code rmFetchAndAddPosted}: {@code fetchAndAddAsync().join()}). Run with
 * {@code -prof gc} for the bytes allocated per verb.
 *
 * <p>{@code local}: two nodes of one JVM. {@code shm}: two shm nodes (the
 * initiator maps the target's file under /dev/shm; the verb path is the same as
 * between processes).
 *
 * <p><b>Note:</b> JMH state; one benchmark thread.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class VerbBenchmark {
    @Param({"floor", "local", "shm"})
    public String transport;

    private Transport target;
    private Transport initiator;
    private Connection connection;
    private RemoteMemory memory;
    private Segment segment;
    private long key;
    private long ptr;
    private BytesStore<?, ?> floor;
    private Path shmDir;
    private final byte[] eight = new byte[8];
    private final byte[] page = new byte[4096];
    private final byte[] pageIn = new byte[4096];
    private long counter;

    @Setup(Level.Trial)
    public void setUp() {
        if (transport.equals("floor")) {
            floor = BytesStore.nativeStoreWithFixedCapacity(1 << 20);
            floor.zeroOut(0, 1 << 20);
            return;
        }
        String fabric = "bench-" + System.nanoTime();
        shmDir = Path.of("/dev/shm", "membus-bench-" + ProcessHandle.current().pid());
        target = Transports.create(transport, config(1, fabric));
        initiator = Transports.create(transport, config(2, fabric));
        segment = target.export(new SegmentSpec(0, 1 << 20, Access.ALL, null));
        key = segment.remoteKey();
        ptr = segment.pointer(4096);
        connection = RemoteMemory.await(initiator.connect(target.self()), Duration.ofSeconds(10));
        StaticDirectory directory = new StaticDirectory();
        directory.addMember(target.self());
        directory.addMember(initiator.self());
        directory.addSegment(segment.descriptor());
        memory = new RemoteMemory(initiator, directory, Duration.ofSeconds(5));
        memory.readLong(ptr); // caches the connection and the descriptor
    }

    private TransportConfig config(int id, String fabric) {
        return TransportConfig.builder(id).property("local.fabric", fabric).property("shm.dir", shmDir.toString())
                .build();
    }

    @TearDown(Level.Trial)
    public void tearDown() throws IOException {
        if (floor != null) {
            floor.releaseLast();
            return;
        }
        initiator.close();
        target.close();
        BenchFiles.deleteTree(shmDir);
    }

    @Benchmark
    public byte[] read8() {
        if (floor != null) {
            floor.read(4096, eight, 0, 8);
            return eight;
        }
        return connection.read(ptr, key, 8).join();
    }

    @Benchmark
    public byte[] read4k() {
        if (floor != null) {
            floor.read(4096, pageIn, 0, 4096);
            return pageIn;
        }
        return connection.read(ptr, key, 4096).join();
    }

    @Benchmark
    public Object write8() {
        if (floor != null) {
            floor.write(4096, eight, 0, 8);
            return floor;
        }
        return connection.write(ptr, key, eight).join();
    }

    @Benchmark
    public Object write4k() {
        if (floor != null) {
            floor.write(4096, page, 0, 4096);
            return floor;
        }
        return connection.write(ptr, key, page).join();
    }

    @Benchmark
    public long compareAndSwap() {
        long c = counter;
        counter = c + 1;
        if (floor != null) {
            return floor.compareAndSwapLong(4096, c, c + 1) ? c : -1;
        }
        return connection.compareAndSwap(ptr, key, c, c + 1).join();
    }

    @Benchmark
    public long fetchAndAdd() {
        if (floor != null) {
            return floor.addAndGetLong(4096, 1);
        }
        return connection.fetchAndAdd(ptr, key, 1).join();
    }

    private long sinkValue;
    private final io.membus.core.transport.LongCompletion sink = (value, failure) -> {
        if (failure != null) {
            throw new IllegalStateException("a verb of the benchmark failed", failure);
        }
        sinkValue = value;
    };

    /** {@link #fetchAndAdd()} completing through a reused {@link io.membus.core.transport.LongCompletion}: no future, no box. */
    @Benchmark
    public long fetchAndAddPrimitive() {
        if (floor != null) {
            return floor.addAndGetLong(4096, 1);
        }
        connection.fetchAndAdd(ptr, key, 1, sink); // local and shm complete it before returning
        return sinkValue;
    }

    @Benchmark
    public byte[] rmReadInto8() {
        if (floor != null) {
            floor.read(4096, eight, 0, 8);
            return eight;
        }
        memory.read(ptr, eight, 0, 8);
        return eight;
    }

    @Benchmark
    public long rmReadLong() {
        if (floor != null) {
            return floor.readVolatileLong(4096);
        }
        return memory.readLong(ptr);
    }

    @Benchmark
    public long rmWriteLong() {
        long c = ++counter;
        if (floor != null) {
            floor.writeVolatileLong(4096, c);
            return c;
        }
        memory.writeLong(ptr, c);
        return c;
    }

    @Benchmark
    public long rmCompareAndSwap() {
        long c = counter;
        counter = c + 1;
        if (floor != null) {
            return floor.compareAndSwapLong(4096, c, c + 1) ? c : -1;
        }
        return memory.compareAndSwap(ptr, c, c + 1);
    }

    @Benchmark
    public long rmFetchAndAdd() {
        if (floor != null) {
            return floor.addAndGetLong(4096, 1) - 1;
        }
        return memory.fetchAndAdd(ptr, 1);
    }

    /** The posted form through RemoteMemory: a future per verb. */
    @Benchmark
    public long rmFetchAndAddPosted() {
        if (floor != null) {
            return floor.addAndGetLong(4096, 1) - 1;
        }
        return memory.fetchAndAddAsync(ptr, 1).join();
    }
}
