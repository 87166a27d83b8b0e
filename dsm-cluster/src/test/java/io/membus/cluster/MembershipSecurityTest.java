package io.membus.cluster;

import com.typesafe.config.ConfigFactory;
import io.membus.core.error.AuthenticationException;
import io.membus.core.error.DsmException;
import org.apache.pekko.actor.ActorSystem;
import org.apache.pekko.actor.Address;
import org.apache.pekko.actor.AddressFromURIString;
import org.apache.pekko.cluster.Cluster;
import org.apache.pekko.cluster.Member;
import org.apache.pekko.cluster.MemberStatus;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;

import static io.membus.cluster.TestClusters.config;
import static io.membus.cluster.TestClusters.freePort;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The attacks of issue 26 against the default configuration (membership authenticated by
 * the cluster secret): a stranger that knows only the seed's address and the cluster name,
 * and a node started with a wrong secret. Both must stay out: not a member, not counted,
 * unable to down anyone.
 */
@Tag("slow") // over 20 s: the slow tier (failsafe, mvn verify), so that mvn test stays under 4 minutes
class MembershipSecurityTest {
    private final List<DsmNode> nodes = new ArrayList<>();
    private final List<ActorSystem> strangers = new ArrayList<>();
    private final String fabric = "security-" + System.nanoTime();

    @AfterEach
    void close() {
        for (ActorSystem s : strangers) {
            s.terminate();
        }
        nodes.forEach(DsmNode::close);
        for (ActorSystem s : strangers) {
            try {
                s.getWhenTerminated().toCompletableFuture().get(10, TimeUnit.SECONDS);
            } catch (Exception ignored) {
                // best effort
            }
        }
    }

    private DsmNode start(int id, int port, int seed, String extra) {
        DsmNode n = DsmNode.start(NodeConfig.parse(config(id, port, seed, "local",
                "membus.transports.local.fabric = \"" + fabric + "\"\n" + extra)));
        nodes.add(n);
        return n;
    }

    /** A bare Pekko cluster system, as the attacker had: no Membus classes, no secret, plain Artery TCP. */
    private ActorSystem stranger(String role) {
        ActorSystem s = ActorSystem.create("test", ConfigFactory.parseMap(Map.of(
                "pekko.actor.provider", "cluster",
                "pekko.remote.artery.canonical.hostname", "127.0.0.1",
                "pekko.remote.artery.canonical.port", 0,
                "pekko.cluster.roles", List.of(role, role + "-9"),
                "pekko.cluster.seed-node-timeout", "1s",
                "pekko.cluster.retry-unsuccessful-join-after", "500ms",
                "pekko.loglevel", "ERROR",
                "pekko.coordinated-shutdown.run-by-jvm-shutdown-hook", "off",
                "pekko.cluster.jmx.enabled", "off")).withFallback(ConfigFactory.parseMap(Map.of(
                // what the seed checks on a join (configuration compatibility): public knowledge
                "pekko.cluster.downing-provider-class", "org.apache.pekko.cluster.sbr.SplitBrainResolverProvider",
                "pekko.cluster.split-brain-resolver.active-strategy", "keep-majority",
                "pekko.cluster.split-brain-resolver.keep-majority.role", "membus-node")))
                .withFallback(ConfigFactory.load()));
        strangers.add(s);
        return s;
    }

    private static Set<String> members(DsmNode n, Cluster viewOf) {
        TreeSet<String> out = new TreeSet<>();
        for (Member m : viewOf.state().getMembers()) {
            out.add(m.address() + " " + m.status());
        }
        return out;
    }

