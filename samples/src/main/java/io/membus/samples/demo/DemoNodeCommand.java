package io.membus.samples.demo;

import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
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
 *   demo  -> node : RUN &lt;app&gt; &lt;phase&gt; &lt;arg&gt;...   (one phase of an app, see DemoApp)
 *   node  -> demo : ANSWER &lt;one line&gt;
 *   demo  -> node : STATUS                  (between phases)
 *   node  -> demo : STATUS &lt;status line&gt;
 *   demo  -> node : EXIT                    (the apps' state is closed, the node leaves and exits)
 * </pre>
 *
 * A failed phase answers {@code ERROR <message>} and ends the process. A closed
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

    @Option(names = "--timeout", defaultValue = "60")
    int timeoutSeconds;

    @Option(names = "--property", description = "transport property key=value")
    Map<String, String> properties = Map.of();

    /** A transport secret as {@code key=value}, passed by the demo in the environment, not on the command line. */
    static final String SECRET_ENV = "MEMBUS_DEMO_SECRET";

    @Override
    public Integer call() throws Exception {
        PrintStream out = System.out;
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        Map<String, String> props = new java.util.LinkedHashMap<>(properties);
        String secret = System.getenv(SECRET_ENV);
        if (secret != null && secret.indexOf('=') > 0) {
            props.put(secret.substring(0, secret.indexOf('=')), secret.substring(secret.indexOf('=') + 1));
        }
        try (DemoNode node = new DemoNode(transport, nodeId, port, seedPort, segmentSize, props)) {
            node.awaitCluster(nodes, Duration.ofSeconds(timeoutSeconds));
            out.println("READY " + node.statusLine());
            out.flush();
            String line;
            while ((line = in.readLine()) != null) {
                if (line.startsWith("RUN ")) {
                    List<String> f = Arrays.asList(line.split(" "));
                    String answer = node.run(f.get(1), nodes, f.get(2), f.subList(3, f.size()));
                    out.println("ANSWER " + answer.replace('\n', '\t'));
                } else if (line.equals("STATUS")) {
                    out.println("STATUS " + node.statusLine());
                } else if (line.equals("EXIT")) {
                    return 0;
                }
                out.flush();
            }
            System.err.println("demo-node " + nodeId + ": the demo closed its pipe; shutting down");
            return 2;
        } catch (RuntimeException e) {
            out.println("ERROR " + String.valueOf(e.getMessage()).replace('\n', ' '));
            out.flush();
            throw e;
        }
    }
}
