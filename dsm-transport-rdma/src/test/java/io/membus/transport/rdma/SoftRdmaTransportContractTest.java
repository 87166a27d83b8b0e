package io.membus.transport.rdma;

import io.membus.core.transport.TransportContractTest;

import java.util.Map;

/**
 * The transport contract over the production rdma transport (control channel,
 * HMAC handshake, catalog, client-side checks, verb engine, completion thread)
 * with the NIC replaced by {@link SoftFabric}: what can be proven here without
 * hardware. Nodes live in this JVM (the soft fabric is in-process).
 */
class SoftRdmaTransportContractTest extends TransportContractTest {
    @Override
    protected String transportName() {
        return "rdma-soft";
    }

    @Override
    protected Map<String, String> nodeProperties(int nodeId) {
        return Map.of("rdma.host", "127.0.0.1", "rdma.secret", "soft-contract-secret-" + testId.hashCode(),
                "rdma.queue-depth", "16", "rdma.staging-bytes", "4096");
    }

    @Override
    protected boolean multiProcess() {
        return false;
    }

    @Override
    protected boolean offersBlockingVerbs() {
        return false; // verbs complete on the completion thread; a waiting caller parks on its future
    }
}
