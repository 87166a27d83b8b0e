package io.membus.core.test;

import io.membus.core.Access;
import io.membus.core.Segment;
import io.membus.core.directory.PeerInfo;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.Transports;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtensionContext;

import java.lang.reflect.Proxy;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The leak check names what a class leaves behind and passes once it is closed. */
class LeakCheckTest {
    private final LeakCheck check = new LeakCheck();
    private String savedGrace;

    @BeforeEach
    void shortGrace() {
        savedGrace = System.setProperty("membus.leakCheck.graceMillis", "300");
    }

    @AfterEach
    void restoreGrace() {
        if (savedGrace == null) {
            System.clearProperty("membus.leakCheck.graceMillis");
        } else {
            System.setProperty("membus.leakCheck.graceMillis", savedGrace);
        }
    }

    /** A class context with a working store, as JUnit hands the extension. */
    private static ExtensionContext context(String name) {
        Map<Object, Object> values = new HashMap<>();
        ExtensionContext.Store store = (ExtensionContext.Store) Proxy.newProxyInstance(
                LeakCheckTest.class.getClassLoader(), new Class<?>[]{ExtensionContext.Store.class},
                (proxy, method, args) -> switch (method.getName()) {
                    case "put" -> values.put(args[0], args[1]);
                    case "remove" -> values.remove(args[0]);
                    case "get" -> values.get(args[0]);
                    default -> throw new UnsupportedOperationException(method.getName());
                });
        return (ExtensionContext) Proxy.newProxyInstance(LeakCheckTest.class.getClassLoader(),
                new Class<?>[]{ExtensionContext.class}, (proxy, method, args) -> switch (method.getName()) {
                    case "getStore" -> store;
                    case "getDisplayName" -> name;
                    case "getTestClass" -> java.util.Optional.of(LeakCheckTest.class);
                    default -> throw new UnsupportedOperationException(method.getName());
                });
    }

    @Test
    void anOpenSegmentIsNamedAndAClosedOneIsNot() throws Exception {
        ExtensionContext c = context("SegmentLeaker");
        check.beforeAll(c);
        Segment s = Segment.allocate(7, 1, 3, 4096, Access.ALL);
        AssertionError e;
        try {
            e = assertThrows(AssertionError.class, () -> check.afterAll(c));
        } finally {
            s.close();
        }
        assertTrue(e.getMessage().contains("SegmentLeaker") && e.getMessage().contains("1 open segment(s)")
                && e.getMessage().contains(s.toString()) && e.getMessage().contains("-Dtest=LeakCheckTest "),
                e.getMessage());

        ExtensionContext clean = context("SegmentCloser");
        check.beforeAll(clean);
        Segment.allocate(7, 1, 4, 4096, Access.ALL).close();
        assertDoesNotThrow(() -> check.afterAll(clean));
    }

    @Test
    void aRunningMembusThreadIsNamedWithItsStack() throws Exception {
        ExtensionContext c = context("ThreadLeaker");
        check.beforeAll(c);
        CountDownLatch stop = new CountDownLatch(1);
        Thread t = new Thread(() -> {
            try {
                stop.await();
            } catch (InterruptedException ignored) {
                Thread.currentThread().interrupt();
            }
        }, "membus-leak-check-probe");
        t.start();
        AssertionError e;
        try {
            e = assertThrows(AssertionError.class, () -> check.afterAll(c));
        } finally {
            stop.countDown();
            t.join(TimeUnit.SECONDS.toMillis(5));
        }
        assertTrue(e.getMessage().contains("\"membus-leak-check-probe\" (WAITING)")
                && e.getMessage().contains("LeakCheckTest.lambda$aRunningMembusThreadIsNamedWithItsStack"), e.getMessage());

        ExtensionContext ended = context("ThreadEnder");
        check.beforeAll(ended);
        Thread quick = new Thread(() -> { }, "membus-leak-check-quick");
        quick.start();
        assertDoesNotThrow(() -> check.afterAll(ended), "a thread that ends within the grace period is no leak");
    }

    @Test
    void anOpenConnectionIsNamedByItsPeer() throws Exception {
        String fabric = "leak-" + System.nanoTime();
        try (Transport one = Transports.create("local", TransportConfig.builder(1).property("local.fabric", fabric).build());
             Transport two = Transports.create("local", TransportConfig.builder(2).property("local.fabric", fabric).build())) {
            two.export(SegmentSpec.of(0, 4096));
            ExtensionContext c = context("ConnectionLeaker");
            check.beforeAll(c);
            PeerInfo peer = two.self();
            one.connect(peer).get(5, TimeUnit.SECONDS);
            AssertionError e = assertThrows(AssertionError.class, () -> check.afterAll(c));
            assertTrue(e.getMessage().contains("1 open connection(s)") && e.getMessage().contains(peer.toString()),
                    e.getMessage());
        }
        // closing the transport closed its connection and segment: nothing of theirs is left for this class
    }
}
