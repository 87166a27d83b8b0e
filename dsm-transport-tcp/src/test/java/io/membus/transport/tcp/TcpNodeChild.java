package io.membus.transport.tcp;

import io.membus.core.Segment;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.Transports;

import java.time.Duration;
import java.util.Map;

/**
 * A tcp node in a child process for connection-loss tests: exports one 64 KiB
 * segment, prints {@code READY <incarnation> <address> <remoteKey>}, and serves
 * until its standard input closes or it is killed.
 *
 * <p>Arguments: nodeId secret [stopper]. With {@code stopper}, a thread stops the
 * node's other threads one at a time, again and again ({@link Thread#getStackTrace()}
 * is a handshake with that thread alone, at its next safepoint poll) while the rest
 * run on: what preemption does now and then on a loaded machine, often, so a verb
 * copied in two stores is caught between them (see {@link TcpWordAtomicityTest}).
 */
public final class TcpNodeChild {
    private TcpNodeChild() {
    }

    public static void main(String[] args) throws Exception {
        int nodeId = Integer.parseInt(args[0]);
        TransportConfig config = TransportConfig.builder(nodeId).operationTimeout(Duration.ofSeconds(20))
                .properties(Map.of("tcp.secret", args[1], "tcp.host", "127.0.0.1", "tcp.port", "0")).build();
        try (Transport t = Transports.create("tcp", config)) {
            Segment s = t.export(SegmentSpec.of(0, 64 * 1024));
            if (args.length > 2 && args[2].equals("stopper")) {
                Thread stopper = new Thread(() -> {
                    Thread self = Thread.currentThread();
                    while (true) {
                        for (Thread other : Thread.getAllStackTraces().keySet()) {
                            for (int i = 0; i < 100 && other != self; i++) {
                                other.getStackTrace();
                            }
                        }
                    }
                }, "stopper");
                stopper.setDaemon(true);
                stopper.start();
            }
            System.out.println("READY " + t.incarnation() + " " + t.localAddress() + " " + s.remoteKey());
            System.out.flush();
            while (System.in.read() >= 0) {
                // serve until the parent goes away
            }
        }
    }
}
