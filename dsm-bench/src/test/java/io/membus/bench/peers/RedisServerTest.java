package io.membus.bench.peers;

import io.membus.core.error.DsmConfigException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import redis.clients.jedis.Jedis;

import java.net.InetSocketAddress;
import java.net.Socket;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link RedisServer}: without {@code redis-server} the benchmark is skipped with a message that
 * names the package to install; with it, a server of its own starts on loopback, serves, and is
 * gone after close.
 */
class RedisServerTest {
    @AfterEach
    void clearProperty() {
        System.clearProperty(RedisServer.EXECUTABLE_PROPERTY);
    }

    @Test
    void absentServerNamesTheDebianPackage() {
        System.setProperty(RedisServer.EXECUTABLE_PROPERTY, "/nonexistent/redis-server");
        assertTrue(RedisServer.executable().isEmpty());
        DsmConfigException e = assertThrows(DsmConfigException.class, RedisServer::start);
        assertTrue(e.getMessage().contains("apt-get install redis-server"), e.getMessage());
        assertTrue(e.getMessage().contains("/nonexistent/redis-server"), e.getMessage());
    }

    @Test
    void startsServesAndStops() throws Exception {
        Assumptions.assumeTrue(RedisServer.executable().isPresent(),
                "redis-server is not installed (apt-get install redis-server): nothing to start");
        RedisServer server = RedisServer.start();
        try (Jedis j = server.connect()) {
            byte[] key = {1, 2, 3, 4, 5, 6, 7, 8};
            byte[] value = PeersBenchmark.value(42, (byte) 2);
            assertEquals("OK", j.set(key, value));
            assertArrayEquals(value, j.get(key));
            assertEquals(1, j.incr("c"));
            assertFalse(server.version.isEmpty());
        } finally {
            server.close();
        }
        assertFalse(server.isAlive());
        assertThrows(java.io.IOException.class, () -> {
            try (Socket s = new Socket()) {
                s.connect(new InetSocketAddress(server.host, server.port), 2_000);
            }
        }, "nothing listens on the server's port once it is closed");
    }
}
