package io.membus.collections;

import io.membus.alloc.HeapLayout;
import io.membus.core.OperationDeadline;
import io.membus.core.RemoteMemory;
import io.membus.core.RemotePtr;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.ErrorCode;

import java.util.Arrays;
import java.util.concurrent.atomic.LongAdder;

import static io.membus.collections.MapLayout.*;

/**
 * Finding a key in one table of a {@link DsmMap}, and the time bound every read of an
 * entry obeys: reads a key's window of slot words (with their inline areas when the
 * table has them), decides each candidate from its inline copy or from its entry block,
 * and says where the key is, or where it could go ({@link Scan}). Reads only; whoever
 * acts on a scan ({@link MapStore}, {@link MapMutation}, {@link MapMigration}) changes
 * slots through {@link MapTables#install}.
 *
 * <p><b>Time bound.</b> An operation notes when it started; an entry read that ends more
 * than half the grace period after that start is thrown away ({@link Restart}) and the
 * operation starts over. Retired entries are freed a whole grace after the CAS that
 * retired them ({@link Reclaimer}), so a read that is kept never ran into a free: a kept
 * entry's bytes are the ones its slot word was installed with.
 *
 * <p><b>Note:</b> thread-safe and stateless but for its counters; any number of threads
 * scan at once. Memory ordering: a window's inline areas are read after its slot words
 * ({@link RemoteMemory#readInOrder}), which the argument of {@link #scanInline} needs.
 */
final class SlotScan {
    static final int MAX_RESTARTS = 10_000;
    /**
     * Slots of a window a lookup over the network reads first (their words and inline
     * areas: 8 * (8 + inline) bytes, 2,240 with the default 272-byte areas, where the whole
     * window of 32 is 8,960). Linear probing keeps a key near its home slot: at a load of 0.75 a
     * lookup probes 2.5 slots on average and rarely more than 8, so the rest of the window
     * is read (a second round trip) only for the few keys past them.
     */
    static final int FIRST_READ_SLOTS = 8;

    /** Thrown (without a stack) to start an operation over: a read outlived the time bound or met a reused block. */
    static final class Restart extends RuntimeException {
        private static final long serialVersionUID = 1L;
        static final Restart INSTANCE = new Restart();

        private Restart() {
            super("restart", null, false, false);
        }
    }

    enum Kind { FOUND, EMPTY, MOVED_EMPTY, FULL }

    /** Where a scan ended: the key's slot (FOUND), the first empty one, a frozen empty one, or none (FULL). */
    record Scan(Kind kind, int index, long word, Entry entry) {
    }

    /**
     * An entry read from its block and checked, or from its slot's inline copy; {@code header}:
     * its block's header when read from the block (checked against the entry's copy), 0 from
     * an inline copy (which does not hold it).
     */
    record Entry(long ptr, long hash, byte[] bytes, int keyOffset, int keyLength, int valueLength, long header) {
        boolean keyEquals(byte[] key) {
            return keyLength == key.length
                    && Arrays.equals(bytes, keyOffset, keyOffset + keyLength, key, 0, key.length);
        }

        byte[] key() {
            return Arrays.copyOfRange(bytes, keyOffset, keyOffset + keyLength);
        }

        byte[] value() {
            return Arrays.copyOfRange(bytes, keyOffset + keyLength, keyOffset + keyLength + valueLength);
        }
    }

    private final RemoteMemory mem;
    private final MapTables tables;
    private final long graceNanos;
    private final int window;
    /** The map's root block, named by the errors. */
    private final long rootBlock;
    private final LongAdder inlineHits = new LongAdder();
    private final LongAdder restartCount = new LongAdder();

    SlotScan(RemoteMemory mem, MapTables tables, long graceNanos, int window, long rootBlock) {
        this.mem = mem;
        this.tables = tables;
        this.graceNanos = graceNanos;
        this.window = window;
        this.rootBlock = rootBlock;
    }

