package io.membus.transport.rdma;

import net.openhft.chronicle.core.UnsafeMemory;

import java.io.IOException;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A software NIC for tests: one RC send queue ({@link SendQueue}) whose posted work
 * requests are decoded from the native bytes {@link VerbEngine} encoded, executed
 * against memory regions registered with it, and completed in posting order on its
 * own thread, the way a NIC's DMA engine and completion queue behave:
 * <ul>
 *   <li>an rkey that names no region, bytes outside the region, or an access the
 *       region was not registered for complete with {@code IBV_WC_REM_ACCESS_ERR};
 *       a misaligned atomic with {@code IBV_WC_REM_INV_REQ_ERR};</li>
 *   <li>after the first failed completion the queue is in error state: every later
 *       work request completes with {@code IBV_WC_WR_FLUSH_ERR};</li>
 *   <li>{@link #stall()} holds completions (a slow or unreachable peer) until {@link #resume()}.</li>
 * </ul>
 *
 * <p><b>Note:</b> thread-safe; {@link #post} is called under the engine's lock.
 */
final class SoftNic extends SoftRing implements AutoCloseable {
    private static final UnsafeMemory MEMORY = UnsafeMemory.MEMORY;

    record Region(long address, long length, int access) {
    }

    private final Map<Integer, Region> regions = new ConcurrentHashMap<>();
    private final AtomicInteger nextKey = new AtomicInteger(0x100);
    private final LinkedBlockingQueue<Long> work = new LinkedBlockingQueue<>();
    private final Thread thread;
    private final Object stallLock = new Object();
    private boolean stalled; // guarded by stallLock
    private volatile boolean error;
    private volatile boolean running = true;
    private volatile VerbEngine engine;
    final AtomicInteger posted = new AtomicInteger();
    final AtomicInteger closed = new AtomicInteger();

    SoftNic(int depth, int stagingBytes) {
        super(depth, stagingBytes);
        this.thread = new Thread(this::run, "soft-nic");
        thread.setDaemon(true);
        thread.start();
    }

    void attach(VerbEngine engine) {
        this.engine = engine;
    }

    /** Registers a region; returns its rkey. */
    int register(long address, long length, int access) {
        int rkey = nextKey.getAndAdd(0x100) | 0x5a;
        regions.put(rkey, new Region(address, length, access));
        return rkey;
    }

    void deregister(int rkey) {
        regions.remove(rkey);
    }

    void stall() {
        synchronized (stallLock) {
            stalled = true;
        }
    }

    void resume() {
        synchronized (stallLock) {
            stalled = false;
            stallLock.notifyAll();
        }
    }

    @Override
    public int localKey() {
        return 0x77;
    }

    @Override
    public void post(int slot) throws IOException {
        if (!running) {
            throw new IOException("soft NIC queue pair destroyed");
        }
        posted.incrementAndGet();
        work.add(workRequestAddress(slot));
    }

    @Override
    public void close() {
        closed.incrementAndGet();
    }

    /** Stops the NIC thread and frees its memory (tests call it at the end). */
    void shutdown() throws InterruptedException {
        running = false;
        resume();
        thread.interrupt();
        thread.join(5_000);
        free();
    }

    private void run() {
        SendWrFlyweight wr = new SendWrFlyweight();
        while (running) {
            long address;
            try {
                address = work.take();
                synchronized (stallLock) {
                    while (stalled && running) {
                        stallLock.wait();
                    }
                }
            } catch (InterruptedException e) {
                return;
            }
            wr.wrap(address);
            long wrId = wr.wrId();
            int status = error ? WcStatus.WR_FLUSH_ERR : execute(wr);
            if (status != WcStatus.SUCCESS) {
                error = true;
            }
            engine.complete(wrId, status, status == WcStatus.SUCCESS ? 0 : 0x99);
        }
    }

    private int execute(SendWrFlyweight wr) {
        return execute(wr, localKey(), regions);
    }

    /**
     * Executes one decoded work request against registered regions the way a
     * responder NIC does (checks of the memory region, then the DMA or the atomic).
     *
     * @return the completion status
     */
    static int execute(SendWrFlyweight wr, int localKey, Map<Integer, Region> regions) {
        int op = wr.opcode();
        boolean atomic = op == SendWrLayout.IBV_WR_ATOMIC_CMP_AND_SWP || op == SendWrLayout.IBV_WR_ATOMIC_FETCH_AND_ADD;
        int length = atomic ? Long.BYTES : wr.sgeLength();
        if (wr.sgeLocalKey() != localKey) {
            return WcStatus.LOC_PROT_ERR;
        }
        Region r = regions.get(wr.remoteKey());
        long remote = wr.remoteAddress();
        int need = switch (op) {
            case SendWrLayout.IBV_WR_RDMA_READ -> SendWrLayout.IBV_ACCESS_REMOTE_READ;
            case SendWrLayout.IBV_WR_RDMA_WRITE -> SendWrLayout.IBV_ACCESS_REMOTE_WRITE;
            default -> SendWrLayout.IBV_ACCESS_REMOTE_ATOMIC;
        };
        if (r == null || remote < r.address() || remote - r.address() > r.length() - length
                || (r.access() & need) == 0) {
            return WcStatus.REM_ACCESS_ERR;
        }
        if (atomic && (remote & 7) != 0) {
            return WcStatus.REM_INV_REQ_ERR;
        }
        long local = wr.sgeAddress();
        switch (op) {
            // whole aligned words, as a NIC's DMA moves them (and as the Verbs contract's word atomicity asks)
            case SendWrLayout.IBV_WR_RDMA_READ -> io.membus.core.WordCopy.toAddress(remote, local, length);
            case SendWrLayout.IBV_WR_RDMA_WRITE -> io.membus.core.WordCopy.fromAddress(local, remote, length);
            case SendWrLayout.IBV_WR_ATOMIC_CMP_AND_SWP -> {
                long expected = wr.compareAdd();
                long old;
                do {
                    old = MEMORY.readVolatileLong(remote);
                } while (old == expected && !MEMORY.compareAndSwapLong(remote, expected, wr.swap()));
                MEMORY.writeLong(local, old);
            }
            case SendWrLayout.IBV_WR_ATOMIC_FETCH_AND_ADD -> {
                long old;
                do {
                    old = MEMORY.readVolatileLong(remote);
                } while (!MEMORY.compareAndSwapLong(remote, old, old + wr.compareAdd()));
                MEMORY.writeLong(local, old);
            }
            default -> {
                return WcStatus.REM_INV_REQ_ERR;
            }
        }
        return WcStatus.SUCCESS;
    }
}
