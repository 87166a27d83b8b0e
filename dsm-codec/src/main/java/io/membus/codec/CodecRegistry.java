package io.membus.codec;

import com.esotericsoftware.kryo.Kryo;
import com.esotericsoftware.kryo.Registration;
import com.esotericsoftware.kryo.Serializer;
import com.esotericsoftware.kryo.io.Output;
import com.esotericsoftware.kryo.serializers.DefaultSerializers;
import com.esotericsoftware.kryo.util.Pool;
import io.membus.core.error.DsmConfigException;

import java.lang.reflect.GenericArrayType;
import java.lang.reflect.Modifier;
import java.lang.reflect.ParameterizedType;
import java.lang.reflect.RecordComponent;
import java.lang.reflect.Type;
import java.lang.reflect.WildcardType;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.UUID;

/**
 * The classes Kryo may write and read, each with a fixed id: one list shared by
 * every codec this registry makes ({@link #codec}), and the same on every node.
 *
 * <p>The list is, in order:
 * <ol>
 *   <li>Kryo's own (primitives and {@code String}, ids 0–9);</li>
 *   <li>the JDK types of {@link KryoCodec#JDK_TYPES} (ids 10–34; the wrappers among them keep
 *       Kryo's ids of their primitives);</li>
 *   <li>the JDK's immutable and wrapper collections ({@code List.of}, {@code Set.of},
 *       {@code Map.of}, {@code List.copyOf}, {@code Collections.unmodifiable*},
 *       {@code empty*}, {@code singleton*}, {@code Arrays.asList}; ids 40–58), with
 *       serializers that read back an immutable collection of the same kind;</li>
 *   <li>the user's classes, from {@link KryoCodec#FIRST_USER_ID} in registration
 *       order. Registering a record also registers, right after it, the records and
 *       enums its components use (through generics and arrays, and the permitted
 *       subclasses of a sealed component type), depth-first in component order; so
 *       the ids depend only on the list given, never on the order values are met.</li>
 * </ol>
 * Records are written with Kryo's {@code RecordSerializer} (through their canonical
 * constructor), enums with its {@code EnumSerializer} (by ordinal), other classes
 * with Kryo's default for them (fields).
 *
 * <p>{@link #lines()} is the list as text ({@code "100 com.acme.Order RecordSerializer"}),
 * {@link #fingerprint()} its hash: nodes compare them when they start
 * ({@link #checkSameAs}) and refuse to run with a list another node does not share.
 *
 * <p><b>Note:</b> immutable and thread-safe once built; the Kryo instances behind
 * its codecs are pooled (one per call) and never shared by two calls at once.
 */
public final class CodecRegistry {
    /** Id of the first immutable-collection registration. */
    static final int FIRST_COLLECTION_ID = 40;
    private static final int MAX_BUFFER = 64 << 20;
    private static final CodecRegistry JDK_ONLY = builder().build();

    private final Map<Class<?>, Integer> user;
    private final List<String> lines;
    private final String fingerprint;
    final Pool<Kryo> kryos;
    final Pool<Output> outputs;

    private CodecRegistry(Map<Class<?>, Integer> user) {
        this.user = Collections.unmodifiableMap(new LinkedHashMap<>(user));
        Kryo probe = newKryo();
        List<String> l = new ArrayList<>();
        for (int id = 10; id < KryoCodec.FIRST_USER_ID; id++) {
            Registration r = probe.getRegistration(id);
            if (r != null) { // 0-9 are Kryo's own, the same in every Kryo 5
                l.add(id + " " + r.getType().getName() + " " + label(r.getSerializer()));
            }
        }
        this.user.forEach((c, id) -> l.add(id + " " + c.getName() + " " + label(probe.getRegistration(c).getSerializer())));
        this.lines = List.copyOf(l);
        this.fingerprint = hash(lines);
        int pool = Math.max(4, Runtime.getRuntime().availableProcessors() * 2);
        this.kryos = new Pool<>(true, false, pool) {
            @Override
            protected Kryo create() {
                return newKryo();
            }
        };
        this.outputs = new Pool<>(true, false, pool) {
            @Override
            protected Output create() {
                return new Output(256, MAX_BUFFER);
            }
        };
    }

    /** A builder of a registry; built-ins are always there, before the classes registered on it. */
    public static Builder builder() {
        return new Builder();
    }

    /** The registry with the built-in registrations only. */
    public static CodecRegistry jdkOnly() {
        return JDK_ONLY;
    }

    private static String label(Serializer<?> s) {
        return s instanceof JdkCollectionSerializer j ? j.kind().label() : s.getClass().getSimpleName();
    }

    private static String hash(List<String> lines) {
        try {
            byte[] digest = MessageDigest.getInstance("SHA-256")
                    .digest(String.join("\n", lines).getBytes(StandardCharsets.UTF_8));
            return HexFormat.of().formatHex(digest, 0, 8);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is missing from this JVM", e);
        }
    }

