package io.membus.core.transport.message;

import io.membus.core.error.DsmException;
import io.membus.core.error.MessageTooLargeException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.time.Deadlines;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * The sender side of the messages of one connection: credits, the messages
 * waiting for one, the messages in flight, and their deadlines. Every transport's
 * connection has one and gives it a {@link Transmitter} that puts a message on
 * its wire; the transport feeds back credit grants and answers.
 *
 * <p><b>Credits.</b> The receiver grants {@link MessageEndpoint#inboxCapacity()}
 * credits (with its maximum message size) when the connection opens; each message
 * spends one and its answer — reply, empty acknowledgement of a one-way message,
 * or failure — gives it back. Without a credit a message waits here, in order,
 * under its deadline (no thread blocks); a message whose deadline passes while it
 * waits fails with {@link io.membus.core.error.DsmTimeoutException} and is never
 * sent. A message that timed out in flight keeps its credit until its late answer
 * arrives, so the receiver's inbox is never overrun.
 *
 * <p><b>Order and delivery.</b> Messages are transmitted in the order they were
 * posted, at most once; nothing is ever resent. When the connection is lost every
 * message waiting or in flight fails with {@link NodeUnavailableException} (it
 * may or may not have been handled).
 *
 * <p><b>Note:</b> thread-safe; any thread may post. Transmission happens under
 * this outbox's lock (so the transmitter must not block, and must not call back
 * into the outbox on another thread while waiting); futures are completed outside it.
 */
public final class Outbox {
    /** Retry delay when the transmitter could not take a message (a full shared ring). */
    private static final long RETRY_NANOS = TimeUnit.MICROSECONDS.toNanos(200);

    /** Puts one message on the wire; returns {@code false} when it cannot take it now (retried later). */
    @FunctionalInterface
    public interface Transmitter {
        boolean transmit(long correlation, short channel, boolean request, byte[] payload);
    }

    private final int peerNode;
    private final Duration timeout;
    private final MessageEndpoint local;
    private final Transmitter transmitter;
    private final ArrayDeque<Pending> waiting = new ArrayDeque<>(); // guarded by this
    private final Map<Long, Pending> inFlight = new HashMap<>(); // guarded by this
    private int credits; // guarded by this
    private int peerMaxSize = -1; // guarded by this; -1 until the first grant
    private long nextCorrelation = 1; // guarded by this
    private DsmException closed; // guarded by this
    private boolean retryScheduled; // guarded by this

    /**
     * @param local the sending node's endpoint, where messages out are counted
     */
    public Outbox(int peerNode, Duration timeout, MessageEndpoint local, Transmitter transmitter) {
        this.peerNode = peerNode;
        this.timeout = timeout;
        this.local = local;
        this.transmitter = transmitter;
    }

    /**
     * Posts a message; the future completes with the reply (empty for one-way
     * messages) or fails with a typed {@link DsmException}. The payload is copied.
     */
    public CompletableFuture<byte[]> post(short channel, boolean request, byte[] payload) {
        Pending p = new Pending(channel, request, payload.clone(), new CompletableFuture<>());
        List<Runnable> done;
        synchronized (this) {
            if (closed != null) {
                local.countError(channel);
                return CompletableFuture.failedFuture(closed);
            }
            if (peerMaxSize >= 0 && payload.length > peerMaxSize) {
                local.countError(channel);
                return CompletableFuture.failedFuture(new MessageTooLargeException(peerNode,
                        MessageEndpoint.key(channel), payload.length, peerMaxSize));
            }
            Deadlines.within(p.future, timeout, request ? "request" : "send", peerNode);
            waiting.add(p);
            done = pumpLocked();
        }
        run(done);
        return p.future;
    }

    /** The receiver granted {@code n} more credits; {@code maxSize} is its largest message. */
    public void grant(int n, int maxSize) {
        List<Runnable> done;
        synchronized (this) {
            credits += n;
            peerMaxSize = maxSize;
            done = pumpLocked();
        }
        run(done);
    }

    /** The receiver answered message {@code correlation} with {@code reply}; its credit returns. */
    public void replied(long correlation, byte[] reply) {
        answered(correlation, reply, null);
    }

    /** The receiver answered message {@code correlation} with {@code failure}; its credit returns. */
    public void failed(long correlation, DsmException failure) {
        answered(correlation, null, failure);
    }

    /**
     * The receiver answered message {@code correlation} with a failure in its wire
     * form (see {@link MessageFailures}); it is rebuilt with the message's channel.
     */
    public void failed(long correlation, io.membus.core.error.ErrorCode code, long detail, String text) {
        answered(correlation, null, null, code, detail, text);
    }

