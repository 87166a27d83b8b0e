package io.membus;

import com.typesafe.config.ConfigFactory;
import io.membus.coherence.RemoteRef;
import io.membus.collections.DsmAtomicLong;
import io.membus.collections.DsmDoubleArray;
import io.membus.collections.DsmLock;
import io.membus.collections.DsmLongArray;
import io.membus.collections.DsmMap;
import io.membus.collections.DsmMapOptions;
import io.membus.collections.DsmQueue;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.FunctionTimer;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static io.membus.MembusTest.config;
import static io.membus.MembusTest.freePort;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Per-collection operation counts and times (docs/metrics.md): after N operations of
 * each kind through {@link Membus}, the registry shows count N under the structure's
 * kind and name, the timed kinds a timer of N, and the Prometheus scrape the same lines;
 * a destroyed name's meters and a closed facade's are removed. Failed operations are
 * counted again under {@code membus.collection.operation.errors}; a coherent object opened
 * by name ({@code Membus.ref}) is metered as kind {@code ref}.
 */
class CollectionMetersTest {
    private static final int N = 7;

    private static double count(SimpleMeterRegistry r, String kind, String name, String op) {
        return counter(r, "membus.collection.operations", kind, name, op);
    }

    private static double errors(SimpleMeterRegistry r, String kind, String name, String op) {
        return counter(r, "membus.collection.operation.errors", kind, name, op);
    }

    private static double counter(SimpleMeterRegistry r, String meter, String kind, String name, String op) {
        FunctionCounter c = r.find(meter).tags("kind", kind, "name", name, "operation", op).functionCounter();
        if (c == null) {
            throw new AssertionError("no " + meter + " " + kind + " " + name + " " + op + " in "
                    + r.getMeters().stream().map(m -> m.getId().toString()).toList());
        }
        return c.count();
    }

    private static FunctionTimer timer(SimpleMeterRegistry r, String kind, String name, String op) {
        return r.find("membus.collection.operation.time").tags("kind", kind, "name", name, "operation", op)
                .functionTimer();
    }

