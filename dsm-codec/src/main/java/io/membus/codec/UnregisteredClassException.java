package io.membus.codec;

/**
 * A value holds (or bytes name) a class that is not in the codec's registration
 * list. The message names the class and the exact line to add: its name in
 * {@code membus.codec.classes}, or the {@code register(...)} call of a
 * {@link CodecRegistry.Builder}, the same on every node.
 *
 * <p><b>Note:</b> immutable once thrown; thread-safe.
 */
public final class UnregisteredClassException extends CodecException {
    private static final long serialVersionUID = 1L;

    private final String className;

    UnregisteredClassException(String codecId, Class<?> type, String where) {
        super(codecId, "class=" + type.getName() + " is not registered" + where + "; " + advice(type));
        this.className = type.getName();
    }

    /** The fully qualified (binary) name of the class that is not registered. */
    public String className() {
        return className;
    }

    static String advice(Class<?> type) {
        String name = type.getName();
        if (isJdk(name) && !java.lang.reflect.Modifier.isPublic(type.getModifiers())) {
            return "it is a JDK-internal class Membus has no serializer for (docs/codecs.md lists the JDK collections"
                    + " that work): copy it into one that works, e.g. new ArrayList<>(c), List.copyOf(c), new TreeMap<>(m)";
        }
        String code = (type.getCanonicalName() != null ? type.getCanonicalName() : name) + ".class";
        return "add \"" + name + "\" to membus.codec.classes in every node's config, or register(" + code
                + ") on the CodecRegistry.Builder every node builds, at the same place of the list on every node"
                + " (docs/codecs.md)";
    }

    static boolean isJdk(String name) {
        return name.startsWith("java.") || name.startsWith("javax.") || name.startsWith("jdk.")
                || name.startsWith("sun.") || name.startsWith("com.sun.");
    }
}
