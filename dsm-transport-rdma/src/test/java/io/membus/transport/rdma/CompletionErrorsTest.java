package io.membus.transport.rdma;

import io.membus.core.Access;
import io.membus.core.RemotePtr;
import io.membus.core.error.AccessDeniedException;
import io.membus.core.error.BadLengthException;
import io.membus.core.error.DsmException;
import io.membus.core.error.ErrorCode;
import io.membus.core.error.MisalignedAtomicException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.OutOfBoundsException;
import io.membus.core.error.UnknownSegmentException;
import io.membus.core.error.WrongRemoteKeyException;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Map;

import static io.membus.transport.rdma.SendWrLayout.IBV_WR_ATOMIC_CMP_AND_SWP;
import static io.membus.transport.rdma.SendWrLayout.IBV_WR_ATOMIC_FETCH_AND_ADD;
import static io.membus.transport.rdma.SendWrLayout.IBV_WR_RDMA_READ;
import static io.membus.transport.rdma.SendWrLayout.IBV_WR_RDMA_WRITE;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The table from completion statuses to typed exceptions. */
class CompletionErrorsTest {
    private static final int PEER = 5;
    private static final long KEY = CatalogEntry.remoteKey(0x1234, 0x7777);
    private static final long PTR = RemotePtr.pack(PEER, 2, 64);

    private static RemoteCatalog catalog(int flags) {
        RemoteCatalog c = new RemoteCatalog(PEER);
        c.replaceAll(List.of(new CatalogEntry(2, 0x10000, 4096, KEY, flags)));
        return c;
    }

    private static DsmException map(int status, int opcode, long ptr, long key, int length, RemoteCatalog catalog) {
        return CompletionErrors.toException(status, 0x81, opcode, ptr, key, length, PEER, catalog);
    }

    @Test
    void everyStatusMapsToItsTypedException() {
        Map<Integer, Class<? extends DsmException>> table = Map.ofEntries(
                Map.entry(WcStatus.REM_ACCESS_ERR, WrongRemoteKeyException.class),
                Map.entry(WcStatus.REM_INV_REQ_ERR, BadLengthException.class),
                Map.entry(WcStatus.REM_INV_RD_REQ_ERR, BadLengthException.class),
                Map.entry(WcStatus.WR_FLUSH_ERR, NodeUnavailableException.class),
                Map.entry(WcStatus.RETRY_EXC_ERR, NodeUnavailableException.class),
                Map.entry(WcStatus.RNR_RETRY_EXC_ERR, NodeUnavailableException.class),
                Map.entry(WcStatus.RESP_TIMEOUT_ERR, NodeUnavailableException.class),
                Map.entry(WcStatus.REM_OP_ERR, NodeUnavailableException.class),
                Map.entry(WcStatus.REM_ABORT_ERR, NodeUnavailableException.class),
                Map.entry(WcStatus.BAD_RESP_ERR, NodeUnavailableException.class),
                Map.entry(WcStatus.FATAL_ERR, NodeUnavailableException.class));
        for (int status = 1; status <= 22; status++) {
            DsmException e = map(status, IBV_WR_RDMA_READ, PTR, KEY, 8, null);
            Class<? extends DsmException> want = table.get(status);
            if (want != null) {
                assertSame(want, e.getClass(), WcStatus.name(status));
            } else {
                assertSame(DsmException.class, e.getClass(), WcStatus.name(status));
                assertEquals(ErrorCode.INTERNAL, e.code(), WcStatus.name(status));
                assertTrue(e.getMessage().contains("status=" + WcStatus.name(status)), e.getMessage());
                assertTrue(e.getMessage().contains("vendorErr=0x81"), e.getMessage());
            }
        }
    }

    @Test
    void lostConnectionsNameTheStatusAndThePeer() {
        DsmException e = map(WcStatus.RETRY_EXC_ERR, IBV_WR_RDMA_WRITE, PTR, KEY, 16, null);
        assertEquals("node unavailable: node=5, reason=connection lost: status=IBV_WC_RETRY_EXC_ERR, vendorErr=0x81,"
                + " opcode=RDMA_WRITE, ptr=" + RemotePtr.toString(PTR) + ", length=16; the peer crashed, closed the"
                + " connection or the fabric path is down, outcome=unknown (it may have run: read back before retrying)",
                e.getMessage());
        assertEquals(PEER, ((NodeUnavailableException) e).nodeId());
    }

    @Test
    void remoteAccessErrorsAreDecidedAgainstTheCatalog() {
        RemoteCatalog rw = catalog(Access.READ_WRITE);
        assertInstanceOf(OutOfBoundsException.class, map(WcStatus.REM_ACCESS_ERR, IBV_WR_RDMA_READ,
                RemotePtr.pack(PEER, 2, 4090), KEY, 8, rw));
        assertInstanceOf(WrongRemoteKeyException.class, map(WcStatus.REM_ACCESS_ERR, IBV_WR_RDMA_READ, PTR, KEY + 1,
                8, rw));
        AccessDeniedException denied = assertInstanceOf(AccessDeniedException.class, map(WcStatus.REM_ACCESS_ERR,
                IBV_WR_ATOMIC_FETCH_AND_ADD, PTR, KEY, 8, rw));
        assertEquals(Access.ATOMIC, denied.required());
        assertInstanceOf(AccessDeniedException.class, map(WcStatus.REM_ACCESS_ERR, IBV_WR_RDMA_WRITE, PTR, KEY, 8,
                catalog(Access.READ_ONLY)));
        assertInstanceOf(UnknownSegmentException.class, map(WcStatus.REM_ACCESS_ERR, IBV_WR_RDMA_READ,
                RemotePtr.pack(PEER, 3, 0), KEY, 8, rw));
        // every check passes: the registration behind the key is gone (segment re-created)
        assertInstanceOf(WrongRemoteKeyException.class, map(WcStatus.REM_ACCESS_ERR, IBV_WR_RDMA_READ, PTR, KEY, 8,
                rw));
    }

    @Test
    void invalidRequestsOfAtomicsAreMisalignmentOrRefusedAtomics() {
        assertInstanceOf(MisalignedAtomicException.class, map(WcStatus.REM_INV_REQ_ERR, IBV_WR_ATOMIC_CMP_AND_SWP,
                RemotePtr.pack(PEER, 2, 12), KEY, 8, null));
        assertInstanceOf(AccessDeniedException.class, map(WcStatus.REM_INV_REQ_ERR, IBV_WR_ATOMIC_CMP_AND_SWP, PTR,
                KEY, 8, null));
    }

    @Test
    void statusNamesFollowRdmaCore() {
        assertEquals("IBV_WC_SUCCESS", WcStatus.name(0));
        assertEquals("IBV_WC_REM_ACCESS_ERR", WcStatus.name(10));
        assertEquals("IBV_WC_RETRY_EXC_ERR", WcStatus.name(12));
        assertEquals("IBV_WC_GENERAL_ERR", WcStatus.name(21));
        assertEquals("IBV_WC_status(99)", WcStatus.name(99));
    }
}
