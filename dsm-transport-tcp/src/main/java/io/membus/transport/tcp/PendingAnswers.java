package io.membus.transport.tcp;

import io.membus.core.error.DsmException;
import io.membus.core.replication.AckGate;
import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;

import java.util.ArrayDeque;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Supplier;

/**
 * The answers of one accepted connection ({@link ServerHandler}) that wait for their
 * replica group's acknowledgement, in request order: a FIFO of pending answers, each with
 * the answers of the later verbs that wait only behind it (answers leave in request order:
 * the verbs' contract). The group's {@link AckGate#whenAcked} callback, on whatever thread
 * advanced the acknowledgement, only marks its answer and hands the release to the
 * channel's event loop ({@link ServerHandler}'s release task, queued once for any number
 * of callbacks meanwhile), which writes every answer at the head that may leave
 * ({@link #writeResolved}). An answer whose group failed first leaves as an ERROR frame
 * with the group's typed failure. Beyond {@link ServerHandler#MAX_PENDING} answers or
 * {@link ServerHandler#MAX_PENDING_BYTES} bytes of them the FIFO is {@link #backedUp()}
 * and the channel stops being read.
 *
 * <p><b>Note:</b> confined to the channel's I/O thread, except each answer's
 * {@link AckGate.Done#done} callback (any thread): it publishes its outcome through a
 * volatile write and hands the release to the event loop, whose task submission orders it
 * before the release reads it.
 */
final class PendingAnswers {
    private final ChannelHandlerContext ctx;
    private final Runnable releaseTask;
    /** Answers waiting for their replica group's acknowledgement, in request order, each with those behind it. */
    private final ArrayDeque<Pending> pending = new ArrayDeque<>();
    /** Bytes held in {@link #pending}. */
    private long pendingBytes;
    /** Whether a release task was handed to the event loop and has not started yet. */
    private final AtomicBoolean releaseQueued = new AtomicBoolean();

    PendingAnswers(ChannelHandlerContext ctx, Runnable releaseTask) {
        this.ctx = ctx;
        this.releaseTask = releaseTask;
    }

    /**
     * One answer that waits for its group ({@link #waiting}), and the answers of the later
     * verbs that wait only behind it ({@link #after}, until the next answer that waits
     * for a group of its own).
     *
     * <p><b>Note:</b> the buffers are confined to the I/O thread; {@link #done} may be
     * called on any thread and publishes {@link #failure} through {@link #resolved}.
     */
    private final class Pending implements AckGate.Done {
        final VerbExecutor.Waiting waiting;
        final ByteBuf answer;
        ByteBuf after;
        private DsmException failure;
        private volatile boolean resolved;

        Pending(VerbExecutor.Waiting waiting, ByteBuf answer) {
            this.waiting = waiting;
            this.answer = answer;
        }

        ByteBuf after() {
            if (after == null) {
                after = ctx.alloc().ioBuffer(256);
            }
            return after;
        }

        /** Whether it may leave now; its failure then in {@link #failure} (null: acknowledged). */
        boolean resolved() {
            return resolved || waiting.gate().acked(waiting.need());
        }

        @Override
        public void done(DsmException f) {
            failure = f;
            resolved = true; // publishes failure
            queueRelease();
        }

        void release() {
            answer.release();
            if (after != null) {
                after.release();
            }
        }
    }

    /** Where the next answer goes when an answer waits: behind the last one (request order); null when none waits. */
    ByteBuf behindTail() {
        Pending tail = pending.peekLast();
        return tail == null ? null : tail.after();
    }

    /** An answer of {@code bytes} was written {@link #behindTail() behind} the last waiting one. */
    void addedBehind(int bytes) {
        pendingBytes += bytes;
        if (backedUp()) {
            ctx.channel().config().setAutoRead(false);
        }
    }

    /**
     * Moves the answer just written at {@code start} of {@code o} into a new pending answer
     * and asks its group to say when it may leave.
     */
    void hold(VerbExecutor.Waiting w, ByteBuf o, int start) {
        int length = o.writerIndex() - start;
        ByteBuf answer = ctx.alloc().ioBuffer(length);
        answer.writeBytes(o, start, length);
        o.writerIndex(start);
        Pending p = new Pending(w, answer);
        pending.add(p);
        pendingBytes += length;
        if (backedUp()) {
            ctx.channel().config().setAutoRead(false); // the rest of this read batch parks in held
        }
        w.gate().whenAcked(w.need(), p); // may call back at once, on this thread: the release is queued
    }

    /** Whether the answers waiting for their groups reached a limit: the channel is not read meanwhile. */
    boolean backedUp() {
        return pendingBytes >= ServerHandler.MAX_PENDING_BYTES || pending.size() >= ServerHandler.MAX_PENDING;
    }

    /** Any thread: runs the release task on the event loop (once for any number of callbacks meanwhile). */
    private void queueRelease() {
        if (releaseQueued.compareAndSet(false, true)) {
            try {
                ctx.executor().execute(releaseTask);
            } catch (RejectedExecutionException e) {
                // the event loop is shutting down: the channel closes with it and its answers are dropped
            }
        }
    }

    /** The release task started (event loop): a callback from now on queues a new one. Before reading outcomes. */
    void releaseStarted() {
        releaseQueued.set(false);
    }

    /**
     * Writes the pending answers at the head of the FIFO that may leave (acknowledged, or
     * failed: then an ERROR frame), with the answers behind each, in order, into
     * {@code out} (asked for only when one leaves).
     */
    void writeResolved(Supplier<ByteBuf> out) {
        Pending p;
        while ((p = pending.peek()) != null && p.resolved()) {
            pending.poll();
            ByteBuf o = out.get();
            DsmException failure = p.resolved ? p.failure : null;
            if (failure == null) {
                o.writeBytes(p.answer);
            } else {
                p.waiting.writeFailure(o, failure);
            }
            pendingBytes -= p.answer.writerIndex();
            if (p.after != null) {
                pendingBytes -= p.after.readableBytes();
                o.writeBytes(p.after);
            }
            p.release();
        }
    }

    /** The connection closed: every pending answer is dropped. */
    void clear() {
        while (!pending.isEmpty()) {
            pending.poll().release();
        }
        pendingBytes = 0;
    }
}
