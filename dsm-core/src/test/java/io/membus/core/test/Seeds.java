package io.membus.core.test;

import java.util.SplittableRandom;

/**
 * Seeds for randomized tests: taken from a system property when set (to replay a
 * failure), otherwise drawn, and always printed.
 *
 * <p><b>Note:</b> stateless; thread-safe.
 */
public final class Seeds {
    private Seeds() {
    }

    /** A seed from {@code -D<property>=...} or a fresh one; prints it with the way to replay it. */
    public static long seed(String property, String testName) {
        String v = System.getProperty(property);
        long seed = v != null ? Long.parseLong(v) : System.nanoTime() ^ Double.doubleToLongBits(Math.random());
        System.out.println("[seed] " + testName + ": " + property + "=" + seed + " (replay with -D" + property + "="
                + seed + ")");
        return seed;
    }

    public static SplittableRandom random(String property, String testName) {
        return new SplittableRandom(seed(property, testName));
    }
}
