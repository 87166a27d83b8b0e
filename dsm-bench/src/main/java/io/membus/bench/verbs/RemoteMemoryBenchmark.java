package io.membus.bench.verbs;

import io.membus.core.Access;
import io.membus.core.RemoteMemory;
import io.membus.core.Segment;
import io.membus.core.directory.StaticDirectory;
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
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Comparator;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * Verbs through {@link RemoteMemory}, the path every layer above calls, on another
 * node's segment: the blocking forms ({@code readInto8}, {@code readLong},
 * {@code writeLong}, {@code compareAndSwap}, {@code fetchAndAdd}; on {@code local} and
 * {@code shm} they run on the caller's thread with no future and no result array) and
 * the posted forms ({@code *Async().join()}), beside the bare memory operation on a
 * Chronicle native store ({@code floor}). Run with {@code -prof gc} for the bytes
 * allocated per verb.
 *
 * <p><b>Note:</b> JMH state; one benchmark thread.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class RemoteMemoryBenchmark {
    @Param({"floor", "local", "shm"})
    public String transport;

    private Transport target;
    private Transport initiator;
    private RemoteMemory memory;
    private long ptr;
    private BytesStore<?, ?> floor;
    private Path shmDir;
    private final byte[] eight = new byte[8];
    private long counter;

    @Setup(Level.Trial)
    public void setUp() {
        if (transport.equals("floor")) {
            floor = BytesStore.nativeStoreWithFixedCapacity(1 << 20);
            floor.zeroOut(0, 1 << 20);
            return;
        }
        String fabric = "rm-bench-" + System.nanoTime();
        shmDir = Path.of("/dev/shm", "membus-rm-bench-" + ProcessHandle.current().pid() + "-" + System.nanoTime());
        target = Transports.create(transport, config(1, fabric));
        initiator = Transports.create(transport, config(2, fabric));
        Segment segment = target.export(new SegmentSpec(0, 1 << 20, Access.ALL, null));
        StaticDirectory directory = new StaticDirectory();
        directory.addMember(target.self());
        directory.addMember(initiator.self());
        directory.addSegment(segment.descriptor());
        memory = new RemoteMemory(initiator, directory, Duration.ofSeconds(5));
        ptr = segment.pointer(4096);
        memory.readLong(ptr); // opens the connection
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
        if (Files.exists(shmDir)) {
            try (Stream<Path> walk = Files.walk(shmDir)) {
                walk.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            }
        }
    }

    @Benchmark
    public byte[] readInto8() {
        if (floor != null) {
            floor.read(4096, eight, 0, 8);
            return eight;
        }
        memory.read(ptr, eight, 0, 8);
        return eight;
    }

    @Benchmark
    public long readLong() {
        if (floor != null) {
            return floor.readVolatileLong(4096);
        }
        return memory.readLong(ptr);
    }

    @Benchmark
    public long writeLong() {
        long c = ++counter;
        if (floor != null) {
            floor.writeVolatileLong(4096, c);
            return c;
        }
        memory.writeLong(ptr, c);
        return c;
    }

    @Benchmark
    public long compareAndSwap() {
        long c = counter;
        counter = c + 1;
        if (floor != null) {
            return floor.compareAndSwapLong(4096, c, c + 1) ? c : -1;
        }
        return memory.compareAndSwap(ptr, c, c + 1);
    }

    @Benchmark
    public long fetchAndAdd() {
        if (floor != null) {
            return floor.addAndGetLong(4096, 1) - 1;
        }
        return memory.fetchAndAdd(ptr, 1);
    }

    /** The posted form: a future per verb (what every verb cost before the blocking forms ran directly). */
    @Benchmark
    public long fetchAndAddPosted() {
        if (floor != null) {
            return floor.addAndGetLong(4096, 1) - 1;
        }
        return memory.fetchAndAddAsync(ptr, 1).join();
    }
}
