package io.membus.cluster;

import io.membus.core.error.DsmException;
import io.membus.core.error.NodeUnavailableException;
import org.apache.pekko.actor.ActorRef;
import org.apache.pekko.cluster.Cluster;
import org.apache.pekko.cluster.Member;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.ddata.Key;
import org.apache.pekko.cluster.ddata.LWWMap;
import org.apache.pekko.cluster.ddata.LWWMapKey;
import org.apache.pekko.cluster.ddata.Replicator;
import org.apache.pekko.cluster.ddata.SelfUniqueAddress;
import org.apache.pekko.pattern.Patterns;

import java.time.Duration;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

/**
 * Facts each node publishes about itself for the others to check, e.g. the layers
 * above compare their codec registrations ({@code membus.codec}) before they serve.
 * One replicated map (Distributed Data) of {@code fact/nodeId -> text}; writes and
 * reads go to a majority, so of two nodes that each publish and then read, the one
 * whose read begins after the other's write completed sees it.
 *
 * <p>{@link #read} returns only the facts of the members this node knows (in any
 * status but Down or Removed), so a departed node's stale fact never counts; a node
 * id that comes back overwrites its own.
 *
 * <p><b>Note:</b> thread-safe; every call blocks its caller at most about twice the
 * operation timeout and fails with a typed error after that.
 */
public final class ClusterFacts {
    static final Key<LWWMap<String, String>> FACTS = LWWMapKey.create("membus-facts");

    private final Cluster cluster;
    private final ActorRef replicator;
    private final SelfUniqueAddress self;
    private final int nodeId;
    private final Duration timeout;

    ClusterFacts(Cluster cluster, ActorRef replicator, SelfUniqueAddress self, int nodeId, Duration timeout) {
        this.cluster = cluster;
        this.replicator = replicator;
        this.self = self;
        this.nodeId = nodeId;
        this.timeout = timeout;
    }

    /** Publishes (or replaces) this node's {@code fact}, written to a majority. */
    public void publish(String fact, String text) {
        Object r = await(new Replicator.Update<LWWMap<String, String>>(FACTS, LWWMap.create(),
                new Replicator.WriteMajority(timeout), m -> m.put(self, fact + "/" + nodeId, text)), "publish " + fact);
        if (!(r instanceof Replicator.UpdateSuccess)) {
            throw unavailable("publish " + fact, r);
        }
    }

    /** Removes this node's {@code fact} (a node that refused to serve takes its fact back). */
    public void remove(String fact) {
        await(new Replicator.Update<LWWMap<String, String>>(FACTS, LWWMap.create(),
                new Replicator.WriteMajority(timeout), m -> m.remove(self, fact + "/" + nodeId)), "remove " + fact);
    }

    /** The other current members' {@code fact}, by node id (sorted), read from a majority. */
    public Map<Integer, String> read(String fact) {
        return read(fact, false);
    }

    /**
     * As {@link #read}, of memory nodes only (members with the {@code membus-node} role):
     * a fact only memory nodes must agree on ({@code membus.replication.backups}), where a
     * client's (or an old fact under a node id a client now has) never counts.
     */
    public Map<Integer, String> readMemoryNodes(String fact) {
        return read(fact, true);
    }

    private Map<Integer, String> read(String fact, boolean memoryNodesOnly) {
        Object r = await(new Replicator.Get<LWWMap<String, String>>(FACTS, new Replicator.ReadMajority(timeout)),
                "read " + fact);
        Map<Integer, String> out = new TreeMap<>();
        if (r instanceof Replicator.NotFound<?>) {
            return out;
        }
        if (!(r instanceof Replicator.GetSuccess<?> s)) {
            throw unavailable("read " + fact, r);
        }
        @SuppressWarnings("unchecked")
        Map<String, String> all = ((LWWMap<String, String>) s.dataValue()).getEntries();
        for (Member m : cluster.state().getMembers()) {
            int id = ClusterAgent.nodeIdOf(m);
            boolean gone = m.status() == MemberStatus.down() || m.status() == MemberStatus.removed()
                    || (memoryNodesOnly && !m.hasRole(ClusterAgent.NODE_ROLE));
            String text = id == nodeId || gone ? null : all.get(fact + "/" + id);
            if (text != null) {
                out.put(id, text);
            }
        }
        return out;
    }

    private Object await(Object message, String what) {
        try {
            return Patterns.ask(replicator, message, timeout.multipliedBy(2)).toCompletableFuture()
                    .get(timeout.toMillis() * 2 + 500, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw DsmException.internal("cluster facts: operation=" + what + ", interrupted", e);
        } catch (Exception e) {
            throw unavailable(what, e);
        }
    }

    private DsmException unavailable(String what, Object why) {
        return new NodeUnavailableException(nodeId, "cluster facts unavailable: operation=" + what + ", reason="
                + (why instanceof Throwable t ? t.toString() : why.getClass().getSimpleName()) + " within "
                + timeout.toMillis() * 2 + "ms; a majority of the cluster must be reachable");
    }
}
