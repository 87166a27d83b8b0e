package io.membus.core.transport;

import io.membus.core.RemoteMemory;
import io.membus.core.directory.PeerInfo;

import java.time.Duration;
import java.util.HashMap;
import java.util.Map;

/**
 * Child process of the multi-process contract test: starts a node of the given
 * transport, connects to the owner, runs {@code iterations} fetch-and-adds of 1 on
 * one word, prints {@code DONE <iterations>} and exits 0 (1 on any failure).
 *
 * <p>Arguments: transport nodeId ownerNode ownerIncarnation ownerAddress ptr remoteKey
 * iterations [key=value properties...]
 */
public final class ContractChild {
    private ContractChild() {
    }

    public static void main(String[] args) {
        try {
            String transport = args[0];
            int nodeId = Integer.parseInt(args[1]);
            PeerInfo owner = new PeerInfo(Integer.parseInt(args[2]), Long.parseLong(args[3]), args[4]);
            long ptr = Long.parseLong(args[5]);
            long key = Long.parseLong(args[6]);
            int iterations = Integer.parseInt(args[7]);
            Map<String, String> props = new HashMap<>();
            for (int i = 8; i < args.length; i++) {
                int eq = args[i].indexOf('=');
                props.put(args[i].substring(0, eq), args[i].substring(eq + 1));
            }
            TransportConfig config = TransportConfig.builder(nodeId).operationTimeout(Duration.ofSeconds(20))
                    .properties(props).build();
            try (Transport t = Transports.create(transport, config)) {
                Connection c = RemoteMemory.await(t.connect(owner), Duration.ofSeconds(30));
                for (int i = 0; i < iterations; i++) {
                    RemoteMemory.await(c.fetchAndAdd(ptr, key, 1), Duration.ofSeconds(30));
                }
                System.out.println("DONE " + iterations);
            }
            System.exit(0);
        } catch (Throwable t) {
            t.printStackTrace(System.out);
            System.exit(1);
        }
    }
}
