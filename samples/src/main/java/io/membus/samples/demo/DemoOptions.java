package io.membus.samples.demo;

/**
 * The demo's options the apps read.
 *
 * <p><b>Note:</b> immutable.
 *
 * @param ops       operations per node (each app scales its work by it)
 * @param blocks    blocks each node writes and reads back (counters)
 * @param blockSize bytes per block (counters)
 * @param seed      seed of the apps' random choices
 * @param kill      whether the jobs app kills a consumer node mid-run
 * @param clients   how many nodes are clients (the last ones: no memory; their blocks live on the memory nodes)
 */
public record DemoOptions(int ops, int blocks, int blockSize, long seed, boolean kill, int clients) {

    /** The nodes that hold memory: 1..{@code memoryNodes(nodes)}; the rest are clients. */
    public int memoryNodes(int nodes) {
        return nodes - clients;
    }
}
