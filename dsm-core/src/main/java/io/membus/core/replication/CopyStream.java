package io.membus.core.replication;

import io.membus.core.error.DsmException;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.time.Deadlines;
import io.membus.core.fault.FaultInjector;
import io.membus.core.transport.TransportThreads;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.time.Duration;
import java.util.ArrayList;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;

/**
 * The primary side of the replication stream from this node to one copy node: every
 * record (effect, chunk, join, done, drop) of every group this node serves and that node
 * copies, in one order. Records are appended under their group's lock
 * ({@link #append}) and sent by {@link #flush()} outside it, as messages of the
 * {@code replication} channel (request/reply: the reply is the copy's acknowledgement).
 *
 * <ul>
 *   <li><b>Group commit.</b> At most {@link #MAX_IN_FLIGHT} messages are in flight;
 *       records appended meanwhile go out together in the next message, up to the
 *       receiver's message size.</li>
 *   <li><b>Retention.</b> Every record is kept until the copy acknowledged its record
 *       number (the reply names the last record it processed). A message that fails
 *       (lost connection, deadline) or that the copy refuses as out of order (gap) makes
 *       the stream send again from the first unacknowledged record; the copy skips the
 *       records it processed already (by record number), so a record is applied once.</li>
 *   <li><b>Window.</b> {@link #windowFull()} when the retained records reach the
 *       configured effects or bytes: a change of any group on this stream then waits
 *       (see {@link ReplicaGroup}).</li>
 * </ul>
 *
 * <p><b>Note:</b> thread-safe. State is guarded by this object's monitor; messages are
 * sent by one thread at a time ({@code draining}) in record order, outside the monitor;
 * replies may arrive on any thread. A blocking-verb thread may wait on the monitor
 * ({@link #flush()}: for a lane exchange to end, bounded by its deadline), never while it
 * holds a group's lock.
 */
public final class CopyStream {
    private static final Logger LOG = LoggerFactory.getLogger(CopyStream.class);
    /** Messages of one stream in flight at once. */
    public static final int MAX_IN_FLIGHT = 4;
    /** Pause before a stream sends again after a failed message. */
    private static final long RETRY_NANOS = 50_000_000L;

    /** What carries a stream message and reports its reply (the {@link Replicator}). */
    interface Carrier {
        CompletableFuture<byte[]> send(int node, byte[] payload);

        /**
         * Exchanges a message on a blocking socket on the calling thread
         * ({@link io.membus.core.transport.Connection#requestDirect}); {@code null} when the
         * connection cannot now (then it is {@link #send sent}).
         */
        default byte[] sendNow(int node, byte[] payload) {
            return null;
        }

        /** The copy's answer for one group. */
        void acknowledged(int copyNode, int group, byte status, long epoch, long applied, boolean inSync);

        /** Whether the copy node is still a live member this node may send to. */
        boolean reachable(int node);

        int maxMessageSize();

        FaultInjector faults();
    }

    private final int node;
    private final long streamId;
    private final Carrier carrier;
    private final int windowEffects;
    private final long windowBytes;
    private final Duration retryTimeout;

    // guarded by this
    private final ArrayList<byte[]> retained = new ArrayList<>();
    private int head; // index in retained of record firstNo
    private long firstNo = 1; // record number of retained[head]
    private long nextNo = 1; // next record number to send
    private long retainedBytes;
    private int inFlight;
    private boolean draining;
    private boolean again;
    private boolean retryScheduled;
    private boolean closed;
    private long sentMessages;
    private FaultInjector.StreamRule listened;

    CopyStream(int node, Carrier carrier, ReplicationConfig config, Duration retryTimeout) {
        this.node = node;
        this.carrier = carrier;
        this.streamId = java.util.concurrent.ThreadLocalRandom.current().nextLong() | 1;
        this.windowEffects = config.windowEffects();
        this.windowBytes = config.windowBytes();
        this.retryTimeout = retryTimeout;
    }

