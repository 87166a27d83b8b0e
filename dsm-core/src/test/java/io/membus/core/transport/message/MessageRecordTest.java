package io.membus.core.transport.message;

import io.membus.core.error.ErrorCode;
import io.membus.core.error.UnknownChannelException;
import net.openhft.chronicle.core.UnsafeMemory;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The record's bytes at the literal offsets its class comment and the transport docs state, not the constants. */
class MessageRecordTest {
    private static final UnsafeMemory MEMORY = UnsafeMemory.MEMORY;
    private final long address = MEMORY.allocate(4096);

    @AfterEach
    void free() {
        MEMORY.freeMemory(address, 4096);
    }

    private int u8(int at) {
        return MEMORY.readByte(address + at) & 0xff;
    }

    private long le(int at, int bytes) {
        long v = 0;
        for (int i = bytes - 1; i >= 0; i--) {
            v = v << 8 | u8(at + i);
        }
        return v;
    }

    @Test
    void aRequestSitsAtItsDocumentedOffsetsLittleEndian() {
        int n = MessageRecord.writeMessage(address, 0x0102030405060708L, (short) 0xfffe, true, new byte[]{9, 8, 7});
        assertEquals(16 + 3, n);
        assertEquals(2, u8(0), "kind REQUEST at 0");
        assertEquals(0, u8(1), "flags zero");
        assertEquals(0xfffe, le(2, 2), "channel int16 at 2");
        assertEquals(0, le(4, 4), "reserved");
        assertEquals(0x0102030405060708L, le(8, 8), "correlation int64 at 8");
        assertEquals(0x08, u8(8), "little-endian");
        assertEquals(9, u8(16), "payload from 16");

        Recorded r = decode(n);
        assertEquals(List.of("message 72623859790382856 -2 true [9, 8, 7]"), r.events);
        assertEquals(16, MessageRecord.writeMessage(address, 1, (short) 3, false, new byte[0]), "no body");
        assertEquals(1, u8(0), "a one-way message: kind MESSAGE");
        assertEquals(List.of("message 1 3 false []"), decode(16).events);
    }

    @Test
    void repliesErrorsAndCreditsDecodeToWhatWasWritten() {
        int n = MessageRecord.writeReply(address, 77, new byte[]{4, 5});
        assertEquals(3, u8(0));
        assertEquals(List.of("reply 77 [4, 5]"), decode(n).events);

        byte[] text = MessageRecord.errorText(new UnknownChannelException(2, 42));
        n = MessageRecord.writeError(address, 78, ErrorCode.UNKNOWN_CHANNEL, 42, text);
        assertEquals(4, u8(0));
        assertEquals(ErrorCode.UNKNOWN_CHANNEL.wire(), le(16, 4), "code int32 at 16");
        assertEquals(42, le(24, 8), "detail int64 at 24");
        assertEquals(32 + text.length, n, "text from 32");
        Recorded r = decode(n);
        assertEquals(1, r.events.size());
        assertTrue(r.events.get(0).startsWith("error 78 UNKNOWN_CHANNEL 42 "), r.events.get(0));

        n = MessageRecord.writeCredit(address, 64, 65536);
        assertEquals(24, n);
        assertEquals(6, u8(0));
        assertEquals(0, le(8, 8), "a grant has correlation 0");
        assertEquals(64, le(16, 4));
        assertEquals(65536, le(20, 4));
        assertEquals(List.of("credit 64 65536"), decode(n).events);
    }

    @Test
    void errorTextIsCutAtItsLimitAndShortRecordsAreNamed() {
        assertEquals(1024, MessageRecord.errorText("x".repeat(5000)).length);
        assertEquals(0, MessageRecord.errorText((String) null).length);

        MessageRecord.writeCredit(address, 1, 2);
        Recorded r = decode(20);
        assertEquals(List.of("other 6 a record of 20 bytes is shorter than its kind's 24: kind=6"), r.events);
        assertEquals(List.of("other 0 a record of 3 bytes is shorter than its kind's 16: kind=0"), decode(3).events);

        MessageRecord.writeHeader(address, MessageRecord.KIND_TRANSPORT_OPENING, (short) 0, 0);
        MEMORY.writeInt(address + 16, 1056);
        r = decode(20);
        assertEquals(List.of("other 5 null"), r.events);
        assertEquals(1056, MessageRecord.intAt(address, 16));
        assertNull(r.problem);
    }

    private Recorded decode(int length) {
        Recorded r = new Recorded();
        MessageRecord.decode(address, length, r);
        return r;
    }

    private static final class Recorded implements MessageRecord.Receiver {
        final List<String> events = new ArrayList<>();
        String problem;

        @Override
        public void message(long correlation, short channel, boolean request, byte[] payload) {
            events.add("message " + correlation + " " + channel + " " + request + " " + java.util.Arrays.toString(payload));
        }

        @Override
        public void reply(long correlation, byte[] reply) {
            events.add("reply " + correlation + " " + java.util.Arrays.toString(reply));
        }

        @Override
        public void error(long correlation, ErrorCode code, long detail, String text) {
            events.add("error " + correlation + " " + code + " " + detail + " " + text);
        }

        @Override
        public void credit(int credits, int maxMessageSize) {
            events.add("credit " + credits + " " + maxMessageSize);
        }

        @Override
        public void other(int kind, long address, int length, String problem) {
            this.problem = problem;
            events.add("other " + kind + " " + problem);
        }
    }
}
