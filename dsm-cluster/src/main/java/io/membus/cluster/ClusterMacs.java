package io.membus.cluster;

import io.membus.cluster.ClusterMessage.NodeEntry;

import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;

/**
 * Message authentication of what members replicate and ask, under keys derived from the
 * cluster secret: name bindings and unbind requests ({@link ClusterNames}, the arbiter in
 * {@link ClusterAgent}) and directory entries. Defence in depth beside membership TLS:
 * when a member without the secret is in the cluster anyway ({@code
 * membus.security.authenticate = off}), every node ignores the bindings and entries it
 * writes and the arbiter refuses its requests.
 *
 * <p>A tag is HMAC-SHA256 truncated to 128 bits, kept as two longs so the replicated
 * records compare by value.
 *
 * <p><b>Note:</b> immutable; thread-safe ({@link Mac} instances are per call).
 */
final class ClusterMacs {
    private final byte[] namesKey;
    private final byte[] entriesKey;

    ClusterMacs(ClusterSecret secret) {
        this.namesKey = secret.derive("membus-names/1");
        this.entriesKey = secret.derive("membus-directory/1");
    }

    /** A 128-bit tag. */
    record Tag(long hi, long lo) {
        boolean matches(long h, long l) {
            // constant time: no early exit on the first differing word
            return ((hi ^ h) | (lo ^ l)) == 0;
        }
    }

    Tag bind(String name, long ptr) {
        return tag(namesKey, "bind", name, ptr);
    }

    /** The tag of an unbind of {@code name}: unconditional when {@code expected} is 0, else only from that pointer. */
    Tag unbind(String name, long expected) {
        return tag(namesKey, "unbind", name, expected);
    }

    /** Whether {@code b} was bound to {@code name} by a holder of the secret. */
    boolean valid(String name, ClusterMessage.NameBinding b) {
        return bind(name, b.ptr()).matches(b.macHi(), b.macLo());
    }

    /** The tag of the {@code membus-system} register's value: the name table's pointer (0: the arbiter keeps names). */
    Tag system(long table) {
        return tag(namesKey, "system", "membus-system", table);
    }

    /** The tag of a directory entry: over its serialized fields, without the tag. */
    Tag entry(NodeEntry e) {
        return tag(entriesKey, "entry", ClusterSerializer.entryBytes(e), 0);
    }

    boolean valid(NodeEntry e) {
        return entry(e).matches(e.macHi(), e.macLo());
    }

    private static Tag tag(byte[] key, String label, String text, long value) {
        return tag(key, label, text.getBytes(StandardCharsets.UTF_8), value);
    }

    private static Tag tag(byte[] key, String label, byte[] body, long value) {
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(key, "HmacSHA256"));
            byte[] l = label.getBytes(StandardCharsets.US_ASCII);
            mac.update(ByteBuffer.allocate(4).putInt(l.length).array());
            mac.update(l);
            mac.update(ByteBuffer.allocate(4).putInt(body.length).array());
            mac.update(body);
            mac.update(ByteBuffer.allocate(8).putLong(value).array());
            ByteBuffer out = ByteBuffer.wrap(mac.doFinal());
            return new Tag(out.getLong(), out.getLong());
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("HmacSHA256 is part of every JDK", e);
        }
    }
}
