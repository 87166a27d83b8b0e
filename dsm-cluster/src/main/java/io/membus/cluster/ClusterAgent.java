package io.membus.cluster;

import io.membus.cluster.ClusterMessage.Bind;
import io.membus.cluster.ClusterMessage.MemberRow;
import io.membus.cluster.ClusterMessage.NameReply;
import io.membus.cluster.ClusterMessage.NodeEntry;
import io.membus.alloc.HeapUsage;
import io.membus.cluster.ClusterMessage.StatusReply;
import io.membus.cluster.ClusterMessage.StatusRequest;
import io.membus.cluster.ClusterMessage.Unbind;
import io.membus.core.transport.Transport;
import org.apache.pekko.actor.AbstractActor;
import org.apache.pekko.actor.ActorRef;
import org.apache.pekko.actor.Props;
import org.apache.pekko.cluster.Cluster;
import org.apache.pekko.cluster.ClusterEvent;
import org.apache.pekko.cluster.Member;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.UniqueAddress;
import org.apache.pekko.cluster.ddata.DistributedData;
import org.apache.pekko.cluster.ddata.Key;
import org.apache.pekko.cluster.ddata.LWWMap;
import org.apache.pekko.cluster.ddata.LWWMapKey;
import org.apache.pekko.cluster.ddata.Replicator;
import org.apache.pekko.cluster.ddata.SelfUniqueAddress;
import org.apache.pekko.pattern.Patterns;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;
import java.util.function.Supplier;

/**
 * The node's cluster agent (one actor, {@code /user/membus-agent}): follows Pekko
 * membership and the replicated directory, publishes the live directory view, fences
 * downed members on the node's transport (and lifts the fence when a node id comes
 * back as a new incarnation), notices that this node itself was downed, arbitrates
 * name bindings when it runs on the oldest member, and answers {@code membus status}.
 *
 * <p><b>Note:</b> an actor: its state is touched by one message at a time.
 */
final class ClusterAgent extends AbstractActor {
    private static final Logger LOG = LoggerFactory.getLogger(ClusterAgent.class);

    /** Role every Membus data node carries; the split-brain resolver counts only these. */
    /** The role of memory nodes: the split-brain resolver's majority and the name arbiter count only these. */
    static final String NODE_ROLE = "membus-node";
    /** The role of client nodes (no memory exported). */
    static final String CLIENT_ROLE = "membus-client";
    /** Role prefix naming the compact node id, e.g. {@code membus-node-3}. */
    static final String ID_ROLE_PREFIX = "membus-node-";
    static final String NAME = "membus-agent";
    private static final String BLOCKING_DISPATCHER = "pekko.actor.default-blocking-io-dispatcher";

    static final Key<LWWMap<String, NodeEntry>> NODES = LWWMapKey.create("membus-nodes");
    static final Key<LWWMap<String, ClusterMessage.NameBinding>> NAMES = LWWMapKey.create("membus-names");

    private final int nodeId;
    private final Cluster cluster;
    private final ActorRef replicator;
    private final SelfUniqueAddress self;
    private final ClusterDirectory directory;
    private final AtomicReference<Map<String, Long>> names;
    private final AtomicReference<Transport> transport;
    private final Consumer<String> selfDowned;
    private final Duration timeout;
    private final Supplier<HeapUsage> heapUsage;
    private final Supplier<List<StatusSection>> sections;
    /** The replica groups' rows of a status reply (asked on Pekko's blocking dispatcher). */
    private final Supplier<List<ClusterMessage.GroupRow>> groupRows;
    private final ClusterMacs macs;
    /** Names and node ids whose replicated value failed its tag, as last logged (logged again only when they change). */
    private Set<String> ignoredNames = Set.of();
    private Set<String> ignoredEntries = Set.of();

