package io.membus.cluster;

import io.membus.core.directory.ReplicaGroupView;
import io.membus.core.error.DsmConfigException;
import io.membus.core.error.DsmException;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.replication.GroupId;
import org.apache.pekko.cluster.ddata.Replicator;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The pieces of the cluster's replication support that need no cluster: answers, the join check, restarts. */
class ClusterClaimsTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(2);

    @Test
    void aClaimWriteIsTypedByWhatTheReplicatorAnswered() {
        assertNull(ClusterClaims.outcome(3, "publish", TIMEOUT,
                new Replicator.UpdateSuccess<>(ClusterAgent.NODES, scala.Option.empty()), null));
        DsmException noMajority = ClusterClaims.outcome(3, "publish", TIMEOUT,
                new Replicator.UpdateTimeout<>(ClusterAgent.NODES, scala.Option.empty()), null);
        assertInstanceOf(DsmTimeoutException.class, noMajority);
        assertTrue(noMajority.getMessage().contains("node=3") && noMajority.getMessage().contains("timeout=2000ms")
                && noMajority.getMessage().contains("majority"), noMajority.getMessage());
        assertInstanceOf(DsmTimeoutException.class, ClusterClaims.outcome(3, "publish", TIMEOUT, null,
                new java.util.concurrent.CompletionException(new org.apache.pekko.pattern.AskTimeoutException("no answer"))));
        DsmException failed = ClusterClaims.outcome(3, "publish", TIMEOUT, new Replicator.ModifyFailure<>(
                ClusterAgent.NODES, "boom", new IllegalStateException("boom"), scala.Option.empty()), null);
        assertInstanceOf(NodeUnavailableException.class, failed);
        assertTrue(failed.getMessage().contains("ModifyFailure"), failed.getMessage());
        assertInstanceOf(NodeUnavailableException.class, ClusterClaims.outcome(3, "publish", TIMEOUT, null,
                new IllegalStateException("actor system terminated")));
    }

    @Test
    void backupsAreComparedWithEveryMemoryNodesValue() {
        DsmNode.compareBackups(4, 1, Map.of());
        DsmNode.compareBackups(4, 1, Map.of(1, "1", 2, "1"));
        DsmConfigException e = assertThrows(DsmConfigException.class,
                () -> DsmNode.compareBackups(4, 1, Map.of(1, "1", 2, "0")));
        assertEquals("membus.replication.backups", e.key());
        assertEquals("1", e.value());
        assertTrue(e.getMessage().contains("node 2 has membus.replication.backups = 0 and node 4 has 1"), e.getMessage());
    }

    @Test
    void aRestartedNodeDoesNotExportTheIndexesWhoseGroupsLiveOn() {
        List<ReplicaGroupView> views = List.of(
                new ReplicaGroupView(GroupId.of(3, 0), 1, ReplicaGroupView.State.SERVING, 2, 7, null, null, null),
                new ReplicaGroupView(GroupId.of(3, 2), 1, ReplicaGroupView.State.PROMOTING, 0, 0, new int[] {4}, null,
                        null),
                new ReplicaGroupView(GroupId.of(2, 1), 1, ReplicaGroupView.State.SERVING, 2, 7, null, null, null));
        assertEquals(Set.of(0, 2), DsmNode.heldElsewhere(3, views));
        assertEquals(Set.of(1), DsmNode.heldElsewhere(2, views));
        assertEquals(Set.of(), DsmNode.heldElsewhere(5, views));
    }
}
