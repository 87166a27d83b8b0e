package io.membus.core.transport;

import io.membus.core.Segment;
import io.membus.core.directory.PeerInfo;
import io.membus.core.error.DsmClosedException;
import io.membus.core.error.NodeFencedException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.StaleIncarnationException;
import io.membus.core.fault.FaultInjector;
import io.membus.core.transport.message.MessageEndpoint;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.Collection;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * What every transport shares: identity, the exported {@link SegmentTable}, the
 * fenced set, fault injection, the connection cache and the close sequence.
 * Subclasses create segment memory and open connections.
 *
 * <p><b>Note:</b> thread-safe.
 */
public abstract class AbstractTransport implements Transport {
    private static final Logger LOG = LoggerFactory.getLogger(AbstractTransport.class);

    protected final TransportConfig config;
    protected final SegmentTable table;
    private final FaultInjector faults = new FaultInjector();
    private final MessageEndpoint messages;
    private final Map<Integer, String> fenced = new ConcurrentHashMap<>();
    private final Map<Integer, CompletableFuture<Connection>> connections = new ConcurrentHashMap<>();
    private volatile boolean closed;
    private volatile VerbObserver observer = VerbObserver.NONE;
    private final AtomicBoolean closeOnce = new AtomicBoolean();

    protected AbstractTransport(TransportConfig config) {
        this.config = config;
        this.table = new SegmentTable(config.nodeId());
        this.messages = new MessageEndpoint(config, this::fenceReason);
    }

    @Override
    public MessageEndpoint messages() {
        return messages;
    }

    @Override
    public int nodeId() {
        return config.nodeId();
    }

    @Override
    public long incarnation() {
        return config.incarnation();
    }

    public TransportConfig config() {
        return config;
    }

    @Override
    public SegmentTable table() {
        return table;
    }

    @Override
    public FaultInjector faults() {
        return faults;
    }

    /** Where this transport's connections report their verbs' outcomes ({@link VerbObserver#NONE} by default). */
    public VerbObserver observer() {
        return observer;
    }

    /** Verbs issued and not completed on the open connection to {@code peer} (0 without one); for metrics. */
    public int inFlight(int peer) {
        CompletableFuture<Connection> c = connections.get(peer);
        return c != null && c.isDone() && !c.isCompletedExceptionally() ? c.join().inFlight() : 0;
    }

    /** Installs the observer the connections report to; set it before connecting (connections read it then). */
    public void observe(VerbObserver observer) {
        this.observer = java.util.Objects.requireNonNull(observer, "observer");
    }

    /**
     * Creates (does not yet publish) the memory of a segment. By default: a
     * file-backed segment when the spec names a file, else native memory of
     * this process (what a transport whose peers never map it needs).
     */
    protected Segment createSegment(SegmentSpec spec) {
        if (spec.file() != null) {
            return Segment.createOrOpenFile(spec.file(), nodeId(), incarnation(), spec.index(), spec.size(),
                    spec.flags(), false);
        }
        return Segment.allocate(nodeId(), incarnation(), spec.index(), spec.size(), spec.flags());
    }

    /**
     * For a transport whose replication is {@link io.membus.core.capability.ReplicationSupport#ADOPTION}
     * ({@code shm}): takes over the memory of {@code dead}, a node membership removed, and serves
     * it from now on (docs/replication.md §8); returns the logical segments adopted (their
     * descriptors name {@code dead}'s node, or the nodes it had adopted in turn). Exactly one
     * survivor adopts; the others get {@link io.membus.core.error.NotPrimaryException} naming it
     * ({@code primaryHint()}). Nothing is adopted, and {@link io.membus.core.error.NodeUnavailableException}
     * (not sent) says why, while {@code dead}'s process may still write into its memory: call again
     * later. By {@code deadlineNanos} ({@link System#nanoTime()} scale). This default refuses.
     *
     * @throws io.membus.core.error.TransportUnavailableException when this transport does not adopt
     */
    public java.util.List<io.membus.core.SegmentDescriptor> adopt(PeerInfo dead, long deadlineNanos) {
        throw new io.membus.core.error.TransportUnavailableException(name(), "transport " + name() + " does not adopt"
                + " a dead node's segments (replication " + capabilities().replication() + "): node " + dead.nodeId()
                + "'s memory is served by its copies, or lost");
    }

    /** Opens a new connection to a peer that is not fenced; completes within the connect timeout. */
    protected abstract CompletableFuture<Connection> open(PeerInfo peer);

    /** Called after a segment is published or withdrawn (e.g. to rewrite a registry). */
    protected void segmentsChanged() {
    }

    @Override
    public Segment export(SegmentSpec spec) {
        checkNotClosed();
        if (table.get(spec.index()) != null) {
            throw new IllegalStateException("segment index taken: node=" + nodeId() + ", segment=" + spec.index()
                    + "; unexport it first or choose another index");
        }
        Segment segment = createSegment(spec);
        try {
            table.add(segment);
        } catch (RuntimeException e) {
            segment.close(false);
            throw e;
        }
        segmentsChanged();
        return segment;
    }

