package io.membus;

import io.membus.collections.DsmAtomicLong;
import io.membus.collections.DsmMap;
import io.membus.collections.DsmQueue;
import io.membus.core.error.DsmException;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The client of {@link ReplicatedClusterTest}, in a child JVM: starts from the config
 * file in {@code args[0]}, makes {@value #COUNTERS} counters, {@value #MAPS} maps and
 * {@value #QUEUES} queues through {@link Membus}, prints {@code PTR kind name ptr} for
 * each (hex) and {@code READY}, then reads commands from its standard input:
 * <ul>
 *   <li>{@code RUN}: starts the workload: round after round, one increment of every
 *       counter, one put into every map and one offer into every queue, each reported
 *       {@code ACK kind name i} when it returned, {@code MAYBE kind name i} when it failed
 *       with {@link DsmException#mayHaveRun()}, {@code NOTRUN kind name i} otherwise; an
 *       operation that took longer than 200 ms prints {@code SLOW kind name ms}, the first
 *       success after failures {@code OUTAGE name ms} (since the first failed one began);</li>
 *   <li>{@code STOP}: ends the round under way, prints {@code SLOWEST ms} (the longest
 *       single operation: what a user waited while a primary was replaced) and
 *       {@code STOPPED}.</li>
 * </ul>
 * Runs until its standard input closes or it is killed; exits 1 after printing the stack
 * trace of anything unexpected. Output lines are printed whole under the stream's lock.
 */
public final class ReplicatedClientProcess {
    static final int COUNTERS = 4;
    static final int MAPS = 3;
    static final int QUEUES = 3;
    /** Queue capacity: the rounds are paced ({@value #PACE_MS} ms apart) so that a test run stays well below it. */
    static final int CAPACITY = 15_000;
    static final int PACE_MS = 3;

    private ReplicatedClientProcess() {
    }

    public static void main(String[] args) {
        PrintStream out = System.out;
        try (Membus client = Membus.start(Path.of(args[0]))) {
            List<DsmAtomicLong> counters = new ArrayList<>();
            List<DsmMap<String, Long>> maps = new ArrayList<>();
            List<DsmQueue<String>> queues = new ArrayList<>();
            for (int k = 0; k < COUNTERS; k++) {
                counters.add(client.atomicLong("rc-counter-" + k));
                out.println("PTR counter rc-counter-" + k + " " + Long.toHexString(counters.get(k).address()));
            }
            for (int k = 0; k < MAPS; k++) {
                maps.add(client.map("rc-map-" + k, String.class, Long.class));
                out.println("PTR map rc-map-" + k + " " + Long.toHexString(maps.get(k).root().block().ptr()));
            }
            for (int k = 0; k < QUEUES; k++) {
                queues.add(client.queue("rc-queue-" + k, String.class, CAPACITY));
                out.println("PTR queue rc-queue-" + k + " " + Long.toHexString(queues.get(k).root().block().ptr()));
            }
            out.println("READY");
            out.flush();
            AtomicBoolean stop = new AtomicBoolean();
            long[] slowest = new long[1];
            Thread worker = new Thread(() -> {
                for (int i = 0; !stop.get() && i < CAPACITY; i++) {
                    try {
                        Thread.sleep(PACE_MS);
                    } catch (InterruptedException e) {
                        return;
                    }
                    for (int k = 0; k < COUNTERS; k++) {
                        DsmAtomicLong c = counters.get(k);
                        op(out, slowest, "counter", "rc-counter-" + k, i, c::incrementAndGet);
                    }
                    for (int k = 0; k < MAPS; k++) {
                        DsmMap<String, Long> m = maps.get(k);
                        long v = i;
                        op(out, slowest, "map", "rc-map-" + k, i, () -> m.put("key-" + v, v));
                    }
                    for (int k = 0; k < QUEUES; k++) {
                        DsmQueue<String> q = queues.get(k);
                        String e = "e-" + i;
                        int full = k;
                        op(out, slowest, "queue", "rc-queue-" + k, i, () -> {
                            if (!q.offer(e)) {
                                throw new AssertionError("queue " + full + " full");
                            }
                        });
                    }
                }
            }, "replicated-client-workload");
            worker.setDaemon(true);
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            String line;
            while ((line = in.readLine()) != null) {
                if (line.trim().equals("RUN")) {
                    worker.start();
                } else if (line.trim().equals("STOP")) {
                    stop.set(true);
                    worker.join(60_000);
                    synchronized (out) {
                        out.println("SLOWEST " + slowest[0]);
                        out.println("STOPPED");
                        out.flush();
                    }
                }
            }
        } catch (Throwable e) {
            e.printStackTrace(out);
            out.flush();
            System.exit(1);
        }
        System.exit(0);
    }

    private interface Op {
        void run();
    }

    /** Per structure, when its first failed operation since its last success started (guarded by the output stream). */
    private static final java.util.Map<String, Long> FAILING_SINCE = new java.util.HashMap<>();

    private static void op(PrintStream out, long[] slowest, String kind, String name, int i, Op op) {
        long start = System.nanoTime();
        String result;
        try {
            op.run();
            result = "ACK";
        } catch (DsmException e) {
            result = e.mayHaveRun() ? "MAYBE" : "NOTRUN";
            synchronized (out) {
                out.println("failed " + kind + " " + name + " " + i + ": " + e);
            }
        }
        long ms = (System.nanoTime() - start) / 1_000_000;
        synchronized (out) {
            slowest[0] = Math.max(slowest[0], ms);
            out.println(result + " " + kind + " " + name + " " + i);
            if (!result.equals("ACK")) {
                FAILING_SINCE.putIfAbsent(name, start);
            } else if (FAILING_SINCE.containsKey(name)) {
                out.println("OUTAGE " + name + " " + (System.nanoTime() - FAILING_SINCE.remove(name)) / 1_000_000);
            }
            if (ms > 200) {
                out.println("SLOW " + kind + " " + name + " " + ms);
            }
            out.flush();
        }
    }
}
