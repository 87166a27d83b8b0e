package io.membus.cluster.names;

import io.membus.alloc.BlockRef;
import io.membus.alloc.GlobalAllocator;
import io.membus.alloc.HeapLayout;
import io.membus.cluster.InvalidNameException;
import io.membus.core.OperationDeadline;
import io.membus.core.RemoteMemory;
import io.membus.core.RemotePtr;
import io.membus.core.error.DsmException;
import io.membus.core.error.InvalidPointerException;
import io.membus.core.error.NameTableFullException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;
import java.util.function.Supplier;

/**
 * The cluster's name registry as data: an open-addressed table of 8-byte slots in one
 * segment of remote memory (the system segment, replicated like every other segment),
 * where a bind is one compare-and-swap (docs/replication.md §11).
 *
 * <p><b>Layout.</b> At the table pointer: a header word {@link #MAGIC}, the capacity (a
 * word), then from offset {@link #HEADER} {@code capacity} slots of 8 bytes, probed
 * linearly from a hash of the name's UTF-8 bytes. A slot is {@code 0} (empty), the
 * pointer of a <em>name record</em> (a block of the global allocator, see below), or
 * {@link #TOMBSTONE}; a slot only ever goes {@code 0 -> record -> TOMBSTONE}, never back.
 * A name record's payload is immutable once published: word 0 = {@code "NAME"} (high 32
 * bits) | the name's UTF-8 length, word 1 = the root pointer, words 2 and 3 = the
 * binder's tag under the cluster secret ({@link NameTags}), then the name's UTF-8 bytes.
 *
 * <p><b>bind</b> probes from the home slot: a live record of the same name (tag right) is
 * returned (someone bound first); a record of another name, a record whose tag is wrong
 * (ignored, as bindings with a wrong tag always were), or a tombstone moves on; an empty
 * slot is swapped {@code 0 -> record} with the record written completely before the swap
 * is issued (publish after write). A lost swap re-examines the value it met in that slot.
 * Binders of one name follow one probe sequence and race for its first empty slot, and
 * slots never become empty again, so at most one live record of a name exists: the first
 * binder wins, decided by one linearizable CAS. <b>unbind</b> swaps {@code record ->
 * TOMBSTONE} (only the swap's winner frees the record); <b>lookup</b> probes to the
 * name's record or an empty slot. A record read through a slot counts only when the slot
 * still holds it afterwards (records are freed only after their slot is tombstoned, and
 * the slot never holds that pointer again), so a freed and reused block is never taken
 * for a binding.
 *
 * <p>What is not reclaimed: tombstones (the table fills with binds, not with live
 * bindings; {@link NameTableFullException} then), and a record whose publishing swap
 * timed out with an unknown outcome (it may be bound, so it is not freed).
 *
 * <p><b>Note:</b> thread-safe and lock-free: instances are immutable (final fields) and
 * every shared state is in remote memory, ordered by the verbs themselves: a record's
 * write completes before the CAS that publishes it is issued, and a reader reads the
 * slot before the record (and the slot again after it). Every call runs under one
 * {@link OperationDeadline} of the operation timeout (or the caller's earlier one) and
 * fails with a typed {@link DsmException} by it.
 */
public final class NameTable {
    private static final Logger LOG = LoggerFactory.getLogger(NameTable.class);

    /** The header word at the table pointer: "MBNAMES1". */
    public static final long MAGIC = 0x4d424e414d455331L;
    /** Bytes before slot 0. */
    public static final int HEADER = 64;
    /** A slot whose binding was removed; never a pointer (node 0 names no node, and it is not aligned). */
    public static final long TOMBSTONE = 1L;
    /** The longest name, in characters (as the registry has always allowed). */
    public static final int MAX_NAME = 1024;
    /** The default capacity, {@code membus.names.capacity}. */
    public static final int DEFAULT_CAPACITY = 65_536;
    static final int RECORD_MAGIC = 0x4e414d45; // "NAME"
    static final int RECORD_HEADER = 32;
    private static final int SCAN_SLOTS = 8192;

    private final RemoteMemory memory;
    private final Supplier<GlobalAllocator> allocator;
    private final long table;
    private final int capacity;
    private final NameTags tags;
    private final Duration timeout;

