package io.membus.cluster;

import io.membus.alloc.GlobalAllocator;
import io.membus.alloc.HeapUsage;
import io.membus.core.transport.Transport;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import org.apache.pekko.actor.AbstractActor;
import org.apache.pekko.actor.Props;
import org.apache.pekko.cluster.Cluster;
import org.apache.pekko.cluster.ClusterEvent;
import org.apache.pekko.cluster.Member;
import org.apache.pekko.cluster.UniqueAddress;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.ToDoubleFunction;

/**
 * The node's own meters beyond the verbs (docs/metrics.md): its exported segments, its
 * heap segments' chunk tables, and membership (changes seen, members by role).
 *
 * <p><b>Note:</b> thread-safe. Gauges are read by registry threads (a JMX poll, a
 * scrape); a heap segment's reading is kept for {@link #HEAP_READING_NANOS} so one poll
 * of its six gauges reads the chunk table once (a volatile reference to an immutable
 * reading). Membership is counted by one actor ({@link Membership}) into
 * {@link LongAdder}s and a concurrent map that the gauges read.
 */
final class NodeMeters {
    /** How long a heap segment's reading serves its gauges. */
    static final long HEAP_READING_NANOS = 1_000_000_000L;

    private NodeMeters() {
    }

    /** {@code membus.segment.size} of every segment this node exports. */
    static void bindSegments(MeterRegistry registry, Transport transport, int count) {
        for (int i = 0; i < count; i++) {
            int index = i;
            Gauge.builder("membus.segment.size", transport, t -> {
                        var s = t.table().get(index);
                        return s == null ? Double.NaN : s.size();
                    })
                    .tag("segment", Integer.toString(i)).baseUnit("bytes")
                    .description("bytes in this node's exported segment").register(registry);
        }
    }

    /**
     * {@code membus.channel.messages}, {@code .bytes} (direction in or out) and
     * {@code .errors} of every message channel registered on {@code transport} now (a
     * channel registered later is metered by calling this again; meters already there
     * are kept). The coherence layer's invalidations are channel
     * {@code coherence-invalidate}: out counts those this node sent, in those it received.
     */
    static void bindChannels(MeterRegistry registry, Transport transport) {
        for (io.membus.core.message.ChannelStats c : transport.messages().stats()) {
            int channel = c.channel();
            Tags tags = Tags.of("channel", c.name());
            channelCounter(registry, "membus.channel.messages", tags.and("direction", "in"), transport, channel,
                    ChannelStats -> ChannelStats.messagesIn(), null);
            channelCounter(registry, "membus.channel.messages", tags.and("direction", "out"), transport, channel,
                    ChannelStats -> ChannelStats.messagesOut(), null);
            channelCounter(registry, "membus.channel.bytes", tags.and("direction", "in"), transport, channel,
                    ChannelStats -> ChannelStats.bytesIn(), "bytes");
            channelCounter(registry, "membus.channel.bytes", tags.and("direction", "out"), transport, channel,
                    ChannelStats -> ChannelStats.bytesOut(), "bytes");
            channelCounter(registry, "membus.channel.errors", tags, transport, channel,
                    ChannelStats -> ChannelStats.errors(), null);
        }
    }

    private static void channelCounter(MeterRegistry registry, String name, Tags tags, Transport transport,
                                       int channel, ToDoubleFunction<io.membus.core.message.ChannelStats> f,
                                       String unit) {
        FunctionCounter.builder(name, transport, t -> {
            for (io.membus.core.message.ChannelStats c : t.messages().stats()) {
                if (c.channel() == channel) {
                    return f.applyAsDouble(c);
                }
            }
            return 0;
        }).tags(tags).baseUnit(unit).register(registry);
    }

    /** The chunk table of each of this node's heap segments, as gauges. */
    static void bindHeap(MeterRegistry registry, GlobalAllocator allocator, Iterable<Integer> segments) {
        for (int segment : segments) {
            HeapReading r = new HeapReading(allocator, segment);
            Tags tags = Tags.of("segment", Integer.toString(segment));
            gauge(registry, "membus.heap.chunks", tags.and("state", "total"), r, u -> u.chunks(), "chunks");
            gauge(registry, "membus.heap.chunks", tags.and("state", "free"), r, u -> u.freeChunks(), "chunks");
            gauge(registry, "membus.heap.chunks", tags.and("state", "small"), r, u -> u.smallChunks(), "chunks");
            gauge(registry, "membus.heap.chunks", tags.and("state", "large"), r, u -> u.largeChunks(), "chunks");
            gauge(registry, "membus.heap.claimed", tags, r, u -> u.usedBytes(), "bytes");
            gauge(registry, "membus.heap.blocks", tags.and("state", "used"), r, u -> u.blocksInUse(), "blocks");
            gauge(registry, "membus.heap.blocks", tags.and("state", "free"), r, u -> u.blocksFree(), "blocks");
        }
    }

    private static void gauge(MeterRegistry registry, String name, Tags tags, HeapReading r,
                              ToDoubleFunction<HeapUsage.SegmentUsage> f, String unit) {
        Gauge.builder(name, r, x -> {
            HeapUsage.SegmentUsage u = x.get();
            return u == null ? Double.NaN : f.applyAsDouble(u);
        }).tags(tags).baseUnit(unit).strongReference(true).register(registry); // the reading lives with its gauges
    }

