package io.membus.codec;

import com.esotericsoftware.kryo.Kryo;
import com.esotericsoftware.kryo.KryoException;
import com.esotericsoftware.kryo.Serializer;
import com.esotericsoftware.kryo.io.Input;
import com.esotericsoftware.kryo.io.Output;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.LinkedList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;

/**
 * Serializers of the JDK's immutable and wrapper collections ({@code List.of},
 * {@code Set.of}, {@code Map.of}, {@code List.copyOf}, {@code Collections.unmodifiable*},
 * {@code Collections.empty*}/{@code singleton*}, {@code Arrays.asList}): they write the
 * elements through the collection's public interface and read them back through the
 * public factory of the same kind, so nothing reflects into {@code java.util} (no
 * {@code --add-opens}) and a decoded value is as immutable as the encoded one.
 *
 * <p>Elements are written with their class ({@code writeClassAndObject}), so they
 * obey the registration rules like any other value. Lengths read from the bytes are
 * checked against the bytes left before anything is allocated.
 *
 * <p><b>Note:</b> stateless; thread-safe (Kryo instances using it are not).
 */
final class JdkCollectionSerializer extends Serializer<Object> {

    /** What a registered JDK class is read back as. */
    enum Kind {
        LIST_OF(Shape.LIST, a -> hasNull(a) ? Arrays.stream(a).toList() : List.of(a)),
        ARRAYS_AS_LIST(Shape.LIST, Arrays::asList),
        UNMODIFIABLE_LIST(Shape.LIST, a -> Collections.unmodifiableList(new ArrayList<>(Arrays.asList(a)))),
        UNMODIFIABLE_SEQUENTIAL_LIST(Shape.LIST, a -> Collections.unmodifiableList(new LinkedList<>(Arrays.asList(a)))),
        UNMODIFIABLE_COLLECTION(Shape.LIST, a -> Collections.unmodifiableCollection(new ArrayList<>(Arrays.asList(a)))),
        EMPTY_LIST(Shape.LIST, a -> exactly(0, a, Collections.emptyList())),
        SINGLETON_LIST(Shape.LIST, a -> a.length == 1 ? Collections.singletonList(a[0]) : exactly(1, a, null)),
        SET_OF(Shape.SET, Set::of),
        UNMODIFIABLE_SET(Shape.SET, a -> Collections.unmodifiableSet(new LinkedHashSet<>(Arrays.asList(a)))),
        EMPTY_SET(Shape.SET, a -> exactly(0, a, Collections.emptySet())),
        SINGLETON_SET(Shape.SET, a -> a.length == 1 ? Collections.singleton(a[0]) : exactly(1, a, null)),
        MAP_OF(Shape.MAP, a -> {
            @SuppressWarnings("unchecked")
            Map.Entry<Object, Object>[] entries = new Map.Entry[a.length / 2];
            for (int i = 0; i < entries.length; i++) {
                entries[i] = Map.entry(a[2 * i], a[2 * i + 1]);
            }
            return Map.ofEntries(entries);
        }),
        UNMODIFIABLE_MAP(Shape.MAP, a -> Collections.unmodifiableMap(pairs(a))),
        EMPTY_MAP(Shape.MAP, a -> exactly(0, a, Collections.emptyMap())),
        SINGLETON_MAP(Shape.MAP, a -> a.length == 2 ? Collections.singletonMap(a[0], a[1]) : exactly(2, a, null));

        final Shape shape;
        final Function<Object[], Object> make;

        Kind(Shape shape, Function<Object[], Object> make) {
            this.shape = shape;
            this.make = make;
        }

        /** The name written in registration lists and fingerprints, e.g. {@code jdk-list-of}. */
        String label() {
            return "jdk-" + name().toLowerCase(java.util.Locale.ROOT).replace('_', '-');
        }
    }

    enum Shape { LIST, SET, MAP }

    private final Kind kind;

    JdkCollectionSerializer(Kind kind) {
        this.kind = kind;
        setImmutable(true);
    }

    Kind kind() {
        return kind;
    }

    private static boolean hasNull(Object[] a) {
        for (Object o : a) {
            if (o == null) {
                return true;
            }
        }
        return false;
    }

    private static Object exactly(int n, Object[] a, Object value) {
        if (a.length != n) {
            throw new IllegalArgumentException("elements=" + a.length + ", expected=" + n);
        }
        return value;
    }

