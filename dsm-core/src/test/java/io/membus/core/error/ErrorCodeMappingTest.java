package io.membus.core.error;

import io.membus.core.transport.message.MessageFailures;
import org.junit.jupiter.api.Test;

import java.util.EnumMap;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A failure a peer reports with a code and a text comes back as the subclass of its
 * category (so a {@code catch} of that subclass sees it); a fence travels as a fact,
 * not as words in the text.
 */
class ErrorCodeMappingTest {

    @Test
    void everyCodeAPeerReportsByTextBecomesItsSubclass() {
        Map<ErrorCode, Class<? extends DsmException>> expected = new EnumMap<>(ErrorCode.class);
        expected.put(ErrorCode.NODE_UNAVAILABLE, NodeUnavailableException.class);
        expected.put(ErrorCode.CLOSED, NodeUnavailableException.class); // closed over there: unavailable here
        expected.put(ErrorCode.TIMEOUT, DsmTimeoutException.class);
        expected.put(ErrorCode.PROTOCOL, ProtocolException.class);
        expected.put(ErrorCode.AUTHENTICATION, AuthenticationException.class);
        expected.put(ErrorCode.TRANSPORT_UNAVAILABLE, TransportUnavailableException.class);
        expected.put(ErrorCode.NOT_PRIMARY, NotPrimaryException.class);
        for (ErrorCode code : ErrorCode.values()) {
            DsmException e = DsmException.decoded(code, 4, "went wrong over there");
            Class<? extends DsmException> type = expected.getOrDefault(code, DsmException.class);
            assertSame(type, e.getClass(), code + " -> " + e.getClass().getSimpleName());
            assertEquals(code == ErrorCode.CLOSED ? ErrorCode.NODE_UNAVAILABLE : code, e.code());
            assertTrue(e.getMessage().contains("went wrong over there"), e.getMessage());
        }
        assertEquals(4, ((DsmTimeoutException) DsmException.decoded(ErrorCode.TIMEOUT, 4, "x")).nodeId());
        assertEquals(ErrorCode.INTERNAL, DsmException.internal("x").code());
    }

    @Test
    void aNotPrimaryRefusalKeepsItsGroupEpochAndHintAcrossTheWire() {
        int group = io.membus.core.replication.GroupId.of(7, 3);
        long epoch = io.membus.core.replication.Ballot.of(4, 9);
        NotPrimaryException sent = new NotPrimaryException(2, group, 9, epoch);
        NotPrimaryException back = assertInstanceOf(NotPrimaryException.class,
                DsmException.decoded(ErrorCode.NOT_PRIMARY, 2, sent.getMessage()));
        assertEquals(group, back.group());
        assertEquals(epoch, back.epoch());
        assertEquals(9, back.primaryHint());
        assertEquals(2, back.nodeId());
        assertFalse(back.mayHaveRun());
        NotPrimaryException noHint = assertInstanceOf(NotPrimaryException.class, DsmException.decoded(
                ErrorCode.NOT_PRIMARY, 2, new NotPrimaryException(2, group, 0, io.membus.core.replication.Ballot.NONE)
                        .getMessage()));
        assertEquals(0, noHint.primaryHint());
        assertEquals(group, noHint.group());
    }

    @Test
    void aFencedMessageFailureIsRebuiltAsFencedWhateverItsText() {
        NodeFencedException fenced = NodeFencedException.unknownOutcome(3, "go away");
        long detail = MessageFailures.detail(fenced);
        assertEquals(NodeFencedException.MESSAGE_DETAIL, detail);
        DsmException back = MessageFailures.decode(3, 9, ErrorCode.NODE_UNAVAILABLE, detail, "go away");
        assertTrue(assertInstanceOf(NodeUnavailableException.class, back).fenced());
        assertInstanceOf(NodeFencedException.class, back);
        DsmException words = MessageFailures.decode(3, 9, ErrorCode.NODE_UNAVAILABLE, 0, "node 3 fenced node 1: x");
        assertFalse(assertInstanceOf(NodeUnavailableException.class, words).fenced(), "words are not a reason");
        assertFalse(new NodeUnavailableException(3, "fenced").fenced());
        assertTrue(NodeFencedException.notSent(3, "x").fenced());
        assertFalse(NodeFencedException.notSent(3, "x").mayHaveRun());
    }

    @Test
    void theClosedErrorNamesWhatWasClosedAndNeverRan() {
        DsmClosedException e = new DsmClosedException("DsmMap 'orders'");
        assertEquals(ErrorCode.CLOSED, e.code());
        assertEquals("DsmMap 'orders'", e.what());
        assertFalse(e.mayHaveRun());
        assertTrue(e.getMessage().startsWith("closed: DsmMap 'orders' was closed"), e.getMessage());
        assertSame(ErrorCode.CLOSED, ErrorCode.fromWire(ErrorCode.CLOSED.wire()));
        DsmException copy = e.forCaller();
        assertInstanceOf(DsmClosedException.class, copy);
    }

    @Test
    void aTimeoutAfterTriesSaysHowManyAndHasNoDuration() {
        DsmTimeoutException e = DsmTimeoutException.afterTries("free-list pop", 2, 64, "retry");
        assertEquals(64, e.tries());
        assertEquals(null, e.timeout());
        assertEquals(2, e.nodeId());
        assertTrue(e.getMessage().contains("tries=64"), e.getMessage());
    }
}
