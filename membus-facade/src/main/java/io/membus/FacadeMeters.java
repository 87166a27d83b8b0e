package io.membus;

import io.membus.coherence.CoherentHeap;
import io.membus.coherence.RemoteRef;
import io.membus.collections.DsmMap;
import io.membus.collections.OperationStats;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.FunctionTimer;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;

import java.lang.ref.WeakReference;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

/**
 * The meters of the layers the facade builds (docs/metrics.md), in the node's registry:
 * the coherent heap's caching switch and reads, each map's read-cache hits by name, and
 * every named structure's operations by kind ({@code membus.collection.operations}, the
 * failed ones {@code membus.collection.operation.errors}, and
 * {@code membus.collection.operation.time} for the timed kinds; see
 * {@link OperationStats}), tagged with the structure's kind and name: the collections and
 * the coherent objects opened by name ({@link #ref}), with each such object's cache hits
 * ({@code membus.ref.cache.hits}).
 *
 * <p><b>Note:</b> thread-safe. The meters read counters the structures keep anyway
 * (striped {@code LongAdder}s, the map's owned counter): nothing is added to a get. A
 * map's handles are held weakly: a handle the application dropped stops counting. A
 * name's operation meters follow its current handle: registered when a handle is handed
 * out, replaced when the name's handle changes (destroyed and opened again), removed by
 * {@link #forget} (a destroy) and {@link #close()}; registration per name is serialised
 * on this object's lock (not on any operation's path). Operation meters hold their
 * {@link OperationStats} weakly, as Micrometer's function meters do; the handle cached by
 * {@code DsmCollections} keeps them.
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

    /** The operation meters registered per name, and the stats they read. */
    private final Map<String, Registered> collections = new ConcurrentHashMap<>();

    private record Registered(String kind, OperationStats stats, List<Meter> meters) {
    }

    /**
     * Registers the operation meters of {@code handle}'s structure ({@code kind}: map,
     * queue, lock, atomicLong, longArray, doubleArray) under its name, unless they read
     * this handle's stats already. Returns the handle.
     */
    <T> T collection(String kind, String name, T handle, OperationStats stats) {
        Registered r = collections.get(name);
        if (r != null && r.stats() == stats) {
            return handle; // the common case: the cached handle asked for again
        }
        synchronized (this) {
            r = collections.get(name);
            if (r != null && r.stats() == stats) {
                return handle;
            }
            if (r != null) {
                r.meters().forEach(registry::remove);
            }
            List<Meter> meters = new java.util.ArrayList<>();
            for (String op : stats.operations()) {
                meters.add(FunctionCounter.builder("membus.collection.operations", stats, s -> s.count(op))
                        .tags("kind", kind, "name", name, "operation", op)
                        .description("operations of this node's handle on the named collection, by kind (a map's"
                                + " gets served by its leased cache included)")
                        .register(registry));
                meters.add(FunctionCounter.builder("membus.collection.operation.errors", stats, s -> s.errors(op))
                        .tags("kind", kind, "name", name, "operation", op)
                        .description("operations of this node's handle on the named collection that failed with an"
                                + " exception (counted in membus.collection.operations too)")
                        .register(registry));
                if (stats.isTimed(op)) {
                    meters.add(FunctionTimer.builder("membus.collection.operation.time", stats,
                                    s -> s.timedCount(op), s -> s.totalNanos(op), TimeUnit.NANOSECONDS)
                            .tags("kind", kind, "name", name, "operation", op)
                            .description("time of the timed operations of this node's handle on the named collection"
                                    + " (round trips and waits; a map get served by its leased cache is not timed)")
                            .register(registry));
                }
            }
            if (kind.equals("ref")) {
                meters.add(FunctionCounter.builder("membus.ref.cache.hits", stats, OperationStats::cacheHits)
                        .tag("name", name)
                        .description("gets of this named coherent object served from this node's cached copy, with no"
                                + " verb (its hit rate: these over its gets in membus.collection.operations)")
                        .register(registry));
            }
            collections.put(name, new Registered(kind, stats, List.copyOf(meters)));
        }
        return handle;
    }

    /**
     * {@code ref}, reporting its operations to the counters of {@code name} (kind
     * {@code ref}): the ones registered for the name when there are (every handle
     * {@code Membus.ref} returns for a name counts into one set), else new ones,
     * registered. Serialised with {@link #collection} and {@link #forget}: a handle never
     * gets counters no meter reads while its name is registered.
     */
    synchronized <T> RemoteRef<T> ref(String name, RemoteRef<T> ref) {
        Registered r = collections.get(name);
        OperationStats stats = r != null && r.kind().equals("ref") ? r.stats() : OperationStats.forRef(name);
        collection("ref", name, ref, stats);
        return ref.metered(stats);
    }

    /** Removes the operation meters of {@code name} (destroyed). */
    synchronized void forget(String name) {
        Registered r = collections.remove(name);
        if (r != null) {
            r.meters().forEach(registry::remove);
        }
    }

    /** Removes every collection's operation meters (the facade is closed: its handles fail from now on). */
    synchronized void close() {
        for (String name : List.copyOf(collections.keySet())) {
            forget(name);
        }
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
