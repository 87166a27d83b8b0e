package io.membus.bench.hazelcast;

import com.hazelcast.client.HazelcastClient;
import com.hazelcast.client.config.ClientConfig;
import com.hazelcast.config.Config;
import com.hazelcast.config.JoinConfig;
import com.hazelcast.core.Hazelcast;
import com.hazelcast.core.HazelcastInstance;

import java.util.List;
import java.util.function.Consumer;

/**
 * The Hazelcast side of the side-by-side benchmarks: two members and a client in the
 * JMH fork, on loopback (tcp-ip join on 127.0.0.1, no multicast, no auto-detection,
 * phone-home off), as Hazelcast recommends for a client-server comparison. The
 * benchmarks use the client. A cluster name of its own per fork keeps it apart from
 * anything else on the machine.
 *
 * <p><b>Note:</b> not thread-safe to start or close (JMH's trial setup and teardown
 * do that on one thread); the instances it holds are Hazelcast's and thread-safe.
 */
public final class HazelcastPair implements AutoCloseable {
    public final HazelcastInstance member1;
    public final HazelcastInstance member2;
    public final HazelcastInstance client;

    private HazelcastPair(HazelcastInstance member1, HazelcastInstance member2, HazelcastInstance client) {
        this.member1 = member1;
        this.member2 = member2;
        this.client = client;
    }

    /** Starts the members and the client; {@code clientTuning} may add to the client's config (near caches). */
    public static HazelcastPair start(Consumer<ClientConfig> clientTuning) {
        String cluster = "membus-bench-" + ProcessHandle.current().pid();
        HazelcastInstance m1 = Hazelcast.newHazelcastInstance(memberConfig(cluster));
        HazelcastInstance m2 = null;
        try {
            m2 = Hazelcast.newHazelcastInstance(memberConfig(cluster));
            ClientConfig cc = new ClientConfig();
            cc.setClusterName(cluster);
            cc.getNetworkConfig().setAddresses(List.of(address(m1), address(m2)));
            clientTuning.accept(cc);
            return new HazelcastPair(m1, m2, HazelcastClient.newHazelcastClient(cc));
        } catch (RuntimeException e) {
            if (m2 != null) {
                m2.shutdown();
            }
            m1.shutdown();
            throw e;
        }
    }

    private static String address(HazelcastInstance member) {
        return "127.0.0.1:" + member.getCluster().getLocalMember().getAddress().getPort();
    }

    private static Config memberConfig(String cluster) {
        Config c = new Config();
        c.setClusterName(cluster);
        c.setProperty("hazelcast.phone.home.enabled", "false");
        c.getNetworkConfig().setPort(5701).setPortAutoIncrement(true).setPortCount(100);
        c.getNetworkConfig().getInterfaces().setEnabled(true).addInterface("127.0.0.1");
        JoinConfig join = c.getNetworkConfig().getJoin();
        join.getMulticastConfig().setEnabled(false);
        join.getAutoDetectionConfig().setEnabled(false);
        join.getTcpIpConfig().setEnabled(true).addMember("127.0.0.1");
        return c;
    }

    @Override
    public void close() {
        client.shutdown();
        member2.shutdown();
        member1.shutdown();
    }
}
