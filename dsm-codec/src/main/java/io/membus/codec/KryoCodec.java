package io.membus.codec;

import com.esotericsoftware.kryo.Kryo;
import com.esotericsoftware.kryo.KryoException;
import com.esotericsoftware.kryo.io.Input;
import com.esotericsoftware.kryo.io.Output;
import com.esotericsoftware.kryo.serializers.DefaultSerializers;
import com.esotericsoftware.kryo.util.Pool;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.LinkedList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.UUID;

/**
 * A Kryo 5 codec with registration required: only the classes registered with the
 * builder (and the JDK types listed in {@link #JDK_TYPES}) are ever written or
 * read, so bytes from remote memory can never make this node instantiate an
 * arbitrary class. A class that is not registered is refused on both sides: by
 * {@link #encode} before anything is stored, and by {@link #decode} when the bytes
 * name a class id nobody registered.
 *
 * <p>Class ids are part of the stored format: every node must register the same
 * classes with the same ids. The builder numbers classes in call order from
 * {@link #FIRST_USER_ID} (or takes explicit ids), and {@link #id()} carries a
 * fingerprint of the whole registration list, so structures opened with another
 * list are refused by the layers above rather than misread.
 *
 * <p>Kryo instances are not thread-safe; this codec keeps them in a pool (one
 * borrowed per call, returned after), together with their output buffers.
 *
 * <p><b>Note:</b> thread-safe; calls share nothing but the pool.
 *
 * @param <T> the root type
 */
public final class KryoCodec<T> implements Codec<T> {
    /** Ids below this are Kryo's own (primitives, String: 0–9) and {@link #JDK_TYPES} (10–99). */
    public static final int FIRST_USER_ID = 100;

    /** JDK types every KryoCodec registers, with ids 10, 11, ... in this order. */
    public static final List<Class<?>> JDK_TYPES = List.of(
            ArrayList.class, LinkedList.class, HashMap.class, LinkedHashMap.class, TreeMap.class,
            HashSet.class, LinkedHashSet.class, TreeSet.class, BigDecimal.class, BigInteger.class,
            UUID.class, Instant.class, LocalDate.class, LocalDateTime.class, Duration.class,
            byte[].class, int[].class, long[].class, double[].class, String[].class, Object[].class,
            Long.class, Integer.class, Double.class, Boolean.class);

    private static final int MAX_BUFFER = 64 << 20;

    private final Class<T> type;
    private final Map<Class<?>, Integer> registrations;
    private final String id;
    private final Pool<Kryo> kryos;
    private final Pool<Output> outputs;

    private KryoCodec(Class<T> type, Map<Class<?>, Integer> registrations) {
        this.type = type;
        this.registrations = Map.copyOf(registrations);
        this.id = "kryo:" + type.getName() + "#" + fingerprint(registrations);
        int pool = Math.max(4, Runtime.getRuntime().availableProcessors() * 2);
        this.kryos = new Pool<>(true, false, pool) {
            @Override
            protected Kryo create() {
                return newKryo(registrations);
            }
        };
        this.outputs = new Pool<>(true, false, pool) {
            @Override
            protected Output create() {
                return new Output(256, MAX_BUFFER);
            }
        };
    }

    /** A builder for a codec of {@code type}; {@code type} itself is registered first. */
    public static <T> Builder<T> builder(Class<T> type) {
        return new Builder<>(type);
    }

    /** A codec of {@code type} that also accepts the {@code others} (in that order) inside its values. */
    public static <T> KryoCodec<T> of(Class<T> type, Class<?>... others) {
        Builder<T> b = builder(type);
        for (Class<?> c : others) {
            b.register(c);
        }
        return b.build();
    }

    private static Kryo newKryo(Map<Class<?>, Integer> registrations) {
        Kryo kryo = new Kryo();
        kryo.setRegistrationRequired(true);
        kryo.setReferences(false);
        int next = 10;
        for (Class<?> c : JDK_TYPES) {
            if (c == UUID.class) {
                kryo.register(c, new DefaultSerializers.UUIDSerializer(), next++);
            } else {
                kryo.register(c, next++);
            }
        }
        registrations.forEach((c, id) -> kryo.register(c, id));
        return kryo;
    }

