package io.membus.cluster;

import io.membus.cluster.ClusterMessage.Bind;
import io.membus.cluster.ClusterMessage.NameReply;
import io.membus.cluster.ClusterMessage.Unbind;
import io.membus.cluster.names.NameTable;
import io.membus.core.RemoteMemory;
import io.membus.core.RemotePtr;
import io.membus.core.directory.NameRegistry;
import io.membus.core.error.AuthenticationException;
import io.membus.core.error.DsmClosedException;
import io.membus.core.error.DsmException;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.ErrorCode;
import io.membus.core.error.InvalidPointerException;
import io.membus.core.error.NodeUnavailableException;
import org.apache.pekko.actor.ActorRef;
import org.apache.pekko.actor.ActorSystem;
import org.apache.pekko.cluster.Cluster;
import org.apache.pekko.cluster.Member;
import org.apache.pekko.cluster.ddata.LWWMap;
import org.apache.pekko.cluster.ddata.Replicator;
import org.apache.pekko.pattern.Patterns;

import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The replicated {@link NameRegistry}: bindings live in a Distributed Data
 * {@code LWWMap} ({@code membus-names}). Writes go through one arbiter, the cluster
 * agent of the oldest member, which reads the bindings from a majority, applies
 * "bind unless bound" on its own replica (the replicator applies updates one at a
 * time, so the first binder wins), writes to a majority and answers with what is
 * bound. When the oldest member is downed, the next oldest takes over and starts
 * with a majority read, so no acknowledged binding is lost. An agent that is not the
 * oldest Up member in its own view refuses to arbitrate (a typed failure, retry), so a
 * client whose view lags during a hand-over cannot create a second arbiter. Lookups
 * read this node's replica and, for a name it does not know yet, a majority.
 *
 * <p><b>The table.</b> When the node that formed the cluster chose the name table
 * ({@code membus.names.table}; by default when replication keeps the system segment), its
 * {@code membus-system} register holds the table's pointer, and every call here is one
 * operation on {@link NameTable} in replicated memory instead: a bind is one CAS, first
 * binder wins across the loss of any node, no arbiter exists to hand over. The register is
 * read once, on the first call (this node's replica, then a majority), and followed from
 * then on; its value 0 means the arbiter. Table operations run on Pekko's blocking-io
 * dispatcher for the {@code *Async} forms.
 *
 * <p>A null, empty or over-long name is refused with {@link InvalidNameException}.
 *
 * <p><b>Note:</b> thread-safe; every blocking call waits at most the operation timeout
 * (twice, for the arbiter's two majority steps; the {@code *Async} forms complete within
 * the same bounds) and fails with a typed {@link DsmException}.
 * {@link #bindings()} and the local part of {@link #lookup} read an immutable snapshot
 * that the cluster agent publishes with a volatile write (an {@code AtomicReference}) on
 * every replicated change; a bind acknowledged by the arbiter is in a majority's replicas
 * before it returns, and in this node's snapshot after the next change notification. The
 * registry's mode (table or arbiter) is resolved once and published by a volatile write;
 * resolutions racing on first use reach the same value (the register is written once).
 */
public final class ClusterNames implements NameRegistry {
    private static final int MAX_NAME = 1024;

    private final ActorSystem system;
    private final Cluster cluster;
    private final ActorRef replicator;
    private final AtomicReference<Map<String, Long>> snapshot;
    private final Duration timeout;
    private final ClusterMacs macs;

    ClusterNames(ActorSystem system, ActorRef replicator, AtomicReference<Map<String, Long>> snapshot, Duration timeout,
                 ClusterMacs macs) {
        this.macs = macs;
        this.system = system;
        this.cluster = Cluster.get(system);
        this.replicator = replicator;
        this.snapshot = snapshot;
        this.timeout = timeout;
    }

    /** How the table mode is found: set by the node once its memory exists ({@link #useSystemRoot}). */
    private volatile TableWiring wiring;
    /** The mode, once resolved: a table, or {@code null} for the arbiter. */
    private volatile Resolved resolved;

    private record TableWiring(SystemRoot root, java.util.function.LongFunction<NameTable> open,
                               java.util.concurrent.Executor blocking) {
    }

    private record Resolved(NameTable table) {
    }

    /**
     * Wires the name table in: from now on the first call reads the {@code membus-system}
     * register and follows it ({@code open} opens the table at a pointer; table calls of
     * the {@code *Async} forms run on {@code blocking}). Without it, names go through the
     * arbiter, as before.
     */
    void useSystemRoot(SystemRoot root, java.util.function.LongFunction<NameTable> open,
                       java.util.concurrent.Executor blocking) {
        this.wiring = new TableWiring(root, open, blocking);
    }

    /** The name table this registry uses, once resolved to one; empty for the arbiter or before the first call. */
    Optional<NameTable> table() {
        Resolved r = resolved;
        return r == null ? Optional.empty() : Optional.ofNullable(r.table());
    }

    /**
     * The {@code names} section of {@code membus status}: which way this node's registry
     * goes (no I/O: what the first name call resolved).
     */
    Map<String, String> status() {
        Resolved r = resolved;
        if (r == null) {
            return Map.of("registry", wiring == null ? "arbiter" : "not resolved yet (no name call on this node so far)");
        }
        NameTable t = r.table();
        if (t == null) {
            return Map.of("registry", "arbiter (Distributed Data, membus-names)");
        }
        return Map.of("registry", "table in replicated memory", "table", RemotePtr.toString(t.pointer()), "capacity",
                Integer.toString(t.capacity()));
    }

    /**
     * The table, or {@code null} for the arbiter: resolved on first use from the register,
     * waiting up to the operation timeout for a founder still forming the cluster to write it.
     */
    private CompletableFuture<NameTable> mode() {
        Resolved r = resolved;
        if (r != null) {
            return CompletableFuture.completedFuture(r.table());
        }
        TableWiring w = wiring;
        if (w == null) {
            return CompletableFuture.completedFuture(null);
        }
        return resolve(w, System.nanoTime() + timeout.toNanos());
    }

    private CompletableFuture<NameTable> resolve(TableWiring w, long deadline) {
        return w.root().read().thenCompose(found -> {
            if (found.isPresent()) {
                long ptr = found.get();
                if (ptr == RemotePtr.NULL) {
                    resolved = new Resolved(null);
                    return CompletableFuture.completedFuture(null);
                }
                return CompletableFuture.supplyAsync(() -> {
                    NameTable t = w.open().apply(ptr);
                    resolved = new Resolved(t);
                    return t;
                }, w.blocking());
            }
            if (System.nanoTime() - deadline >= 0) {
                throw NodeUnavailableException.notSent(0, "name registry unavailable: the membus-system register is"
                        + " not written yet (the node that formed the cluster writes it as its start ends; it waited "
                        + timeout.toMillis() + "ms); retry once the first node has started");
            }
            return CompletableFuture.supplyAsync(() -> null,
                    CompletableFuture.delayedExecutor(100, java.util.concurrent.TimeUnit.MILLISECONDS, w.blocking()))
                    .thenCompose(x -> resolve(w, deadline));
        });
    }

    /** Runs a blocking table call on the blocking executor. */
    private <T> CompletableFuture<T> onTable(java.util.function.Supplier<T> call) {
        return CompletableFuture.supplyAsync(call, wiring.blocking());
    }

    /** Set when the node closes: what every later call fails with, at once. */
    private volatile DsmClosedException closed;

    /** The node is closing: every later lookup, bind and unbind fails with {@code e} at once. */
    void close(DsmClosedException e) {
        closed = e;
    }

    private void checkOpen() {
        DsmClosedException e = closed;
        if (e != null) {
            throw e;
        }
    }

    private static void checkName(String name) {
        if (name == null || name.isEmpty() || name.length() > MAX_NAME) {
            throw new InvalidNameException(name, MAX_NAME);
        }
    }

    @Override
    public Optional<Long> lookup(String name) {
        return RemoteMemory.await(lookupAsync(name).toCompletableFuture(), timeout.multipliedBy(4).plusSeconds(1));
    }

    @Override
    public CompletionStage<Optional<Long>> lookupAsync(String name) {
        try {
            checkOpen();
            checkName(name);
        } catch (DsmException e) {
            return CompletableFuture.failedStage(e);
        }
        return mode().thenCompose(t -> t != null ? onTable(() -> t.lookup(name)) : lookupArbitrated(name))
                .minimalCompletionStage();
    }

    /** {@inheritDoc} The table is read in replicated memory either way; the arbiter's bindings from a majority. */
    @Override
    public Optional<Long> lookupLatest(String name) {
        checkOpen();
        checkName(name);
        return RemoteMemory.await(mode().thenCompose(t -> t != null ? onTable(() -> t.lookup(name))
                : lookupMajority(name)).toCompletableFuture(), timeout.multipliedBy(4).plusSeconds(1));
    }

    private CompletableFuture<Optional<Long>> lookupArbitrated(String name) {
        Map<String, Long> local = snapshot.get();
        Long ptr = local == null ? null : local.get(name);
        if (ptr != null) {
            return CompletableFuture.completedFuture(Optional.of(ptr));
        }
        return lookupMajority(name);
    }

    private CompletableFuture<Optional<Long>> lookupMajority(String name) {
        return ask(replicator, new Replicator.Get<>(ClusterAgent.NAMES, new Replicator.ReadMajority(timeout)),
                timeout.multipliedBy(2), "lookup name=" + name, 0).thenApply(got -> {
                    if (got instanceof Replicator.GetSuccess<?> s) {
                        @SuppressWarnings("unchecked")
                        LWWMap<String, ClusterMessage.NameBinding> m =
                                (LWWMap<String, ClusterMessage.NameBinding>) s.dataValue();
                        ClusterMessage.NameBinding b = m.getEntries().get(name);
                        // a binding not made with the cluster secret is no binding
                        return b != null && macs.valid(name, b) ? Optional.of(b.ptr()) : Optional.<Long>empty();
                    }
                    if (got instanceof Replicator.NotFound<?>) {
                        return Optional.<Long>empty();
                    }
                    throw NodeUnavailableException.notSent(0, "name registry unavailable: operation=lookup, name="
                            + name + ", reason=no majority of members answered within " + timeout.toMillis() + "ms;"
                            + " a majority of the cluster must be reachable");
                });
    }

    @Override
    public long bind(String name, long ptr) {
        return RemoteMemory.await(bindAsync(name, ptr).toCompletableFuture(), timeout.multipliedBy(5).plusSeconds(1));
    }

    @Override
    public CompletionStage<Long> bindAsync(String name, long ptr) {
        try {
            checkOpen();
            checkName(name);
            if (ptr == RemotePtr.NULL) {
                throw new InvalidPointerException(ptr, 0, 0);
            }
            return mode().thenCompose(t -> t != null ? onTable(() -> t.bind(name, ptr)) : bindArbitrated(name, ptr))
                    .minimalCompletionStage();
        } catch (DsmException e) {
            return CompletableFuture.failedStage(e);
        }
    }

    private CompletableFuture<Long> bindArbitrated(String name, long ptr) {
        ClusterMacs.Tag tag = macs.bind(name, ptr);
        String what = "bind name=" + name;
        return arbitrate(new Bind(name, ptr, tag.hi(), tag.lo()), what).thenApply(r -> {
            if (r.ptr() != RemotePtr.NULL && !macs.bind(name, r.ptr()).matches(r.macHi(), r.macLo())) {
                throw new AuthenticationException("the name arbiter", "operation=" + what + ": it answered with a"
                        + " binding not made with this cluster's secret (is the arbiter started with a wrong"
                        + " membus.secret?)");
            }
            return r.ptr();
        });
    }

    @Override
    public boolean unbind(String name) {
        return RemoteMemory.await(unbindAsync(name).toCompletableFuture(), timeout.multipliedBy(5).plusSeconds(1));
    }

    @Override
    public CompletionStage<Boolean> unbindAsync(String name) {
        try {
            checkOpen();
            checkName(name);
            return mode().thenCompose(t -> {
                if (t != null) {
                    return onTable(() -> t.unbind(name, RemotePtr.NULL));
                }
                ClusterMacs.Tag tag = macs.unbind(name, 0);
                return arbitrate(new Unbind(name, 0, tag.hi(), tag.lo()), "unbind name=" + name)
                        .thenApply(r -> r.ptr() != 0);
            }).minimalCompletionStage();
        } catch (DsmException e) {
            return CompletableFuture.failedStage(e);
        }
    }

    @Override
    public boolean unbind(String name, long expectedPtr) {
        return RemoteMemory.await(unbindAsync(name, expectedPtr).toCompletableFuture(),
                timeout.multipliedBy(5).plusSeconds(1));
    }

    /** Compare-and-unbind, decided by the arbiter on the majority's bindings like {@link #bindAsync}. */
    @Override
    public CompletionStage<Boolean> unbindAsync(String name, long expectedPtr) {
        try {
            checkOpen();
            checkName(name);
            if (expectedPtr == RemotePtr.NULL) {
                throw new InvalidPointerException(expectedPtr, 0, 0);
            }
            return mode().thenCompose(t -> {
                if (t != null) {
                    return onTable(() -> t.unbind(name, expectedPtr));
                }
                ClusterMacs.Tag tag = macs.unbind(name, expectedPtr);
                return arbitrate(new Unbind(name, expectedPtr, tag.hi(), tag.lo()), "unbind name=" + name
                        + " if bound to " + RemotePtr.toString(expectedPtr)).thenApply(r -> r.ptr() != 0);
            }).minimalCompletionStage();
        } catch (DsmException e) {
            return CompletableFuture.failedStage(e);
        }
    }

    /**
     * Every binding: the arbiter's replica (this node's snapshot), or a scan of the name table.
     * Empty on a node whose secret does not authenticate the {@code membus-system} register.
     */
    @Override
    public Map<String, Long> bindings() {
        NameTable t;
        try {
            t = RemoteMemory.await(mode(), timeout.multipliedBy(3).plusSeconds(1));
        } catch (AuthenticationException e) {
            // the register was not written with this node's secret: no binding this node can authenticate
            return Map.of();
        }
        if (t != null) {
            return t.bindings(); // a scan of the table on the caller's thread, under the operation deadline
        }
        Map<String, Long> local = snapshot.get();
        return local == null ? Map.of() : local;
    }

    private CompletableFuture<NameReply> arbitrate(ClusterMessage request, String what) {
        Member arbiter = arbiter();
        return ask(system.actorSelection(arbiter.address() + "/user/" + ClusterAgent.NAME), request,
                timeout.multipliedBy(3), what, ClusterAgent.nodeIdOf(arbiter)).thenApply(reply -> {
                    NameReply r = (NameReply) reply;
                    if (r.error().startsWith(ClusterAgent.AUTHENTICATION)) {
                        throw new AuthenticationException(arbiter.address().toString(), "operation=" + what + ": "
                                + r.error().substring(ClusterAgent.AUTHENTICATION.length()).strip()
                                + " (this node's membus.secret differs from the arbiter's?)");
                    }
                    if (!r.error().isEmpty()) {
                        throw NodeUnavailableException.notSent(ClusterAgent.nodeIdOf(arbiter),
                                "name registry unavailable: operation=" + what
                                + ", arbiter=" + arbiter.address() + ", reason=" + r.error()
                                + "; a majority of the cluster must be reachable");
                    }
                    return r;
                });
    }

    /** The oldest live data member: the one whose agent arbitrates bindings. */
    private Member arbiter() {
        Member oldest = ClusterAgent.arbiter(cluster);
        if (oldest == null) {
            throw NodeUnavailableException.notSent(0, "name registry unavailable: no member is Up"
                    + " (this node has not joined the cluster, or was downed)");
        }
        return oldest;
    }

    /** Asks and maps Pekko's failures to typed ones; the stage completes within {@code wait}. */
    private static CompletableFuture<Object> ask(Object target, Object message, Duration wait, String what, int nodeId) {
        var stage = target instanceof ActorRef ref ? Patterns.ask(ref, message, wait)
                : Patterns.ask((org.apache.pekko.actor.ActorSelection) target, message, wait);
        return stage.toCompletableFuture().handle((reply, failure) -> {
            if (failure == null) {
                return reply;
            }
            Throwable cause = failure instanceof java.util.concurrent.CompletionException && failure.getCause() != null
                    ? failure.getCause() : failure;
            if (cause instanceof DsmException de) {
                throw de;
            }
            if (cause instanceof org.apache.pekko.pattern.AskTimeoutException) {
                throw new DsmTimeoutException(what, nodeId, wait);
            }
            throw DsmException.internal("name registry failed: operation=" + what + ": " + cause, cause);
        });
    }
}
