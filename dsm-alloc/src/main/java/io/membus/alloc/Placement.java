package io.membus.alloc;

/**
 * Where an allocation goes: this node's heap, the heaps of all members in turn,
 * one named node's heap, or a node chosen from a key's hash.
 *
 * <ul>
 *   <li>{@link #local()}: this node's heap segments only.</li>
 *   <li>{@link #roundRobin()}: the next member (by node id) that has heap segments;
 *       a member whose heap is full is skipped.</li>
 *   <li>{@link #node(int)}: that node's heap segments only.</li>
 *   <li>{@link #byKey(long)}: rendezvous hashing of the key over the members with heap
 *       segments, so a membership change moves only the keys of the node that came or
 *       went; when the chosen node is full the next one in the key's order is used.</li>
 * </ul>
 *
 * <p><b>Note:</b> immutable value; thread-safe: every field is final, so any
 * publication makes it fully visible (final-field semantics); no other memory ordering.
 */
public final class Placement {
    /** The kinds of placement. */
    public enum Kind { LOCAL, ROUND_ROBIN, NODE, KEY }

    private static final Placement LOCAL = new Placement(Kind.LOCAL, 0);
    private static final Placement ROUND_ROBIN = new Placement(Kind.ROUND_ROBIN, 0);

    private final Kind kind;
    private final long arg;

    private Placement(Kind kind, long arg) {
        this.kind = kind;
        this.arg = arg;
    }

    public static Placement local() {
        return LOCAL;
    }

    public static Placement roundRobin() {
        return ROUND_ROBIN;
    }

    public static Placement node(int nodeId) {
        return new Placement(Kind.NODE, nodeId);
    }

    /** Spread by a 64-bit key hash. */
    public static Placement byKey(long keyHash) {
        return new Placement(Kind.KEY, keyHash);
    }

    /** Spread by {@code key.hashCode()}, mixed. */
    public static Placement byKey(Object key) {
        return byKey(mix(key.hashCode()));
    }

    public Kind kind() {
        return kind;
    }

    /** The node of {@link Kind#NODE}. */
    public int nodeId() {
        return (int) arg;
    }

    /** The key hash of {@link Kind#KEY}. */
    public long keyHash() {
        return arg;
    }

    /** The rendezvous score of {@code nodeId} for a key; the highest score wins. */
    static long score(long keyHash, int nodeId) {
        return mix(keyHash ^ (nodeId * 0x9E3779B97F4A7C15L));
    }

    static long mix(long z) {
        z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
        z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
        return z ^ (z >>> 31);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Placement p && p.kind == kind && p.arg == arg;
    }

    @Override
    public int hashCode() {
        return kind.hashCode() * 31 + Long.hashCode(arg);
    }

    @Override
    public String toString() {
        return switch (kind) {
            case LOCAL -> "local";
            case ROUND_ROBIN -> "round-robin";
            case NODE -> "node(" + arg + ")";
            case KEY -> "key(0x" + Long.toHexString(arg) + ")";
        };
    }
}