    private Kryo newKryo() {
        Kryo kryo = new StrictKryo();
        kryo.setRegistrationRequired(true);
        kryo.setReferences(false);
        int next = 10;
        for (Class<?> c : KryoCodec.JDK_TYPES) {
            if (c == UUID.class) {
                kryo.register(c, new DefaultSerializers.UUIDSerializer(), next++);
            } else {
                kryo.register(c, next++);
            }
        }
        int id = FIRST_COLLECTION_ID;
        for (Map.Entry<Class<?>, JdkCollectionSerializer.Kind> p : JdkCollectionSerializer.probes()) {
            // a class two probes share (possible in another JDK) keeps the first id; the line list tells
            if (kryo.getClassResolver().getRegistration(p.getKey()) == null) {
                kryo.register(p.getKey(), new JdkCollectionSerializer(p.getValue()), id);
            }
            id++;
        }
        user.forEach(kryo::register);
        return kryo;
    }

    /**
     * A Kryo whose refusal of an unregistered class carries the class, so that the
     * codec's error can name it and the line to add.
     */
    private static final class StrictKryo extends Kryo {
        @Override
        public Registration getRegistration(Class type) {
            try {
                return super.getRegistration(type);
            } catch (IllegalArgumentException e) {
                if (type != null && getClassResolver().getRegistration(type) == null) {
                    throw new Unregistered(type);
                }
                throw e;
            }
        }
    }

    /** Raised inside Kryo; {@link KryoCodec} turns it into an {@link UnregisteredClassException}. */
    static final class Unregistered extends IllegalArgumentException {
        private static final long serialVersionUID = 1L;
        final transient Class<?> type;

        Unregistered(Class<?> type) {
            super("Class is not registered: " + type.getName());
            this.type = type;
        }
    }

    /**
     * The codec of {@code type} over this registry: a fixed codec for {@code Long},
     * {@code Integer}, {@code Double}, {@code String} and {@code byte[]} (as
     * {@link Codecs#of}), otherwise a {@link KryoCodec}.
     *
     * @throws UnregisteredClassException when {@code type} is a concrete class this registry lacks
     */
    @SuppressWarnings("unchecked")
    public <T> Codec<T> codec(Class<T> type) {
        Objects.requireNonNull(type, "type");
        if (type == Long.class) {
            return (Codec<T>) Codecs.longs();
        } else if (type == Integer.class) {
            return (Codec<T>) Codecs.ints();
        } else if (type == Double.class) {
            return (Codec<T>) Codecs.doubles();
        } else if (type == String.class) {
            return (Codec<T>) Codecs.strings();
        } else if (type == byte[].class) {
            return (Codec<T>) Codecs.bytes();
        }
        return kryo(type);
    }

    /** A {@link KryoCodec} of {@code type} over this registry (even for the types {@link #codec} maps to fixed codecs). */
    public <T> KryoCodec<T> kryo(Class<T> type) {
        KryoCodec<T> codec = new KryoCodec<>(type, this);
        if (KryoCodec.writesRootClass(type) || type.isPrimitive()) {
            return codec;
        }
        Kryo k = kryos.obtain();
        try {
            if (k.getClassResolver().getRegistration(type) == null) {
                throw new UnregisteredClassException(codec.id(), type, " (the codec's own type)");
            }
        } finally {
            kryos.free(k);
        }
        return codec;
    }

    /** The user's classes with their ids, in registration order (built-ins excluded). */
    public Map<Class<?>, Integer> registrations() {
        return user;
    }

    /** Whether any class beyond the built-ins is registered. */
    public boolean hasUserClasses() {
        return !user.isEmpty();
    }

    /**
     * Every registration from id 10 on as {@code "id class serializer"}: the built-ins in id
     * order, then the user's classes in registration order. What nodes compare.
     */
    public List<String> lines() {
        return lines;
    }

    /** A hash of {@link #lines()} (16 hex digits): equal on nodes whose lists are equal. */
    public String fingerprint() {
        return fingerprint;
    }

    /**
     * Refuses {@code theirs} (another node's {@link #lines()}) unless it equals this
     * registry's, naming the first difference.
     *
     * @param otherNode how to name the other side in the error, e.g. {@code "node 2"}
     * @throws RegistrationMismatchException at the first line that differs
     */
    public void checkSameAs(List<String> theirs, String otherNode) {
        int n = Math.max(lines.size(), theirs.size());
        for (int i = 0; i < n; i++) {
            String here = i < lines.size() ? lines.get(i) : "(none)";
            String there = i < theirs.size() ? theirs.get(i) : "(none)";
            if (!here.equals(there)) {
                throw new RegistrationMismatchException(fingerprint, otherNode, i, here, there);
            }
        }
    }

    @Override
    public String toString() {
        return "CodecRegistry{" + user.size() + " user classes, #" + fingerprint + "}";
    }

