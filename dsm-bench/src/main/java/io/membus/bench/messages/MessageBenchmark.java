package io.membus.bench.messages;

import io.membus.bench.BenchFiles;
import io.membus.core.Access;
import io.membus.core.RemoteMemory;
import io.membus.core.Segment;
import io.membus.core.transport.Connection;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.Transports;
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

import java.io.IOException;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.HexFormat;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * Two-sided messages beside the one-sided verb of the same transport, two nodes
 * in this JVM ({@code local}; {@code shm} through its rings under /dev/shm;
 * {@code tcp} over loopback): what a request/reply costs next to a
 * fetch-and-add round trip.
 *
 * <ul>
 *   <li>{@link #verbRoundTrip}: one fetch-and-add, waited for (the verb baseline).</li>
 *   <li>{@link #requestRoundTrip}: one 16-byte request to an echo handler, waited for its reply.</li>
 *   <li>{@link #sendRoundTrip}: one 16-byte one-way message, waited for (its future completes when the
 *       handler has taken it).</li>
 *   <li>{@link #send64} / {@link #request64}: 64 messages in flight (issued back to back, then all
 *       waited for); time per message, so messages per second = 1 / time.</li>
 * </ul>
 *
 * <p>The round trips are sampled ({@code SampleTime}), so the median can be read beside the mean: on a
 * shared machine the mean carries scheduler noise.
 *
 * <p><b>Note:</b> JMH state; one benchmark thread.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class MessageBenchmark {
    static final int IN_FLIGHT = 64;
    private static final short ECHO = 1;

    @Param({"local", "shm", "tcp"})
    public String transport;

    private Transport target;
    private Transport initiator;
    private Connection connection;
    private Path shmDir;
    private long ptr;
    private long key;
    private final byte[] payload = new byte[16];
    @SuppressWarnings("unchecked")
    private final CompletableFuture<?>[] window = new CompletableFuture[IN_FLIGHT];

    @Setup(Level.Trial)
    public void setUp() {
        String fabric = "bench-msg-" + System.nanoTime();
        shmDir = Path.of("/dev/shm", "membus-bench-msg-" + ProcessHandle.current().pid());
        byte[] secret = new byte[16];
        new SecureRandom().nextBytes(secret);
        String hex = HexFormat.of().formatHex(secret);
        target = Transports.create(transport, config(1, fabric, hex));
        initiator = Transports.create(transport, config(2, fabric, hex));
        target.messages().register(ECHO, "echo", (from, p) -> p);
        Segment segment = target.export(new SegmentSpec(0, 1 << 16, Access.ALL, null));
        key = segment.remoteKey();
        ptr = segment.pointer(64);
        connection = RemoteMemory.await(initiator.connect(target.self()), Duration.ofSeconds(10));
        connection.request(ECHO, payload).join(); // the credits have arrived
    }

    private TransportConfig config(int id, String fabric, String secret) {
        return TransportConfig.builder(id).property("local.fabric", fabric).property("shm.dir", shmDir.toString())
                .property("tcp.secret", secret).property("tcp.host", "127.0.0.1").property("tcp.port", "0")
                .property("messages.inbox", "128").build();
    }

    @TearDown(Level.Trial)
    public void tearDown() throws IOException {
        initiator.close();
        target.close();
        BenchFiles.deleteTree(shmDir);
    }

    @Benchmark
    @BenchmarkMode(Mode.SampleTime)
    public long verbRoundTrip() {
        return connection.fetchAndAdd(ptr, key, 1).join();
    }

    @Benchmark
    @BenchmarkMode(Mode.SampleTime)
    public byte[] requestRoundTrip() {
        return connection.request(ECHO, payload).join();
    }

    @Benchmark
    @BenchmarkMode(Mode.SampleTime)
    public Object sendRoundTrip() {
        return connection.send(ECHO, payload).join();
    }

    @Benchmark
    @OperationsPerInvocation(IN_FLIGHT)
    public Object send64() {
        for (int i = 0; i < IN_FLIGHT; i++) {
            window[i] = connection.send(ECHO, payload);
        }
        return CompletableFuture.allOf(window).join();
    }

    @Benchmark
    @OperationsPerInvocation(IN_FLIGHT)
    public Object request64() {
        for (int i = 0; i < IN_FLIGHT; i++) {
            window[i] = connection.request(ECHO, payload);
        }
        return CompletableFuture.allOf(window).join();
    }
}
