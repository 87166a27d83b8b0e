package io.membus.transport.tcp;

import java.net.InetAddress;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The handshake slots of a node, shared by its two ports (the Netty port and the lane
 * server): an accepted connection holds one from accept until it has authenticated or is
 * closed. At most {@code total} are held at once ({@code tcp.max-handshaking}), and at most
 * {@code perSource} by the connections of one source address
 * ({@code tcp.max-handshaking-per-source}).
 *
 * <p>A connection that finds no slot for it waits in its source's queue (it is accepted,
 * but not read and not timed) for at most {@code maxWaitNanos} (the handshake timeout);
 * whenever a slot frees, the sources that wait are served in turn, one connection each,
 * oldest first. So a source that floods the node holds at most its share and waits behind
 * every other source: another source's connection gets a slot at once while fewer than
 * {@code total / perSource} sources flood, and otherwise within one handshake timeout
 * (every slot is held at most that long), unless more than {@code total} sources wait at
 * once. A connection is refused (closed) only when its own source already waits with
 * {@code total} connections, or every source together with {@code 4 × total}; a source
 * with nothing held and nothing waiting may always wait. Before, one counter for both
 * ports with no share let one process holding 300 half-open lane connections shut every
 * new peer out (issue 26).
 *
 * <p>Sources are IP addresses: hosts behind one NAT share a share, and an attacker with
 * many addresses gets a share per address (the queue still bounds what it holds).
 *
 * <p><b>Note:</b> thread-safe: every method takes the object's lock; callbacks of a waiting
 * connection ({@link Waiter}) run outside it, on the thread that freed the slot.
 */
final class HandshakeSlots {
    /** What becomes of a connection that had to wait. */
    interface Waiter {
        /** It holds a slot now: start its handshake (it must {@link #release} the slot once). */
        void admitted();

        /** It waited longer than the handshake timeout (or the node closed): close it. It holds no slot. */
        void expired();
    }

    enum Offer {
        /** A slot is held for it now. */
        ADMITTED,
        /** It waits; its {@link Waiter} is told. */
        WAITING,
        /** Its source has too many connections waiting: close it. */
        REFUSED
    }

    private static final class Source {
        final InetAddress address;
        int held;
        final ArrayDeque<Entry> waiting = new ArrayDeque<>();
        boolean inRotation;

        Source(InetAddress address) {
            this.address = address;
        }
    }

    private record Entry(Waiter waiter, long deadline) {
    }

    private final int total;
    private final int perSource;
    private final long maxWaitNanos;
    private final Map<InetAddress, Source> sources = new HashMap<>();
    /** Sources with connections waiting, in the order they are served. */
    private final ArrayDeque<Source> rotation = new ArrayDeque<>();
    private int held;
    private int waiting;
    private boolean closed;

    HandshakeSlots(int total, int perSource, long maxWaitNanos) {
        this.total = total;
        this.perSource = Math.min(perSource, total);
        this.maxWaitNanos = maxWaitNanos;
    }

    /** Asks a slot for a connection from {@code source}. */
    Offer offer(InetAddress source, Waiter waiter) {
        List<Entry> expired = new ArrayList<>();
        Offer result;
        synchronized (this) {
            if (closed) {
                return Offer.REFUSED;
            }
            long now = System.nanoTime();
            dropExpired(now, expired);
            Source s = sources.computeIfAbsent(source, Source::new);
            if (s.waiting.isEmpty() && s.held < perSource && held < total) {
                s.held++;
                held++;
                result = Offer.ADMITTED;
            } else if (s.waiting.size() >= total
                    || (waiting >= 4 * total && (s.held > 0 || !s.waiting.isEmpty()))) {
                forgetIfIdle(s);
                result = Offer.REFUSED;
            } else {
                s.waiting.add(new Entry(waiter, now + maxWaitNanos));
                waiting++;
                if (!s.inRotation) {
                    s.inRotation = true;
                    rotation.add(s);
                }
                result = Offer.WAITING;
            }
        }
        expired.forEach(e -> e.waiter().expired());
        return result;
    }

    /** Gives back the slot of a connection from {@code source} (authenticated or closed); serves who waits. */
    void release(InetAddress source) {
        List<Entry> admitted = new ArrayList<>();
        List<Entry> expired = new ArrayList<>();
        synchronized (this) {
            Source s = sources.get(source);
            if (s == null || s.held == 0) {
                throw new IllegalStateException("no handshake slot held by " + source);
            }
            s.held--;
            held--;
            forgetIfIdle(s);
            long now = System.nanoTime();
            dropExpired(now, expired);
            // one connection per waiting source in turn, while slots are free and some source may take one
            int passed = 0;
            while (held < total && !rotation.isEmpty() && passed < rotation.size()) {
                Source next = rotation.poll();
                if (next.held >= perSource) {
                    rotation.add(next); // at its share: it waits for one of its own slots
                    passed++;
                    continue;
                }
                passed = 0;
                Entry e = next.waiting.poll();
                waiting--;
                next.held++;
                held++;
                admitted.add(e);
                if (next.waiting.isEmpty()) {
                    next.inRotation = false;
                } else {
                    rotation.add(next);
                }
            }
        }
        expired.forEach(e -> e.waiter().expired());
        admitted.forEach(e -> e.waiter().admitted());
    }

    /** Refuses everything from now on and tells every waiting connection. */
    void close() {
        List<Entry> expired = new ArrayList<>();
        synchronized (this) {
            closed = true;
            for (Source s : rotation) {
                expired.addAll(s.waiting);
                s.waiting.clear();
                s.inRotation = false;
            }
            rotation.clear();
            waiting = 0;
        }
        expired.forEach(e -> e.waiter().expired());
    }

    /** Waiting entries past their deadline leave their queues (under the lock). */
    private void dropExpired(long now, List<Entry> out) {
        if (waiting == 0) {
            return;
        }
        for (java.util.Iterator<Source> it = rotation.iterator(); it.hasNext(); ) {
            Source s = it.next();
            while (!s.waiting.isEmpty() && s.waiting.peek().deadline() - now <= 0) {
                out.add(s.waiting.poll());
                waiting--;
            }
            if (s.waiting.isEmpty()) {
                s.inRotation = false;
                it.remove();
                forgetIfIdle(s);
            }
        }
    }

    private void forgetIfIdle(Source s) {
        if (s.held == 0 && s.waiting.isEmpty() && !s.inRotation) {
            sources.remove(s.address);
        }
    }

    /** Slots held now (for tests and status). */
    synchronized int held() {
        return held;
    }

    /** Slots held by {@code source} now. */
    synchronized int held(InetAddress source) {
        Source s = sources.get(source);
        return s == null ? 0 : s.held;
    }

    /** Connections waiting for a slot now. */
    synchronized int waiting() {
        return waiting;
    }

    /** Connections of {@code source} waiting now. */
    synchronized int waiting(InetAddress source) {
        Source s = sources.get(source);
        return s == null ? 0 : s.waiting.size();
    }
}
