package io.membus.collections;

import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The exact check of per-key value chains used by the map's stress tests. Every
 * write stores a value never written before; every change reports the value it
 * replaced or removed. Then, per key: each reported value was written; no value is
 * reported twice (two changes cannot both replace the same value: a lost update or a
 * double removal); every written value except the key's final one is reported once
 * (no change skipped one); every read value was written for that key (no phantom or
 * torn read).
 *
 * <p><b>Note:</b> stateless; thread-safe.
 */
final class ChainChecker {
    /** What a thread saw: a value {@code 'p'}roduced (written), {@code 'c'}onsumed (replaced/removed) or {@code 'r'}ead. */
    record Event(int key, char kind, String value) {
    }

    private ChainChecker() {
    }

    /** The violations found (empty when the histories are consistent). */
    static List<String> check(Collection<Event> events, Map<Integer, String> finalValues, Set<Integer> keys) {
        List<String> bad = new ArrayList<>();
        for (int k : keys) {
            Set<String> produced = new HashSet<>();
            Set<String> consumed = new HashSet<>();
            List<String> reads = new ArrayList<>();
            for (Event e : events) {
                if (e.key() != k) {
                    continue;
                }
                switch (e.kind()) {
                    case 'p' -> produced.add(e.value());
                    case 'c' -> {
                        if (!consumed.add(e.value())) {
                            bad.add("key " + k + ": value " + e.value() + " was replaced or removed twice");
                        }
                    }
                    default -> reads.add(e.value());
                }
            }
            for (String c : consumed) {
                if (!produced.contains(c)) {
                    bad.add("key " + k + ": a change reported replacing " + c + ", which nobody wrote");
                }
            }
            for (String r : reads) {
                if (!produced.contains(r)) {
                    bad.add("key " + k + ": read " + r + ", which nobody wrote");
                }
            }
            String fin = finalValues.get(k);
            if (fin != null && (!produced.contains(fin) || consumed.contains(fin))) {
                bad.add("key " + k + ": ends at " + fin + ", which is not a live write");
            }
            if (produced.size() != consumed.size() + (fin == null ? 0 : 1)) {
                bad.add("key " + k + ": written=" + produced.size() + ", replaced or removed=" + consumed.size()
                        + ", final=" + fin + ": a written value vanished without a change reporting it");
            }
        }
        return bad;
    }
}
