package io.membus.transport.rdma;

import io.membus.core.capability.TransportCapabilities;
import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.TransportProvider;

/**
 * The {@code rdma} transport's entry for {@link java.util.ServiceLoader}. Checks the
 * machine first ({@link RdmaDetection}), so a node configured with
 * {@code transport = rdma} where libdisni or an RDMA device is missing fails at
 * start with one message that says what to install.
 *
 * <p><b>Note:</b> stateless; thread-safe.
 */
public final class RdmaTransportProvider implements TransportProvider {
    public static final String NAME = "rdma";

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public Transport create(TransportConfig config) {
        RdmaDetection.requireAvailable();
        return new RdmaTransport(config, RdmaSettings.from(config), DisniFabric::new);
    }

    /**
     * What every rdma transport promises: fencing of initiators (the target's queue pairs);
     * whole words only where its device says so, plain writes not atomic with the NIC's
     * atomics, no replication.
     */
    static final TransportCapabilities CAPABILITIES = TransportCapabilities.NONE.withFencesInitiators(true);

    @Override
    public TransportCapabilities capabilities() {
        return CAPABILITIES;
    }
}
