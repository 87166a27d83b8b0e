package io.membus.core;

/**
 * Little-endian encoding of words in byte arrays: the byte order of every word in
 * Membus memory and on the wire.
 *
 * <p><b>Note:</b> stateless; thread-safe.
 */
public final class Words {
    private Words() {
    }

    public static long getLong(byte[] b, int at) {
        return (b[at] & 0xffL) | (b[at + 1] & 0xffL) << 8 | (b[at + 2] & 0xffL) << 16 | (b[at + 3] & 0xffL) << 24
                | (b[at + 4] & 0xffL) << 32 | (b[at + 5] & 0xffL) << 40 | (b[at + 6] & 0xffL) << 48
                | (b[at + 7] & 0xffL) << 56;
    }

    public static void putLong(byte[] b, int at, long v) {
        for (int i = 0; i < 8; i++) {
            b[at + i] = (byte) (v >>> (8 * i));
        }
    }

    public static int getInt(byte[] b, int at) {
        return (b[at] & 0xff) | (b[at + 1] & 0xff) << 8 | (b[at + 2] & 0xff) << 16 | (b[at + 3] & 0xff) << 24;
    }

    public static void putInt(byte[] b, int at, int v) {
        for (int i = 0; i < 4; i++) {
            b[at + i] = (byte) (v >>> (8 * i));
        }
    }
}
