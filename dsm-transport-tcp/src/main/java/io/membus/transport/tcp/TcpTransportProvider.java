package io.membus.transport.tcp;

import io.membus.core.capability.TransportCapabilities;
import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.TransportProvider;

/**
 * Provides the {@code tcp} transport (listed in
 * {@code META-INF/services/io.membus.core.transport.TransportProvider}).
 *
 * <p><b>Note:</b> stateless; thread-safe.
 */
public final class TcpTransportProvider implements TransportProvider {
    public static final String NAME = "tcp";

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public Transport create(TransportConfig config) {
        return new TcpTransport(config);
    }

    /** The soft NIC: {@link TransportCapabilities#SOFTWARE} (replication by forwarding changes). */
    @Override
    public TransportCapabilities capabilities() {
        return TransportCapabilities.SOFTWARE;
    }
}