    private static Map<Object, Object> pairs(Object[] a) {
        Map<Object, Object> m = new LinkedHashMap<>(a.length);
        for (int i = 0; i + 1 < a.length; i += 2) {
            m.put(a[i], a[i + 1]);
        }
        return m;
    }

    @Override
    public void write(Kryo kryo, Output out, Object value) {
        if (kind.shape == Shape.MAP) {
            Map<?, ?> m = (Map<?, ?>) value;
            out.writeVarInt(m.size(), true);
            for (Map.Entry<?, ?> e : m.entrySet()) {
                kryo.writeClassAndObject(out, e.getKey());
                kryo.writeClassAndObject(out, e.getValue());
            }
        } else {
            Collection<?> c = (Collection<?>) value;
            out.writeVarInt(c.size(), true);
            for (Object e : c) {
                kryo.writeClassAndObject(out, e);
            }
        }
    }

    @Override
    public Object read(Kryo kryo, Input in, Class<?> type) {
        int size = in.readVarInt(true);
        int slots = kind.shape == Shape.MAP ? 2 * size : size;
        // every element takes at least one byte: a larger count is corrupt, refused before allocating
        if (size < 0 || slots < 0 || slots > in.limit() - in.position()) {
            throw new KryoException("size=" + size + ", bytes left=" + (in.limit() - in.position())
                    + ": not a " + kind.label() + " (corrupt length)");
        }
        Object[] a = new Object[slots];
        for (int i = 0; i < slots; i++) {
            a[i] = kryo.readClassAndObject(in);
        }
        try {
            return kind.make.apply(a);
        } catch (RuntimeException e) { // duplicates or nulls where the factory refuses them: the bytes are bad
            throw new KryoException("not a " + kind.label() + ": " + e, e);
        }
    }

    /** The JDK classes registered with these serializers, in a fixed order; probed from public factories. */
    static List<Map.Entry<Class<?>, Kind>> probes() {
        List<Map.Entry<Class<?>, Kind>> p = new ArrayList<>();
        p.add(Map.entry(List.of(1, 2, 3).getClass(), Kind.LIST_OF));
        p.add(Map.entry(List.of(1).getClass(), Kind.LIST_OF));
        p.add(Map.entry(List.of(1, 2, 3).subList(0, 2).getClass(), Kind.LIST_OF));
        p.add(Map.entry(Set.of(1, 2, 3).getClass(), Kind.SET_OF));
        p.add(Map.entry(Set.of(1).getClass(), Kind.SET_OF));
        p.add(Map.entry(Map.of(1, 1, 2, 2).getClass(), Kind.MAP_OF));
        p.add(Map.entry(Map.of(1, 1).getClass(), Kind.MAP_OF));
        p.add(Map.entry(Arrays.asList(1).getClass(), Kind.ARRAYS_AS_LIST));
        p.add(Map.entry(Collections.emptyList().getClass(), Kind.EMPTY_LIST));
        p.add(Map.entry(Collections.emptySet().getClass(), Kind.EMPTY_SET));
        p.add(Map.entry(Collections.emptyMap().getClass(), Kind.EMPTY_MAP));
        p.add(Map.entry(Collections.singletonList(1).getClass(), Kind.SINGLETON_LIST));
        p.add(Map.entry(Collections.singleton(1).getClass(), Kind.SINGLETON_SET));
        p.add(Map.entry(Collections.singletonMap(1, 1).getClass(), Kind.SINGLETON_MAP));
        p.add(Map.entry(Collections.unmodifiableCollection(new ArrayList<>()).getClass(), Kind.UNMODIFIABLE_COLLECTION));
        p.add(Map.entry(Collections.unmodifiableList(new ArrayList<>()).getClass(), Kind.UNMODIFIABLE_LIST));
        p.add(Map.entry(Collections.unmodifiableList(new LinkedList<>()).getClass(), Kind.UNMODIFIABLE_SEQUENTIAL_LIST));
        p.add(Map.entry(Collections.unmodifiableSet(new HashSet<>()).getClass(), Kind.UNMODIFIABLE_SET));
        p.add(Map.entry(Collections.unmodifiableMap(new HashMap<>()).getClass(), Kind.UNMODIFIABLE_MAP));
        return p;
    }
}
