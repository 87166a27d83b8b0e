package io.membus.cluster;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * What a layer above the node reports about itself in a status reply: a name
 * ({@code coherence}, {@code metrics}, ...) and its facts as ordered key/value pairs
 * ({@code caching=on}, {@code measured-skew-us=180}). Registered with
 * {@link DsmNode#statusSection}; {@code membus status} prints one line per section.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public record StatusSection(String name, Map<String, String> facts) {
    public StatusSection {
        facts = Collections.unmodifiableMap(new LinkedHashMap<>(facts));
    }
}
