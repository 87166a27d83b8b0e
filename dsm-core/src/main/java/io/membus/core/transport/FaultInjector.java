package io.membus.core.transport;

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
    private volatile boolean active;

    /** Whether any rule is set: the fast-path test. */
    public boolean active() {
        return active;
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
    }

    private void set(int peerNodeId, Rule rule) {
        rules.put(peerNodeId, rule);
        active = true;
    }
}
