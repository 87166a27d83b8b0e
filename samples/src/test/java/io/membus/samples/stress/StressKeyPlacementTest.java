package io.membus.samples.stress;

import io.membus.alloc.Placement;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

import java.util.Set;
import java.util.TreeSet;
import java.util.stream.IntStream;

import static org.junit.jupiter.api.Assertions.assertEquals;

/** {@code membus stress}'s collection keys spread over every memory node by default. */
class StressKeyPlacementTest {

    @Test
    void withTheDefaultsEveryNodeIsHomeToAKeyOfEveryCollectionWorkload() {
        StressCommand defaults = new StressCommand();
        new CommandLine(defaults).parseArgs();
        int nodes = defaults.nodes;
        int keys = defaults.keys;
        int[] all = IntStream.rangeClosed(1, nodes).toArray();
        for (String prefix : new String[] {"stress-register-", "stress-counter-", "stress-queue-", "stress-lock-"}) {
            Set<Integer> homes = new TreeSet<>();
            Set<Integer> hashedHomes = new TreeSet<>();
            for (int k = 0; k < keys; k++) {
                String name = CollectionWorkloads.spreadName(prefix, k, nodes);
                int home = Placement.homeOf(name, all);
                assertEquals(k % nodes + 1, home, name);
                assertEquals(name, CollectionWorkloads.spreadName(prefix, k, nodes), "the same name every time");
                homes.add(home);
                hashedHomes.add(Placement.homeOf(prefix + k, all));
            }
            System.out.println(prefix + ": keys on nodes " + homes + " (names as hashed before: " + hashedHomes + ")");
            assertEquals(Math.min(keys, nodes), homes.size(), prefix + " keys on every node");
        }
    }

    @Test
    void moreKeysThanNodesGoRoundTheNodes() {
        for (int nodes = 2; nodes <= 9; nodes++) {
            int[] all = IntStream.rangeClosed(1, nodes).toArray();
            for (int k = 0; k < 20; k++) {
                assertEquals(k % nodes + 1, Placement.homeOf(CollectionWorkloads.spreadName("stress-lock-", k, nodes), all));
            }
        }
    }
}
