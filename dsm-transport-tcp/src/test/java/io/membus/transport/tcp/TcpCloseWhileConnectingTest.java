package io.membus.transport.tcp;

import io.membus.core.OpenResources;
import io.membus.core.error.DsmClosedException;
import io.membus.core.transport.Connection;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A connection the transport opens while it closes (a {@code connect} that passed the
 * closed check just before {@code close()} set it) is closed too, and its future
 * completes: before, its dial went to I/O threads already shut down, whose listeners
 * Netty drops, so the future never completed and the connection stayed open for good
 * (the leak check saw "TcpConnection of node 3 to node 4" after a replication test).
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class TcpCloseWhileConnectingTest {
    private final Nodes nodes = new Nodes();

    @AfterEach
    void close() {
        nodes.close();
    }

    @Test
    void aConnectionOpenedAfterItsTransportClosedIsClosedAndItsFutureFailsAsClosed() {
        TcpTransport target = (TcpTransport) nodes.start(1);
        TcpTransport initiator = (TcpTransport) nodes.start(2);
        Map<Long, String> before = OpenResources.CONNECTIONS.snapshot();
        initiator.close();

        // the step of a connect that raced close(): past its closed check, it opens
        CompletableFuture<Connection> opened = initiator.open(target.self());

        ExecutionException e = assertThrows(ExecutionException.class, () -> opened.get(10, TimeUnit.SECONDS),
                "the open of a closed transport fails instead of waiting for I/O threads that are gone");
        DsmClosedException closed = assertInstanceOf(DsmClosedException.class, e.getCause());
        assertTrue(closed.getMessage().contains("node 2"), closed.getMessage());
        assertTrue(OpenResources.CONNECTIONS.snapshot().keySet().stream().allMatch(before::containsKey),
                "nothing left open: " + OpenResources.CONNECTIONS.snapshot());
    }
}
