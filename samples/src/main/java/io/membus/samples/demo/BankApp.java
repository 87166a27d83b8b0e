package io.membus.samples.demo;

import io.membus.collections.DsmCollections;
import io.membus.collections.DsmLock;
import io.membus.collections.DsmLongArray;
import org.HdrHistogram.Histogram;

import java.io.PrintStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * {@code membus demo bank}: transfers between accounts under {@link DsmLock}s. The
 * balances are one {@link DsmLongArray}; each account has its own lock. A transfer
 * takes the two accounts' locks in index order (no deadlock), moves an amount if the
 * source has it, and lets go. An auditor thread on every node takes every account's
 * lock in the same order, reads all balances at once and checks that the total is
 * what the bank started with — at every instant it looks, while the transfers run.
 *
 * <p><b>Note:</b> stateless; lock handles come from the node's {@link DsmCollections}
 * (one per name per node, as DsmLock requires).
 */
final class BankApp implements DemoApp {
    static final int ACCOUNTS = 8;
    static final long OPENING_BALANCE = 1_000;
    static final int TELLERS_PER_NODE = 2;

    @Override
    public String name() {
        return "bank";
    }

    @Override
    public String title() {
        return "transfers under DsmLocks: the total is conserved at every instant an auditor looks";
    }

    private static DsmLongArray accounts(DemoNode node, String suffix) {
        return node.membus().collections().longArray("bank-accounts-" + suffix, ACCOUNTS);
    }

    private static DsmLock lock(DemoNode node, String suffix, int account) {
        return node.membus().collections().lock("bank-lock-" + suffix + "-" + account);
    }

    @Override
    public String onNode(DemoNode node, int nodes, String phase, List<String> args) {
        String suffix = args.get(0);
        DsmLongArray accounts = accounts(node, suffix);
        switch (phase) {
            case "open" -> {
                long[] opening = new long[ACCOUNTS];
                java.util.Arrays.fill(opening, OPENING_BALANCE);
                accounts.put(0, opening);
                return Long.toString(sum(accounts.toArray()));
            }
            case "work" -> {
                return work(node, suffix, accounts, Integer.parseInt(args.get(1)), Long.parseLong(args.get(2)));
            }
            case "balances" -> {
                StringBuilder sb = new StringBuilder();
                for (long b : accounts.toArray()) {
                    sb.append(sb.length() == 0 ? "" : " ").append(b);
                }
                return sb.toString();
            }
            default -> throw new IllegalArgumentException("bank has no phase " + phase);
        }
    }

    private static long sum(long[] values) {
        long s = 0;
        for (long v : values) {
            s += v;
        }
        return s;
    }

    /** Transfers by the tellers, audits by the auditor. Answers: transfers declined audits bad p50 p99 p999 (µs). */
    private static String work(DemoNode node, String suffix, DsmLongArray accounts, int transfers, long seed) {
        DsmLock[] locks = new DsmLock[ACCOUNTS];
        for (int a = 0; a < ACCOUNTS; a++) {
            locks[a] = lock(node, suffix, a);
        }
        Histogram latency = new Histogram(60_000_000_000L, 3);
        AtomicLong moved = new AtomicLong();
        AtomicLong declined = new AtomicLong();
        AtomicLong audits = new AtomicLong();
        AtomicLong bad = new AtomicLong();
        AtomicBoolean tellersDone = new AtomicBoolean();
        SplittableRandom seeds = new SplittableRandom(seed ^ node.nodeId() * 0x9E3779B97F4A7C15L);
        List<CompletableFuture<Void>> tellers = new ArrayList<>();
        for (int t = 0; t < TELLERS_PER_NODE; t++) {
            SplittableRandom r = seeds.split();
            tellers.add(CompletableFuture.runAsync(() -> {
                for (int i = 0; i < transfers; i++) {
                    int from = r.nextInt(ACCOUNTS);
                    int to = (from + 1 + r.nextInt(ACCOUNTS - 1)) % ACCOUNTS;
                    long amount = 1 + r.nextInt(200);
                    long t0 = System.nanoTime();
                    DsmLock first = locks[Math.min(from, to)];
                    DsmLock second = locks[Math.max(from, to)];
                    first.lock();
                    try {
                        second.lock();
                        try {
                            long balance = accounts.get(from);
                            if (balance >= amount) {
                                accounts.set(from, balance - amount);
                                accounts.set(to, accounts.get(to) + amount);
                                moved.incrementAndGet();
                            } else {
                                declined.incrementAndGet();
                            }
                        } finally {
                            second.unlock();
                        }
                    } finally {
                        first.unlock();
                    }
                    synchronized (latency) {
                        latency.recordValue(Math.max(1, System.nanoTime() - t0));
                    }
                }
            }, r2 -> new Thread(r2, "bank-teller").start()));
        }
        CompletableFuture<Void> auditor = CompletableFuture.runAsync(() -> {
            do {
                for (DsmLock l : locks) {
                    l.lock();
                }
                try {
                    long total = sum(accounts.toArray());
                    audits.incrementAndGet();
                    if (total != ACCOUNTS * OPENING_BALANCE) {
                        bad.incrementAndGet();
                        System.err.println("bank audit on node " + node.nodeId() + ": total " + total);
                    }
                } finally {
                    for (int a = ACCOUNTS - 1; a >= 0; a--) {
                        locks[a].unlock();
                    }
                }
                java.util.concurrent.locks.LockSupport.parkNanos(2_000_000);
            } while (!tellersDone.get());
        }, r -> new Thread(r, "bank-auditor").start());
        try {
            CompletableFuture.allOf(tellers.toArray(new CompletableFuture<?>[0])).join();
        } finally {
            tellersDone.set(true);
        }
        auditor.join();
        synchronized (latency) {
            return moved.get() + " " + declined.get() + " " + audits.get() + " " + bad.get() + " "
                    + latency.getValueAtPercentile(50) / 1000.0 + " " + latency.getValueAtPercentile(99) / 1000.0 + " "
                    + latency.getValueAtPercentile(99.9) / 1000.0;
        }
    }

