package io.membus.codec;

import io.membus.core.Words;

import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Objects;

/** The codecs that skip Kryo: little-endian words, raw bytes, UTF-8 strings. Stateless. */
final class FixedCodecs {
    private FixedCodecs() {
    }

    static void checkLength(String id, int expected, byte[] src, int offset, int length) {
        Objects.checkFromIndexSize(offset, length, src.length);
        if (length != expected) {
            throw new CodecException(id, "length=" + length + ", expected=" + expected
                    + ": the bytes are not a value of this codec (another codec wrote them, or they are corrupt)");
        }
    }

    /** A codec whose values all take {@code size} bytes: the length check is here once. */
    private abstract static class Fixed<T> implements Codec<T> {
        private final String id;
        private final Class<T> type;
        private final int size;

        Fixed(String id, Class<T> type, int size) {
            this.id = id;
            this.type = type;
            this.size = size;
        }

        abstract T read(byte[] src, int offset);

        @Override
        public final String id() {
            return id;
        }

        @Override
        public final Class<T> type() {
            return type;
        }

        @Override
        public final T decode(byte[] src, int offset, int length) {
            checkLength(id, size, src, offset, length);
            return read(src, offset);
        }

        @Override
        public final int fixedSize() {
            return size;
        }
    }

    static final Codec<Long> LONG = new Fixed<>("long", Long.class, Long.BYTES) {
        @Override
        public byte[] encode(Long value) {
            byte[] b = new byte[Long.BYTES];
            Words.putLong(b, 0, value);
            return b;
        }

        @Override
        Long read(byte[] src, int offset) {
            return Words.getLong(src, offset);
        }
    };

    static final Codec<Integer> INT = new Fixed<>("int", Integer.class, Integer.BYTES) {
        @Override
        public byte[] encode(Integer value) {
            int v = value;
            return new byte[] {(byte) v, (byte) (v >>> 8), (byte) (v >>> 16), (byte) (v >>> 24)};
        }

        @Override
        Integer read(byte[] src, int offset) {
            return (src[offset] & 0xff) | (src[offset + 1] & 0xff) << 8
                    | (src[offset + 2] & 0xff) << 16 | (src[offset + 3] & 0xff) << 24;
        }
    };

    static final Codec<Double> DOUBLE = new Fixed<>("double", Double.class, Long.BYTES) {
        @Override
        public byte[] encode(Double value) {
            byte[] b = new byte[Long.BYTES];
            Words.putLong(b, 0, Double.doubleToRawLongBits(value));
            return b;
        }

        @Override
        Double read(byte[] src, int offset) {
            return Double.longBitsToDouble(Words.getLong(src, offset));
        }
    };

    static final Codec<byte[]> BYTES = new Codec<>() {
        @Override
        public String id() {
            return "bytes";
        }

        @Override
        public Class<byte[]> type() {
            return byte[].class;
        }

        @Override
        public byte[] encode(byte[] value) {
            return value.clone();
        }

        @Override
        public byte[] decode(byte[] src, int offset, int length) {
            Objects.checkFromIndexSize(offset, length, src.length);
            return Arrays.copyOfRange(src, offset, offset + length);
        }
    };

    static final Codec<String> STRING = new Codec<>() {
        @Override
        public String id() {
            return "utf8";
        }

        @Override
        public Class<String> type() {
            return String.class;
        }

        @Override
        public byte[] encode(String value) {
            return value.getBytes(StandardCharsets.UTF_8);
        }

        @Override
        public String decode(byte[] src, int offset, int length) {
            Objects.checkFromIndexSize(offset, length, src.length);
            try {
                return StandardCharsets.UTF_8.newDecoder()
                        .onMalformedInput(CodingErrorAction.REPORT)
                        .onUnmappableCharacter(CodingErrorAction.REPORT)
                        .decode(java.nio.ByteBuffer.wrap(src, offset, length)).toString();
            } catch (CharacterCodingException e) {
                throw new CodecException(id(), "length=" + length + ": the bytes are not UTF-8 ("
                        + e + "); another codec wrote them, or they are corrupt", e);
            }
        }
    };
}
