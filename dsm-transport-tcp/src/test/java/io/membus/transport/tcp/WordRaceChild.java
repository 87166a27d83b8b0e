package io.membus.transport.tcp;

import io.membus.core.RemoteMemory;
import io.membus.core.Words;
import io.membus.core.transport.BlockingVerbs;
import io.membus.core.transport.Connection;
import io.membus.core.directory.PeerInfo;
import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.Transports;

import java.time.Duration;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * A client of {@link TcpWordAtomicityTest} in a child process: connects to the owner of
 * one word, and for the given time writes that word with values only it writes (both
 * halves equal: {@link #tied}) while a second thread reads it and checks every value is
 * one a writer wrote. Both use blocking lanes and the pipelined channel in turn, and
 * write with {@code writeLong} and with 8-byte array writes. Prints {@code DONE reads=R
 * bad=B writes=W first=...} and exits 0 (1 on any other failure).
 *
 * <p>Arguments: nodeId secret ownerIncarnation ownerAddress ptr remoteKey millis writerId
 */
public final class WordRaceChild {
    private WordRaceChild() {
    }

    /** The value writer {@code w} writes the {@code n}-th time: the same 32 bits in both halves. */
    static long tied(int w, int n) {
        long half = ((long) w << 24 | (n & 0xffffff)) & 0xffffffffL;
        return half << 32 | half;
    }

    /** Null when {@code v} is 0 or a value {@link #tied} makes for a writer in 1..9, else why not. */
    static String notWritten(long v) {
        long hi = v >>> 32;
        long lo = v & 0xffffffffL;
        if (hi != lo) {
            return String.format("torn:0x%016x", v);
        }
        long w = hi >>> 24;
        return v == 0 || w >= 1 && w <= 9 ? null : String.format("never-written:0x%016x", v);
    }

    public static void main(String[] args) {
        try {
            int nodeId = Integer.parseInt(args[0]);
            PeerInfo owner = new PeerInfo(1, Long.parseLong(args[2]), args[3]);
            long ptr = Long.parseLong(args[4]);
            long key = Long.parseLong(args[5]);
            long until = System.nanoTime() + Duration.ofMillis(Long.parseLong(args[6])).toNanos();
            int writer = Integer.parseInt(args[7]);
            TransportConfig config = TransportConfig.builder(nodeId).operationTimeout(Duration.ofSeconds(20))
                    .properties(Map.of("tcp.secret", args[1], "tcp.host", "127.0.0.1", "tcp.port", "0")).build();
            try (Transport t = Transports.create("tcp", config)) {
                Connection c = RemoteMemory.await(t.connect(owner), Duration.ofSeconds(30));
                AtomicLong writes = new AtomicLong();
                AtomicReference<Throwable> failed = new AtomicReference<>();
                // the writer: bursts of 32 pipelined 8-byte writes (the target's I/O thread runs them back to
                // back), every fourth burst one by one on a lane (writeLong, and an array write)
                Thread w = new Thread(() -> {
                    try {
                        int n = 0;
                        for (int burst = 0; System.nanoTime() < until; burst++) {
                            BlockingVerbs lane = burst % 4 == 3 ? c.blockingNow() : null;
                            java.util.concurrent.CompletableFuture<Void> last = null;
                            for (int i = 0; i < 32; i++) {
                                long v = tied(writer, ++n);
                                byte[] b = new byte[8];
                                Words.putLong(b, 0, v);
                                if (lane == null) {
                                    last = c.write(ptr, key, b);
                                } else if (i % 2 == 0) {
                                    lane.writeLong(ptr, key, v);
                                } else {
                                    lane.write(ptr, key, b, 0, 8);
                                }
                            }
                            if (last != null) {
                                RemoteMemory.await(last, Duration.ofSeconds(30));
                            }
                            writes.addAndGet(32);
                        }
                    } catch (Throwable e) {
                        failed.compareAndSet(null, e);
                    }
                }, "word-writer");
                w.start();
                // two readers on lanes (a target thread each, racing the target's I/O thread), now and then a
                // pipelined read
                AtomicLong reads = new AtomicLong();
                AtomicLong bad = new AtomicLong();
                AtomicReference<String> first = new AtomicReference<>("-");
                Thread[] readers = new Thread[2];
                for (int r = 0; r < readers.length; r++) {
                    readers[r] = new Thread(() -> {
                        try {
                            for (int n = 0; System.nanoTime() < until; n++) {
                                BlockingVerbs lane = c.blockingNow();
                                long v = lane != null && n % 16 != 0 ? lane.readLong(ptr, key)
                                        : Words.getLong(RemoteMemory.await(c.read(ptr, key, 8), Duration.ofSeconds(30)), 0);
                                String why = notWritten(v);
                                if (why != null && bad.getAndIncrement() == 0) {
                                    first.set(why);
                                }
                                reads.incrementAndGet();
                            }
                        } catch (Throwable e) {
                            failed.compareAndSet(null, e);
                        }
                    }, "word-reader-" + r);
                    readers[r].start();
                }
                for (Thread r : readers) {
                    r.join(60_000);
                }
                w.join(30_000);
                if (failed.get() != null) {
                    throw failed.get();
                }
                System.out.println("DONE reads=" + reads.get() + " bad=" + bad.get() + " writes=" + writes.get()
                        + " first=" + first.get());
            }
            System.exit(0);
        } catch (Throwable e) {
            e.printStackTrace(System.out);
            System.exit(1);
        }
    }
}
