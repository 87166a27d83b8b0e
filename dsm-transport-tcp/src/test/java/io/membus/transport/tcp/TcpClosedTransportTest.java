package io.membus.transport.tcp;

import io.membus.core.RemoteMemory;
import io.membus.core.Segment;
import io.membus.core.error.DsmClosedException;
import io.membus.core.transport.Connection;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.Transport;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.time.Duration;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A transport closed on this node refuses its connections' verbs and new connections
 * with {@link DsmClosedException} naming it: not "node unavailable, safe to retry",
 * since the peer is alive and a retry meets the same closed transport.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class TcpClosedTransportTest {
    private static final Duration WAIT = Duration.ofSeconds(20);
    private final Nodes nodes = new Nodes();

    @AfterEach
    void close() {
        nodes.close();
    }

    @Test
    void aLocallyClosedTransportFailsVerbsAndConnectsAsClosedNamingItself() {
        Transport target = nodes.start(1);
        Transport initiator = nodes.start(2);
        Segment seg = target.export(SegmentSpec.of(0, 4096));
        Connection c = RemoteMemory.await(initiator.connect(target.self()), WAIT);
        assertEquals(0L, RemoteMemory.await(c.fetchAndAdd(seg.pointer(0), seg.remoteKey(), 1), WAIT));

        initiator.close();

        assertTrue(initiator.isClosed());
        DsmClosedException verb = assertThrows(DsmClosedException.class,
                () -> RemoteMemory.await(c.fetchAndAdd(seg.pointer(0), seg.remoteKey(), 1), WAIT));
        assertEquals("transport tcp of node 2", verb.what());
        assertFalse(verb.mayHaveRun());
        DsmClosedException connect = assertThrows(DsmClosedException.class,
                () -> RemoteMemory.await(initiator.connect(target.self()), WAIT));
        assertEquals("transport tcp of node 2", connect.what());
        DsmClosedException export = assertThrows(DsmClosedException.class,
                () -> initiator.export(SegmentSpec.of(1, 4096)));
        assertEquals("transport tcp of node 2", export.what());
        assertEquals(1, seg.readLong(0), "the refused verb never reached the target");
    }
}
