package io.membus.collections;

import java.util.AbstractCollection;
import java.util.AbstractMap;
import java.util.AbstractSet;
import java.util.Iterator;
import java.util.Map;
import java.util.Objects;
import java.util.function.Function;

/**
 * The views of a {@link DsmMap}: {@link #keySet}, {@link #values} and {@link #entrySet},
 * over one weakly consistent scan of the table ({@link MapScanIterator}); removals and
 * {@code setValue} write through the map's own public methods.
 *
 * <p><b>Note:</b> thread-safe as the map is (a view holds no state but its map); each
 * iterator is used by one thread.
 */
final class MapViews {
    private MapViews() {
    }

    static <K, V> AbstractSet<K> keySet(DsmMap<K, V> map) {
        return new KeySet<>(map);
    }

    static <K, V> AbstractCollection<V> values(DsmMap<K, V> map) {
        return new Values<>(map);
    }

    static <K, V> AbstractSet<Map.Entry<K, V>> entrySet(DsmMap<K, V> map) {
        return new EntrySet<>(map);
    }

    /** A weakly consistent iterator over entries; {@code remove} removes the last key returned. */
    private static final class EntryIterator<K, V> implements Iterator<Map.Entry<K, V>> {
        private final DsmMap<K, V> map;
        private final Iterator<MapStore.RawEntry> raw;
        private K last;

        EntryIterator(DsmMap<K, V> map) {
            this.map = map;
            this.raw = map.store().scan();
        }

        @Override
        public boolean hasNext() {
            return raw.hasNext();
        }

        @Override
        public Map.Entry<K, V> next() {
            MapStore.RawEntry e = raw.next();
            K k = map.keyCodec().decode(e.key());
            last = k;
            return new WriteThroughEntry<>(map, k, map.valueCodec().decode(e.value()));
        }

        @Override
        public void remove() {
            if (last == null) {
                throw new IllegalStateException("next() was not called, or remove() was called after it already");
            }
            map.remove(last);
            last = null;
        }
    }

    /** An entry whose {@code setValue} puts into the map (as {@code ConcurrentHashMap}'s do). */
    private static final class WriteThroughEntry<K, V> extends AbstractMap.SimpleEntry<K, V> {
        private static final long serialVersionUID = 1L;
        private final transient DsmMap<K, V> map;

        WriteThroughEntry(DsmMap<K, V> map, K key, V value) {
            super(key, value);
            this.map = map;
        }

        @Override
        public V setValue(V value) {
            Objects.requireNonNull(value, "value");
            V old = super.setValue(value);
            map.put(getKey(), value);
            return old;
        }
    }

    private static final class EntrySet<K, V> extends AbstractSet<Map.Entry<K, V>> {
        private final DsmMap<K, V> map;

        EntrySet(DsmMap<K, V> map) {
            this.map = map;
        }

        @Override
        public Iterator<Map.Entry<K, V>> iterator() {
            return new EntryIterator<>(map);
        }

        @Override
        public int size() {
            return map.size();
        }

        @Override
        public boolean isEmpty() {
            return map.isEmpty();
        }

        @Override
        public boolean contains(Object o) {
            if (!(o instanceof Map.Entry<?, ?> e) || e.getKey() == null || e.getValue() == null) {
                return false;
            }
            Object v = map.get(e.getKey());
            return v != null && v.equals(e.getValue());
        }

        @Override
        public boolean remove(Object o) {
            if (!(o instanceof Map.Entry<?, ?> e) || e.getKey() == null || e.getValue() == null) {
                return false;
            }
            return map.remove(e.getKey(), e.getValue());
        }

        @Override
        public void clear() {
            map.clear();
        }
    }

    /** The keys or the values of the entry iterator (weakly consistent, removal through it). */
    private static final class Projection<K, V, T> implements Iterator<T> {
        private final EntryIterator<K, V> entries;
        private final Function<Map.Entry<K, V>, T> part;

        Projection(DsmMap<K, V> map, Function<Map.Entry<K, V>, T> part) {
            this.entries = new EntryIterator<>(map);
            this.part = part;
        }

        @Override
        public boolean hasNext() {
            return entries.hasNext();
        }

        @Override
        public T next() {
            return part.apply(entries.next());
        }

        @Override
        public void remove() {
            entries.remove();
        }
    }

    private static final class KeySet<K, V> extends AbstractSet<K> {
        private final DsmMap<K, V> map;

        KeySet(DsmMap<K, V> map) {
            this.map = map;
        }

        @Override
        public Iterator<K> iterator() {
            return new Projection<>(map, Map.Entry::getKey);
        }

        @Override
        public int size() {
            return map.size();
        }

        @Override
        public boolean isEmpty() {
            return map.isEmpty();
        }

        @Override
        public boolean contains(Object o) {
            return map.containsKey(o);
        }

        @Override
        public boolean remove(Object o) {
            return map.remove(o) != null;
        }

        @Override
        public void clear() {
            map.clear();
        }
    }

    private static final class Values<K, V> extends AbstractCollection<V> {
        private final DsmMap<K, V> map;

        Values(DsmMap<K, V> map) {
            this.map = map;
        }

        @Override
        public Iterator<V> iterator() {
            return new Projection<>(map, Map.Entry::getValue);
        }

        @Override
        public int size() {
            return map.size();
        }

        @Override
        public boolean isEmpty() {
            return map.isEmpty();
        }

        @Override
        public boolean contains(Object o) {
            return map.containsValue(o);
        }

        @Override
        public void clear() {
            map.clear();
        }
    }
}
