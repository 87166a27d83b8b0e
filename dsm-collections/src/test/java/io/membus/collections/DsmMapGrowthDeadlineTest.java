package io.membus.collections;

import io.membus.codec.Codecs;
import io.membus.core.error.DsmException;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.time.Duration;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * A map's growth never makes one put outlive its deadline: the put that starts a resize
 * migrates ranges only while three quarters of its deadline are left, the other operations help one
 * range (16 slots) each while half of theirs is left, a stalled migration's repair is spread
 * over operations alike, and every key stays readable throughout. Before, the starter migrated the
 * whole table itself, four or five round trips per live key: with each verb slowed (a far
 * or busy node, or a change that waits for its backup) the growth of a table of a few
 * thousand keys took seconds and the put failed with a timeout. Then, with 64-slot ranges
 * helped whatever the time left, a put that helped with one outlived its deadline at load
 * averages near 30 (a range took 0.4-1 s there).
 */
@Tag("slow") // over 20 s: the slow tier (failsafe, mvn verify), so that mvn test stays under 4 minutes
class DsmMapGrowthDeadlineTest {
    /**
     * The operation timeout: migrating the whole table in one put (about 1,500 live keys, four or five verbs
     * each, 1 ms more per verb) takes 6 s or more; helping with one range (16 slots) about 0.1 s idle.
     */
    private static final Duration TIMEOUT = Duration.ofSeconds(3);

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aPutThatStartsTheGrowthOfALargeTableEndsWithinItsDeadline() {
        try (CollCluster c = new CollCluster("local", 2, TIMEOUT)) {
            DsmMapOptions options = DsmMapOptions.defaults().initialSlots(1024);
            DsmMap<Integer, Integer> created = c.node(1).map("grow", Codecs.ints(), Codecs.ints(), options);
            int holder = created.tableNode(); // the node that holds the table (placed by the map's key)
            int writer = holder == 1 ? 2 : 1;
            DsmMap<Integer, Integer> m = c.node(writer).map("grow", Codecs.ints(), Codecs.ints(), options);
            MapStore store = m.store();
            int key = 0;
            int first = store.rootTable().homes();
            while (store.rootTable().homes() == first || store.nextOf(store.rootTable()) != null) {
                m.put(key, key); // fill, unslowed, through the first growth, so the next starts from a full table
                key++;
            }
            int homes = store.rootTable().homes();
            // every verb of the writer to the table's node now takes 1 ms more: migrating the whole
            // table in one put would take thousands of them
            c.transports.get(writer).faults().delay(holder, Duration.ofMillis(1));
            int puts = 0;
            while (store.rootTable().homes() == homes && store.nextOf(store.rootTable()) == null && puts < 20_000) {
                try {
                    m.put(key, key);
                } catch (DsmException e) {
                    fail("put " + key + " failed after " + puts + " slowed puts (the table grows from " + homes
                            + " home slots): " + e);
                }
                key++;
                puts++;
            }
            System.out.printf("MEASURE growth from %d home slots started after %d slowed puts (%d keys)%n", homes, puts,
                    key);
            assertTrue(store.rootTable().homes() > homes || store.nextOf(store.rootTable()) != null,
                    "a growth started within " + puts + " puts");
            for (int i = 0; i < 200; i++) { // the other operations finish the migration, one range each
                m.put(key, key);
                key++;
            }
            c.transports.get(writer).faults().clear();
            for (int k = 0; k < key; k++) {
                assertEquals(Integer.valueOf(k), created.get(k), "key " + k);
            }
            assertEquals(key, created.size());
        }
    }

    /**
     * The repair of a migration whose claimer died is spread over operations too: each sweeps
     * ranges while half its deadline is left, from where the node's last sweep stopped. Before,
     * the first operation to find the table stalled swept the whole table itself (three verbs
     * per live key here, 2 ms more each: about 8 s for 1,300 keys) and failed with a timeout,
     * and so did every operation after it.
     */
    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void theRepairOfALargeTablesStalledMigrationIsSpreadOverOperations() {
        try (CollCluster c = new CollCluster("local", 2, TIMEOUT)) {
            DsmMapOptions options = DsmMapOptions.defaults().initialSlots(1024);
            DsmMap<Integer, Integer> created = c.node(1).map("repair", Codecs.ints(), Codecs.ints(), options);
            int holder = created.tableNode();
            int writer = holder == 1 ? 2 : 1;
            DsmMap<Integer, Integer> m = c.node(writer).map("repair", Codecs.ints(), Codecs.ints(), options);
            MapStore store = m.store();
            int key = 0;
            int first = store.rootTable().homes();
            while (store.rootTable().homes() == first || key < 1300) {
                m.put(key, key); // through the first growth, then up to 1,300 keys in the grown table
                key++;
            }
            if (store.nextOf(store.rootTable()) != null) { // a growth started on the way: let it finish
                store.migration.migrateAll(store.rootTable());
                store.advanceRootAndGet();
            }
            MapTable t = store.rootTable();
            assertTrue(store.nextOf(t) == null, "the filled table is the last one");
            // a node starts a resize, claims the first range and dies; this node migrates every other range
            store.startResize(t);
            store.mem.fetchAndAdd(t.ptr + MapLayout.TABLE_CURSOR, MapMigration.MIGRATE_RANGE);
            store.migration.migrateAll(t); // unslowed; its last claim notes the stall
            assertTrue(store.mem.readLong(t.ptr + MapLayout.TABLE_DONE) < t.total(), "the dead claimer's range");
            c.transports.get(writer).faults().delay(holder, Duration.ofMillis(2));
            int puts = 0;
            while (store.repairs() == 0) {
                assertTrue(puts < 100_000, "no repair after " + puts + " puts");
                try {
                    m.put(key, key); // meets frozen slots and helps: once the stall is old enough, repairs
                } catch (DsmException e) {
                    fail("put " + key + " failed after " + puts + " slowed puts (repairing a table of " + t.total()
                            + " slots): " + e);
                }
                key++;
                puts++;
            }
            System.out.printf("MEASURE repair of %d slots done after %d slowed puts (%d keys)%n", t.total(), puts, key);
            c.transports.get(writer).faults().clear();
            for (int k = 0; k < key; k++) {
                assertEquals(Integer.valueOf(k), created.get(k), "key " + k);
            }
            assertEquals(key, created.size());
        }
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aTableTooLargeForOneObjectWithTheDefaultInlineAreasGetsSmallerOnes() {
        try (CollCluster c = new CollCluster("local", 1)) {
            // 65,536 home slots with 272-byte areas are 18 MiB, over the heap's largest object (8 MiB here): the map
            // was refused at creation (AllocationSizeException); its table now has the largest areas that fit
            DsmMap<Long, byte[]> m = c.node(1).map("big", Codecs.longs(), Codecs.bytes(),
                    DsmMapOptions.defaults().initialSlots(1 << 16));
            MapTable t = m.store().rootTable();
            assertTrue(t.inline > 0 && t.inline < DsmMapOptions.DEFAULT_INLINE_BYTES && t.inline % 8 == 0,
                    "areas of " + t.inline + " bytes");
            byte[] small = new byte[t.inline - 30];
            byte[] large = new byte[300];
            small[0] = 1;
            large[0] = 2;
            m.put(1L, small);
            m.put(2L, large);
            assertEquals(1, m.get(1L)[0]);
            assertEquals(small.length, m.get(1L).length);
            assertEquals(2, m.get(2L)[0]);
            assertEquals(large.length, m.get(2L).length);
        }
    }
}
