package io.membus.codec;

import com.esotericsoftware.kryo.Kryo;
import com.esotericsoftware.kryo.KryoException;
import com.esotericsoftware.kryo.io.Input;
import com.esotericsoftware.kryo.io.Output;

import java.lang.reflect.Modifier;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
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
 * A Kryo 5 codec with registration required: only the classes of its
 * {@link CodecRegistry} (the user's, the JDK types listed in {@link #JDK_TYPES} and
 * the JDK's immutable collections) are ever written or read, so bytes from remote
 * memory can never make this node instantiate an arbitrary class. A class that is
 * not registered is refused on both sides: by {@link #encode} before anything is
 * stored ({@link UnregisteredClassException}, naming the class and the line to add),
 * and by {@link #decode} when the bytes name a class id nobody registered.
 *
 * <p>Class ids are part of the stored format: every node must register the same
 * classes with the same ids (see {@link CodecRegistry}); {@link #id()} carries the
 * registry's fingerprint, so structures opened with another list are refused by the
 * layers above rather than misread. A final root type (a record, an enum, a final
 * class) is written without its class; any other root type (an interface such as
 * {@code List}, an open class) with it, and the value read back must be an instance.
 *
 * <p>Kryo instances are not thread-safe; the registry keeps them in a pool (one
 * borrowed per call, returned after), together with their output buffers.
 *
 * <p><b>Note:</b> thread-safe; calls share nothing but the pool.
 *
 * @param <T> the root type
 */
public final class KryoCodec<T> implements Codec<T> {
    /** Ids below this are Kryo's own (primitives and their wrappers, String: 0–9), {@link #JDK_TYPES} (10–34) and the JDK collections (40–58). */
    public static final int FIRST_USER_ID = 100;

    /** JDK types every KryoCodec registers, with ids 10, 11, ... in this order. */
    public static final List<Class<?>> JDK_TYPES = List.of(
            ArrayList.class, LinkedList.class, HashMap.class, LinkedHashMap.class, TreeMap.class,
            HashSet.class, LinkedHashSet.class, TreeSet.class, BigDecimal.class, BigInteger.class,
            UUID.class, Instant.class, LocalDate.class, LocalDateTime.class, Duration.class,
            byte[].class, int[].class, long[].class, double[].class, String[].class, Object[].class,
            Long.class, Integer.class, Double.class, Boolean.class);

    private final Class<T> type;
    private final CodecRegistry registry;
    private final boolean withClass;
    private final String id;

    KryoCodec(Class<T> type, CodecRegistry registry) {
        this.type = Objects.requireNonNull(type, "type");
        this.registry = registry;
        this.withClass = writesRootClass(type);
        this.id = "kryo:" + type.getName() + "#" + registry.fingerprint();
    }

    /** Whether values of {@code type} are written with their class (their class may be a subclass). */
    static boolean writesRootClass(Class<?> type) {
        return !type.isPrimitive() && !type.isArray() && !Modifier.isFinal(type.getModifiers());
    }

    /** A builder for a codec of {@code type}; {@code type} itself is registered first. */
    public static <T> Builder<T> builder(Class<T> type) {
        return new Builder<>(type);
    }

    /**
     * A codec of {@code type} that also accepts the {@code others} (in that order) inside
     * its values; the records and enums they use are registered with them.
     */
    public static <T> KryoCodec<T> of(Class<T> type, Class<?>... others) {
        Builder<T> b = builder(type);
        for (Class<?> c : others) {
            b.register(c);
        }
        return b.build();
    }

    @Override
    public String id() {
        return id;
    }

    @Override
    public Class<T> type() {
        return type;
    }

    /** The registry whose classes this codec writes and reads. */
    public CodecRegistry registry() {
        return registry;
    }

    @Override
    public byte[] encode(T value) {
        Objects.requireNonNull(value, "value");
        Kryo kryo = registry.kryos.obtain();
        Output out = registry.outputs.obtain();
        try {
            out.reset();
            if (withClass) {
                kryo.writeClassAndObject(out, value);
            } else {
                kryo.writeObject(out, value);
            }
            return out.toBytes();
        } catch (IllegalArgumentException | KryoException | java.lang.reflect.InaccessibleObjectException e) {
            for (Throwable t = e; t != null; t = t.getCause()) {
                if (t instanceof CodecRegistry.Unregistered u) {
                    throw new UnregisteredClassException(id, u.type, " (found in value=" + value.getClass().getName() + ")");
                }
            }
            throw new CodecException(id, "value=" + value.getClass().getName() + ": cannot encode (" + e.getMessage()
                    + "); docs/codecs.md says which classes a codec writes", e);
        } finally {
            registry.outputs.free(out);
            registry.kryos.free(kryo);
        }
    }

    @Override
    public T decode(byte[] src, int offset, int length) {
        Objects.checkFromIndexSize(offset, length, src.length);
        Kryo kryo = registry.kryos.obtain();
        try {
            Input in = new Input(src, offset, length);
            Object value = withClass ? kryo.readClassAndObject(in) : kryo.readObject(in, type);
            if (in.position() != offset + length) {
                throw new CodecException(id, "length=" + length + ", read=" + (in.position() - offset)
                        + ": trailing bytes after the value; another codec wrote them, or they are corrupt");
            }
            if (!type.isInstance(value)) {
                throw new CodecException(id, "length=" + length + ", read=" + (value == null ? "null"
                        : value.getClass().getName()) + ": not a " + type.getName() + "; another codec wrote them");
            }
            return type.cast(value);
        } catch (KryoException | IllegalArgumentException | IndexOutOfBoundsException | NegativeArraySizeException e) {
            throw new CodecException(id, "length=" + length + ": the bytes do not decode (" + e.getMessage()
                    + "); a node with another registration list wrote them, or they are corrupt", e);
        } finally {
            registry.kryos.free(kryo);
        }
    }

    /** The classes this codec registers beyond the built-ins, with their ids. */
    public Map<Class<?>, Integer> registrations() {
        return registry.registrations();
    }

    @Override
    public String toString() {
        return id;
    }

    /**
     * Collects registrations for a codec of one root type (a {@link CodecRegistry.Builder}
     * with the root type registered first). Not thread-safe; {@link #build()} returns a
     * thread-safe codec.
     *
     * @param <T> the root type
     */
    public static final class Builder<T> {
        private final Class<T> type;
        private final CodecRegistry.Builder registry = CodecRegistry.builder();

        private Builder(Class<T> type) {
            this.type = Objects.requireNonNull(type, "type");
            registry.register(type);
        }

        /** Registers {@code c} with the next free id (and the records and enums it uses after it). */
        public Builder<T> register(Class<?> c) {
            registry.register(c);
            return this;
        }

        /** Registers {@code c} with {@code id} (at least {@link #FIRST_USER_ID}). */
        public Builder<T> register(Class<?> c, int id) {
            registry.register(c, id);
            return this;
        }

        public KryoCodec<T> build() {
            return registry.build().kryo(type);
        }
    }
}
