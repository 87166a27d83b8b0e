package io.membus.collections;

import io.membus.alloc.BlockRef;
import io.membus.alloc.GlobalAllocator;
import io.membus.alloc.Placement;
import io.membus.core.RemoteMemory;
import io.membus.core.Words;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * The words of a fixed-length array spread over the nodes in stripes: each stripe
 * is one allocator block of {@code stripeLength} words, placed round-robin over
 * the heaps, so a large array uses every node's memory and a bulk operation talks
 * to every node in parallel. The stripe table sits in the root and is read once
 * when a handle opens.
 *
 * <pre>
 *   root body:
 *   0            8               16              24
 *   +------------+---------------+---------------+--------------------+--------------------+----
 *   | length     | stripeLength  | stripeCount   | stripe 0: ptr      | stripe 0: header   | ...
 *   +------------+---------------+---------------+--------------------+--------------------+----
 *   stripe block payload: stripeLength words (the last stripe may be shorter), element i of the
 *   array at stripe (i / stripeLength), word (i % stripeLength); every word little-endian.
 * </pre>
 *
 * <p><b>Note:</b> thread-safe; immutable after construction. Element operations are
 * single verbs with the ordering of {@link io.membus.core.transport.Verbs}; bulk
 * operations are not atomic as a whole (each element is).
 */
final class StripedWords {
    static final int LENGTH_OFFSET = 0;
    static final int STRIPE_LENGTH_OFFSET = 8;
    static final int STRIPE_COUNT_OFFSET = 16;
    static final int STRIPES_OFFSET = 24;
    static final int STRIPE_ENTRY_LENGTH = 16;
    /** Stripes an array may have: its stripe table is read with one verb. */
    static final int MAX_STRIPES = (RemoteMemory.MAX_VERB_LENGTH - STRIPES_OFFSET)
            / STRIPE_ENTRY_LENGTH;
    /** Elements per stripe unless asked otherwise: 4 KiB blocks. */
    static final int DEFAULT_STRIPE_LENGTH = 512;

    /** Operation kinds of an array's {@link OperationStats} (one verb each, or one per node: counted, not timed). */
    static final String[] OPERATIONS = {"get", "set", "add", "compareAndSet", "update", "getRange", "putRange",
            "addRange"};
    static final int GET = 0;
    static final int SET = 1;
    static final int ADD = 2;
    static final int CAS = 3;
    static final int UPDATE = 4;
    static final int GET_RANGE = 5;
    static final int PUT_RANGE = 6;
    static final int ADD_RANGE = 7;

    final Root root;
    /** The array's root, life and operation counts (see {@link Handle}). */
    final Handle handle;
    final RemoteMemory memory;
    final WordVerbs words;
    final int length;
    final int stripeLength;
    /** Payload pointer of each stripe. */
    final long[] stripes;

    private StripedWords(Root root, WordVerbs words, int length, int stripeLength, long[] stripes) {
        this.root = root;
        this.handle = new Handle(root, OPERATIONS);
        this.memory = words.memory();
        this.words = words;
        this.length = length;
        this.stripeLength = stripeLength;
        this.stripes = stripes;
    }