    private NameTable(RemoteMemory memory, Supplier<GlobalAllocator> allocator, long table, int capacity, NameTags tags,
                      Duration timeout) {
        this.memory = memory;
        this.allocator = allocator;
        this.table = table;
        this.capacity = capacity;
        this.tags = tags;
        this.timeout = timeout;
    }

    /** Bytes a table of {@code capacity} slots takes from its pointer. */
    public static long bytesFor(int capacity) {
        return HEADER + 8L * capacity;
    }

    /**
     * Writes the header of an empty table at {@code table} (memory the caller owns,
     * zero-filled, at least {@link #bytesFor} bytes): the capacity, then the magic word.
     */
    public static void format(RemoteMemory memory, long table, int capacity) {
        if (capacity < 1) {
            throw new io.membus.core.error.DsmConfigException(NameTableFullException.SETTING, capacity,
                    "a positive number of slots, e.g. " + DEFAULT_CAPACITY);
        }
        memory.writeLong(RemotePtr.plus(table, 8), capacity);
        memory.writeLong(table, MAGIC);
    }

    /**
     * Opens the table at {@code table}: reads and checks its header.
     *
     * @param allocator where records are allocated (asked on each bind: a client's allocator is made on first use)
     * @param timeout   the operation timeout each call runs under
     * @throws InvalidPointerException when no name table is there
     */
    public static NameTable open(RemoteMemory memory, Supplier<GlobalAllocator> allocator, long table, NameTags tags,
                                 Duration timeout) {
        long scope = OperationDeadline.enter(timeout);
        try {
            byte[] h = memory.read(table, 16);
            ByteBuffer b = ByteBuffer.wrap(h).order(ByteOrder.LITTLE_ENDIAN);
            long magic = b.getLong(0);
            long capacity = b.getLong(8);
            if (magic != MAGIC || capacity < 1 || capacity > Integer.MAX_VALUE) {
                throw new InvalidPointerException(table, 16, "reason=no name table there (magic="
                        + Long.toHexString(magic) + ", capacity=" + capacity + "); the system root names a table"
                        + " the founding node formats before it registers it: is membus-system from another cluster?");
            }
            return new NameTable(memory, allocator, table, (int) capacity, tags, timeout);
        } finally {
            OperationDeadline.exit(scope);
        }
    }

    /** The table's pointer (its header). */
    public long pointer() {
        return table;
    }

    /** Slots in the table. */
    public int capacity() {
        return capacity;
    }

    /**
     * Binds {@code name} to {@code root} unless a live binding of it exists.
     *
     * @return the root bound afterwards: {@code root} if this call bound it, else the first binder's
     * @throws NameTableFullException when no empty slot is left on the name's probe sequence
     * @throws InvalidNameException   for a null, empty or over-long name
     */
    public long bind(String name, long root) {
        byte[] utf8 = check(name);
        if (root == RemotePtr.NULL || root == TOMBSTONE) {
            throw new InvalidPointerException(root, 0, "reason=a name is bound to the pointer of an object;"
                    + " bind it to a block's pointer");
        }
        long scope = OperationDeadline.enter(timeout);
        BlockRef record = null;
        boolean published = false;
        boolean swapping = false;
        try {
            int home = home(utf8);
            for (int i = 0; i < capacity; i++) {
                long slot = slot((home + i) % capacity);
                OperationDeadline.check("bind name=" + name, RemotePtr.nodeId(slot), timeout);
                long v = memory.readLong(slot);
                while (true) {
                    if (v == RemotePtr.NULL) {
                        if (record == null) {
                            record = writeRecord(name, utf8, root);
                        }
                        swapping = true;
                        long seen = memory.compareAndSwap(slot, RemotePtr.NULL, record.ptr());
                        swapping = false;
                        if (seen == RemotePtr.NULL) {
                            published = true;
                            return root;
                        }
                        v = seen; // lost: examine what won the slot
                        continue;
                    }
                    if (v == TOMBSTONE) {
                        break;
                    }
                    long bound = rootIfNamed(v, name, utf8);
                    if (bound == RemotePtr.NULL) {
                        break;
                    }
                    long again = memory.readLong(slot);
                    if (again == v) {
                        return bound; // bound first by someone else (or by this root before)
                    }
                    v = again; // unbound while we read it: examine the tombstone
                }
            }
            throw new NameTableFullException(name, capacity);
        } catch (DsmException e) {
            if (record != null && swapping && e.mayHaveRun()) {
                published = true; // the swap may have published it: never free a record that may be bound
                LOG.warn("bind of name {}: the outcome is unknown ({}); its record {} is kept (it may be bound)", name,
                        e.toString(), RemotePtr.toString(record.ptr()));
            }
            throw e;
        } finally {
            if (record != null && !published) {
                free(record, name);
            }
            OperationDeadline.exit(scope);
        }
    }

