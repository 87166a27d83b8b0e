package io.membus.bench.peers;

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
import org.openjdk.jmh.infra.BenchmarkParams;
import org.openjdk.jmh.infra.IterationParams;
import org.openjdk.jmh.runner.IterationType;
import io.membus.core.metrics.OpEvents;

import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;

/**
 * Membus beside its peers, the same operations with the same sizes, in one run (issue 28):
 * {@code peer} = {@code membus0} / {@code membus1} (Membus over tcp, a client node and two
 * memory nodes, {@code replication.backups} 0 or 1), {@code hazelcast} (two members and a client,
 * its default one synchronous backup), {@code redis} (a {@code redis-server} the benchmark starts,
 * no persistence; skipped with a message naming {@code apt-get install redis-server} when it is
 * not installed), {@code floor} (blocking Java sockets: the round trips alone). See {@link Peers}.
 *
 * <ul>
 *   <li>{@link #get}: a map get of a present {@code Long} key (of {@value #KEYS}) holding a
 *       {@value #VALUE_BYTES}-byte value: Membus {@code DsmMap.get} (no read cache), Hazelcast
 *       {@code IMap.get} (no near cache), Redis {@code GET};</li>
 *   <li>{@link #set}: a map put of a present key: {@code DsmMap.put}, {@code IMap.put}, {@code SET};</li>
 *   <li>{@link #increment}: a counter's +1: {@code DsmAtomicLong.incrementAndGet}, an entry processor
 *       on an {@code IMap} entry, {@code INCR};</li>
 *   <li>{@link #offerPoll}: a {@value #VALUE_BYTES}-byte element offered to a queue, then one polled:
 *       {@code DsmQueue}, {@code IQueue}, {@code LPUSH} + {@code RPOP}.</li>
 * </ul>
 *
 * <p>Results are checked, and a failed check fails the trial: every get returns the value written
 * for its key (its first 8 bytes are the key); after {@link #set} every key written holds the
 * trial's value and every other key the first one; after {@link #increment} the counter equals
 * the increments made; every poll of {@link #offerPoll} returns an element (each thread offers before it polls, so a
 * linearizable queue is never empty then; empty polls are counted and fail the trial at its end), and after it the queue
 * holds exactly what was offered and not polled (drained and counted). Run at 1 and 8 threads
 * ({@code -t}); {@code io.membus.bench.PeersTable} runs both and prints the table.
 *
 * <p><b>Note:</b> JMH state: the peer and the counts are shared by the benchmark threads
 * (the counts are {@link LongAdder}s; the written-key flags are plain bytes, every writer
 * writing the same 1, read after the trial, past JMH's barriers); each thread has its own
 * {@link Caller} (keys, connection).
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 2, time = 1)
@Measurement(iterations = 3, time = 2)
@Fork(1) // the peers' JVM flags come from BenchMain.forkFlags()
public class PeersBenchmark {
    static final int KEYS = 10_000;
    static final int VALUE_BYTES = 64;
    /** Byte 8 of a value: which write made it (the fill's, or the {@link #set} trial's). */
    private static final byte FILLED = 1;
    private static final byte SET = 2;
    private static final int SET_CHECKS = 2_000;

    @Param({"membus0", "membus1", "hazelcast", "redis", "floor"})
    public String peer;

    Peer system;
    private String benchmark;
    /** 1 where {@link #set} wrote the key. */
    final byte[] written = new byte[KEYS];
    final LongAdder increments = new LongAdder();
    final LongAdder offered = new LongAdder();
    final LongAdder polled = new LongAdder();
    /** Polls that found the queue empty right after their thread's offer: none in a linearizable queue. */
    final LongAdder emptyPolls = new LongAdder();
    private final AtomicInteger threads = new AtomicInteger();
    /** The measured operations' latencies per class of slow-path events, when {@link OpEvents#ON}. */
    final OpClasses classes = new OpClasses();
    /** Set for the measurement iterations: only their operations are classified. */
    volatile boolean recording;

    /** The value of {@code key} written by {@code writer}: the key's 8 bytes, the writer, a fixed pattern. */
    static byte[] value(long key, byte writer) {
        byte[] v = new byte[VALUE_BYTES];
        Arrays.fill(v, (byte) 0x5a);
        ByteBuffer.wrap(v).putLong(0, key);
        v[8] = writer;
        return v;
    }

    @Setup(Level.Trial)
    public void setUp(BenchmarkParams params) {
        benchmark = params.getBenchmark().substring(params.getBenchmark().lastIndexOf('.') + 1);
        system = Peers.start(peer);
        System.out.println("\n[peers] " + benchmark + " on " + system.describe() + ", " + params.getThreads()
                + " thread(s)");
        if (system.stores() && (benchmark.equals("get") || benchmark.equals("set"))) {
            try (Peer.Conn c = system.connect()) {
                for (long k = 0; k < KEYS; k++) {
                    c.set(k, value(k, FILLED));
                }
            }
        }
        system.markCounts();
    }

    @Setup(Level.Iteration)
    public void iteration(IterationParams params) {
        recording = OpEvents.ON && params.getType() == IterationType.MEASUREMENT;
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        try {
            if (OpEvents.ON) {
                System.out.print(classes.report());
            }
            String counts = system.counts();
            if (counts != null) {
                System.out.println("[peers] counted over the trial (warm-up and measurement): " + counts);
            }
            if (system.stores()) {
                check();
            }
        } finally {
            system.close();
        }
    }

    /** The trial's checks (see the class comment); throws when one fails, which fails the trial. */
    private void check() {
        try (Peer.Conn c = system.connect()) {
            switch (benchmark) {
                case "set" -> {
                    int setKeys = 0;
                    int checked = 0;
                    for (int k = 0; k < KEYS && checked < SET_CHECKS; k += KEYS / SET_CHECKS, checked++) {
                        byte want = written[k] == 1 ? SET : FILLED;
                        setKeys += written[k];
                        byte[] v = c.get(k);
                        if (!Arrays.equals(v, value(k, want))) {
                            throw new IllegalStateException(peer + ": key " + k + " holds " + Arrays.toString(v)
                                    + " after the set trial, not the value " + (want == SET ? "it set" : "filled"));
                        }
                    }
                    System.out.println("[peers] check: " + checked + " keys read back after the sets, " + setKeys
                            + " of them set in the trial, every one as written");
                }
                case "increment" -> {
                    long made = increments.sum();
                    long value = c.counter();
                    if (value != made) {
                        throw new IllegalStateException(peer + ": the counter is " + value + " after " + made
                                + " increments from 0");
                    }
                    System.out.println("[peers] check: counter " + value + " = the " + made + " increments made");
                }
                case "offerPoll" -> {
                    long drained = 0;
                    for (byte[] e = c.poll(); e != null; e = c.poll()) {
                        checkElement(e);
                        drained++;
                    }
                    long in = offered.sum();
                    long out = polled.sum();
                    if (in != out + drained) {
                        throw new IllegalStateException(peer + ": " + in + " elements offered, " + out
                                + " polled and " + drained + " left: the queue lost or duplicated "
                                + (in - out - drained));
                    }
                    System.out.println("[peers] check: " + in + " offered = " + out + " polled + " + drained
                            + " drained after the trial");
                    if (emptyPolls.sum() != 0) {
                        throw new IllegalStateException(peer + ": " + emptyPolls.sum() + " polls found the queue empty"
                                + " right after their own thread's offer (every thread offers before it polls, so a"
                                + " linearizable queue is never empty then)");
                    }
                }
                default -> System.out.println("[peers] check: every get returned its key's value");
            }
        }
    }

    private void checkElement(byte[] e) {
        if (e.length != VALUE_BYTES || e[8] != SET || e[VALUE_BYTES - 1] != 0x5a) {
            throw new IllegalStateException(peer + ": polled " + Arrays.toString(e) + ", not an element offered");
        }
    }

    /** One benchmark thread: its keys (seeded by its index: replayable) and its connection. */
    @State(Scope.Thread)
    public static class Caller {
        SplittableRandom keys;
        Peer.Conn conn;
        boolean checked;
        OpClasses.Recorder recorder;

        @Setup(Level.Trial)
        public void setUp(PeersBenchmark b) {
            int index = b.threads.getAndIncrement();
            keys = new SplittableRandom(28L * 1000 + index);
            conn = b.system.connect();
            checked = b.system.stores();
            recorder = b.classes.recorder();
        }

        @TearDown(Level.Trial)
        public void tearDown() {
            conn.close();
        }

        long nextKey() {
            return keys.nextInt(KEYS);
        }
    }

    @Benchmark
    public byte[] get(Caller caller) {
        long k = caller.nextKey();
        byte[] v = caller.conn.get(k);
        if (caller.checked && (v == null || v.length != VALUE_BYTES || ByteBuffer.wrap(v).getLong(0) != k)) {
            throw new IllegalStateException(peer + ": get(" + k + ") returned " + Arrays.toString(v));
        }
        return v;
    }

    @Benchmark
    public Object set(Caller caller) {
        int k = (int) caller.nextKey();
        byte[] v = value(k, SET);
        boolean record = OpEvents.ON && recording;
        if (record) {
            caller.recorder.begin();
        }
        Object r = caller.conn.set(k, v);
        if (record) {
            caller.recorder.end();
        }
        written[k] = 1;
        return r;
    }

    @Benchmark
    public long increment(Caller caller) {
        long v = caller.conn.increment();
        increments.increment();
        return v;
    }

    @Benchmark
    public byte[] offerPoll(Caller caller) {
        caller.conn.offer(value(caller.nextKey(), SET));
        offered.increment();
        byte[] e = caller.conn.poll();
        if (caller.checked) {
            if (e == null) {
                emptyPolls.increment(); // counted, and failed at the trial's end (its figures are still printed)
            } else {
                checkElement(e);
                polled.increment();
            }
        }
        return e;
    }
}
