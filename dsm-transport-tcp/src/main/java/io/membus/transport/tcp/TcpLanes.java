package io.membus.transport.tcp;

import io.membus.core.OperationDeadline;
import io.membus.core.Words;
import io.membus.core.error.DsmException;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.metrics.OpEvents;
import io.membus.core.transport.BlockingVerbs;
import io.membus.core.directory.PeerInfo;
import io.membus.core.transport.VerbWait;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * The blocking lanes of one {@link TcpConnection}: up to
 * {@code membus.transports.tcp.blocking-lanes} sockets to the same peer incarnation,
 * opened on demand, each used by one calling thread for one verb at a time (see
 * {@link TcpLane} for why). A caller takes an idle lane, runs its verb and gives the
 * lane back; when every lane is busy and no more may open, or a verb is too long
 * for a lane, the verb is posted on the pipelined channel and awaited instead, so
 * a blocking verb never waits for a lane. A thread's asynchronous reads may hold an idle
 * lane until it waits ({@link #takeForFlight()}, {@link LaneFlight}); the lane comes back
 * when their answers are read.
 *
 * <p>Which lanes are open and which are idle are two bit sets in one word each:
 * taking and giving back a lane is one CAS, with no allocation. Each verb spells out its
 * own take, run, give back and fallback under one deadline (the same dozen lines each): a
 * shared helper would take the verb and its fallback as two capturing lambdas, two objects
 * per verb on the synchronous path, which allocates nothing else.
 *
 * <p><b>Note:</b> thread-safe. Closing (the connection closed or lost its
 * channel) closes every lane, waking callers blocked on one: they fail with
 * {@link NodeUnavailableException}; later verbs find the connection not open.
 */
final class TcpLanes implements BlockingVerbs {
    private static final Logger LOG = LoggerFactory.getLogger(TcpConnection.class);
    private static final net.openhft.chronicle.core.UnsafeMemory MEMORY = net.openhft.chronicle.core.UnsafeMemory.MEMORY;
    private static final long BYTE_ARRAY_OFFSET = net.openhft.chronicle.core.UnsafeMemory.UNSAFE.arrayBaseOffset(
            byte[].class);
    /** After a lane failed to open, none is opened again for this long (the pipelined channel serves). */
    private static final long RETRY_AFTER_FAILED_OPEN_NANOS = 1_000_000_000L;

    private final TcpConnection connection;
    private final TcpTransport transport;
    private final PeerInfo peer;
    private final String host;
    private final int port;
    private final int max;
    private final Duration wait;
    private final long timeoutNanos;
    private final AtomicReferenceArray<TcpLane> lanes;
    /** Bit i: lane i exists or is being opened. */
    private final AtomicLong open = new AtomicLong();
    /** Bit i: lane i exists and no caller holds it. */
    private final AtomicLong idle = new AtomicLong();
    private volatile boolean closed;
    private volatile long noOpenBefore;
    /** Set when the peer's lane server could not be reached: this connection's lanes open on the peer's port. */
    private volatile boolean laneServerUnreachable;

    TcpLanes(TcpConnection connection, TcpTransport transport, PeerInfo peer, String host, int port, int max) {
        if (max < 0 || max > Long.SIZE) {
            throw new IllegalArgumentException("lanes=" + max + " outside 0.." + Long.SIZE);
        }
        this.connection = connection;
        this.transport = transport;
        this.peer = peer;
        this.host = host;
        this.port = port;
        this.max = max;
        this.lanes = new AtomicReferenceArray<>(Math.max(1, max));
        // a fallback verb waits for the pipelined channel's own deadline, plus a margin
        this.wait = transport.settings.operationTimeout.plusSeconds(1);
        this.timeoutNanos = transport.settings.operationTimeout.toNanos();
    }

    // ------------------------------------------------------------------ verbs

    @Override
    public void readInto(long ptr, long remoteKey, byte[] dst, int dstOffset, int length) {
        long scope = OperationDeadline.enterNanos(timeoutNanos); // lane open, verb and fallback: one deadline
        try {
            TcpLane lane = length <= TcpLane.MAX_VERB_LENGTH ? take() : null;
            if (lane == null) {
                System.arraycopy(await(connection.read(ptr, remoteKey, length)), 0, dst, dstOffset, length);
                return;
            }
            try {
                lane.readInto(ptr, remoteKey, dst, dstOffset, length);
            } finally {
                give(lane);
            }
        } finally {
            OperationDeadline.exit(scope);
        }
    }

    /** Both reads on one lane in one round trip; one after the other when no lane is free (two round trips). */
    @Override
    public void readInOrder(long ptrA, long keyA, byte[] dstA, int lengthA, long ptrB, long keyB, byte[] dstB,
                            int lengthB) {
        long scope = OperationDeadline.enterNanos(timeoutNanos); // lane open, verb and fallback: one deadline
        try {
            TcpLane lane = lengthA <= TcpLane.MAX_VERB_LENGTH && lengthB <= TcpLane.MAX_VERB_LENGTH ? take() : null;
            if (lane == null) {
                BlockingVerbs.super.readInOrder(ptrA, keyA, dstA, lengthA, ptrB, keyB, dstB, lengthB);
                return;
            }
            try {
                LaneCompounds.readInOrder(lane, ptrA, keyA, dstA, lengthA, ptrB, keyB, dstB, lengthB);
            } finally {
                give(lane);
            }
        } finally {
            OperationDeadline.exit(scope);
        }
    }

    /**
     * The reads on one lane, {@link TcpLane#MAX_BURST} at a time (one write and one round trip
     * each), under one deadline; when no lane is free, or a read is longer than a lane carries,
     * all of them are posted on the pipelined channel as one batch (issue order, one flush)
     * and awaited together.
     */
    @Override
    public void readEach(long[] ptrs, long[] keys, byte[][] dsts, int count) {
        long scope = OperationDeadline.enterNanos(timeoutNanos); // lane open, bursts and fallback: one deadline
        try {
            boolean fits = true;
            for (int i = 0; i < count && fits; i++) {
                fits = dsts[i].length <= TcpLane.MAX_VERB_LENGTH;
            }
            TcpLane lane = fits && count > 0 ? take() : null;
            if (lane == null) {
                postEach(ptrs, keys, dsts, count);
                return;
            }
            try {
                for (int from = 0; from < count; from += TcpLane.MAX_BURST) {
                    LaneCompounds.readEach(lane, ptrs, keys, dsts, from, Math.min(count, from + TcpLane.MAX_BURST));
                }
            } finally {
                give(lane);
            }
        } finally {
            OperationDeadline.exit(scope);
        }
    }

    /** {@link #readEach} on the pipelined channel: one batch, every answer awaited; the lowest index's failure thrown. */
    private void postEach(long[] ptrs, long[] keys, byte[][] dsts, int count) {
        if (count == 0) {
            return;
        }
        io.membus.core.transport.Batch batch = connection.batch();
        @SuppressWarnings("unchecked")
        CompletableFuture<byte[]>[] posted = new CompletableFuture[count];
        for (int i = 0; i < count; i++) {
            posted[i] = batch.read(ptrs[i], keys[i], dsts[i].length);
        }
        batch.submit();
        DsmException first = null;
        for (int i = 0; i < count; i++) {
            try {
                byte[] b = await(posted[i]);
                System.arraycopy(b, 0, dsts[i], 0, dsts[i].length);
            } catch (DsmException e) {
                if (first == null) {
                    first = e;
                }
            }
        }
        if (first != null) {
            throw first;
        }
    }

    /** Both on one lane in one round trip, the CAS linked to the write; one after the other when no lane is free. */
    @Override
    public long writeThenCompareAndSwap(long ptrW, long keyW, byte[] src, int offset, int length, long ptrC,
                                       long keyC, long expected, long update) {
        long scope = OperationDeadline.enterNanos(timeoutNanos); // lane open, verb and fallback: one deadline
        try {
            TcpLane lane = length <= TcpLane.MAX_VERB_LENGTH ? take() : null;
            if (lane == null) {
                return BlockingVerbs.super.writeThenCompareAndSwap(ptrW, keyW, src, offset, length, ptrC, keyC, expected,
                        update);
            }
            try {
                return LaneCompounds.writeThenCompareAndSwap(lane, ptrW, keyW, src, offset, length, ptrC, keyC,
                        expected, update);
            } finally {
                give(lane);
            }
        } finally {
            OperationDeadline.exit(scope);
        }
    }

    /** The three on one lane in one round trip; one after the other when no lane is free or they do not fit one. */
    @Override
    public void writeThenReadInOrder(long ptrW, long keyW, byte[] src, int offset, int length, long ptrA, long keyA,
                                     byte[] dstA, int lengthA, long ptrB, long keyB, byte[] dstB, int lengthB) {
        long scope = OperationDeadline.enterNanos(timeoutNanos); // lane open, verbs and fallback: one deadline
        try {
            TcpLane lane = LaneCompounds.fitsWriteThenReads(length, lengthA, lengthB) ? take() : null;
            if (lane == null) {
                BlockingVerbs.super.writeThenReadInOrder(ptrW, keyW, src, offset, length, ptrA, keyA, dstA, lengthA,
                        ptrB, keyB, dstB, lengthB);
                return;
            }
            try {
                LaneCompounds.writeThenReadInOrder(lane, ptrW, keyW, src, offset, length, ptrA, keyA, dstA, lengthA,
                        ptrB, keyB, dstB, lengthB);
            } finally {
                give(lane);
            }
        } finally {
            OperationDeadline.exit(scope);
        }
    }

    @Override
    public void readToAddress(long ptr, long remoteKey, long address, int length) {
        long scope = OperationDeadline.enterNanos(timeoutNanos); // lane open, verb and fallback: one deadline
        try {
            TcpLane lane = length <= TcpLane.MAX_VERB_LENGTH ? take() : null;
            if (lane == null) {
                byte[] b = await(connection.read(ptr, remoteKey, length));
                MEMORY.copyMemory(b, 0, address, length);
                return;
            }
            try {
                lane.readToAddress(ptr, remoteKey, address, length);
            } finally {
                give(lane);
            }
        } finally {
            OperationDeadline.exit(scope);
        }
    }

    @Override
    public void writeFromAddress(long ptr, long remoteKey, long address, int length) {
        long scope = OperationDeadline.enterNanos(timeoutNanos); // lane open, verb and fallback: one deadline
        try {
            TcpLane lane = length <= TcpLane.MAX_VERB_LENGTH ? take() : null;
            if (lane == null) {
                if (length > io.membus.core.transport.SegmentTable.MAX_VERB_LENGTH) { // refused before the copy is allocated
                    throw new io.membus.core.error.BadLengthException(ptr, length,
                            io.membus.core.transport.SegmentTable.MAX_VERB_LENGTH);
                }
                byte[] b = new byte[length];
                MEMORY.copyMemory(address, b, BYTE_ARRAY_OFFSET, length);
                await(connection.write(ptr, remoteKey, b, 0, length));
                return;
            }
            try {
                lane.writeFromAddress(ptr, remoteKey, address, length);
            } finally {
                give(lane);
            }
        } finally {
            OperationDeadline.exit(scope);
        }
    }

    @Override
    public long readLong(long ptr, long remoteKey) {
        long scope = OperationDeadline.enterNanos(timeoutNanos); // lane open, verb and fallback: one deadline
        try {
            TcpLane lane = take();
            if (lane == null) {
                return Words.getLong(await(connection.read(ptr, remoteKey, Long.BYTES)), 0);
            }
            try {
                return lane.readLong(ptr, remoteKey);
            } finally {
                give(lane);
            }
        } finally {
            OperationDeadline.exit(scope);
        }
    }

    @Override
    public void write(long ptr, long remoteKey, byte[] src, int offset, int length) {
        long scope = OperationDeadline.enterNanos(timeoutNanos); // lane open, verb and fallback: one deadline
        try {
            TcpLane lane = length <= TcpLane.MAX_VERB_LENGTH ? take() : null;
            if (lane == null) {
                await(connection.write(ptr, remoteKey, src, offset, length));
                return;
            }
            try {
                lane.write(ptr, remoteKey, src, offset, length);
            } finally {
                give(lane);
            }
        } finally {
            OperationDeadline.exit(scope);
        }
    }

    @Override
    public void writeLong(long ptr, long remoteKey, long value) {
        long scope = OperationDeadline.enterNanos(timeoutNanos); // lane open, verb and fallback: one deadline
        try {
            TcpLane lane = take();
            if (lane == null) {
                byte[] b = new byte[Long.BYTES];
                Words.putLong(b, 0, value);
                await(connection.write(ptr, remoteKey, b, 0, Long.BYTES));
                return;
            }
            try {
                lane.writeLong(ptr, remoteKey, value);
            } finally {
                give(lane);
            }
        } finally {
            OperationDeadline.exit(scope);
        }
    }

    @Override
    public long compareAndSwap(long ptr, long remoteKey, long expected, long update) {
        long scope = OperationDeadline.enterNanos(timeoutNanos); // lane open, verb and fallback: one deadline
        try {
            TcpLane lane = take();
            if (lane == null) {
                return await(connection.compareAndSwap(ptr, remoteKey, expected, update));
            }
            try {
                return lane.compareAndSwap(ptr, remoteKey, expected, update);
            } finally {
                give(lane);
            }
        } finally {
            OperationDeadline.exit(scope);
        }
    }

    @Override
    public long fetchAndAdd(long ptr, long remoteKey, long delta) {
        long scope = OperationDeadline.enterNanos(timeoutNanos); // lane open, verb and fallback: one deadline
        try {
            TcpLane lane = take();
            if (lane == null) {
                return await(connection.fetchAndAdd(ptr, remoteKey, delta));
            }
            try {
                return lane.fetchAndAdd(ptr, remoteKey, delta);
            } finally {
                give(lane);
            }
        } finally {
            OperationDeadline.exit(scope);
        }
    }

    /**
     * A message request on an idle lane, its reply read on the calling thread
     * ({@link io.membus.core.transport.Connection#requestDirect}); {@code null} when no lane
     * is free and none may open, or the frame does not fit a lane: the caller posts it.
     */
    byte[] requestDirect(short channel, byte[] payload) {
        if (Frame.HEADER_LENGTH + Frame.MSG_FIXED_BODY_LENGTH + (long) payload.length > TcpLane.MAX_FRAME) {
            return null;
        }
        long scope = OperationDeadline.enterNanos(timeoutNanos); // lane open and exchange: one deadline
        try {
            TcpLane lane = take();
            if (lane == null) {
                return null;
            }
            boolean failed = true;
            try {
                byte[] reply = lane.request(channel, payload);
                failed = false;
                return reply;
            } finally {
                transport.messages().countDirectOut(channel, payload.length, failed);
                give(lane);
            }
        } finally {
            OperationDeadline.exit(scope);
        }
    }

    /** Waits for a verb posted on the pipelined channel: until the call's deadline plus the verb grace. */
    private <T> T await(CompletableFuture<T> posted) {
        if (posted.isDone()) {
            return VerbWait.await(posted, Duration.ZERO);
        }
        long left = Math.max(0, OperationDeadline.remainingNanos(timeoutNanos)) + OperationDeadline.VERB_GRACE.toNanos();
        return VerbWait.await(posted, Duration.ofNanos(Math.min(left, wait.toNanos())));
    }

    // ------------------------------------------------------------------ the pool

    /** An idle lane, a newly opened one, or null when none is free and no more may open. */
    private TcpLane take() {
        TcpLane idleLane = takeIdle();
        if (idleLane != null) {
            OpEvents.laneVerb();
            return idleLane;
        }
        if (closed || max == 0 || System.nanoTime() - noOpenBefore < 0) {
            OpEvents.mark(OpEvents.LANE_FALLBACK);
            return null;
        }
        TcpLane lane = openLane();
        if (lane == null) {
            OpEvents.mark(OpEvents.LANE_FALLBACK);
        }
        if (lane == null && OperationDeadline.expired()) {
            // the peer took the call's whole deadline to not answer the lane's handshake: the verb was never sent
            throw DsmTimeoutException.notSent("open a blocking lane to " + peer, peer.nodeId(),
                    transport.settings.operationTimeout);
        }
        return lane;
    }

    private TcpLane openLane() {
        long full = max == Long.SIZE ? -1L : (1L << max) - 1;
        int index;
        while (true) {
            long o = open.get();
            long free = ~o & full;
            if (free == 0) {
                return null;
            }
            long bit = Long.lowestOneBit(free);
            if (open.compareAndSet(o, o | bit)) {
                index = Long.numberOfTrailingZeros(bit);
                break;
            }
        }
        TcpLane lane;
        OpEvents.mark(OpEvents.LANE_OPEN);
        int lanePort = laneServerUnreachable ? 0 : connection.lanePort(); // the peer's lane server, if it runs one
        try {
            boolean[] reached = new boolean[1];
            try {
                lane = TcpLane.open(index, transport, peer, host, lanePort > 0 ? lanePort : port, reached);
            } catch (NodeUnavailableException e) {
                if (lanePort <= 0 || reached[0] || OperationDeadline.expired()) {
                    // the lane server was reached and did not complete the handshake (a paused or overloaded peer,
                    // whose node port would do no better), or no time is left
                    throw e;
                }
                // the lane port cannot be reached (a firewall that lets only the node's port through?) while
                // the node's port can: lanes of this connection go there, served by the peer's event loop
                laneServerUnreachable = true;
                LOG.warn("cannot reach the lane server of {} at port {} ({}); blocking lanes use its port {}",
                        peer, lanePort, e.getMessage(), port);
                lane = TcpLane.open(index, transport, peer, host, port);
            }
        } catch (DsmException e) {
            noOpenBefore = System.nanoTime() + RETRY_AFTER_FAILED_OPEN_NANOS;
            release(index);
            LOG.debug("no blocking lane to {} (the pipelined channel serves): {}", peer, e.getMessage());
            return null;
        }
        lanes.set(index, lane);
        if (closed) { // closed while it opened: closeAll may not have seen it
            discard(index, lane);
            return null;
        }
        return lane;
    }

    /** An idle lane (taken out of the idle set), or null when none is idle. */
    private TcpLane takeIdle() {
        while (true) {
            long m = idle.get();
            if (m == 0) {
                return null;
            }
            long bit = Long.lowestOneBit(m);
            if (idle.compareAndSet(m, m & ~bit)) {
                TcpLane lane = lanes.get(Long.numberOfTrailingZeros(bit));
                if (lane != null && !lane.broken()) {
                    return lane;
                }
                discard(Long.numberOfTrailingZeros(bit), lane); // closed meanwhile
            }
        }
    }

    /** Set while a lane opens in the background for {@link #takeForFlight()}. */
    private final java.util.concurrent.atomic.AtomicBoolean openingForFlights =
            new java.util.concurrent.atomic.AtomicBoolean();

    /**
     * An idle lane for a {@link LaneFlight}, or null. Never opens one on the calling thread
     * (an asynchronous call must not wait for a connect and a handshake): when none is idle
     * and another may open, one opens on one of the transport's flight reader threads
     * ({@code membus-tcp-<node>-flights-<n>}) and later flights find it idle.
     */
    TcpLane takeForFlight() {
        TcpLane idleLane = takeIdle();
        if (idleLane != null) {
            return idleLane;
        }
        if (!closed && max > 0 && System.nanoTime() - noOpenBefore >= 0 && Long.bitCount(open.get()) < max
                && openingForFlights.compareAndSet(false, true)) {
            try {
                transport.flightReaders().execute(() -> { // the transport's own threads, named membus-tcp-*
                    try {
                        TcpLane lane = openLane();
                        if (lane != null) {
                            give(lane);
                        }
                    } catch (RuntimeException e) {
                        LOG.debug("no blocking lane to {} for reads in flight: {}", peer, e.toString());
                    } finally {
                        openingForFlights.set(false);
                    }
                });
            } catch (java.util.concurrent.RejectedExecutionException e) {
                openingForFlights.set(false);
            }
        }
        return null;
    }

    /** Where a flight with callbacks and no waiter is read ({@link LaneFlight}). */
    java.util.concurrent.Executor flightReaders() {
        return transport.flightReaders();
    }

    /** Whether the lanes closed for good (the connection closed). */
    boolean closed() {
        return closed;
    }

    /** Whether this node's transport closed (what it refuses then fails with {@link #closedException()}). */
    boolean transportClosed() {
        return transport.isClosed();
    }

    /** What a verb refused because this node's transport closed fails with. */
    io.membus.core.error.DsmException closedException() {
        return transport.closedException();
    }

    /** Gives back a lane a {@link LaneFlight} held. */
    void giveBack(TcpLane lane) {
        give(lane);
    }

    /** Gives a lane back after one verb: idle again, or closed when it broke or the lanes closed. */
    private void give(TcpLane lane) {
        if (lane.broken() || closed) {
            discard(lane.index, lane);
            return;
        }
        long bit = 1L << lane.index;
        long m;
        do {
            m = idle.get();
        } while (!idle.compareAndSet(m, m | bit));
        if (closed && lanes.get(lane.index) == lane) { // closeAll ran between the check and the give-back
            take(lane.index);
        }
    }

    /** Takes lane {@code index} out of the idle set when it is there, and discards it. */
    private void take(int index) {
        long bit = 1L << index;
        long m;
        do {
            m = idle.get();
            if ((m & bit) == 0) {
                return; // a caller took it: it discards it when it gives it back
            }
        } while (!idle.compareAndSet(m, m & ~bit));
        discard(index, lanes.get(index));
    }

    private void discard(int index, TcpLane lane) {
        if (lane != null) {
            lane.close();
            lanes.compareAndSet(index, lane, null);
        }
        release(index);
    }

    private void release(int index) {
        long bit = 1L << index;
        long o;
        do {
            o = open.get();
        } while (!open.compareAndSet(o, o & ~bit));
    }

    /** Lanes a caller holds now (for metrics: their verbs are in flight). */
    int busyCount() {
        return Math.max(0, Long.bitCount(open.get()) - Long.bitCount(idle.get()));
    }

    /** Lanes open now (for tests and status). */
    int openCount() {
        return Long.bitCount(open.get());
    }

    /**
     * Closes every lane: idle ones at once; one a caller holds is closed too (its
     * blocked read wakes and fails) and discarded when given back.
     *
     * @param forGood whether no lane may open again (the connection closed), or lanes
     *                may open again once the peer is reachable (the channel was lost)
     */
    void closeAll(boolean forGood) {
        if (forGood) {
            closed = true;
        } else {
            noOpenBefore = System.nanoTime() + RETRY_AFTER_FAILED_OPEN_NANOS;
        }
        for (int i = 0; i < lanes.length(); i++) {
            TcpLane lane = lanes.get(i);
            if (lane != null) {
                lane.close();
            }
            take(i);
        }
    }
}
