package io.membus.transport.shm;

import io.membus.core.Segment;
import io.membus.core.SegmentDescriptor;
import io.membus.core.error.NotPrimaryException;
import io.membus.core.directory.PeerInfo;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.Transports;

import java.nio.file.Path;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * A child JVM of {@link ShmAdoptionProcessTest}: an shm node that exports two segments
 * filled with a seeded pattern and then runs until it is killed (at most
 * {@link #LIFETIME_SECONDS}: a child never outlives a test that lost it).
 *
 * <pre>
 * ShmNodeProcess DIR NODE SEED own [write]       two segments; "write": keeps incrementing the counter word
 * ShmNodeProcess DIR NODE SEED adopt DEAD DEAD_INC one segment, then adopts DEAD; prints ADOPTED n or LOST winner
 * </pre>
 *
 * Prints {@code READY incarnation=<i>} once its memory is in place.
 *
 * <p><b>Note:</b> a program; single-threaded.
 */
public final class ShmNodeProcess {
    static final long SIZE = 64 * 1024;
    /** The word the writer increments, in segment 1. */
    static final long COUNTER = 8192;
    static final int LIFETIME_SECONDS = 180;

    private ShmNodeProcess() {
    }

    /** The bytes node {@code node} writes at offset 0 of its segment {@code index}. */
    static byte[] pattern(long seed, int node, int index, int length) {
        SplittableRandom r = new SplittableRandom(seed ^ (node * 1_000_003L + index));
        byte[] b = new byte[length];
        for (int i = 0; i < length; i++) {
            b[i] = (byte) r.nextInt(256);
        }
        return b;
    }

    public static void main(String[] args) throws Exception {
        Path dir = Path.of(args[0]);
        int node = Integer.parseInt(args[1]);
        long seed = Long.parseLong(args[2]);
        String mode = args[3];
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(LIFETIME_SECONDS);
        ShmTransport t = (ShmTransport) Transports.create("shm", TransportConfig.builder(node)
                .property("shm.dir", dir.toString()).build());
        int segments = mode.equals("own") ? 2 : 1;
        for (int s = 0; s < segments; s++) {
            Segment seg = t.export(SegmentSpec.of(s, SIZE));
            byte[] p = pattern(seed, node, s, s == 0 ? (int) SIZE : 4096);
            seg.write(0, p, 0, p.length);
        }
        System.out.println("READY incarnation=" + t.incarnation());
        System.out.flush();
        if (mode.equals("adopt")) {
            PeerInfo dead = new PeerInfo(Integer.parseInt(args[4]), Long.parseLong(args[5]), dir.toString());
            try {
                List<SegmentDescriptor> got = t.adopt(dead, System.nanoTime() + TimeUnit.SECONDS.toNanos(30));
                System.out.println("ADOPTED " + got.size());
            } catch (NotPrimaryException e) {
                System.out.println("LOST winner=" + e.primaryHint());
            }
            System.out.flush();
        }
        boolean write = args.length > 4 && args[4].equals("write");
        Segment counter = write ? t.table().get(1) : null;
        while (System.nanoTime() - end < 0) {
            if (counter != null) {
                counter.fetchAndAdd(COUNTER, 1);
                LockSupport.parkNanos(100_000);
            } else {
                Thread.sleep(100);
            }
        }
        t.close();
    }
}
