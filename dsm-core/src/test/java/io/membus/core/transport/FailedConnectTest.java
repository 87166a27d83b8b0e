package io.membus.core.transport;

import io.membus.core.capability.TransportCapabilities;
import io.membus.core.directory.PeerInfo;

import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeoutException;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;

/**
 * A connection future that completed exceptionally while still held by the
 * transport (a failed attempt another thread is about to drop, or a future a caller
 * completed or cancelled, as {@code orTimeout} does) never makes {@link
 * AbstractTransport#connect} throw: the next call starts a new attempt.
 * Found by many threads connecting to a killed node over tcp: one of them got a
 * {@code CompletionException} thrown from {@code connect} instead of a failed future.
 */
class FailedConnectTest {

    /** A transport whose connection attempts stay open until the test completes them. */
    static final class PendingTransport extends AbstractTransport {
        final List<CompletableFuture<Connection>> attempts = new CopyOnWriteArrayList<>();

        PendingTransport() {
            super(TransportConfig.builder(1).build());
        }

        @Override
        protected CompletableFuture<Connection> open(PeerInfo peer) {
            CompletableFuture<Connection> f = new CompletableFuture<>();
            attempts.add(f);
            return f;
        }

        @Override
        public String name() {
            return "pending";
        }

        @Override
        public TransportCapabilities capabilities() {
            return TransportCapabilities.NONE;
        }

        @Override
        public String localAddress() {
            return "nowhere";
        }
    }

    @Test
    void aConnectFutureFailedByItsCallerIsReplacedNotThrown() {
        try (PendingTransport t = new PendingTransport()) {
            PeerInfo peer = new PeerInfo(2, 5, "nowhere-2");
            CompletableFuture<Connection> first = t.connect(peer);
            assertSame(first, t.connect(peer), "an attempt in flight is shared");
            first.completeExceptionally(new TimeoutException("the caller gave up")); // what orTimeout does
            CompletableFuture<Connection> second = t.connect(peer);
            assertNotSame(first, second);
            assertFalse(second.isDone());
            assertEquals(2, t.attempts.size(), "a new attempt was opened");

            second.cancel(false);
            CompletableFuture<Connection> third = t.connect(peer);
            assertFalse(third.isDone());
            assertEquals(3, t.attempts.size());
        }
    }
}
