package io.membus.core.transport.local;

import io.membus.core.error.DsmException;
import io.membus.core.error.NodeFencedException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.transport.message.Inbox;
import io.membus.core.transport.message.Outbox;
import io.membus.core.transport.message.Responder;
import io.membus.core.error.StaleIncarnationException;
import io.membus.core.transport.AbstractTransport;
import io.membus.core.transport.Connection;
import io.membus.core.transport.DirectConnection;
import io.membus.core.fault.FaultInjector;
import io.membus.core.directory.PeerInfo;
import io.membus.core.transport.SegmentTable;
import io.membus.core.transport.TransportConfig;

import java.util.concurrent.CompletableFuture;

/**
 * The {@code local} transport: nodes in one JVM reach each other's segments by
 * direct memory operations, with every check a remote transport makes, and hand
 * messages to each other's inboxes directly (still through the bounded inbox,
 * its credits and the receiver's executor). For tests and single-process clusters.
 *
 * <p>Settings ({@code membus.transports.local}, dsm-core's reference.conf): {@code fabric} (default {@code default}): nodes reach
 * each other only within one fabric.
 *
 * <p><b>Note:</b> thread-safe.
 */
public final class LocalTransport extends AbstractTransport {
    private final LocalFabric fabric;

    public LocalTransport(TransportConfig config) {
        super(config);
        this.fabric = LocalFabric.named(config.require("local.fabric", "a fabric name: nodes reach each other only within one fabric"));
        fabric.join(this);
    }

    @Override
    public String name() {
        return LocalTransportProvider.NAME;
    }

    /** Verbs run on the target's {@link SegmentTable} (whole words, CPU atomics), which refuses fenced initiators. */
    @Override
    public io.membus.core.capability.TransportCapabilities capabilities() {
        return io.membus.core.capability.TransportCapabilities.SOFTWARE;
    }

    @Override
    public String localAddress() {
        return "local:" + fabric.name();
    }

    @Override
    protected CompletableFuture<Connection> open(PeerInfo peer) {
        try {
            LocalTransport target = fabric.node(peer.nodeId());
            if (target.incarnation() != peer.incarnation()) {
                throw new StaleIncarnationException(peer.nodeId(), peer.incarnation(), target.incarnation());
            }
            target.checkAccepts(nodeId());
            return CompletableFuture.completedFuture(new LocalConnection(peer, target));
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    private void checkAccepts(int initiator) {
        if (isClosed()) {
            throw NodeUnavailableException.notSent(nodeId(), "node shut down");
        }
        String reason = fenceReason(initiator);
        if (reason != null) {
            throw NodeFencedException.notSent(nodeId(), "node " + nodeId() + " fenced this initiator (node "
                    + initiator + "): " + reason);
        }
    }

    @Override
    protected void closeTransport() {
        fabric.leave(this);
    }

    /**
     * Verbs run by the initiator directly on the target's segment table; messages
     * are handed to the target's inbox of this node directly, and answered by the
     * target's executor straight into this connection's outbox.
     */
    private final class LocalConnection extends DirectConnection {
        private final LocalTransport target;
        private final Outbox outbox;
        private final Inbox inbox;

        LocalConnection(PeerInfo peer, LocalTransport target) {
            super(peer, LocalTransport.this.faults(), config.operationTimeout(), observer());
            this.target = target;
            this.outbox = new Outbox(peer.nodeId(), config.operationTimeout(), messages(), this::handOff);
            this.inbox = target.messages().open(nodeId(), new Responder() {
                @Override
                public void reply(long correlation, byte[] reply) {
                    outbox.replied(correlation, reply);
                }

                @Override
                public void fail(long correlation, DsmException failure) {
                    outbox.failed(correlation, failure);
                }
            });
            outbox.grant(target.messages().inboxCapacity(), target.messages().maxMessageSize());
        }

        private boolean handOff(long correlation, short channel, boolean request, byte[] payload) {
            target.checkAccepts(nodeId());
            if (!inbox.deliver(correlation, channel, request, payload)) {
                // the target closed this inbox (shutting down): credits make a full inbox impossible
                throw NodeUnavailableException.notSent(peer().nodeId(), "node " + peer().nodeId() + " is shutting down");
            }
            return true;
        }

        @Override
        @SuppressWarnings("unchecked")
        public CompletableFuture<Void> send(short channel, byte[] payload) {
            return (CompletableFuture<Void>) (CompletableFuture<?>) outbox.post(channel, false, payload);
        }

        @Override
        public CompletableFuture<byte[]> request(short channel, byte[] payload) {
            return outbox.post(channel, true, payload);
        }

        @Override
        public void close(String reason) {
            super.close(reason);
            outbox.close(new NodeUnavailableException(peer().nodeId(), reason));
            target.messages().close(inbox, reason, false);
        }

        @Override
        protected SegmentTable target() {
            target.checkAccepts(nodeId());
            return target.table();
        }

        @Override
        protected FaultInjector.Rule targetRule() {
            FaultInjector f = target.faults();
            return f.active() ? f.rule(nodeId()) : null;
        }
    }
}
