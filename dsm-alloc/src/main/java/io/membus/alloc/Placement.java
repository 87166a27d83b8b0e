package io.membus.alloc;

import io.membus.core.error.DsmConfigException;
import java.nio.charset.StandardCharsets;
import java.util.UUID;

/**
 * Where an allocation goes: this node's heap, the heaps of all members in turn,
 * one named node's heap, a node chosen from a key's hash, or this node's heap first
 * and a node chosen from a key's hash when it is full.
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
    public enum Kind { LOCAL, ROUND_ROBIN, NODE, KEY, LOCAL_FIRST }

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

    /**
     * This node's heap first; when it is full (or this node exports no heap), the other
     * members in the rendezvous order of the 64-bit {@code keyHash}, as {@link #byKey(long)}.
     */
    public static Placement localFirst(long keyHash) {
        return new Placement(Kind.LOCAL_FIRST, keyHash);
    }

    /** Spread by the UTF-8 bytes of {@code key}: the same node in every JVM. */
    public static Placement byKey(String key) {
        return byKey(stableHash(key.getBytes(StandardCharsets.UTF_8)));
    }

    /** Spread by the bytes of {@code key}: the same node in every JVM. */
    public static Placement byKey(byte[] key) {
        return byKey(stableHash(key));
    }

    /**
     * Spread by a key whose hash is the same in every JVM: strings and other
     * {@link CharSequence}s, the boxed integral numbers, {@link Character},
     * {@link Boolean}, {@link UUID}, enums (by name) and {@code byte[]}. Any other
     * type is refused: its {@code hashCode} may be an identity hash that differs
     * between JVMs, which would place one key on different nodes. Hash such keys
     * yourself (e.g. their encoded bytes) and use {@link #byKey(long)}.
     *
     * @throws DsmConfigException for a key type without a JVM-independent hash (names the type and the types allowed)
     */
    public static Placement byKey(Object key) {
        if (key instanceof CharSequence cs) {
            return byKey(cs.toString());
        } else if (key instanceof Long || key instanceof Integer || key instanceof Short || key instanceof Byte) {
            return byKey(mix(((Number) key).longValue()));
        } else if (key instanceof Character c) {
            return byKey(mix(c));
        } else if (key instanceof Boolean b) {
            return byKey(mix(b ? 1 : 0));
        } else if (key instanceof UUID u) {
            return byKey(mix(u.getMostSignificantBits() ^ mix(u.getLeastSignificantBits())));
        } else if (key instanceof Enum<?> e) {
            return byKey(e.getDeclaringClass().getName() + "." + e.name());
        } else if (key instanceof byte[] b) {
            return byKey(b);
        }
        throw new DsmConfigException("placement key type", key == null ? "null" : key.getClass().getName(),
                "String, a number, Character, Boolean, UUID, an enum or byte[] (this type's hashCode is not known to"
                + " be the same in every JVM, so the key could be placed on different nodes); or pass a stable 64-bit"
                + " hash with Placement.byKey(long)");
    }

    /**
     * The node {@link #byKey(String) byKey(key)} places on when {@code nodes} are the
     * members with heaps and the first choice has room: the highest rendezvous score
     * (the order {@link GlobalAllocator} tries them in). The same in every JVM; lets a
     * caller pick names that spread over given nodes.
     *
     * @throws DsmConfigException when {@code nodes} is empty
     */
    public static int homeOf(String key, int... nodes) {
        if (nodes.length == 0) {
            throw new DsmConfigException("nodes to place key=" + key + " on", "[] (none)", "one or more node ids");
        }
        long hash = stableHash(key.getBytes(StandardCharsets.UTF_8));
        int best = nodes[0];
        for (int n : nodes) {
            if (Long.compareUnsigned(score(hash, n), score(hash, best)) > 0) {
                best = n;
            }
        }
        return best;
    }

    /** FNV-1a over the bytes, then mixed: the same in every JVM. */
    static long stableHash(byte[] bytes) {
        long h = 0xcbf29ce484222325L;
        for (byte b : bytes) {
            h ^= b & 0xff;
            h *= 0x100000001b3L;
        }
        return mix(h);
    }

    public Kind kind() {
        return kind;
    }

    /** The node of {@link Kind#NODE}. */
    public int nodeId() {
        return (int) arg;
    }

    /** The key hash of {@link Kind#KEY} and {@link Kind#LOCAL_FIRST}. */
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
            case LOCAL_FIRST -> "local-first(key 0x" + Long.toHexString(arg) + ")";
        };
    }
}
