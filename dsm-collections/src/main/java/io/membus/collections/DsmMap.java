package io.membus.collections;

import io.membus.alloc.BlockRef;
import io.membus.alloc.GlobalAllocator;
import io.membus.alloc.HeapLayout;
import io.membus.codec.Codec;
import io.membus.core.RemotePtr;
import io.membus.core.error.DsmConfigException;
import io.membus.core.error.DsmException;

import java.util.AbstractMap;
import java.util.Collection;
import java.util.Iterator;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentMap;
import java.util.function.BiConsumer;
import java.util.function.BiFunction;
import java.util.function.Function;

import static io.membus.collections.MapLayout.*;

/**
 * A {@link ConcurrentMap} whose entries live in the cluster's remote memory: every
 * node that opens the map's root sees the same map. Keys and values are stored as
 * the bytes of their {@link Codec}s; two keys are the same key when their encoded
 * bytes are equal (so a key codec must encode equal keys to equal bytes, as the
 * built-in codecs do); values are compared with {@link Object#equals} after decoding.
 *
 * <p>The table is one-sided: lookups and changes are verbs on remote memory (no
 * node's CPU serves another), slot words are installed by CAS, entries are written
 * once into blocks of the global allocator placed by the key's hash, and the table
 * grows online. docs/collections.md has the design.
 *
 * <p>Semantics follow {@code ConcurrentHashMap}: null keys and values are refused with
 * {@link NullPointerException}; {@code putIfAbsent}, {@code replace},
 * {@code remove(k, v)}, {@code compute*} and {@code merge} are atomic per key (a
 * function may be applied more than once when another change of the key wins the
 * race, and only the result that is installed counts); {@code getOrDefault},
 * {@code forEach} and {@code replaceAll} act per key as {@code ConcurrentMap}'s
 * defaults do; iterators and views are weakly consistent (never throw
 * {@code ConcurrentModificationException}, return every key present throughout the
 * iteration once); {@code size()} is exact when no change is in flight;
 * {@code clear()} removes key by key and is not atomic.
 *
 * <p>Remote failures surface as {@link DsmException}s (a timeout, a node
 * unavailable); a change whose CAS timed out may or may not have happened
 * ({@link DsmException#mayHaveRun()} says which). A change ({@code put}, {@code remove},
 * {@code compute}, ...) returns or fails by one deadline taken at its start (the
 * operation timeout), shared by its verbs, allocations and restarts, plus
 * {@link io.membus.core.OperationDeadline#MARGIN}.
 *
 * <p>This class holds the public methods, the encoding and the operation counts; creating
 * and opening (by pointer or by name) is {@link MapOpener}'s, the changes a caller's function
 * computes ({@code compute*}, {@code merge}, {@code replaceAll}) are {@link MapCompute}'s; the
 * root is read and written by {@link MapRoot}, the views are {@link MapViews}, the table by
 * {@link MapStore} and the classes it names (docs/collections.md, "Where the map's code lives").
 *
 * <p><b>Note:</b> thread-safe: any number of threads on any number of nodes use the
 * map at once; every operation is linearizable per key (a read at the read of the
 * key's slot word, a change at its successful CAS). An action on one thread that
 * returned happens-before any operation on any node that observes its effect, by the
 * visibility rule of the verbs.
 *
 * @param <K> the key type
 * @param <V> the value type
 */
public final class DsmMap<K, V> extends AbstractMap<K, V> implements ConcurrentMap<K, V>, AutoCloseable, Rooted {
    static final int WINDOW = 32;
    static final String KIND_NAME = "map";

    /**
     * Operation kinds counted in {@link #operationStats()}: gets ({@code get},
     * {@code getOrDefault}, {@code containsKey}; timed, except a {@code get} served by the
     * leased cache: counted only, in the cache's own counter), puts ({@code put},
     * {@code putIfAbsent}), removes ({@code remove}) and the other changes
     * ({@code replace}, {@code compute*}, {@code merge}, {@code replaceAll}), all timed.
     */
    static final String[] OPERATIONS = {"get", "put", "remove", "change"};
    static final int GET = 0;
    static final int PUT = 1;
    static final int REMOVE = 2;
    static final int CHANGE = 3;

