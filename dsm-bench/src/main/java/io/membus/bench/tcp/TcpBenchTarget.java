package io.membus.bench.tcp;

import io.membus.core.Access;
import io.membus.core.Segment;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.Transports;
import io.netty.channel.Channel;
import io.netty.channel.EventLoopGroup;

import java.util.Map;

/**
 * The target process of {@link TcpVerbBenchmark} and {@link TcpSyncBenchmark}: a
 * tcp node exporting a 1 MiB segment and, beside it, the floors: the raw Netty echo
 * server and the blocking-socket one ({@link BlockingFloor}). Prints
 * {@code READY <incarnation> <address> <remoteKey> <floorPort> <blockingFloorPort> <batchingFloorPort>}
 * (the last: {@link BlockingFloor.Mode#BATCHED})
 * and runs until its standard input closes.
 *
 * <p>Arguments: secret [io-threads of the target node, default 1]
 */
public final class TcpBenchTarget {
    private TcpBenchTarget() {
    }

    public static void main(String[] args) throws Exception {
        TransportConfig config = TransportConfig.builder(1)
                .properties(Map.of("tcp.secret", args[0], "tcp.host", "127.0.0.1", "tcp.port", "0",
                        "tcp.io-threads", args.length > 1 ? args[1] : "1")).build();
        EventLoopGroup floorGroup = PingPong.group("floor-server");
        try (Transport t = Transports.create("tcp", config)) {
            Segment s = t.export(new SegmentSpec(0, 1 << 20, Access.ALL, null));
            Channel floor = PingPong.serve(floorGroup, "127.0.0.1");
            java.net.ServerSocket blockingFloor = BlockingFloor.serve("127.0.0.1");
            java.net.ServerSocket batchingFloor = BlockingFloor.serve("127.0.0.1", BlockingFloor.Mode.BATCHED);
            System.out.println("READY " + t.incarnation() + " " + t.localAddress() + " " + s.remoteKey() + " "
                    + PingPong.port(floor) + " " + blockingFloor.getLocalPort() + " " + batchingFloor.getLocalPort());
            System.out.flush();
            while (System.in.read() >= 0) {
                // serve until the benchmark goes away
            }
            floor.close().syncUninterruptibly();
            blockingFloor.close();
            batchingFloor.close();
        } finally {
            floorGroup.shutdownGracefully(0, 1, java.util.concurrent.TimeUnit.SECONDS);
        }
    }
}
