package io.membus.transport.rdma;

import net.openhft.chronicle.core.UnsafeMemory;

/**
 * The native memory of a software send queue: {@code depth} encoded work requests
 * and {@code depth} staging buffers, laid out as {@link SendQueue} describes.
 * Shared by the tests' {@link SoftNic} and {@link SoftFabric.SoftQueuePair}.
 *
 * <p><b>Note:</b> the addresses are fixed until {@link #free()}, which is called
 * once, when nothing posts any more.
 */
abstract class SoftRing implements SendQueue {
    private static final UnsafeMemory MEMORY = UnsafeMemory.MEMORY;

    private final int depth;
    private final int stagingBytes;
    private final long wrBase;
    private final long stagingBase;

    SoftRing(int depth, int stagingBytes) {
        this.depth = depth;
        this.stagingBytes = stagingBytes;
        this.wrBase = MEMORY.allocate((long) depth * SendWrFlyweight.ENCODED_SIZE);
        this.stagingBase = MEMORY.allocate((long) depth * stagingBytes);
    }

    @Override
    public final int depth() {
        return depth;
    }

    @Override
    public final long workRequestAddress(int slot) {
        return wrBase + (long) slot * SendWrFlyweight.ENCODED_SIZE;
    }

    @Override
    public final long stagingAddress(int slot) {
        return stagingBase + (long) slot * stagingBytes;
    }

    @Override
    public final int stagingBytes() {
        return stagingBytes;
    }

    /** Frees the ring's memory. */
    final void free() {
        MEMORY.freeMemory(wrBase, (long) depth * SendWrFlyweight.ENCODED_SIZE);
        MEMORY.freeMemory(stagingBase, (long) depth * stagingBytes);
    }
}
