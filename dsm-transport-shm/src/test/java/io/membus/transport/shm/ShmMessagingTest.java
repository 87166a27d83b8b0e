package io.membus.transport.shm;

import io.membus.core.RemoteMemory;
import io.membus.core.transport.Connection;
import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.Transports;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.ringbuffer.ManyToOneRingBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** What the shm message ring promises beyond the contract suite: its files, and a writer that died mid-record. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ShmMessagingTest {
    private Path dir;
    private final List<Transport> nodes = new ArrayList<>();

    @BeforeEach
    void dir() throws IOException {
        Path root = Files.isDirectory(Path.of("/dev/shm")) ? Path.of("/dev/shm") : Path.of(System.getProperty("java.io.tmpdir"));
        dir = Files.createDirectories(root.resolve("membus-test-ShmMessagingTest-" + ProcessHandle.current().pid()
                + "-" + System.nanoTime()));
    }

    @AfterEach
    void cleanUp() throws IOException {
        nodes.forEach(Transport::close);
        try (Stream<Path> walk = Files.walk(dir)) {
            walk.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        }
    }

    private Transport node(int id) {
        Transport t = Transports.create("shm", TransportConfig.builder(id).operationTimeout(Duration.ofSeconds(20))
                .property("shm.dir", dir.toString()).build());
        nodes.add(t);
        return t;
    }

    @Test
    void theRegistryNamesTheRingAndClosingRemovesIt() {
        Transport a = node(1);
        ShmRegistry reg = ShmRegistry.read(dir, 1);
        assertEquals("node-1.inbox", reg.inbox());
        assertEquals(64, reg.inboxCredits());
        assertEquals(65536, reg.inboxMaxSize());
        assertTrue(Files.exists(dir.resolve("node-1.inbox")));
        a.close();
        assertTrue(Files.notExists(dir.resolve("node-1.inbox")), "the ring file is removed on close");
    }

    @Test
    void aRecordClaimedByAWriterThatNeverCommitsIsSkippedAndLaterMessagesArrive() throws Exception {
        Transport a = node(1);
        Transport b = node(2);
        b.messages().register((short) 1, "echo", (from, payload) -> payload);
        Connection ab = RemoteMemory.await(a.connect(b.self()), Duration.ofSeconds(20));
        assertArrayEquals(new byte[]{1}, RemoteMemory.await(ab.request((short) 1, new byte[]{1}), Duration.ofSeconds(20)));

        // a "process" that claims a record in b's ring and dies before its commit
        Path ring = dir.resolve("node-2.inbox");
        MappedByteBuffer mapped;
        try (RandomAccessFile raf = new RandomAccessFile(ring.toFile(), "rw")) {
            mapped = raf.getChannel().map(FileChannel.MapMode.READ_WRITE, 0, raf.length());
        }
        ManyToOneRingBuffer dead = new ManyToOneRingBuffer(new UnsafeBuffer(mapped));
        assertTrue(dead.tryClaim(ShmRing.TYPE_RECORD, 64) > 0);
        long claimedUpTo = dead.producerPosition();
        assertTrue(dead.consumerPosition() < claimedUpTo, "the claimed record blocks the ring");

        // the message behind the dead record still arrives: the receiver unblocks the ring after a second
        assertArrayEquals(new byte[]{2}, RemoteMemory.await(ab.request((short) 1, new byte[]{2}), Duration.ofSeconds(20)));
        assertTrue(dead.consumerPosition() >= claimedUpTo, "the receiver got past the record that was never committed");
        assertArrayEquals(new byte[]{3}, RemoteMemory.await(ab.request((short) 1, new byte[]{3}), Duration.ofSeconds(20)));
        org.agrona.IoUtil.unmap(mapped);
    }
}
