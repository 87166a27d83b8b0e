package io.membus.core.metrics;

/**
 * A per-operation record of the slow-path events one calling thread met, for classifying
 * a benchmark's slow operations (issue 28's put tail, docs/collections.md): the library's
 * slow paths {@link #mark} a bit, a harness {@link #begin}s an operation, runs it, and
 * reads the bits with {@link #end}, then histograms the operation's latency per set of
 * bits. A diagnostic, not an API: nothing in the library reads the record.
 *
 * <p>Off unless the JVM starts with {@code -Dmembus.op-events=true}: the switch is a
 * {@code static final} read once, so when off every {@link #mark} is a constant-false
 * branch the JIT removes (no thread-local is touched). When on, each mark is one
 * thread-local lookup and an {@code or}.
 *
 * <p><b>Note:</b> thread-safe by confinement: each thread has its own record, written
 * and read only by that thread (no ordering with other threads is needed or given).
 * The events are marked on the thread that met them: a wait the library makes on
 * another thread's behalf is marked there, not on the caller.
 */
public final class OpEvents {
    /** Whether recording is on ({@code -Dmembus.op-events=true}). */
    public static final boolean ON = Boolean.getBoolean("membus.op-events");

    /** The allocator refilled a size class's cache on this thread (its verbs were on the operation's path). */
    public static final int ALLOC_REFILL = 1;
    /** The allocator found the cache empty while another thread refilled it, and waited. */
    public static final int ALLOC_WAIT = 1 << 1;
    /** The refill scanned the chunk table (and may have claimed a chunk). */
    public static final int ALLOC_SCAN = 1 << 2;
    /**
     * A blocking verb went the pipelined path: every lane was busy and no more may open, or
     * (with {@link #LANE_OPEN} then) a lane's open failed, after which none opens for a second.
     */
    public static final int LANE_FALLBACK = 1 << 3;
    /** A blocking lane was opened, or its open tried and failed, on the operation's path (a handshake). */
    public static final int LANE_OPEN = 1 << 4;
    /** A map change lost its install CAS and looked again. */
    public static final int CAS_RETRY = 1 << 5;
    /** A map change moved to the next table or started over (migration, a full table, a scan restart). */
    public static final int TABLE_AGAIN = 1 << 6;
    /** A garbage collection ran during the operation (marked by the harness, which counts collections). */
    public static final int GC = 1 << 7;
    /** Names of the bits, lowest first. */
    private static final String[] NAMES = {"refill", "refill-wait", "scan", "lane-fallback", "lane-open",
            "cas-retry", "table-again", "gc"};

    private static final ThreadLocal<int[]> RECORD = ON ? ThreadLocal.withInitial(() -> new int[2]) : null;

    private OpEvents() {
    }

    /** Marks {@code event} (one of the bits above) on this thread's current operation. */
    public static void mark(int event) {
        if (ON) {
            RECORD.get()[0] |= event;
        }
    }

    /** Counts one blocking-lane verb (a round trip) of this thread's current operation. */
    public static void laneVerb() {
        if (ON) {
            RECORD.get()[1]++;
        }
    }

    /** Starts an operation on this thread: clears its record. */
    public static void begin() {
        if (ON) {
            int[] r = RECORD.get();
            r[0] = 0;
            r[1] = 0;
        }
    }

    /** The events marked on this thread since {@link #begin}: the bits in the low 16 bits, the lane verbs above. */
    public static int end() {
        if (!ON) {
            return 0;
        }
        int[] r = RECORD.get();
        return (r[0] & 0xffff) | (Math.min(r[1], 0x7fff) << 16);
    }

    /** The bits of an {@link #end} value joined by {@code +}, or {@code "none"}. */
    public static String describe(int bits) {
        StringBuilder s = new StringBuilder();
        for (int i = 0; i < NAMES.length; i++) {
            if ((bits & (1 << i)) != 0) {
                s.append(s.length() == 0 ? "" : "+").append(NAMES[i]);
            }
        }
        return s.length() == 0 ? "none" : s.toString();
    }
}
