package io.membus.collections;

import io.membus.alloc.BlockRef;
import io.membus.alloc.GlobalAllocator;
import io.membus.alloc.HeapLayout;
import io.membus.alloc.Placement;
import io.membus.codec.Codec;
import io.membus.core.RemotePtr;
import io.membus.core.error.DsmConfigException;
import io.membus.core.error.ErrorCode;

import java.nio.charset.StandardCharsets;

import static io.membus.collections.MapLayout.*;

/**
 * A {@link DsmMap}'s root ({@link MapLayout}): writing an empty map's root and first
 * table, discarding one that lost a creation race, reading and checking a root to open a
 * handle's {@link MapStore} (magic, version, window, inline areas, codec ids, grace,
 * lease table), and freeing what a destroyed map held beside its root block.
 *
 * <p><b>Note:</b> thread-safe: stateless. A root's magic word is written last, after the
 * rest of the root (the verbs' issue order on one caller): a root with it is whole.
 */
final class MapRoot {
    private MapRoot() {
    }

    /** The id a root records for a codec. */
    static long codecHash(Codec<?> codec) {
        return MapLayout.hash(codec.id().getBytes(StandardCharsets.UTF_8));
    }

    /**
     * Writes an empty map's root ({@link MapLayout}, {@link MapLayout#ROOT_LENGTH} bytes)
     * at {@code body} and allocates its first table; the magic word is written last.
     *
     * @return the pointer of the first table (what {@link #discard} frees)
     */
    static long format(GlobalAllocator heap, long body, Codec<?> keys, Codec<?> values, DsmMapOptions options) {
        int log2 = Integer.numberOfTrailingZeros(options.initialSlots());
        int inline = options.inlineEntryBytes();
        long table = MapTables.newTable(heap, log2, DsmMap.WINDOW, inline, 0, Placement.byKey(MapLayout.mix(body)));
        byte[] b = new byte[ROOT_LENGTH];
        putInt(b, ROOT_VERSION_WINDOW, inline > 0 ? VERSION_INLINE : VERSION);
        putInt(b, ROOT_VERSION_WINDOW + 4, DsmMap.WINDOW | inline << 16);
        putLong(b, ROOT_KEY_CODEC, codecHash(keys));
        putLong(b, ROOT_VALUE_CODEC, codecHash(values));
        putLong(b, ROOT_GRACE, options.grace().toNanos() / 1000);
        putLong(b, ROOT_TABLE, table);
        putLong(b, ROOT_FIRST_TABLE, table);
        if (options.leasedReads()) {
            if (options.coherentHeap() == null) {
                throw new DsmConfigException("DsmMapOptions.coherentHeap", "<none>",
                        "this node's CoherentHeap: a map with leased reads locks and caches through it");
            }
            putLong(b, ROOT_LEASES, MapLeases.create(options.coherentHeap(), body));
        }
        heap.memory().write(body, b);
        heap.memory().writeLong(body + ROOT_MAGIC, MAGIC); // the magic last: a root with it is whole
        return table;
    }

    /** Frees the first table of a root {@link #format} wrote that was never used (a lost creation race). */
    static void discard(GlobalAllocator heap, long body) {
        if (heap.memory().readLong(body + ROOT_MAGIC) != MAGIC) {
            return; // formatting did not finish: nothing was published to free by its pointer
        }
        long leases = heap.memory().readLong(body + ROOT_LEASES);
        if (leases != 0) {
            MapLeases.discard(heap, leases);
        }
        long table = heap.memory().readLong(body + ROOT_FIRST_TABLE);
        if (table != 0) {
            long header = HeapLayout.unseal(heap.memory().readLong(table - HeapLayout.BLOCK_HEADER_LENGTH),
                    table - HeapLayout.BLOCK_HEADER_LENGTH);
            heap.free(BlockRef.of(table - HeapLayout.BLOCK_HEADER_LENGTH, header, 0));
        }
    }

