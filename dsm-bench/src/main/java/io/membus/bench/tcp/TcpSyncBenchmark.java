package io.membus.bench.tcp;

import io.membus.core.RemoteMemory;
import io.membus.core.RemotePtr;
import io.membus.core.SegmentDescriptor;
import io.membus.core.directory.StaticDirectory;
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
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * What a user's thread pays for a remote operation over {@code tcp}, through
 * {@link RemoteMemory} (the path users call), beside the floor of a synchronous
 * round trip: plain Java blocking sockets ({@link BlockingFloor}), a connection
 * per benchmark thread. Node 1 runs in a child process ({@link TargetProcess}).
 *
 * <p>{@code path}: {@code lanes} (the default: blocking calls run on the tcp
 * blocking lanes), {@code pipelined} ({@code blocking-lanes = 0}: every call is
 * posted on the pipelined connection and awaited — the path before the lanes),
 * {@code floor} (the blocking-socket server writes each pong as soon as its ping is read),
 * {@code batchingFloor} (the same server in {@link BlockingFloor.Mode#BATCHED}: pongs flushed
 * only when no request is left buffered, so 16 pings written together are answered by about one
 * write; the floor issue 28 sets for {@link #inFlight16}). {@link #read64}: a blocking read of 64 B (run with {@code -t 8}
 * for eight threads). {@link #faa}: a blocking fetch-and-add. {@link #inFlight16}:
 * 16 reads of 64 B issued with {@code readAsync}, then the caller waits for the
 * last; the floor writes 16 pings at once and reads the 16 pongs. {@link #inFlight16Blocking}:
 * the same 16 reads as one {@link RemoteMemory#readEach} (on a lane: one write, one round trip).
 *
 * <p><b>Note:</b> JMH states: {@link Node} is shared by the benchmark threads,
 * {@link Caller} is one per thread.
 */
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 2, time = 2)
@Measurement(iterations = 3, time = 2)
@Fork(1)
public class TcpSyncBenchmark {
    static final int IN_FLIGHT = 16;
    private static final int READ_REQUEST = 16 + 20;
    private static final int FAA_REQUEST = 16 + 24;

    /** The target process and this process's node. */
    @State(Scope.Benchmark)
    public static class Node {
        @Param({"lanes", "pipelined", "floor", "batchingFloor"})
        public String path;

        /** {@code tcp.io-threads} of the target node. */
        @Param({"1"})
        public int targetIoThreads;

        TargetProcess target;
        Transport initiator;
        RemoteMemory memory;

        @Setup(Level.Trial)
        public void setUp() throws Exception {
            target = new TargetProcess(targetIoThreads);
            if (!isFloor()) {
                initiator = Transports.create("tcp", TransportConfig.builder(2).operationTimeout(Duration.ofSeconds(10))
                        .properties(Map.of("tcp.secret", target.secret, "tcp.host", "127.0.0.1", "tcp.port", "0",
                                "tcp.blocking-lanes", path.equals("lanes") ? "8" : "0")).build());
                StaticDirectory directory = new StaticDirectory();
                directory.addMember(target.peer);
                directory.addMember(initiator.self());
                directory.addSegment(new SegmentDescriptor(1, target.peer.incarnation(), 0, 1 << 20,
                        io.membus.core.Access.ALL, target.remoteKey));
                memory = new RemoteMemory(initiator, directory, Duration.ofSeconds(10));
                RemoteMemory.await(initiator.connect(target.peer), Duration.ofSeconds(20));
            }
        }

        boolean isFloor() {
            return path.equals("floor") || path.equals("batchingFloor");
        }

        /** The port of this trial's floor server. */
        int floorPort() {
            return path.equals("batchingFloor") ? target.batchingFloorPort : target.blockingFloorPort;
        }

        @TearDown(Level.Trial)
        public void tearDown() throws Exception {
            if (initiator != null) {
                initiator.close();
            }
            target.close();
        }
    }

    /** One benchmark thread: its word, its buffer and, for the floor, its own blocking connection. */
    @State(Scope.Thread)
    public static class Caller {
        final byte[] dst = new byte[64];
        /** {@link #inFlight16Blocking}'s destinations and pointers ({@value #IN_FLIGHT} times {@link #ptr}). */
        final byte[][] dsts = new byte[IN_FLIGHT][64];
        final long[] ptrs = new long[IN_FLIGHT];
        long ptr;
        long counter;
        BlockingFloor.Client readFloor;
        BlockingFloor.Client faaFloor;

        @Setup(Level.Trial)
        public void setUp(Node node) throws IOException {
            ptr = RemotePtr.pack(1, 0, 4096 + 64 * (Thread.currentThread().getId() % 1024));
            counter = RemotePtr.pack(1, 0, 128 * 1024 + 64 * (Thread.currentThread().getId() % 1024));
            java.util.Arrays.fill(ptrs, ptr);
            if (node.isFloor()) {
                readFloor = new BlockingFloor.Client(node.target.host, node.floorPort(), READ_REQUEST,
                        16 + 64, IN_FLIGHT);
                faaFloor = new BlockingFloor.Client(node.target.host, node.floorPort(), FAA_REQUEST,
                        16 + 8, 1);
            }
        }

        @TearDown(Level.Trial)
        public void tearDown() throws IOException {
            if (readFloor != null) {
                readFloor.close();
                faaFloor.close();
            }
        }
    }

    /** A blocking read of 64 B: its round trip as the caller sees it. */
    @Benchmark
    public Object read64(Node node, Caller caller) throws IOException {
        if (caller.readFloor != null) {
            caller.readFloor.roundTrips(1);
            return caller.readFloor;
        }
        node.memory.read(caller.ptr, caller.dst, 0, caller.dst.length);
        return caller.dst;
    }

    /** A blocking fetch-and-add. */
    @Benchmark
    public long faa(Node node, Caller caller) throws IOException {
        if (caller.faaFloor != null) {
            caller.faaFloor.roundTrips(1);
            return 0;
        }
        return node.memory.fetchAndAdd(caller.counter, 1);
    }

    /** {@value #IN_FLIGHT} reads of 64 B in flight from one thread; time per read. */
    @Benchmark
    @BenchmarkMode(Mode.AverageTime)
    @OperationsPerInvocation(IN_FLIGHT)
    public Object inFlight16(Node node, Caller caller) throws IOException {
        if (caller.readFloor != null) {
            caller.readFloor.roundTrips(IN_FLIGHT);
            return caller.readFloor;
        }
        CompletableFuture<byte[]> last = null;
        for (int i = 0; i < IN_FLIGHT; i++) {
            last = node.memory.readAsync(caller.ptr, 64);
        }
        return node.memory.await(last); // completion is in issue order: the last completes last
    }

    /**
     * {@value #IN_FLIGHT} reads of 64 B as one {@link RemoteMemory#readEach} burst; time per read.
     * {@code lanes}: the caller writes the 16 requests on its lane in one write and reads the
     * 16 answers itself (the floor's shape: no other thread); {@code pipelined}: the call's
     * fallback, one batch posted on the connection and awaited.
     */
    @Benchmark
    @BenchmarkMode(Mode.AverageTime)
    @OperationsPerInvocation(IN_FLIGHT)
    public Object inFlight16Blocking(Node node, Caller caller) throws IOException {
        if (caller.readFloor == null) {
            node.memory.readEach(caller.ptrs, caller.dsts);
            return caller.dsts;
        }
        return inFlight16(node, caller); // the floor: the same 16 pings and pongs
    }
}
