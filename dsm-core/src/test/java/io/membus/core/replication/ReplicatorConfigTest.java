package io.membus.core.replication;

import io.membus.core.RemoteMemory;
import io.membus.core.directory.StaticDirectory;
import io.membus.core.error.DsmConfigException;
import io.membus.core.transport.DeclaringTransport;
import io.membus.core.transport.Transport;
import io.membus.core.capability.TransportCapabilities;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.Transports;
import org.junit.jupiter.api.Test;

import java.time.Duration;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** What the replication service refuses at construction, and the placement's rank. */
class ReplicatorConfigTest {

    @Test
    void backupsOnATransportThatCannotForwardAreRefusedNamingTheKey() {
        try (Transport real = Transports.create("local", TransportConfig.builder(1)
                .property("local.fabric", "ReplicatorConfigTest-" + System.nanoTime()).build())) {
            Transport rdmaLike = new DeclaringTransport(real, "rdma", TransportCapabilities.NONE);
            StaticDirectory d = new StaticDirectory();
            RemoteMemory mem = new RemoteMemory(rdmaLike, d, Duration.ofSeconds(5));
            DsmConfigException e = assertThrows(DsmConfigException.class,
                    () -> new Replicator(rdmaLike, mem, d, d, ReplicationConfig.DEFAULT));
            assertTrue(e.getMessage().contains("membus.replication.backups") && e.getMessage().contains("rdma"),
                    e.getMessage());
            new Replicator(rdmaLike, mem, d, d, ReplicationConfig.OFF).close(); // replication off: accepted
        }
    }

    @Test
    void placementPicksTheBestCandidateThatHoldsNoCopy() {
        java.util.List<Integer> nodes = java.util.List.of(1, 2, 3, 4, 5);
        int group = GroupId.of(3, 1);
        int best = GroupPlacement.target(group, nodes, 3);
        assertTrue(best != 3 && best != 0);
        int second = GroupPlacement.target(group, nodes, 3, best);
        assertTrue(second != best && second != 3 && second != 0);
        assertTrue(GroupPlacement.target(group, nodes, 1, 2, 3, 4, 5) == 0, "no candidate left");
        // stable: the rank of the remaining nodes does not depend on who else is a candidate
        assertTrue(GroupPlacement.target(group, java.util.List.of(best, second), 3) == best);
    }
}