    @Override
    public boolean unexport(int index, boolean keepFile) {
        Segment segment = table.remove(index);
        if (segment == null) {
            return false;
        }
        segmentsChanged();
        segment.close(keepFile);
        return true;
    }

    @Override
    public Collection<Segment> segments() {
        return table.all();
    }

    @Override
    public CompletableFuture<Connection> connect(PeerInfo peer) {
        if (closed) {
            return CompletableFuture.failedFuture(closedException());
        }
        String reason = fenced.get(peer.nodeId());
        if (reason != null) {
            return CompletableFuture.failedFuture(NodeFencedException.notSent(peer.nodeId(), "fenced: " + reason));
        }
        CompletableFuture<Connection> existing = connections.get(peer.nodeId());
        if (existing != null) {
            if (!existing.isDone()) {
                return existing;
            }
            // a future that failed (its attempt is being removed by another thread, or a caller completed or
            // cancelled the future it was handed) is replaced by a new attempt: getNow would throw its error
            Connection c = existing.isCompletedExceptionally() ? null : existing.getNow(null);
            if (c != null && c.isOpen() && c.peer().incarnation() == peer.incarnation()) {
                return existing;
            }
            if (c != null && c.peer().incarnation() > peer.incarnation()) {
                return CompletableFuture.failedFuture(new StaleIncarnationException(peer.nodeId(),
                        peer.incarnation(), c.peer().incarnation()));
            }
            connections.remove(peer.nodeId(), existing);
            if (c != null) {
                c.close();
            }
        }
        CompletableFuture<Connection> created = new CompletableFuture<>();
        CompletableFuture<Connection> raced = connections.putIfAbsent(peer.nodeId(), created);
        if (raced != null) {
            return raced;
        }
        if (closed) {
            // close() ran since the check above and may have cleared the map before this attempt was in it: nobody
            // would close what it opens (close() sets the flag before it walks the map, so one of the two sees it)
            connections.remove(peer.nodeId(), created);
            created.completeExceptionally(closedException());
            return created;
        }
        open(peer).whenComplete((c, e) -> {
            if (e != null) {
                connections.remove(peer.nodeId(), created);
                created.completeExceptionally(e instanceof java.util.concurrent.CompletionException && e.getCause() != null
                        ? e.getCause() : e);
            } else {
                created.complete(c);
            }
        });
        return created;
    }

    /** The open connections, for subclasses that must reach them (close, fence). */
    protected Collection<CompletableFuture<Connection>> connections() {
        return connections.values();
    }

    @Override
    public void fence(int nodeId, String reason) {
        if (fenced.putIfAbsent(nodeId, reason) != null) {
            return;
        }
        LOG.warn("fencing node {}: {}", nodeId, reason);
        CompletableFuture<Connection> c = connections.remove(nodeId);
        if (c != null) {
            c.thenAccept(conn -> conn.close("fenced: " + reason));
        }
        fenced(nodeId, reason);
    }

    @Override
    public void unfence(int nodeId) {
        if (fenced.remove(nodeId) != null) {
            LOG.info("lifting the fence of node {}", nodeId);
        }
    }

    /** Hook for a transport to drop its server side of a fenced node. */
    protected void fenced(int nodeId, String reason) {
    }


    @Override
    public boolean isFenced(int nodeId) {
        return fenced.containsKey(nodeId);
    }

    /** The reason a node was fenced, or {@code null}. */
    public String fenceReason(int nodeId) {
        return fenced.get(nodeId);
    }

    @Override
    public boolean isClosed() {
        return closed;
    }

    /** What a use of this transport after its close fails with. */
    public DsmClosedException closedException() {
        return new DsmClosedException("transport " + name() + " of node " + nodeId());
    }

    protected void checkNotClosed() {
        if (closed) {
            throw closedException();
        }
    }

    /**
     * Hook run by {@link #close()} after connections and the message endpoint are
     * closed and before segments are.
     */
    protected void closeTransport() {
    }

    /** Whether segment files are kept on close (persistent segments). */
    protected boolean keepFilesOnClose(Segment segment) {
        return segment.file() != null;
    }

    @Override
    public void close() {
        if (!closeOnce.compareAndSet(false, true)) {
            return; // closed, or being closed by another thread: its caller owns the sequence
        }
        closed = true;
        for (CompletableFuture<Connection> c : connections.values()) {
            c.thenAccept(conn -> conn.close("the initiator's transport closed"));
        }
        connections.clear();
        messages.close(); // answers what waits in inboxes while the transport can still carry answers
        closeTransport();
        for (Segment s : table.all()) {
            table.remove(s.index());
            s.close(keepFilesOnClose(s));
        }
        segmentsChanged();
    }

    /** The set of fenced nodes (a snapshot). */
    public Set<Integer> fencedNodes() {
        return Set.copyOf(fenced.keySet());
    }
}
