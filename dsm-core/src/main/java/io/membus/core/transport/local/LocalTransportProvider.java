package io.membus.core.transport.local;

import io.membus.core.capability.TransportCapabilities;
import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.TransportProvider;

/**
 * Provides the {@code local} transport.
 *
 * <p><b>Note:</b> stateless; thread-safe.
 */
public final class LocalTransportProvider implements TransportProvider {
    public static final String NAME = "local";

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public Transport create(TransportConfig config) {
        return new LocalTransport(config);
    }

    /** A software target in this JVM: {@link TransportCapabilities#SOFTWARE}. */
    @Override
    public TransportCapabilities capabilities() {
        return TransportCapabilities.SOFTWARE;
    }
}
