package io.membus.transport.rdma;

import io.membus.core.transport.TransportContractTest;
import org.junit.jupiter.api.condition.EnabledIfSystemProperty;

import java.util.Map;

/**
 * The transport contract over {@code rdma}: runs only where RDMA hardware, rdma-core
 * and libdisni are present, when {@code -Dmembus.rdma.host=<IPv4 of the RDMA
 * interface>} is given (see docs/rdma-transport.md for the command). Every node of a
 * test binds that address with ephemeral control and CM ports; a node reaches itself
 * through a loopback queue pair.
 */
@EnabledIfSystemProperty(named = "membus.rdma.host", matches = "\\d+\\.\\d+\\.\\d+\\.\\d+")
class RdmaTransportContractTest extends TransportContractTest {
    @Override
    protected String transportName() {
        return "rdma";
    }

    @Override
    protected Map<String, String> nodeProperties(int nodeId) {
        return Map.of("rdma.host", System.getProperty("membus.rdma.host"),
                "rdma.secret", "contract-test-secret-" + testId.hashCode());
    }

    /**
     * On a NIC, rdma carries no messages yet (DiSNI receive posting is still to write;
     * the software fabric carries them): the suite checks the typed refusal instead.
     */
    @Override
    protected boolean carriesMessages() {
        return false;
    }

    @Override
    protected boolean offersBlockingVerbs() {
        return false; // verbs complete on the completion thread; a waiting caller parks on its future
    }
}
