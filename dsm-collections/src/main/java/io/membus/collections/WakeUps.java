package io.membus.collections;

import io.membus.core.RemoteMemory;
import io.membus.core.Words;
import io.membus.core.message.MessageHandler;
import io.membus.core.message.Messaging;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Wake-up messages for blocked {@code lock}/{@code take}/{@code put}: a waiter
 * does not poll remote memory; it sets its node's bit in a <em>waiters word</em>
 * beside the state it waits on, looks at the state once more, and sleeps; whoever
 * changes that state reads the waiters word (pipelined with its own CAS: no extra
 * round trip) and, when bits are set, clears the word and sends each of those
 * nodes one message on channel {@value #CHANNEL} ({@code collections.wakeup},
 * payload: the 8-byte pointer of the waiters word). The node wakes its threads
 * waiting on that word.
 *
 * <p>No lost wake-up: a waiter sets its bit (an atomic, completed) before its last
 * look; a notifier changes the state (completed) before it reads the bits; so
 * either the notifier sees the bit or the waiter sees the new state. A lost or
 * failed message (a node down, a full inbox) only delays a waiter until its
 * fallback look ({@link #FALLBACK_NANOS} at the latest). Node ids above 63 have
 * no bit: their waiters poll with {@link io.membus.core.Backoff}'s short pauses.
 *
 * <pre>
 *   waiters word: bit n set = node n (1..63) has threads waiting
 *   63                                                     1 0
 *   +-------------------------------------------------------+-+
 *   | node 63 ... node 1                                    |-|
 *   +-------------------------------------------------------+-+
 * </pre>
 *
 * <p><b>Note:</b> thread-safe; one per node's message endpoint (shared by every
 * {@link DsmCollections} of the node). The waiters word is changed by CAS only.
 */
final class WakeUps {
    static final short CHANNEL = 0x0C01;
    /** The longest sleep of a waiter between looks when wake-ups are armed. */
    static final long FALLBACK_NANOS = 50_000_000L;
    private static final Logger LOG = LoggerFactory.getLogger(WakeUps.class);
    /** Held while a node's wake-ups are looked up and, the first time, registered. */
    private static final Object REGISTERING = new Object();

    private final RemoteMemory memory;
    private final Messaging messaging;
    private final int self;
    private final ConcurrentHashMap<Long, Signal> signals = new ConcurrentHashMap<>();

    private WakeUps(RemoteMemory memory, Messaging messaging) {
        this.memory = memory;
        this.messaging = messaging;
        this.self = memory.localNodeId();
    }

    /**
     * The wake-ups of {@code memory}'s node, registering the channel handler the first time:
     * the node's handler of {@link #CHANNEL} holds them, so they live as long as the node's
     * message endpoint and are found again through it.
     */
    static WakeUps of(RemoteMemory memory) {
        Messaging messaging = new Messaging(memory);
        synchronized (REGISTERING) {
            if (messaging.handler(CHANNEL) instanceof Handler h) {
                return h.wakeUps();
            }
            WakeUps w = new WakeUps(memory, messaging);
            messaging.register(CHANNEL, "collections.wakeup", new Handler(w));
            return w;
        }
    }

    /** The node's handler of {@link #CHANNEL}: a message names the waiters word whose waiters wake. */
    private record Handler(WakeUps wakeUps) implements MessageHandler {
        @Override
        public byte[] onMessage(int from, byte[] payload) {
            wakeUps.wake(Words.getLong(payload, 0));
            return null;
        }
    }

    /** Whether this node has a bit in a waiters word. */
    boolean armed() {
        return self >= 1 && self <= 63;
    }

    /** Threads of this node waiting on one waiters word. */
    static final class Signal {
        private long generation;

        synchronized long generation() {
            return generation;
        }

        synchronized void fire() {
            generation++;
            notifyAll();
        }

        /** Sleeps until fired after {@code seen}, or {@code nanos} passed. */
        synchronized void await(long seen, long nanos) throws InterruptedException {
            long deadline = System.nanoTime() + nanos;
            while (generation == seen) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    return;
                }
                wait(left / 1_000_000, (int) (left % 1_000_000));
            }
        }
    }

    Signal signal(long waitersPtr) {
        return signals.computeIfAbsent(waitersPtr, p -> new Signal());
    }

    private void wake(long waitersPtr) {
        Signal s = signals.get(waitersPtr);
        if (s != null) {
            s.fire();
        }
    }

    /** Sets this node's bit in the waiters word (read, then CAS until set). */
    void register(long waitersPtr) {
        long bit = 1L << self;
        long seen = memory.readLong(waitersPtr);
        while ((seen & bit) == 0) {
            long witness = memory.compareAndSwap(waitersPtr, seen, seen | bit);
            if (witness == seen) {
                return;
            }
            seen = witness;
        }
    }

    /**
     * Given the waiters word as read after a state change, wakes the nodes whose
     * bits are set: clears the word (CAS), then one message per node, not waited for.
     * Best effort: a failure only leaves waiters to their fallback look.
     */
    void notifyWaiters(long waitersPtr, long waiters) {
        if (waiters == 0) {
            return;
        }
        memory.compareAndSwapAsync(waitersPtr, waiters, 0L).whenComplete((witness, error) -> {
            if (error != null) {
                LOG.debug("wake-up: clearing the waiters word failed: {}", error.toString());
            }
            // whatever the CAS found, the nodes in the word we read are told (a bit set meanwhile stays)
            byte[] payload = new byte[Long.BYTES];
            Words.putLong(payload, 0, waitersPtr);
            for (int node = 1; node <= 63; node++) {
                if ((waiters & (1L << node)) != 0) {
                    if (node == self) {
                        wake(waitersPtr);
                        continue;
                    }
                    CompletableFuture<Void> sent;
                    try {
                        sent = messaging.sendAsync(node, CHANNEL, payload);
                    } catch (RuntimeException e) {
                        LOG.debug("wake-up to node {} not sent: {}", node, e.toString());
                        continue;
                    }
                    int to = node;
                    sent.whenComplete((v, e) -> {
                        if (e != null) {
                            LOG.debug("wake-up to node {} failed: {}", to, e.toString());
                        }
                    });
                }
            }
        });
    }

    /** Reads the waiters word asynchronously (to pipeline behind a state change) and notifies. */
    void notifyAfter(long waitersPtr) {
        memory.readAsync(waitersPtr, Long.BYTES).whenComplete((b, error) -> {
            if (error == null) {
                notifyWaiters(waitersPtr, Words.getLong(b, 0));
            } else {
                LOG.debug("wake-up: reading the waiters word failed: {}", error.toString());
            }
        });
    }
}