    private static String fingerprint(Map<Class<?>, Integer> registrations) {
        StringBuilder sb = new StringBuilder();
        JDK_TYPES.forEach(c -> sb.append(c.getName()).append(';'));
        new TreeMap<>(registrations.entrySet().stream()
                .collect(java.util.stream.Collectors.toMap(Map.Entry::getValue, e -> e.getKey().getName())))
                .forEach((id, name) -> sb.append(id).append('=').append(name).append(';'));
        try {
            byte[] digest = MessageDigest.getInstance("SHA-256").digest(sb.toString().getBytes(StandardCharsets.UTF_8));
            return HexFormat.of().formatHex(digest, 0, 8);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is missing from this JVM", e);
        }
    }

    @Override
    public String id() {
        return id;
    }

    @Override
    public Class<T> type() {
        return type;
    }

    @Override
    public byte[] encode(T value) {
        Objects.requireNonNull(value, "value");
        Kryo kryo = kryos.obtain();
        Output out = outputs.obtain();
        try {
            out.reset();
            kryo.writeObject(out, value);
            return out.toBytes();
        } catch (IllegalArgumentException | KryoException | java.lang.reflect.InaccessibleObjectException e) {
            throw new CodecException(id, "value=" + value.getClass().getName() + ": cannot encode (" + e.getMessage()
                    + "); register every class a value contains with KryoCodec.builder(...).register(...)"
                    + ", in the same order on every node", e);
        } finally {
            outputs.free(out);
            kryos.free(kryo);
        }
    }

    @Override
    public T decode(byte[] src, int offset, int length) {
        Objects.checkFromIndexSize(offset, length, src.length);
        Kryo kryo = kryos.obtain();
        try {
            Input in = new Input(src, offset, length);
            T value = kryo.readObject(in, type);
            if (in.position() != offset + length) {
                throw new CodecException(id, "length=" + length + ", read=" + (in.position() - offset)
                        + ": trailing bytes after the value; another codec wrote them, or they are corrupt");
            }
            return value;
        } catch (KryoException | IllegalArgumentException | IndexOutOfBoundsException | NegativeArraySizeException e) {
            throw new CodecException(id, "length=" + length + ": the bytes do not decode (" + e.getMessage()
                    + "); a node with another registration list wrote them, or they are corrupt", e);
        } finally {
            kryos.free(kryo);
        }
    }

    /** The classes this codec registers beyond {@link #JDK_TYPES}, with their ids. */
    public Map<Class<?>, Integer> registrations() {
        return registrations;
    }

    @Override
    public String toString() {
        return id;
    }

    /**
     * Collects registrations. Not thread-safe; {@link #build()} returns a thread-safe codec.
     *
     * @param <T> the root type
     */
    public static final class Builder<T> {
        private final Class<T> type;
        private final LinkedHashMap<Class<?>, Integer> registrations = new LinkedHashMap<>();
        private int next = FIRST_USER_ID;

        private Builder(Class<T> type) {
            this.type = Objects.requireNonNull(type, "type");
            if (!JDK_TYPES.contains(type) && !type.isPrimitive() && type != String.class) {
                register(type);
            }
        }

        /** Registers {@code c} with the next free id. */
        public Builder<T> register(Class<?> c) {
            while (registrations.containsValue(next)) {
                next++;
            }
            return register(c, next++);
        }

        /** Registers {@code c} with {@code id} (at least {@link #FIRST_USER_ID}). */
        public Builder<T> register(Class<?> c, int id) {
            Objects.requireNonNull(c, "class");
            if (id < FIRST_USER_ID) {
                throw new IllegalArgumentException("id=" + id + ", class=" + c.getName()
                        + ": ids below " + FIRST_USER_ID + " are Kryo's and Membus' own; use " + FIRST_USER_ID + " or more");
            }
            if (JDK_TYPES.contains(c)) {
                return this;
            }
            Integer old = registrations.get(c);
            if (old != null && old != id) {
                throw new IllegalArgumentException("class=" + c.getName() + ", id=" + id + ", registered=" + old
                        + ": a class is registered once");
            }
            registrations.forEach((k, v) -> {
                if (v == id && k != c) {
                    throw new IllegalArgumentException("id=" + id + ", class=" + c.getName() + ", taken by="
                            + k.getName() + ": every class needs its own id");
                }
            });
            registrations.put(c, id);
            return this;
        }

        public KryoCodec<T> build() {
            return new KryoCodec<>(type, registrations);
        }
    }
}
