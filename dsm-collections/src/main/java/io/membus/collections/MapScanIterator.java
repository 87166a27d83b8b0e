package io.membus.collections;

import io.membus.core.RemotePtr;

import java.nio.ByteBuffer;
import java.util.HashSet;
import java.util.Iterator;
import java.util.NoSuchElementException;
import java.util.Set;

import static io.membus.collections.MapLayout.hasKey;
import static io.membus.collections.MapLayout.identity;
import static io.membus.collections.MapLayout.isMoved;
import static io.membus.collections.MapLayout.isTomb;
import static io.membus.collections.MapLayout.COPIED;

/**
 * The weakly consistent scan behind a {@link DsmMap}'s iterators, views and bulk
 * operations: walks the root table (as it was when the scan began) slot by slot in
 * batches, then every later table of the chain, returning each key once. A live slot
 * yields its entry (a value the key had during the scan); a frozen live slot's key is
 * first made sure to be in the next table, which the scan walks afterwards; keys
 * already returned are skipped (a set of their bytes, kept for the scan's life).
 * Every key present from the scan's start to its end is returned exactly once.
 *
 * <p><b>Note:</b> not thread-safe: one thread uses an iterator; any number of
 * iterators and operations run at once on any nodes.
 */
final class MapScanIterator implements Iterator<MapStore.RawEntry> {
    private static final int SCAN_BATCH = 64;

    private final MapStore store;
    private MapTable table;
    private int pos;
    private long[] batch;
    private int batchFrom;
    private long batchAt;
    private final Set<ByteBuffer> seen = new HashSet<>();
    private MapStore.RawEntry ahead;
    private int failures;

    MapScanIterator(MapStore store, MapTable first) {
        this.store = store;
        this.table = first;
    }

    @Override
    public boolean hasNext() {
        if (ahead == null) {
            ahead = advance();
        }
        return ahead != null;
    }

    @Override
    public MapStore.RawEntry next() {
        if (!hasNext()) {
            throw new NoSuchElementException();
        }
        MapStore.RawEntry e = ahead;
        ahead = null;
        return e;
    }

    private MapStore.RawEntry advance() {
        while (table != null) {
            if (pos >= table.total()) {
                table = store.tables.nextOf(table);
                pos = 0;
                batch = null;
                continue;
            }
            if (batch == null || pos >= batchFrom + batch.length) {
                readBatch();
            }
            long w = batch[pos - batchFrom];
            if (!hasKey(w) || isTomb(w)) {
                pos++;
                continue;
            }
            SlotScan.Entry e;
            try {
                e = store.slots.readEntry(w, batchAt);
                failures = 0;
            } catch (SlotScan.Restart r) {
                readBatch(); // the slot changed or the batch is old: read it again and redo this slot
                if (batch[0] == w && isMoved(w)) {
                    // a frozen slot whose entry is gone: its table was passed, the key is in a later table
                    pos++;
                } else if (++failures > SlotScan.MAX_RESTARTS) {
                    throw DsmMapException.corrupted(RemotePtr.toString(table.slot(pos)), "entry never checks");
                }
                continue;
            }
            pos++;
            if (isMoved(w)) {
                if (!isTomb(w)) {
                    // make sure the key is in the next table before that table is walked
                    store.migration.copyInto(store.tables.mustNext(table), e.key(), e.hash(), identity(w) | COPIED, e.value());
                }
                continue;
            }
            byte[] k = e.key();
            if (seen.add(ByteBuffer.wrap(k))) {
                return new MapStore.RawEntry(k, e.value());
            }
        }
        return null;
    }

    private void readBatch() {
        int n = Math.min(SCAN_BATCH, table.total() - pos);
        batchAt = System.nanoTime();
        batch = store.tables.readWords(table.slot(pos), n);
        batchFrom = pos;
    }
}
