package io.membus.collections;

import io.membus.alloc.AllocatorConfig;
import io.membus.alloc.GlobalAllocator;
import io.membus.codec.Codecs;
import io.membus.core.RemoteMemory;
import io.membus.core.SegmentDescriptor;
import io.membus.core.directory.StaticDirectory;
import io.membus.core.transport.PeerInfo;
import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.Transports;

import java.time.Duration;

/**
 * Child process of {@link CollectionsMultiProcessTest}: a node of its own (no heap)
 * reaching the parent's nodes over {@code shm}; it binds the structures' names to
 * the root pointers it is given (its own name registry) and opens them by name
 * through {@link DsmCollections}: counts on the counter, takes the lock around an
 * unprotected read-then-write, puts its elements into the queue. Prints {@code DONE}
 * and exits 0 (1 on failure).
 *
 * <p>Arguments: shmDir nodeId rounds counterPtr lockPtr queuePtr unprotectedPtr then,
 * per parent node, {@code nodeId,incarnation,address,segIndex,segSize,segFlags,remoteKey},
 * and per child {@code peer:nodeId} (the other children are live members too).
 */
public final class CollChild {
    private CollChild() {
    }

    public static void main(String[] args) {
        try {
            String shmDir = args[0];
            int nodeId = Integer.parseInt(args[1]);
            int rounds = Integer.parseInt(args[2]);
            StaticDirectory directory = new StaticDirectory();
            directory.bind("hits", Long.parseLong(args[3]));
            directory.bind("mutex", Long.parseLong(args[4]));
            directory.bind("jobs", Long.parseLong(args[5]));
            directory.bind("unprotected", Long.parseLong(args[6]));
            for (int i = 7; i < args.length; i++) {
                if (args[i].startsWith("peer:")) {
                    int other = Integer.parseInt(args[i].substring(5));
                    if (other != nodeId) {
                        directory.addMember(new PeerInfo(other, CollectionsMultiProcessTest.CHILD_INCARNATION, shmDir));
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
            TransportConfig config = TransportConfig.builder(nodeId).property("shm.dir", shmDir)
                    .incarnation(CollectionsMultiProcessTest.CHILD_INCARNATION).operationTimeout(Duration.ofSeconds(20)).build();
            try (Transport t = Transports.create("shm", config)) {
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