    /** The copy node. */
    public int node() {
        return node;
    }

    /** Appends a record; call {@link #flush()} after releasing the group lock. */
    synchronized void append(byte[] record) {
        if (closed) {
            return; // the copy is gone: its group drops it at once
        }
        retained.add(record);
        retainedBytes += record.length;
    }

    /** Whether retained records reached the window: the next change of a group on this stream waits. */
    synchronized boolean windowFull() {
        return !closed && (retained.size() - head >= windowEffects || retainedBytes >= windowBytes);
    }

    /** Waits (bounded) until {@link #windowFull()} is false. */
    synchronized void awaitWindow(long deadlineNanos) {
        while (windowFull()) {
            long left = deadlineNanos - System.nanoTime();
            if (left <= 0) {
                throw DsmTimeoutException.notSent("replicated change (the stream to copy node " + node
                        + " has its window of unacknowledged changes full)", node, retryTimeout);
            }
            try {
                wait(Math.max(1, left / 1_000_000), 0);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw DsmTimeoutException.notSent("replicated change (interrupted while the stream window was full)",
                        node, retryTimeout);
            }
        }
    }

    /** Records retained (sent and unacknowledged, or not sent yet): for status and tests. */
    public synchronized int retained() {
        return retained.size() - head;
    }

    /** Stops the stream: nothing is sent any more, waiting changes are let go. */
    synchronized void close() {
        closed = true;
        retained.clear();
        head = 0;
        retainedBytes = 0;
        notifyAll();
    }

    public synchronized boolean isClosed() {
        return closed;
    }

    /**
     * Sends what is appended and not sent, within the in-flight limit; one thread sends at a time.
     * On an event loop ({@link TransportThreads#runAfterTurn}: a tcp I/O thread executing a read
     * batch of verbs, or reading the copy's acknowledgements) the send is done once at the end of
     * the loop's turn, so every record the batch appended leaves in one message (one stream round
     * trip for the batch instead of one per {@link #MAX_IN_FLIGHT} changes). A thread serving blocking
     * verbs ({@link TransportThreads#servesBlockingVerbs}) exchanges the message on its lane when the
     * stream is idle ({@link #sendNow}), waits to do so next when another such thread's exchange is
     * on its way ({@link #awaitTurn}), and otherwise leaves its record to the message in flight, whose
     * reply's flush sends it (issue 28, docs/replication.md §3.5.2). Any other thread sends now.
     */
    public void flush() {
        boolean laneThread = TransportThreads.servesBlockingVerbs();
        if (laneThread && (sendNow() || awaitTurn())) {
            return;
        }
        synchronized (this) {
            if (laneThread && inFlight > 0 && !closed && laneSender != Thread.currentThread()) {
                // a message of the stream is on its way: its reply's flush (answered), or the end of the lane
                // exchange, sends this record with every other one appended meanwhile, in one message; a message of
                // its own each (up to MAX_IN_FLIGHT) kept the stream on the posted path at 8 threads (§3.5.2)
                ReplicationCounts.flushJoined.increment();
                return;
            }
            if (flushQueued) {
                return; // the queued flush runs after this record was appended (both under this monitor)
            }
            if (!closed && TransportThreads.isTransportThread()) {
                flushQueued = true;
                if (TransportThreads.runAfterTurn(flushTask)) {
                    return;
                }
                flushQueued = false;
            }
        }
        flushNow();
    }

