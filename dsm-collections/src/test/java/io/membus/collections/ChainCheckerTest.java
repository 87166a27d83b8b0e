package io.membus.collections;

import io.membus.collections.ChainChecker.Event;
import org.junit.jupiter.api.Test;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The stress tests' checker accepts a consistent history and catches each planted violation. */
class ChainCheckerTest {
    private static final Set<Integer> KEY = Set.of(0);

    private static List<String> check(Map<Integer, String> fin, Event... events) {
        return ChainChecker.check(List.of(events), fin, KEY);
    }

    @Test
    void aConsistentChainPasses() {
        assertEquals(List.of(), check(Map.of(0, "b"),
                new Event(0, 'p', "a"), new Event(0, 'r', "a"), new Event(0, 'p', "b"), new Event(0, 'c', "a")));
        assertEquals(List.of(), check(Map.of(), new Event(0, 'p', "a"), new Event(0, 'c', "a")));
    }

    @Test
    void aLostUpdateIsCaught() {
        // two puts both report replacing "a": one of them overwrote the other's write unseen
        List<String> bad = check(Map.of(0, "c"), new Event(0, 'p', "a"), new Event(0, 'p', "b"), new Event(0, 'c', "a"),
                new Event(0, 'p', "c"), new Event(0, 'c', "a"));
        assertTrue(bad.stream().anyMatch(s -> s.contains("twice")), bad.toString());
    }

    @Test
    void aPhantomReadAVanishedWriteAndAStaleFinalValueAreCaught() {
        assertTrue(check(Map.of(), new Event(0, 'p', "a"), new Event(0, 'c', "a"), new Event(0, 'r', "zz"))
                .stream().anyMatch(s -> s.contains("read zz")));
        assertTrue(check(new HashMap<>(), new Event(0, 'p', "a"), new Event(0, 'p', "b"), new Event(0, 'c', "a"))
                .stream().anyMatch(s -> s.contains("vanished")));
        assertTrue(check(Map.of(0, "a"), new Event(0, 'p', "a"), new Event(0, 'p', "b"), new Event(0, 'c', "a"))
                .stream().anyMatch(s -> s.contains("not a live write")));
    }
}
