package io.membus.bench.tcp;

import io.membus.core.RemoteMemory;
import io.membus.core.RemotePtr;
import io.membus.core.transport.Batch;
import io.membus.core.transport.Connection;
import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.Transports;
import io.membus.core.transport.Verbs;
import io.netty.channel.EventLoopGroup;
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

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * Verbs over {@code tcp} between two processes (this JMH fork is the initiator,
 * a {@link TcpBenchTarget} child process the target), beside their floor: a raw
 * Netty ping-pong with the same request and response frame sizes between the
 * same two processes ({@code path=floor}).
 *
 * <p>{@link #roundTrip}: one verb in flight, the caller waits for it (latency).
 * {@link #pipelined}: 64 verbs issued back to back, then the caller waits for the
 * last (completion is in issue order); reported per verb (throughput).
 * {@link #batched}: the same 64 verbs posted as one {@link Batch}. The floor of
 * both is 64 pings in one flush.
 *
 * <p><b>Note:</b> JMH state; one benchmark thread.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class TcpVerbBenchmark {
    static final int PIPELINE = 64;
    private static final int HEADER = 16;
    private static final int VERB_BODY = 20;

    @Param({"read8", "read4k", "write8", "write4k", "cas", "faa"})
    public String verb;

    @Param({"tcp", "floor"})
    public String path;

    private TargetProcess target;
    private Transport initiator;
    private Connection connection;
    private EventLoopGroup floorGroup;
    private PingPong.Client floor;
    private long ptr;
    private long key;
    private final byte[] eight = new byte[8];
    private final byte[] page = new byte[4096];
    private long counter;
    private final List<CompletableFuture<?>> window = new ArrayList<>(PIPELINE);

    @Setup(Level.Trial)
    public void setUp() throws Exception {
        target = new TargetProcess();
        key = target.remoteKey;
        ptr = RemotePtr.pack(1, 0, 4096);
        if (path.equals("tcp")) {
            initiator = Transports.create("tcp", TransportConfig.builder(2)
                    .properties(Map.of("tcp.secret", target.secret, "tcp.host", "127.0.0.1", "tcp.port", "0")).build());
            connection = RemoteMemory.await(initiator.connect(target.peer), Duration.ofSeconds(20));
        } else {
            floorGroup = PingPong.group("floor-client");
            floor = new PingPong.Client(floorGroup, target.host, target.nettyFloorPort, requestSize(), responseSize());
        }
    }

    /** Bytes of the verb's request frame. */
    private int requestSize() {
        return switch (verb) {
            case "read8", "read4k" -> HEADER + VERB_BODY;
            case "write8" -> HEADER + VERB_BODY + 8;
            case "write4k" -> HEADER + VERB_BODY + 4096;
            case "cas" -> HEADER + 32;
            default -> HEADER + 24;
        };
    }

    /** Bytes of the verb's response frame. */
    private int responseSize() {
        return switch (verb) {
            case "read8", "cas", "faa" -> HEADER + 8;
            case "read4k" -> HEADER + 4096;
            default -> HEADER;
        };
    }

    @TearDown(Level.Trial)
    public void tearDown() throws Exception {
        if (initiator != null) {
            initiator.close();
        }
        if (floor != null) {
            floor.close();
            floorGroup.shutdownGracefully(0, 1, TimeUnit.SECONDS).syncUninterruptibly();
        }
        target.close();
    }

    private CompletableFuture<?> issue() {
        return issue(connection);
    }

    private CompletableFuture<?> issue(io.membus.core.transport.Verbs on) {
        Verbs connection = on;
        return switch (verb) {
            case "read8" -> connection.read(ptr, key, 8);
            case "read4k" -> connection.read(ptr, key, 4096);
            case "write8" -> connection.write(ptr, key, eight);
            case "write4k" -> connection.write(ptr, key, page);
            case "cas" -> {
                long c = counter;
                counter = c + 1;
                yield connection.compareAndSwap(ptr, key, c, c + 1);
            }
            default -> connection.fetchAndAdd(ptr, key, 1);
        };
    }

    /**
     * One verb in flight: its round trip. Sampled, so the median can be read
     * beside the mean: on a shared machine the mean carries scheduler noise.
     */
    @Benchmark
    @BenchmarkMode(Mode.SampleTime)
    public Object roundTrip() {
        if (floor != null) {
            floor.roundTrips(1);
            return floor;
        }
        return issue().join();
    }

    /** {@value #PIPELINE} verbs in flight: time per verb. */
    @Benchmark
    @OperationsPerInvocation(PIPELINE)
    public Object pipelined() {
        if (floor != null) {
            floor.roundTrips(PIPELINE);
            return floor;
        }
        window.clear();
        for (int i = 0; i < PIPELINE; i++) {
            window.add(issue());
        }
        return window.get(PIPELINE - 1).join(); // completion is in issue order: the last completes last
    }

    private volatile int sinkCompletions;
    private final io.membus.core.transport.LongCompletion sink = (value, failure) -> {
        if (failure != null) {
            throw new IllegalStateException("a verb of the benchmark failed", failure);
        }
        sinkCompletions++; // written by the connection's I/O thread only
    };

    /**
     * {@value #PIPELINE} atomics in flight completing through one reused
     * {@link io.membus.core.transport.LongCompletion} (no future, no boxed result): time
     * per verb. For {@code cas} and {@code faa} only; the other verbs run {@link #pipelined()}.
     */
    @Benchmark
    @OperationsPerInvocation(PIPELINE)
    public Object pipelinedPrimitive() {
        if (floor != null || !(verb.equals("cas") || verb.equals("faa"))) {
            return pipelined();
        }
        int target = sinkCompletions + PIPELINE;
        for (int i = 0; i < PIPELINE; i++) {
            if (verb.equals("faa")) {
                connection.fetchAndAdd(ptr, key, 1, sink);
            } else {
                long c = counter;
                counter = c + 1;
                connection.compareAndSwap(ptr, key, c, c + 1, sink);
            }
        }
        while (sinkCompletions - target < 0) {
            Thread.onSpinWait();
        }
        return connection;
    }

    /** {@value #PIPELINE} verbs in one {@link Batch}: one wake-up of the I/O thread, one flush; time per verb. */
    @Benchmark
    @OperationsPerInvocation(PIPELINE)
    public Object batched() {
        if (floor != null) {
            floor.roundTrips(PIPELINE);
            return floor;
        }
        Batch batch = connection.batch();
        CompletableFuture<?> last = null;
        for (int i = 0; i < PIPELINE; i++) {
            last = issue(batch);
        }
        batch.submit();
        return last.join();
    }
}
