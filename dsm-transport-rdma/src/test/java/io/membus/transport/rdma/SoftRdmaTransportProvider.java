package io.membus.transport.rdma;

import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.TransportProvider;

/**
 * Test-only provider {@code rdma-soft}: the production {@link RdmaTransport} on a
 * {@link SoftFabric} instead of a NIC, so the transport contract suite runs here.
 *
 * <p><b>Note:</b> stateless; thread-safe.
 */
public final class SoftRdmaTransportProvider implements TransportProvider {
    @Override
    public String name() {
        return "rdma-soft";
    }

    @Override
    public Transport create(TransportConfig config) {
        return new RdmaTransport(config, RdmaSettings.from(config), SoftFabric::new);
    }
}
