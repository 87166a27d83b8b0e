package io.membus.core.replication;

import io.membus.core.RemoteMemory;
import io.membus.core.Words;
import io.membus.core.directory.StaticDirectory;
import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.Transports;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.time.Duration;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The copy side against hand-made stream messages from a peer (node 1, playing a
 * primary) to a node that runs a {@link Replicator} (node 2): records are applied once
 * by record number, out-of-order messages are answered with a gap, effects of a lower
 * epoch are refused STALE, and a sequence gap is refused.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class CopySideTest {
    private static final int GROUP = GroupId.of(1, 0);
    private static final long EPOCH = Ballot.initial(1);
    private static final long STREAM = 77;
    private final StaticDirectory directory = new StaticDirectory();
    private Transport primary;
    private Transport copyNode;
    private RemoteMemory primaryMemory;
    private Replicator replicator;

    @BeforeEach
    void start() {
        String fabric = "CopySideTest-" + System.nanoTime();
        primary = Transports.create("local", TransportConfig.builder(1).property("local.fabric", fabric).build());
        copyNode = Transports.create("local", TransportConfig.builder(2).property("local.fabric", fabric).build());
        directory.addMember(primary.self());
        directory.addMember(copyNode.self());
        primaryMemory = new RemoteMemory(primary, directory, Duration.ofSeconds(10));
        replicator = new Replicator(copyNode, new RemoteMemory(copyNode, directory, Duration.ofSeconds(10)), directory,
                directory, ReplicationConfig.DEFAULT);
        replicator.start();
    }

    @AfterEach
    void stop() {
        replicator.close();
        copyNode.close();
        primary.close();
    }

    private byte[] send(long first, byte[]... records) {
        int size = ReplicationCodec.STREAM_HEADER;
        for (byte[] r : records) {
            size += r.length;
        }
        ReplicationCodec.Writer w = new ReplicationCodec.Writer(size);
        w.u8(ReplicationCodec.STREAM).i64(STREAM).i64(first).i32(records.length);
        for (byte[] r : records) {
            w.bytes(r, 0, r.length);
        }
        return RemoteMemory.await(primaryMemory.onNode(2, c -> c.request(Replicator.CHANNEL, w.array())),
                Duration.ofSeconds(15));
    }

    private static byte[] word(long v) {
        byte[] b = new byte[8];
        Words.putLong(b, 0, v);
        return b;
    }

    private static byte[] effect(long epoch, long seq, long offset, long value) {
        return ReplicationCodec.effect(GROUP, epoch, seq, offset, word(value), 0, 8, true);
    }

    /** (applied record, gap, status of the first group, its applied sequence). */
    private static long[] ack(byte[] reply) {
        ReplicationCodec.Reader r = new ReplicationCodec.Reader(reply, 9, "test");
        long applied = r.i64();
        long gap = r.u8();
        int n = r.i32();
        if (n == 0) {
            return new long[]{applied, gap, -1, -1};
        }
        r.i32();
        long status = r.u8();
        r.i64();
        long seq = r.i64();
        return new long[]{applied, gap, status, seq};
    }

    private long copied(long offset) {
        return replicator.copy(GROUP).memory().readLong(offset);
    }

    @Test
    void recordsAreAppliedOnceByNumberAndOutOfOrderMessagesAreAGap() {
        byte[] join = ReplicationCodec.join(GROUP, EPOCH, 0, 4096, io.membus.core.Access.ALL, 1234);
        byte[] done = ReplicationCodec.done(GROUP, EPOCH, 0);
        long[] a = ack(send(1, join, done, effect(EPOCH, 1, 0, 11)));
        assertEquals(3, a[0], "three records processed");
        assertEquals(ReplicationCodec.OK, a[2]);
        assertEquals(1, a[3], "sequence 1 applied");
        assertEquals(11, copied(0));
        // the same records again (a resend after a lost answer), with other bytes: skipped by number
        a = ack(send(2, done, effect(EPOCH, 1, 0, 99)));
        assertEquals(3, a[0]);
        assertEquals(11, copied(0), "a record is applied once");
        // a message that starts past the copy's next record: a gap, nothing processed
        a = ack(send(5, effect(EPOCH, 3, 0, 33)));
        assertEquals(1, a[1], "gap");
        assertEquals(3, a[0]);
        assertEquals(11, copied(0));
        // a sequence gap within the stream is refused
        a = ack(send(4, effect(EPOCH, 3, 0, 33)));
        assertEquals(ReplicationCodec.GAP, a[2]);
        assertEquals(11, copied(0));
        // a lower epoch after a fence is refused STALE
        long next = Ballot.next(EPOCH, 2);
        assertEquals(ReplicationCodec.OK, replicator.copy(GROUP).fence(next, 2));
        a = ack(send(5, effect(EPOCH, 2, 0, 22)));
        assertEquals(ReplicationCodec.STALE, a[2]);
        assertEquals(11, copied(0), "a cut-off primary's effect never reaches memory");
    }
}