    /**
     * Entries read for a slot whose fingerprint (8 bits of the hash) matched but whose key was
     * another's: a round trip a lookup pays when such a twin, with no inline copy to compare,
     * sits before its key in the window (where it lands depends on the table's random seed).
     * Counted for tests of round trips; never on the path of a lookup that meets no twin.
     */
    private final java.util.concurrent.atomic.LongAdder twinReads = new java.util.concurrent.atomic.LongAdder();

    /** See {@link #twinReads}. */
    long twinReads() {
        return twinReads.sum();
    }

    /** {@link Restart} when the operation that started at {@code start} has run half the grace. */
    void checkTime(long start) {
        if (System.nanoTime() - start >= graceNanos / 2) {
            throw Restart.INSTANCE;
        }
    }

    /** Reads and checks the entry {@code word} names; {@link Restart} when it is not (any more) that entry. */
    Entry readEntry(long word, long start) {
        long ptr = pointerOf(word);
        int cls = classOf(word);
        int len = blockBytes(cls);
        byte[] b = mem.read(ptr, len);
        long header = unsealHeader(getLong(b, 0), ptr);
        int p = HeapLayout.BLOCK_HEADER_LENGTH;
        if (header != getLong(b, p + ENTRY_HEADER_COPY)) {
            throw Restart.INSTANCE; // freed (and maybe reused) since the slot word was read
        }
        int kl = getInt(b, p + ENTRY_KEY_LENGTH);
        int vl = getInt(b, p + ENTRY_VALUE_LENGTH);
        long total = (long) p + ENTRY_DATA + kl + vl;
        if (kl < 0 || vl < 0 || (cls != LARGE_CLASS && total > len)) {
            throw Restart.INSTANCE;
        }
        if (total > len) {
            byte[] all = Arrays.copyOf(b, (int) total);
            byte[] rest = mem.read(ptr + len, (int) (total - len));
            System.arraycopy(rest, 0, all, len, rest.length);
            b = all;
        }
        long hash = getLong(b, p + ENTRY_HASH);
        if (check(header, hash, b, p + ENTRY_DATA, kl + vl) != getLong(b, p + ENTRY_CHECK)) {
            throw Restart.INSTANCE; // torn by a reuse racing this read
        }
        checkTime(start);
        return new Entry(ptr, hash, b, p + ENTRY_DATA, kl, vl, header);
    }

    /**
     * A write a scan carries to the node of the window it reads (a new entry block of a put
     * from a node without a heap, placed there): sent with the window's first read, one
     * round trip for both ({@link RemoteMemory#writeThenReadInOrder}). {@link #written} is
     * set once the write completed: a failure before that may leave it unknown whether the
     * block was written.
     *
     * <p><b>Note:</b> not thread-safe: one operation's, on its thread.
     */
    static final class Carry {
        final long ptr;
        final byte[] bytes;
        boolean written;

        Carry(long ptr, byte[] bytes) {
            this.ptr = ptr;
            this.bytes = bytes;
        }
    }

    /** Looks for {@code key} in the window of its home slot in {@code t}. */
    Scan scan(MapTable t, byte[] key, long hash, long start) {
        return scan(t, key, hash, start, null);
    }

    /**
     * {@link #scan(MapTable, byte[], long, long)} that first writes {@code carry} (null: none):
     * with the window's first read on a network path, else before the window is read.
     */
    Scan scan(MapTable t, byte[] key, long hash, long start, Carry carry) {
        int home = home(hash, t.seed, t.log2);
        if (t.inline > 0) {
            return scanInline(t, key, hash, start, home, carry);
        }
        if (carry != null) {
            mem.write(carry.ptr, carry.bytes);
            carry.written = true;
        }
        long[] w = tables.readWords(t.slot(home), window);
        int fp = fingerprint(hash);
        for (int i = 0; i < window; i++) {
            long word = w[i];
            Scan end = endsAt(word, home + i);
            if (end != null) {
                return end;
            }
            if (fingerprintOf(word) != fp) {
                continue;
            }
            Entry e = readEntry(word, start);
            if (e.hash == hash && e.keyEquals(key)) {
                return new Scan(Kind.FOUND, home + i, word, e);
            }
            twinReads.increment();
        }
        return new Scan(Kind.FULL, -1, 0, null);
    }