    private final MapStore store;
    private final Codec<K> keys;
    private final Codec<V> values;
    private Set<K> keySet;
    private Collection<V> valuesView;
    private Set<Map.Entry<K, V>> entrySet;

    /**
     * Key types whose equal objects are the same key (equal objects encode to equal bytes
     * under any deterministic codec, and {@code equals} is value equality): the leased
     * cache is keyed by the key object itself, so a hit neither encodes nor hashes bytes.
     * Not {@code Double}/{@code Float}: {@code equals} folds every NaN into one, which a
     * codec of the raw bits does not.
     */
    static final Set<Class<?>> OBJECT_KEY_TYPES = Set.of(Long.class, Integer.class, Short.class, Byte.class,
            Character.class, Boolean.class, String.class, java.util.UUID.class);
    /**
     * Value types whose instances cannot change (final JDK classes, and enums): the leased
     * cache decodes such a value once and hands the same instance to every caller.
     * Values of any other type are decoded on every get, so a caller that changes the
     * object it got changes nobody else's.
     */
    private static final Set<Class<?>> SHARED_VALUE_TYPES = Set.of(Long.class, Integer.class, Short.class, Byte.class,
            Character.class, Boolean.class, Double.class, Float.class, String.class, java.util.UUID.class);

    /** Whether the leased cache is keyed by key objects (a map with leased reads and a key type above). */
    private final boolean objectKeys;
    /** Whether leased hits hand out one decoded value to every caller (a value type above, or an enum). */
    private final boolean sharedValues;

    private DsmMap(MapStore store, Codec<K> keys, Codec<V> values) {
        this.store = store;
        this.keys = keys;
        this.values = values;
        this.objectKeys = store.leases != null && OBJECT_KEY_TYPES.contains(keys.type());
        this.sharedValues = store.leases != null
                && (SHARED_VALUE_TYPES.contains(values.type()) || values.type().isEnum());
        if (sharedValues) {
            store.shareDecoded(values::decode);
        }
    }

    // ================================================================ creating and opening

    /** Creates an empty map with {@link DsmMapOptions#defaults()}. */
    public static <K, V> DsmMap<K, V> create(GlobalAllocator heap, Codec<K> keys, Codec<V> values) {
        return create(heap, keys, values, DsmMapOptions.defaults());
    }

    /**
     * Creates an empty map: a root block and a first table (spread over the nodes with heaps). Other nodes
     * reach it with {@link #open} and {@link #rootPtr()} (bind the pointer to a name
     * to share it).
     */
    public static <K, V> DsmMap<K, V> create(GlobalAllocator heap, Codec<K> keys, Codec<V> values, DsmMapOptions options) {
        return MapOpener.create(heap, keys, values, options);
    }

    /**
     * Opens the map whose root block is at {@code rootPtr} (what {@link #rootPtr()}
     * returned on the creating node).
     *
     * @throws DsmMapException when the pointer is not a map's root, or the codecs' ids
     *                         differ from the ones the map was created with
     */
    public static <K, V> DsmMap<K, V> open(GlobalAllocator heap, long rootPtr, Codec<K> keys, Codec<V> values) {
        return open(heap, rootPtr, keys, values, DsmMapOptions.defaults());
    }

    /**
     * {@link #open(GlobalAllocator, long, Codec, Codec)} with this node's local options
     * (the read cache's size; the grace and first table size are the creator's).
     */
    public static <K, V> DsmMap<K, V> open(GlobalAllocator heap, long rootPtr, Codec<K> keys, Codec<V> values,
                                           DsmMapOptions options) {
        return MapOpener.open(heap, rootPtr, keys, values, options);
    }

    /**
     * Opens the map whose root layout starts at {@code body} inside the block at
     * {@code rootPtr}; {@code named} is its named root (null for a map made by {@link #create}).
     */
    static <K, V> DsmMap<K, V> openAt(GlobalAllocator heap, long rootPtr, long body, Codec<K> keys, Codec<V> values,
                                      DsmMapOptions options, Root named) {
        // the root read and checked, the handle's store made (MapRoot); the map's final store publishes its handle
        return new DsmMap<>(MapRoot.open(heap, rootPtr, body, keys, values, options, named), keys, values);
    }

