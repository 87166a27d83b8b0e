package io.membus.transport.rdma;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

/**
 * The target side of one peer's control channel of an {@link RdmaTransport}, after
 * its handshake: pushes the segment catalog (the first push also hands the initiator
 * the session id), tells the initiator when its queue-pair connect is expected, and
 * waits for the acknowledgements of catalog pushes.
 *
 * <p><b>Note:</b> thread-safe: writes to the channel are serialised by this object's
 * monitor (which guards {@link #seq}); acknowledgements are counted by a semaphore
 * released by the session's reader thread and taken by the thread that pushed.
 */
final class ControlSession {
    private static final Logger LOG = LoggerFactory.getLogger(RdmaTransport.class);

    final int peerNode;
    final Socket socket;
    final byte[] token;
    private final DataOutputStream out;
    private final byte[] nonceI;
    private final byte[] secret;
    private final Supplier<List<CatalogEntry>> catalog;
    private final Duration ackTimeout;
    private final Semaphore acks = new Semaphore(0);
    private long seq; // guarded by this

    ControlSession(int peerNode, Socket socket, DataOutputStream out, byte[] nonceI, byte[] token, byte[] secret,
                   Supplier<List<CatalogEntry>> catalog, Duration ackTimeout) {
        this.peerNode = peerNode;
        this.socket = socket;
        this.out = out;
        this.nonceI = nonceI;
        this.token = token;
        this.secret = secret;
        this.catalog = catalog;
        this.ackTimeout = ackTimeout;
    }

    /** Sends the current catalog (the first one also hands the initiator the session id). */
    synchronized void send() throws IOException {
        ControlFrames.writeCatalog(out, secret, nonceI, seq++, token, catalog.get());
    }

    /** Tells the initiator that a connect request from {@code from} is expected now. */
    synchronized void ready(InetSocketAddress from) throws IOException {
        ControlFrames.writeReady(out, secret, nonceI, token, from);
    }

    /** The peer acknowledged a pushed catalog (called by the session's reader). */
    void acked() {
        acks.release();
    }

    /** Sends the current catalog; on failure closes the session and returns false. */
    boolean sendPush() {
        try {
            send();
            return true;
        } catch (IOException e) {
            RdmaTransport.closeQuietly(socket);
            return false;
        }
    }

    /** Waits until {@code deadlineNanos} for the peer to acknowledge the pushed catalog; closes it if not. */
    void awaitPush(long deadlineNanos) {
        try {
            if (!acks.tryAcquire(Math.max(0, deadlineNanos - System.nanoTime()), TimeUnit.NANOSECONDS)) {
                LOG.warn("peer node {} did not acknowledge a catalog update within {}: closing its session",
                        peerNode, ackTimeout);
                RdmaTransport.closeQuietly(socket);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
