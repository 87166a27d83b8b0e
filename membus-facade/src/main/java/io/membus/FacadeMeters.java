package io.membus;

import io.membus.coherence.CoherentHeap;
import io.membus.collections.DsmMap;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;

import java.lang.ref.WeakReference;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * The meters of the layers the facade builds (docs/metrics.md), in the node's registry:
 * the coherent heap's caching switch and reads, and each map's read-cache hits by name.
 *
 * <p><b>Note:</b> thread-safe. The meters read counters the structures keep anyway
 * (striped {@code LongAdder}s, the map's owned counter): nothing is added to a get. A
 * map's handles are held weakly: a handle the application dropped stops counting.
 */
final class FacadeMeters {
    private final MeterRegistry registry;
    private final Map<String, List<WeakReference<DsmMap<?, ?>>>> maps = new ConcurrentHashMap<>();

    FacadeMeters(MeterRegistry registry) {
        this.registry = registry;
    }

    void heap(CoherentHeap heap) {
        Gauge.builder("membus.coherence.caching", heap, h -> h.cachingOn() ? 1 : 0).strongReference(true)
                .description("1 while this node serves cached reads of coherent objects; 0 when it may not"
                        + " (membus.coherence.caching = false, or clock skew beyond the bound)")
                .register(registry);
        FunctionCounter.builder("membus.coherence.reads", heap, CoherentHeap::cacheHits).tag("result", "hit")
                .description("reads of coherent objects: hit = served from this node's copy, miss = a cached"
                        + " object read from its home (a fill), validated = read and validated at its home")
                .register(registry);
        FunctionCounter.builder("membus.coherence.reads", heap, CoherentHeap::cacheMisses).tag("result", "miss")
                .register(registry);
        FunctionCounter.builder("membus.coherence.reads", heap, CoherentHeap::validatedReads)
                .tag("result", "validated").register(registry);
    }

    <K, V> DsmMap<K, V> map(String name, DsmMap<K, V> map) {
        List<WeakReference<DsmMap<?, ?>>> handles = maps.computeIfAbsent(name, n -> {
            List<WeakReference<DsmMap<?, ?>>> list = new CopyOnWriteArrayList<>();
            FunctionCounter.builder("membus.map.cache.hits", list, FacadeMeters::hits).tag("map", n)
                    .description("gets of this map served by this node's read cache (its handles that are still"
                            + " referenced)").register(registry);
            return list;
        });
        synchronized (handles) { // the same handle comes back for the same name: counted once
            handles.removeIf(r -> r.get() == null);
            if (handles.stream().noneMatch(r -> r.get() == map)) {
                handles.add(new WeakReference<>(map));
            }
        }
        return map;
    }

    private static double hits(List<WeakReference<DsmMap<?, ?>>> handles) {
        long sum = 0;
        for (WeakReference<DsmMap<?, ?>> r : handles) {
            DsmMap<?, ?> m = r.get();
            if (m != null) {
                sum += m.readCacheHits();
            }
        }
        return sum;
    }
}
