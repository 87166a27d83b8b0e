package io.membus.core;

import io.membus.core.directory.StaticDirectory;
import io.membus.core.transport.SegmentTable;
import io.membus.core.error.BadLengthException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.UnknownSegmentException;
import io.membus.core.error.WrongRemoteKeyException;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.Transports;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class RemoteMemoryTest {
    private final List<Transport> nodes = new ArrayList<>();
    private final StaticDirectory directory = new StaticDirectory();
    private final String fabric = "rm-" + System.nanoTime();

    private RemoteMemory node(int id) {
        Transport t = Transports.create("local", TransportConfig.builder(id).property("local.fabric", fabric).build());
        nodes.add(t);
        directory.addMember(t.self());
        Segment s = t.export(SegmentSpec.of(0, 4096));
        directory.addSegment(s.descriptor());
        return new RemoteMemory(t, directory, Duration.ofSeconds(5));
    }

    @AfterEach
    void close() {
        nodes.forEach(Transport::close);
    }

    @Test
    void anyPointerIsReachedWithTheKeyFromTheDirectory() {
        RemoteMemory one = node(1);
        RemoteMemory two = node(2);
        long onTwo = RemotePtr.pack(2, 0, 64);
        one.writeLong(onTwo, 41);
        assertEquals(41, two.readLong(onTwo), "own pointers run on the local table");
        assertEquals(41, one.fetchAndAdd(onTwo, 1));
        assertEquals(42, one.compareAndSwap(onTwo, 42, 43));
        one.write(RemotePtr.pack(1, 0, 0), new byte[]{1, 2, 3});
        assertArrayEquals(new byte[]{1, 2, 3}, two.read(RemotePtr.pack(1, 0, 0), 3));
    }

    /**
     * Issue 26.5: a negative or huge length threw NegativeArraySizeException or OutOfMemoryError
     * before it was checked. Every read and write is refused with BadLengthException first, on
     * this node's own memory path and towards a peer, blocking, asynchronous and batched.
     */
    @Test
    void aNegativeOrHugeLengthIsRefusedWithItsTypedErrorBeforeAnythingIsAllocated() {
        RemoteMemory one = node(1);
        node(2);
        java.nio.ByteBuffer direct = java.nio.ByteBuffer.allocateDirect(16);
        long address = net.openhft.chronicle.core.Jvm.address(direct);
        for (long ptr : new long[] {RemotePtr.pack(1, 0, 0), RemotePtr.pack(2, 0, 0)}) {
            for (int length : new int[] {-1, Integer.MIN_VALUE, Integer.MAX_VALUE, SegmentTable.MAX_VERB_LENGTH + 1}) {
                String what = "length " + length + " at " + RemotePtr.toString(ptr);
                BadLengthException e = assertThrows(BadLengthException.class, () -> one.read(ptr, length), what);
                assertEquals(length, e.length(), what);
                assertEquals(SegmentTable.MAX_VERB_LENGTH, e.maxLength(), what);
                assertThrows(BadLengthException.class, () -> RemoteMemory.await(one.readAsync(ptr, length),
                        Duration.ofSeconds(5)), what);
                RemoteMemory.RemoteBatch batch = one.batch();
                java.util.concurrent.CompletableFuture<byte[]> r = batch.read(ptr, length);
                batch.submit();
                assertThrows(BadLengthException.class, () -> RemoteMemory.await(r, Duration.ofSeconds(5)), what);
                if (length > 0) {
                    assertThrows(BadLengthException.class, () -> one.writeFromAddress(ptr, address, length), what);
                    assertThrows(BadLengthException.class, () -> one.readToAddress(ptr, address, length), what);
                }
            }
        }
        assertEquals(0, one.readLong(RemotePtr.pack(2, 0, 0)), "still usable");
    }

    @Test
    void pointersToUnknownSegmentsAndMembersFailWithTypedErrors() {
        RemoteMemory one = node(1);
        node(2);
        assertThrows(UnknownSegmentException.class, () -> one.read(RemotePtr.pack(2, 9, 0), 8));
        NodeUnavailableException e = assertThrows(NodeUnavailableException.class,
                () -> one.read(RemotePtr.pack(77, 0, 0), 8));
        assertEquals(77, e.nodeId());
        directory.removeMember(2, "test");
        assertThrows(NodeUnavailableException.class, () -> one.read(RemotePtr.pack(2, 0, 0), 8));
    }

    @Test
    void aStaleDirectoryKeyIsRefused() {
        RemoteMemory one = node(1);
        node(2);
        SegmentDescriptor real = directory.segment(2, 0).orElseThrow();
        directory.addSegment(new SegmentDescriptor(2, real.incarnation(), 0, real.size(), real.flags(),
                real.remoteKey() + 1));
        assertThrows(WrongRemoteKeyException.class, () -> one.readLong(RemotePtr.pack(2, 0, 0)));
    }

    /**
     * Verbs issued back to back while the connection to their node is still opening
     * must reach it in issue order: the last of many writes to one word wins.
     */
    @Test
    void verbsIssuedWhileTheConnectionOpensKeepTheirIssueOrder() {
        node(2);
        Transport one = Transports.create("local", TransportConfig.builder(1).property("local.fabric", fabric).build());
        nodes.add(one);
        directory.addMember(one.self());
        CompletableFuture<Void> gate = new CompletableFuture<>();
        Transport gated = (Transport) Proxy.newProxyInstance(getClass().getClassLoader(),
                new Class<?>[]{Transport.class}, (proxy, method, args) -> {
                    Object result;
                    try {
                        result = method.invoke(one, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                    if (method.getName().equals("connect")) {
                        CompletableFuture<?> opened = (CompletableFuture<?>) result;
                        return gate.thenCompose(ignored -> opened);
                    }
                    return result;
                });
        RemoteMemory memory = new RemoteMemory(gated, directory, Duration.ofSeconds(5));
        long word = RemotePtr.pack(2, 0, 128);
        List<CompletableFuture<?>> issued = new ArrayList<>();
        for (long v = 1; v <= 64; v++) {
            byte[] b = new byte[Long.BYTES];
            Words.putLong(b, 0, v);
            issued.add(memory.writeAsync(word, b));
        }
        issued.add(memory.fetchAndAddAsync(word, 1000));
        gate.complete(null);
        issued.forEach(memory::await);
        assertEquals(1064, memory.readLong(word), "the writes ran in issue order, then the add");
    }

    @Test
    void aConnectionThatCannotOpenFailsTheVerbWithTheTypedCauseUnwrapped() {
        RemoteMemory one = node(1);
        node(2);
        nodes.get(1).close(); // node 2 is gone but still listed, as between a crash and its removal
        CompletableFuture<byte[]> read = one.readAsync(RemotePtr.pack(2, 0, 0), 8);
        Throwable failure = read.handle((v, e) -> e).join();
        assertTrue(failure instanceof NodeUnavailableException, "the future's own cause is typed: " + failure);
        assertEquals(2, ((NodeUnavailableException) failure).nodeId());
    }

    @Test
    void aBlockingCallRethrowsTheTypedFailureWithTheCallersStackAndTheOriginalAsCause() {
        CompletableFuture<Long> failed = new CompletableFuture<>();
        NodeUnavailableException original = new NodeUnavailableException(7, "connection lost");
        Thread io = new Thread(() -> failed.completeExceptionally(original), "fake-io");
        io.start();
        NodeUnavailableException thrown = assertThrows(NodeUnavailableException.class,
                () -> RemoteMemory.await(failed, Duration.ofSeconds(5)));
        assertTrue(thrown != original, "a copy for the caller, not the shared original");
        assertEquals(original, thrown.getCause(), "the transport thread's exception is the cause");
        assertEquals(original.getMessage(), thrown.getMessage());
        assertTrue(java.util.Arrays.stream(thrown.getStackTrace())
                        .anyMatch(f -> f.getMethodName().contains("aBlockingCallRethrows")),
                "the caller's frames are in the stack");
    }

    @Test
    void aWaitTheTransportDidNotBoundIsATypedTimeout() {
        assertThrows(io.membus.core.error.DsmTimeoutException.class,
                () -> RemoteMemory.await(new CompletableFuture<>(), Duration.ofMillis(50)));
    }

    @Test
    void aBlockingCallOnATransportThreadFailsAtOnceInsteadOfDeadlocking() throws Exception {
        RemoteMemory one = node(1);
        node(2);
        CompletableFuture<Throwable> seen = new CompletableFuture<>();
        io.membus.core.transport.TransportThreads.startDaemon("fake-transport-io", () -> {
            try {
                RemoteMemory.await(new CompletableFuture<>(), Duration.ofSeconds(30)); // would hang 30 s
                seen.complete(null);
            } catch (Throwable t) {
                seen.complete(t);
            }
        });
        Throwable t = seen.get(10, java.util.concurrent.TimeUnit.SECONDS);
        assertTrue(t instanceof io.membus.core.error.BlockingCallOnTransportThreadException, "got " + t);
        assertTrue(t.getMessage().contains("thread=fake-transport-io") && t.getMessage().contains("Async"), t.getMessage());
        // a completed future is no wait: it may be read anywhere
        CompletableFuture<Long> done = new CompletableFuture<>();
        io.membus.core.transport.TransportThreads.startDaemon("fake-transport-io-2",
                () -> done.complete(one.await(CompletableFuture.completedFuture(5L), Duration.ofSeconds(1))));
        assertEquals(5L, done.get(10, java.util.concurrent.TimeUnit.SECONDS));
        assertEquals(0, one.fetchAndAdd(RemotePtr.pack(2, 0, 8), 1), "ordinary threads block as before");
    }

    @Test
    void everyFailureSaysWhetherTheVerbMayHaveRun() {
        RemoteMemory one = node(1);
        node(2);
        NodeUnavailableException gone = assertThrows(NodeUnavailableException.class,
                () -> one.read(RemotePtr.pack(9, 0, 0), 8));
        org.junit.jupiter.api.Assertions.assertFalse(gone.mayHaveRun(), "no such member: nothing was sent");
        WrongRemoteKeyException refused = assertThrows(WrongRemoteKeyException.class,
                () -> one.transport().table().read(RemotePtr.pack(1, 0, 0), 12345L, 8));
        org.junit.jupiter.api.Assertions.assertFalse(refused.mayHaveRun(), "the target checks before any effect");
        assertTrue(new io.membus.core.error.DsmTimeoutException("read", 2, Duration.ofSeconds(1)).mayHaveRun(),
                "a verb whose deadline fired may have run");
        assertTrue(new NodeUnavailableException(2, "connection lost").mayHaveRun());
    }
    @Test
    void aBatchSpanningNodesPostsEachNodesVerbsInOrderAndFailsOnlyTheVerbsThatCannotRun() {
        RemoteMemory one = node(1);
        node(2);
        node(3);
        long onTwo = RemotePtr.pack(2, 0, 64);
        long onThree = RemotePtr.pack(3, 0, 64);
        long onOne = RemotePtr.pack(1, 0, 64);
        RemoteMemory.RemoteBatch batch = one.batch();
        byte[] word = new byte[8];
        Words.putLong(word, 0, 40);
        CompletableFuture<Void> w2 = batch.write(onTwo, word, 0, 8);
        CompletableFuture<Long> f2 = batch.fetchAndAdd(onTwo, 2);          // after the write: same node, in order
        CompletableFuture<byte[]> r2 = batch.read(onTwo, 8);
        CompletableFuture<Long> c3 = batch.compareAndSwap(onThree, 0, 7);
        CompletableFuture<Long> f1 = batch.fetchAndAdd(onOne, 5);          // this node's own word
        CompletableFuture<byte[]> bad = batch.read(RemotePtr.pack(2, 9, 0), 8);  // no such segment
        CompletableFuture<byte[]> gone = batch.read(RemotePtr.pack(7, 0, 0), 8); // no such member
        assertTrue(bad.isCompletedExceptionally() && gone.isCompletedExceptionally(), "refused when added");
        assertEquals(5, batch.size());
        assertFalse(w2.isDone() || f2.isDone() || c3.isDone() || f1.isDone(), "nothing runs before submit");
        batch.submit();
        one.await(w2);
        assertEquals(40, one.await(f2));
        assertEquals(42, Words.getLong(one.await(r2), 0));
        assertEquals(0, one.await(c3));
        assertEquals(0, one.await(f1));
        assertEquals(7, one.readLong(onThree));
        assertEquals(5, one.readLong(onOne));
        assertThrows(UnknownSegmentException.class, () -> one.await(bad));
        assertThrows(NodeUnavailableException.class, () -> one.await(gone));
        assertThrows(IllegalStateException.class, batch::submit, "a batch is submitted once");
        assertEquals(0, batch.size());
    }
    @Test
    void byteBuffersAndNativeAddressesAreReadAndWrittenInPlace() {
        RemoteMemory one = node(1);
        node(2);
        for (long ptr : new long[]{RemotePtr.pack(2, 0, 128), RemotePtr.pack(1, 0, 128)}) { // a peer's, its own
            byte[] data = new byte[100];
            new java.util.Random(ptr).nextBytes(data);
            java.nio.ByteBuffer heap = java.nio.ByteBuffer.wrap(data, 10, 80);
            one.write(ptr, heap);
            assertEquals(90, heap.position(), "the position moves past what was written");
            java.nio.ByteBuffer direct = java.nio.ByteBuffer.allocateDirect(100);
            direct.position(20).limit(100);
            one.read(ptr, direct);
            assertEquals(100, direct.position());
            byte[] back = new byte[80];
            direct.get(20, back);
            assertArrayEquals(java.util.Arrays.copyOfRange(data, 10, 90), back);
            java.nio.ByteBuffer readOnly = java.nio.ByteBuffer.wrap(data).asReadOnlyBuffer();
            one.write(ptr, readOnly); // its array is hidden: copied once
            assertArrayEquals(data, one.read(ptr, 100));
            assertThrows(java.nio.ReadOnlyBufferException.class, () -> one.read(ptr, readOnly.rewind()));
            assertThrows(IllegalArgumentException.class, () -> one.readToAddress(ptr, 0, 8));
        }
    }
}
