package io.membus.transport.tcp;

import io.membus.core.error.DsmException;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.transport.VerbObserver;
import io.netty.buffer.ByteBuf;

/**
 * The compound verbs of a {@link TcpLane}: several requests written to the lane's socket
 * in one {@code write} ({@link TcpLane#requests}, {@link TcpLane#transmit}) and every
 * answer read back in order on the calling thread ({@link TcpLane#answer}), so a pair, a
 * triple or a burst of up to {@link TcpLane#MAX_BURST} reads costs one round trip. An
 * ERROR answer to one of them leaves the lane in step (the later answers are still read)
 * and the first failure in issue order is thrown; a failure of the socket or the deadline
 * breaks the lane. Each verb is reported to the transport's {@link VerbObserver}.
 * The lane itself (socket, handshake, single verbs, framing, deadline) is {@link TcpLane}.
 *
 * <p><b>Note:</b> stateless; every method runs on the thread that holds the lane
 * (not thread-safe for one lane, as the lane). Memory ordering is the lane's: requests
 * and answers are on one thread, the deadline a volatile the {@link LaneReaper} reads.
 */
final class LaneCompounds {
    private LaneCompounds() {
    }

    /**
     * Reads {@code lengthA} bytes at {@code ptrA} into {@code dstA}, then {@code lengthB}
     * bytes at {@code ptrB} into {@code dstB}: both requests leave in one {@code write}
     * and the target runs them in that order, so the pair costs one round trip and the
     * second read sees every write the first saw. When the first is refused (an ERROR
     * answer) the second's answer is still read, so the lane stays in step; the first
     * failure is thrown.
     */
    static void readInOrder(TcpLane lane, long ptrA, long keyA, byte[] dstA, int lengthA, long ptrB, long keyB,
                            byte[] dstB, int lengthB) {
        ByteBuf frameBuf = lane.requests();
        long first = appendReads(lane, frameBuf, ptrA, keyA, lengthA, ptrB, keyB, lengthB);
        long second = first + 1;
        long start = System.nanoTime();
        long until = lane.until(start);
        VerbObserver observer = lane.observer();
        DsmException firstFailure = null;
        boolean firstDone = false;
        try {
            lane.transmit(Frame.OP_READ, until);
            try {
                lane.answer(Frame.OP_READ, first, until);
                lane.expectBody(Frame.OP_READ, lengthA);
                lane.answerFrame().bytesAt(Frame.HEADER_LENGTH, dstA, 0, lengthA);
                firstDone = true;
            } catch (DsmException e) {
                firstFailure = e;
                if (lane.broken()) {
                    throw e;
                }
                // refused and answered in order: the second answer still follows
            }
            lane.answer(Frame.OP_READ, second, until);
            lane.expectBody(Frame.OP_READ, lengthB);
            lane.answerFrame().bytesAt(Frame.HEADER_LENGTH, dstB, 0, lengthB);
        } catch (DsmException e) {
            long took = System.nanoTime() - start;
            report(lane, observer, VerbObserver.READ, firstDone ? null : firstFailure != null ? firstFailure : e,
                    lengthA, took);
            report(lane, observer, VerbObserver.READ, e, lengthB, took);
            throw firstFailure != null ? firstFailure : e;
        }
        long took = System.nanoTime() - start;
        report(lane, observer, VerbObserver.READ, firstFailure, lengthA, took);
        report(lane, observer, VerbObserver.READ, null, lengthB, took);
        if (firstFailure != null) {
            throw firstFailure;
        }
    }

    /** Appends READ requests of A and then B to {@code frameBuf}; returns A's correlation id (B's is the next). */
    private static long appendReads(TcpLane lane, ByteBuf frameBuf, long ptrA, long keyA, int lengthA, long ptrB,
                                    long keyB, int lengthB) {
        long first = lane.nextCorrelation();
        Frame.writeRead(frameBuf, first, ptrA, keyA, lengthA);
        Frame.writeRead(frameBuf, lane.nextCorrelation(), ptrB, keyB, lengthB);
        return first;
    }