    /**
     * Sets the largest entry (encoded key and value together, in bytes) this handle
     * writes; larger ones are refused with a {@link io.membus.core.error.ValueTooLargeException}
     * before anything is allocated. Default {@link DsmCollections#DEFAULT_MAX_VALUE_SIZE};
     * {@link DsmCollections} sets it from {@code membus.collections.max-value-size}.
     * Local to this handle; returns it.
     *
     * @throws DsmConfigException when {@code bytes} is not in 1 .. {@link DsmCollections#MAX_VALUE_SIZE_LIMIT}
     */
    public DsmMap<K, V> maxEntryBytes(long bytes) {
        DsmCollections.checkMaxValueSize(bytes, "maxEntryBytes");
        limitEntries(bytes, "DsmMap.maxEntryBytes(" + bytes + ")");
        return this;
    }

    /** The entry limit with the setting it came from (for the error message). */
    void limitEntries(long bytes, String setting) {
        store.limitEntries(bytes, root() == null ? "map at " + RemotePtr.toString(store.rootBlock)
                : "map \"" + root().name() + "\"", setting);
    }

    /** The named root of a map from {@link DsmCollections#map}; null for a map made by {@link #create}. */
    @Override
    public Root root() {
        return store.handle.root();
    }

    @Override
    public Handle handle() {
        return store.handle;
    }

    /**
     * The node whose memory holds the map's current table (the one its root names, as this
     * handle last read it): where a lookup's window read goes, and so whether this node's
     * lookups run on a memory path or cross the network. For placement diagnostics; the
     * table moves to another node when the map grows.
     */
    public int tableNode() {
        return RemotePtr.nodeId(store.rootTable().ptr);
    }

    /** The node holding {@code key}'s entry block, 0 when absent (diagnostics of a quiescent map, for tests). */
    int entryNode(K key) {
        byte[] k = encodeKey(key);
        return store.entryNode(k, MapLayout.hash(k));
    }

    /** How far past its home slot {@code key} sits, -1 when absent (diagnostics of a quiescent map, for tests). */
    int windowOffset(K key) {
        byte[] k = encodeKey(key);
        return store.windowOffset(k, MapLayout.hash(k));
    }

    /** The pointer of the map's root block: what {@link #open} takes on any node. */
    public long rootPtr() {
        return store.rootBlock;
    }

    public Codec<K> keyCodec() {
        return keys;
    }

    public Codec<V> valueCodec() {
        return values;
    }

    /**
     * Frees what this node retired once its grace has passed (at most one grace
     * period of waiting). The map stays usable from other nodes; this instance too.
     */
    @Override
    public void close() {
        store.reclaimer.drainAll();
    }

    /**
     * Frees every entry, every table and the root.
     *
     * <p>A named map (from {@link DsmCollections#map}) is destroyed cluster-wide: its name
     * is given back (when still bound to it) and its blocks freed a grace later; from then
     * on every operation of every handle on it fails with a {@link StructureGoneException}
     * (within a quarter second on other nodes); see {@link DsmCollections#destroy}.
     *
     * <p>A map made by {@link #create} is freed at once: only when no node uses it any
     * more; afterwards every operation on it, on any node, fails.
     */
    public void destroy() {
        if (root() != null) {
            Rooted.destroy(this);
            return;
        }
        store.destroyTables();
        store.mem.writeLong(store.root + ROOT_MAGIC, 0);
        long header = HeapLayout.unseal(store.mem.readLong(store.rootBlock), store.rootBlock);
        store.heap.free(BlockRef.of(store.rootBlock, header, 0));
    }

    /** The table engine (tests reach its internals through it). */
    MapStore store() {
        return store;
    }

    /**
     * Gets this handle served from its read cache: with leased reads, those served with no
     * verb under a lease; otherwise those served by one 8-byte read of the key's slot word.
     * Exact once the gets counted have returned (and the caller has synchronised with their
     * threads); while gets run, an estimate (it may count a get still under way as a hit).
     */
    public long readCacheHits() {
        return store.cacheHits();
    }

    /** Entry blocks this node retired that are not freed yet (waiting out the grace, or for an old table). */
    public int pendingReclamation() {
        return store.reclaimer.pending();
    }

    // ================================================================ encoding

