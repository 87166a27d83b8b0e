package io.membus.core.transport;

import java.util.Map;

/** The transport contract over {@code local}: nodes in this JVM, one fabric per test. */
class LocalTransportContractTest extends TransportContractTest {
    @Override
    protected String transportName() {
        return "local";
    }

    @Override
    protected Map<String, String> nodeProperties(int nodeId) {
        return Map.of("local.fabric", testId);
    }

    @Override
    protected boolean multiProcess() {
        return false;
    }
}