    /**
     * Whether a write of {@code length} bytes and reads of {@code lengthA} and {@code lengthB}
     * fit one lane call ({@link #writeThenReadInOrder}): the three requests in one buffer,
     * each answer in one lane.answerFrame().
     */
    static boolean fitsWriteThenReads(int length, int lengthA, int lengthB) {
        return length >= 0 && length <= TcpLane.MAX_VERB_LENGTH - 2 * (Frame.HEADER_LENGTH + Frame.READ_BODY_LENGTH)
                && lengthA <= TcpLane.MAX_VERB_LENGTH && lengthB <= TcpLane.MAX_VERB_LENGTH;
    }

    /**
     * Writes {@code src[offset..offset+length)} at {@code ptrW}, then reads {@code lengthA}
     * bytes at {@code ptrA} into {@code dstA} and {@code lengthB} bytes at {@code ptrB} into
     * {@code dstB}: the three requests leave in one {@code write} and the target runs them
     * in that order, so they cost one round trip. The reads are not linked to the write
     * (they run either way); every answer is read, so the lane stays in step after a
     * refusal, and the first failure in issue order is thrown.
     */
    static void writeThenReadInOrder(TcpLane lane, long ptrW, long keyW, byte[] src, int offset, int length,
                                     long ptrA, long keyA, byte[] dstA, int lengthA, long ptrB, long keyB, byte[] dstB,
                                     int lengthB) {
        ByteBuf frameBuf = lane.requests();
        long w = lane.nextCorrelation();
        Frame.writeWrite(frameBuf, w, ptrW, keyW, src, offset, length);
        long a = appendReads(lane, frameBuf, ptrA, keyA, lengthA, ptrB, keyB, lengthB);
        long b = a + 1;
        long start = System.nanoTime();
        long until = lane.until(start);
        VerbObserver observer = lane.observer();
        DsmException[] failures = new DsmException[3];
        int answered = 0;
        try {
            lane.transmit(Frame.OP_WRITE, until);
            for (; answered < 3; answered++) {
                byte op = answered == 0 ? Frame.OP_WRITE : Frame.OP_READ;
                try {
                    lane.answer(op, answered == 0 ? w : answered == 1 ? a : b, until);
                    lane.expectBody(op, answered == 0 ? 0 : answered == 1 ? lengthA : lengthB);
                    if (answered == 1) {
                        lane.answerFrame().bytesAt(Frame.HEADER_LENGTH, dstA, 0, lengthA);
                    } else if (answered == 2) {
                        lane.answerFrame().bytesAt(Frame.HEADER_LENGTH, dstB, 0, lengthB);
                    }
                } catch (DsmException e) {
                    if (lane.broken()) {
                        throw e;
                    }
                    failures[answered] = e; // refused and answered in order: the next answers still follow
                }
            }
        } catch (DsmException e) {
            for (int i = answered; i < 3; i++) {
                failures[i] = e; // not answered: the lane is broken
            }
        }
        long took = System.nanoTime() - start;
        report(lane, observer, VerbObserver.WRITE, failures[0], length, took);
        report(lane, observer, VerbObserver.READ, failures[1], lengthA, took);
        report(lane, observer, VerbObserver.READ, failures[2], lengthB, took);
        for (DsmException f : failures) {
            if (f != null) {
                throw f;
            }
        }
    }