    /**
     * Collects registrations in order. Not thread-safe; {@link #build()} returns an
     * immutable registry (the builder may go on and build others).
     */
    public static final class Builder {
        private final LinkedHashMap<Class<?>, Integer> registrations = new LinkedHashMap<>();
        private int next = KryoCodec.FIRST_USER_ID;

        private Builder() {
        }

        private static boolean builtIn(Class<?> c) {
            return c.isPrimitive() || c == String.class || KryoCodec.JDK_TYPES.contains(c)
                    || JdkCollectionSerializer.probes().stream().anyMatch(p -> p.getKey() == c);
        }

        /** Registers each class with the next free id, each followed by the records and enums it uses. */
        public Builder register(Class<?>... classes) {
            for (Class<?> c : classes) {
                Objects.requireNonNull(c, "class");
                if (!builtIn(c) && !registrations.containsKey(c)) {
                    registrations.put(c, nextId());
                    nested(c);
                }
            }
            return this;
        }

        /**
         * Registers {@code c} with {@code id} (at least {@link KryoCodec#FIRST_USER_ID}),
         * then the records and enums it uses with the next free ids.
         */
        public Builder register(Class<?> c, int id) {
            Objects.requireNonNull(c, "class");
            if (id < KryoCodec.FIRST_USER_ID) {
                throw new DsmConfigException("codec id of " + c.getName(), id, KryoCodec.FIRST_USER_ID + " or more (ids"
                        + " below " + KryoCodec.FIRST_USER_ID + " are Kryo's and Membus' own)");
            }
            if (builtIn(c)) {
                return this;
            }
            Integer old = registrations.get(c);
            if (old != null && old != id) {
                throw new DsmConfigException("codec id of " + c.getName(), id, "its id " + old + " only: a class is"
                        + " registered once (a record's nested types are registered with it: register them explicitly"
                        + " before it to choose their ids)");
            }
            registrations.forEach((k, v) -> {
                if (v == id && k != c) {
                    throw new DsmConfigException("codec id of " + c.getName(), id, "an id no other class has (" + id
                            + " is taken by " + k.getName() + ": every class needs its own id)");
                }
            });
            if (old == null) {
                registrations.put(c, id);
                nested(c);
            }
            return this;
        }

        /**
         * Registers the classes named in {@code names} (binary names, e.g.
         * {@code com.acme.Order$Status}) as {@link #register(Class[])} does, loading them
         * with {@code loader}.
         *
         * @param key the config key the names come from, named in errors
         * @throws DsmConfigException when a name is no class on this node's class path
         */
        public Builder registerNames(List<String> names, ClassLoader loader, String key) {
            for (String name : names) {
                Class<?> c;
                try {
                    c = Class.forName(name.trim(), false, loader);
                } catch (ClassNotFoundException | LinkageError e) {
                    throw new DsmConfigException(key, name, "the binary name of a class on this node's class path"
                            + " (a nested class is Outer$Inner): " + e, e);
                }
                register(c);
            }
            return this;
        }

        private int nextId() {
            while (registrations.containsValue(next)) {
                next++;
            }
            return next++;
        }

        /** Registers, depth-first in component order, the records and enums {@code c} refers to. */
        private void nested(Class<?> c) {
            if (c.isRecord()) {
                for (RecordComponent rc : c.getRecordComponents()) {
                    visit(rc.getGenericType());
                }
            }
            if (c.isSealed()) {
                for (Class<?> p : c.getPermittedSubclasses()) {
                    visit(p);
                }
            }
        }

        private void visit(Type t) {
            if (t instanceof Class<?> k) {
                if (k.isArray()) {
                    Class<?> element = k;
                    while (element.isArray()) {
                        element = element.getComponentType();
                    }
                    if (userKind(element)) {
                        visit(element);
                        register(k);
                    }
                } else if (userKind(k) && !registrations.containsKey(k)) {
                    if (k.isRecord() || k.isEnum()) {
                        register(k);
                    } else { // a sealed interface or abstract class: never written itself, its subclasses are
                        nested(k);
                    }
                }
            } else if (t instanceof ParameterizedType p) {
                visit(p.getRawType());
                for (Type a : p.getActualTypeArguments()) {
                    visit(a);
                }
            } else if (t instanceof GenericArrayType g) {
                visit(g.getGenericComponentType());
            } else if (t instanceof WildcardType w) {
                for (Type b : w.getUpperBounds()) {
                    visit(b);
                }
                for (Type b : w.getLowerBounds()) {
                    visit(b);
                }
            }
        }

        /** A record, an enum, or a sealed type outside the JDK. */
        private static boolean userKind(Class<?> k) {
            return !UnregisteredClassException.isJdk(k.getName())
                    && (k.isRecord() || k.isEnum() || (k.isSealed() && (k.isInterface() || Modifier.isAbstract(k.getModifiers()))));
        }

        public CodecRegistry build() {
            return new CodecRegistry(registrations);
        }
    }
}
