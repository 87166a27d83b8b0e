package io.membus.collections;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Checks what consumers of a queue received against what producers offered:
 * every offered element received exactly once, nothing received that was not
 * offered, and each consumer received each producer's elements in the order the
 * producer offered them (what FIFO implies for every consumer). Elements are
 * {@code producer * STRIDE + sequence}.
 *
 * <p><b>Note:</b> stateless; thread-safe.
 */
final class DeliveryCheck {
    static final long STRIDE = 1_000_000L;

    private DeliveryCheck() {
    }

    /**
     * @param offered  per producer, how many elements it offered (sequences 0..n-1)
     * @param received per consumer, the elements in the order it took them
     * @return the problems found (empty: the delivery was exactly-once and per-producer FIFO)
     */
    static List<String> problems(int[] offered, List<List<Long>> received) {
        List<String> out = new ArrayList<>();
        Map<Long, Integer> seen = new HashMap<>();
        for (int c = 0; c < received.size(); c++) {
            long[] lastSeq = new long[offered.length];
            java.util.Arrays.fill(lastSeq, -1);
            for (long e : received.get(c)) {
                int p = (int) (e / STRIDE);
                long seq = e % STRIDE;
                if (p < 0 || p >= offered.length || seq >= offered[p]) {
                    out.add("consumer " + c + " received " + e + ", never offered");
                    continue;
                }
                Integer before = seen.put(e, c);
                if (before != null) {
                    out.add("element " + e + " received twice (consumers " + before + " and " + c + ")");
                }
                if (seq <= lastSeq[p]) {
                    out.add("consumer " + c + " received producer " + p + "'s element " + seq + " after " + lastSeq[p]);
                }
                lastSeq[p] = seq;
            }
        }
        for (int p = 0; p < offered.length; p++) {
            for (long s = 0; s < offered[p]; s++) {
                if (!seen.containsKey(p * STRIDE + s)) {
                    out.add("element " + (p * STRIDE + s) + " (producer " + p + ", sequence " + s + ") lost");
                    if (out.size() > 20) {
                        return out;
                    }
                }
            }
        }
        return out;
    }
}
