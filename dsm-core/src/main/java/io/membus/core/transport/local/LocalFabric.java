package io.membus.core.transport.local;

import io.membus.core.error.NodeUnavailableException;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The nodes of one JVM that reach each other with the {@code local} transport,
 * by name ({@code membus.transports.local.fabric}, default {@code "default"}). Several fabrics in
 * one JVM are isolated from each other, so tests can run clusters side by side.
 *
 * <p><b>Note:</b> thread-safe.
 */
public final class LocalFabric {
    private static final Map<String, LocalFabric> FABRICS = new ConcurrentHashMap<>();

    private final String name;
    private final Map<Integer, LocalTransport> nodes = new ConcurrentHashMap<>();

    private LocalFabric(String name) {
        this.name = name;
    }

    /** The fabric with that name, created on first use. */
    public static LocalFabric named(String name) {
        return FABRICS.computeIfAbsent(name, LocalFabric::new);
    }

    public String name() {
        return name;
    }

    void join(LocalTransport transport) {
        LocalTransport other = nodes.putIfAbsent(transport.nodeId(), transport);
        if (other != null) {
            throw new IllegalStateException("node id taken in local fabric: fabric=" + name + ", node="
                    + transport.nodeId() + "; every node of a cluster needs its own node id");
        }
    }

    void leave(LocalTransport transport) {
        nodes.remove(transport.nodeId(), transport);
    }

    LocalTransport node(int nodeId) {
        LocalTransport t = nodes.get(nodeId);
        if (t == null || t.isClosed()) {
            throw NodeUnavailableException.notSent(nodeId, "no such node in local fabric '" + name + "'");
        }
        return t;
    }
}
