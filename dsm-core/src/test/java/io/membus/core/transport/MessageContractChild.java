package io.membus.core.transport;

import io.membus.core.RemoteMemory;
import io.membus.core.Words;
import io.membus.core.directory.PeerInfo;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * Child process of the multi-process message contract tests.
 *
 * <ul>
 *   <li>{@code send transport nodeId ownerNode ownerIncarnation ownerAddress count [key=value...]}: sends
 *       {@code count} messages on channel 1 to the owner, each {@code (nodeId int64, seq int64)}; every
 *       10th is a request whose reply must be the payload reversed. Prints {@code DONE <count>}, exits 0.</li>
 *   <li>{@code hang transport nodeId - - - - [key=value...]}: registers a handler of channel 1 that
 *       prints {@code HANDLING} and never returns, prints {@code READY <incarnation> <address>}, and waits
 *       to be killed (exits 2 after 120 s).</li>
 * </ul>
 * Exits 1 on any failure, with the stack trace on stdout.
 */
public final class MessageContractChild {
    static final short CHANNEL = 1;

    private MessageContractChild() {
    }

    public static void main(String[] args) {
        try {
            String mode = args[0];
            String transport = args[1];
            int nodeId = Integer.parseInt(args[2]);
            Map<String, String> props = new HashMap<>();
            for (int i = 7; i < args.length; i++) {
                int eq = args[i].indexOf('=');
                props.put(args[i].substring(0, eq), args[i].substring(eq + 1));
            }
            TransportConfig config = TransportConfig.builder(nodeId).operationTimeout(Duration.ofSeconds(20))
                    .properties(props).build();
            try (Transport t = Transports.create(transport, config)) {
                if (mode.equals("hang")) {
                    CountDownLatch never = new CountDownLatch(1);
                    t.messages().register(CHANNEL, "hang", (from, payload) -> {
                        System.out.println("HANDLING");
                        System.out.flush();
                        try {
                            never.await(120, TimeUnit.SECONDS);
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                        }
                        return payload;
                    });
                    System.out.println("READY " + t.incarnation() + " " + t.localAddress());
                    System.out.flush();
                    never.await(120, TimeUnit.SECONDS);
                    System.exit(2);
                }
                PeerInfo owner = new PeerInfo(Integer.parseInt(args[3]), Long.parseLong(args[4]), args[5]);
                int count = Integer.parseInt(args[6]);
                Connection c = RemoteMemory.await(t.connect(owner), Duration.ofSeconds(30));
                List<CompletableFuture<?>> all = new ArrayList<>();
                for (int seq = 0; seq < count; seq++) {
                    byte[] payload = new byte[16];
                    Words.putLong(payload, 0, nodeId);
                    Words.putLong(payload, 8, seq);
                    if (seq % 10 == 9) {
                        byte[] expected = reversed(payload);
                        int s = seq;
                        all.add(c.request(CHANNEL, payload).thenAccept(reply -> {
                            if (!java.util.Arrays.equals(expected, reply)) {
                                throw new AssertionError("wrong reply to request " + s);
                            }
                        }));
                    } else {
                        all.add(c.send(CHANNEL, payload));
                    }
                }
                for (CompletableFuture<?> f : all) {
                    RemoteMemory.await(f, Duration.ofSeconds(30));
                }
                System.out.println("DONE " + count);
            }
            System.exit(0);
        } catch (Throwable t) {
            t.printStackTrace(System.out);
            System.exit(1);
        }
    }

    static byte[] reversed(byte[] b) {
        byte[] r = new byte[b.length];
        for (int i = 0; i < b.length; i++) {
            r[i] = b[b.length - 1 - i];
        }
        return r;
    }
}
