package io.membus.coherence;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * What {@link CoherentHeap#status()} says (and {@code membus status} prints for a node):
 * the caching switch and why it is off, the cache's figures and bound, the clock checks'
 * bounds and ε, as ordered {@code key -> value} facts.
 *
 * <p><b>Note:</b> stateless and thread-safe; the facts are read one by one from volatile
 * and atomic fields, so a status taken while the heap works is a set of recent values,
 * not one instant's snapshot.
 */
final class HeapStatus {
    private HeapStatus() {
    }

    /** The facts, in order; {@code problem} is the caching problem now (null: none). */
    static Map<String, String> facts(HeapContext ctx, CopyCache cache, String problem, SkewMonitor skew) {
        Map<String, String> facts = new LinkedHashMap<>();
        facts.put("caching", ctx.config.caching() && problem == null ? "on" : "off");
        if (problem != null) {
            facts.put("why-not", problem);
        } else if (!ctx.config.caching()) {
            facts.put("why-not", "membus.coherence.caching = false");
        }
        facts.put("cached-objects", Integer.toString(cache.size()));
        facts.put("cached-bytes", Long.toString(cache.bytes()));
        facts.put("cache-bound", ctx.config.cacheMaxEntries() + " objects, " + ctx.config.cacheMaxBytes() + " bytes");
        facts.put("cache-evictions", Long.toString(cache.evictions()));
        facts.put("cache-expired-dropped", Long.toString(cache.expiredDropped()));
        facts.put("measured-skew-us", Long.toString(skew.measuredMicros()));
        facts.put("skew-at-least-us", Long.toString(skew.atLeastMicros()));
        facts.put("clock-bound-us", Long.toString(ctx.epsMicros));
        return facts;
    }
}
