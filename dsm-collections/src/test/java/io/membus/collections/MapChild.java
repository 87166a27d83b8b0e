package io.membus.collections;

import io.membus.alloc.AllocatorConfig;
import io.membus.alloc.GlobalAllocator;
import io.membus.codec.Codecs;
import io.membus.core.RemoteMemory;
import io.membus.core.SegmentDescriptor;
import io.membus.core.directory.StaticDirectory;
import io.membus.core.directory.PeerInfo;
import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.Transports;

import java.time.Duration;

/**
 * Child process of {@link DsmMapMultiProcessTest}: a node of its own (no heap) that
 * reaches the parent's nodes over {@code shm} or {@code tcp}, opens the map by its root pointer,
 * checks the parent's keys, adds 1 to each counter key {@code rounds} times with
 * {@code merge}, inserts its own keys, prints {@code DONE} and exits 0 (1 on failure).
 *
 * <p>Arguments: transport shmDir nodeId rootPtr rounds then, per parent node,
 * {@code nodeId,incarnation,address,segIndex,segSize,segFlags,remoteKey}.
 */
public final class MapChild {
    private MapChild() {
    }

    public static void main(String[] args) {
        try {
            String transport = args[0];
            String shmDir = args[1];
            int nodeId = Integer.parseInt(args[2]);
            long root = Long.parseLong(args[3]);
            int rounds = Integer.parseInt(args[4]);
            StaticDirectory directory = new StaticDirectory();
            for (int i = 5; i < args.length; i++) {
                String[] f = args[i].split(",", -1);
                int node = Integer.parseInt(f[0]);
                long incarnation = Long.parseLong(f[1]);
                directory.addMember(new PeerInfo(node, incarnation, f[2]));
                directory.addSegment(new SegmentDescriptor(node, incarnation, Integer.parseInt(f[3]),
                        Long.parseLong(f[4]), Integer.parseInt(f[5]), Long.parseLong(f[6])));
            }
            TransportConfig.Builder b = TransportConfig.builder(nodeId).operationTimeout(Duration.ofSeconds(20));
            if (transport.equals("shm")) {
                b.property("shm.dir", shmDir);
            } else {
                b.property("tcp.secret", MapCluster.TCP_SECRET).property("tcp.host", "127.0.0.1").property("tcp.port", "0")
                        .connectTimeout(Duration.ofSeconds(10));
            }
            try (Transport t = Transports.create(transport, b.build())) {
                directory.addMember(t.self());
                GlobalAllocator heap = new GlobalAllocator(new RemoteMemory(t, directory, Duration.ofSeconds(20)),
                        AllocatorConfig.builder().heapSegments(MapCluster.HEAP).chunkSize(64 << 10).build());
                DsmMap<String, Long> map = DsmMap.open(heap, root, Codecs.strings(), Codecs.longs());
                for (int k = 0; k < 100; k++) {
                    Long v = map.get("parent-" + k);
                    if (v == null || v != k) {
                        throw new AssertionError("parent-" + k + " reads " + v + " in the child");
                    }
                }
                for (int r = 0; r < rounds; r++) {
                    for (int c = 0; c < 4; c++) {
                        map.merge("counter-" + c, 1L, Long::sum);
                    }
                }
                for (int k = 0; k < 100; k++) {
                    map.put("child-" + nodeId + "-" + k, (long) k);
                }
                map.close();
                heap.close();
            }
            System.out.println("DONE");
            System.out.flush();
            System.exit(0);
        } catch (Throwable e) {
            e.printStackTrace(System.out);
            System.out.flush();
            System.exit(1);
        }
    }
}
