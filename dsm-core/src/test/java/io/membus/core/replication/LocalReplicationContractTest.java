package io.membus.core.replication;

import java.util.Map;

/** The replication contract over {@code local}: 2-4 nodes in this JVM, one fabric per test. */
class LocalReplicationContractTest extends ReplicationContractTest {
    @Override
    protected String transportName() {
        return "local";
    }

    @Override
    protected Map<String, String> nodeProperties(int nodeId) {
        return Map.of("local.fabric", testId);
    }
}
