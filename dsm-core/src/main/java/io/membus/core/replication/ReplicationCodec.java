package io.membus.core.replication;

import io.membus.core.Words;
import io.membus.core.error.ProtocolException;

/**
 * The binary layout (little-endian, {@link Words}) of the replication channel's
 * messages. A stream message carries a run of consecutive records of one
 * (primary node, copy node) stream; its reply carries the copy's acknowledgement.
 *
 * <pre>
 * STREAM  type u8=1 | streamId i64 | firstRecord i64 | count i32 | records...
 *   EFFECT u8=1 | group i32 | epoch i64 | seq i64 | offset i64 | length i32 | last u8 | bytes[length]
 *   CHUNK  u8=2 | group i32 | epoch i64 | seq i64 | offset i64 | length i32 | bytes[length]
 *   JOIN   u8=3 | group i32 | epoch i64 | startSeq i64 | size i64 | flags i32 | remoteKey i64
 *   DONE   u8=4 | group i32 | epoch i64 | lastSeq i64
 *   DROP   u8=5 | group i32 | epoch i64
 * ACK     type u8=2 | streamId i64 | appliedRecord i64 | gap u8 | count i32 | (group i32 | status u8 | epoch i64 | applied i64 | inSync u8)...
 *   appliedRecord: the last record of the stream the copy processed (applied or refused);
 *   gap 1: the message did not start at appliedRecord + 1 and was not processed (resend from there)
 * FENCE   type u8=3 | group i32 | ballot i64               (reply STATE)
 * STATE   type u8=4 | status u8 | epoch i64 | applied i64
 * LEAVING  type u8=5                                        (reply STATE: the sender, leaving gracefully, holds
 *          no copy of the receiver's groups from now on; the receiver places none on it)
 * HANDOVER type u8=6 | group i32 | epoch i64 | lastSeq i64 | count i32 | inSync i32...  (reply STATE: OK when
 *          the receiver, an in-sync copy at lastSeq, takes the group over; docs/replication.md §17.9)
 * </pre>
 *
 * <p><b>Note:</b> static helpers and small mutable cursors; a {@link Reader} or
 * {@link Writer} is confined to one thread.
 */
public final class ReplicationCodec {
    public static final byte STREAM = 1;
    public static final byte ACK = 2;
    public static final byte FENCE = 3;
    public static final byte STATE = 4;
    public static final byte LEAVING = 5;
    public static final byte HANDOVER = 6;

    public static final byte EFFECT = 1;
    public static final byte CHUNK = 2;
    public static final byte JOIN = 3;
    public static final byte DONE = 4;
    public static final byte DROP = 5;

    /** Group status in an ACK or STATE. */
    public static final byte OK = 0;
    /** The copy is at a higher epoch than the record's (the sender was replaced). */
    public static final byte STALE = 1;
    /** The copy does not hold the group (or at another epoch it was not told of). */
    public static final byte NOT_HELD = 2;
    /** An effect's sequence is not the copy's next one. */
    public static final byte GAP = 3;

    /** Bytes of a STREAM message's header. */
    public static final int STREAM_HEADER = 1 + 8 + 8 + 4;
    /** Bytes of an EFFECT or CHUNK record without its data. */
    public static final int DATA_RECORD_HEADER = 1 + 4 + 8 + 8 + 8 + 4 + 1;

    private ReplicationCodec() {
    }

    /** The most data bytes one EFFECT or CHUNK record may carry in a message of at most {@code maxMessage} bytes. */
    public static int maxPart(int maxMessage) {
        int part = (maxMessage - STREAM_HEADER - DATA_RECORD_HEADER - 16) & ~7;
        if (part < 8) {
            throw new io.membus.core.error.DsmConfigException("membus.transports.messages.max-size",
                    String.valueOf(maxMessage), ">= 128 bytes when replication is on (a stream record must fit)");
        }
        return part;
    }

    /**
     * Whether {@code payload} is a well-formed STREAM message whose records are all EFFECT or
     * CHUNK (bytes copied into a copy's memory: quick, no allocation of a segment, no
     * publication), the messages a copy may handle on its I/O thread
     * ({@link io.membus.core.message.InlineMessageHandler}). Anything else (JOIN, DONE, DROP, a
     * FENCE, a malformed message) says {@code false} and runs on the message executor.
     */
    public static boolean onlyData(byte[] payload) {
        if (payload.length < STREAM_HEADER || payload[0] != STREAM) {
            return false;
        }
        int count = Words.getInt(payload, 17);
        int at = STREAM_HEADER;
        for (int i = 0; i < count; i++) {
            if (at + DATA_RECORD_HEADER > payload.length
                    || payload[at] != EFFECT && payload[at] != CHUNK) {
                return false;
            }
            int length = Words.getInt(payload, at + 29);
            if (length < 0 || length > payload.length - at - DATA_RECORD_HEADER) {
                return false;
            }
            at += DATA_RECORD_HEADER + length;
        }
        return at == payload.length;
    }