    /**
     * Reads {@code dsts[i].length} bytes at {@code ptrs[i]} into {@code dsts[i]} for
     * {@code from <= i < to} (at most {@link TcpLane#MAX_BURST} reads, each at most
     * {@link TcpLane#MAX_VERB_LENGTH} bytes: the caller checked): every request leaves in one
     * {@code write}, the target runs them in that order and writes the answers together
     * (LaneServer: answers to requests that arrived together leave together), and this
     * thread reads them, so the burst costs one round trip and no other thread. One deadline
     * for the burst. An ERROR answer does not stop it: the later answers are still read, so
     * the lane stays in step; the first failure is thrown. A failure of the socket or the
     * deadline breaks the lane (its later answers could still come) and may have run.
     */
    static void readEach(TcpLane lane, long[] ptrs, long[] keys, byte[][] dsts, int from, int to) {
        ByteBuf frameBuf = lane.requests();
        long firstCorrelation = 0;
        for (int i = from; i < to; i++) {
            long correlation = lane.nextCorrelation();
            if (i == from) {
                firstCorrelation = correlation;
            }
            Frame.writeRead(frameBuf, correlation, ptrs[i], keys[i], dsts[i].length);
        }
        long start = System.nanoTime();
        long until = lane.until(start);
        VerbObserver observer = lane.observer();
        DsmException firstFailure = null;
        int answered = from; // reads whose outcome is known (completed or refused)
        try {
            lane.transmit(Frame.OP_READ, until);
            VerbPathCounts.laneBursts.increment();
            for (int i = from; i < to; i++) {
                try {
                    lane.answer(Frame.OP_READ, firstCorrelation + (i - from), until);
                    lane.expectBody(Frame.OP_READ, dsts[i].length);
                    lane.answerFrame().bytesAt(Frame.HEADER_LENGTH, dsts[i], 0, dsts[i].length);
                    report(lane, observer, VerbObserver.READ, null, dsts[i].length, System.nanoTime() - start);
                } catch (DsmException e) {
                    if (lane.broken()) {
                        throw e;
                    }
                    report(lane, observer, VerbObserver.READ, e, 0, 0);
                    if (firstFailure == null) {
                        firstFailure = e; // refused and answered in order: the later answers still follow
                    }
                }
                answered = i + 1;
            }
        } catch (DsmException e) {
            for (int i = answered; i < to; i++) {
                report(lane, observer, VerbObserver.READ, e, 0, 0);
            }
            throw firstFailure != null ? firstFailure : e;
        }
        if (firstFailure != null) {
            throw firstFailure;
        }
    }

    /**
     * Writes {@code src[offset..offset+length)} at {@code ptrW}, then compare-and-swaps the
     * word at {@code ptrC}: both requests leave in one {@code write}, and the CAS is LINKED
     * (the target runs it only if the write ran without error), so the pair costs one
     * round trip and the swap never runs without its write. Returns the CAS's witness; a
     * refused write is thrown (its CAS was not run).
     */
    static long writeThenCompareAndSwap(TcpLane lane, long ptrW, long keyW, byte[] src, int offset, int length,
                                        long ptrC, long keyC, long expected, long update) {
        ByteBuf frameBuf = lane.requests();
        long first = lane.nextCorrelation();
        Frame.writeWrite(frameBuf, first, ptrW, keyW, src, offset, length);
        long second = lane.nextCorrelation();
        Frame.writeLinkedCas(frameBuf, second, ptrC, keyC, expected, update);
        long start = System.nanoTime();
        long until = lane.until(start);
        VerbObserver observer = lane.observer();
        DsmException writeFailure = null;
        boolean written = false;
        long witness;
        try {
            lane.transmit(Frame.OP_WRITE, until);
            try {
                lane.answer(Frame.OP_WRITE, first, until);
                lane.expectBody(Frame.OP_WRITE, 0);
                written = true;
            } catch (DsmException e) {
                writeFailure = e;
                if (lane.broken()) {
                    throw e;
                }
                // refused: the linked CAS is answered NOT_RUN next, which keeps the lane in step
            }
            try {
                lane.answer(Frame.OP_CAS, second, until);
            } catch (DsmException e) {
                if (lane.broken() || writeFailure == null) {
                    throw e;
                }
            }
            if (writeFailure != null) {
                throw writeFailure;
            }
            lane.expectBody(Frame.OP_CAS, Long.BYTES);
            witness = lane.answerFrame().longAt(Frame.HEADER_LENGTH);
        } catch (DsmException e) {
            long took = System.nanoTime() - start;
            report(lane, observer, VerbObserver.WRITE, written ? null : e, length, took);
            report(lane, observer, VerbObserver.CAS, e, Long.BYTES, took);
            throw e;
        }
        long took = System.nanoTime() - start;
        report(lane, observer, VerbObserver.WRITE, null, length, took);
        report(lane, observer, VerbObserver.CAS, null, Long.BYTES, took);
        return witness;
    }

    /** Reports one verb of a pair of kind {@code kind}: completed when {@code failure} is null. */
    private static void report(TcpLane lane, VerbObserver observer, int kind, DsmException failure, int bytes,
                               long took) {
        if (failure == null) {
            observer.completed(lane.peerNode(), kind, bytes, took);
        } else if (failure instanceof DsmTimeoutException) {
            observer.timedOut(lane.peerNode(), kind);
        } else {
            observer.failed(lane.peerNode(), kind);
        }
    }
}
