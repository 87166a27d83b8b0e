package io.membus.core;

import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * What of one kind (segments, transport connections) is open in this JVM now, each with
 * a line saying what it is. The tests' leak check (dsm-core's test jar,
 * {@code io.membus.core.test.LeakCheck}) reads it after every test class; it is not
 * application API.
 *
 * <p>Cost: one map insertion when a segment or connection opens and one removal when
 * it closes; nothing on the verb paths.
 *
 * <p><b>Note:</b> thread-safe. Ids grow with every opening (an {@link AtomicLong}), so a
 * reader can tell what opened after a moment it noted with {@link #lastId()}.
 */
public final class OpenResources {
    /** Every {@link Segment} not closed yet. */
    public static final OpenResources SEGMENTS = new OpenResources();
    /** Every transport connection (local, shm, tcp, rdma) not closed yet. */
    public static final OpenResources CONNECTIONS = new OpenResources();

    private final AtomicLong ids = new AtomicLong();
    private final ConcurrentHashMap<Long, String> open = new ConcurrentHashMap<>();

    private OpenResources() {
    }

    /** Records an opening; {@code description} names it in a leak report. @return its id, for {@link #closed} */
    public long opened(String description) {
        long id = ids.incrementAndGet();
        open.put(id, description);
        return id;
    }

    /** Records the close of what {@link #opened} returned {@code id} for; a second call does nothing. */
    public void closed(long id) {
        open.remove(id);
    }

    /** The id the last opening got (0 before any). */
    public long lastId() {
        return ids.get();
    }

    /** What is open now, by id (opening order), with its description. */
    public Map<Long, String> snapshot() {
        return new TreeMap<>(open);
    }
}
