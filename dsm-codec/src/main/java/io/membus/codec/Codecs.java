package io.membus.codec;

/**
 * The built-in codecs. Fixed-width codecs for {@code long}, {@code int} and
 * {@code double} (little-endian, 8/4/8 bytes), raw {@code byte[]}, UTF-8 strings;
 * everything else through {@link KryoCodec} with registration required
 * ({@link CodecRegistry}).
 *
 * <p><b>Note:</b> every codec returned is thread-safe and may be shared.
 */
public final class Codecs {
    private Codecs() {
    }

    public static Codec<Long> longs() {
        return FixedCodecs.LONG;
    }

    public static Codec<Integer> ints() {
        return FixedCodecs.INT;
    }

    public static Codec<Double> doubles() {
        return FixedCodecs.DOUBLE;
    }

    public static Codec<byte[]> bytes() {
        return FixedCodecs.BYTES;
    }

    public static Codec<String> strings() {
        return FixedCodecs.STRING;
    }

    /**
     * The codec for {@code type}: a fixed codec for {@code Long}, {@code Integer},
     * {@code Double}, {@code String} and {@code byte[]}; otherwise a
     * {@link KryoCodec} registering {@code type} and then {@code others}, in order, each
     * followed by the records and enums it uses (see {@link CodecRegistry}). A node's
     * shared list is {@code Membus.codecs()}; docs/codecs.md.
     */
    @SuppressWarnings("unchecked")
    public static <T> Codec<T> of(Class<T> type, Class<?>... others) {
        if (others.length == 0) {
            if (type == Long.class) {
                return (Codec<T>) longs();
            } else if (type == Integer.class) {
                return (Codec<T>) ints();
            } else if (type == Double.class) {
                return (Codec<T>) doubles();
            } else if (type == String.class) {
                return (Codec<T>) strings();
            } else if (type == byte[].class) {
                return (Codec<T>) bytes();
            }
        }
        return KryoCodec.of(type, others);
    }
}
