package io.membus.codec;

/**
 * Turns values of one type into the bytes stored in remote memory and back.
 *
 * <p>A codec has a stable {@link #id()}: the coherence layer and the collections
 * record it beside what they store (a collection's root keeps the ids of its key
 * and value codecs), so a node that opens a structure with another codec is
 * refused with a typed error instead of decoding garbage. Two codecs with equal
 * ids must produce and accept the same bytes on every node and in every JVM.
 *
 * <p>Decoding never trusts its input: bytes that do not decode (truncated,
 * corrupt, naming a class that is not registered) fail with
 * {@link CodecException}; a codec never instantiates a class it was not told
 * about.
 *
 * <p><b>Note:</b> implementations are thread-safe and stateless between calls
 * (pooled state, if any, is never shared by two calls at once); encoding and
 * decoding need no memory ordering beyond the caller's.
 *
 * @param <T> the type of the values
 */
public interface Codec<T> {

    /** A stable name of the codec and its format, e.g. {@code long}, {@code kryo:com.shop.Order#3f2a...}. */
    String id();

    /** The values' type. */
    Class<T> type();

    /**
     * The bytes of {@code value}.
     *
     * @throws NullPointerException when {@code value} is null (collections refuse null as
     *                              {@code ConcurrentHashMap} does)
     * @throws CodecException       when the value cannot be encoded (e.g. an unregistered class)
     */
    byte[] encode(T value);

    /**
     * The value in {@code src[offset, offset + length)}.
     *
     * @throws CodecException when the bytes are not a value of this codec
     */
    T decode(byte[] src, int offset, int length);

    default T decode(byte[] src) {
        return decode(src, 0, src.length);
    }

    /** The encoded size in bytes when every value has the same size, else -1. */
    default int fixedSize() {
        return -1;
    }
}
