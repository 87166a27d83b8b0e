package io.membus.transport.shm;

import io.membus.core.capability.ReplicationSupport;
import io.membus.core.capability.TransportCapabilities;
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

    /**
     * What every shm transport promises: verbs on the CPU with whole words, plain writes atomic
     * with atomics; no fencing of initiators (a fenced process can still write its mapping);
     * replication by adopting files. Its segment files' directory comes with its configuration.
     */
    static final TransportCapabilities CAPABILITIES = TransportCapabilities.SOFTWARE.withFencesInitiators(false)
            .withReplication(ReplicationSupport.ADOPTION);

    @Override
    public TransportCapabilities capabilities() {
        return CAPABILITIES;
    }
}
