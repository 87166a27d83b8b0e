package io.membus.core;

import io.membus.core.error.BlockingCallOnTransportThreadException;
import io.membus.core.transport.WaitHelp;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link WaitHelp}'s waits: a routed verb's future refuses a blocking wait in a callback a transport's
 * delivery runs, and {@link WaitHelp#beforeWait} helps the thread's registered work without ever waiting
 * for work another thread does, stopping once the awaited future is done.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class WaitHelpRoutedTest {

    @Test
    void aRoutedFutureNotDoneRefusesEveryBlockingWaitInACallbackOfADelivery() {
        RoutedFuture<String> f = new RoutedFuture<>();
        List<Object> seen = new ArrayList<>();
        WaitHelp.delivering(() -> {
            seen.add(assertThrows(BlockingCallOnTransportThreadException.class, f::join));
            seen.add(assertThrows(BlockingCallOnTransportThreadException.class, f::get));
            seen.add(assertThrows(BlockingCallOnTransportThreadException.class, () -> f.get(10, TimeUnit.SECONDS)));
        });
        assertEquals(3, seen.size());
        for (Object e : seen) {
            assertTrue(!((BlockingCallOnTransportThreadException) e).mayHaveRun(), "not run: " + e);
        }
        RoutedFuture<String> done = new RoutedFuture<>();
        done.complete("v");
        WaitHelp.delivering(() -> seen.add(done.join())); // done already: no wait, no refusal
        assertEquals("v", seen.get(3));
    }

    /** A pending entry another thread has taken: {@code help} does nothing, it settles when told. */
    private static final class TakenElsewhere implements WaitHelp.Pending {
        volatile boolean settled;
        int helped;

        @Override
        public boolean settled() {
            return settled;
        }

        @Override
        public void help(long waitNanos) {
            helped++;
        }
    }

    @Test
    void beforeWaitHelpsOnceAndNeverWaitsForWorkAnotherThreadDoes() {
        TakenElsewhere p = new TakenElsewhere();
        WaitHelp.register(p);
        try {
            CompletableFuture<String> awaited = new CompletableFuture<>();
            WaitHelp.beforeWait(WaitHelp.FOREVER, awaited); // returns: the entry is another thread's to finish
            assertEquals(1, p.helped, "helped once");
            assertEquals(1, WaitHelp.registered(), "kept for the next wait while unsettled");
            awaited.complete("done");
            WaitHelp.beforeWait(WaitHelp.FOREVER, awaited); // the awaited future is done: nothing to help
            assertEquals(1, p.helped, "no help once the awaited future is done");
        } finally {
            p.settled = true;
            WaitHelp.beforeWait(WaitHelp.FOREVER, new CompletableFuture<>()); // drops the settled entry
        }
        assertEquals(0, WaitHelp.registered());
    }

    @Test
    void aRoutedFutureWaitsForItselfAfterHelping() throws Exception {
        TakenElsewhere p = new TakenElsewhere();
        WaitHelp.register(p);
        RoutedFuture<String> f = new RoutedFuture<>();
        Thread completer = new Thread(() -> f.complete("answer"), "test-completer");
        try {
            completer.start();
            assertEquals("answer", f.get()); // helps p once, then waits for f only (p never settles meanwhile)
            assertTrue(p.helped <= 1, "helped at most once: " + p.helped);
        } finally {
            completer.join();
            p.settled = true;
            WaitHelp.beforeWait(WaitHelp.FOREVER, new CompletableFuture<>());
        }
        assertInstanceOf(String.class, f.join());
    }
}