    private final Map<UniqueAddress, Member> members = new HashMap<>();
    private final Set<UniqueAddress> unreachable = new HashSet<>();
    private final Map<Integer, String> leftReasons = new HashMap<>();
    /** Node ids whose last member left gracefully (removed after exiting, not downed): their groups' loss is no fault. */
    private final Set<Integer> leftGracefully = new HashSet<>();
    /** The member (incarnation) whose loss fenced each node id: only another member lifts the fence. */
    private final Map<Integer, UniqueAddress> fencedMember = new HashMap<>();
    /** This member is exiting, down or removed: peers' removals are its own shutdown, not theirs. */
    private boolean selfGoing;
    private Map<String, NodeEntry> entries = Map.of();

    private ClusterAgent(int nodeId, ClusterDirectory directory, AtomicReference<Map<String, Long>> names,
                         AtomicReference<Transport> transport, Consumer<String> selfDowned, Duration timeout,
                         Supplier<HeapUsage> heapUsage, Supplier<List<StatusSection>> sections,
                         Supplier<List<ClusterMessage.GroupRow>> groupRows, ClusterMacs macs) {
        this.nodeId = nodeId;
        this.groupRows = groupRows;
        this.macs = macs;
        this.cluster = Cluster.get(getContext().getSystem());
        this.replicator = DistributedData.get(getContext().getSystem()).replicator();
        this.self = DistributedData.get(getContext().getSystem()).selfUniqueAddress();
        this.directory = directory;
        this.names = names;
        this.transport = transport;
        this.selfDowned = selfDowned;
        this.timeout = timeout;
        this.heapUsage = heapUsage;
        this.sections = sections;
    }

    static Props props(int nodeId, ClusterDirectory directory, AtomicReference<Map<String, Long>> names,
                       AtomicReference<Transport> transport, Consumer<String> selfDowned, Duration timeout,
                       Supplier<HeapUsage> heapUsage, Supplier<List<StatusSection>> sections,
                       Supplier<List<ClusterMessage.GroupRow>> groupRows, ClusterMacs macs) {
        return Props.create(ClusterAgent.class, () -> new ClusterAgent(nodeId, directory, names, transport, selfDowned,
                timeout, heapUsage, sections, groupRows, macs));
    }

    /** The compact node id a member carries in its roles, or 0 (an observer). */
    static int nodeIdOf(Member m) {
        for (String r : m.getRoles()) {
            if (r.startsWith(ID_ROLE_PREFIX)) {
                try {
                    return Integer.parseInt(r.substring(ID_ROLE_PREFIX.length()));
                } catch (NumberFormatException e) {
                    return 0;
                }
            }
        }
        return 0;
    }

    /** The oldest Up data member, whose agent arbitrates name bindings; {@code null} when no member is Up. */
    static Member arbiter(Cluster cluster) {
        Member oldest = null;
        for (Member m : cluster.state().getMembers()) {
            if (m.status() == MemberStatus.up() && m.hasRole(NODE_ROLE) && (oldest == null || m.isOlderThan(oldest))) {
                oldest = m;
            }
        }
        return oldest;
    }

    static boolean isLive(MemberStatus s) {
        return s == MemberStatus.up() || s == MemberStatus.weaklyUp() || s == MemberStatus.leaving();
    }

    @Override
    public void preStart() {
        cluster.subscribe(getSelf(), ClusterEvent.initialStateAsEvents(), ClusterEvent.MemberEvent.class,
                ClusterEvent.ReachabilityEvent.class);
        replicator.tell(new Replicator.Subscribe<>(NODES, getSelf()), getSelf());
        replicator.tell(new Replicator.Subscribe<>(NAMES, getSelf()), getSelf());
    }

    @Override
    public void postStop() {
        cluster.unsubscribe(getSelf());
    }

