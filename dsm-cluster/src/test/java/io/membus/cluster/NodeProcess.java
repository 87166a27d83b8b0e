package io.membus.cluster;

import java.nio.file.Path;

/**
 * A node in a child JVM for multi-process tests: starts {@link DsmNode} from the
 * config file in {@code args[0]}, prints its status (the record), and runs until its standard
 * input closes (the test JVM is gone) or it is killed.
 */
public final class NodeProcess {
    private NodeProcess() {
    }

    public static void main(String[] args) throws Exception {
        DsmNode node = DsmNode.start(Path.of(args[0]));
        System.out.println("READY " + node.status());
        System.out.flush();
        while (System.in.read() >= 0) {
            System.out.println(node.status());
        }
        node.close();
        System.exit(0);
    }
}
