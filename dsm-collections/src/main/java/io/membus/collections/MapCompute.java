package io.membus.collections;

import java.util.Iterator;
import java.util.Objects;
import java.util.function.BiFunction;
import java.util.function.Function;

/**
 * The changes of a {@link DsmMap} whose new value the caller's function computes
 * ({@code computeIfAbsent}, {@code computeIfPresent}, {@code compute}, {@code merge}, and
 * {@code replaceAll} key by key): each is one {@link DsmMap#mutate} of its key, so it is
 * atomic per key; the function is applied to the current value inside the mutation and
 * may be applied again when another change of the key wins the CAS (only the result that
 * is installed counts, and is what the method returns).
 *
 * <p><b>Note:</b> stateless and thread-safe; the result of one call is held in an array
 * local to that call, written and read on the calling thread only (the mutation runs its
 * function on the caller's thread).
 */
final class MapCompute {
    private MapCompute() {
    }

    static <K, V> V computeIfAbsent(DsmMap<K, V> map, K key, Function<? super K, ? extends V> fn) {
        Objects.requireNonNull(fn, "mappingFunction");
        Object[] result = new Object[1];
        map.mutate(key, cur -> {
            if (cur != null) {
                result[0] = map.decodeValue(cur);
                return MapStore.KEEP;
            }
            V nv = fn.apply(key);
            result[0] = nv;
            return nv == null ? MapStore.KEEP : map.encodeValue(nv);
        });
        return cast(result[0]);
    }

    static <K, V> V computeIfPresent(DsmMap<K, V> map, K key, BiFunction<? super K, ? super V, ? extends V> fn) {
        Objects.requireNonNull(fn, "remappingFunction");
        Object[] result = new Object[1];
        map.mutate(key, cur -> {
            if (cur == null) {
                result[0] = null;
                return MapStore.KEEP;
            }
            V nv = fn.apply(key, map.decodeValue(cur));
            result[0] = nv;
            return nv == null ? null : map.encodeValue(nv);
        });
        return cast(result[0]);
    }

    static <K, V> V compute(DsmMap<K, V> map, K key, BiFunction<? super K, ? super V, ? extends V> fn) {
        Objects.requireNonNull(fn, "remappingFunction");
        Object[] result = new Object[1];
        map.mutate(key, cur -> {
            V nv = fn.apply(key, map.decodeValue(cur));
            result[0] = nv;
            return nv == null ? null : map.encodeValue(nv);
        });
        return cast(result[0]);
    }

    static <K, V> V merge(DsmMap<K, V> map, K key, V value, BiFunction<? super V, ? super V, ? extends V> fn) {
        Objects.requireNonNull(value, "value");
        Objects.requireNonNull(fn, "remappingFunction");
        byte[] given = map.encodeValue(value);
        Object[] result = new Object[1];
        map.mutate(key, cur -> {
            if (cur == null) {
                result[0] = value;
                return given;
            }
            V nv = fn.apply(map.decodeValue(cur), value);
            result[0] = nv;
            return nv == null ? null : map.encodeValue(nv);
        });
        return cast(result[0]);
    }

    static <K, V> void replaceAll(DsmMap<K, V> map, BiFunction<? super K, ? super V, ? extends V> fn) {
        Objects.requireNonNull(fn, "function");
        Iterator<MapStore.RawEntry> it = map.store().scan();
        while (it.hasNext()) {
            K k = map.keyCodec().decode(it.next().key());
            // per key, as ConcurrentMap's default: re-applied to the value that won a race; a removed key is skipped
            map.mutate(k, cur -> {
                if (cur == null) {
                    return MapStore.KEEP;
                }
                return map.encodeValue(Objects.requireNonNull(fn.apply(k, map.decodeValue(cur)), "replaceAll function returned null"));
            });
        }
    }

    @SuppressWarnings("unchecked")
    private static <T> T cast(Object o) {
        return (T) o;
    }
}