    /** The root bound to {@code name}, if any. */
    public Optional<Long> lookup(String name) {
        byte[] utf8 = check(name);
        long scope = OperationDeadline.enter(timeout);
        try {
            int home = home(utf8);
            for (int i = 0; i < capacity; i++) {
                long slot = slot((home + i) % capacity);
                OperationDeadline.check("lookup name=" + name, RemotePtr.nodeId(slot), timeout);
                long v = memory.readLong(slot);
                while (true) {
                    if (v == RemotePtr.NULL) {
                        return Optional.empty(); // a binding would lie before the first empty slot
                    }
                    if (v == TOMBSTONE) {
                        break;
                    }
                    long bound = rootIfNamed(v, name, utf8);
                    if (bound == RemotePtr.NULL) {
                        break;
                    }
                    long again = memory.readLong(slot);
                    if (again == v) {
                        return Optional.of(bound);
                    }
                    v = again;
                }
            }
            return Optional.empty();
        } finally {
            OperationDeadline.exit(scope);
        }
    }

    /**
     * Removes the binding of {@code name}, only if it is bound to {@code expected} unless
     * that is 0 (compare-and-unbind): one CAS of the record's slot to {@link #TOMBSTONE}.
     *
     * @return whether this call removed a binding
     */
    public boolean unbind(String name, long expected) {
        byte[] utf8 = check(name);
        long scope = OperationDeadline.enter(timeout);
        try {
            int home = home(utf8);
            for (int i = 0; i < capacity; i++) {
                long slot = slot((home + i) % capacity);
                OperationDeadline.check("unbind name=" + name, RemotePtr.nodeId(slot), timeout);
                long v = memory.readLong(slot);
                if (v == RemotePtr.NULL) {
                    return false;
                }
                if (v == TOMBSTONE) {
                    continue;
                }
                long bound = rootIfNamed(v, name, utf8);
                if (bound == RemotePtr.NULL) {
                    continue;
                }
                if (expected != RemotePtr.NULL && bound != expected) {
                    // bound to another object when the slot was read (or unbound since, if the record was reused)
                    return false;
                }
                if (memory.compareAndSwap(slot, v, TOMBSTONE) != v) {
                    return false; // another unbind won: ours comes right after it, finding no binding
                }
                freeRecord(v, name);
                return true;
            }
            return false;
        } finally {
            OperationDeadline.exit(scope);
        }
    }

    /**
     * Every live binding whose tag is right, read slot by slot (the table in runs of
     * {@value #SCAN_SLOTS} slots, then each record): a snapshot that is not atomic
     * across names; a binding made or removed during the scan may or may not be in it.
     */
    public Map<String, Long> bindings() {
        long scope = OperationDeadline.enter(timeout.multipliedBy(4));
        try {
            Map<String, Long> out = new HashMap<>();
            for (int first = 0; first < capacity; first += SCAN_SLOTS) {
                int n = Math.min(SCAN_SLOTS, capacity - first);
                ByteBuffer run = ByteBuffer.wrap(memory.read(slot(first), n * 8)).order(ByteOrder.LITTLE_ENDIAN);
                for (int k = 0; k < n; k++) {
                    long v = run.getLong(k * 8);
                    if (v == RemotePtr.NULL || v == TOMBSTONE) {
                        continue;
                    }
                    byte[] h = memory.read(payload(v), RECORD_HEADER);
                    ByteBuffer r = ByteBuffer.wrap(h).order(ByteOrder.LITTLE_ENDIAN);
                    long w0 = r.getLong(0);
                    int len = (int) w0;
                    if ((int) (w0 >>> 32) != RECORD_MAGIC || len < 1 || len > 4 * MAX_NAME) {
                        continue;
                    }
                    String name = new String(memory.read(RemotePtr.plus(payload(v), RECORD_HEADER), len),
                            StandardCharsets.UTF_8);
                    long bound = r.getLong(8);
                    if (tagMatches(name, bound, r.getLong(16), r.getLong(24))
                            && memory.readLong(slot(first + k)) == v) {
                        out.put(name, bound);
                    }
                }
            }
            return Map.copyOf(out);
        } finally {
            OperationDeadline.exit(scope);
        }
    }