    /**
     * Where a scan ends at slot {@code slot} holding {@code word} before any entry is read: at
     * an empty slot (the key is absent; it could go there) or a frozen empty one (the table is
     * migrating); null when the slot holds an entry, which the caller then compares.
     */
    private static Scan endsAt(long word, int slot) {
        if (word == 0) {
            return new Scan(Kind.EMPTY, slot, 0, null);
        }
        if (isMovedEmpty(word)) {
            return new Scan(Kind.MOVED_EMPTY, slot, word, null);
        }
        return null;
    }

    /**
     * {@link #scan} of a table with inline areas: the window's slot words, then their inline
     * areas (a second read issued with the first on the same connection, so it runs after
     * it: one round trip; on a memory path, where there is no round trip to save, only a
     * candidate's own area, read after the words). A candidate slot whose inline area checks against the word read
     * before it is decided from that copy; only a candidate without a valid copy (a large
     * entry, a copy being rewritten) costs the read of its entry.
     *
     * <p>Why a copy that checks is the entry the word names (docs/collections.md has the
     * whole argument): the check binds the copy to the word's identity (fingerprint, size
     * class, entry pointer); whoever installs an identity in a slot wrote the slot's inline
     * area first (a copy, or a check word of 0), and a block is reused only after a grace
     * period once no slot names it. So the area, read after the word, holds either the copy
     * the word's installer wrote, or a later write — a copy for another identity, which
     * fails the check, or (after the word was replaced, the block freed a grace later and
     * reused under the same identity) a copy of the reused block, which cannot happen
     * within the half grace the read is bounded by ({@link #checkTime} below).
     */
    private Scan scanInline(MapTable t, byte[] key, long hash, long start, int home, Carry carry) {
        // on a network path the window is read in two parts: its first FIRST_READ_SLOTS slots, where a key almost
        // always is (or an empty slot that says it is absent), and the rest only when neither was there
        // on a memory path (this node's memory, shm) there is no round trip to save: read the words, then
        // only a candidate's own area (after the words, as the argument needs), not all 32 areas
        boolean direct = mem.runsDirect(t.slot(home));
        byte[] words;
        byte[] areas = null;
        int first = 0; // the window's slot that words[0] (and areas[0]) holds
        int loaded; // slots read so far
        if (direct) {
            if (carry != null) {
                mem.write(carry.ptr, carry.bytes);
                carry.written = true;
            }
            words = mem.read(t.slot(home), 8 * window);
            loaded = window;
        } else {
            loaded = Math.min(window, FIRST_READ_SLOTS);
            byte[][] read = readWindow(t, home, loaded, carry);
            words = read[0];
            areas = read[1];
        }
        checkTime(start);
        int fp = fingerprint(hash);
        for (int i = 0; i < window; i++) {
            if (i == loaded) { // neither the key nor an empty slot in the part read: read the rest of the window
                first = loaded;
                loaded = window;
                byte[][] read = readWindow(t, home + first, window - first, null);
                words = read[0];
                areas = read[1];
                checkTime(start);
            }
            long word = getLong(words, 8 * (i - first));
            Scan end = endsAt(word, home + i);
            if (end != null) {
                return end;
            }
            if (fingerprintOf(word) != fp) {
                continue;
            }
            Entry e;
            if (areas != null) {
                e = inlineEntry(word, areas, (i - first) * t.inline, t.inline, hash);
            } else {
                byte[] area = mem.read(t.inlineArea(home + i), t.inline);
                checkTime(start);
                e = inlineEntry(word, area, 0, t.inline, hash);
            }
            if (e != null) {
                inlineHits.increment();
                if (e.keyEquals(key)) {
                    return new Scan(Kind.FOUND, home + i, word, e);
                }
                continue;
            }
            e = readEntry(word, start);
            if (e.hash == hash && e.keyEquals(key)) {
                return new Scan(Kind.FOUND, home + i, word, e);
            }
            twinReads.increment();
        }
        return new Scan(Kind.FULL, -1, 0, null);
    }

