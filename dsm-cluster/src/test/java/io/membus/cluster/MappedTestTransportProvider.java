package io.membus.cluster;

import io.membus.core.transport.DeclaringTransport;
import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.TransportProvider;
import io.membus.core.transport.Transports;

/**
 * A test transport named {@value #NAME}: an {@code shm} transport under another name,
 * declaring the capabilities of the one it wraps (segment files directly in its
 * {@code membus.transports.shm.dir}, where peers map them). A node that placed segment
 * files by the transport's name would put them elsewhere, and shm would refuse them.
 *
 * <p><b>Note:</b> stateless; thread-safe.
 */
public final class MappedTestTransportProvider implements TransportProvider {
    public static final String NAME = "mapped-test";

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public Transport create(TransportConfig config) {
        Transport shm = Transports.create("shm", config);
        return new DeclaringTransport(shm, NAME, shm.capabilities());
    }
}
