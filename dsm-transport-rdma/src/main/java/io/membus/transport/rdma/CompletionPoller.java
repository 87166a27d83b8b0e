package io.membus.transport.rdma;

import io.membus.core.Backoff;
import io.membus.core.transport.Connection;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The completion side of an {@link RdmaTransport}: the queue pairs of its open
 * connections and the loop of its one completion thread ("membus-rdma-cq"), which polls
 * the message rings and every connection's completion queue, completing the verbs'
 * futures. Idle: dsm-core's {@link Backoff} with {@link #IDLE}: 1,000 spins, then 99,000
 * parks of 20 µs (about two seconds of idling), then parks doubling to 1 ms; found work
 * {@linkplain Backoff#reset() starts the schedule again}. A completion queue that fails
 * to poll closes its connection (once: its verbs fail now instead of at their deadline).
 * One job: polling; the connections are made and closed by the transport.
 *
 * <p><b>Note:</b> thread-safe: {@link #track} and {@link #untrack} (any thread) are
 * serialised and replace a copy-on-write array published through a volatile field, so the
 * loop iterates it without a lock or an allocation; {@link #run()} runs on one thread until
 * {@link #stop()}, whose volatile write it reads every round.
 */
final class CompletionPoller implements Runnable {
    /** The transport's logger: a failed poll is logged where it always was. */
    private static final Logger LOG = LoggerFactory.getLogger(RdmaTransport.class);

    /** The idle schedule: 1,000 spins, 99,000 parks of 20 µs, then parks doubling to 1 ms. */
    static final Backoff.Policy IDLE = new Backoff.Policy(1_000, 0, TimeUnit.MICROSECONDS.toNanos(20),
            TimeUnit.MILLISECONDS.toNanos(1), 99_000);

    /** An open connection and its queue pair, as the completion thread polls them. */
    record Polled(RdmaConnection connection, Fabric.QueuePair pair) {
    }

    private final RdmaMessages messaging;
    /** The queue pairs the completion thread polls: copy-on-write, so its loop iterates without allocating. */
    private volatile Polled[] polled = new Polled[0];
    private volatile boolean running = true;

    CompletionPoller(RdmaMessages messaging) {
        this.messaging = messaging;
    }

    synchronized void track(RdmaConnection connection, Fabric.QueuePair pair) {
        Polled[] old = polled;
        Polled[] next = Arrays.copyOf(old, old.length + 1);
        next[old.length] = new Polled(connection, pair);
        polled = next;
    }

    synchronized void untrack(RdmaConnection connection) {
        polled = Arrays.stream(polled).filter(p -> p.connection() != connection).toArray(Polled[]::new);
    }

    /** The queue pair of an open connection (tests), or {@code null}. */
    Fabric.QueuePair queuePair(Connection connection) {
        for (Polled p : polled) {
            if (p.connection() == connection) {
                return p.pair();
            }
        }
        return null;
    }

    /** The queue pairs polled now (the transport closes them when it closes). */
    List<Fabric.QueuePair> queuePairs() {
        return Arrays.stream(polled).map(Polled::pair).toList();
    }

    /** Ends {@link #run()} after its current round. */
    void stop() {
        running = false;
    }

    @Override
    public void run() {
        Backoff idle = new Backoff(IDLE, Backoff.NO_DEADLINE); // stop() ends the loop within one park
        while (running) {
            int found = messaging.poll();
            for (Polled p : polled) { // an array: no iterator allocated per spin
                try {
                    found += p.pair().poll();
                } catch (IOException | RuntimeException e) {
                    // the CQ is unusable: its verbs would only time out; fail them now, once (no log per spin)
                    LOG.warn("polling the completion queue of node {} failed: {}", p.connection().peer().nodeId(),
                            e.toString());
                    p.connection().close("polling the completion queue failed: " + e.getMessage()
                            + "; the connection was closed: connect again");
                }
            }
            if (found > 0) {
                idle.reset();
            } else {
                idle.pause();
            }
        }
    }
}
