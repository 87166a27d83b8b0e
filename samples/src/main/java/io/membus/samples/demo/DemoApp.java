package io.membus.samples.demo;

import java.io.PrintStream;
import java.util.List;

/**
 * One app of {@code membus demo}: a small program on shared state that every node
 * runs its part of, and whose result the demo checks. An app has two halves in one
 * class: {@link #onNode} runs in a node (a process, or a thread over {@code local}),
 * one named phase at a time, and answers one line; {@link #drive} runs in the demo,
 * asks the nodes for phases through a {@link Driver}, prints what happened and
 * checks the result.
 *
 * <p><b>Note:</b> implementations are stateless singletons; per-node state lives in
 * the {@link DemoNode} (see {@link DemoNode#state}).
 */
public interface DemoApp {

    /** The name on the command line: {@code membus demo <name>}. */
    String name();

    /** One line: what the app shows. */
    String title();

    /**
     * Runs one phase on a node and answers one line (no line breaks).
     *
     * @param node  the node
     * @param nodes how many nodes the demo has (ids 1..nodes)
     * @param phase the phase the driver asked for
     * @param args  its arguments
     */
    String onNode(DemoNode node, int nodes, String phase, List<String> args);

    /** Drives the app and checks its result; returns whether every check passed. */
    boolean drive(Driver driver) throws Exception;

    /** What an app's driver can do with the demo's cluster. */
    interface Driver {
        int nodes();

        DemoOptions options();

        PrintStream out();

        /** Runs {@code phase} on every node at once; the answers by node (index 0 = node 1). */
        List<String> onEveryNode(String phase, List<String> args) throws Exception;

        /** Runs {@code phase} on the given nodes at once; the answers in their order. */
        List<String> onNodes(List<Integer> nodeIds, String phase, List<String> args) throws Exception;

        /** Runs {@code phase} on one node. */
        String onNode(int nodeId, String phase, List<String> args) throws Exception;

        /** Starts {@code phase} on one node without waiting (phases of one node may run at the same time). */
        java.util.concurrent.CompletableFuture<String> start(int nodeId, String phase, List<String> args);

        /** kill -9 of a node process (only where nodes are processes); its phase in flight fails. */
        void kill(int nodeId);

        /** Whether the nodes are processes that {@link #kill} can kill. */
        boolean canKill();
    }
}
