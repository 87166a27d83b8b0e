package io.membus.core.transport.message;

import io.membus.core.error.DsmException;
import io.membus.core.message.InlineMessageHandler;
import io.membus.core.transport.TransportConfig;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Messages of an {@link InlineMessageHandler} on an inbox opened inline: handled on the
 * delivering thread only when the sender's inbox is idle, in delivery order always
 * (docs/replication.md §3.5: the copy's I/O thread handles a run of effects).
 */
class InlineInboxTest {
    private static final short CHANNEL = 7;
    /** First payload byte: 1 may run inline, 0 must not; 2 blocks until released. */
    private static final byte INLINE = 1;
    private static final byte BLOCK = 2;

    private final List<String> handled = Collections.synchronizedList(new ArrayList<>());
    private final CountDownLatch release = new CountDownLatch(1);
    private final CountDownLatch blocked = new CountDownLatch(1);

    private final InlineMessageHandler handler = new InlineMessageHandler() {
        @Override
        public byte[] onMessage(int fromNode, byte[] payload) {
            if (payload[0] == BLOCK) {
                blocked.countDown();
                try {
                    assertTrue(release.await(30, TimeUnit.SECONDS), "never released");
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            handled.add(payload[1] + "@" + Thread.currentThread().getName());
            return new byte[]{payload[1]};
        }

        @Override
        public boolean inline(int fromNode, byte[] payload) {
            return payload[0] == INLINE;
        }
    };

    /** Collects the answers, with the thread that gave each. */
    private static final class Answers implements Responder {
        final LinkedBlockingQueue<String> answers = new LinkedBlockingQueue<>();

        @Override
        public void reply(long correlation, byte[] reply) {
            answers.add(correlation + ":" + reply[0] + "@" + Thread.currentThread().getName());
        }

        @Override
        public void fail(long correlation, DsmException failure) {
            answers.add(correlation + ":failed " + failure.getMessage());
        }

        String next() throws InterruptedException {
            String a = answers.poll(30, TimeUnit.SECONDS);
            assertNotNull(a, "no answer within 30 s");
            return a;
        }
    }

    private static MessageEndpoint endpoint() {
        return new MessageEndpoint(TransportConfig.builder(1).build(), n -> null);
    }

    @Test
    void anAcceptedMessageOnAnIdleInboxIsHandledAndAnsweredOnTheDeliveringThread() throws Exception {
        try (MessageEndpoint e = endpoint()) {
            e.register(CHANNEL, "test", handler);
            Answers answers = new Answers();
            Inbox inbox = e.open(2, answers, true);
            String me = Thread.currentThread().getName();
            assertTrue(inbox.deliver(1, CHANNEL, true, new byte[]{INLINE, 11}));
            // answered before deliver returned, on this thread
            assertEquals("1:11@" + me, answers.answers.poll());
            assertEquals(List.of("11@" + me), handled);
            assertEquals(0, inbox.size());
        }
    }

    @Test
    void withoutTheTransportsConsentEveryMessageRunsOnTheExecutor() throws Exception {
        try (MessageEndpoint e = endpoint()) {
            e.register(CHANNEL, "test", handler);
            Answers answers = new Answers();
            Inbox inbox = e.open(2, answers); // not inline
            assertTrue(inbox.deliver(1, CHANNEL, true, new byte[]{INLINE, 12}));
            String a = answers.next();
            assertTrue(a.startsWith("1:12@membus-msg-1-"), a);
        }
    }

    @Test
    void anAcceptedMessageBehindOneOnTheExecutorWaitsItsTurnThere() throws Exception {
        try (MessageEndpoint e = endpoint()) {
            e.register(CHANNEL, "test", handler);
            Answers answers = new Answers();
            Inbox inbox = e.open(2, answers, true);
            String me = Thread.currentThread().getName();
            assertTrue(inbox.deliver(1, CHANNEL, true, new byte[]{BLOCK, 1}));
            assertTrue(blocked.await(30, TimeUnit.SECONDS), "the first message never ran");
            // the executor runs message 1: these must queue behind it, in order, not run here
            assertTrue(inbox.deliver(2, CHANNEL, true, new byte[]{INLINE, 2}));
            assertTrue(inbox.deliver(3, CHANNEL, true, new byte[]{0, 3}));
            assertTrue(inbox.deliver(4, CHANNEL, true, new byte[]{INLINE, 4}));
            assertEquals(List.of(), handled);
            release.countDown();
            List<String> got = List.of(answers.next(), answers.next(), answers.next(), answers.next());
            for (int i = 0; i < 4; i++) {
                assertTrue(got.get(i).startsWith((i + 1) + ":" + (i + 1) + "@membus-msg-"), got.toString());
            }
            // once idle again, an accepted message runs here
            assertTrue(waitIdle(inbox), "the inbox never became idle");
            assertTrue(inbox.deliver(5, CHANNEL, true, new byte[]{INLINE, 5}));
            assertEquals("5:5@" + me, answers.answers.poll());
            List<String> order = new ArrayList<>();
            for (String h : handled) {
                order.add(h.substring(0, h.indexOf('@')));
            }
            assertEquals(List.of("1", "2", "3", "4", "5"), order);
            assertNotEquals(me, handled.get(3).substring(handled.get(3).indexOf('@') + 1));
        }
    }

    /** Whether the executor let go of the inbox (its turn ended) within 30 s. */
    private static boolean waitIdle(Inbox inbox) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (System.nanoTime() < end) {
            synchronized (inbox) {
                if (inbox.size() == 0 && !inbox.scheduledForTest()) {
                    return true;
                }
            }
            Thread.sleep(1);
        }
        return false;
    }
}