    @Test
    @Timeout(value = 90, unit = TimeUnit.SECONDS)
    void aStrangerKnowingOnlyTheSeedAndTheClusterNameNeverJoinsNorDownsAnyone() throws Exception {
        int seed = freePort();
        DsmNode one = start(1, seed, seed, "");
        DsmNode two = start(2, freePort(), seed, "");
        assertEquals(2, two.awaitMembers(2, Duration.ofSeconds(30)));
        Cluster view = Cluster.get(clusterSystemOf(one));
        Set<String> before = members(one, view);

        ActorSystem attacker = stranger(ClusterAgent.NODE_ROLE);
        Cluster a = Cluster.get(attacker);
        Address seedAddress = AddressFromURIString.parse("pekko://test@127.0.0.1:" + seed);
        a.joinSeedNodes(List.of(seedAddress));
        // as in the attack: once "in", it downs node 2
        Address nodeTwo = AddressFromURIString.parse(two.memberAddress());
        long deadline = System.nanoTime() + Duration.ofSeconds(8).toNanos();
        while (System.nanoTime() < deadline) {
            a.down(nodeTwo);
            assertFalse(a.selfMember().status() == MemberStatus.up(), "the stranger became an Up member");
            Thread.sleep(200);
        }
        assertEquals(before, members(one, view), "the cluster's members are unchanged");
        assertFalse(members(one, view).stream().anyMatch(m -> m.startsWith(a.selfAddress() + " ")),
                "the stranger is no member: " + members(one, view));
        assertFalse(two.isDown(), "node 2 was not downed: " + two.downReason());
        assertFalse(one.isDown(), "node 1 was not downed: " + one.downReason());
        assertEquals(2, one.directory().members().size());
    }

    @Test
    @Timeout(value = 90, unit = TimeUnit.SECONDS)
    void aNodeWithAWrongSecretCannotJoinAndIsToldWhy() {
        int seed = freePort();
        DsmNode one = start(1, seed, seed, "");
        AuthenticationException e = assertThrows(AuthenticationException.class, () -> start(2, freePort(), seed,
                "membus.secret = \"a-wrong-secret-0123456789\"\nmembus.start-timeout = 6s\n"));
        assertTrue(e.getMessage().contains("membership handshake refused"), e.getMessage());
        assertTrue(e.getMessage().contains("wrong membus.secret?"), e.getMessage());
        assertFalse(e.getMessage().contains("a-wrong-secret"), "the secret is never printed: " + e.getMessage());
        Cluster view = Cluster.get(clusterSystemOf(one));
        assertEquals(1, members(one, view).size(), "only node 1 is a member: " + members(one, view));
        assertFalse(one.isDown());
    }

    @Test
    @Timeout(value = 90, unit = TimeUnit.SECONDS)
    void statusAnswersAQueryWithTheSecretAndNobodyElse() {
        int seed = freePort();
        DsmNode one = start(1, seed, seed, "");
        ClusterMessage.StatusReply reply = ClusterStatus.query("127.0.0.1:" + seed, "test", "127.0.0.1",
                Duration.ofSeconds(10), one.config());
        assertEquals(1, reply.members().size());
        NodeConfig wrong = NodeConfig.parse(config(9, 0, seed, "local",
                "membus.secret = \"a-wrong-secret-0123456789\"\n"));
        assertThrows(DsmException.class, () -> ClusterStatus.query("127.0.0.1:" + seed, "test", "127.0.0.1",
                Duration.ofSeconds(2), wrong));
        NodeConfig plain = NodeConfig.parse(config(9, 0, seed, "local", "membus.security.authenticate = off\n"));
        assertThrows(DsmException.class, () -> ClusterStatus.query("127.0.0.1:" + seed, "test", "127.0.0.1",
                Duration.ofSeconds(2), plain));
    }