    /** One heap segment's usage, read again when the last reading is older than {@link #HEAP_READING_NANOS}. */
    private static final class HeapReading {
        private final GlobalAllocator allocator;
        private final int segment;
        private volatile HeapUsage.SegmentUsage last;
        private volatile long readAt;

        HeapReading(GlobalAllocator allocator, int segment) {
            this.allocator = allocator;
            this.segment = segment;
        }

        HeapUsage.SegmentUsage get() {
            long now = System.nanoTime();
            HeapUsage.SegmentUsage u = last;
            if (u == null || now - readAt > HEAP_READING_NANOS) {
                try {
                    u = allocator.localUsage(segment);
                } catch (RuntimeException e) {
                    return null; // a closed allocator: NaN
                }
                last = u;
                readAt = now;
            }
            return u.problem() == null ? u : null;
        }
    }

    /** The membership counters and the live members by role, kept by {@link Membership}. */
    static final class MembershipCounts {
        final Map<String, LongAdder> events = new ConcurrentHashMap<>();
        /** Live members (Up, WeaklyUp, Leaving) seen now, with their role (member or client). */
        final Map<UniqueAddress, String> live = new ConcurrentHashMap<>();
        final Map<UniqueAddress, Boolean> unreachable = new ConcurrentHashMap<>();

        void count(String event) {
            events.computeIfAbsent(event, e -> new LongAdder()).increment();
        }

        long events(String event) {
            LongAdder a = events.get(event);
            return a == null ? 0 : a.sum();
        }

        long members(String role) {
            return live.values().stream().filter(role::equals).count();
        }

        void bind(MeterRegistry registry) {
            for (String e : new String[]{"up", "left", "removed", "downed", "unreachable", "reachable"}) {
                FunctionCounter.builder("membus.membership.changes", this, c -> c.events(e)).tag("event", e)
                        .description("membership changes this node saw since it started").register(registry);
            }
            for (String role : new String[]{"member", "client"}) {
                Gauge.builder("membus.members", this, c -> c.members(role)).tag("role", role)
                        .description("live members (Up, WeaklyUp, Leaving) as this node sees them").register(registry);
            }
            Gauge.builder("membus.members.unreachable", this, c -> c.unreachable.size())
                    .description("members the failure detector marks unreachable").register(registry);
        }
    }

    static String roleOf(Member m) {
        return m.hasRole(ClusterAgent.CLIENT_ROLE) ? "client" : "member";
    }

    /**
     * Follows membership for the meters: the state when it starts (not counted as changes),
     * then every member event and reachability change.
     *
     * <p><b>Note:</b> an actor: one message at a time; it writes only concurrent maps and adders.
     */
    static final class Membership extends AbstractActor {
        private final MembershipCounts counts;
        private final Cluster cluster = Cluster.get(getContext().getSystem());

        private Membership(MembershipCounts counts) {
            this.counts = counts;
        }

        static Props props(MembershipCounts counts) {
            return Props.create(Membership.class, () -> new Membership(counts));
        }

        @Override
        public void preStart() {
            cluster.subscribe(getSelf(), ClusterEvent.initialStateAsSnapshot(), ClusterEvent.MemberEvent.class,
                    ClusterEvent.ReachabilityEvent.class);
        }

        @Override
        public void postStop() {
            cluster.unsubscribe(getSelf());
        }

        @Override
        public Receive createReceive() {
            return receiveBuilder()
                    .match(ClusterEvent.CurrentClusterState.class, s -> {
                        for (Member m : s.getMembers()) {
                            if (ClusterAgent.isLive(m.status())) {
                                counts.live.put(m.uniqueAddress(), roleOf(m));
                            }
                        }
                        for (Member m : s.getUnreachable()) {
                            counts.unreachable.put(m.uniqueAddress(), true);
                        }
                    })
                    .match(ClusterEvent.MemberUp.class, e -> {
                        counts.count("up");
                        counts.live.put(e.member().uniqueAddress(), roleOf(e.member()));
                    })
                    .match(ClusterEvent.MemberWeaklyUp.class, e -> counts.live.put(e.member().uniqueAddress(),
                            roleOf(e.member())))
                    .match(ClusterEvent.MemberLeft.class, e -> counts.count("left"))
                    .match(ClusterEvent.MemberDowned.class, e -> {
                        counts.count("downed");
                        counts.live.remove(e.member().uniqueAddress());
                    })
                    .match(ClusterEvent.MemberExited.class, e -> counts.live.remove(e.member().uniqueAddress()))
                    .match(ClusterEvent.MemberRemoved.class, e -> {
                        counts.count("removed");
                        counts.live.remove(e.member().uniqueAddress());
                        counts.unreachable.remove(e.member().uniqueAddress());
                    })
                    .match(ClusterEvent.UnreachableMember.class, e -> {
                        counts.count("unreachable");
                        counts.unreachable.put(e.member().uniqueAddress(), true);
                    })
                    .match(ClusterEvent.ReachableMember.class, e -> {
                        counts.count("reachable");
                        counts.unreachable.remove(e.member().uniqueAddress());
                    })
                    .matchAny(e -> {
                    })
                    .build();
        }
    }
}
