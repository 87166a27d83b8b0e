package io.membus.bench.peers;

import io.membus.core.metrics.OpEvents;

import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The latencies of a benchmark's operations classified by the slow-path events each met
 * ({@link OpEvents}: allocator refills and waits, lane fallbacks, CAS retries, a GC during
 * the operation), for finding what the operations above the p99 have in common (issue 28's
 * put tail, docs/collections.md). Active only when the forked JVM runs with
 * {@code -Dmembus.op-events=true} (e.g. {@code -jvmArgsPrepend -Dmembus.op-events=true});
 * then each measured operation costs two {@code nanoTime} calls, two reads of the
 * collectors' counts and one array store besides.
 *
 * <p><b>Note:</b> a {@link Recorder} is confined to one benchmark thread; {@link #report}
 * reads every recorder after the trial, once JMH's barriers have ordered the threads' writes
 * before it (the recorders list is synchronized).
 */
final class OpClasses {
    private static final List<GarbageCollectorMXBean> GCS = ManagementFactory.getGarbageCollectorMXBeans();
    private static final int CHUNK = 1 << 16;
    private final List<Recorder> recorders = new ArrayList<>();

    /** A new recorder for one benchmark thread. */
    synchronized Recorder recorder() {
        Recorder r = new Recorder();
        recorders.add(r);
        return r;
    }

    synchronized void clear() {
        for (Recorder r : recorders) {
            r.chunks.clear();
            r.n = 0;
        }
    }

    static long gcCount() {
        long n = 0;
        for (GarbageCollectorMXBean b : GCS) {
            n += b.getCollectionCount();
        }
        return n;
    }

    /** One thread's operations: latency in ns in the high bits, the event bits (low 8) and lane verbs (next 8). */
    static final class Recorder {
        private final List<long[]> chunks = new ArrayList<>();
        private int n;
        private long gcBefore;
        private long started;

        void begin() {
            gcBefore = gcCount();
            OpEvents.begin();
            started = System.nanoTime();
        }

        void end() {
            long nanos = System.nanoTime() - started;
            int e = OpEvents.end();
            int bits = e & 0xff;
            if (gcCount() != gcBefore) {
                bits |= OpEvents.GC;
            }
            int verbs = Math.min(e >>> 16, 0xff);
            if (n % CHUNK == 0) {
                chunks.add(new long[CHUNK]);
            }
            chunks.get(n / CHUNK)[n % CHUNK] = (nanos << 16) | ((long) verbs << 8) | bits;
            n++;
        }
    }

    /** Per class of events: its share of the operations, p50 / p99 / p99.9, and its share of those above the p99. */
    synchronized String report() {
        int total = 0;
        for (Recorder r : recorders) {
            total += r.n;
        }
        if (total == 0) {
            return "no operations recorded (run the fork with -Dmembus.op-events=true)";
        }
        long[] all = new long[total];
        int k = 0;
        for (Recorder r : recorders) {
            for (int i = 0; i < r.n; i++) {
                all[k++] = r.chunks.get(i / CHUNK)[i % CHUNK];
            }
        }
        long[] lat = new long[total];
        for (int i = 0; i < total; i++) {
            lat[i] = all[i] >>> 16;
        }
        Arrays.sort(lat);
        long p99 = lat[(int) Math.min(total - 1, (long) (total * 0.99))];
        Map<Integer, List<Long>> byClass = new TreeMap<>();
        Map<Integer, List<Long>> byVerbs = new TreeMap<>();
        Map<Integer, Integer> slowByClass = new TreeMap<>();
        Map<Integer, Integer> slowByVerbs = new TreeMap<>();
        int slow = 0;
        for (long v : all) {
            int bits = (int) (v & 0xff);
            int verbs = (int) ((v >>> 8) & 0xff);
            long nanos = v >>> 16;
            byClass.computeIfAbsent(bits, b -> new ArrayList<>()).add(nanos);
            byVerbs.computeIfAbsent(verbs, b -> new ArrayList<>()).add(nanos);
            if (nanos > p99) {
                slow++;
                slowByClass.merge(bits, 1, Integer::sum);
                slowByVerbs.merge(verbs, 1, Integer::sum);
            }
        }
        StringBuilder s = new StringBuilder();
        s.append(String.format("[op-classes] %,d operations, p50 %,d us, p99 %,d us, p99.9 %,d us; %,d above the p99%n",
                total, lat[total / 2] / 1000, p99 / 1000, lat[(int) Math.min(total - 1, (long) (total * 0.999))] / 1000,
                slow));
        s.append(String.format("[op-classes] %-34s %8s %7s %9s %9s %9s %12s%n", "events", "ops", "share", "p50 us",
                "p99 us", "p99.9 us", "of >p99"));
        line(s, byClass, slowByClass, total, slow, b -> OpEvents.describe(b));
        s.append(String.format("[op-classes] by lane verbs (round trips on a lane) per operation:%n"));
        line(s, byVerbs, slowByVerbs, total, slow, v -> v + " lane verbs");
        return s.toString();
    }

    private static void line(StringBuilder s, Map<Integer, List<Long>> by, Map<Integer, Integer> slowBy, int total,
                             int slow, java.util.function.IntFunction<String> name) {
        for (Map.Entry<Integer, List<Long>> c : by.entrySet()) {
            long[] l = c.getValue().stream().mapToLong(Long::longValue).sorted().toArray();
            int sl = slowBy.getOrDefault(c.getKey(), 0);
            s.append(String.format("[op-classes] %-34s %8d %6.2f%% %9d %9d %9d %5d %5.1f%%%n", name.apply(c.getKey()),
                    l.length, 100.0 * l.length / total, l[l.length / 2] / 1000,
                    l[(int) Math.min(l.length - 1, (long) (l.length * 0.99))] / 1000,
                    l[(int) Math.min(l.length - 1, (long) (l.length * 0.999))] / 1000, sl,
                    slow == 0 ? 0.0 : 100.0 * sl / slow));
        }
    }
}
