package io.membus.collections;

import io.membus.core.message.ChannelStats;
import io.membus.core.message.Messaging;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;

/** Blocked take and lock on one node are woken by a message from the node that changed the state. */
class WakeUpsTest {

    private static long wakeUpsReceived(CollCluster c, int node) {
        return new Messaging(c.node(node).memory()).stats().stream()
                .filter(s -> s.channel() == WakeUps.CHANNEL).mapToLong(ChannelStats::messagesIn).sum();
    }

    /** A node has one WakeUps, found again through the channel handler it registered; each node its own. */
    @Test
    void aNodeHasOneWakeUpsFoundAgainThroughItsHandler() throws Exception {
        try (CollCluster c = new CollCluster("local", 2)) {
            WakeUps one = WakeUps.of(c.node(1).memory());
            assertSame(one, WakeUps.of(c.node(1).memory()), "node 1's again (no second registration of the channel)");
            assertNotSame(one, WakeUps.of(c.node(2).memory()), "node 2 has its own");
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"local", "shm"})
    void aBlockedTakeIsWokenByAMessage(String transport) throws Exception {
        try (CollCluster c = new CollCluster(transport, 2)) {
            DsmQueue<String> q1 = c.node(1).queue("q", String.class, 4);
            DsmQueue<String> q2 = c.node(2).queue("q", String.class, 4);
            long before = wakeUpsReceived(c, 1);
            CompletableFuture<String> taken = CompletableFuture.supplyAsync(() -> {
                try {
                    return q1.poll(60, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    throw new AssertionError(e);
                }
            });
            // the taker has registered node 1 in the take waiters word
            long waiters = q1.root().bodyPtr() + QueueDescriptor.TAKE_WAITERS_OFFSET;
            await().atMost(Duration.ofSeconds(30)).until(() -> (c.node(2).memory().readLong(waiters) & 2L) != 0);
            q2.put("job");
            assertEquals("job", taken.get(60, TimeUnit.SECONDS));
            await().atMost(Duration.ofSeconds(30)).until(() -> wakeUpsReceived(c, 1) > before);
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"local", "shm"})
    void aBlockedLockIsWokenByAMessage(String transport) throws Exception {
        try (CollCluster c = new CollCluster(transport, 2)) {
            DsmLock l1 = c.node(1).lock("l");
            DsmLock l2 = c.node(2).lock("l");
            l2.lock();
            long before = wakeUpsReceived(c, 1);
            CompletableFuture<Long> token = CompletableFuture.supplyAsync(() -> {
                long t = l1.lockWithToken();
                l1.unlock();
                return t;
            });
            long waiters = l1.root().bodyPtr() + LockWord.WAITERS_OFFSET;
            await().atMost(Duration.ofSeconds(30)).until(() -> (c.node(2).memory().readLong(waiters) & 2L) != 0);
            l2.unlock();
            assertEquals(2L, token.get(60, TimeUnit.SECONDS));
            // the handler counts the message after it has woken the waiter
            await().atMost(Duration.ofSeconds(30)).until(() -> wakeUpsReceived(c, 1) > before);
        }
    }
}