    static StripedWords getOrCreate(NamedRoots roots, WordVerbs words, String name, CollectionKind kind,
                                    String descriptor, int length, int stripeLength) {
        if (length <= 0) {
            throw new CollectionArgumentException("length", length, "1.." + Integer.MAX_VALUE);
        }
        if (stripeLength <= 0 || stripeLength > (1 << 20)) {
            throw new CollectionArgumentException("stripeLength", stripeLength, "1..1048576 elements");
        }
        // the stripe table is read in one verb: at most MAX_STRIPES entries (checked before anything is allocated;
        // the count in int overflowed for a length near Integer.MAX_VALUE)
        long stripesNeeded = ((long) length + stripeLength - 1) / stripeLength;
        if (stripesNeeded > MAX_STRIPES) {
            throw new CollectionArgumentException("length", length, "1.." + Math.min(Integer.MAX_VALUE,
                    (long) MAX_STRIPES * stripeLength) + " with stripeLength=" + stripeLength + " (at most "
                    + MAX_STRIPES + " stripes; a longer stripeLength allows more)");
        }
        int count = (int) stripesNeeded;
        GlobalAllocator allocator = roots.allocator();
        RemoteMemory memory = roots.memory();
        Root root = roots.getOrCreate(name, kind, descriptor, STRIPES_OFFSET + (long) count * STRIPE_ENTRY_LENGTH,
                new NamedRoots.Initializer() {
                    private final List<BlockRef> made = new ArrayList<>();

                    @Override
                    public void format(Root r) {
                        byte[] table = new byte[STRIPES_OFFSET + count * STRIPE_ENTRY_LENGTH];
                        Words.putLong(table, LENGTH_OFFSET, length);
                        Words.putLong(table, STRIPE_LENGTH_OFFSET, stripeLength);
                        Words.putLong(table, STRIPE_COUNT_OFFSET, count);
                        List<CompletableFuture<Void>> zeroing = new ArrayList<>();
                        for (int s = 0; s < count; s++) {
                            int words = Math.min(stripeLength, length - s * stripeLength);
                            BlockRef b = allocator.allocate((long) words * Long.BYTES, Placement.roundRobin());
                            made.add(b);
                            Words.putLong(table, STRIPES_OFFSET + s * STRIPE_ENTRY_LENGTH, b.ptr());
                            Words.putLong(table, STRIPES_OFFSET + s * STRIPE_ENTRY_LENGTH + 8, b.header());
                            // a reused block holds old bytes: zero it (the name is bound only after this)
                            zeroing.add(memory.writeAsync(b.payload(), new byte[words * Long.BYTES]));
                        }
                        awaitAll(memory, zeroing);
                        memory.write(r.bodyPtr(), table);
                    }

                    @Override
                    public void discard(Root r) {
                        for (BlockRef b : made) {
                            allocator.free(b);
                        }
                    }
                });
        byte[] head = memory.read(root.bodyPtr(), STRIPES_OFFSET);
        int storedLength = (int) Words.getLong(head, LENGTH_OFFSET);
        int storedStripe = (int) Words.getLong(head, STRIPE_LENGTH_OFFSET);
        int storedCount = (int) Words.getLong(head, STRIPE_COUNT_OFFSET);
        byte[] table = memory.read(root.bodyPtr() + STRIPES_OFFSET, storedCount * STRIPE_ENTRY_LENGTH);
        long[] stripes = new long[storedCount];
        for (int s = 0; s < storedCount; s++) {
            stripes[s] = Words.getLong(table, s * STRIPE_ENTRY_LENGTH) + 8; // payload = header pointer + 8
        }
        return new StripedWords(root, words, storedLength, storedStripe, stripes);
    }

    /** Frees the stripes of a destroyed array's root (its stripe table names each block with its header). */
    static void release(GlobalAllocator allocator, Root root) {
        RemoteMemory memory = allocator.memory();
        int count = (int) memory.readLong(root.bodyPtr() + STRIPE_COUNT_OFFSET);
        if (count <= 0 || count > MAX_STRIPES) {
            throw new IllegalStateException("stripe count " + count + " in " + root);
        }
        byte[] table = memory.read(root.bodyPtr() + STRIPES_OFFSET, count * STRIPE_ENTRY_LENGTH);
        for (int s = 0; s < count; s++) {
            allocator.free(BlockRef.of(Words.getLong(table, s * STRIPE_ENTRY_LENGTH),
                    Words.getLong(table, s * STRIPE_ENTRY_LENGTH + 8), 0));
        }
    }

    static void awaitAll(RemoteMemory memory, List<? extends CompletableFuture<?>> futures) {
        RuntimeException first = null;
        for (CompletableFuture<?> f : futures) {
            try {
                memory.await(f);
            } catch (RuntimeException e) {
                if (first == null) {
                    first = e;
                } else {
                    first.addSuppressed(e);
                }
            }
        }
        if (first != null) {
            throw first;
        }
    }

