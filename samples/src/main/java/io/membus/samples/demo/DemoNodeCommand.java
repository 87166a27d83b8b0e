package io.membus.samples.demo;

import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;

/**
 * {@code membus demo-node}: one node process of {@code membus demo}, driven by the
 * demo over its standard input and output, one line per step:
 *
 * <pre>
 *   node  -> demo : READY &lt;peer&gt;
 *   demo  -> node : GO &lt;ops&gt; &lt;blocks&gt; &lt;blockSize&gt; &lt;peer&gt;;&lt;peer&gt;;...
 *   node  -> demo : RESULT &lt;result&gt;
 *   demo  -> node : VERIFY
 *   node  -> demo : COUNTERS &lt;ring&gt; &lt;shared&gt;
 *   demo  -> node : EXIT
 * </pre>
 *
 * A closed standard input (the demo is gone) ends the node. Not meant to be run
 * by hand.
 *
 * <p><b>Note:</b> one instance per process.
 */
@Command(name = "demo-node", hidden = true, description = "One node process of membus demo (driven by the demo).")
public final class DemoNodeCommand implements Callable<Integer> {

    @Option(names = "--transport", required = true)
    String transport;

    @Option(names = "--node-id", required = true)
    int nodeId;

    @Option(names = "--segment-size", required = true)
    long segmentSize;

    @Option(names = "--property", description = "transport property key=value")
    Map<String, String> properties = Map.of();

    @Override
    public Integer call() throws Exception {
        PrintStream out = System.out;
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        try (DemoNode node = new DemoNode(transport, nodeId, segmentSize, properties)) {
            out.println("READY " + node.self().encode());
            out.flush();
            String line;
            while ((line = in.readLine()) != null) {
                if (line.startsWith("GO ")) {
                    String[] f = line.split(" ", 5);
                    List<DemoNode.Peer> peers = new ArrayList<>();
                    for (String p : f[4].split(";")) {
                        peers.add(DemoNode.Peer.decode(p));
                    }
                    DemoNode.Result r = node.work(peers, Integer.parseInt(f[1]), Integer.parseInt(f[2]),
                            Integer.parseInt(f[3]));
                    out.println("RESULT " + r.encode());
                } else if (line.equals("VERIFY")) {
                    long[] c = node.counters();
                    out.println("COUNTERS " + c[0] + " " + c[1]);
                } else if (line.equals("EXIT")) {
                    return 0;
                }
                out.flush();
            }
            System.err.println("demo-node " + nodeId + ": the demo closed its pipe; shutting down");
            return 2;
        } catch (RuntimeException e) {
            out.println("ERROR " + e.getMessage().replace('\n', ' '));
            out.flush();
            throw e;
        }
    }
}
