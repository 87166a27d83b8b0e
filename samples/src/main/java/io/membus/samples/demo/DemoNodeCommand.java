package io.membus.samples.demo;

import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;

/**
 * {@code membus demo-node}: one node process of {@code membus demo}, driven by the
 * demo over its standard input and output, one line per step:
 *
 * <pre>
 *   node  -> demo : READY &lt;status line&gt;     (joined; every node's segment is in the directory)
 *   demo  -> node : RUN &lt;tag&gt; &lt;app&gt; &lt;phase&gt; &lt;arg&gt;...   (one phase of an app, see DemoApp; on a thread of its own)
 *   node  -> demo : ANSWER &lt;tag&gt; &lt;one line&gt;
 *   demo  -> node : STATUS                  (between phases)
 *   node  -> demo : STATUS &lt;status line&gt;
 *   demo  -> node : EXIT                    (the apps' state is closed, the node leaves and exits)
 * </pre>
 *
 * A failed phase answers {@code ERROR <message>}. A closed
 * standard input (the demo is gone) ends the node. Not meant to be run by hand.
 *
 * <p><b>Note:</b> one instance per process.
 */
@Command(name = "demo-node", hidden = true, description = "One node process of membus demo (driven by the demo).")
public final class DemoNodeCommand implements Callable<Integer> {

    @Option(names = "--transport", required = true)
    String transport;

    @Option(names = "--node-id", required = true)
    int nodeId;

    @Option(names = "--nodes", required = true)
    int nodes;

    @Option(names = "--port", defaultValue = "0")
    int port;

    @Option(names = "--seed-port", required = true)
    int seedPort;

    @Option(names = "--segment-size", required = true)
    long segmentSize;

    @Option(names = "--client", description = "a client node: no segments")
    boolean client;

    @Option(names = "--timeout", defaultValue = "60")
    int timeoutSeconds;

    @Option(names = "--property", description = "transport setting path=value, the path under membus.transports (e.g. tcp.port=0)")
    Map<String, String> properties = Map.of();

    /** A transport secret as {@code key=value}, passed by the demo in the environment, not on the command line. */
    static final String SECRET_ENV = "MEMBUS_DEMO_SECRET";

    @Override
    public Integer call() throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        Map<String, String> props = new java.util.LinkedHashMap<>(properties);
        String secret = System.getenv(SECRET_ENV);
        if (secret != null && secret.indexOf('=') > 0) {
            props.put(secret.substring(0, secret.indexOf('=')), secret.substring(secret.indexOf('=') + 1));
        }
        try (DemoNode node = new DemoNode(transport, nodeId, port, seedPort, segmentSize, props, client)) {
            node.awaitCluster(nodes, Duration.ofSeconds(timeoutSeconds));
            answer("READY " + node.statusLine());
            String line;
            while ((line = in.readLine()) != null) {
                if (line.startsWith("RUN ")) {
                    List<String> f = Arrays.asList(line.split(" "));
                    Thread phase = new Thread(() -> {
                        try {
                            String answer = node.run(f.get(2), nodes, f.get(3), f.subList(4, f.size()));
                            answer("ANSWER " + f.get(1) + " " + answer.replace('\n', '\t'));
                        } catch (RuntimeException e) {
                            e.printStackTrace();
                            answer("ERROR " + f.get(2) + " " + f.get(3) + " on node " + nodeId + ": "
                                    + String.valueOf(e.getMessage()).replace('\n', ' '));
                        }
                    }, "demo-phase-" + f.get(1));
                    phase.setDaemon(true);
                    phase.start();
                    continue;
                } else if (line.equals("STATUS")) {
                    answer("STATUS " + node.statusLine());
                } else if (line.equals("EXIT")) {
                    return 0;
                }
            }
            System.err.println("demo-node " + nodeId + ": the demo closed its pipe; shutting down");
            return 2;
        } catch (RuntimeException e) {
            answer("ERROR " + String.valueOf(e.getMessage()).replace('\n', ' '));
            throw e;
        }
    }

    /** One whole line on standard output (phases answer from their own threads). */
    private static void answer(String line) {
        synchronized (System.out) {
            System.out.println(line);
            System.out.flush();
        }
    }
}
