package io.membus.transport.shm;

import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.TransportProvider;

/**
 * Provides the {@code shm} transport.
 *
 * <p><b>Note:</b> stateless; thread-safe.
 */
public final class ShmTransportProvider implements TransportProvider {
    public static final String NAME = "shm";

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public Transport create(TransportConfig config) {
        return new ShmTransport(config);
    }
}
