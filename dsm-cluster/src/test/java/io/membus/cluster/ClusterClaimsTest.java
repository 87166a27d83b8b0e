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
        StartChecks.compareBackups(4, 1, Map.of());
        StartChecks.compareBackups(4, 1, Map.of(1, "1", 2, "1"));
        DsmConfigException e = assertThrows(DsmConfigException.class,
                () -> StartChecks.compareBackups(4, 1, Map.of(1, "1", 2, "0")));
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
        assertEquals(Set.of(0, 2), StartChecks.heldElsewhere(3, views));
        assertEquals(Set.of(1), StartChecks.heldElsewhere(2, views));
        assertEquals(Set.of(), StartChecks.heldElsewhere(5, views));
    }

    /** A stand-in for Distributed Data's replicator: applies every update to its map, then answers as told. */
    static final class FakeReplicator extends org.apache.pekko.actor.AbstractActor {
        static volatile String answer = "success"; // success | timeout | silent
        static volatile org.apache.pekko.cluster.ddata.LWWMap<String, ClusterMessage.NodeEntry> state;

        @Override
        @SuppressWarnings("unchecked")
        public Receive createReceive() {
            return receiveBuilder().match(Replicator.Update.class, u -> {
                Replicator.Update<org.apache.pekko.cluster.ddata.LWWMap<String, ClusterMessage.NodeEntry>> update = u;
                state = update.modify().apply(scala.Option.apply(state));
                switch (answer) {
                    case "success" -> getSender().tell(new Replicator.UpdateSuccess<>(update.key(), scala.Option.empty()),
                            getSelf());
                    case "timeout" -> getSender().tell(new Replicator.UpdateTimeout<>(update.key(), scala.Option.empty()),
                            getSelf());
                    default -> { } // no answer: the ask's own deadline
                }
            }).build();
        }
    }

    @Test
    void claimsReplaceInTheNodesOwnTaggedEntryInOrderAndFailTypedWithoutAMajority() throws Exception {
        org.apache.pekko.actor.ActorSystem system = org.apache.pekko.actor.ActorSystem.create("claims-test",
                com.typesafe.config.ConfigFactory.parseString("pekko.actor.provider = local\npekko.loglevel = ERROR"));
        try {
            FakeReplicator.answer = "success";
            FakeReplicator.state = org.apache.pekko.cluster.ddata.LWWMap.create();
            var replicator = system.actorOf(org.apache.pekko.actor.Props.create(FakeReplicator.class));
            var self = new org.apache.pekko.cluster.ddata.SelfUniqueAddress(new org.apache.pekko.cluster.UniqueAddress(
                    new org.apache.pekko.actor.Address("pekko", "claims-test"), 1L));
            ClusterMacs macs = new ClusterMacs(ClusterSecret.resolve("claims-test-secret-0123456789", ""));
            ClusterClaims claims = new ClusterClaims(7, replicator, self, macs, Duration.ofMillis(300));
            java.util.function.IntFunction<List<io.membus.core.replication.GroupClaim>> claim = epoch -> List.of(
                    new io.membus.core.replication.GroupClaim(GroupId.of(7, 0), epoch, io.membus.core.replication.GroupClaim
                            .Role.PRIMARY, 4096, 7, 99, new int[] {2}, 0));

            // published before the node's entry exists: written with it
            var early = claims.publish(7, claim.apply(65543));
            assertTrue(!early.isDone(), "waits for the node's first entry");
            assertNull(claims.current());
            ClusterMessage.NodeEntry base = new ClusterMessage.NodeEntry(7, 70, "pekko://t@h:1", 1, "local", "local:x",
                    List.of());
            claims.start(base).get(5, java.util.concurrent.TimeUnit.SECONDS);
            early.get(5, java.util.concurrent.TimeUnit.SECONDS);
            ClusterMessage.NodeEntry written = FakeReplicator.state.getEntries().get("7");
            assertEquals(claim.apply(65543), written.claims());
            assertTrue(macs.valid(written), "tagged over the claims");

            // later publications replace the claims, in the order they were made
            for (int round = 2; round <= 20; round++) {
                claims.publish(7, claim.apply(round << 16 | 7));
            }
            claims.publish(7, claim.apply(21 << 16 | 7)).get(5, java.util.concurrent.TimeUnit.SECONDS);
            written = FakeReplicator.state.getEntries().get("7");
            assertEquals(claim.apply(21 << 16 | 7), written.claims());
            assertTrue(macs.valid(written));
            assertEquals(written, claims.current());

            FakeReplicator.answer = "timeout";
            var noMajority = assertThrows(java.util.concurrent.ExecutionException.class,
                    () -> claims.publish(7, List.of()).get(5, java.util.concurrent.TimeUnit.SECONDS));
            assertInstanceOf(DsmTimeoutException.class, noMajority.getCause());
            FakeReplicator.answer = "silent";
            var noAnswer = assertThrows(java.util.concurrent.ExecutionException.class,
                    () -> claims.publish(7, List.of()).get(5, java.util.concurrent.TimeUnit.SECONDS));
            assertInstanceOf(DsmTimeoutException.class, noAnswer.getCause());

            var other = assertThrows(java.util.concurrent.ExecutionException.class,
                    () -> claims.publish(8, List.of()).get(5, java.util.concurrent.TimeUnit.SECONDS));
            assertTrue(other.getCause().getMessage().contains("publishes only its own claims"), other.getMessage());

            claims.close(new io.membus.core.error.DsmClosedException("node 7"));
            var closed = assertThrows(java.util.concurrent.ExecutionException.class,
                    () -> claims.publish(7, List.of()).get(5, java.util.concurrent.TimeUnit.SECONDS));
            assertInstanceOf(io.membus.core.error.DsmClosedException.class, closed.getCause());
        } finally {
            system.terminate();
            system.getWhenTerminated().toCompletableFuture().get(10, java.util.concurrent.TimeUnit.SECONDS);
        }
    }

    @Test
    void claimsPublishedBeforeAStartThatNeverCameFailWhenTheNodeCloses() {
        ClusterClaims claims = new ClusterClaims(7, null, null, null, TIMEOUT);
        var early = claims.publish(7, List.of());
        claims.close(new io.membus.core.error.DsmClosedException("node 7"));
        var e = assertThrows(java.util.concurrent.ExecutionException.class,
                () -> early.get(5, java.util.concurrent.TimeUnit.SECONDS));
        assertInstanceOf(io.membus.core.error.DsmClosedException.class, e.getCause());
    }
}
