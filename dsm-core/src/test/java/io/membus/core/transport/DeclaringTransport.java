package io.membus.core.transport;

import io.membus.core.Segment;
import io.membus.core.capability.TransportCapabilities;
import io.membus.core.directory.PeerInfo;
import io.membus.core.fault.FaultInjector;
import io.membus.core.transport.message.MessageEndpoint;

import java.util.Collection;
import java.util.concurrent.CompletableFuture;

/**
 * A transport double for the decisions layers make on {@link Transport#capabilities()}:
 * every call goes to a real transport, but it answers to another {@link #name()} and
 * declares the capabilities the test gives it. A layer that decided by name instead
 * would take the wrong path on it.
 *
 * <p><b>Note:</b> thread-safe as its delegate is.
 */
public final class DeclaringTransport implements Transport {
    private final Transport delegate;
    private final String name;
    private final TransportCapabilities capabilities;

    public DeclaringTransport(Transport delegate, String name, TransportCapabilities capabilities) {
        this.delegate = delegate;
        this.name = name;
        this.capabilities = capabilities;
    }

    public Transport delegate() {
        return delegate;
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public TransportCapabilities capabilities() {
        return capabilities;
    }

    @Override
    public boolean isClosed() {
        return delegate.isClosed();
    }

    @Override
    public int nodeId() {
        return delegate.nodeId();
    }

    @Override
    public long incarnation() {
        return delegate.incarnation();
    }

    @Override
    public String localAddress() {
        return delegate.localAddress();
    }

    @Override
    public Segment export(SegmentSpec spec) {
        return delegate.export(spec);
    }

    @Override
    public boolean unexport(int index, boolean keepFile) {
        return delegate.unexport(index, keepFile);
    }

    @Override
    public Collection<Segment> segments() {
        return delegate.segments();
    }

    @Override
    public CompletableFuture<Connection> connect(PeerInfo peer) {
        return delegate.connect(peer);
    }

    @Override
    public void fence(int nodeId, String reason) {
        delegate.fence(nodeId, reason);
    }

    @Override
    public void unfence(int nodeId) {
        delegate.unfence(nodeId);
    }

    @Override
    public boolean isFenced(int nodeId) {
        return delegate.isFenced(nodeId);
    }

    @Override
    public SegmentTable table() {
        return delegate.table();
    }

    @Override
    public boolean localAtomicsCoherent() {
        return delegate.localAtomicsCoherent();
    }

    @Override
    public MessageEndpoint messages() {
        return delegate.messages();
    }

    @Override
    public FaultInjector faults() {
        return delegate.faults();
    }

    @Override
    public void close() {
        delegate.close();
    }
}
