package io.membus.test.history;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class HistoryRecorderTest {

    @Test
    void concurrentCallsAreRecordedWithTheirOutcomesAndOpenOnesCountAsIndeterminate() throws Exception {
        HistoryRecorder rec = new HistoryRecorder();
        int threads = 4;
        int each = 500;
        CountDownLatch go = new CountDownLatch(1);
        List<Thread> ts = new ArrayList<>();
        for (int p = 0; p < threads; p++) {
            int process = p;
            Thread t = new Thread(() -> {
                try {
                    go.await();
                } catch (InterruptedException e) {
                    return;
                }
                for (int i = 0; i < each; i++) {
                    HistoryRecorder.Call c = rec.invoke(process, "k" + (i % 3), "write", (long) i);
                    switch (i % 10) {
                        case 0 -> c.fail(new IllegalStateException("refused"));
                        case 1 -> c.info(new IllegalStateException("timeout"));
                        default -> c.ok(null);
                    }
                }
            });
            t.start();
            ts.add(t);
        }
        go.countDown();
        for (Thread t : ts) {
            t.join();
        }
        HistoryRecorder.Call open = rec.invoke(9, "k0", "read", null);
        History h = rec.history();
        assertEquals(threads * each + 1, h.operations().size());
        assertEquals(threads * each / 10, h.count(Outcome.FAIL));
        assertEquals(threads * each / 10 + 1, h.count(Outcome.INFO), "the open read counts as indeterminate");
        for (int i = 1; i < h.operations().size(); i++) {
            assertTrue(h.operations().get(i - 1).invokeNanos() <= h.operations().get(i).invokeNanos());
        }
        open.ok(0L);
        assertThrows(IllegalStateException.class, () -> open.ok(1L), "an operation completes once");
    }

    @Test
    void aHistoryRoundTripsThroughJsonLines(@TempDir Path dir) throws IOException {
        List<Operation> ops = List.of(
                new Operation(0, 1, "k \"1\"", "cas", List.of(1L, 2L), true, Outcome.OK, 10, 20),
                new Operation(1, 2, "k2", "read", null, 2.5, Outcome.OK, 15, 30),
                new Operation(2, 3, "k2", "write", "a\nb", null, Outcome.INFO, 16, 40));
        History h = new History(ops, List.of(new FaultWindow("partition", "[1] | [2, 3]", 5, 25)));
        Path f = dir.resolve("history.jsonl");
        HistoryFiles.write(h, f);
        assertEquals(h, HistoryFiles.read(f));
        Files.writeString(f, "{\"type\":\"op\",\"id\":\"x\"}\n");
        IOException e = assertThrows(IOException.class, () -> HistoryFiles.read(f));
        assertTrue(e.getMessage().contains(":1: not a history record"), e.getMessage());
    }
}
