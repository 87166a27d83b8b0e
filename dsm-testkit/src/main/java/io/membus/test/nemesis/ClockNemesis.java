package io.membus.test.nemesis;

import io.membus.core.error.DsmConfigException;
import io.membus.core.time.SkewableClock;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;

/**
 * {@code skew}: moves one random node's lease clock ahead of or behind the others by
 * up to {@code magnitude} (a {@link SkewableClock} the node's coherence layer reads).
 * A skew within the cluster's clock bound must not break linearizability; a larger
 * one with the skew check off is how tests plant a violation.
 *
 * <p><b>Note:</b> thread-safe.
 */
public final class ClockNemesis implements Nemesis {
    private final Map<Integer, SkewableClock> clocks;
    private final Duration magnitude;

    public ClockNemesis(Map<Integer, SkewableClock> clocks, Duration magnitude) {
        if (clocks.isEmpty()) {
            throw new DsmConfigException("skew nemesis clocks", "[] (none)", "one or more clocks");
        }
        if (magnitude.isNegative() || magnitude.isZero()) {
            throw new DsmConfigException("skew nemesis magnitude", magnitude, "a positive duration");
        }
        this.clocks = new TreeMap<>(clocks);
        this.magnitude = magnitude;
    }

    @Override
    public String kind() {
        return "skew";
    }

    @Override
    public Fault start(Random random) {
        List<Integer> ids = new ArrayList<>(clocks.keySet());
        int node = ids.get(random.nextInt(ids.size()));
        long max = magnitude.toNanos() / 1000;
        long micros = (random.nextBoolean() ? 1 : -1) * (max / 2 + (long) (random.nextDouble() * (max - max / 2)));
        SkewableClock clock = clocks.get(node);
        long before = clock.skewMicros();
        clock.skewMicros(before + micros);
        String targets = "node " + node + " " + (micros >= 0 ? "+" : "") + micros + "us";
        return Fault.of("skew", targets, () -> clock.skewMicros(before));
    }
}
