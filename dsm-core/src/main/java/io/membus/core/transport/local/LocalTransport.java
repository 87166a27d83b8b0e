package io.membus.core.transport.local;

import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.StaleIncarnationException;
import io.membus.core.transport.AbstractTransport;
import io.membus.core.transport.Connection;
import io.membus.core.transport.DirectConnection;
import io.membus.core.transport.FaultInjector;
import io.membus.core.transport.PeerInfo;
import io.membus.core.transport.SegmentTable;
import io.membus.core.transport.TransportConfig;

import java.util.concurrent.CompletableFuture;

/**
 * The {@code local} transport: nodes in one JVM reach each other's segments by
 * direct memory operations, with every check a remote transport makes. For tests
 * and single-process clusters.
 *
 * <p>Properties: {@code local.fabric} (default {@code default}): nodes reach
 * each other only within one fabric.
 *
 * <p><b>Note:</b> thread-safe.
 */
public final class LocalTransport extends AbstractTransport {
    private final LocalFabric fabric;

    public LocalTransport(TransportConfig config) {
        super(config);
        this.fabric = LocalFabric.named(config.get("local.fabric", "default"));
        fabric.join(this);
    }

    @Override
    public String name() {
        return LocalTransportProvider.NAME;
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
            throw new NodeUnavailableException(nodeId(), "node shut down");
        }
        String reason = fenceReason(initiator);
        if (reason != null) {
            throw new NodeUnavailableException(nodeId(), "node " + nodeId() + " fenced this initiator (node "
                    + initiator + "): " + reason);
        }
    }

    @Override
    protected void closeTransport() {
        fabric.leave(this);
    }

    /** Verbs run by the initiator directly on the target's segment table. */
    private final class LocalConnection extends DirectConnection {
        private final LocalTransport target;

        LocalConnection(PeerInfo peer, LocalTransport target) {
            super(peer, LocalTransport.this.faults(), config.operationTimeout());
            this.target = target;
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
