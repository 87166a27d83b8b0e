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
 * Child process of {@link CollectionsMultiProcessTest}: a node of its own (no heap)
 * reaching the parent's nodes over {@code shm} or {@code tcp}; it binds the structures' names to
 * the root pointers it is given (its own name registry) and opens them by name
 * through {@link DsmCollections}: counts on the counter, takes the lock around an
 * unprotected read-then-write, puts its elements into the queue. Prints {@code DONE}
 * and exits 0 (1 on failure).
 *
 * <p>Arguments: transport shmDir nodeId port rounds counterPtr lockPtr queuePtr unprotectedPtr
 * then, per parent node, {@code nodeId,incarnation,address,segIndex,segSize,segFlags,remoteKey},
 * and per child {@code peer:nodeId:address} (the other children are live members too; on
 * {@code tcp} each child serves on the port it is given, on 127.0.0.1).
 */
public final class CollChild {
    private CollChild() {
    }

    public static void main(String[] args) {
        try {
            String transport = args[0];
            String shmDir = args[1];
            int nodeId = Integer.parseInt(args[2]);
            int port = Integer.parseInt(args[3]);
            int rounds = Integer.parseInt(args[4]);
            StaticDirectory directory = new StaticDirectory();
            directory.bind("hits", Long.parseLong(args[5]));
            directory.bind("mutex", Long.parseLong(args[6]));
            directory.bind("jobs", Long.parseLong(args[7]));
            directory.bind("unprotected", Long.parseLong(args[8]));
            for (int i = 9; i < args.length; i++) {
                if (args[i].startsWith("peer:")) {
                    String[] p = args[i].split(":", 3);
                    int other = Integer.parseInt(p[1]);
                    if (other != nodeId) {
                        directory.addMember(new PeerInfo(other, CollectionsMultiProcessTest.CHILD_INCARNATION, p[2]));
                    }
                    continue;
                }
                String[] f = args[i].split(",", -1);
                int node = Integer.parseInt(f[0]);
                long incarnation = Long.parseLong(f[1]);
                directory.addMember(new PeerInfo(node, incarnation, f[2]));
                directory.addSegment(new SegmentDescriptor(node, incarnation, Integer.parseInt(f[3]),
                        Long.parseLong(f[4]), Integer.parseInt(f[5]), Long.parseLong(f[6])));
            }
            TransportConfig.Builder b = TransportConfig.builder(nodeId)
                    .incarnation(CollectionsMultiProcessTest.CHILD_INCARNATION).operationTimeout(Duration.ofSeconds(20));
            if (transport.equals("shm")) {
                b.property("shm.dir", shmDir);
            } else {
                b.property("tcp.secret", CollCluster.TCP_SECRET).property("tcp.host", "127.0.0.1")
                        .property("tcp.port", Integer.toString(port)).property("tcp.handshake-timeout", "30s")
                        .connectTimeout(Duration.ofSeconds(30));
            }
            TransportConfig config = b.build();
            try (Transport t = Transports.create(transport, config)) {
                directory.addMember(t.self());
                RemoteMemory memory = new RemoteMemory(t, directory, Duration.ofSeconds(20));
                GlobalAllocator heap = new GlobalAllocator(memory,
                        AllocatorConfig.builder().heapSegments(CollCluster.HEAP).chunkSize(64 << 10).build());
                DsmCollections c = new DsmCollections(memory, heap, directory);
                DsmAtomicLong hits = c.atomicLong("hits");
                DsmLock mutex = c.lock("mutex");
                DsmAtomicLong unprotected = c.atomicLong("unprotected");
                DsmQueue<Long> jobs = c.queue("jobs", Codecs.longs(), 8);
                for (int r = 0; r < rounds; r++) {
                    hits.incrementAndGet();
                    mutex.lock();
                    try {
                        unprotected.set(unprotected.get() + 1);
                    } finally {
                        mutex.unlock();
                    }
                    jobs.put(nodeId * DeliveryCheck.STRIDE + r);
                }
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