    // ------------------------------------------------------------------ internals

    private static byte[] check(String name) {
        if (name == null || name.isEmpty() || name.length() > MAX_NAME) {
            throw new InvalidNameException(name, MAX_NAME);
        }
        return name.getBytes(StandardCharsets.UTF_8);
    }

    /** The home slot: FNV-1a over the UTF-8 bytes, mixed, reduced to the capacity. */
    int home(byte[] utf8) {
        long h = 0xcbf29ce484222325L;
        for (byte b : utf8) {
            h ^= b & 0xff;
            h *= 0x100000001b3L;
        }
        h ^= h >>> 33;
        h *= 0xff51afd7ed558ccdL;
        h ^= h >>> 33;
        return (int) Long.remainderUnsigned(h, capacity);
    }

    private long slot(int index) {
        return RemotePtr.plus(table, HEADER + 8L * index);
    }

    private static long payload(long record) {
        return RemotePtr.plus(record, HeapLayout.BLOCK_HEADER_LENGTH);
    }

    /** Allocates and writes the record completely (the write has completed when this returns). */
    private BlockRef writeRecord(String name, byte[] utf8, long root) {
        long[] tag = tags.tag(name, root);
        ByteBuffer b = ByteBuffer.allocate(RECORD_HEADER + utf8.length).order(ByteOrder.LITTLE_ENDIAN);
        b.putLong(((long) RECORD_MAGIC << 32) | utf8.length).putLong(root).putLong(tag[0]).putLong(tag[1]).put(utf8);
        BlockRef record = allocator.get().allocate(b.capacity());
        try {
            memory.write(record.payload(), b.array());
        } catch (DsmException e) {
            free(record, name);
            throw e;
        }
        return record;
    }

    /**
     * The root the record at {@code record} binds {@code name} to, or 0 when it is a
     * record of another name, or not a record with the right tag (ignored).
     */
    private long rootIfNamed(long record, String name, byte[] utf8) {
        byte[] h = memory.read(payload(record), RECORD_HEADER);
        ByteBuffer r = ByteBuffer.wrap(h).order(ByteOrder.LITTLE_ENDIAN);
        long w0 = r.getLong(0);
        if ((int) (w0 >>> 32) != RECORD_MAGIC || (int) w0 != utf8.length) {
            return RemotePtr.NULL;
        }
        byte[] stored = memory.read(RemotePtr.plus(payload(record), RECORD_HEADER), utf8.length);
        if (!Arrays.equals(stored, utf8)) {
            return RemotePtr.NULL;
        }
        long root = r.getLong(8);
        if (!tagMatches(name, root, r.getLong(16), r.getLong(24))) {
            LOG.warn("ignoring the name record {} of name {}: its tag was not made with this cluster's secret"
                    + " (a member with a wrong membus.secret?)", RemotePtr.toString(record), name);
            return RemotePtr.NULL;
        }
        return root == TOMBSTONE ? RemotePtr.NULL : root;
    }

    private boolean tagMatches(String name, long root, long hi, long lo) {
        long[] t = tags.tag(name, root);
        return ((t[0] ^ hi) | (t[1] ^ lo)) == 0; // constant time
    }

    /** Frees a record this node allocated and never published (best effort: a failure leaks one small block). */
    private void free(BlockRef record, String name) {
        try {
            allocator.get().free(record);
        } catch (DsmException e) {
            LOG.warn("bind of name {}: its unused record {} could not be freed ({}); it stays allocated", name,
                    RemotePtr.toString(record.ptr()), e.toString());
        }
    }

    /** Frees a record whose slot this node tombstoned (only the tombstone's winner does). */
    private void freeRecord(long record, String name) {
        try {
            GlobalAllocator a = allocator.get();
            a.free(a.ref(record));
        } catch (DsmException e) {
            LOG.warn("unbind of name {}: its record {} could not be freed ({}); it stays allocated", name,
                    RemotePtr.toString(record), e.toString());
        }
    }
}
