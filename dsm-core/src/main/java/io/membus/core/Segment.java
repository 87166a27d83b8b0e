package io.membus.core;

import io.membus.core.error.DsmConfigException;
import io.membus.core.error.DsmException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.UnknownSegmentException;
import net.openhft.chronicle.bytes.BytesStore;
import net.openhft.chronicle.bytes.MappedBytesStore;
import net.openhft.chronicle.bytes.MappedFile;
import net.openhft.chronicle.core.io.ReferenceOwner;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.invoke.VarHandle;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Off-heap memory a node exports: a Chronicle Bytes native store, or a
 * memory-mapped file (with a {@link SegmentLayout header page}) for the
 * {@code shm} transport and for persistence.
 *
 * <p>The methods here are the raw memory operations on the data area, with
 * bounds checks only: the checks of a <em>verb</em> (remote key, access flags,
 * alignment) are done by {@link io.membus.core.transport.SegmentTable}.
 * Words are little-endian. {@link #read} and {@link #write} (and their native-memory
 * forms) move every 8-byte aligned word they cover whole with one 8-byte load or store
 * ({@link WordCopy}), so such a word is never seen half written, by this process or
 * another mapping the file. {@link #compareAndSwap} and {@link #fetchAndAdd} are
 * sequentially consistent CPU atomics on the shared memory (they are atomic with
 * respect to other processes that map the same file); {@link #write} ends with a
 * full fence and {@link #read} starts with an acquire fence, so a completed write
 * is seen by every later read, in this process or another that maps the file.
 *
 * <p>Ownership: the segment is closed by exactly one owner, the transport that
 * exported it (or the process that mapped a peer's file). {@link #close()} is
 * idempotent; any operation after it fails with a {@link DsmException}.
 *
 * <p><b>Note:</b> thread-safe: any number of threads may run operations
 * concurrently; concurrent plain writes to overlapping bytes race as they would
 * on any shared memory.
 */
public final class Segment implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(Segment.class);
    private static final SecureRandom KEYS = new SecureRandom();
    private static final ReferenceOwner OWNER = ReferenceOwner.temporary("membus-segment");

    private final SegmentDescriptor descriptor;
    private final BytesStore<?, ?> store;
    private final long base;
    /** Native address of data byte 0 (the memory stays mapped until {@link #close} frees it). */
    private final long address0;
    private final MappedFile mappedFile;
    private final Path file;
    private final boolean ownsFile;
    private final AtomicBoolean closed = new AtomicBoolean();
    /**
     * Operations inside the memory now (what {@code close} waits for). Striped: every verb
     * enters and leaves, and one shared word would be a contended line between all threads.
     */
    private final java.util.concurrent.atomic.LongAdder users = new java.util.concurrent.atomic.LongAdder();
    /** This segment's entry in {@link OpenResources#SEGMENTS}, removed by {@link #close(boolean)}. */
    private final long openId;

    private Segment(SegmentDescriptor descriptor, BytesStore<?, ?> store, long base, MappedFile mappedFile, Path file,
                    boolean ownsFile) {
        this.descriptor = descriptor;
        this.store = store;
        this.base = base;
        this.address0 = store.addressForRead(base);
        this.mappedFile = mappedFile;
        this.file = file;
        this.ownsFile = ownsFile;
        this.openId = OpenResources.SEGMENTS.opened(toString());
    }

    /** A fresh 64-bit remote key from {@link SecureRandom}; never 0. */
    public static long newRemoteKey() {
        long key;
        do {
            key = KEYS.nextLong();
        } while (key == 0);
        return key;
    }

    /** Allocates a zeroed native (off-heap, not file-backed) segment with a fresh remote key. */
    public static Segment allocate(int nodeId, long incarnation, int index, long size, int flags) {
        SegmentDescriptor d = new SegmentDescriptor(nodeId, incarnation, index, size, flags, newRemoteKey());
        BytesStore<?, ?> store = BytesStore.nativeStoreWithFixedCapacity(size);
        store.zeroOut(0, size);
        return new Segment(d, store, 0, null, null, false);
    }

    /**
     * Binds a freshly allocated segment's memory to a NIC (memory registration) and
     * returns the remote key peers must name: for transports whose key is not drawn
     * by Membus but issued by the hardware ({@code rdma}: the memory region's rkey).
     *
     * <p><b>Note:</b> called once, on the exporting thread, before the segment is published.
     */
    @FunctionalInterface
    public interface RemoteKeyBinder {
        /**
         * @param address native address of data byte 0
         * @param size    bytes in the data area
         * @return the segment's remote key (never 0)
         */
        long bind(long address, long size);
    }

    /**
     * Allocates a zeroed native segment whose remote key comes from {@code binder}
     * (called with the memory's address once it is zeroed). If the binder throws,
     * the memory is released and the exception propagates.
     */
    public static Segment allocate(int nodeId, long incarnation, int index, long size, int flags,
                                   RemoteKeyBinder binder) {
        BytesStore<?, ?> store = BytesStore.nativeStoreWithFixedCapacity(size);
        try {
            store.zeroOut(0, size);
            long remoteKey = binder.bind(store.addressForWrite(0), size);
            if (remoteKey == 0) {
                throw new IllegalStateException("remote key binder returned 0: node=" + nodeId + ", segment=" + index);
            }
            SegmentDescriptor d = new SegmentDescriptor(nodeId, incarnation, index, size, flags, remoteKey);
            return new Segment(d, store, 0, null, null, false);
        } catch (RuntimeException | Error e) {
            store.releaseLast();
            throw e;
        }
    }

    /**
     * Creates or re-opens a file-backed segment owned by this process.
     *
     * <p>If {@code file} exists and its header names the same node, index and size,
     * its data is kept (a node that restarts with the same identity gets its data
     * back) and the header gets the new incarnation and a fresh remote key.
     * Otherwise the file is created (or replaced, when {@code replace} is true) and
     * zeroed.
     *
     * @throws DsmConfigException when the file exists, belongs to another segment and
     *                            {@code replace} is false
     */
    public static Segment createOrOpenFile(Path file, int nodeId, long incarnation, int index, long size, int flags,
                                           boolean replace) {
        return createOrOpenFile(file, nodeId, incarnation, index, size, flags, replace, PrivateFiles.ownerOnly());
    }

    /**
     * As {@link #createOrOpenFile(Path, int, long, int, long, int, boolean)}, the file and any
     * directory it creates given the permissions of {@code files} (the file's memory is the
     * node's: no one else may read it); a file it reopens gets them too.
     */
    public static Segment createOrOpenFile(Path file, int nodeId, long incarnation, int index, long size, int flags,
                                           boolean replace, PrivateFiles files) {
        SegmentDescriptor d = new SegmentDescriptor(nodeId, incarnation, index, size, flags, newRemoteKey());
        try {
            files.createDirectories(file.toAbsolutePath().getParent());
            if (Files.exists(file)) {
                SegmentDescriptor old = readHeader(file);
                boolean same = old != null && old.nodeId() == nodeId && old.index() == index && old.size() == size;
                if (!same) {
                    if (!replace) {
                        throw new DsmConfigException("segment file", file,
                                "a file of node " + nodeId + " segment " + index + " with size " + size
                                        + " (found " + (old == null ? "no valid segment header" : old) + ");"
                                        + " remove the file or choose another path");
                    }
                    Files.delete(file);
                }
            }
            if (Files.exists(file)) {
                files.secureFile(file);
            } else {
                files.createFile(file); // created with its permissions before any byte is in it
            }
            long fileSize = SegmentLayout.DATA_OFFSET + size;
            MappedFile mf = MappedFile.ofSingle(file.toFile(), fileSize, false);
            MappedBytesStore store = mf.acquireByteStore(OWNER, 0);
            store.writeVolatileLong(SegmentLayout.STATE_OFFSET, SegmentLayout.STATE_INITIALISING);
            store.writeLong(SegmentLayout.MAGIC_OFFSET, SegmentLayout.MAGIC);
            store.writeInt(SegmentLayout.VERSION_OFFSET, SegmentLayout.LAYOUT_VERSION);
            store.writeInt(SegmentLayout.FLAGS_OFFSET, flags);
            store.writeInt(SegmentLayout.NODE_ID_OFFSET, nodeId);
            store.writeInt(SegmentLayout.INDEX_OFFSET, index);
            store.writeLong(SegmentLayout.INCARNATION_OFFSET, incarnation);
            store.writeLong(SegmentLayout.SIZE_OFFSET, size);
            store.writeLong(SegmentLayout.REMOTE_KEY_OFFSET, d.remoteKey());
            store.writeLong(SegmentLayout.OWNER_PID_OFFSET, ProcessHandle.current().pid());
            store.writeVolatileLong(SegmentLayout.STATE_OFFSET, SegmentLayout.STATE_READY);
            return new Segment(d, store, SegmentLayout.DATA_OFFSET, mf, file, true);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot create segment file: path=" + file + ", size=" + size, e);
        }
    }

    /**
     * Maps a file-backed segment another process owns (the {@code shm} transport's
     * initiator side). The descriptor, including the remote key every verb is checked
     * against, is read from the file's header.
     *
     * @param nodeId the node that owns the file (named by the failure)
     * @throws NodeUnavailableException (not sent) when the file is missing, not a segment, or not ready
     */
    public static Segment mapPeer(int nodeId, Path file) {
        if (!Files.isRegularFile(file)) {
            throw NodeUnavailableException.notSent(nodeId, "segment file missing: path=" + file
                    + "; the owner has not exported it or has exited");
        }
        try {
            MappedFile mf = MappedFile.ofSingle(file.toFile(), Files.size(file), false);
            MappedBytesStore store = mf.acquireByteStore(OWNER, 0);
            SegmentDescriptor d = headerOf(nodeId, store, file);
            return new Segment(d, store, SegmentLayout.DATA_OFFSET, mf, file, false);
        } catch (IOException e) {
            throw NodeUnavailableException.notSent(nodeId, "cannot map segment file: path=" + file, e);
        }
    }

    /**
     * Takes over a segment file whose owner process is gone: the {@code shm} transport's
     * adoption (docs/replication.md §8). The segment keeps the identity and the remote key
     * its header names (node, index, incarnation, size, flags, key: the replica group's, so
     * pointers and cached keys stay right) and its data; the header's owner pid becomes this
     * process. From here on this process owns the file as if it had created it
     * ({@link #close(boolean)} marks it closed and deletes it unless kept).
     *
     * <p>The caller must have made sure that no process that could still write into the file
     * under its old owner runs (the adopter kills it first).
     *
     * @param nodeId the logical node the file must belong to (named by the failure)
     * @param index  the logical segment index the file must hold
     * @throws NodeUnavailableException (not sent) when the file is missing, not a segment,
     *                                  not ready, or holds another segment
     */
    public static Segment adoptFile(Path file, int nodeId, int index) {
        Segment s = mapPeer(nodeId, file);
        SegmentDescriptor d = s.descriptor;
        if (d.nodeId() != nodeId || d.index() != index) {
            s.close(true);
            throw NodeUnavailableException.notSent(nodeId, "segment file holds another segment: path=" + file
                    + ", header=" + d + ", expected segment " + nodeId + "/" + index);
        }
        s.store.writeVolatileLong(SegmentLayout.OWNER_PID_OFFSET, ProcessHandle.current().pid());
        Segment adopted = new Segment(d, s.store, SegmentLayout.DATA_OFFSET, s.mappedFile, file, true);
        OpenResources.SEGMENTS.closed(s.openId); // the mapping moved to the owning instance
        return adopted;
    }

    /** The descriptor in a segment file's header, or {@code null} when the file holds no valid header. */
    public static SegmentDescriptor readHeader(Path file) {
        try {
            if (!Files.isRegularFile(file) || Files.size(file) < SegmentLayout.DATA_OFFSET) {
                return null;
            }
            MappedFile mf = MappedFile.ofSingle(file.toFile(), SegmentLayout.DATA_OFFSET, true);
            try {
                MappedBytesStore store = mf.acquireByteStore(OWNER, 0);
                try {
                    return headerOf(-1, store, file);
                } finally {
                    store.release(OWNER);
                }
            } finally {
                mf.releaseLast();
            }
        } catch (IOException | DsmException | IllegalArgumentException e) {
            return null;
        }
    }

    private static SegmentDescriptor headerOf(int nodeId, BytesStore<?, ?> store, Path file) {
        if (store.readLong(SegmentLayout.MAGIC_OFFSET) != SegmentLayout.MAGIC
                || store.readInt(SegmentLayout.VERSION_OFFSET) != SegmentLayout.LAYOUT_VERSION) {
            throw NodeUnavailableException.notSent(nodeId, "not a membus segment file: path=" + file
                    + ", expected magic MBSEG001 version " + SegmentLayout.LAYOUT_VERSION);
        }
        long state = store.readVolatileLong(SegmentLayout.STATE_OFFSET);
        if (state != SegmentLayout.STATE_READY) {
            throw NodeUnavailableException.notSent(nodeId, "segment file not ready: path=" + file
                    + ", state=" + state + "; its owner is starting or has closed it");
        }
        return new SegmentDescriptor(store.readInt(SegmentLayout.NODE_ID_OFFSET),
                store.readLong(SegmentLayout.INCARNATION_OFFSET), store.readInt(SegmentLayout.INDEX_OFFSET),
                store.readLong(SegmentLayout.SIZE_OFFSET), store.readInt(SegmentLayout.FLAGS_OFFSET),
                store.readLong(SegmentLayout.REMOTE_KEY_OFFSET));
    }

    public SegmentDescriptor descriptor() {
        return descriptor;
    }

    public int nodeId() {
        return descriptor.nodeId();
    }

    public int index() {
        return descriptor.index();
    }

    public long incarnation() {
        return descriptor.incarnation();
    }

    public long size() {
        return descriptor.size();
    }

    public int flags() {
        return descriptor.flags();
    }

    public long remoteKey() {
        return descriptor.remoteKey();
    }

    /** The backing file, or {@code null} for a native segment. */
    public Path file() {
        return file;
    }

    /** Native address of data byte 0 (for memory registration with a NIC). */
    public long address() {
        checkOpen();
        return store.addressForRead(base);
    }

    /** Pointer to {@code offset} in this segment. */
    public long pointer(long offset) {
        return descriptor.pointer(offset);
    }

    public boolean isOpen() {
        return !closed.get();
    }

    /** Copies {@code length} bytes at {@code offset} into {@code dst[dstOffset..]}. */
    public void read(long offset, byte[] dst, int dstOffset, int length) {
        enter(offset, length);
        try {
            if (dstOffset < 0 || dstOffset > dst.length - length) {
                throw new IllegalArgumentException("destination range out of bounds: offset=" + dstOffset
                        + ", length=" + length + ", array=" + dst.length);
            }
            VarHandle.acquireFence();
            WordCopy.toArray(address0 + offset, dst, dstOffset, length);
        } finally {
            exit();
        }
    }

    /** Copies {@code length} bytes at {@code offset} to native memory at {@code address} (the caller owns it). */
    public void readToAddress(long offset, long address, int length) {
        enter(offset, length);
        try {
            VarHandle.acquireFence();
            WordCopy.toAddress(address0 + offset, address, length);
        } finally {
            exit();
        }
    }

    /** Copies {@code length} bytes of native memory at {@code address} to {@code offset}. */
    public void writeFromAddress(long offset, long address, int length) {
        enter(offset, length);
        try {
            WordCopy.fromAddress(address, address0 + offset, length);
            VarHandle.fullFence();
        } finally {
            exit();
        }
    }

    /** Copies {@code src[srcOffset..srcOffset+length)} to {@code offset}. */
    public void write(long offset, byte[] src, int srcOffset, int length) {
        enter(offset, length);
        try {
            if (srcOffset < 0 || srcOffset > src.length - length) {
                throw new IllegalArgumentException("source range out of bounds: offset=" + srcOffset
                        + ", length=" + length + ", array=" + src.length);
            }
            WordCopy.fromArray(src, srcOffset, address0 + offset, length);
            VarHandle.fullFence();
        } finally {
            exit();
        }
    }

    /** Volatile read of the little-endian word at {@code offset}. */
    public long readLong(long offset) {
        enter(offset, Long.BYTES);
        try {
            return store.readVolatileLong(base + offset);
        } finally {
            exit();
        }
    }

    /** Volatile write of the word at {@code offset}. */
    public void writeLong(long offset, long value) {
        enter(offset, Long.BYTES);
        try {
            store.writeVolatileLong(base + offset, value);
        } finally {
            exit();
        }
    }

    /**
     * Atomic compare-and-swap of the 8-byte aligned word at {@code offset}.
     *
     * @return the value the word held before (equal to {@code expected} when the swap happened)
     */
    public long compareAndSwap(long offset, long expected, long update) {
        enter(offset, Long.BYTES);
        try {
            long at = base + offset;
            while (true) {
                if (store.compareAndSwapLong(at, expected, update)) {
                    return expected;
                }
                long current = store.readVolatileLong(at);
                if (current != expected) {
                    return current;
                }
                // the word went back to expected between the failed CAS and the read: try again
            }
        } finally {
            exit();
        }
    }

    /** Atomic fetch-and-add of the 8-byte aligned word at {@code offset}; returns the value before. */
    public long fetchAndAdd(long offset, long delta) {
        enter(offset, Long.BYTES);
        try {
            return store.addAndGetLong(base + offset, delta) - delta;
        } finally {
            exit();
        }
    }

    /** Fills {@code length} bytes at {@code offset} with zeros. */
    public void zero(long offset, long length) {
        if (length > Integer.MAX_VALUE) {
            zero(offset, length - Integer.MAX_VALUE);
            zero(offset + length - Integer.MAX_VALUE, Integer.MAX_VALUE);
            return;
        }
        enter(offset, (int) length);
        try {
            store.zeroOut(base + offset, base + offset + length);
            VarHandle.fullFence();
        } finally {
            exit();
        }
    }

    /**
     * Checks bounds and that the segment is open, and counts the caller in: memory is
     * released only once every operation that entered has left, so a concurrent
     * {@link #close} never frees memory under a running verb.
     */
    private void enter(long offset, int length) {
        if (offset < 0 || length < 0 || offset > size() - length) {
            throw new IllegalArgumentException("segment access out of bounds: segment=" + descriptor
                    + ", offset=" + offset + ", length=" + length + ", capacity=" + size());
        }
        users.increment();
        if (closed.get()) {
            users.decrement();
            throw closedException(offset, length);
        }
    }

    private void exit() {
        users.decrement();
    }

    private void checkOpen() {
        if (closed.get()) {
            throw closedException(0, 0);
        }
    }

    private DsmException closedException(long offset, int length) {
        return new UnknownSegmentException(pointer(offset), length, "segment closed: it was unexported or its node shut down");
    }

    /** Waits (bounded) until no operation is inside the memory; false if some still are. */
    private boolean quiesce() {
        long deadline = System.nanoTime() + 5_000_000_000L;
        while (users.sum() != 0) {
            if (System.nanoTime() - deadline > 0) {
                return false;
            }
            Thread.onSpinWait();
        }
        return true;
    }

    /**
     * Releases the memory. A file this process created is marked closed in its header
     * and kept when {@code keepFile} (persistence), else deleted; a peer's mapped file
     * is only unmapped.
     */
    public void close(boolean keepFile) {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        OpenResources.SEGMENTS.closed(openId);
        if (!quiesce()) {
            // an operation is stuck inside the memory: leaking it is safe, freeing it is not
            LOG.error("segment still in use 5s after close, memory not released: segment={}", descriptor);
            return;
        }
        if (mappedFile == null) {
            store.releaseLast();
            return;
        }
        try {
            if (ownsFile) {
                store.writeVolatileLong(SegmentLayout.STATE_OFFSET,
                        keepFile ? SegmentLayout.STATE_READY : SegmentLayout.STATE_CLOSED);
            }
            store.release(OWNER);
            mappedFile.releaseLast();
        } finally {
            if (ownsFile && !keepFile) {
                try {
                    Files.deleteIfExists(file);
                } catch (IOException e) {
                    LOG.warn("could not delete segment file: path={}; remove it by hand", file, e);
                }
            }
        }
    }

    /** Same as {@code close(true)} for a file-backed segment (the data stays), frees native memory otherwise. */
    @Override
    public void close() {
        close(true);
    }

    @Override
    public String toString() {
        return "Segment{" + descriptor + (file != null ? ", file=" + file : "") + "}";
    }
}