    @Override
    @SuppressWarnings("unchecked")
    public Receive createReceive() {
        return receiveBuilder()
                .match(ClusterEvent.MemberRemoved.class, e -> memberGone(e.member(),
                        e.previousStatus() == MemberStatus.exiting() ? "left the cluster" : "removed from the cluster (was "
                                + e.previousStatus() + ")", true, e.previousStatus() != MemberStatus.exiting()))
                .match(ClusterEvent.MemberDowned.class, e -> memberGone(e.member(),
                        "downed by the cluster (split-brain resolver or an operator)", false, true))
                .match(ClusterEvent.MemberEvent.class, e -> memberChanged(e.member()))
                .match(ClusterEvent.UnreachableMember.class, e -> {
                    unreachable.add(e.member().uniqueAddress());
                    LOG.warn("member unreachable: {} (node {}); it is downed if it stays unreachable", e.member().address(),
                            nodeIdOf(e.member()));
                })
                .match(ClusterEvent.ReachableMember.class, e -> {
                    unreachable.remove(e.member().uniqueAddress());
                    LOG.info("member reachable again: {} (node {})", e.member().address(), nodeIdOf(e.member()));
                })
                .match(Replicator.Changed.class, c -> {
                    if (c.key().equals(NODES)) {
                        entries = authenticEntries(((LWWMap<String, NodeEntry>) c.dataValue()).getEntries());
                        publish();
                    } else if (c.key().equals(NAMES)) {
                        names.set(authenticNames(((LWWMap<String, ClusterMessage.NameBinding>) c.dataValue())
                                .getEntries()));
                    }
                })
                .match(Bind.class, this::bind)
                .match(Unbind.class, this::unbind)
                .match(StatusRequest.class, r -> answerStatus())
                .build();
    }

    /** The entries whose tag is right; the others (written without the cluster secret) are ignored and logged. */
    private Map<String, NodeEntry> authenticEntries(Map<String, NodeEntry> all) {
        Map<String, NodeEntry> ok = new HashMap<>();
        Set<String> bad = new java.util.TreeSet<>();
        all.forEach((k, e) -> {
            if (macs.valid(e)) {
                ok.put(k, e);
            } else {
                bad.add(k);
            }
        });
        if (!bad.isEmpty() && !bad.equals(ignoredEntries)) {
            LOG.warn("ignoring the directory entries of node ids {}: they were not written with this cluster's secret"
                    + " (a member with a wrong membus.secret?)", bad);
        }
        ignoredEntries = bad;
        return Map.copyOf(ok);
    }

    /** The bindings whose tag is right, as name -> pointer; the others are ignored and logged. */
    private Map<String, Long> authenticNames(Map<String, ClusterMessage.NameBinding> all) {
        Map<String, Long> ok = new HashMap<>();
        Set<String> bad = new java.util.TreeSet<>();
        all.forEach((name, b) -> {
            if (macs.valid(name, b)) {
                ok.put(name, b.ptr());
            } else if (bad.size() < 100) {
                bad.add(name);
            }
        });
        if (!bad.isEmpty() && !bad.equals(ignoredNames)) {
            LOG.warn("ignoring the bindings of names {}: they were not bound with this cluster's secret (a member with"
                    + " a wrong membus.secret?)", bad);
        }
        ignoredNames = bad;
        return Map.copyOf(ok);
    }

    private void memberChanged(Member m) {
        members.put(m.uniqueAddress(), m);
        int id = nodeIdOf(m);
        if (m.uniqueAddress().equals(cluster.selfUniqueAddress()) && isGoing(m.status())) {
            selfGoing = true;
        }
        UniqueAddress fencedFor = fencedMember.get(id);
        if (id != 0 && id != nodeId && isLive(m.status()) && !m.uniqueAddress().equals(fencedFor)) {
            Transport t = transport.get();
            if (t != null && t.isFenced(id)) {
                LOG.info("node {} is back as a new member {}: lifting its fence", id, m.address());
                t.unfence(id);
            }
            fencedMember.remove(id);
            leftReasons.remove(id);
            leftGracefully.remove(id);
        }
        publish();
    }

    /** Past leaving: this member's cluster is shutting down (while merely leaving it still fences). */
    private static boolean isGoing(MemberStatus s) {
        return s == MemberStatus.exiting() || s == MemberStatus.down() || s == MemberStatus.removed();
    }