    private byte[] encodeKey(K key) {
        return keys.encode(Objects.requireNonNull(key, "key"));
    }

    byte[] encodeValue(V value) {
        return values.encode(Objects.requireNonNull(value, "value"));
    }

    V decodeValue(byte[] bytes) {
        return bytes == null ? null : values.decode(bytes);
    }

    /** The key's bytes, or null when {@code key} is not of the key type (nothing to find). */
    private byte[] queryKey(Object key) {
        Objects.requireNonNull(key, "key");
        if (!keys.type().isInstance(key)) {
            return null;
        }
        return keys.encode(keys.type().cast(key));
    }

    // ================================================================ reads

    @Override
    public V get(Object key) {
        if (store.leases != null) {
            return leasedGet(key);
        }
        long start = OperationStats.start();
        try {
            byte[] k = queryKey(key);
            return k == null ? null : decodeValue(store.get(k, MapLayout.hash(k)));
        } catch (RuntimeException e) {
            store.handle.stats().failed(GET);
            throw e;
        } finally {
            store.handle.stats().record(GET, start);
        }
    }

    /**
     * A get of a map with leased reads. A hit of a key object (see {@link #OBJECT_KEY_TYPES})
     * is one lookup in this handle's cache and the heap's version check of the key's stripe
     * — no encoding, no hashing of bytes, and for values of an immutable type
     * ({@link #SHARED_VALUE_TYPES}) no decoding either.
     */
    @SuppressWarnings("unchecked")
    private V leasedGet(Object key) {
        Objects.requireNonNull(key, "key");
        // a hit is counted by the leased cache (its own counter) and not timed: no clock read
        Object v = objectKeys ? store.leasedHit(key, sharedValues) : null;
        byte[] k = null;
        if (v == null && !objectKeys) { // the cache is keyed by the key's bytes
            k = queryKey(key);
            if (k == null) {
                return null;
            }
            v = store.leasedHit(java.nio.ByteBuffer.wrap(k), sharedValues);
        }
        if (v == null) { // a miss: the fill is timed (its lookup was counted by the hit path)
            long start = OperationStats.start();
            try {
                if (k == null) {
                    k = queryKey(key);
                    if (k == null) {
                        return null;
                    }
                }
                v = store.leasedFill(k, MapLayout.hash(k), objectKeys ? key : java.nio.ByteBuffer.wrap(k),
                        sharedValues);
            } catch (RuntimeException e) {
                store.handle.stats().failed(GET);
                throw e;
            } finally {
                store.handle.stats().time(GET, start, true);
            }
        }
        if (v == LeasedCache.ABSENT) {
            return null;
        }
        return sharedValues ? (V) v : values.decode((byte[]) v);
    }

    @Override
    public boolean containsKey(Object key) {
        long start = OperationStats.start();
        try {
            byte[] k = queryKey(key);
            return k != null && store.get(k, MapLayout.hash(k)) != null;
        } catch (RuntimeException e) {
            store.handle.stats().failed(GET);
            throw e;
        } finally {
            store.handle.stats().time(GET, start, store.leases != null); // a leased lookup counted itself
        }
    }

    @Override
    public V getOrDefault(Object key, V defaultValue) {
        V v = get(key);
        return v != null ? v : defaultValue;
    }

    @Override
    public boolean containsValue(Object value) {
        Objects.requireNonNull(value, "value");
        Iterator<MapStore.RawEntry> it = store.scan();
        while (it.hasNext()) {
            if (value.equals(decodeValue(it.next().value()))) {
                return true;
            }
        }
        return false;
    }

    @Override
    public int size() {
        return (int) Math.min(Integer.MAX_VALUE, store.size());
    }

    /** The number of entries as a long (exact when no change is in flight). */
    public long mappingCount() {
        return store.size();
    }

    @Override
    public boolean isEmpty() {
        return store.size() == 0;
    }

    // ================================================================ changes

    MapStore.Outcome mutate(K key, MapStore.Mutation m) {
        return mutate(CHANGE, key, m);
    }