    /**
     * On a thread that serves one blocking verb and waits for its answer (a tcp lane's server
     * thread, docs/replication.md §3.5.1): when nothing of the stream is in flight or being
     * sent, sends the next message on a blocking socket and handles the copy's reply on this
     * thread, so the change's acknowledgement needs no I/O thread on this node. Only then:
     * records are numbered and two messages in flight on two paths could arrive out of
     * order (the copy would answer {@code gap}). Records appended by other threads
     * meanwhile are sent by the usual path afterwards.
     *
     * @return whether it took the stream (then what was appended is sent or on its way)
     */
    private boolean sendNow() {
        byte[] message;
        boolean handOver;
        synchronized (this) {
            if (closed || draining || flushQueued || inFlight > 0) {
                return false;
            }
            message = next();
            if (message == null) {
                return false; // nothing to send, or a fault rule holds it: the usual path decides
            }
            laneExchange = true;
            laneSender = Thread.currentThread();
            draining = true;
            inFlight++;
            sentMessages++;
        }
        try {
            byte[] reply = null;
            Throwable error = null;
            if (ReplicationCodec.onlyData(message)) { // the copy handles only these on its lane thread
                try {
                    reply = carrier.sendNow(node, message);
                    if (reply != null) {
                        ReplicationCounts.laneMessages.increment();
                    }
                } catch (RuntimeException e) {
                    error = e;
                }
            }
            if (reply == null && error == null) {
                CompletableFuture<byte[]> posted;
                try {
                    ReplicationCounts.postedMessages.increment();
                    posted = carrier.send(node, message);
                } catch (RuntimeException e) {
                    posted = CompletableFuture.failedFuture(e);
                }
                posted.whenComplete(this::answered);
            } else {
                answered(reply, error);
            }
        } finally {
            synchronized (this) {
                draining = false;
                again = false;
                laneExchange = false;
                laneSender = null;
                // a thread waits to send next (awaitTurn): it sends what others appended meanwhile, on its lane
                handOver = nextSender;
                if (handOver && !handedOver) {
                    handedOver = true;
                    notifyAll();
                }
            }
        }
        if (handOver) {
            return true;
        }
        flushNow(); // what other threads appended while this one had the stream
        return true;
    }

    /**
     * On a blocking-verb thread whose record found the stream taken by another such thread's
     * lane exchange ({@link #sendNow}): the first of them waits here for that exchange to end
     * and then sends, on its own lane, every record appended meanwhile in one message (its own
     * and those of the threads that came after it, which wait for their acknowledgement as
     * usual); the others leave their records to it. Before (issue 28), the exchange's thread
     * posted what others had appended, and from then on every change found a message in
     * flight and posted its own through the I/O threads, about two records a message, with
     * every acknowledgement passing through the primary's one event loop (docs/replication.md
     * §3.5.2). Bounded: after the thread's deadline (or the stream's retry timeout) it leaves
     * its records to the usual path.
     *
     * @return whether the records this thread appended are sent or left to the next sender
     *         ({@code false}: the stream is not in a lane exchange; the caller flushes as usual)
     */
    private boolean awaitTurn() {
        synchronized (this) {
            if (closed || !laneExchange || laneSender == Thread.currentThread()) {
                return false; // (the exchange's own thread flushes from its reply: its sendNow sends what is left)
            }
            if (nextSender) {
                ReplicationCounts.flushJoined.increment();
                return true; // the next sender's message takes them: it sends once it clears nextSender
            }
            nextSender = true;
            ReplicationCounts.nextSenders.increment();
            long deadline = io.membus.core.OperationDeadline.until(System.nanoTime(), retryTimeout.toNanos());
            try {
                while (!handedOver && !closed) {
                    long left = deadline - System.nanoTime();
                    if (left <= 0) {
                        break;
                    }
                    try {
                        wait(Math.max(1, left / 1_000_000), 0);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        break;
                    }
                }
            } finally {
                // from here a thread whose record finds the stream taken sends it itself or leaves it to the stream's
                // sender: whatever was appended until now is in this thread's send below, or in the usual path's
                nextSender = false;
                handedOver = false;
            }
        }
        // what every thread that left its records to this one appended, in one message on this lane; false: the
        // stream is taken again (another lane exchange, a message in flight, a flush queued): the usual path
        return sendNow();
    }

