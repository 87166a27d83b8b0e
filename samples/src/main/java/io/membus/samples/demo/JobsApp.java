package io.membus.samples.demo;

import io.membus.codec.Codecs;
import io.membus.collections.DsmAtomicLong;
import io.membus.collections.DsmCollections;
import io.membus.collections.DsmLongArray;
import io.membus.collections.DsmQueue;
import io.membus.core.RemotePtr;
import io.membus.core.directory.SegmentDirectory;
import org.HdrHistogram.Histogram;

import java.io.PrintStream;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * {@code membus demo jobs}: producers and consumers on one {@link DsmQueue}. Every
 * node puts its share of the jobs into the queue and runs consumer threads that take
 * them. Doing job {@code j} is one compare-and-set of {@code doneBy[j]} from 0 to
 * the consumer's node, so no job is done twice even when it is delivered twice; the
 * consumer first writes {@code claimedBy[j]}. A supervisor thread on node 1, when
 * the queue stays empty, every job has been produced and some are still not done,
 * puts back the jobs whose claimer is no longer a member (or that nobody claimed: a
 * consumer that died between taking and claiming). The check: every job done, and
 * done exactly once (the CAS), however often it was delivered.
 *
 * <p>With {@code --kill} (replication on: {@code membus.replication.backups = 1}), a
 * memory node other than node 1 that holds some of the app's structures (their roots
 * and stripes live where the allocator put them) is killed with {@code kill -9} once a
 * third of the jobs are done, never restarted: its segments' copies are promoted and
 * the structures answer again under the same pointers (the demo prints how long that
 * took, measured from node 1). It produces nothing, so what its consumers lose are the
 * jobs they had taken; the supervisor puts those back.
 *
 * <pre>
 * names (suffix: the run's seed and an attempt number):
 *   jobs-queue-*     DsmQueue of Long job ids, capacity 256
 *   jobs-state-*     DsmLongArray of 2 * jobs words, one stripe: claimedBy[j] at j, doneBy[j] at jobs + j
 *   jobs-produced-*  DsmAtomicLong: jobs put so far
 * </pre>
 *
 * <p><b>Note:</b> stateless; handles come from the node's {@link DsmCollections}.
 */
final class JobsApp implements DemoApp {
    static final int CAPACITY = 256;
    static final int CONSUMERS_PER_NODE = 2;
    /** What one job takes (a pause): long enough that a killed consumer dies holding jobs. */
    static final long WORK_NANOS = 1_000_000;

    @Override
    public String name() {
        return "jobs";
    }

    @Override
    public String title() {
        return "producers and consumers on a DsmQueue: every job done exactly once";
    }

    /**
     * The queue as the app uses it: a put that is refused because this node was taken
     * for dead meanwhile ({@code SlotLostException}: the element was not enqueued) is
     * made again; a poll that lost its slot the same way looks again.
     */
    private static final class NodeQueue {
        private final DsmQueue<Long> queue;

        NodeQueue(DsmQueue<Long> queue) {
            this.queue = queue;
        }

        /** Puts {@code job}, waiting while the ring is full (until {@code stop}). */
        void put(long job, java.util.function.BooleanSupplier stop) {
            while (!stop.getAsBoolean()) {
                try {
                    if (queue.offer(job, 100, TimeUnit.MILLISECONDS)) {
                        return;
                    }
                } catch (io.membus.collections.SlotLostException e) {
                    // not enqueued: offer it again
                } catch (io.membus.core.error.DsmException e) {
                    // its node died (--kill) while the offer ran: maybe enqueued; offer it again (a job delivered
                    // twice is done once: the doneBy CAS)
                    pauseAfterFailure();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return;
                }
            }
        }

        /** The head, or null after waiting {@code millis} for one. */
        Long poll(long millis) {
            try {
                return queue.poll(millis, TimeUnit.MILLISECONDS);
            } catch (io.membus.collections.SlotLostException e) {
                return null; // not taken: the caller looks again
            } catch (io.membus.core.error.DsmException e) {
                // its node died (--kill) while the poll ran: a job taken and lost is put back by the supervisor
                // (nobody claimed it)
                pauseAfterFailure();
                return null;
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return null;
            }
        }
    }

    /** A short pause before trying again after a verb failed on a node that died (--kill). */
    static void pauseAfterFailure() {
        java.util.concurrent.locks.LockSupport.parkNanos(50_000_000L);
    }

    /**
     * Runs {@code op} until it completes: with {@code --kill} a verb in flight to the killed
     * memory node fails ({@code mayHaveRun() == true}) and later ones wait for the promoted
     * copy; only idempotent operations (or ones whose repetition the app tolerates) go
     * through here. Gives up after a minute.
     */
    static <T> T retrying(java.util.function.Supplier<T> op) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (true) {
            try {
                return op.get();
            } catch (io.membus.core.error.DsmException e) {
                if (System.nanoTime() - deadline > 0) {
                    throw e;
                }
                pauseAfterFailure();
            }
        }
    }

    private record Structures(DsmQueue<Long> queue, DsmLongArray state, DsmAtomicLong produced) {
        NodeQueue nodeQueue(DemoNode node) {
            return node.state(NodeQueue.class, () -> new NodeQueue(queue));
        }

        static Structures of(DemoNode node, String suffix, int jobs) {
            DsmCollections c = node.membus().collections();
            return new Structures(c.queue("jobs-queue-" + suffix, Codecs.longs(), CAPACITY),
                    c.longArray("jobs-state-" + suffix, 2 * jobs, 2 * jobs), c.atomicLong("jobs-produced-" + suffix));
        }

        /** What of the app lies on node {@code n}, e.g. {@code queue,state-stripe}, for the demo's output. */
        String heldBy(int n) {
            List<String> held = new ArrayList<>();
            if (RemotePtr.nodeId(queue.root().bodyPtr()) == n) {
                held.add("the DsmQueue");
            }
            if (RemotePtr.nodeId(state.root().bodyPtr()) == n) {
                held.add("the DsmLongArray's root");
            }
            for (int sn : state.stripeNodes()) {
                if (sn == n) {
                    held.add("the DsmLongArray's stripe");
                }
            }
            if (RemotePtr.nodeId(produced.root().bodyPtr()) == n) {
                held.add("the DsmAtomicLong");
            }
            return String.join(",", held).replace(' ', '_');
        }

        TreeSet<Integer> hosts() {
            TreeSet<Integer> h = new TreeSet<>();
            h.add(RemotePtr.nodeId(queue.root().bodyPtr()));
            h.add(RemotePtr.nodeId(state.root().bodyPtr()));
            h.add(RemotePtr.nodeId(produced.root().bodyPtr()));
            for (int n : state.stripeNodes()) {
                h.add(n);
            }
            return h;
        }
    }

    @Override
    public String onNode(DemoNode node, int nodes, String phase, List<String> args) {
        switch (phase) {
            case "setup" -> {
                // names whose structures lie partly on a memory node other than node 1 (node 1 runs the
                // supervisor and the checks), so that killing it kills memory the app uses
                long seed = Long.parseLong(args.get(0));
                int jobs = Integer.parseInt(args.get(1));
                boolean needVictim = args.get(2).equals("1");
                int memoryNodes = Integer.parseInt(args.get(3));
                for (int attempt = 0; ; attempt++) {
                    String suffix = Long.toHexString(seed) + "-" + attempt;
                    Structures st = Structures.of(node, suffix, jobs);
                    TreeSet<Integer> hosts = st.hosts();
                    int victim = 0;
                    for (int n = memoryNodes; n >= 2 && victim == 0; n--) {
                        victim = hosts.contains(n) ? n : 0;
                    }
                    if (!needVictim || victim != 0 || attempt >= 20) {
                        return suffix + " " + victim + " " + hosts.toString().replace(" ", "") + " "
                                + (victim == 0 ? "-" : st.heldBy(victim));
                    }
                }
            }
            case "work" -> {
                return work(node, args.get(0), Integer.parseInt(args.get(1)), Integer.parseInt(args.get(2)),
                        Integer.parseInt(args.get(3)));
            }
            case "groups" -> {
                io.membus.cluster.NodeStatus st = node.node().status();
                return st.groups() + " " + st.groupsShort();
            }
            case "probe" -> {
                // one read of every structure; a failure (the killed node's groups not yet promoted) is "wait"
                int jobs = Integer.parseInt(args.get(1));
                try {
                    Structures st = Structures.of(node, args.get(0), jobs);
                    st.produced().get();
                    st.state().get(0, 2 * jobs);
                    st.queue().size();
                    return "ok";
                } catch (io.membus.core.error.DsmException e) {
                    return "wait " + e.getClass().getSimpleName();
                }
            }
            case "progress" -> {
                long[] doneBy = Structures.of(node, args.get(0), Integer.parseInt(args.get(1))).state()
                        .get(Integer.parseInt(args.get(1)), 2 * Integer.parseInt(args.get(1)));
                long done = 0;
                for (long d : doneBy) {
                    done += d != 0 ? 1 : 0;
                }
                return Long.toString(done);
            }
            case "check" -> {
                int jobs = Integer.parseInt(args.get(1));
                long[] doneBy = Structures.of(node, args.get(0), jobs).state().get(jobs, 2 * jobs);
                Map<Long, Integer> perNode = new HashMap<>();
                int missing = 0;
                for (long d : doneBy) {
                    if (d == 0) {
                        missing++;
                    } else {
                        perNode.merge(d, 1, Integer::sum);
                    }
                }
                StringBuilder sb = new StringBuilder(Integer.toString(missing));
                for (int n = 1; n <= nodes; n++) {
                    sb.append(' ').append(perNode.getOrDefault((long) n, 0));
                }
                return sb.toString();
            }
            default -> throw new IllegalArgumentException("jobs has no phase " + phase);
        }
    }

    /**
     * This node's part: put its share (when it produces), take and do jobs until every
     * job is done. Answers: produced done duplicates requeued put-p50 put-p99 take-p50 take-p99 (µs).
     */
    private static String work(DemoNode node, String suffix, int jobs, int producer, int victim) {
        Structures s = Structures.of(node, suffix, jobs);
        int me = node.nodeId();
        int nodes = node.node().directory().members().size();
        Histogram put = new Histogram(60_000_000_000L, 3);
        Histogram take = new Histogram(60_000_000_000L, 3);
        AtomicLong produced = new AtomicLong();
        AtomicLong done = new AtomicLong();
        AtomicLong duplicates = new AtomicLong();
        AtomicLong requeued = new AtomicLong();
        List<CompletableFuture<Void>> threads = new ArrayList<>();
        java.util.concurrent.atomic.AtomicBoolean failed = new java.util.concurrent.atomic.AtomicBoolean();
        NodeQueue q = s.nodeQueue(node);
        if (producer == 1) {
            threads.add(CompletableFuture.runAsync(() -> {
                List<Integer> producers = new ArrayList<>();
                for (int n = 1; n <= nodes; n++) {
                    if (n != victim) {
                        producers.add(n);
                    }
                }
                for (int j = producers.indexOf(me); j < jobs; j += producers.size()) {
                    long t0 = System.nanoTime();
                    q.put(j, failed::get);
                    put.recordValue(Math.max(1, System.nanoTime() - t0));
                    retrying(() -> s.produced().incrementAndGet()); // at least once: the supervisor reads >=
                    produced.incrementAndGet();
                }
            }, r -> new Thread(r, "jobs-producer").start()));
        }
        for (int c = 0; c < CONSUMERS_PER_NODE; c++) {
            boolean supervisor = me == 1 && c == 0;
            threads.add(CompletableFuture.runAsync(() -> consume(node, s, q, jobs, supervisor, take, done, duplicates,
                    requeued, failed), r -> new Thread(r, "jobs-consumer").start()));
        }
        for (CompletableFuture<Void> t : threads) {
            t.whenComplete((ok, e) -> {
                if (e != null) {
                    failed.set(true); // the others stop instead of waiting for jobs that will not come
                }
            });
        }
        CompletableFuture.allOf(threads.toArray(new CompletableFuture<?>[0])).join();
        synchronized (take) {
            return produced.get() + " " + done.get() + " " + duplicates.get() + " " + requeued.get() + " "
                    + micros(put, 50) + " " + micros(put, 99) + " " + micros(take, 50) + " " + micros(take, 99);
        }
    }

    private static double micros(Histogram h, double percentile) {
        return h.getTotalCount() == 0 ? 0 : h.getValueAtPercentile(percentile) / 1000.0;
    }

    /**
     * The doneBy CAS from 0 to {@code me}; when it failed with its outcome unknown (its node
     * died, --kill), the word read back says whether this node's CAS took.
     */
    private static boolean doneOnce(Structures s, int index, long me) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (true) {
            try {
                return s.state().compareAndSet(index, 0, me);
            } catch (io.membus.core.error.DsmException e) {
                if (System.nanoTime() - deadline > 0) {
                    throw e;
                }
                pauseAfterFailure();
                long now = retrying(() -> s.state().get(index));
                if (now != 0) {
                    return now == me;
                }
            }
        }
    }

    private static void consume(DemoNode node, Structures s, NodeQueue q, int jobs, boolean supervisor,
                                Histogram take, AtomicLong done, AtomicLong duplicates, AtomicLong requeued,
                                java.util.concurrent.atomic.AtomicBoolean failed) {
        long me = node.nodeId();
        SegmentDirectory directory = node.node().directory();
        Map<Integer, Long> lastRequeue = new HashMap<>();
        int idle = 0;
        while (!failed.get()) {
            long t0 = System.nanoTime();
            Long job = q.poll(100);
            if (job != null) {
                synchronized (take) {
                    take.recordValue(Math.max(1, System.nanoTime() - t0));
                }
                int j = job.intValue();
                retrying(() -> {
                    s.state().set(j, me); // idempotent
                    return null;
                });
                java.util.concurrent.locks.LockSupport.parkNanos(WORK_NANOS); // the job's work
                if (doneOnce(s, jobs + j, me)) {
                    done.incrementAndGet();
                } else {
                    duplicates.incrementAndGet(); // delivered again (a requeue): done once already
                }
                idle = 0;
                continue;
            }
            long[] doneBy = retrying(() -> s.state().get(jobs, 2 * jobs));
            int open = 0;
            for (long d : doneBy) {
                open += d == 0 ? 1 : 0;
            }
            if (open == 0) {
                return;
            }
            if (supervisor && ++idle >= 2 && retrying(() -> s.produced().get()) >= jobs) {
                long[] claimedBy = retrying(() -> s.state().get(0, jobs));
                long now = System.nanoTime();
                for (int j = 0; j < jobs; j++) {
                    boolean lost = claimedBy[j] == 0 || directory.member((int) claimedBy[j]).isEmpty();
                    if (doneBy[j] == 0 && lost && now - lastRequeue.getOrDefault(j, now - 3_000_000_000L) >= 2_000_000_000L) {
                        lastRequeue.put(j, now);
                        q.put(j, failed::get);
                        requeued.incrementAndGet();
                    }
                }
            }
        }
    }

    @Override
    public boolean drive(Driver d) throws Exception {
        PrintStream out = d.out();
        int nodes = d.nodes();
        int jobs = Math.max(60, Math.min(3000, d.options().ops() / 20));
        boolean kill = d.options().kill();
        int memoryNodes = nodes - d.options().clients();
        String[] setup = d.onNode(1, "setup", List.of(Long.toString(d.options().seed()), Integer.toString(jobs),
                kill ? "1" : "0", Integer.toString(memoryNodes))).split(" ");
        String suffix = setup[0];
        int holder = Integer.parseInt(setup[1]);
        if (kill && holder == 0) {
            out.printf("  no memory node other than node 1 holds one of the app's structures (%s): none to kill%n",
                    setup[2]);
            return false;
        }
        int victim = kill ? holder : 0;
        out.printf("  %,d jobs; every node%s produces its share into one DsmQueue (capacity %d) and runs %d consumers;"
                + " structures on nodes %s%s%n%n", jobs, kill ? " but node " + victim : "", CAPACITY,
                CONSUMERS_PER_NODE, setup[2], kill ? "; memory node " + victim + " is killed (kill -9, for good)"
                        + " once a third of the jobs are done" : "");
        if (kill) {
            // a node killed before its segments' copies are in sync takes them with it (docs/replication.md:
            // at most `backups` nodes within one re-replication): wait until node 1 sees every group in sync
            long t0 = System.nanoTime();
            long syncDeadline = t0 + TimeUnit.SECONDS.toNanos(120);
            String[] g;
            while (((g = d.onNode(1, "groups", List.of()).split(" "))[0].equals("0") || !g[1].equals("0"))
                    && System.nanoTime() - syncDeadline < 0) {
                Thread.sleep(100);
            }
            if (g[0].equals("0") || !g[1].equals("0")) {
                out.printf("  replication: %s groups, %s short of copies or not in sync after 120 s: not killing%n",
                        g[0], g[1]);
                return false;
            }
            out.printf(Locale.ROOT, "  replication: %s groups, every copy in sync (waited %.1f s)%n", g[0],
                    (System.nanoTime() - t0) / 1e9);
        }
        List<CompletableFuture<String>> running = new ArrayList<>();
        for (int n = 1; n <= nodes; n++) {
            running.add(d.start(n, "work", List.of(suffix, Integer.toString(jobs), n == victim ? "0" : "1",
                    Integer.toString(victim))));
        }
        if (kill) {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            long doneAtKill;
            while ((doneAtKill = Long.parseLong(d.onNode(1, "progress", List.of(suffix, Integer.toString(jobs)))))
                    < jobs / 3 && System.nanoTime() - deadline < 0
                    && running.stream().noneMatch(CompletableFuture::isDone)) {
                Thread.sleep(5);
            }
            d.kill(victim);
            long killedAt = System.nanoTime();
            out.printf("  killed memory node %d (kill -9, not restarted) when %,d of %,d jobs were done; it held %s%n",
                    victim, doneAtKill, jobs, setup[3].replace('_', ' ').replace(",", ", "));
            String probe;
            long probeDeadline = killedAt + TimeUnit.SECONDS.toNanos(90);
            while (!(probe = d.onNode(1, "probe", List.of(suffix, Integer.toString(jobs)))).equals("ok")
                    && System.nanoTime() - probeDeadline < 0) {
                Thread.sleep(20);
            }
            if (!probe.equals("ok")) {
                out.printf("  the structures of node %d did not answer again within 90 s (%s)%n", victim, probe);
                return false;
            }
            out.printf(Locale.ROOT, "  its structures answered again %.1f s after the kill (node 1 read the queue,"
                    + " the array and the counter: their copies were promoted)%n%n", (System.nanoTime() - killedAt) / 1e9);
        }
        String header = String.format(Locale.ROOT, "%-5s %9s %9s %11s %9s %11s %11s %11s %11s", "node", "produced",
                "done", "redelivered", "requeued", "put p50 us", "put p99 us", "take p50 us", "take p99 us");
        out.println(header);
        out.println("-".repeat(header.length()));
        long doneReported = 0;
        for (int n = 1; n <= nodes; n++) {
            if (n == victim) {
                running.get(n - 1).handle((r, e) -> null).join();
                out.printf("%-5d %s%n", n, "killed: its answer died with it");
                continue;
            }
            String[] f = running.get(n - 1).get(Math.max(1, 120), TimeUnit.SECONDS).split(" ");
            doneReported += Long.parseLong(f[1]);
            out.printf(Locale.ROOT, "%-5d %,9d %,9d %,11d %,9d %11.1f %11.1f %11.1f %11.1f%n", n, Long.parseLong(f[0]),
                    Long.parseLong(f[1]), Long.parseLong(f[2]), Long.parseLong(f[3]), Double.parseDouble(f[4]),
                    Double.parseDouble(f[5]), Double.parseDouble(f[6]), Double.parseDouble(f[7]));
        }
        String[] check = d.onNode(1, "check", List.of(suffix, Integer.toString(jobs))).split(" ");
        int missing = Integer.parseInt(check[0]);
        long doneInArray = 0;
        for (int n = 1; n <= nodes; n++) {
            doneInArray += Long.parseLong(check[n]);
        }
        out.println();
        out.println("Verified");
        boolean ok = CountersApp.check(out, "jobs done (doneBy set, read back by node 1)", doneInArray, jobs);
        ok &= CountersApp.check(out, "jobs never done", missing, 0);
        long byVictim = victim == 0 ? 0 : Long.parseLong(check[victim]);
        ok &= CountersApp.check(out, "jobs done twice (dones reported + the killed node's = jobs)",
                doneReported + byVictim - jobs, 0);
        return ok;
    }
}
