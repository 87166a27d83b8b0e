package io.membus.alloc;

/**
 * The size classes of small blocks: block sizes (header included) of 16 to 128
 * bytes in steps of 16, then four classes per doubling (160, 192, 224, 256, 320,
 * ...), up to 1 MiB. At most 12.5% of a block above 128 bytes is lost to rounding.
 * Objects whose block would be larger than a quarter of a chunk are large objects
 * and take whole chunks.
 *
 * <p><b>Note:</b> constants and pure functions; thread-safe, no shared state, so no
 * memory ordering applies. The words it describes are ordered by the verbs on them.
 */
public final class SizeClasses {
    private static final int[] SIZES;

    static {
        int[] s = new int[128];
        int n = 0;
        for (int size = 16; size <= 128; size += 16) {
            s[n++] = size;
        }
        for (int base = 128; base < (1 << 20); base <<= 1) {
            for (int q = 1; q <= 4; q++) {
                s[n++] = base + q * (base / 4);
            }
        }
        SIZES = java.util.Arrays.copyOf(s, n);
    }

    private SizeClasses() {
    }

    /** Number of classes. */
    public static int count() {
        return SIZES.length;
    }

    /** Block size (header included) of class {@code cls}. */
    public static int blockSize(int cls) {
        return SIZES[cls];
    }

    /** The smallest class whose blocks hold {@code blockBytes} (header included); -1 when none does. */
    public static int classFor(long blockBytes) {
        if (blockBytes <= 128) {
            return (int) Math.max(0, (blockBytes + 15) / 16 - 1);
        }
        int lo = 8;
        int hi = SIZES.length - 1;
        if (blockBytes > SIZES[hi]) {
            return -1;
        }
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            if (SIZES[mid] >= blockBytes) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        return lo;
    }
}
