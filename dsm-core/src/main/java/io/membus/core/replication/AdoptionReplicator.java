package io.membus.core.replication;

import io.membus.core.Segment;
import io.membus.core.SegmentDescriptor;
import io.membus.core.capability.ReplicationSupport;
import io.membus.core.directory.DirectoryListener;
import io.membus.core.directory.ReplicaGroupView;
import io.membus.core.directory.SegmentDirectory;
import io.membus.core.error.DsmClosedException;
import io.membus.core.error.DsmException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.NotPrimaryException;
import io.membus.core.transport.AbstractTransport;
import io.membus.core.time.Deadlines;
import io.membus.core.directory.PeerInfo;
import io.membus.core.transport.Transport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The replication service of a memory node whose transport keeps a dead node's memory by
 * <em>adoption</em> ({@link ReplicationSupport#ADOPTION}: {@code shm}, docs/replication.md §8),
 * the counterpart of {@link Replicator} (which forwards changes to copies). There are no
 * copies: a segment's file outlives its process, and one survivor maps it and serves it.
 *
 * <ul>
 *   <li><b>Claims.</b> Every segment this node exports is a group it serves: a
 *       {@link GroupClaim.Role#PRIMARY} claim at {@link Ballot#initial(int)}, no in-sync
 *       copies, published through the {@link ClaimPublisher} so the directory knows the
 *       groups and routes their verbs.</li>
 *   <li><b>Adoption.</b> When membership downs a memory node (removed and fenced; a graceful
 *       leave is not adopted), this node calls
 *       {@code adopt(dead, deadline)} on its transport; every survivor does, the file system
 *       picks one winner. The winner publishes a PRIMARY claim for each adopted group at
 *       {@link Ballot#next} of the highest epoch the directory knew for it, so routing sends
 *       the group's verbs here (the transport has put the adopted files in its table's
 *       hosted map, {@link Hosted#adopted}). A loser ({@link NotPrimaryException}) does
 *       nothing: the winner's claims reach it through the directory.</li>
 *   <li><b>Blocked adoption.</b> While the dead node's process cannot be killed yet
 *       ({@link NodeUnavailableException}), the attempt is repeated on the shared timer
 *       ({@link Deadlines}), after {@link #RETRY} and then pauses doubling up to
 *       {@link #MAX_RETRY}, until it succeeds, the node is no longer fenced or this
 *       service closes; its groups stay unserved (verbs on them fail as for a downed node)
 *       and nobody else adopts them (the claim file stays this node's).</li>
 * </ul>
 *
 * <p>Adoptions run on one thread of this service, {@code membus-repl-<node>} (an adoption may
 * wait up to its deadline for the killed process to exit: never on a directory listener's or
 * the timer's thread).
 *
 * <p><b>Note:</b> thread-safe. Public methods may be called from any thread. The claims are a
 * concurrent map; publications are serialised by a lock and always carry the latest claims.
 * The transport publishes the adopted segments to verbs (its table's volatile hosted map)
 * before {@code adopt} returns, so before the claims that route verbs here are published.
 */
public final class AdoptionReplicator implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(AdoptionReplicator.class);
    /** The first pause before a blocked adoption's retry (and a failed publication's). */
    static final Duration RETRY = Duration.ofSeconds(1);
    /** The longest pause between a blocked adoption's retries (each attempt logs the transport's line). */
    static final Duration MAX_RETRY = Duration.ofSeconds(8);
    /** What {@code membus status} says of a group on a transport that adopts (one host: no copies). */
    public static final String NOTE = "adopted, not copied (one host)";

    private final AbstractTransport transport;
    private final SegmentDirectory directory;
    private final ClaimPublisher publisher;
    private final ReplicationConfig config;
    private final int self;
    private final Duration timeout;
    private final ReplicationService service;
    private final Map<Integer, GroupClaim> claims;
    /** Groups adopted here, by group id: from which node. */
    private final Map<Integer, Integer> adoptedFrom = new ConcurrentHashMap<>();
    /** Dead nodes whose adoption is blocked, by node id: the pause before their next retry (nanoseconds). */
    private final Map<Integer, Long> blocked = new ConcurrentHashMap<>();
    private final DirectoryListener listener = new DirectoryListener() {
        @Override
        public void memberRemoved(PeerInfo member, String reason) {
            service.submit(() -> tryAdopt(member, reason));
        }
    };
    private volatile boolean started;

    /**
     * Only a member that was <em>downed</em> is adopted: one the transport has fenced when
     * membership removed it ({@code Transport.isFenced}). A member that left gracefully is not
     * (its process may go on running its application; it took its memory with it).
     *
     * @param transport a transport whose replication is {@link ReplicationSupport#ADOPTION}
     * @param timeout   the operation timeout: bounds each publication and each adoption attempt
     * @throws io.membus.core.error.DsmConfigException when the transport does not adopt
     */
    public AdoptionReplicator(Transport transport, SegmentDirectory directory, ClaimPublisher publisher,
                              ReplicationConfig config, Duration timeout) {
        if (transport.capabilities().replication() != ReplicationSupport.ADOPTION
                || !(transport instanceof AbstractTransport t)) {
            throw new io.membus.core.error.DsmConfigException("membus.replication.backups",
                    String.valueOf(config.backups()), "a transport that adopts a dead node's segments (shm); transport "
                    + transport.name() + " keeps them by " + transport.capabilities().replication()
                    + " (see docs/replication.md)");
        }
        this.transport = t;
        this.directory = directory;
        this.publisher = publisher;
        this.config = config;
        this.self = transport.nodeId();
        this.timeout = timeout;
        this.service = new ReplicationService(self, publisher, timeout);
        this.claims = service.claims();
    }

    /** Registers the directory listener: from now on downed members are adopted. */
    public void start() {
        service.checkOpen();
        directory.addListener(listener);
        started = true;
        LOG.info("replication: node {} on {}: segments are adopted, not copied (one host); membus.replication.backups"
                + " = {} asks for no copies here", self, transport.name(), config.backups());
    }

    /**
     * This node exported {@code own}: it serves the segment's group at {@link Ballot#initial(int)} (a claim, no copy).
     *
     * @throws io.membus.core.error.DsmConfigException when {@code own} is not a segment of this node
     */
    public void exported(Segment own) {
        service.checkOpen();
        if (own.nodeId() != self) {
            throw new io.membus.core.error.DsmConfigException("adoption: exported segment", own.descriptor(),
                    "a segment of this node (node " + self + "): only a node's own exports are its groups");
        }
        claims.put(GroupId.of(self, own.index()), new GroupClaim(GroupId.of(self, own.index()), Ballot.initial(self),
                GroupClaim.Role.PRIMARY, own.size(), own.flags(), own.remoteKey(), new int[0],
                System.currentTimeMillis()));
        schedulePublish();
    }

    /** The groups served here (own and adopted), one row each, ordered by group id. */
    public List<ReplicaGroupStatus> status() {
        List<ReplicaGroupStatus> out = new ArrayList<>();
        for (GroupClaim c : claims.values()) {
            out.add(new ReplicaGroupStatus(c.group(), GroupClaim.Role.PRIMARY, c.epoch(), 0, 0, new int[0], new int[0],
                    new long[0], 0, NOTE)); // the note membus status prints: "ok (adopted, not copied (one host))"
        }
        out.sort((a, b) -> Integer.compare(a.group(), b.group()));
        return out;
    }

    /** Whether this node serves {@code group} because it adopted it. */
    public boolean adopted(int group) {
        return adoptedFrom.containsKey(group);
    }

    /** Dead nodes whose adoption waits for their process to be killable (a snapshot of their ids). */
    public List<Integer> blocked() {
        return List.copyOf(blocked.keySet());
    }

    @Override
    public void close() {
        if (service.closed()) {
            return;
        }
        service.markClosed(); // closed from here (the service's flag: this class keeps none of its own)
        if (started) {
            directory.removeListener(listener);
        }
        service.close();
        blocked.clear();
    }

    // ---------------------------------------------------------------- the service thread

    /** One attempt to adopt {@code dead}'s memory (service thread). */
    private void tryAdopt(PeerInfo dead, String reason) {
        if (service.closed() || dead.nodeId() == self) {
            return;
        }
        if (!transport.isFenced(dead.nodeId())
                || directory.member(dead.nodeId()).map(p -> p.incarnation() == dead.incarnation()).orElse(false)) {
            // not downed: it left gracefully (its memory leaves with it, and its process, maybe still running the
            // application, must never be killed), or a new incarnation replaced it (fence lifted), or it is a member
            // again (a late event): nothing to adopt
            if (blocked.remove(dead.nodeId()) != null || !reason.startsWith("retry")) {
                LOG.debug("replication: node {} does not adopt node {}: not downed ({})", self, dead.nodeId(), reason);
            }
            return;
        }
        long deadline = System.nanoTime() + timeout.toNanos();
        List<SegmentDescriptor> adopted;
        try {
            adopted = transport.adopt(dead, deadline);
        } catch (NotPrimaryException lost) {
            blocked.remove(dead.nodeId());
            LOG.info("replication: node {} adopts node {}'s segments (node {} lost the race)", lost.primaryHint(),
                    dead.nodeId(), self);
            return;
        } catch (NodeUnavailableException notYet) {
            Long was = blocked.get(dead.nodeId());
            long pause = was == null ? RETRY.toNanos() : Math.min(MAX_RETRY.toNanos(), was * 2);
            blocked.put(dead.nodeId(), pause);
            if (was == null) {
                LOG.warn("{} (retried from every {} ms up to every {} ms)", notYet.getMessage(), RETRY.toMillis(),
                        MAX_RETRY.toMillis());
            }
            service.later(() -> retry(dead), pause);
            return;
        } catch (DsmClosedException e) {
            return;
        } catch (DsmException e) {
            blocked.remove(dead.nodeId());
            LOG.warn("replication: node {} does not adopt node {} (removed: {}): {}", self, dead.nodeId(), reason,
                    e.getMessage());
            return;
        }
        blocked.remove(dead.nodeId());
        if (adopted.isEmpty()) {
            return;
        }
        List<String> names = new ArrayList<>();
        for (SegmentDescriptor d : adopted) {
            int group = GroupId.of(d.nodeId(), d.index());
            long highest = Math.max(Ballot.initial(d.nodeId()), directory.group(d.nodeId(), d.index())
                    .map(ReplicaGroupView::epoch).orElse(Ballot.NONE));
            GroupClaim before = claims.get(group);
            if (before != null && before.epoch() > highest) {
                continue; // adopted here already (a repeated call returns what was adopted)
            }
            claims.put(group, new GroupClaim(group, Ballot.next(highest, self), GroupClaim.Role.PRIMARY, d.size(),
                    d.flags(), d.remoteKey(), new int[0], System.currentTimeMillis()));
            adoptedFrom.put(group, dead.nodeId());
            names.add(GroupId.toString(group) + " at epoch " + Ballot.toString(Ballot.next(highest, self)));
        }
        if (!names.isEmpty()) {
            LOG.info("replication: node {} serves the segments it adopted from node {}: {}", self, dead.nodeId(),
                    String.join(", ", names));
            schedulePublish();
        }
    }

    private void retry(PeerInfo dead) {
        if (!service.closed() && blocked.containsKey(dead.nodeId())) {
            tryAdopt(dead, "retry of a blocked adoption");
        }
    }

    private void schedulePublish() {
        service.schedulePublish();
    }
}
