package io.membus.core;

import io.membus.core.error.NotPrimaryException;
import io.membus.core.replication.GroupId;
import io.membus.core.transport.Batch;
import io.membus.core.transport.Connection;
import io.membus.core.directory.PeerInfo;
import io.membus.core.transport.Transport;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * An initiator's transport for routing tests, standing in for targets that serve other
 * nodes' replica groups before the replication engine does: every call goes to a real
 * transport, but its connections (1) record which node each verb was sent to, (2) run a
 * verb on a logical pointer of a group the test made a node serve ({@link #serve}) on that
 * node's own segment 0 at the same offset, with that segment's key (what a primary holding
 * a copy does with its own memory), and (3) answer {@link NotPrimaryException} for a group
 * the test made a node refuse ({@link #refuse}), without running the verb.
 *
 * <p>Its connections carry no blocking lane ({@code blockingNow()} is null): every verb is
 * posted, so each one is seen here.
 *
 * <p><b>Note:</b> thread-safe (concurrent maps and lists).
 */
final class ServingTransport {
    /** One verb as a connection saw it: the node it was sent to, the pointer it named. */
    record Sent(int node, long ptr) {
    }

    private final Transport delegate;
    private final Transport proxy;
    private final Map<Integer, Transport> targets;
    private final Map<Long, Boolean> served = new ConcurrentHashMap<>();
    private final Map<Long, Integer> refusals = new ConcurrentHashMap<>();
    final List<Sent> sent = new CopyOnWriteArrayList<>();

    /**
     * @param delegate the initiator's real transport
     * @param targets  every node's real transport by id (for the serving node's own segment key)
     */
    ServingTransport(Transport delegate, Map<Integer, Transport> targets) {
        this.delegate = delegate;
        this.targets = targets;
        this.proxy = (Transport) Proxy.newProxyInstance(getClass().getClassLoader(), new Class<?>[]{Transport.class},
                (p, method, args) -> {
                    if (method.getName().equals("connect")) {
                        return delegate.connect((PeerInfo) args[0]).thenApply(Wrapped::new);
                    }
                    try {
                        return method.invoke(delegate, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
    }

    Transport transport() {
        return proxy;
    }

    private static long slot(int node, int group) {
        return (long) node << 32 | (group & 0xffffffffL);
    }

    /** From now on {@code node} serves group {@code group} on its own segment 0. */
    void serve(int node, int group) {
        served.put(slot(node, group), true);
    }

    /** From now on {@code node} refuses verbs of {@code group} with {@link NotPrimaryException} naming {@code hint}. */
    void refuse(int node, int group, int hint) {
        refusals.put(slot(node, group), hint);
    }

    /** {@code node} serves (or forwards) {@code group}'s verbs again instead of refusing them. */
    void stopRefusing(int node, int group) {
        refusals.remove(slot(node, group));
    }

    /** The nodes the verbs on {@code ptr}'s group were sent to, in order. */
    List<Integer> nodesFor(long ptr) {
        int group = GroupId.ofPointer(ptr);
        return sent.stream().filter(s -> GroupId.ofPointer(s.ptr()) == group).map(Sent::node).toList();
    }

    private final class Wrapped implements Connection {
        private final Connection c;

        Wrapped(Connection c) {
            this.c = c;
        }

        private int node() {
            return c.peer().nodeId();
        }

        /** The refusal for a verb on {@code ptr}, or null. */
        private NotPrimaryException refusal(long ptr) {
            int group = GroupId.ofPointer(ptr);
            Integer hint = refusals.get(slot(node(), group));
            return hint == null ? null : new NotPrimaryException(node(), group, hint, 2L << 16 | node());
        }

        private boolean translated(long ptr) {
            return RemotePtr.nodeId(ptr) != node() && served.containsKey(slot(node(), GroupId.ofPointer(ptr)));
        }

        private long ptr(long ptr) {
            return translated(ptr) ? RemotePtr.pack(node(), 0, RemotePtr.offset(ptr)) : ptr;
        }

        private long key(long ptr, long remoteKey) {
            return translated(ptr) ? targets.get(node()).table().get(0).descriptor().remoteKey() : remoteKey;
        }

        @Override
        public CompletableFuture<byte[]> read(long ptr, long remoteKey, int length) {
            sent.add(new Sent(node(), ptr));
            NotPrimaryException no = refusal(ptr);
            return no != null ? CompletableFuture.failedFuture(no) : c.read(ptr(ptr), key(ptr, remoteKey), length);
        }

        @Override
        public CompletableFuture<Void> write(long ptr, long remoteKey, byte[] src, int offset, int length) {
            sent.add(new Sent(node(), ptr));
            NotPrimaryException no = refusal(ptr);
            return no != null ? CompletableFuture.failedFuture(no)
                    : c.write(ptr(ptr), key(ptr, remoteKey), src, offset, length);
        }

        @Override
        public CompletableFuture<Long> compareAndSwap(long ptr, long remoteKey, long expected, long update) {
            sent.add(new Sent(node(), ptr));
            NotPrimaryException no = refusal(ptr);
            return no != null ? CompletableFuture.failedFuture(no)
                    : c.compareAndSwap(ptr(ptr), key(ptr, remoteKey), expected, update);
        }

        @Override
        public CompletableFuture<Long> fetchAndAdd(long ptr, long remoteKey, long delta) {
            sent.add(new Sent(node(), ptr));
            NotPrimaryException no = refusal(ptr);
            return no != null ? CompletableFuture.failedFuture(no)
                    : c.fetchAndAdd(ptr(ptr), key(ptr, remoteKey), delta);
        }

        @Override
        public PeerInfo peer() {
            return c.peer();
        }

        @Override
        public Batch batch() {
            Wrapped self = this;
            return new Batch() { // each verb as the connection runs it (the test's batches are small)
                private int size;

                @Override
                public CompletableFuture<byte[]> read(long ptr, long remoteKey, int length) {
                    size++;
                    return self.read(ptr, remoteKey, length);
                }

                @Override
                public CompletableFuture<Void> write(long ptr, long remoteKey, byte[] src, int offset, int length) {
                    size++;
                    return self.write(ptr, remoteKey, src, offset, length);
                }

                @Override
                public CompletableFuture<Long> compareAndSwap(long ptr, long remoteKey, long expected, long update) {
                    size++;
                    return self.compareAndSwap(ptr, remoteKey, expected, update);
                }

                @Override
                public CompletableFuture<Long> fetchAndAdd(long ptr, long remoteKey, long delta) {
                    size++;
                    return self.fetchAndAdd(ptr, remoteKey, delta);
                }

                @Override
                public void submit() {
                }

                @Override
                public int size() {
                    return size;
                }
            };
        }

        @Override
        public boolean isOpen() {
            return c.isOpen();
        }

        @Override
        public void close() {
            c.close();
        }

        @Override
        public void close(String reason) {
            c.close(reason);
        }
    }
}