    public static byte[] effect(int group, long epoch, long seq, long offset, byte[] data, int from, int length,
                                boolean last) {
        Writer w = new Writer(DATA_RECORD_HEADER + length);
        w.u8(EFFECT).i32(group).i64(epoch).i64(seq).i64(offset).i32(length).u8(last ? 1 : 0).bytes(data, from, length);
        return w.array();
    }

    public static byte[] chunk(int group, long epoch, long seq, long offset, byte[] data, int from, int length) {
        Writer w = new Writer(DATA_RECORD_HEADER + length);
        w.u8(CHUNK).i32(group).i64(epoch).i64(seq).i64(offset).i32(length).u8(1).bytes(data, from, length);
        return w.array();
    }

    public static byte[] join(int group, long epoch, long startSeq, long size, int flags, long remoteKey) {
        return new Writer(41).u8(JOIN).i32(group).i64(epoch).i64(startSeq).i64(size).i32(flags).i64(remoteKey).array();
    }

    public static byte[] done(int group, long epoch, long lastSeq) {
        return new Writer(21).u8(DONE).i32(group).i64(epoch).i64(lastSeq).array();
    }

    public static byte[] drop(int group, long epoch) {
        return new Writer(13).u8(DROP).i32(group).i64(epoch).array();
    }

    public static byte[] fence(int group, long ballot) {
        return new Writer(13).u8(FENCE).i32(group).i64(ballot).array();
    }

    public static byte[] leaving() {
        return new Writer(1).u8(LEAVING).array();
    }

    public static byte[] handOver(int group, long epoch, long lastSeq, int[] inSync) {
        Writer w = new Writer(1 + 4 + 8 + 8 + 4 + 4 * inSync.length).u8(HANDOVER).i32(group).i64(epoch).i64(lastSeq)
                .i32(inSync.length);
        for (int n : inSync) {
            w.i32(n);
        }
        return w.array();
    }

    public static byte[] state(byte status, long epoch, long applied) {
        return new Writer(18).u8(STATE).u8(status).i64(epoch).i64(applied).array();
    }

    /** Appends bytes to a fixed-size array (sized by the caller). */
    public static final class Writer {
        private final byte[] b;
        private int at;

        public Writer(int size) {
            b = new byte[size];
        }

        public Writer u8(int v) {
            b[at++] = (byte) v;
            return this;
        }

        public Writer i32(int v) {
            Words.putInt(b, at, v);
            at += 4;
            return this;
        }

        public Writer i64(long v) {
            Words.putLong(b, at, v);
            at += 8;
            return this;
        }

        public Writer bytes(byte[] src, int from, int length) {
            System.arraycopy(src, from, b, at, length);
            at += length;
            return this;
        }

        public int position() {
            return at;
        }

        /** The array (its whole length must have been written). */
        public byte[] array() {
            if (at != b.length) {
                throw new IllegalStateException("record written " + at + " of " + b.length + " bytes");
            }
            return b;
        }
    }

    /** Reads a payload, failing with {@link ProtocolException} on a truncated one. */
    public static final class Reader {
        private final byte[] b;
        private final String peer;
        private int at;

        public Reader(byte[] b, int from, String peer) {
            this.b = b;
            this.at = from;
            this.peer = peer;
        }

        private void need(int n) {
            if (n < 0 || at + n > b.length) {
                throw new ProtocolException(peer, "replication message truncated: needs " + n + " bytes at " + at
                        + " of " + b.length);
            }
        }

        public int u8() {
            need(1);
            return b[at++] & 0xff;
        }

        public int i32() {
            need(4);
            int v = Words.getInt(b, at);
            at += 4;
            return v;
        }

        public long i64() {
            need(8);
            long v = Words.getLong(b, at);
            at += 8;
            return v;
        }

        /** Skips {@code n} bytes and returns the offset where they start (the data stays in {@link #array()}). */
        public int skip(int n) {
            need(n);
            int from = at;
            at += n;
            return from;
        }

        public byte[] array() {
            return b;
        }

        public boolean atEnd() {
            return at == b.length;
        }
    }
}
