package io.membus.samples.stress;

import java.util.HashMap;
import java.util.Map;
import java.util.SplittableRandom;

/**
 * The planted violation of {@code --plant-violation}: reads that lie the way a broken
 * cache would. A client remembers what it read of a key and, at times, returns that
 * value although the key has changed since (after at least 300 ms, one read in three
 * while the value differs). A correct checker must fail such a run.
 *
 * <p><b>Note:</b> confined to one client thread.
 */
final class StaleReads {
    private static final long MIN_AGE_NANOS = 300_000_000L;
    private final boolean plant;
    private final Map<Integer, long[]> remembered = new HashMap<>(); // key -> {value, nanos}

    StaleReads(boolean plant) {
        this.plant = plant;
    }

    long read(int key, long actual, SplittableRandom random) {
        if (!plant) {
            return actual;
        }
        long now = System.nanoTime();
        long[] seen = remembered.get(key);
        if (seen == null || now - seen[1] > 4 * MIN_AGE_NANOS) {
            remembered.put(key, new long[]{actual, now});
            return actual;
        }
        if (seen[0] != actual && now - seen[1] > MIN_AGE_NANOS && random.nextInt(3) == 0) {
            return seen[0]; // the lie: a value the word held, not the one it holds
        }
        return actual;
    }
}
