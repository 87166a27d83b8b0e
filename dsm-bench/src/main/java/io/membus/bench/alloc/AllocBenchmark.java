package io.membus.bench.alloc;

import io.membus.bench.BenchCluster;
import io.membus.alloc.BlockRef;
import io.membus.alloc.GlobalAllocator;
import io.membus.alloc.Placement;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

/**
 * Allocate+free pairs per second on one thread: each operation frees the oldest of
 * a window of 1024 live blocks and allocates a new one, with sizes drawn from
 * {@code sizes}. Beside it, the floor: {@link BumpAllocator}, a purely local
 * off-heap allocator of the same size classes.
 *
 * <ul>
 *   <li>{@code floor}: the local bump allocator;</li>
 *   <li>{@code local}: node 1 allocates in its own heap;</li>
 *   <li>{@code remote-local}: node 1 allocates in node 2's heap over the {@code local} transport;</li>
 *   <li>{@code remote-shm}: the same over {@code shm} (node 2's heap is a file under /dev/shm).</li>
 * </ul>
 *
 * <p><b>Note:</b> JMH state; one benchmark thread.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class AllocBenchmark {
    private static final int WINDOW = 1024;

    @Param({"floor", "local", "remote-local", "remote-shm"})
    public String setup;

    /** {@code small}: 16..256 B; {@code mixed}: 16 B..8 KiB. */
    @Param({"small", "mixed"})
    public String sizes;

    private BenchCluster cluster;
    private GlobalAllocator allocator;
    private Placement placement;
    private BumpAllocator floor;
    private final BlockRef[] refs = new BlockRef[WINDOW];
    private final long[] floorBlocks = new long[WINDOW];
    private final int[] sizeOf = new int[WINDOW];
    private int[] drawn;
    private int next;

    @Setup(Level.Trial)
    public void setUp() {
        SplittableRandom rnd = new SplittableRandom(42);
        drawn = new int[1 << 16];
        int max = sizes.equals("small") ? 256 : 8192;
        for (int i = 0; i < drawn.length; i++) {
            drawn[i] = 16 + rnd.nextInt(max - 15);
        }
        if (setup.equals("floor")) {
            floor = new BumpAllocator(256L << 20);
        } else {
            cluster = new BenchCluster(setup.equals("remote-shm") ? "shm" : "local", 2, 256L << 20, "alloc-bench");
            allocator = cluster.node(1);
            placement = setup.equals("local") ? Placement.local() : Placement.node(2);
        }
        for (int i = 0; i < WINDOW; i++) {
            sizeOf[i] = drawn[i];
            if (floor != null) {
                floorBlocks[i] = floor.allocate(sizeOf[i]);
            } else {
                refs[i] = allocator.allocate(sizeOf[i], placement);
            }
        }
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        if (floor != null) {
            floor.close();
        } else {
            cluster.close();
        }
    }

    @Benchmark
    public Object allocateFree() {
        int slot = next & (WINDOW - 1);
        int size = drawn[next & (drawn.length - 1)];
        next++;
        if (floor != null) {
            floor.free(floorBlocks[slot], sizeOf[slot]);
            floorBlocks[slot] = floor.allocate(size);
            sizeOf[slot] = size;
            return floorBlocks[slot];
        }
        allocator.free(refs[slot]);
        BlockRef r = allocator.allocate(size, placement);
        refs[slot] = r;
        return r;
    }
}