    @Test
    @Timeout(value = 90, unit = TimeUnit.SECONDS)
    void withAuthenticationOffMembershipIsPlainAndStillWorks() {
        int seed = freePort();
        String off = "membus.security.authenticate = off\n";
        start(1, seed, seed, off);
        DsmNode two = start(2, freePort(), seed, off);
        assertEquals(2, two.awaitMembers(2, Duration.ofSeconds(30)));
        assertEquals(NodeConfig.Membership.OFF, two.config().membership());
        assertEquals(NodeConfig.Membership.SECRET_TLS, NodeConfig.parse(config(3, 0, seed, "local", "")).membership());
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void withAuthenticationOffAMemberWithAWrongSecretCanDoNothingToTheNames() throws Exception {
        int seed = freePort();
        // the arbiter's checks are what this test is about: with replication on (the default) names would be a table
        // in replicated memory, which needs heap segments these nodes do not have
        String off = "membus.security.authenticate = off\nmembus.names.table = off\n";
        DsmNode one = start(1, seed, seed, off);
        DsmNode two = start(2, freePort(), seed, off);
        DsmNode intruder = start(3, freePort(), seed, off + "membus.secret = \"a-wrong-secret-0123456789\"\n");
        TestClusters.await("node 3 is a member (authentication is off)", Duration.ofSeconds(30),
                () -> Cluster.get(one.actorSystem()).state().members().size() == 3);
        long pa = io.membus.core.RemotePtr.pack(1, 0, 8);
        long pb = io.membus.core.RemotePtr.pack(1, 0, 16);
        long pc = io.membus.core.RemotePtr.pack(2, 0, 24);
        assertEquals(pa, one.names().bind("a", pa));
        assertEquals(pb, one.names().bind("b", pb));
        assertEquals(pc, two.names().bind("c", pc));

        // through the registry: the arbiter (node 1) refuses its binds and unbinds
        assertThrows(AuthenticationException.class, () -> intruder.names().bind("a2", pb));
        assertThrows(AuthenticationException.class, () -> intruder.names().unbind("c"));
        // and what it reads is nothing it can use: every binding fails its check there
        assertTrue(intruder.names().bindings().isEmpty(), intruder.names().bindings().toString());
        // the directory entries of the legitimate nodes are not accepted by it, nor is its entry by them
        assertTrue(one.directory().member(3).isEmpty(), "node 3's directory entry is ignored");
        assertEquals(2, one.directory().members().size());

        // straight into the replicated map, past the arbiter: a binding without the secret's tag
        org.apache.pekko.actor.ActorRef replicator =
                org.apache.pekko.cluster.ddata.DistributedData.get(intruder.actorSystem()).replicator();
        var self = org.apache.pekko.cluster.ddata.DistributedData.get(intruder.actorSystem()).selfUniqueAddress();
        Object r = org.apache.pekko.pattern.Patterns.ask(replicator, new org.apache.pekko.cluster.ddata.Replicator.Update<
                org.apache.pekko.cluster.ddata.LWWMap<String, ClusterMessage.NameBinding>>(ClusterAgent.NAMES,
                org.apache.pekko.cluster.ddata.LWWMap.create(), new org.apache.pekko.cluster.ddata.Replicator.WriteAll(
                Duration.ofSeconds(5)), m -> m.put(self, "b2", new ClusterMessage.NameBinding(pa, 1, 2))),
                Duration.ofSeconds(10)).toCompletableFuture().get(15, TimeUnit.SECONDS);
        assertTrue(r instanceof org.apache.pekko.cluster.ddata.Replicator.UpdateSuccess, r.toString());
        assertTrue(two.names().lookup("b2").isEmpty(), "a binding without the secret's tag is no binding");
        assertFalse(one.names().bindings().containsKey("b2"));
        assertEquals(pa, two.names().lookup("a").orElseThrow());
        assertEquals(pb, two.names().lookup("b").orElseThrow());
        assertEquals(pc, one.names().lookup("c").orElseThrow());
        // and the arbiter binds over it: a binding with a wrong tag was never bound
        assertEquals(pb, two.names().bind("b2", pb));
        assertEquals(pb, one.names().lookup("b2").orElseThrow());
    }

    private static ActorSystem clusterSystemOf(DsmNode n) {
        return n.actorSystem();
    }
}
