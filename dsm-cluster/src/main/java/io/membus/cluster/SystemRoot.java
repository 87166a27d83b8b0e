package io.membus.cluster;

import io.membus.cluster.ClusterMessage.NameBinding;
import io.membus.core.RemotePtr;
import io.membus.core.error.AuthenticationException;
import io.membus.core.error.DsmException;
import io.membus.core.error.DsmTimeoutException;
import io.membus.core.error.NodeUnavailableException;
import org.apache.pekko.actor.ActorRef;
import org.apache.pekko.cluster.ddata.Key;
import org.apache.pekko.cluster.ddata.LWWRegister;
import org.apache.pekko.cluster.ddata.LWWRegisterKey;
import org.apache.pekko.cluster.ddata.Replicator;
import org.apache.pekko.cluster.ddata.SelfUniqueAddress;
import org.apache.pekko.pattern.Patterns;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;

/**
 * The {@code membus-system} register (Distributed Data, an {@code LWWRegister}): where the
 * cluster's name table is, written once in the cluster's life by the node that forms it
 * (after a majority read found none, with a majority write) and only read afterwards. Its
 * value is the table's pointer, or 0 when the founder chose the Distributed Data arbiter
 * ({@code membus.names.table}: {@code off}, or {@code auto} without replication), so every
 * node, clients included, follows one choice. The value carries a tag under the cluster
 * secret; a value with a wrong tag is refused ({@link AuthenticationException}).
 *
 * <p>Residual assumption: one founder at the first formation. Two nodes that each form a
 * cluster of their own and are later joined would each have written a register, and
 * last-writer-wins would pick one table; Pekko's rule that only the first seed node forms
 * a cluster (the others join it) is what excludes this, as it excludes two clusters.
 *
 * <p><b>Note:</b> thread-safe: immutable fields; the replicator actor orders the reads
 * and writes; every call completes within twice the operation timeout.
 */
final class SystemRoot {
    static final Key<LWWRegister<NameBinding>> KEY = LWWRegisterKey.create("membus-system");

    private final ActorRef replicator;
    private final SelfUniqueAddress self;
    private final ClusterMacs macs;
    private final Duration timeout;

    SystemRoot(ActorRef replicator, SelfUniqueAddress self, ClusterMacs macs, Duration timeout) {
        this.replicator = replicator;
        this.self = self;
        this.macs = macs;
        this.timeout = timeout;
    }

    /**
     * The register read from a majority: empty when no node has written it yet, else the
     * table's pointer (0: names go through the arbiter).
     *
     * @throws NodeUnavailableException when no majority answered in time
     * @throws AuthenticationException  when its tag was not made with the cluster secret
     */
    CompletableFuture<Optional<Long>> read() {
        return Patterns.ask(replicator, new Replicator.Get<>(KEY, new Replicator.ReadMajority(timeout)),
                timeout.multipliedBy(2)).toCompletableFuture().handle((got, failure) -> {
                    if (failure != null) {
                        throw new DsmTimeoutException("read the membus-system register", 0, timeout.multipliedBy(2));
                    }
                    if (got instanceof Replicator.NotFound<?>) {
                        return Optional.<Long>empty();
                    }
                    if (got instanceof Replicator.GetSuccess<?> s) {
                        @SuppressWarnings("unchecked")
                        NameBinding b = ((LWWRegister<NameBinding>) s.dataValue()).getValue();
                        if (!macs.system(b.ptr()).matches(b.macHi(), b.macLo())) {
                            throw new AuthenticationException("the membus-system register", "its value (table "
                                    + RemotePtr.toString(b.ptr()) + ") was not written with this cluster's secret"
                                    + " (a member with a wrong membus.secret?)");
                        }
                        return Optional.of(b.ptr());
                    }
                    throw NodeUnavailableException.notSent(0, "name registry unavailable: operation=read the"
                            + " membus-system register, reason=no majority of members answered within "
                            + timeout.toMillis() + "ms; a majority of the cluster must be reachable");
                });
    }

    /**
     * Writes the register ({@code table}: the table's pointer, 0 for the arbiter) to a
     * majority; the write still spreads by gossip when no majority answered in time.
     *
     * @return whether a majority acknowledged it
     */
    boolean write(long table) {
        ClusterMacs.Tag tag = macs.system(table);
        NameBinding value = new NameBinding(table, tag.hi(), tag.lo());
        try {
            Object r = Patterns.ask(replicator, new Replicator.Update<LWWRegister<NameBinding>>(KEY,
                            LWWRegister.create(self, value), new Replicator.WriteMajority(timeout),
                            reg -> reg.withValue(self, value)), timeout.multipliedBy(2))
                    .toCompletableFuture().get(timeout.toMillis() * 2 + 500, java.util.concurrent.TimeUnit.MILLISECONDS);
            return r instanceof Replicator.UpdateSuccess;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw DsmException.internal("interrupted while writing the membus-system register", e);
        } catch (Exception e) {
            return false;
        }
    }
}
