package io.membus.transport.tcp;

import io.membus.core.error.ProtocolException;
import io.membus.core.directory.PeerInfo;
import io.membus.core.transport.VerbObserver;
import io.membus.core.transport.pipeline.Verb;
import io.membus.core.transport.pipeline.VerbPipeline;
import io.membus.core.transport.pipeline.Wire;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;

/**
 * The wire of a {@link TcpConnection}'s {@link VerbPipeline}: verbs out as request frames,
 * answers in as completions. A verb is encoded into the burst's buffer on the I/O thread;
 * the burst is written with one flush. Nothing is written while the channel is down or not
 * writable (the peer does not read): verbs wait in the pipeline's backlog under their
 * deadlines. An answer (OK or ERROR, in request order) is matched to its verb by
 * correlation id (the verb's sequence number in the pipeline) and completes it; an answer
 * that matches no verb on the wire, or whose body does not fit its verb, is a
 * {@link ProtocolException} (the connection closes).
 *
 * <p><b>Note:</b> confined to the connection's I/O thread: the pipeline calls
 * {@link #post} and {@link #flush} there (under its lock), and {@link ClientHandler} hands
 * it answers there. {@link #wake} may be called from any thread (it only schedules the
 * I/O thread). The channel is read through the connection's volatile field.
 */
final class TcpVerbWire implements Wire<Verb> {
    private final TcpConnection connection;
    private final PeerInfo peer;
    private final int maxInFlight;
    /** Set once, right after construction, before the connection is published. */
    private VerbPipeline<Verb> pipeline;
    /** The frames of the burst being encoded, flushed at its end; guarded by the pipeline's lock (I/O thread). */
    private ByteBuf burst;
    private Channel burstChannel;

    TcpVerbWire(TcpConnection connection, PeerInfo peer, int maxInFlight) {
        this.connection = connection;
        this.peer = peer;
        this.maxInFlight = maxInFlight;
    }

    void pipeline(VerbPipeline<Verb> pipeline) {
        this.pipeline = pipeline;
    }

    private static int frameLength(Verb v) {
        return Frame.HEADER_LENGTH + switch (v.kind) {
            case VerbObserver.READ -> Frame.READ_BODY_LENGTH;
            case VerbObserver.WRITE -> Frame.WRITE_FIXED_BODY_LENGTH + v.length;
            case VerbObserver.CAS -> Frame.CAS_BODY_LENGTH;
            default -> Frame.FAA_BODY_LENGTH;
        };
    }

    @Override
    public boolean post(Verb v) {
        Channel ch = connection.channel();
        if (ch == null || !ch.isWritable()) {
            return false;
        }
        if (burst == null) {
            // sized for what the window lets out now, so a burst is encoded without re-allocation
            int room = maxInFlight - pipeline.inFlight() + 1;
            long size = Math.min((long) frameLength(v) * Math.min(room, pipeline.backlog() + 1), 1 << 20);
            burst = ch.alloc().ioBuffer((int) Math.max(Math.max(256, size), frameLength(v)));
            burstChannel = ch;
        }
        long corr = v.seq();
        switch (v.kind) {
            case VerbObserver.READ -> Frame.writeRead(burst, corr, v.ptr, v.remoteKey, v.length);
            case VerbObserver.WRITE -> Frame.writeWrite(burst, corr, v.ptr, v.remoteKey, v.data, v.dataOffset,
                    v.length);
            case VerbObserver.CAS -> Frame.writeCas(burst, corr, v.ptr, v.remoteKey, v.a, v.b);
            default -> Frame.writeFaa(burst, corr, v.ptr, v.remoteKey, v.a);
        }
        return true;
    }

    @Override
    public void flush() {
        ByteBuf out = burst;
        Channel ch = burstChannel;
        burst = null;
        burstChannel = null;
        if (out != null) {
            ch.writeAndFlush(out, ch.voidPromise());
        }
    }

    @Override
    public void wake(VerbPipeline<Verb> p) {
        connection.wake(); // posts happen on the I/O thread only
    }

    /** A response frame (OK or ERROR) arrived on the open channel: completes the verb it answers. */
    void answer(Frame f) {
        long corr = f.correlationId();
        Verb v;
        try {
            v = pipeline.answering(corr); // verbs before it that are still unanswered were dropped by the target
        } catch (IllegalArgumentException e) {
            throw new ProtocolException(peer.toString(), "correlationId=" + corr + " answers no verb in flight");
        }
        if (v == null) {
            return; // the late answer to a verb that timed out
        }
        try {
            complete(v, f);
        } catch (ProtocolException e) {
            pipeline.fail(v, e); // the connection closes next; this verb must not be left hanging
            throw e;
        }
    }

    private void complete(Verb v, Frame f) {
        if (f.opcode() == Frame.OP_ERROR) {
            pipeline.fail(v, ErrorFrames.decode(f, peer));
            return;
        }
        int body = f.bodyLength();
        switch (v.kind) {
            case VerbObserver.READ -> {
                if (body != v.length) {
                    throw new ProtocolException(peer.toString(), "read response bodyLength=" + body + ", expected="
                            + v.length);
                }
                pipeline.complete(v, f.bytesAt(Frame.HEADER_LENGTH, body));
            }
            case VerbObserver.WRITE -> {
                if (body != 0) {
                    throw new ProtocolException(peer.toString(), "write response bodyLength=" + body + ", expected=0");
                }
                pipeline.complete(v, null);
            }
            default -> {
                if (body != 8) {
                    throw new ProtocolException(peer.toString(), Verb.operationName(v.kind) + " response bodyLength="
                            + body + ", expected=8");
                }
                pipeline.completeLong(v, f.longAt(Frame.HEADER_LENGTH));
            }
        }
    }
}