    /**
     * A member was downed or removed. A downed member (or one removed without leaving)
     * is fenced; one that left gracefully has stopped serving by itself and only leaves
     * the directory.
     */
    private void memberGone(Member m, String what, boolean removed, boolean fence) {
        int id = nodeIdOf(m);
        if (removed) {
            members.remove(m.uniqueAddress());
            unreachable.remove(m.uniqueAddress());
        } else {
            members.put(m.uniqueAddress(), m);
        }
        if (m.uniqueAddress().equals(cluster.selfUniqueAddress())) {
            selfGoing = true;
            selfDowned.accept("this node (" + m.address() + ") was " + what);
            publish();
            return;
        }
        if (selfGoing || cluster.isTerminated()) {
            // this node is leaving: Pekko reports every other member as removed on the way out; they are not gone
            publish();
            return;
        }
        if (id != 0) {
            boolean successorLive = members.values().stream().anyMatch(o -> nodeIdOf(o) == id
                    && !o.uniqueAddress().equals(m.uniqueAddress()) && isLive(o.status()));
            String reason = "member " + m.address() + " (node " + id + ") " + what;
            leftReasons.put(id, reason);
            if (fence) {
                leftGracefully.remove(id);
            } else {
                leftGracefully.add(id);
            }
            Transport t = transport.get();
            if (t != null && !successorLive && fence) {
                fencedMember.put(id, m.uniqueAddress());
                t.fence(id, reason);
            } else if (!fence) {
                LOG.info("{}", reason);
            }
        }
        publish();
    }

    /** Recomputes the live directory: entries whose member (this incarnation) is live. */
    private void publish() {
        java.util.Set<Integer> memoryRole = new java.util.HashSet<>();
        Set<Integer> graceful = new HashSet<>(leftGracefully);
        for (Member m : members.values()) {
            if (isLive(m.status()) && m.hasRole(NODE_ROLE)) {
                memoryRole.add(nodeIdOf(m));
            }
            if (m.status() == MemberStatus.leaving() || m.status() == MemberStatus.exiting()) {
                graceful.add(nodeIdOf(m)); // its entry goes at exiting, before its removal: a leave, not a loss
            }
        }
        directory.apply(liveEntries(members.values(), entries.values()), leftReasons, selfGoing, memoryRole,
                graceful);
    }

    /** The entries whose member (that incarnation: address and uid) is live in {@code members}, by node id. */
    static Map<Integer, NodeEntry> liveEntries(Iterable<Member> members, Iterable<NodeEntry> entries) {
        Map<Integer, NodeEntry> next = new HashMap<>();
        // keyed by address and uid: an old and a new incarnation on the same host:port are both members for a while
        Map<String, Member> byIncarnation = new HashMap<>();
        for (Member m : members) {
            if (isLive(m.status())) {
                byIncarnation.put(m.uniqueAddress().address() + "#" + m.uniqueAddress().longUid(), m);
            }
        }
        for (NodeEntry e : entries) {
            Member m = byIncarnation.get(e.memberAddress() + "#" + e.memberUid());
            if (m != null && nodeIdOf(m) == e.nodeId()) {
                next.put(e.nodeId(), e);
            }
        }
        return next;
    }

    private Replicator.WriteConsistency writeMajority() {
        return new Replicator.WriteMajority(timeout);
    }

    /**
     * Whether this member is the arbiter in its own view (the oldest Up data member).
     * A member that is not refuses to arbitrate, so two members that both see themselves
     * as the arbiter are needed for a double win, not merely two clients whose views
     * of the membership differ during a hand-over.
     */
    private String notArbiter() {
        Member oldest = arbiter(cluster);
        if (oldest != null && oldest.uniqueAddress().equals(cluster.selfUniqueAddress())) {
            return null;
        }
        return "node " + nodeId + " is not the name arbiter (the oldest Up member is "
                + (oldest == null ? "none" : oldest.address()) + "); membership is changing, retry";
    }

    /** The error of a request whose tag is wrong (its sender lacks the cluster secret); logged. */
    private String unauthentic(String what) {
        String sender = getSender().path().address().toString();
        LOG.warn("refused {} from {}: its tag was not made with this cluster's secret (a member with a wrong"
                + " membus.secret?)", what, sender);
        return AUTHENTICATION + " the arbiter (node " + nodeId + ") refused the request: it was not made with this"
                + " cluster's secret";
    }