    private void answered(long correlation, byte[] reply, DsmException failure) {
        answered(correlation, reply, failure, null, 0, null);
    }

    private void answered(long correlation, byte[] reply, DsmException failure, io.membus.core.error.ErrorCode code,
                          long detail, String text) {
        Pending p;
        List<Runnable> done;
        synchronized (this) {
            p = inFlight.remove(correlation);
            if (p == null) {
                return; // answer of a message failed by close or reset: nothing waits for it
            }
            credits++;
            done = pumpLocked();
        }
        if (code != null) {
            failure = MessageFailures.decode(peerNode, MessageEndpoint.key(p.channel), code, detail, text);
        }
        if (failure != null) {
            local.countError(p.channel);
            p.future.completeExceptionally(failure);
        } else {
            p.future.complete(p.request ? reply : null); // one-way: the future is a CompletableFuture<Void>
        }
        run(done);
    }

    /** Whether an answer with this correlation id is expected (a transport may treat others as protocol errors). */
    public synchronized boolean expects(long correlation) {
        return inFlight.containsKey(correlation);
    }

    /** Messages in flight (sent, not answered), for tests and status. */
    public synchronized int inFlight() {
        return inFlight.size();
    }

    /** Credits left now. */
    public synchronized int credits() {
        return credits;
    }

    /**
     * Fails every message waiting or in flight with {@code cause}, and every later
     * post at once. Idempotent: the first cause stays.
     */
    public void close(DsmException cause) {
        List<Pending> failed;
        synchronized (this) {
            if (closed != null) {
                return;
            }
            closed = cause;
            failed = new ArrayList<>(waiting);
            failed.addAll(inFlight.values());
            waiting.clear();
            inFlight.clear();
        }
        for (Pending p : failed) {
            if (p.future.completeExceptionally(cause)) {
                local.countError(p.channel);
            }
        }
    }

    /**
     * The connection was lost and will be re-established: fails every message
     * waiting or in flight with {@code cause} and drops the credits until the
     * receiver grants them again on the new connection. Posts meanwhile wait (under
     * their deadlines). No effect once closed.
     */
    public void reset(DsmException cause) {
        List<Pending> failed;
        synchronized (this) {
            if (closed != null) {
                return;
            }
            failed = new ArrayList<>(waiting);
            failed.addAll(inFlight.values());
            waiting.clear();
            inFlight.clear();
            credits = 0;
        }
        for (Pending p : failed) {
            if (p.future.completeExceptionally(cause)) {
                local.countError(p.channel);
            }
        }
    }

    public synchronized boolean isClosed() {
        return closed != null;
    }

    /** Transmits waiting messages while credits last; returns the completions to run outside the lock. */
    private List<Runnable> pumpLocked() {
        List<Runnable> done = null;
        while (credits > 0 && !waiting.isEmpty() && closed == null) {
            Pending p = waiting.peek();
            if (p.future.isDone()) {
                waiting.poll(); // timed out while waiting: never sent
                continue;
            }
            if (p.payload.length > peerMaxSize) {
                waiting.poll();
                MessageTooLargeException e = new MessageTooLargeException(peerNode, MessageEndpoint.key(p.channel),
                        p.payload.length, peerMaxSize);
                local.countError(p.channel);
                (done = done == null ? new ArrayList<>() : done).add(() -> p.future.completeExceptionally(e));
                continue;
            }
            long correlation = nextCorrelation++;
            inFlight.put(correlation, p);
            boolean sent;
            try {
                sent = transmitter.transmit(correlation, p.channel, p.request, p.payload);
            } catch (DsmException e) {
                inFlight.remove(correlation);
                waiting.poll();
                local.countError(p.channel);
                (done = done == null ? new ArrayList<>() : done).add(() -> p.future.completeExceptionally(e));
                continue;
            }
            if (!sent) {
                inFlight.remove(correlation);
                nextCorrelation--;
                if (!retryScheduled) {
                    retryScheduled = true;
                    Deadlines.schedule(this::retry, RETRY_NANOS);
                }
                break;
            }
            waiting.poll();
            credits--;
            local.countOut(p.channel, p.payload.length);
        }
        return done == null ? List.of() : done;
    }

    private void retry() {
        List<Runnable> done;
        synchronized (this) {
            retryScheduled = false;
            done = pumpLocked();
        }
        run(done);
    }

    private static void run(List<Runnable> done) {
        for (Runnable r : done) {
            r.run();
        }
    }

    private record Pending(short channel, boolean request, byte[] payload, CompletableFuture<byte[]> future) {
    }
}
