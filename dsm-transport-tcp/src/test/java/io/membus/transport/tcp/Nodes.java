package io.membus.transport.tcp;

import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.Transports;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Starts tcp nodes for a test and closes every one of them ({@link #close()} in
 * {@code @AfterEach}).
 *
 * <p><b>Note:</b> not thread-safe; one test thread owns it.
 */
final class Nodes implements AutoCloseable {
    static final String SECRET = "tcp-test-secret-0123456789abcdef";
    private final List<Transport> started = new ArrayList<>();

    Transport start(int nodeId, Duration operationTimeout, String... properties) {
        Map<String, String> props = new HashMap<>(Map.of("tcp.secret", SECRET, "tcp.host", "127.0.0.1",
                "tcp.port", "0", "tcp.reconnect-min-backoff", "20ms", "tcp.reconnect-max-backoff", "200ms"));
        for (int i = 0; i < properties.length; i += 2) {
            props.put(properties[i], properties[i + 1]);
        }
        Transport t = Transports.create("tcp", TransportConfig.builder(nodeId).operationTimeout(operationTimeout)
                .connectTimeout(Duration.ofSeconds(10)).properties(props).build());
        started.add(t);
        return t;
    }

    /**
     * {@link #start(int, Duration, String...)}, then the node joins {@code directory} with a
     * 64 KiB segment exported (segment 0).
     */
    Transport member(int nodeId, Duration operationTimeout, io.membus.core.directory.StaticDirectory directory,
                     String... properties) {
        Transport t = start(nodeId, operationTimeout, properties);
        directory.addMember(t.self());
        directory.addSegment(t.export(io.membus.core.transport.SegmentSpec.of(0, 64 * 1024)).descriptor());
        return t;
    }

    /** {@code from}'s open connection to {@code to} (connecting it first), within 30 s. */
    static TcpConnection connection(Transport from, Transport to) {
        return (TcpConnection) io.membus.core.RemoteMemory.await(from.connect(to.self()), Duration.ofSeconds(30));
    }

    Transport start(int nodeId, String... properties) {
        return start(nodeId, Duration.ofSeconds(20), properties);
    }

    @Override
    public void close() {
        for (Transport t : started) {
            t.close();
        }
        started.clear();
    }
}