    /** Prefix of a {@link NameReply} error that is an authentication failure. */
    static final String AUTHENTICATION = "authentication:";

    private void bind(Bind b) {
        ActorRef replyTo = getSender();
        String refused = notArbiter();
        if (refused == null && !macs.bind(b.name(), b.ptr()).matches(b.macHi(), b.macLo())) {
            refused = unauthentic("a bind of name " + b.name());
        }
        if (refused != null) {
            replyTo.tell(new NameReply(0, refused), getSelf());
            return;
        }
        ClusterMessage.NameBinding binding = new ClusterMessage.NameBinding(b.ptr(), b.macHi(), b.macLo());
        CompletionStage<Object> chain = Patterns.ask(replicator,
                        new Replicator.Get<>(NAMES, new Replicator.ReadMajority(timeout)), timeout.multipliedBy(2))
                .thenCompose(got -> {
                    if (got instanceof Replicator.GetFailure) {
                        throw new IllegalStateException("could not read the names from a majority within " + timeout);
                    }
                    // bound = bound by a holder of the secret: a binding with a wrong tag is replaced
                    return Patterns.ask(replicator, new Replicator.Update<LWWMap<String, ClusterMessage.NameBinding>>(
                            NAMES, LWWMap.create(), writeMajority(), m -> m.get(b.name()).isDefined()
                                    && macs.valid(b.name(), m.get(b.name()).get()) ? m : m.put(self, b.name(), binding)),
                            timeout.multipliedBy(2));
                })
                .thenCompose(updated -> {
                    if (!(updated instanceof Replicator.UpdateSuccess)) {
                        throw new IllegalStateException("could not write the binding to a majority within " + timeout
                                + " (" + updated.getClass().getSimpleName() + ")");
                    }
                    return Patterns.ask(replicator, new Replicator.Get<>(NAMES, Replicator.readLocal()), timeout);
                })
                .thenApply(got -> {
                    @SuppressWarnings("unchecked")
                    LWWMap<String, ClusterMessage.NameBinding> m =
                            ((Replicator.GetSuccess<LWWMap<String, ClusterMessage.NameBinding>>) got).dataValue();
                    ClusterMessage.NameBinding bound = m.getEntries().get(b.name());
                    return bound == null ? new NameReply(0, "")
                            : new NameReply(bound.ptr(), "", bound.macHi(), bound.macLo());
                });
        reply(chain, replyTo);
    }

    private void unbind(Unbind u) {
        ActorRef replyTo = getSender();
        String refused = notArbiter();
        if (refused == null && !macs.unbind(u.name(), u.expected()).matches(u.macHi(), u.macLo())) {
            refused = unauthentic("an unbind of name " + u.name());
        }
        if (refused != null) {
            replyTo.tell(new NameReply(0, refused), getSelf());
            return;
        }
        boolean[] had = new boolean[1];
        CompletionStage<Object> chain = Patterns.ask(replicator,
                        new Replicator.Get<>(NAMES, new Replicator.ReadMajority(timeout)), timeout.multipliedBy(2))
                .thenCompose(got -> {
                    if (got instanceof Replicator.GetFailure) {
                        // without the majority's bindings, a name bound elsewhere would be reported as not bound
                        throw new IllegalStateException("could not read the names from a majority within " + timeout);
                    }
                    return Patterns.ask(replicator, new Replicator.Update<LWWMap<String, ClusterMessage.NameBinding>>(
                            NAMES, LWWMap.create(), writeMajority(), m -> {
                    // a binding with a wrong tag was never bound for the cluster: removed, but not reported as unbound;
                    // a compare-and-unbind (expected != 0) removes only the binding to that pointer
                    boolean present = m.get(u.name()).isDefined();
                    boolean matches = present && (u.expected() == 0 || m.get(u.name()).get().ptr() == u.expected());
                    had[0] = matches && macs.valid(u.name(), m.get(u.name()).get());
                    return matches || (present && !macs.valid(u.name(), m.get(u.name()).get()))
                            ? m.remove(self, u.name()) : m;
                }), timeout.multipliedBy(2));
                })
                .thenApply(updated -> {
                    if (!(updated instanceof Replicator.UpdateSuccess)) {
                        throw new IllegalStateException("could not write the removal to a majority within " + timeout);
                    }
                    return new NameReply(had[0] ? 1 : 0, "");
                });
        reply(chain, replyTo);
    }

