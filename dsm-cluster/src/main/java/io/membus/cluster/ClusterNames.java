package io.membus.cluster;

import io.membus.cluster.ClusterMessage.Bind;
import io.membus.cluster.ClusterMessage.NameReply;
import io.membus.cluster.ClusterMessage.Unbind;
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
 * <p>A null, empty or over-long name is refused with {@link InvalidNameException}.
 *
 * <p><b>Note:</b> thread-safe; every blocking call waits at most the operation timeout
 * (twice, for the arbiter's two majority steps; the {@code *Async} forms complete within
 * the same bounds) and fails with a typed {@link DsmException}.
 * {@link #bindings()} and the local part of {@link #lookup} read an immutable snapshot
 * that the cluster agent publishes with a volatile write (an {@code AtomicReference}) on
 * every replicated change; a bind acknowledged by the arbiter is in a majority's replicas
 * before it returns, and in this node's snapshot after the next change notification.
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
        return RemoteMemory.await(lookupAsync(name).toCompletableFuture(), timeout.multipliedBy(2).plusSeconds(1));
    }

    @Override
    public CompletionStage<Optional<Long>> lookupAsync(String name) {
        try {
            checkOpen();
            checkName(name);
        } catch (DsmException e) {
            return CompletableFuture.failedStage(e);
        }
        Map<String, Long> local = snapshot.get();
        Long ptr = local == null ? null : local.get(name);
        if (ptr != null) {
            return CompletableFuture.completedStage(Optional.of(ptr));
        }
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
                }).minimalCompletionStage();
    }

    @Override
    public long bind(String name, long ptr) {
        return RemoteMemory.await(bindAsync(name, ptr).toCompletableFuture(), timeout.multipliedBy(3).plusSeconds(1));
    }

    @Override
    public CompletionStage<Long> bindAsync(String name, long ptr) {
        try {
            checkOpen();
            checkName(name);
            if (ptr == RemotePtr.NULL) {
                throw new InvalidPointerException(ptr, 0, 0);
            }
            ClusterMacs.Tag tag = macs.bind(name, ptr);
            String what = "bind name=" + name;
            return arbitrate(new Bind(name, ptr, tag.hi(), tag.lo()), what).thenApply(r -> {
                if (r.ptr() != RemotePtr.NULL && !macs.bind(name, r.ptr()).matches(r.macHi(), r.macLo())) {
                    throw new AuthenticationException("the name arbiter", "operation=" + what + ": it answered with a"
                            + " binding not made with this cluster's secret (is the arbiter started with a wrong"
                            + " membus.secret?)");
                }
                return r.ptr();
            }).minimalCompletionStage();
        } catch (DsmException e) {
            return CompletableFuture.failedStage(e);
        }
    }

    @Override
    public boolean unbind(String name) {
        return RemoteMemory.await(unbindAsync(name).toCompletableFuture(), timeout.multipliedBy(3).plusSeconds(1));
    }

    @Override
    public CompletionStage<Boolean> unbindAsync(String name) {
        try {
            checkOpen();
            checkName(name);
            ClusterMacs.Tag tag = macs.unbind(name);
            return arbitrate(new Unbind(name, tag.hi(), tag.lo()), "unbind name=" + name).thenApply(r -> r.ptr() != 0).minimalCompletionStage();
        } catch (DsmException e) {
            return CompletableFuture.failedStage(e);
        }
    }

    @Override
    public Map<String, Long> bindings() {
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
