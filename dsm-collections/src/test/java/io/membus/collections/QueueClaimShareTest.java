package io.membus.collections;

import io.membus.alloc.GlobalAllocator;
import io.membus.codec.Codecs;
import io.membus.core.OperationDeadline;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.time.Duration;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Threads of one queue handle share a claim CAS in flight ({@code QueueClaims.share}): a
 * thread that waits for another's claim answer waits no longer than its own operation's
 * deadline allows, not until the other thread's verb (and its give-back) ends.
 */
class QueueClaimShareTest {
    private MapCluster cluster;
    private final Map<Integer, RoundTripTransport> transports = new TreeMap<>();

    @AfterEach
    void close() {
        transports.values().forEach(t -> {
            t.holdCas = null;
            t.releaseHeld();
        });
        if (cluster != null) {
            cluster.close();
        }
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aThreadWaitingForAnotherThreadsClaimAnswerStopsAtItsOwnDeadline() throws Exception {
        cluster = new MapCluster("local", 1, 8 << 20, Duration.ofSeconds(2), (id, t) -> {
            RoundTripTransport r = new RoundTripTransport(t);
            transports.put(id, r);
            return r;
        });
        GlobalAllocator a = cluster.node(1);
        DsmQueue<Long> q = new DsmCollections(a.memory(), a, cluster.directory).queue("jobs", Codecs.longs(), 16);
        RoundTripTransport t = transports.get(1);
        AtomicInteger claims = new AtomicInteger();
        AtomicInteger giveBacks = new AtomicInteger();
        t.holdCas = v -> {
            if (SlotState.phase(v[1]) == SlotState.WRITING && SlotState.phase(v[2]) == SlotState.EMPTY) {
                giveBacks.incrementAndGet(); // an offer's claim given back (unclaim)
            }
            // the first offer's claim CAS (EMPTY -> WRITING) is held
            return SlotState.phase(v[1]) == SlotState.EMPTY && SlotState.phase(v[2]) == SlotState.WRITING
                    && claims.getAndIncrement() == 0;
        };
        CompletableFuture<Object> first = new CompletableFuture<>();
        Thread holder = new Thread(() -> {
            try {
                first.complete(q.offer(1L));
            } catch (Throwable e) {
                first.complete(e);
            }
        }, "test-held-claim");
        holder.start();
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (t.heldCount() == 0) {
            assertTrue(System.nanoTime() - until < 0, "the first claim was not sent");
            Thread.sleep(1);
        }
        // this thread wants the same ticket (the handle's tail hint): it waits for the held claim's answer,
        // under a deadline of its own far shorter than that claim's verb timeout
        Object second;
        long scope = OperationDeadline.enter(Duration.ofMillis(50));
        try {
            second = q.offer(2L);
        } catch (RuntimeException e) {
            second = e;
        } finally {
            OperationDeadline.exit(scope);
        }
        assertEquals(1, t.heldCount(), "returned while the first claim is still held (" + second + ")");
        assertEquals(0, giveBacks.get(), "and without waiting for its give-back");
        assertTrue(!first.isDone(), "the first offer still runs");
        t.holdCas = null;
        t.releaseHeld();
        holder.join(TimeUnit.SECONDS.toMillis(60));
        assertTrue(first.isDone(), "the first offer ended");
        System.out.println("QueueClaimShareTest: first offer " + first.get() + ", second " + second);
    }
}
