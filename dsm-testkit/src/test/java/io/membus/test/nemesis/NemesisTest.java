package io.membus.test.nemesis;

import io.membus.core.error.DsmConfigException;
import io.membus.core.fault.FaultInjector;
import io.membus.core.time.SkewableClock;
import io.membus.test.history.FaultWindow;
import io.membus.test.history.HistoryRecorder;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

class NemesisTest {

    private static Map<Integer, FaultInjector> injectors(int n) {
        Map<Integer, FaultInjector> m = new TreeMap<>();
        for (int i = 1; i <= n; i++) {
            m.put(i, new FaultInjector());
        }
        return m;
    }

    @Test
    void aPartitionCutsAMinorityFromTheRestBothWaysAndHeals() {
        long seed = Long.getLong("membus.seed", System.nanoTime());
        System.out.println("NemesisTest seed=" + seed);
        Map<Integer, FaultInjector> nodes = injectors(5);
        Fault f = TransportNemesis.partition(nodes).start(new Random(seed));
        String[] sides = f.targets().split("\\|");
        List<Integer> a = parse(sides[0]);
        List<Integer> b = parse(sides[1]);
        assertTrue(a.size() < b.size() && a.size() + b.size() == 5, f.targets());
        for (int x : a) {
            for (int y : b) {
                assertTrue(nodes.get(x).rule(y).drop() && nodes.get(y).rule(x).drop(), x + " and " + y + " are cut");
            }
            for (int z : a) {
                assertNull(nodes.get(x).rule(z), "the minority still talks among itself");
            }
        }
        f.heal();
        f.heal();
        nodes.values().forEach(i -> assertFalse(i.active(), "healed"));
    }

    private static List<Integer> parse(String side) {
        List<Integer> ids = new ArrayList<>();
        for (String s : side.replaceAll("[\\[\\] ]", "").split(",")) {
            ids.add(Integer.parseInt(s));
        }
        return ids;
    }

    @Test
    void delayAndDropHitOnePair() {
        Map<Integer, FaultInjector> nodes = injectors(3);
        Fault d = TransportNemesis.delay(nodes, Duration.ofMillis(30)).start(new Random(1));
        long delayed = nodes.values().stream().filter(FaultInjector::active).count();
        assertEquals(2, delayed, d.targets());
        d.heal();
        Fault drop = TransportNemesis.drop(nodes).start(new Random(2));
        assertEquals(1, nodes.values().stream().filter(FaultInjector::active).count(), drop.targets());
        drop.close();
        nodes.values().forEach(i -> assertFalse(i.active()));
    }

    @Test
    void skewMovesOneClockAndHealingPutsItBack() {
        SkewableClock one = new SkewableClock();
        SkewableClock two = new SkewableClock();
        Fault f = new ClockNemesis(Map.of(1, one, 2, two), Duration.ofMillis(100)).start(new Random(3));
        long moved = Math.abs(one.skewMicros()) + Math.abs(two.skewMicros());
        assertTrue(moved >= 50_000 && moved <= 100_000, "skew within [magnitude/2, magnitude]: " + f.targets());
        f.heal();
        assertEquals(0, one.skewMicros());
        assertEquals(0, two.skewMicros());
    }

    /** A node that is a real process ({@code sleep}), started by the test. */
    private static final class SleepNode implements NodeProcess {
        private final int id;
        private volatile Process process;
        final AtomicInteger restarts = new AtomicInteger();

        SleepNode(int id) throws IOException {
            this.id = id;
            this.process = new ProcessBuilder("sleep", "120").start();
        }

        @Override
        public int nodeId() {
            return id;
        }

        @Override
        public long pid() {
            return process.pid();
        }

        @Override
        public void kill() {
            process.destroyForcibly();
            try {
                process.waitFor(10, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }

        @Override
        public void restart() {
            try {
                process = new ProcessBuilder("sleep", "120").start();
                restarts.incrementAndGet();
            } catch (IOException e) {
                throw new IllegalStateException(e);
            }
        }

        char state() throws IOException {
            String stat = Files.readString(Path.of("/proc/" + pid() + "/stat"));
            return stat.charAt(stat.lastIndexOf(')') + 2);
        }
    }

    @Test
    void pauseStopsTheProcessAndKillRestartsIt() throws Exception {
        SleepNode node = new SleepNode(1);
        try {
            Fault pause = ProcessNemesis.pause(List.of(node)).start(new Random(4));
            assertEquals('T', node.state(), "SIGSTOP stops it: " + pause.targets());
            pause.heal();
            assertTrue(node.state() != 'T', "SIGCONT resumes it");

            long before = node.pid();
            Fault kill = ProcessNemesis.kill(List.of(node)).start(new Random(5));
            assertFalse(ProcessHandle.of(before).map(ProcessHandle::isAlive).orElse(false), "killed: " + kill.targets());
            kill.heal();
            assertEquals(1, node.restarts.get());
            assertTrue(node.pid() != before && ProcessHandle.of(node.pid()).orElseThrow().isAlive(), "restarted");
        } finally {
            node.kill();
        }
    }

    @Test
    void theScheduleRecordsEveryFaultWindowAndEndsHealed() throws Exception {
        Map<Integer, FaultInjector> nodes = injectors(3);
        HistoryRecorder recorder = new HistoryRecorder();
        NemesisSchedule schedule = NemesisSchedule.start(List.of(TransportNemesis.partition(nodes),
                TransportNemesis.drop(nodes)), recorder, 42, Duration.ofMillis(20), Duration.ofMillis(30));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (schedule.faultsStarted() < 3 && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        schedule.close();
        assertNull(schedule.failure());
        List<FaultWindow> windows = recorder.history().faults();
        assertTrue(windows.size() >= 3, "windows: " + windows);
        for (FaultWindow w : windows) {
            assertTrue(w.endNanos() >= w.startNanos() && (w.kind().equals("partition") || w.kind().equals("drop")), w.toString());
        }
        nodes.values().forEach(i -> assertFalse(i.active(), "a closed schedule leaves nothing cut"));
        assertNotNull(recorder.history());
    }

    @Test
    void badArgumentsAreRefusedWithWhatIsAllowed() {
        DsmConfigException one = org.junit.jupiter.api.Assertions.assertThrows(DsmConfigException.class,
                () -> TransportNemesis.partition(injectors(1)));
        assertEquals("bad config: key=partition nemesis nodes, value=[1], allowed=2 or more nodes", one.getMessage());
        DsmConfigException noClocks = org.junit.jupiter.api.Assertions.assertThrows(DsmConfigException.class,
                () -> new ClockNemesis(Map.of(), Duration.ofMillis(5)));
        assertEquals("bad config: key=skew nemesis clocks, value=[] (none), allowed=one or more clocks",
                noClocks.getMessage());
        DsmConfigException zero = org.junit.jupiter.api.Assertions.assertThrows(DsmConfigException.class,
                () -> new ClockNemesis(Map.of(1, new SkewableClock()), Duration.ZERO));
        assertEquals("bad config: key=skew nemesis magnitude, value=PT0S, allowed=a positive duration",
                zero.getMessage());
    }
}
