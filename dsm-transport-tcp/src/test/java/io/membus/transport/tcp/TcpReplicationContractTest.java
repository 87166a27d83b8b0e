package io.membus.transport.tcp;

import io.membus.core.replication.ReplicationContractTest;

import java.util.Map;

/**
 * The replication contract over {@code tcp}: nodes in this JVM on ephemeral loopback
 * ports. The streams ride on tcp's messages; a verb's answer leaves the target once its
 * group acknowledged it (the soft NIC waits on the table's gate).
 */
class TcpReplicationContractTest extends ReplicationContractTest {
    @Override
    protected String transportName() {
        return "tcp";
    }

    @Override
    protected Map<String, String> nodeProperties(int nodeId) {
        return Map.of("tcp.secret", TcpTransportContractTest.SECRET, "tcp.host", "127.0.0.1", "tcp.port", "0");
    }
}
