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

    static final Codec<Long> LONG = new Codec<>() {
        @Override
        public String id() {
            return "long";
        }

        @Override
        public Class<Long> type() {
            return Long.class;
        }

        @Override
        public byte[] encode(Long value) {
            byte[] b = new byte[Long.BYTES];
            Words.putLong(b, 0, value);
            return b;
        }

        @Override
        public Long decode(byte[] src, int offset, int length) {
            checkLength(id(), Long.BYTES, src, offset, length);
            return Words.getLong(src, offset);
        }

        @Override
        public int fixedSize() {
            return Long.BYTES;
        }
    };

    static final Codec<Integer> INT = new Codec<>() {
        @Override
        public String id() {
            return "int";
        }

        @Override
        public Class<Integer> type() {
            return Integer.class;
        }

        @Override
        public byte[] encode(Integer value) {
            int v = value;
            return new byte[] {(byte) v, (byte) (v >>> 8), (byte) (v >>> 16), (byte) (v >>> 24)};
        }

        @Override
        public Integer decode(byte[] src, int offset, int length) {
            checkLength(id(), Integer.BYTES, src, offset, length);
            return (src[offset] & 0xff) | (src[offset + 1] & 0xff) << 8
                    | (src[offset + 2] & 0xff) << 16 | (src[offset + 3] & 0xff) << 24;
        }

        @Override
        public int fixedSize() {
            return Integer.BYTES;
        }
    };

    static final Codec<Double> DOUBLE = new Codec<>() {
        @Override
        public String id() {
            return "double";
        }

        @Override
        public Class<Double> type() {
            return Double.class;
        }

        @Override
        public byte[] encode(Double value) {
            byte[] b = new byte[Long.BYTES];
            Words.putLong(b, 0, Double.doubleToRawLongBits(value));
            return b;
        }

        @Override
        public Double decode(byte[] src, int offset, int length) {
            checkLength(id(), Long.BYTES, src, offset, length);
            return Double.longBitsToDouble(Words.getLong(src, offset));
        }

        @Override
        public int fixedSize() {
            return Long.BYTES;
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
