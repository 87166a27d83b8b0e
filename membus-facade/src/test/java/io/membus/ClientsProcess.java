package io.membus;

import io.membus.alloc.Placement;
import io.membus.codec.Codecs;
import io.membus.coherence.RemoteRef;
import io.membus.collections.DsmMap;
import io.membus.collections.DsmMapOptions;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Client nodes in a child JVM for {@link ClientProcessTest}: starts one {@link Membus}
 * per config file in {@code args[1..]} (clients: no segments), waits for
 * {@code args[0]} members, then has every client use every structure through
 * {@code Membus} and prints what it made:
 * <ul>
 *   <li>{@code SEGMENTS id n}: segments client {@code id} exports (0);</li>
 *   <li>{@code PTR what ptr}: a block a client made (hex), wherever it was placed;</li>
 *   <li>{@code REF ptr header}: a coherent object the test opens from a memory node;</li>
 *   <li>{@code LOCKED token}: the first client holds lock {@code mp-lock} from then on;</li>
 *   <li>{@code DONE}.</li>
 * </ul>
 * Then runs until its standard input closes or it is killed. Exits 1 after printing the
 * stack trace of anything unexpected.
 */
public final class ClientsProcess {
    private ClientsProcess() {
    }

    public static void main(String[] args) {
        List<Membus> clients = new ArrayList<>();
        try {
            int members = Integer.parseInt(args[0]);
            for (int i = 1; i < args.length; i++) {
                clients.add(Membus.start(Path.of(args[i])));
            }
            for (Membus c : clients) {
                c.awaitMembers(members, Duration.ofSeconds(60));
                System.out.println("SEGMENTS " + c.node().nodeId() + " " + c.node().transport().table().all().size());
            }
            for (Membus c : clients) {
                int id = c.node().nodeId();
                c.atomicLong("mp-hits").addAndGet(10);
                ptr("counter", c.atomicLong("mp-hits").address());
                c.longArray("mp-arr", 64).addAll(new long[] {1, 1, 1});
                ptr("long-array", c.longArray("mp-arr", 64).root().block().ptr());
                c.doubleArray("mp-w", 8).set(id % 8, id);
                ptr("double-array", c.doubleArray("mp-w", 8).root().block().ptr());
                DsmMap<String, Long> map = c.map("mp-map", String.class, Long.class);
                for (int k = 0; k < 20; k++) {
                    map.put("client-" + id + "-" + k, (long) id * 100 + k);
                }
                ptr("map", map.root().block().ptr());
                DsmMap<String, String> leased = c.map("mp-leased", String.class, String.class,
                        DsmMapOptions.defaults().leasedReads(true));
                leased.put("client-" + id, "v" + id);
                if (!("v" + id).equals(leased.get("client-" + id))) {
                    throw new AssertionError("leased map read back wrong");
                }
                ptr("leased-map", leased.root().block().ptr());
                c.queue("mp-jobs", String.class, 64).add("job-from-" + id);
                ptr("queue", c.queue("mp-jobs", String.class, 64).root().block().ptr());
                ptr("lock", c.lock("mp-lock").root().block().ptr());
                RemoteRef<String> ref = c.create(Codecs.strings(), "object-of-" + id);
                ptr("object", ref.ptr());
                ptr("object-by-key", c.create(Codecs.strings(), "k", Placement.byKey("mp-" + id)).ptr());
                for (int b = 0; b < 4; b++) {
                    ptr("block", c.allocator().allocate(128).ptr());
                }
                System.out.println("REF " + Long.toHexString(ref.ptr()) + " " + Long.toHexString(ref.generationHeader()));
            }
            if (!clients.get(0).lock("mp-lock").tryLock(30, TimeUnit.SECONDS)) {
                throw new AssertionError("mp-lock not taken");
            }
            System.out.println("LOCKED " + clients.get(0).lock("mp-lock").token());
            System.out.println("DONE");
            System.out.flush();
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            while (in.readLine() != null) {
                // runs until the test closes its end or kills this JVM
            }
        } catch (Throwable e) {
            e.printStackTrace(System.out);
            System.out.flush();
            System.exit(1);
        }
        for (Membus c : clients) {
            c.close();
        }
        System.exit(0);
    }

    private static void ptr(String what, long ptr) {
        System.out.println("PTR " + what + " " + Long.toHexString(ptr));
    }
}
