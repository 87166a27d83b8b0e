package io.membus.test.nemesis;

import io.membus.core.error.DsmConfigException;
import io.membus.core.error.DsmTimeoutException;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The kill-permanent nemesis' rules, on stand-in processes (no process is started). */
class KillPermanentNemesisTest {

    /** A memory node that only records that it was killed; restarting it is a test failure. */
    private record FakeNode(int nodeId, List<Integer> kills) implements NodeProcess {
        @Override
        public long pid() {
            return 1000 + nodeId;
        }

        @Override
        public void kill() {
            kills.add(nodeId);
        }

        @Override
        public void restart() {
            throw new AssertionError("kill-permanent restarted node " + nodeId);
        }
    }

    private static List<NodeProcess> nodes(int n, List<Integer> kills) {
        List<NodeProcess> all = new ArrayList<>();
        for (int id = 1; id <= n; id++) {
            all.add(new FakeNode(id, kills));
        }
        return all;
    }

    @Test
    void killsNodesThatHoldGroupsForGoodAndNeverTheLastOnePlusBackups() {
        long seed = Long.getLong("membus.seed", System.nanoTime());
        System.out.println("KillPermanentNemesisTest seed=" + seed);
        List<Integer> kills = new CopyOnWriteArrayList<>();
        List<Set<Integer>> asked = new CopyOnWriteArrayList<>();
        ProcessNemesis.ReplicaHealth health = new ProcessNemesis.ReplicaHealth() {
            @Override
            public boolean inSync(Set<Integer> gone) {
                asked.add(gone);
                return true;
            }

            @Override
            public boolean holdsGroups(int nodeId) {
                return nodeId != 5; // node 5 holds nothing: never a target
            }
        };
        ProcessNemesis nemesis = ProcessNemesis.killPermanent(nodes(5, kills), 1, health, Duration.ofSeconds(5));
        Random random = new Random(seed);
        for (int i = 0; i < 3; i++) {
            Fault f = nemesis.start(random);
            assertEquals("kill-permanent", f.kind());
            assertTrue(f.targets().startsWith("node "), f.targets());
            f.heal(); // does nothing: never restarted
        }
        assertEquals(3, kills.size(), "three of five nodes killed: " + kills);
        assertFalse(kills.contains(5), "a node without groups is never killed: " + kills);
        assertEquals(3, Set.copyOf(kills).size(), "each killed once: " + kills);
        assertEquals(Set.copyOf(kills), nemesis.killed());
        // two memory nodes left = 1 + backups: no more kills
        Fault none = nemesis.start(random);
        assertTrue(none.targets().startsWith("none"), none.targets());
        assertEquals(3, kills.size());
        // each kill first asked whether the cluster was whole after the previous ones
        assertEquals(Set.of(), asked.get(0));
        assertEquals(Set.of(kills.get(0)), asked.get(1));
        assertEquals(Set.of(kills.get(0), kills.get(1)), asked.get(2));
    }

    @Test
    void waitsForTheGroupsToBeInSyncBeforeTheNextKillAndFailsWhenTheyNeverAre() {
        List<Integer> kills = new CopyOnWriteArrayList<>();
        AtomicBoolean whole = new AtomicBoolean(true);
        ProcessNemesis.ReplicaHealth health = new ProcessNemesis.ReplicaHealth() {
            @Override
            public boolean inSync(Set<Integer> gone) {
                return whole.get();
            }

            @Override
            public boolean holdsGroups(int nodeId) {
                return true;
            }
        };
        ProcessNemesis nemesis = ProcessNemesis.killPermanent(nodes(4, kills), 1, health, Duration.ofMillis(300));
        nemesis.start(new Random(1));
        assertEquals(1, kills.size());
        whole.set(false); // re-replication never finishes
        DsmTimeoutException e = assertThrows(DsmTimeoutException.class, () -> nemesis.start(new Random(2)));
        assertTrue(e.getMessage().startsWith("timeout: operation=kill-permanent: wait until the cluster is whole again"
                + " after the kill of node(s) [") && e.getMessage().contains("timeout=300ms")
                && e.getMessage().contains("raise the settle timeout"), e.getMessage());
        assertEquals(1, kills.size(), "no second kill while a group is short of copies");
    }

    @Test
    void refusesAClusterWithoutBackups() {
        DsmConfigException e = assertThrows(DsmConfigException.class, () -> ProcessNemesis.killPermanent(nodes(3, new ArrayList<>()), 0,
                new ProcessNemesis.ReplicaHealth() {
                    @Override
                    public boolean inSync(Set<Integer> gone) {
                        return true;
                    }

                    @Override
                    public boolean holdsGroups(int nodeId) {
                        return true;
                    }
                }, Duration.ofSeconds(1)));
        assertEquals("membus.replication.backups", e.key());
        assertEquals("0", e.value());
        assertTrue(e.getMessage().startsWith("bad config: key=membus.replication.backups, value=0, allowed=1 or more for"
                + " a kill-permanent nemesis"), e.getMessage());
    }

    @Test
    void refusesNoNodes() {
        DsmConfigException e = assertThrows(DsmConfigException.class, () -> ProcessNemesis.kill(List.of()));
        assertEquals("bad config: key=kill nemesis nodes, value=[] (none), allowed=one or more node processes",
                e.getMessage());
    }
}