    /** A change of {@code key}, timed as an operation of kind {@code op}. */
    private MapStore.Outcome mutate(int op, K key, MapStore.Mutation m) {
        long start = OperationStats.start();
        try {
            byte[] k = encodeKey(key);
            return store.mutate(k, MapLayout.hash(k), m);
        } catch (RuntimeException e) {
            store.handle.stats().failed(op);
            throw e;
        } finally {
            store.handle.stats().record(op, start);
        }
    }

    /** A change of the key whose bytes are {@code k}, timed as an operation of kind {@code op}. */
    private MapStore.Outcome mutateBytes(int op, byte[] k, MapStore.Mutation m) {
        long start = OperationStats.start();
        try {
            return store.mutate(k, MapLayout.hash(k), m);
        } catch (RuntimeException e) {
            store.handle.stats().failed(op);
            throw e;
        } finally {
            store.handle.stats().record(op, start);
        }
    }

    @Override
    public V put(K key, V value) {
        byte[] v = encodeValue(value);
        return decodeValue(mutate(PUT, key, cur -> v).previous());
    }

    @Override
    public V putIfAbsent(K key, V value) {
        byte[] v = encodeValue(value);
        return decodeValue(mutate(PUT, key, cur -> cur == null ? v : MapStore.KEEP).previous());
    }

    @Override
    public V remove(Object key) {
        byte[] k = queryKey(key);
        if (k == null) {
            return null;
        }
        return decodeValue(mutateBytes(REMOVE, k, cur -> null).previous());
    }

    @Override
    public boolean remove(Object key, Object value) {
        Objects.requireNonNull(key, "key");
        if (value == null) {
            return false;
        }
        byte[] k = queryKey(key);
        if (k == null) {
            return false;
        }
        return mutateBytes(REMOVE, k,
                cur -> cur != null && value.equals(decodeValue(cur)) ? null : MapStore.KEEP).changed();
    }

    @Override
    public boolean replace(K key, V oldValue, V newValue) {
        Objects.requireNonNull(oldValue, "oldValue");
        byte[] v = encodeValue(newValue);
        return mutate(key, cur -> cur != null && oldValue.equals(decodeValue(cur)) ? v : MapStore.KEEP).changed();
    }

    @Override
    public V replace(K key, V value) {
        byte[] v = encodeValue(value);
        return decodeValue(mutate(key, cur -> cur != null ? v : MapStore.KEEP).previous());
    }

    @Override
    public V computeIfAbsent(K key, Function<? super K, ? extends V> fn) {
        return MapCompute.computeIfAbsent(this, key, fn);
    }

    @Override
    public V computeIfPresent(K key, BiFunction<? super K, ? super V, ? extends V> fn) {
        return MapCompute.computeIfPresent(this, key, fn);
    }

    @Override
    public V compute(K key, BiFunction<? super K, ? super V, ? extends V> fn) {
        return MapCompute.compute(this, key, fn);
    }

    @Override
    public V merge(K key, V value, BiFunction<? super V, ? super V, ? extends V> fn) {
        return MapCompute.merge(this, key, value, fn);
    }

    @Override
    public void forEach(BiConsumer<? super K, ? super V> action) {
        Objects.requireNonNull(action, "action");
        Iterator<MapStore.RawEntry> it = store.scan();
        while (it.hasNext()) {
            MapStore.RawEntry e = it.next();
            action.accept(keys.decode(e.key()), values.decode(e.value()));
        }
    }

    @Override
    public void replaceAll(BiFunction<? super K, ? super V, ? extends V> fn) {
        MapCompute.replaceAll(this, fn);
    }

    @Override
    public void clear() {
        Iterator<MapStore.RawEntry> it = store.scan();
        while (it.hasNext()) {
            byte[] k = it.next().key();
            store.mutate(k, MapLayout.hash(k), cur -> null);
        }
    }

    // ================================================================ views

    @Override
    public Set<K> keySet() {
        Set<K> s = keySet;
        return s != null ? s : (keySet = MapViews.keySet(this));
    }

    @Override
    public Collection<V> values() {
        Collection<V> c = valuesView;
        return c != null ? c : (valuesView = MapViews.values(this));
    }

    @Override
    public Set<Map.Entry<K, V>> entrySet() {
        Set<Map.Entry<K, V>> s = entrySet;
        return s != null ? s : (entrySet = MapViews.entrySet(this));
    }
}
