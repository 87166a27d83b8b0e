package io.membus.core.replication;

import io.membus.core.Segment;
import io.membus.core.fault.FaultInjector;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Issue 27, the primary's side: every waiter of {@link ReplicaGroup#whenAcked} is called
 * once its sequence is acknowledged, however the acknowledgement came (a copy's answer,
 * or a change that advanced the watermark itself while no copy is in sync), and one
 * callback that throws does not strand the others. Streams here never send anywhere:
 * their messages are never answered.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ReplicaGroupWakeupTest {
    private static final int SELF = 1;
    private static final int COPY = 2;
    private final List<Segment> segments = new ArrayList<>();

    /** A carrier whose messages are never answered. */
    private static final class Silent implements CopyStream.Carrier {
        private final FaultInjector faults = new FaultInjector();

        @Override
        public CompletableFuture<byte[]> send(int node, byte[] payload) {
            return new CompletableFuture<>();
        }

        @Override
        public void acknowledged(int copyNode, int group, byte status, long epoch, long applied, boolean inSync) {
        }

        @Override
        public boolean reachable(int node) {
            return true;
        }

        @Override
        public int maxMessageSize() {
            return 64 << 10;
        }

        @Override
        public FaultInjector faults() {
            return faults;
        }
    }

    @AfterEach
    void closeSegments() {
        segments.forEach(Segment::close);
        segments.clear();
    }

    private ReplicaGroup group() {
        Segment m = Segment.allocate(SELF, 1, 0, 1 << 16, io.membus.core.Access.ALL);
        segments.add(m);
        return new ReplicaGroup(GroupId.of(SELF, 0), SELF, m, Ballot.initial(SELF), 0, 1024, 4096,
                Duration.ofSeconds(20), g -> { });
    }

    private static CopyStream stream() {
        ReplicationConfig c = new ReplicationConfig(1, 1 << 20, 1L << 40, 4096, 0);
        return new CopyStream(COPY, new Silent(), c, Duration.ofSeconds(5));
    }

    @Test
    void aCallbackThatThrowsDoesNotStrandTheWaitersBehindIt() {
        ReplicaGroup g = group();
        g.addInSync(COPY, stream());
        g.writeLong(0, 42);
        assertEquals(1, g.need());
        AtomicInteger called = new AtomicInteger();
        g.whenAcked(1, failure -> {
            called.incrementAndGet();
            throw new IllegalStateException("test: a callback that fails");
        });
        g.whenAcked(1, failure -> called.incrementAndGet());
        g.acknowledged(COPY, 1, true); // must not throw into the stream's thread either
        assertEquals(2, called.get(), "both callbacks ran");
    }

    /**
     * While its only copy is joining, a change acknowledges itself (the watermark moves to its
     * sequence under the lock); a reader that read {@code need()} between the change's publish
     * and that store queues a waiter that only a later release wakes. The copy never answers
     * here: the changes themselves must wake it.
     */
    @Test
    void aWaiterQueuedWhileAChangeAcknowledgesItselfIsWoken() throws Exception {
        ReplicaGroup g = group();
        g.startJoin(COPY, stream()); // joining: effects at or above its cursor (0) are not even sent
        int rounds = 20_000;
        java.util.concurrent.CyclicBarrier go = new java.util.concurrent.CyclicBarrier(3);
        java.util.concurrent.CyclicBarrier end = new java.util.concurrent.CyclicBarrier(3);
        AtomicLong queued = new AtomicLong();
        AtomicLong woken = new AtomicLong();
        AtomicBoolean broken = new AtomicBoolean();
        Thread writer = new Thread(() -> {
            try {
                for (int n = 0; n < rounds; n++) {
                    go.await();
                    g.writeLong(0, n); // publishes n + 1, then acknowledges it itself
                    end.await();
                }
            } catch (Exception e) {
                broken.set(true);
            }
        }, "test-writer");
        Thread reader = new Thread(() -> {
            try {
                for (long n = 0; n < rounds; n++) {
                    go.await();
                    long need;
                    while ((need = g.need()) <= n) {
                        Thread.onSpinWait(); // until the change of this round is published
                    }
                    if (!g.acked(need)) {
                        queued.incrementAndGet();
                        g.whenAcked(need, failure -> woken.incrementAndGet());
                    }
                    end.await();
                }
            } catch (Exception e) {
                broken.set(true);
            }
        }, "test-reader");
        writer.start();
        reader.start();
        try {
            for (int n = 0; n < rounds; n++) {
                go.await(30, TimeUnit.SECONDS);
                end.await(30, TimeUnit.SECONDS);
                // both are done with the round and nothing else will release: a waiter not woken now never is
                if (woken.get() != queued.get()) {
                    fail("round " + n + ": a waiter for sequence " + g.lastSeq() + " was not woken though the"
                            + " watermark is " + g.watermark() + " (" + queued.get() + " queued, " + woken.get()
                            + " woken)");
                }
            }
        } finally {
            writer.interrupt();
            reader.interrupt();
            writer.join(10_000);
            reader.join(10_000);
        }
        assertTrue(!broken.get(), "the threads ran every round");
        System.out.println("rounds: " + rounds + ", waiters queued in the race: " + queued.get());
        assertEquals(g.lastSeq(), g.watermark(), "every change acknowledged itself");
    }
}
