package io.membus.transport.tcp;

import io.membus.core.transport.TransportContractTest;

import java.util.Map;

/**
 * The transport contract over {@code tcp}: nodes in this JVM on ephemeral
 * loopback ports, and (in the suite's multi-process test) nodes in child JVMs.
 */
class TcpTransportContractTest extends TransportContractTest {
    static final String SECRET = "contract-test-secret-0123456789";

    @Override
    protected String transportName() {
        return "tcp";
    }

    @Override
    protected Map<String, String> nodeProperties(int nodeId) {
        return Map.of("tcp.secret", SECRET, "tcp.host", "127.0.0.1", "tcp.port", "0");
    }
}