    @Test
    @Timeout(value = 90, unit = TimeUnit.SECONDS)
    void operationsOfEveryKindAreCountedAndTimedPerStructureAndScraped() throws Exception {
        int seed = freePort();
        String fabric = "collection-meters-" + System.nanoTime();
        try (Membus one = Membus.start(ConfigFactory.parseString(config(1, seed, seed, fabric)
                + "membus.metrics.prometheus { enabled = true, port = 0 }\n"))) {
            one.awaitMembers(1, Duration.ofSeconds(30));
            SimpleMeterRegistry r = new SimpleMeterRegistry();
            one.node().meterRegistry().add(r);

            DsmMap<String, Long> orders = one.map("orders", String.class, Long.class);
            DsmMap<String, Long> prices = one.map("prices", String.class, Long.class,
                    DsmMapOptions.defaults().leasedReads(true));
            // Double keys: not an object-keyed type, the leased cache is keyed by their bytes
            DsmMap<Double, Long> rates = one.map("rates", Double.class, Long.class,
                    DsmMapOptions.defaults().leasedReads(true));
            DsmQueue<String> jobs = one.queue("jobs", String.class, 16);
            DsmLock ledger = one.lock("ledger");
            DsmAtomicLong hits = one.atomicLong("hits");
            DsmLongArray arr = one.longArray("arr", 8);
            DsmDoubleArray w = one.doubleArray("w", 8);
            prices.put("p", 5L);
            rates.put(0.5, 9L);
            for (int i = 0; i < N; i++) {
                orders.put("k" + i, (long) i);
                assertEquals((long) i, one.map("orders", String.class, Long.class).get("k" + i));
                assertEquals(5L, prices.get("p")); // the first fills, the next are leased hits
                assertEquals(9L, rates.get(0.5));
                assertTrue(jobs.offer("j" + i));
                ledger.lock();
                ledger.unlock();
                hits.incrementAndGet();
                hits.get();
                arr.set(i, i);
                arr.get(i);
                w.set(i, i * 0.5);
                w.get(i);
            }
            for (int i = 0; i < N; i++) {
                orders.remove("k" + i);
                assertEquals("j" + i, jobs.poll());
            }
            assertNull(jobs.poll(1, TimeUnit.MILLISECONDS)); // an empty queue: a poll that waited

            List<String> problems = new ArrayList<>();
            Object[][] expected = {
                {"map", "orders", "get", N}, {"map", "orders", "put", N}, {"map", "orders", "remove", N},
                {"map", "prices", "get", N}, {"map", "prices", "put", 1},
                {"map", "rates", "get", N},
                {"queue", "jobs", "offer", N}, {"queue", "jobs", "poll", N + 1}, {"queue", "jobs", "wait", 1},
                {"lock", "ledger", "acquire", N}, {"lock", "ledger", "release", N},
                {"atomicLong", "hits", "add", N}, {"atomicLong", "hits", "get", N},
                {"longArray", "arr", "set", N}, {"longArray", "arr", "get", N},
                {"doubleArray", "w", "set", N}, {"doubleArray", "w", "get", N},
            };
            for (Object[] e : expected) {
                double c = count(r, (String) e[0], (String) e[1], (String) e[2]);
                if (c != ((Integer) e[3]).doubleValue()) {
                    problems.add(e[0] + " " + e[1] + " " + e[2] + ": count " + c + ", expected " + e[3]);
                }
            }
            // the timed kinds: every operation timed, but leased hits (counted only)
            for (Object[] e : new Object[][] {{"map", "orders", "get", N}, {"map", "orders", "put", N},
                    {"map", "orders", "remove", N}, {"queue", "jobs", "offer", N}, {"queue", "jobs", "poll", N + 1},
                    {"queue", "jobs", "wait", 1}, {"lock", "ledger", "acquire", N}}) {
                FunctionTimer t = timer(r, (String) e[0], (String) e[1], (String) e[2]);
                if (t == null || t.count() != ((Integer) e[3]).doubleValue() || t.totalTime(TimeUnit.NANOSECONDS) <= 0) {
                    problems.add(e[0] + " " + e[1] + " " + e[2] + ": timer " + (t == null ? "missing"
                            : "count " + t.count() + ", total " + t.totalTime(TimeUnit.NANOSECONDS) + " ns")
                            + ", expected count " + e[3]);
                }
            }
            FunctionTimer rateGets = timer(r, "map", "rates", "get");
            assertTrue(rateGets != null && rateGets.count() >= 1 && rateGets.count() < N,
                    "a leased map keyed by bytes times its misses only too: " + (rateGets == null ? null
                            : rateGets.count()));
            FunctionTimer leasedGets = timer(r, "map", "prices", "get");
            assertTrue(leasedGets != null && leasedGets.count() >= 1 && leasedGets.count() < N,
                    "a leased map times its misses (fills) only: " + (leasedGets == null ? null : leasedGets.count()));
            assertNull(timer(r, "atomicLong", "hits", "add"), "one-verb operations are counted, not timed");
            if (!problems.isEmpty()) {
                fail("operation meters that do not match the operations made:\n  " + String.join("\n  ", problems));
            }

            // the Prometheus endpoint answers the same counts
            var address = one.node().prometheusAddress();
            HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
            String body = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + address.getPort()
                    + "/metrics")).timeout(Duration.ofSeconds(10)).build(), HttpResponse.BodyHandlers.ofString()).body();
            for (String line : List.of(
                    "membus_collection_operations_total{kind=\"map\",name=\"orders\",operation=\"get\"} " + N + ".0",
                    "membus_collection_operations_total{kind=\"queue\",name=\"jobs\",operation=\"offer\"} " + N + ".0",
                    "membus_collection_operations_total{kind=\"lock\",name=\"ledger\",operation=\"acquire\"} " + N + ".0",
                    "membus_collection_operations_total{kind=\"atomicLong\",name=\"hits\",operation=\"add\"} " + N + ".0",
                    "membus_collection_operations_total{kind=\"longArray\",name=\"arr\",operation=\"set\"} " + N + ".0",
                    "membus_collection_operation_errors_total{kind=\"map\",name=\"orders\",operation=\"get\"} 0.0",
                    "membus_collection_operation_time_seconds_count{kind=\"map\",name=\"orders\",operation=\"put\"} "
                            + N)) {
                assertTrue(body.lines().anyMatch(l -> l.equals(line)), "no line " + line + " in\n" + body);
            }

            // a destroyed name's meters go; a name opened again counts from zero
            assertTrue(one.destroy("orders"));
            assertNull(r.find("membus.collection.operations").tags("name", "orders").functionCounter());
            DsmMap<String, Long> again = null;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (again == null) { // the unbind reaches this node's replica of the name registry
                try {
                    again = one.map("orders", String.class, Long.class);
                } catch (io.membus.collections.StructureGoneException e) {
                    assertTrue(System.nanoTime() < deadline, "the name is still bound 20 s after the destroy: " + e);
                    Thread.sleep(20);
                }
            }
            again.put("x", 1L);
            assertEquals(1.0, count(r, "map", "orders", "put"));

            one.close();
            assertNull(r.find("membus.collection.operations").functionCounter(), "a closed facade's meters go");
        }
    }

    @Test
    @Timeout(value = 90, unit = TimeUnit.SECONDS)
    void failedOperationsAndNamedCoherentObjectsAreMetered() {
        int seed = freePort();
        String fabric = "collection-meters-errors-" + System.nanoTime();
        try (Membus one = Membus.start(ConfigFactory.parseString(config(1, seed, seed, fabric)))) {
            one.awaitMembers(1, Duration.ofSeconds(30));
            SimpleMeterRegistry r = new SimpleMeterRegistry();
            one.node().meterRegistry().add(r);

            // a coherent object by name: every handle Membus.ref gives for the name counts into one set of meters
            RemoteRef<String> cfg = one.ref("cfg", String.class, () -> "v0");
            RemoteRef<String> same = one.ref("cfg", one.codec(String.class));
            RemoteRef<String> uncached = cfg.cached(false);
            for (int i = 0; i < N; i++) {
                cfg.set("v" + (i + 1));
                assertEquals("v" + (i + 1), same.get());
                assertEquals("v" + (i + 1), uncached.get());
            }
            assertTrue(cfg.compareAndSet("v" + N, "w"));
            assertEquals("w!", same.update(v -> v + "!"));
            assertEquals("w!", cfg.getAndSet("x"));
            assertThrows(NullPointerException.class, () -> cfg.update(v -> null), "update returned null");

            DsmMap<String, Long> orders = one.map("orders", String.class, Long.class);
            orders.put("k", 1L);
            assertThrows(IllegalStateException.class, () -> orders.compute("k", (k, v) -> {
                throw new IllegalStateException("the application's function failed");
            }));
            DsmLock ledger = one.lock("ledger");
            assertThrows(IllegalMonitorStateException.class, ledger::unlock, "not held");
            ledger.lock();
            ledger.unlock();
            DsmLongArray arr = one.longArray("arr", 4);
            arr.set(0, 1);
            assertThrows(io.membus.collections.CollectionArgumentException.class, () -> arr.get(4));

            List<String> problems = new ArrayList<>();
            Object[][] expected = { // kind, name, operation, count, errors
                {"ref", "cfg", "set", N, 0}, {"ref", "cfg", "get", 2 * N, 0}, {"ref", "cfg", "compareAndSet", 1, 0},
                {"ref", "cfg", "update", 2, 1}, {"ref", "cfg", "getAndSet", 1, 0},
                {"map", "orders", "put", 1, 0}, {"map", "orders", "change", 1, 1},
                {"lock", "ledger", "acquire", 1, 0}, {"lock", "ledger", "release", 2, 1},
                {"longArray", "arr", "set", 1, 0}, {"longArray", "arr", "get", 1, 1},
            };
            for (Object[] e : expected) {
                double c = count(r, (String) e[0], (String) e[1], (String) e[2]);
                double err = errors(r, (String) e[0], (String) e[1], (String) e[2]);
                if (c != ((Integer) e[3]).doubleValue() || err != ((Integer) e[4]).doubleValue()) {
                    problems.add(e[0] + " " + e[1] + " " + e[2] + ": count " + c + " errors " + err + ", expected "
                            + e[3] + " and " + e[4]);
                }
            }
            // a ref's writes and uncached gets are timed; its cached gets are counted only
            for (Object[] e : new Object[][] {{"set", N}, {"get", N}, {"compareAndSet", 1}, {"update", 2},
                    {"getAndSet", 1}}) {
                FunctionTimer t = timer(r, "ref", "cfg", (String) e[0]);
                if (t == null || t.count() != ((Integer) e[1]).doubleValue() || t.totalTime(TimeUnit.NANOSECONDS) <= 0) {
                    problems.add("ref cfg " + e[0] + ": timer " + (t == null ? "missing"
                            : "count " + t.count() + ", total " + t.totalTime(TimeUnit.NANOSECONDS) + " ns")
                            + ", expected count " + e[1]);
                }
            }
            if (!problems.isEmpty()) {
                fail("operation meters that do not match the operations made:\n  " + String.join("\n  ", problems));
            }

            // the name destroyed: its meters go; handles opened before count into nothing registered
            assertTrue(one.destroy("cfg"));
            assertNull(r.find("membus.collection.operations").tags("name", "cfg").functionCounter());
            assertNull(r.find("membus.collection.operation.errors").tags("name", "cfg").functionCounter());
            assertNull(r.find("membus.collection.operation.time").tags("name", "cfg").functionTimer());

            one.close();
            assertNull(r.find("membus.collection.operation.errors").functionCounter(), "a closed facade's meters go");
        }
    }
}