    /** Whether {@link #sendNow} has the stream in a lane exchange (guarded by this). */
    private boolean laneExchange;
    /** The thread of that exchange (guarded by this). */
    private Thread laneSender;
    /**
     * Whether a blocking-verb thread waits to send next, after the lane exchange ({@link #awaitTurn}): while it
     * is set, the records of other blocking-verb threads that find the stream taken are left to it (guarded by this).
     */
    private boolean nextSender;
    /** Whether a lane exchange's end handed the stream to the {@link #nextSender} (then it sends; guarded by this). */
    private boolean handedOver;

    /** Whether a {@link #flushNow} was handed to the end of an event loop's turn and has not started (guarded by this). */
    private boolean flushQueued;
    private final Runnable flushTask = () -> {
        synchronized (this) {
            flushQueued = false;
        }
        flushNow();
    };

    private void flushNow() {
        synchronized (this) {
            if (draining) {
                again = true;
                ReplicationCounts.flushJoined.increment();
                return;
            }
            draining = true;
        }
        try {
            drain();
        } catch (RuntimeException | Error e) {
            // never leave the flag set: every later flush would return at once and the stream would be silent for
            // good, its changes unacknowledged (issue 27)
            synchronized (this) {
                draining = false;
            }
            throw e;
        }
    }

    /** Sends while {@link #next()} gives messages; the caller set {@code draining}. */
    private void drain() {
        while (true) {
            byte[] message;
            synchronized (this) {
                message = next();
                if (message == null) {
                    if (again) {
                        again = false;
                        continue;
                    }
                    draining = false;
                    return;
                }
                inFlight++;
                sentMessages++;
            }
            CompletableFuture<byte[]> reply;
            try {
                ReplicationCounts.postedMessages.increment();
                reply = carrier.send(node, message);
            } catch (RuntimeException e) {
                reply = CompletableFuture.failedFuture(e);
            }
            reply.whenComplete(this::answered);
        }
    }

    /** The next message to send, or null (guarded by this). */
    private byte[] next() {
        if (closed || inFlight >= MAX_IN_FLIGHT || nextNo - firstNo >= retained.size() - head) {
            return null;
        }
        FaultInjector.StreamRule rule = carrier.faults().streamRule(node);
        if (rule != null && !rule.trySend()) {
            if (rule != listened) {
                listened = rule;
                rule.onRelease(this::flush); // sends what waits once the test releases the stream
            }
            return null;
        }
        int max = carrier.maxMessageSize();
        int from = head + (int) (nextNo - firstNo);
        int size = ReplicationCodec.STREAM_HEADER;
        int to = from;
        while (to < retained.size() && size + retained.get(to).length <= max) {
            size += retained.get(to).length;
            to++;
        }
        if (to == from) {
            throw new IllegalStateException("stream record larger than a message: " + retained.get(from).length
                    + " > " + max);
        }
        ReplicationCodec.Writer w = new ReplicationCodec.Writer(size);
        w.u8(ReplicationCodec.STREAM).i64(streamId).i64(nextNo).i32(to - from);
        for (int i = from; i < to; i++) {
            byte[] r = retained.get(i);
            w.bytes(r, 0, r.length);
        }
        nextNo += to - from;
        ReplicationCounts.records.add(to - from);
        return w.array();
    }

    /** Whether a failure was logged at WARN since the copy last answered (guarded by this). */
    private boolean warned;

