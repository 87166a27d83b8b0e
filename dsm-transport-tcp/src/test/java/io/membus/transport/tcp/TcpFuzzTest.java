package io.membus.transport.tcp;

import io.membus.core.auth.PeerAuth;
import io.membus.core.RemoteMemory;
import io.membus.core.RemotePtr;
import io.membus.core.Segment;
import io.membus.core.test.Seeds;
import io.membus.core.transport.Connection;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.Transport;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.IOException;
import java.time.Duration;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Thousands of random and mutated frames against a live node, from
 * authenticated and unauthenticated connections: wrong lengths, unknown
 * opcodes and versions, truncated and oversized frames, handshake frames out of
 * place, bit flips, garbage, and well-formed verbs with wrong keys. The node
 * must survive, keep serving another peer throughout, and leave the bytes of
 * its segment exactly as they were (CRC32).
 *
 * <p>The seed is printed; {@code -Dmembus.fuzz.seed=<seed>} replays a run and
 * {@code -Dmembus.fuzz.rounds=<n>} (default 500 connections) scales it.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class TcpFuzzTest {
    private static final long SEGMENT_SIZE = 64 * 1024;
    private final Nodes nodes = new Nodes();

    @AfterEach
    void close() {
        nodes.close();
    }

    @Test
    void fuzzedFramesNeverCrashTheNodeNorTouchItsMemory() throws Exception {
        long seed = Seeds.seed("membus.fuzz.seed", "TcpFuzzTest");
        SplittableRandom random = new SplittableRandom(seed);
        int rounds = Integer.getInteger("membus.fuzz.rounds", 500);
        Transport target = nodes.start(1, "tcp.max-frame", "1048576");
        Segment seg = target.export(SegmentSpec.of(0, SEGMENT_SIZE));
        Segment counter = target.export(SegmentSpec.of(1, 4096));
        byte[] fill = new byte[(int) SEGMENT_SIZE];
        random.nextBytes(fill);
        seg.write(0, fill, 0, fill.length);
        long before = checksum(seg);
        java.util.concurrent.atomic.AtomicLong handled = new java.util.concurrent.atomic.AtomicLong();
        target.messages().register(ECHO, "echo", (from, payload) -> {
            handled.incrementAndGet();
            return payload;
        });
        Transport bystander = nodes.start(3);
        Connection served = RemoteMemory.await(bystander.connect(target.self()), Duration.ofSeconds(20));

        int frames = 0;
        int[] kinds = new int[KINDS.length];
        for (int round = 0; round < rounds; round++) {
            try (RawPeer p = new RawPeer(target.localAddress(), 20_000)) {
                boolean authenticated = random.nextInt(4) != 0;
                if (authenticated) {
                    byte[] welcome = p.handshake(RawPeer.secret(Nodes.SECRET), 2, 42, 1, target.incarnation());
                    assertEquals(Frame.OP_WELCOME, RawPeer.wrap(welcome).opcode(), "seed " + seed);
                }
                // the node reads a stream up to its first frame that is not a valid verb. So that every kind is
                // really met by the node, each stream is: well-formed verbs (authenticated peers only), one
                // frame of a kind drawn uniformly, then random frames (met only when the drawn one was a verb)
                ByteBuf stream = Unpooled.buffer();
                int prefix = authenticated ? random.nextInt(0, 10) : 0;
                for (int i = 0; i < prefix; i++) {
                    fuzzFrame(stream, random, seg, random.nextInt(3)); // wrong-key verbs, right-key reads
                    frames++;
                }
                int kind = random.nextInt(KINDS.length);
                fuzzFrame(stream, random, seg, kind);
                kinds[kind]++;
                frames++;
                int n = kind == TRUNCATED ? 0 : random.nextInt(0, 20);
                for (int i = 0; i < n; i++) {
                    fuzzFrame(stream, random, seg, i == n - 1);
                    frames++;
                }
                byte[] bytes = new byte[stream.readableBytes()];
                stream.readBytes(bytes);
                stream.release();
                try {
                    p.send(bytes);
                    p.socket.shutdownOutput();
                } catch (IOException e) {
                    // the node closed first (a bad frame early in the stream): expected
                }
                p.awaitClosed();
            }
            // the node keeps serving another peer, with the right answers
            long old = RemoteMemory.await(served.fetchAndAdd(counter.pointer(0), counter.remoteKey(), 1),
                    Duration.ofSeconds(20));
            assertEquals(round, old, "seed " + seed + ", round " + round);
            // and still handles its messages
            byte[] ping = {(byte) round, 1, 2};
            org.junit.jupiter.api.Assertions.assertArrayEquals(ping, RemoteMemory.await(served.request(ECHO, ping),
                    Duration.ofSeconds(20)), "seed " + seed + ", round " + round);
        }
        assertTrue(handled.get() > rounds || rounds < 100, "fuzzed messages reached the handler: " + handled.get());
        StringBuilder mix = new StringBuilder();
        for (int k = 0; k < KINDS.length; k++) {
            mix.append(k == 0 ? "" : ", ").append(KINDS[k]).append('=').append(kinds[k]);
            // ~45 streams per kind in a run of the default size
            assertTrue(kinds[k] > 0 || rounds < 100, "no stream met a frame of kind " + KINDS[k] + ", seed " + seed);
        }
        System.out.println("[fuzz] " + frames + " frames over " + rounds + " connections (kinds met by the node: "
                + mix + "), seed " + seed);
        assertTrue(frames >= 1000 || rounds < 100, "enough frames: " + frames);
        assertEquals(before, checksum(seg), "segment bytes changed; replay with -Dmembus.fuzz.seed=" + seed);
        assertTrue(served.isOpen());
        byte[] first = RemoteMemory.await(served.read(seg.pointer(0), seg.remoteKey(), 16), Duration.ofSeconds(20));
        assertEquals(fill[15], first[15]);
    }

    private static final String[] KINDS = {"wrongKeyA", "wrongKeyB", "rightKeyRead", "unknownOpcode",
        "wrongBodyLength", "badLengthField", "wrongVersion", "handshakeOutOfPlace", "bitFlips", "garbage",
        "messageToHandler", "messageToUnknownChannel", "messageWithShortBody", "messageAnswerOutOfPlace",
        "truncated"};
    private static final int TRUNCATED = KINDS.length - 1;
    private static final short ECHO = 5;

    /** Appends one fuzzed frame; truncation only as the last frame of a stream. */
    private static void fuzzFrame(ByteBuf out, SplittableRandom r, Segment seg, boolean last) {
        fuzzFrame(out, r, seg, r.nextInt(last ? KINDS.length : TRUNCATED));
    }

    private static void fuzzFrame(ByteBuf out, SplittableRandom r, Segment seg, int kind) {
        switch (kind) {
            case 0, 1 -> wrongKeyVerb(out, r, seg);
            case 2 -> {
                // a read with the right key: allowed, touches nothing
                int len = r.nextInt(0, 512);
                Frame.writeRead(out, r.nextLong(), seg.pointer(r.nextLong(SEGMENT_SIZE - len + 1)), seg.remoteKey(), len);
            }
            case 3 -> {
                // unknown opcode
                int body = r.nextInt(0, 64);
                byte op;
                do {
                    op = (byte) r.nextInt(256);
                } while (op >= Frame.OP_READ && op <= Frame.OP_FAA || op == Frame.OP_MSG);
                Frame.writeHeader(out, op, r.nextLong(), body);
                random(out, r, body);
            }
            case 4 -> {
                // a verb opcode with a body of the wrong length
                byte op = (byte) r.nextInt(Frame.OP_READ, Frame.OP_FAA + 1);
                int body = r.nextInt(0, 80);
                Frame.writeHeader(out, op, r.nextLong(), body);
                random(out, r, body);
            }
            case 5 -> {
                // a length field beyond the maximum frame, or below the header, or negative
                int len = switch (r.nextInt(3)) {
                    case 0 -> r.nextInt(1 << 20, Integer.MAX_VALUE);
                    case 1 -> r.nextInt(0, Frame.MIN_LENGTH_FIELD);
                    default -> -r.nextInt(1, Integer.MAX_VALUE);
                };
                out.writeIntLE(len);
                random(out, r, r.nextInt(0, 64));
            }
            case 6 -> {
                // a wrong version
                ByteBuf f = Unpooled.buffer();
                wrongKeyVerb(f, r, seg);
                byte v;
                do {
                    v = (byte) r.nextInt(256);
                } while (v == Frame.VERSION);
                f.setByte(Frame.VERSION_FIELD_OFFSET, v);
                out.writeBytes(f);
                f.release();
            }
            case 7 -> {
                // handshake frames out of place
                switch (r.nextInt(3)) {
                    case 0 -> Frame.writeHello(out, 2, 42, 1, r.nextLong(), PeerAuth.nonce());
                    case 1 -> Frame.writeAuth(out, PeerAuth.nonce());
                    default -> Frame.writeWelcome(out, 0);
                }
            }
            case 8 -> {
                // bit flips in a wrong-key verb (the key stays wrong whatever flips)
                ByteBuf f = Unpooled.buffer();
                wrongKeyVerb(f, r, seg);
                int flips = r.nextInt(1, 4);
                for (int i = 0; i < flips; i++) {
                    int at = r.nextInt(f.writerIndex());
                    f.setByte(at, f.getByte(at) ^ (1 << r.nextInt(8)));
                }
                out.writeBytes(f);
                f.release();
            }
            case 9 -> random(out, r, r.nextInt(1, 100)); // garbage
            case 10 -> {
                // a well-formed message (request or one-way) to the target's handler: handled and answered
                byte[] payload = new byte[r.nextInt(0, 256)];
                r.nextBytes(payload);
                Frame.writeMessage(out, r.nextLong(), ECHO, r.nextBoolean(), payload);
            }
            case 11 -> {
                // a message to a channel nobody registered: answered with UNKNOWN_CHANNEL
                short channel;
                do {
                    channel = (short) r.nextInt(1 << 16);
                } while (channel == ECHO);
                Frame.writeMessage(out, r.nextLong(), channel, r.nextBoolean(), new byte[r.nextInt(0, 64)]);
            }
            case 12 -> {
                // a message whose body is shorter than its fixed part
                int body = r.nextInt(0, Frame.MSG_FIXED_BODY_LENGTH);
                Frame.writeHeader(out, Frame.OP_MSG, r.nextLong(), body);
                random(out, r, body);
            }
            case 13 -> {
                // frames only a target sends, from an initiator
                switch (r.nextInt(3)) {
                    case 0 -> Frame.writeMessageReply(out, r.nextLong(), new byte[r.nextInt(0, 64)]);
                    case 1 -> Frame.writeMessageError(out, r.nextLong(), (byte) r.nextInt(128), r.nextLong(), "x");
                    default -> Frame.writeCredit(out, r.nextInt(), r.nextInt());
                }
            }
            default -> {
                // truncated: a valid frame cut short, then the stream ends
                ByteBuf f = Unpooled.buffer();
                wrongKeyVerb(f, r, seg);
                out.writeBytes(f, 0, r.nextInt(1, f.writerIndex()));
                f.release();
            }
        }
    }

    private static void wrongKeyVerb(ByteBuf out, SplittableRandom r, Segment seg) {
        long key;
        do {
            key = r.nextLong();
        } while (key == seg.remoteKey());
        long ptr = switch (r.nextInt(3)) {
            case 0 -> seg.pointer(r.nextLong(SEGMENT_SIZE) & ~7L);
            case 1 -> RemotePtr.pack(1, r.nextInt(256), r.nextLong(RemotePtr.MAX_OFFSET + 1));
            default -> r.nextLong();
        };
        long corr = r.nextLong();
        switch (r.nextInt(4)) {
            case 0 -> Frame.writeRead(out, corr, ptr, key, r.nextInt(-8, 4096));
            case 1 -> {
                byte[] data = new byte[r.nextInt(0, 256)];
                r.nextBytes(data);
                Frame.writeWrite(out, corr, ptr, key, data, 0, data.length);
            }
            case 2 -> Frame.writeCas(out, corr, ptr, key, r.nextLong(), r.nextLong());
            default -> Frame.writeFaa(out, corr, ptr, key, r.nextLong());
        }
    }

    private static void random(ByteBuf out, SplittableRandom r, int n) {
        byte[] b = new byte[n];
        r.nextBytes(b);
        out.writeBytes(b);
    }

    private static long checksum(Segment s) {
        byte[] all = new byte[(int) s.size()];
        s.read(0, all, 0, all.length);
        CRC32 crc = new CRC32();
        crc.update(all);
        return crc.getValue();
    }
}