    @Override
    public boolean drive(Driver d) throws Exception {
        PrintStream out = d.out();
        String suffix = Long.toHexString(d.options().seed());
        int transfers = Math.max(20, Math.min(5000, d.options().ops() / 100));
        long expected = ACCOUNTS * OPENING_BALANCE;
        d.onNode(1, "open", List.of(suffix));
        out.printf("  %d accounts of %,d in a DsmLongArray, a DsmLock per account; on every node %d tellers make %,d"
                + " transfers each (both accounts' locks, in index order) while an auditor takes every lock and adds"
                + " up the balances%n%n", ACCOUNTS, OPENING_BALANCE, TELLERS_PER_NODE, transfers);
        List<String> results = d.onEveryNode("work", List.of(suffix, Integer.toString(transfers),
                Long.toString(d.options().seed())));
        String header = String.format(Locale.ROOT, "%-5s %10s %9s %7s %10s %15s %15s %16s", "node", "transfers",
                "declined", "audits", "bad audits", "transfer p50 us", "transfer p99 us", "transfer p99.9 us");
        out.println(header);
        out.println("-".repeat(header.length()));
        long audits = 0;
        long bad = 0;
        long done = 0;
        for (int n = 1; n <= results.size(); n++) {
            String[] f = results.get(n - 1).split(" ");
            done += Long.parseLong(f[0]) + Long.parseLong(f[1]);
            audits += Long.parseLong(f[2]);
            bad += Long.parseLong(f[3]);
            out.printf(Locale.ROOT, "%-5d %,10d %,9d %,7d %,10d %15.1f %15.1f %16.1f%n", n, Long.parseLong(f[0]),
                    Long.parseLong(f[1]), Long.parseLong(f[2]), Long.parseLong(f[3]), Double.parseDouble(f[4]),
                    Double.parseDouble(f[5]), Double.parseDouble(f[6]));
        }
        String[] balances = d.onNode(d.nodes(), "balances", List.of(suffix)).split(" ");
        long total = 0;
        long negative = 0;
        for (String b : balances) {
            total += Long.parseLong(b);
            negative += Long.parseLong(b) < 0 ? 1 : 0;
        }
        out.printf("%n  final balances (read by node %d): %s%n%nVerified%n", d.nodes(), String.join(" ", balances));
        boolean ok = CountersApp.check(out, "audits whose total was not " + expected + " (of " + audits + ")", bad, 0);
        ok &= CountersApp.check(out, "total after every transfer", total, expected);
        ok &= CountersApp.check(out, "accounts below zero", negative, 0);
        ok &= CountersApp.check(out, "transfers tried (made + declined)", done,
                (long) transfers * TELLERS_PER_NODE * d.nodes());
        ok &= audits > 0;
        return ok;
    }
}