    private void answered(byte[] reply, Throwable error) {
        if (error != null) {
            failed(error instanceof CompletionException && error.getCause() != null ? error.getCause() : error);
            return;
        }
        synchronized (this) {
            warned = false; // the copy answers again: its next failure is news
        }
        ReplicationCounts.acks.increment();
        long applied;
        boolean gap;
        long[] groups;
        try {
            ReplicationCodec.Reader r = new ReplicationCodec.Reader(reply, 0, "node " + node);
            if (r.u8() != ReplicationCodec.ACK || r.i64() != streamId) {
                throw new IllegalStateException("not an acknowledgement of this stream");
            }
            applied = r.i64();
            gap = r.u8() != 0;
            int count = r.i32();
            groups = new long[count * 5];
            for (int i = 0; i < count; i++) {
                groups[i * 5] = r.i32();
                groups[i * 5 + 1] = r.u8();
                groups[i * 5 + 2] = r.i64();
                groups[i * 5 + 3] = r.i64();
                groups[i * 5 + 4] = r.u8();
            }
        } catch (RuntimeException e) {
            LOG.error("replication: bad acknowledgement from copy node {}: {}", node, e.toString());
            synchronized (this) {
                inFlight--;
            }
            flush();
            return;
        }
        // The stream's own state first, whatever the groups do with their acknowledgements: before issue 27 a
        // group's failure (a waiter's callback that threw) skipped this, and the copy's acknowledged records stayed
        // retained for good (the window filled, every later change waited out its deadline) while the groups after
        // it in this reply never heard of their acknowledgement.
        synchronized (this) {
            inFlight--;
            release(applied);
            if (gap && nextNo > applied + 1) {
                nextNo = applied + 1; // the copy lost a message of ours: send again from what it has
            }
        }
        for (int i = 0; i < groups.length; i += 5) {
            try {
                carrier.acknowledged(node, (int) groups[i], (byte) groups[i + 1], groups[i + 2], groups[i + 3],
                        groups[i + 4] != 0);
            } catch (RuntimeException e) {
                LOG.error("replication: the acknowledgement of segment {} by copy node {} failed", GroupId.toString(
                        (int) groups[i]), node, e);
            }
        }
        flush();
    }

    /** Forgets records up to {@code appliedNo}: the copy has them (guarded by this). */
    private void release(long appliedNo) {
        while (firstNo <= appliedNo && head < retained.size()) {
            retainedBytes -= retained.get(head).length;
            retained.set(head, null);
            head++;
            firstNo++;
        }
        if (nextNo < firstNo) {
            nextNo = firstNo;
        }
        if (head > 1024 && head * 2 > retained.size()) {
            retained.subList(0, head).clear();
            head = 0;
        }
        notifyAll();
    }

    private void failed(Throwable error) {
        boolean retry;
        boolean first;
        synchronized (this) {
            inFlight--;
            retry = !closed && carrier.reachable(node);
            first = !warned;
            warned = true;
            if (retry) {
                nextNo = firstNo; // send again everything the copy has not acknowledged
                if (retryScheduled) {
                    return;
                }
                retryScheduled = true;
            }
        }
        if (!retry) {
            LOG.debug("replication: stream to node {} stops: {}", node, error.toString());
            return;
        }
        String what = error instanceof DsmException d ? d.getMessage() : error.toString();
        if (first) { // once until the copy answers again: a dead copy's retries are not a warning each
            LOG.warn("replication: a stream message to copy node {} failed ({}); sending again from its last"
                    + " acknowledged record until it answers or leaves the cluster", node, what);
        } else {
            LOG.debug("replication: a stream message to copy node {} failed again ({})", node, what);
        }
        Deadlines.schedule(() -> {
            synchronized (this) {
                retryScheduled = false;
            }
            flush();
        }, RETRY_NANOS);
    }

    /** Every counter of the stream (diagnostics). */
    synchronized String describe() {
        return toString() + " firstNo=" + firstNo + " nextNo=" + nextNo + " appended=" + (firstNo + retained.size()
                - head - 1) + " draining=" + draining + " again=" + again + " retryScheduled=" + retryScheduled;
    }

    @Override
    public synchronized String toString() {
        return "CopyStream{node=" + node + ", retained=" + (retained.size() - head) + ", inFlight=" + inFlight
                + ", sent=" + sentMessages + (closed ? ", closed" : "") + "}";
    }
}