    /**
     * Slots {@code [from, from + slots)} of {@code t}: their words, and then their inline areas.
     * The areas are read after the words ({@link RemoteMemory#readInOrder}: one round trip
     * on a network path, a tcp lane call or two reads posted in issue order on one
     * connection; one read after the other on a memory path), which {@link #scanInline}'s
     * argument needs: one read of both would copy its bytes in no promised order. A
     * {@code carry} (null: none) is written before them, in the same round trip.
     */
    private byte[][] readWindow(MapTable t, int from, int slots, Carry carry) {
        byte[] words = new byte[8 * slots];
        byte[] areas = new byte[t.inline * slots];
        if (carry != null) {
            mem.writeThenReadInOrder(carry.ptr, carry.bytes, t.slot(from), words, t.inlineArea(from), areas);
            carry.written = true;
        } else {
            mem.readInOrder(t.slot(from), words, t.inlineArea(from), areas);
        }
        return new byte[][] {words, areas};
    }

    /**
     * The entry in the inline area at {@code areas[at..]} when it is a copy of the entry
     * {@code word} names (its check matches the word's identity), else null. Its hash is
     * {@code hash}, the caller's key's: meaningful only if its key is the caller's.
     */
    private static Entry inlineEntry(long word, byte[] areas, int at, int inline, long hash) {
        int kl = areas[at + INLINE_KEY_LENGTH] & 0xff;
        int vl = areas[at + INLINE_VALUE_LENGTH] & 0xff;
        if (INLINE_PREFIX + kl + vl > inline) {
            return null;
        }
        if (inlineCheck(identity(word), areas, at + INLINE_DATA, kl, vl) != getLong(areas, at + INLINE_CHECK)) {
            return null;
        }
        return new Entry(pointerOf(word), hash, areas, at + INLINE_DATA, kl, vl, 0);
    }

    /** Candidates decided from their inline copy (no entry read) by this handle so far. */
    long inlineHits() {
        return inlineHits.sum();
    }

    /** Operations this handle started over (a read outlived half the grace or met a reused entry). */
    long restarts() {
        return restartCount.sum();
    }

    /**
     * Counts a restart of an operation that had restarted {@code restarts} times before and
     * returns the new count: a {@link DsmMapException} past {@link #MAX_RESTARTS}, a
     * {@link DsmTimeoutException} (nothing changed) once the operation's deadline passed.
     */
    int restarted(int restarts) {
        restartCount.increment();
        if (restarts + 1 > MAX_RESTARTS) {
            throw new DsmMapException(ErrorCode.TIMEOUT, "restarts", "map operation kept restarting: restarts="
                    + MAX_RESTARTS + ", graceMillis=" + graceNanos / 1_000_000 + ", root=" + RemotePtr.toString(rootBlock)
                    + "; every attempt outlived half the grace period or met a reused entry: give the map a longer grace"
                    + " (DsmMapOptions.grace) or unload the nodes");
        }
        restarts++;
        if (OperationDeadline.expired()) {
            // a restarted attempt changed nothing
            throw DsmTimeoutException.notSent("map operation on root " + RemotePtr.toString(rootBlock)
                    + " (restarted " + restarts + " times)", RemotePtr.nodeId(rootBlock), mem.operationTimeout());
        }
        return restarts;
    }
}
