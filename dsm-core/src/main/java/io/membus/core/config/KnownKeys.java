package io.membus.core.config;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigObject;
import com.typesafe.config.ConfigUtil;
import com.typesafe.config.ConfigValue;
import com.typesafe.config.ConfigValueType;
import io.membus.core.error.DsmConfigException;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Refuses keys under {@code membus} that no {@code reference.conf} on the class path
 * defines (a misspelled {@code heap.segmnets} or {@code operation-timout} would
 * otherwise be ignored and its default used). The known keys are those of the merged
 * {@code reference.conf} files, so a module that adds a key makes it known; nothing is
 * listed by hand. Left alone: an object that a {@code reference.conf} defines as empty
 * ({@code {}}: free-form, its keys are the user's), and the subtrees the caller checks
 * itself ({@code membus.transports}: {@code TransportConfig} checks the keys of every
 * transport on the class path).
 *
 * <p><b>Note:</b> stateless; thread-safe.
 */
public final class KnownKeys {
    private static final String ROOT = "membus";

    private KnownKeys() {
    }

    /**
     * Checks the {@code membus} keys of {@code user} (substitutions resolved) against
     * {@code reference} (the merged {@code reference.conf} files).
     *
     * @param skipped paths under {@code membus} checked elsewhere, e.g. {@code "transports"}
     * @throws DsmConfigException naming the first unknown key, the closest known key, where
     *         the key was set (file and line), and any other unknown keys
     */
    public static void check(Config user, Config reference, Set<String> skipped) {
        List<Unknown> unknown = unknown(user, reference, skipped);
        if (unknown.isEmpty()) {
            return;
        }
        List<String> known = new ArrayList<>();
        collect(reference.getObject(ROOT), ROOT, known);
        Unknown first = unknown.get(0);
        StringBuilder allowed = new StringBuilder("a key membus knows (see the reference.conf files of its modules);"
                + " closest known key: ").append(closest(first.path, known)).append("; set at ")
                .append(first.origin);
        if (unknown.size() > 1) {
            allowed.append("; also unknown:");
            for (Unknown u : unknown.subList(1, unknown.size())) {
                allowed.append(' ').append(u.path).append(" (closest: ").append(closest(u.path, known))
                        .append(", set at ").append(u.origin).append(')');
            }
        }
        throw new DsmConfigException(first.path, first.value, allowed.toString());
    }

    /**
     * The paths under {@code membus} of {@code user} that {@code reference} does not define
     * (in the form {@link Config#withoutPath} takes), sorted; see {@link #check}.
     */
    public static List<String> unknownPaths(Config user, Config reference, Set<String> skipped) {
        return unknown(user, reference, skipped).stream().map(Unknown::path).toList();
    }

    private static List<Unknown> unknown(Config user, Config reference, Set<String> skipped) {
        if (!user.hasPath(ROOT) || user.getValue(ROOT).valueType() != ConfigValueType.OBJECT
                || !reference.hasPath(ROOT) || reference.getValue(ROOT).valueType() != ConfigValueType.OBJECT) {
            return List.of(); // nothing set under membus, or a value of the wrong type: the value checks name it
        }
        List<Unknown> unknown = new ArrayList<>();
        walk(user.getObject(ROOT), reference.getObject(ROOT), List.of(), skipped, unknown);
        unknown.sort(java.util.Comparator.comparing(Unknown::path)); // a stable report: the object's order is not
        return unknown;
    }

    private record Unknown(String path, Object value, String origin) {
    }

    private static void walk(ConfigObject user, ConfigObject reference, List<String> rel, Set<String> skipped,
                             List<Unknown> unknown) {
        for (Map.Entry<String, ConfigValue> e : user.entrySet()) {
            String key = e.getKey();
            List<String> elements = new ArrayList<>();
            elements.add(ROOT);
            elements.addAll(rel);
            elements.add(key);
            String full = ConfigUtil.joinPath(elements);
            if (skipped.contains(ConfigUtil.joinPath(elements.subList(1, elements.size())))) {
                continue;
            }
            ConfigValue ref = reference.get(key);
            if (ref == null) {
                ConfigValue v = e.getValue();
                String origin = v.origin() == null ? "(unknown origin)" : v.origin().description();
                Object shown = key.contains("secret") || key.contains("password") ? "<hidden>"
                        : v.valueType() == ConfigValueType.OBJECT ? "{...}" : v.unwrapped();
                unknown.add(new Unknown(full, shown, origin));
                continue;
            }
            if (ref.valueType() == ConfigValueType.OBJECT && e.getValue().valueType() == ConfigValueType.OBJECT) {
                ConfigObject refObject = (ConfigObject) ref;
                if (refObject.isEmpty()) {
                    continue; // free-form by design
                }
                List<String> next = new ArrayList<>(rel);
                next.add(key);
                walk((ConfigObject) e.getValue(), refObject, next, skipped, unknown);
            }
            // a value of another type than the reference's: the value checks name it
        }
    }

    /** Every path the reference defines (objects and leaves) under {@code path}. */
    public static void collect(ConfigObject object, String path, List<String> out) {
        for (Map.Entry<String, ConfigValue> e : object.entrySet()) {
            String full = path + "." + e.getKey();
            out.add(full);
            if (e.getValue().valueType() == ConfigValueType.OBJECT) {
                collect((ConfigObject) e.getValue(), full, out);
            }
        }
    }

    /** The known path with the smallest edit distance to {@code path} (the first such, in reference order). */
    public static String closest(String path, List<String> known) {
        String best = null;
        int bestDistance = Integer.MAX_VALUE;
        for (String k : known) {
            int d = distance(path, k);
            if (d < bestDistance) {
                bestDistance = d;
                best = k;
            }
        }
        return best;
    }

    /** Levenshtein distance (insertions, deletions, substitutions). */
    public static int distance(String a, String b) {
        int[] previous = new int[b.length() + 1];
        int[] current = new int[b.length() + 1];
        for (int j = 0; j <= b.length(); j++) {
            previous[j] = j;
        }
        for (int i = 1; i <= a.length(); i++) {
            current[0] = i;
            for (int j = 1; j <= b.length(); j++) {
                int cost = a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1;
                current[j] = Math.min(Math.min(current[j - 1] + 1, previous[j] + 1), previous[j - 1] + cost);
            }
            int[] t = previous;
            previous = current;
            current = t;
        }
        return previous[b.length()];
    }
}