    /** The remote pointer of element {@code i}, once the array is known to be alive. */
    long ptr(int i) {
        if (i < 0 || i >= length) {
            throw new CollectionArgumentException("index", i, "0.." + (length - 1) + " (length=" + length + ")");
        }
        handle.check();
        return stripes[i / stripeLength] + (long) (i % stripeLength) * Long.BYTES;
    }

    /** {@link #ptr(int)}, counting one operation of kind {@code op}. */
    long ptr(int i, int op) {
        long p;
        try {
            p = ptr(i);
        } catch (RuntimeException e) { // a bad index, or the array destroyed or closed: a failed operation
            handle.stats().countFailed(op);
            throw e;
        }
        handle.stats().count(op);
        return p;
    }

    void checkRange(int from, int to) {
        if (from < 0 || to > length || from > to) {
            throw new CollectionArgumentException("range", "[" + from + ", " + to + ")",
                    "0 <= from <= to <= length=" + length);
        }
    }

    /** The words of elements {@code [from, to)}: one read per stripe, all in flight at once. */
    long[] readRange(int from, int to) {
        handle.stats().count(GET_RANGE);
        return readRangeUncounted(from, to);
    }

    /** {@link #readRange} as a step of another operation (counted by it). */
    long[] readRangeUncounted(int from, int to) {
        checkRange(from, to);
        long[] out = new long[to - from];
        List<CompletableFuture<Void>> reads = new ArrayList<>();
        for (int i = from; i < to; ) {
            int end = Math.min(to, (i / stripeLength + 1) * stripeLength);
            int at = i;
            int n = end - i;
            reads.add(memory.readAsync(ptr(i), n * Long.BYTES).thenAccept(b -> {
                for (int k = 0; k < n; k++) {
                    out[at - from + k] = Words.getLong(b, k * Long.BYTES);
                }
            }));
            i = end;
        }
        awaitAll(memory, reads);
        return out;
    }

    /** Writes {@code values} at elements {@code [from, from + values.length)}: one write per stripe, in flight at once. */
    void writeRange(int from, long[] values) {
        checkRange(from, from + values.length);
        handle.stats().count(PUT_RANGE);
        if (!words.plainWriteAtomic()) {
            for (int k = 0; k < values.length; k++) {
                words.store(ptr(from + k), values[k]);
            }
            return;
        }
        List<CompletableFuture<Void>> writes = new ArrayList<>();
        int to = from + values.length;
        for (int i = from; i < to; ) {
            int end = Math.min(to, (i / stripeLength + 1) * stripeLength);
            byte[] b = new byte[(end - i) * Long.BYTES];
            for (int k = i; k < end; k++) {
                Words.putLong(b, (k - i) * Long.BYTES, values[k - from]);
            }
            writes.add(memory.writeAsync(ptr(i), b));
            i = end;
        }
        awaitAll(memory, writes);
    }

    /** Adds {@code deltas[k]} to element {@code from + k} (zero deltas skipped): fetch-and-adds in flight at once. */
    void addRange(int from, long[] deltas) {
        checkRange(from, from + deltas.length);
        handle.stats().count(ADD_RANGE);
        List<CompletableFuture<Long>> adds = new ArrayList<>();
        for (int k = 0; k < deltas.length; k++) {
            if (deltas[k] != 0) {
                adds.add(memory.fetchAndAddAsync(ptr(from + k), deltas[k]));
            }
        }
        awaitAll(memory, adds);
    }

    /** Elements per node: how the stripes are spread (for the docs and tests). */
    int[] nodesOfStripes() {
        int[] out = new int[stripes.length];
        for (int s = 0; s < stripes.length; s++) {
            out[s] = io.membus.core.RemotePtr.nodeId(stripes[s]);
        }
        return out;
    }
}