    private void reply(CompletionStage<?> chain, ActorRef replyTo) {
        chain.whenComplete((r, e) -> {
            if (e != null) {
                Throwable c = e.getCause() != null ? e.getCause() : e;
                replyTo.tell(new NameReply(0, String.valueOf(c.getMessage())), ActorRef.noSender());
            } else {
                replyTo.tell(r, ActorRef.noSender());
            }
        });
    }

    /**
     * Answers a status query: the membership from this actor's state now, then the heap
     * usage, which reads every heap segment's chunk table with remote verbs and so runs
     * off the actor's thread (bounded by the verbs' deadlines).
     */
    private void answerStatus() {
        StatusReply members = status();
        ActorRef replyTo = getSender();
        ActorRef me = getSelf();
        // blocking verbs: on Pekko's blocking-io dispatcher, never on the one that runs heartbeats and gossip
        CompletableFuture.supplyAsync(heapUsage, getContext().getSystem().dispatchers()
                        .lookup(BLOCKING_DISPATCHER))
                .handle((heap, e) -> e == null
                        ? new StatusReply(members.fromNode(), members.leader(), members.members(), members.names(),
                                heap == null ? List.of() : heap.segments(), "", channelRows(), sections.get(),
                                rowsOfGroups())
                        : new StatusReply(members.fromNode(), members.leader(), members.members(), members.names(),
                                List.of(), "heap usage could not be read: " + (e.getCause() != null ? e.getCause() : e),
                                channelRows(), sections.get(), rowsOfGroups()))
                .thenAccept(reply -> replyTo.tell(reply, me));
    }

    /** The replica groups' rows; a failure to take them leaves them out (logged), never the whole reply. */
    private List<ClusterMessage.GroupRow> rowsOfGroups() {
        try {
            return groupRows.get();
        } catch (RuntimeException e) {
            LOG.warn("status: the replica groups' rows could not be taken: {}", e.toString());
            return List.of();
        }
    }

    /** This node's message channels and their counters (empty before the transport is set). */
    private List<ClusterMessage.ChannelRow> channelRows() {
        Transport t = transport.get();
        if (t == null) {
            return List.of();
        }
        List<ClusterMessage.ChannelRow> rows = new ArrayList<>();
        for (io.membus.core.message.ChannelStats c : t.messages().stats()) {
            rows.add(new ClusterMessage.ChannelRow(c.channel(), c.name(), c.messagesIn(), c.bytesIn(), c.messagesOut(),
                    c.bytesOut(), c.errors()));
        }
        return rows;
    }

    private StatusReply status() {
        List<MemberRow> rows = new ArrayList<>();
        Map<Integer, NodeEntry> live = directory.entries();
        for (Member m : members.values()) {
            int id = nodeIdOf(m);
            NodeEntry e = Optional.ofNullable(live.get(id))
                    .filter(x -> x.memberUid() == m.uniqueAddress().longUid()).orElse(null);
            String role = m.hasRole(CLIENT_ROLE) ? "client" : m.hasRole(NODE_ROLE) ? "member" : "observer";
            rows.add(new MemberRow(m.address().toString(), m.status().toString(),
                    !unreachable.contains(m.uniqueAddress()), id, e, role));
        }
        rows.sort((a, b) -> Integer.compare(a.nodeId(), b.nodeId()));
        String leader = cluster.state().getLeader() == null ? "" : cluster.state().getLeader().toString();
        Map<String, Long> n = names.get();
        return new StatusReply(nodeId, leader, rows, n == null ? 0 : n.size());
    }
}
