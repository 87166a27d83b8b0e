package io.membus.core;

import sun.misc.Unsafe;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;

/**
 * Copies between shared memory (a segment, at a native address) and private memory
 * (an array or the caller's native memory) so that <b>every 8-byte aligned word of the
 * shared side that the range covers whole is read with one 8-byte load, or written with
 * one 8-byte store</b>. A concurrent copy or atomic of such a word on another thread or
 * process therefore sees it whole, before or after, never half of one value and half of
 * another. The bytes of a range before its first aligned word and after its last are
 * copied one at a time: a partly covered word has no such promise.
 *
 * <p>Why not a library copy: Chronicle's array-to-native copy moves 16, then 4, then 1
 * byte at a time, so an 8-byte write landed as two 4-byte stores, and a reader in
 * between saw a value nobody wrote (issue 24). {@code Unsafe.copyMemory} promises long
 * units only when both sides and the length are 8-byte aligned, which an array offset
 * or a caller's address need not be. Here only the shared side's alignment matters: the
 * private side is read or written at any alignment through a byte-array view or a plain
 * native access.
 *
 * <p>Ordering: loads of the shared side are volatile loads, stores are ordered (release)
 * stores, each a single 8-byte access; callers add the fences a whole copy needs
 * ({@link Segment} starts a read with an acquire fence and ends a write with a full one).
 *
 * <p><b>Note:</b> stateless; thread-safe. Addresses are trusted: callers check bounds.
 */
public final class WordCopy {
    private static final Unsafe U = net.openhft.chronicle.core.UnsafeMemory.UNSAFE;
    private static final VarHandle LONGS = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.nativeOrder());

    private WordCopy() {
    }

    /** Bytes from {@code address} to the first 8-byte aligned address, at most {@code length}. */
    private static int head(long address, long length) {
        return (int) Math.min((-address) & 7, length);
    }

    /** Copies {@code length} bytes of shared memory at {@code src} into {@code dst[dstOffset..]}. */
    public static void toArray(long src, byte[] dst, int dstOffset, int length) {
        int i = 0;
        for (int head = head(src, length); i < head; i++) {
            dst[dstOffset + i] = U.getByte(src + i);
        }
        for (; i <= length - Long.BYTES; i += Long.BYTES) {
            LONGS.set(dst, dstOffset + i, U.getLongVolatile(null, src + i));
        }
        for (; i < length; i++) {
            dst[dstOffset + i] = U.getByte(src + i);
        }
    }

    /** Copies {@code src[srcOffset..srcOffset+length)} into shared memory at {@code dst}. */
    public static void fromArray(byte[] src, int srcOffset, long dst, int length) {
        int i = 0;
        for (int head = head(dst, length); i < head; i++) {
            U.putByte(dst + i, src[srcOffset + i]);
        }
        for (; i <= length - Long.BYTES; i += Long.BYTES) {
            U.putOrderedLong(null, dst + i, (long) LONGS.get(src, srcOffset + i));
        }
        for (; i < length; i++) {
            U.putByte(dst + i, src[srcOffset + i]);
        }
    }

    /** Copies {@code length} bytes of shared memory at {@code src} to private native memory at {@code dst}. */
    public static void toAddress(long src, long dst, long length) {
        long i = 0;
        for (int head = head(src, length); i < head; i++) {
            U.putByte(dst + i, U.getByte(src + i));
        }
        for (; i <= length - Long.BYTES; i += Long.BYTES) {
            U.putLong(dst + i, U.getLongVolatile(null, src + i));
        }
        for (; i < length; i++) {
            U.putByte(dst + i, U.getByte(src + i));
        }
    }

    /** Copies {@code length} bytes of private native memory at {@code src} into shared memory at {@code dst}. */
    public static void fromAddress(long src, long dst, long length) {
        long i = 0;
        for (int head = head(dst, length); i < head; i++) {
            U.putByte(dst + i, U.getByte(src + i));
        }
        for (; i <= length - Long.BYTES; i += Long.BYTES) {
            U.putOrderedLong(null, dst + i, U.getLong(src + i));
        }
        for (; i < length; i++) {
            U.putByte(dst + i, U.getByte(src + i));
        }
    }
}
