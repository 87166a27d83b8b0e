package io.membus;

import io.membus.collections.DsmAtomicLong;
import io.membus.core.error.DsmException;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * A Membus node in a child JVM for {@link AtomicLongRestartTest}: starts from the
 * config file in {@code args[0]}, prints {@code READY}, then reads commands from its
 * standard input:
 * <ul>
 *   <li>{@code COUNT rounds name...}: increments each named counter {@code rounds}
 *       times (round-robin) and prints {@code COUNTED name ok maybe} per counter
 *       ({@code ok}: increments that returned; {@code maybe}: failed with
 *       {@link DsmException#mayHaveRun()}), then {@code COUNT-DONE};</li>
 * </ul>
 * and runs until its standard input closes (the test JVM is gone) or it is killed.
 * Exits 1 after printing the stack trace of anything unexpected.
 */
public final class CounterNodeProcess {
    private CounterNodeProcess() {
    }

    public static void main(String[] args) {
        try (Membus node = Membus.start(Path.of(args[0]))) {
            System.out.println("READY node=" + node.node().nodeId());
            System.out.flush();
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            String line;
            while ((line = in.readLine()) != null) {
                String[] f = line.trim().split(" ");
                if (f[0].equals("COUNT")) {
                    count(node, Integer.parseInt(f[1]), List.of(f).subList(2, f.length));
                }
            }
        } catch (Throwable e) {
            e.printStackTrace(System.out);
            System.out.flush();
            System.exit(1);
        }
        System.exit(0);
    }

    private static void count(Membus node, int rounds, List<String> names) {
        List<DsmAtomicLong> counters = new ArrayList<>();
        for (String n : names) {
            counters.add(node.atomicLong(n));
        }
        long[] ok = new long[names.size()];
        long[] maybe = new long[names.size()];
        for (int r = 0; r < rounds; r++) {
            for (int k = 0; k < counters.size(); k++) {
                try {
                    counters.get(k).incrementAndGet();
                    ok[k]++;
                } catch (DsmException e) {
                    if (e.mayHaveRun()) {
                        maybe[k]++;
                    }
                    System.out.println("increment failed: " + e);
                }
            }
        }
        for (int k = 0; k < names.size(); k++) {
            System.out.println("COUNTED " + names.get(k) + " " + ok[k] + " " + maybe[k]);
        }
        System.out.println("COUNT-DONE");
        System.out.flush();
    }
}