    /**
     * Reads and checks the root layout at {@code body} inside the block at {@code rootPtr}
     * and makes this handle's store on it, its {@link Handle} set ({@code named}: the named
     * root, or null for a map made by {@link DsmMap#create}).
     *
     * @throws DsmMapException when it is not a map's root, or the codecs' ids differ from
     *                         the ones the map was created with
     */
    static MapStore open(GlobalAllocator heap, long rootPtr, long body, Codec<?> keys, Codec<?> values,
                         DsmMapOptions options, Root named) {
        String where = RemotePtr.toString(rootPtr);
        byte[] b = heap.memory().read(body, ROOT_COUNTERS);
        int p = 0;
        if (getLong(b, p + ROOT_MAGIC) != MAGIC) {
            throw DsmMapException.notAMap(where, "magic=" + Long.toHexString(getLong(b, p + ROOT_MAGIC)));
        }
        int version = getInt(b, p + ROOT_VERSION_WINDOW);
        int windowWord = getInt(b, p + ROOT_VERSION_WINDOW + 4);
        int window = windowWord & 0xffff;
        int inline = windowWord >>> 16;
        boolean inlineOk = version == VERSION ? inline == 0
                : inline >= 16 && inline <= MAX_INLINE && inline % 8 == 0;
        if ((version != VERSION && version != VERSION_INLINE) || window < 1 || window > 1024 || !inlineOk) {
            throw DsmMapException.notAMap(where, "version=" + version + ", window=" + window + ", inline=" + inline
                    + ", supported=" + VERSION + "," + VERSION_INLINE);
        }
        if (getLong(b, p + ROOT_KEY_CODEC) != codecHash(keys)) {
            throw DsmMapException.codecMismatch(where, "key", Long.toHexString(getLong(b, p + ROOT_KEY_CODEC)),
                    keys.id() + "#" + Long.toHexString(codecHash(keys)));
        }
        if (getLong(b, p + ROOT_VALUE_CODEC) != codecHash(values)) {
            throw DsmMapException.codecMismatch(where, "value", Long.toHexString(getLong(b, p + ROOT_VALUE_CODEC)),
                    values.id() + "#" + Long.toHexString(codecHash(values)));
        }
        long graceNanos = getLong(b, p + ROOT_GRACE) * 1000;
        if (graceNanos <= 0) {
            throw DsmMapException.notAMap(where, "graceMicros=" + getLong(b, p + ROOT_GRACE));
        }
        long leaseTable = getLong(b, p + ROOT_LEASES);
        MapLeases leases = null;
        if (leaseTable != 0) {
            if (options.coherentHeap() == null) {
                throw new DsmMapException(ErrorCode.CONFIG, "leases", "map needs a coherent heap: root=" + where
                        + ", leasedReads=true; it serves reads under leases, so every handle must lock its changes"
                        + " through this node's CoherentHeap: open it with DsmMapOptions.coherentHeap(heap)"
                        + " (DsmCollections built with a heap, and Membus.map, pass it)");
            }
            leases = new MapLeases(options.coherentHeap(), leaseTable);
        }
        Class<?> objectKeyType = leases != null && DsmMap.OBJECT_KEY_TYPES.contains(keys.type()) ? keys.type() : null;
        MapStore store = new MapStore(heap, rootPtr, body, graceNanos, window, inline, options.readCacheEntries(),
                leases, objectKeyType, options.entryPlacement());
        store.handle(named != null ? new Handle(named, DsmMap.OPERATIONS)
                : new Handle(null, "DsmMap at " + RemotePtr.toString(rootPtr), DsmMap.OPERATIONS));
        return store;
    }

    /**
     * Frees every entry, table and lease table of a destroyed named map (its root block
     * is freed by the caller). No handle uses it any more (see {@link Lifecycle}), so the
     * codecs are not needed.
     */
    static void releaseNamed(GlobalAllocator heap, Root root) {
        long body = root.bodyPtr();
        byte[] b = heap.memory().read(body, ROOT_COUNTERS);
        if (getLong(b, ROOT_MAGIC) != MAGIC) {
            return; // never formatted: nothing beside the root
        }
        int windowWord = getInt(b, ROOT_VERSION_WINDOW + 4);
        int inline = getInt(b, ROOT_VERSION_WINDOW) == VERSION ? 0 : windowWord >>> 16;
        MapStore store = new MapStore(heap, root.block().ptr(), body, Math.max(1, getLong(b, ROOT_GRACE)) * 1000,
                windowWord & 0xffff, inline, 0, null, null, DsmMapOptions.EntryPlacement.WRITER);
        store.destroyTables();
        long leases = getLong(b, ROOT_LEASES);
        if (leases != 0) {
            MapLeases.discard(heap, leases);
        }
    }

}
