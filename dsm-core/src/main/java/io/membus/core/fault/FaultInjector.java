package io.membus.core.fault;

import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Faults a test injects into one node's transport: delay or drop the verbs
 * between this node and a peer, in both directions (a transport applies a rule to
 * the verbs it sends to the peer and, where it serves verbs, to the verbs it
 * receives from the peer). A partition between nodes A and B is
 * {@code a.faults().drop(B)} plus {@code b.faults().drop(A)}.
 *
 * <p>A dropped verb is never executed and is never answered: its initiator sees
 * the deadline fire. A delayed verb keeps its place in its connection's order.
 *
 * <p>Off and free in production: transports test {@link #active()} (one volatile
 * read) before anything else.
 *
 * <p><b>Note:</b> thread-safe; rules take effect for verbs issued after the call
 * returns.
 */
public final class FaultInjector {
    /** {@link #holdNanos}'s answer for a verb a rule drops: never posted, its deadline fires. */
    public static final long DROP = -1;

    /**
     * What happens to verbs between this node and one peer.
     *
     * @param delay how long each verb is held before it is executed (zero: none)
     * @param drop  whether verbs are dropped
     */
    public record Rule(Duration delay, boolean drop) {
        public long delayNanos() {
            return delay.toNanos();
        }
    }

    private final Map<Integer, Rule> rules = new ConcurrentHashMap<>();
    private final Map<Integer, StreamRule> streams = new ConcurrentHashMap<>();
    private volatile boolean active;
    private volatile boolean streamsActive;

    /**
     * Faults of the replication streams between this node and {@code peerNodeId}
     * (see docs/replication.md, "local"): {@link StreamRule#hold()} and
     * {@link StreamRule#cutAfter(int)} act on the stream this node sends to the peer as
     * a group's primary; {@link StreamRule#skip(long)} acts on the effects this node
     * receives from the peer as a copy (the planted fault: acknowledged, not applied).
     * The rule is created on first use and stays until {@link #clear()} or
     * {@link StreamRule#heal()}.
     */
    public StreamRule stream(int peerNodeId) {
        StreamRule r = streams.computeIfAbsent(peerNodeId, n -> new StreamRule());
        streamsActive = true;
        return r;
    }

    /** The stream rule for a peer, or {@code null}: one volatile read when no stream rule was ever set. */
    public StreamRule streamRule(int peerNodeId) {
        return streamsActive ? streams.get(peerNodeId) : null;
    }

    /**
     * What a test does to one replication stream. Every method takes effect for
     * messages built after it returns.
     *
     * <p><b>Note:</b> thread-safe (volatile fields; listeners run on the caller's thread).
     */
    public static final class StreamRule {
        private volatile boolean held;
        private volatile int cutAfter = -1;
        private volatile long skipSeq = -1;
        private final java.util.List<Runnable> onRelease = new java.util.concurrent.CopyOnWriteArrayList<>();

        /** The primary keeps the effects for this copy in its buffer and sends none (a slow copy). */
        public StreamRule hold() {
            held = true;
            return this;
        }

        /** Ends {@link #hold()}: the buffered effects go out. */
        public StreamRule release() {
            held = false;
            onRelease.forEach(Runnable::run);
            return this;
        }

        /** The primary sends at most {@code messages} more stream messages to this copy, then none ever (it "died"). */
        public StreamRule cutAfter(int messages) {
            if (messages < 0) {
                throw new IllegalArgumentException("cutAfter needs messages >= 0: " + messages);
            }
            cutAfter = messages;
            return this;
        }

        /** The copy acknowledges the effect of sequence {@code seq} (of any group from this peer) without applying it. */
        public StreamRule skip(long seq) {
            if (seq < 1) {
                throw new IllegalArgumentException("skip needs a sequence >= 1: " + seq);
            }
            skipSeq = seq;
            return this;
        }

        /** Removes every fault of this rule (a held stream is released). */
        public StreamRule heal() {
            cutAfter = -1;
            skipSeq = -1;
            return release();
        }

        /** Whether the stream may send a message now; counts the message against {@link #cutAfter}. */
        public synchronized boolean trySend() {
            if (held || cutAfter == 0) {
                return false;
            }
            if (cutAfter > 0) {
                cutAfter--;
            }
            return true;
        }

        /** Whether the copy must skip (acknowledge without applying) the effect of {@code seq}. */
        public boolean skips(long seq) {
            return skipSeq == seq;
        }

        /** Runs {@code r} whenever the rule is released (the stream flushes then). */
        public void onRelease(Runnable r) {
            onRelease.add(r);
        }
    }

    /** Whether any rule is set: the fast-path test. */
    public boolean active() {
        return active;
    }

    /**
     * What a verb to {@code peerNodeId} gets from the rules, in the form the verb pipeline's
     * {@code issue} takes: 0 (no rule), a delay in nanoseconds, or {@link #DROP}.
     */
    public long holdNanos(int peerNodeId) {
        if (!active) {
            return 0;
        }
        return hold(rules.get(peerNodeId), null);
    }

    /**
     * The hold of two rules applied together (the initiator's and the target's, either may be
     * {@code null}): {@link #DROP} when either drops, else the sum of their delays in nanoseconds.
     */
    public static long hold(Rule mine, Rule theirs) {
        if ((mine != null && mine.drop()) || (theirs != null && theirs.drop())) {
            return DROP;
        }
        return (mine != null ? mine.delayNanos() : 0) + (theirs != null ? theirs.delayNanos() : 0);
    }

    /** The rule for a peer, or {@code null}. */
    public Rule rule(int peerNodeId) {
        return active ? rules.get(peerNodeId) : null;
    }

    /** Holds every verb to or from {@code peerNodeId} for {@code delay}. */
    public void delay(int peerNodeId, Duration delay) {
        set(peerNodeId, new Rule(delay, false));
    }

    /** Drops every verb to or from {@code peerNodeId}. */
    public void drop(int peerNodeId) {
        set(peerNodeId, new Rule(Duration.ZERO, true));
    }

    /** Removes the rule for {@code peerNodeId}. */
    public void heal(int peerNodeId) {
        rules.remove(peerNodeId);
        active = !rules.isEmpty();
    }

    /** Removes every rule. */
    public void clear() {
        rules.clear();
        active = false;
        streams.values().forEach(StreamRule::heal);
    }

    private void set(int peerNodeId, Rule rule) {
        rules.put(peerNodeId, rule);
        active = true;
    }
}
