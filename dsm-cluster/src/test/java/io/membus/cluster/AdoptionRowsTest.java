package io.membus.cluster;

import io.membus.core.directory.ReplicaGroupView;
import io.membus.core.replication.AdoptionReplicator;
import io.membus.core.replication.Ballot;
import io.membus.core.replication.GroupId;
import org.junit.jupiter.api.Test;

import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** {@code membus status} on a transport that adopts (shm): served groups want no copies and say why. */
class AdoptionRowsTest {

    @Test
    void servedGroupsAreAdoptedNotCopiedAndOthersKeepTheirState() {
        List<ClusterMessage.GroupRow> rows = List.of(
                new ClusterMessage.GroupRow(GroupId.of(3, 0), ReplicaGroupView.State.SERVING, 2, Ballot.of(2, 2),
                        List.of(), List.of(), 1, ""),
                new ClusterMessage.GroupRow(GroupId.of(4, 0), ReplicaGroupView.State.LOST, 0, Ballot.of(1, 4),
                        List.of(), List.of(), 1, ""));
        assertTrue(rows.get(0).needsAttention(), "with backups = 1 and no copy, the row asks for attention");
        List<ClusterMessage.GroupRow> adopted = NodeReport.adoptionRows(rows);
        assertEquals(2, adopted.size());
        ClusterMessage.GroupRow served = adopted.get(0);
        assertEquals(AdoptionReplicator.NOTE, served.note());
        assertEquals("adopted, not copied (one host)", served.note());
        assertEquals(0, served.backups());
        assertEquals(2, served.primary());
        assertEquals(Ballot.of(2, 2), served.epoch());
        assertFalse(served.needsAttention(), "a served shm group is as it should be: no copies on one host");
        assertEquals(rows.get(1), adopted.get(1), "a lost group stays as it is");
        assertTrue(adopted.get(1).needsAttention());
    }
}
