package io.membus.transport.shm;

import io.membus.core.Backoff;
import io.membus.core.error.DsmException;
import io.membus.core.error.ErrorCode;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.ProtocolException;
import io.membus.core.transport.message.Inbox;
import io.membus.core.transport.message.MessageEndpoint;
import io.membus.core.transport.message.MessageRecord;
import io.membus.core.transport.message.Outbox;
import io.membus.core.transport.message.Responder;
import io.membus.core.transport.TransportThreads;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * The message side of one {@code shm} node: its own ring ({@link ShmRing}), the
 * receiver thread that reads it, the inboxes of the senders whose messages
 * arrive there, the outboxes of this node's connections (for the replies that
 * arrive there), and the mappings of peers' rings that replies are written into.
 *
 * <p><b>Wake-up.</b> The receiver thread polls its ring with a bounded backoff
 * ({@link Backoff}, reset whenever a record was read: 20 spins, 20 yields, then parks from 1 µs
 * doubling up to {@code membus.transports.shm.idle-park} = 1 ms). While messages flow it answers
 * within microseconds; an idle node costs about a thousand short wake-ups a
 * second and no busy core. The first message after an idle spell waits at most
 * the longest park. (A cross-process wake-up — a futex, a pipe — would need native
 * code or a side channel per message; the bounded park is the simpler choice.)
 *
 * <p><b>A dead writer.</b> A sender process that dies between claiming a record
 * and committing it would block the ring; after a second of such a block the
 * receiver skips the record ({@code ManyToOneRingBuffer.unblock}).
 *
 * <p><b>Note:</b> thread-safe; {@link #run} is the receiver thread's loop and the
 * only reader of the ring and of {@code senders}.
 */
final class ShmMessaging implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(ShmMessaging.class);
    private static final long UNBLOCK_AFTER_NANOS = TimeUnit.SECONDS.toNanos(1);
    private static final long IDLE_MIN_PARK_NANOS = TimeUnit.MICROSECONDS.toNanos(1);
    /** How an answer waits for room in the sender's full ring: parks from 1 µs doubling to 1 ms, by a deadline. */
    private static final Backoff.Policy ANSWER_WAIT = new Backoff.Policy(0, 0, 1_000, TimeUnit.MILLISECONDS.toNanos(1));

    private final int nodeId;
    private final long incarnation;
    private final Path dir;
    private final MessageEndpoint endpoint;
    private final long replyWaitNanos;
    /** The receiver's idle schedule: 20 spins, 20 yields, parks from 1 µs doubling to {@code shm.idle-park}. */
    private final Backoff.Policy idle;
    private final ShmRing ring;
    private final int maxPayload;
    /** Senders' inboxes, by node (receiver thread only). */
    private final Map<Integer, Sender> senders = new ConcurrentHashMap<>();
    /** Outboxes of this node's connections, by peer node. */
    private final Map<Integer, Attached> outboxes = new ConcurrentHashMap<>();
    /** Peers' rings, by node; the incarnation says which file is mapped. */
    private final Map<Integer, PeerRing> peerRings = new ConcurrentHashMap<>();
    private final Thread receiver;
    /** Decodes the records of {@link #ring} (receiver thread only). */
    private final RecordReader reader = new RecordReader();
    private volatile boolean running = true;

    private record Sender(long incarnation, Inbox inbox, Responder responder) {
    }

    private record Attached(long incarnation, Outbox outbox) {
    }

    private record PeerRing(long incarnation, ShmRing ring) {
    }

    ShmMessaging(int nodeId, long incarnation, Path dir, io.membus.core.PrivateFiles files, MessageEndpoint endpoint,
                 long replyWaitNanos,
                 long maxParkNanos) {
        this.nodeId = nodeId;
        this.incarnation = incarnation;
        this.dir = dir;
        this.endpoint = endpoint;
        this.replyWaitNanos = replyWaitNanos;
        if (maxParkNanos < IDLE_MIN_PARK_NANOS) { // before the ring file or the thread exist
            throw new io.membus.core.error.DsmConfigException("membus.transports.shm.idle-park", maxParkNanos + " ns",
                    "a duration of 1us or more (the receiver's first park)");
        }
        this.idle = new Backoff.Policy(20, 20, IDLE_MIN_PARK_NANOS, maxParkNanos);
        this.ring = ShmRing.create(dir.resolve(ringFileName(nodeId)), ShmRing.capacityFor(endpoint.maxMessageSize()),
                files);
        this.maxPayload = Math.min(endpoint.maxMessageSize(), ring.maxPayload());
        this.receiver = TransportThreads.startDaemon("membus-shm-inbox-" + nodeId, this::run);
    }

    static String ringFileName(int nodeId) {
        return "node-" + nodeId + ".inbox";
    }

    Path ringFile() {
        return ring.file();
    }

    /** The largest payload this node takes (its endpoint's limit, or what its ring carries). */
    int maxPayload() {
        return maxPayload;
    }

    /**
     * The ring of {@code node}'s incarnation {@code incarnation}, mapped once and
     * shared by this node's connection to it and its replies to it.
     */
    ShmRing peerRing(int node, long incarnation, Path peerDir, String fileName) {
        PeerRing pr = peerRings.get(node);
        if (pr != null && pr.incarnation == incarnation) {
            return pr.ring;
        }
        synchronized (peerRings) {
            pr = peerRings.get(node);
            if (pr != null && pr.incarnation == incarnation) {
                return pr.ring;
            }
            ShmRing mapped = node == nodeId && incarnation == this.incarnation ? ring
                    : ShmRing.open(peerDir.resolve(fileName), node);
            PeerRing old = peerRings.put(node, new PeerRing(incarnation, mapped));
            if (old != null && old.ring != ring) {
                old.ring.close(); // an earlier incarnation's file: nothing reads it any more
            }
            return mapped;
        }
    }

    /** Replies from {@code node}'s incarnation go to {@code outbox} from now on. */
    void attach(int node, long incarnation, Outbox outbox) {
        outboxes.put(node, new Attached(incarnation, outbox));
    }

    void detach(int node, Outbox outbox) {
        outboxes.computeIfPresent(node, (n, a) -> a.outbox == outbox ? null : a);
    }

    // ------------------------------------------------------------------ receiver thread

    private void run() {
        Backoff idle = new Backoff(this.idle, Backoff.NO_DEADLINE); // close() unparks it
        org.agrona.concurrent.MessageHandler handler = this::onRecord;
        long blockedSince = 0;
        while (running) {
            int n;
            try {
                n = ring.read(handler, 64);
            } catch (RuntimeException e) {
                LOG.error("shm message receiver of node {} failed on a record; it goes on", nodeId, e);
                n = 1;
            }
            if (n == 0 && ring.pending()) {
                long now = System.nanoTime();
                if (blockedSince == 0) {
                    blockedSince = now;
                } else if (now - blockedSince > UNBLOCK_AFTER_NANOS) {
                    if (ring.unblock()) {
                        LOG.warn("shm message ring of node {}: skipped a record its writer never committed (the "
                                + "writing process died?)", nodeId);
                    }
                    blockedSince = 0;
                }
            } else {
                blockedSince = 0;
            }
            if (n > 0) {
                idle.reset();
            } else {
                idle.pause();
            }
        }
    }

    private void onRecord(int type, org.agrona.MutableDirectBuffer buffer, int index, int length) {
        if (type != ShmRing.TYPE_RECORD) {
            LOG.warn("shm message ring of node {}: slot of unknown type={} skipped", nodeId, type);
            return;
        }
        ShmRing.decode(buffer, index, length, reader);
    }

    /** What the receiver thread does with each record of its ring (one instance: receiver thread only). */
    private final class RecordReader extends ShmRing.Reader {
        @Override
        public void message(long correlation, short channel, boolean request, byte[] payload) {
            onMessage(from, fromIncarnation, correlation, channel, request, payload);
        }

        @Override
        public void reply(long correlation, byte[] reply) {
            Outbox o = outboxOf(from, fromIncarnation);
            if (o != null) {
                o.replied(correlation, reply);
            }
        }

        @Override
        public void error(long correlation, ErrorCode code, long detail, String text) {
            Outbox o = outboxOf(from, fromIncarnation);
            if (o != null) {
                o.failed(correlation, code, detail, text);
            }
        }

        @Override
        public void credit(int credits, int maxMessageSize) {
            other(MessageRecord.KIND_CREDIT, 0, 0, null); // shm's credits are in the registry, never in the ring
        }

        @Override
        public void other(int kind, long address, int length, String problem) {
            LOG.warn("shm message ring of node {}: record from node {} skipped: {}", nodeId, from,
                    problem != null ? problem : "kind=" + kind + " is not carried by shm");
        }
    }

    private Outbox outboxOf(int from, long fromIncarnation) {
        Attached a = outboxes.get(from);
        return a != null && a.incarnation == fromIncarnation ? a.outbox : null; // else: a late answer, nobody waits
    }

    private void onMessage(int from, long fromIncarnation, long correlation, short channel, boolean request,
                           byte[] payload) {
        Sender s = senders.get(from);
        if (s == null || s.incarnation != fromIncarnation || s.inbox.isClosed()) {
            if (s != null) {
                endpoint.close(s.inbox, "node " + from + " restarted", false);
                senders.remove(from);
            }
            try {
                ShmRegistry reg = ShmRegistry.read(dir, from);
                if (reg.incarnation() != fromIncarnation || reg.inbox() == null) {
                    LOG.debug("message from node {} incarnation {} dropped: the node now runs incarnation {}", from,
                            fromIncarnation, reg.incarnation());
                    return;
                }
                RingResponder responder = new RingResponder(peerRing(from, fromIncarnation, dir, reg.inbox()));
                s = new Sender(fromIncarnation, endpoint.open(from, responder), responder);
            } catch (DsmException e) {
                LOG.debug("message from node {} dropped: cannot answer it: {}", from, e.getMessage());
                return;
            }
            senders.put(from, s);
        }
        if (!s.inbox.deliver(correlation, channel, request, payload)) {
            DsmException e = s.inbox.isClosed() ? new NodeUnavailableException(nodeId, "node " + nodeId
                    + " is shutting down") : new ProtocolException("node " + from, "message beyond the granted credits: "
                    + "credits=" + endpoint.inboxCapacity() + ", correlationId=" + correlation);
            s.responder.fail(correlation, e);
        }
    }

    /** Answers into the sender's ring, waiting (bounded) for room when it is full. */
    private final class RingResponder implements Responder {
        private final ShmRing target;

        RingResponder(ShmRing target) {
            this.target = target;
        }

        @Override
        public void reply(long correlation, byte[] reply) {
            write(() -> target.writeReply(nodeId, incarnation, correlation, reply), correlation);
        }

        @Override
        public void fail(long correlation, DsmException failure) {
            write(() -> target.writeError(nodeId, incarnation, correlation, failure), correlation);
        }

        private void write(java.util.function.BooleanSupplier attempt, long correlation) {
            Backoff backoff = null; // made only when the ring is full
            while (!attempt.getAsBoolean()) {
                if (backoff == null) {
                    backoff = new Backoff(ANSWER_WAIT, Backoff.deadlineIn(replyWaitNanos));
                }
                if (!running || endpoint.isClosed() || !backoff.pause()) {
                    LOG.warn("answer to message {} dropped: the sender's ring {} stayed full (or was closed)",
                            correlation, target.file());
                    return;
                }
            }
        }
    }

    /** Stops the receiver thread, unmaps every ring and deletes this node's ring file. */
    @Override
    public void close() {
        running = false;
        LockSupport.unpark(receiver);
        try {
            receiver.join(TimeUnit.SECONDS.toMillis(5));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (receiver.isAlive()) {
            LOG.warn("shm message receiver of node {} did not stop within 5 s; its ring stays mapped", nodeId);
            return;
        }
        for (Sender s : senders.values()) {
            endpoint.close(s.inbox, "node " + nodeId + " is shutting down", false);
        }
        senders.clear();
        synchronized (peerRings) {
            for (PeerRing pr : peerRings.values()) {
                if (pr.ring != ring) {
                    pr.ring.close();
                }
            }
            peerRings.clear();
        }
        ring.close();
        try {
            java.nio.file.Files.deleteIfExists(ring.file());
        } catch (java.io.IOException e) {
            LOG.warn("could not delete shm message ring: path={}", ring.file(), e);
        }
    }
}
