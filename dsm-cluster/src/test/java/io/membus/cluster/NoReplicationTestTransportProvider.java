package io.membus.cluster;

import io.membus.core.capability.ReplicationSupport;
import io.membus.core.transport.DeclaringTransport;
import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.TransportProvider;
import io.membus.core.transport.Transports;

/**
 * A test transport named {@value #NAME}: a {@code local} transport under another name that
 * declares it cannot keep copies ({@link ReplicationSupport#NONE}, what {@code rdma}
 * declares), so the refusal of {@code membus.replication.backups > 0} can be seen without
 * RDMA hardware. A node that decided by the transport's name would not refuse it.
 *
 * <p><b>Note:</b> stateless; thread-safe.
 */
public final class NoReplicationTestTransportProvider implements TransportProvider {
    public static final String NAME = "no-replication-test";

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public Transport create(TransportConfig config) {
        Transport local = Transports.create("local", config);
        return new DeclaringTransport(local, NAME, local.capabilities().withReplication(ReplicationSupport.NONE));
    }
}
