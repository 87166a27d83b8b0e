package io.membus.transport.rdma;

import io.membus.core.Access;
import io.membus.core.RemotePtr;
import io.membus.core.error.AccessDeniedException;
import io.membus.core.error.BadLengthException;
import io.membus.core.error.DsmException;
import io.membus.core.error.MisalignedAtomicException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.error.VerbException;
import io.membus.core.error.WrongRemoteKeyException;
import io.membus.core.transport.SegmentTable;

import static io.membus.transport.rdma.SendWrLayout.IBV_WR_ATOMIC_CMP_AND_SWP;
import static io.membus.transport.rdma.SendWrLayout.IBV_WR_ATOMIC_FETCH_AND_ADD;
import static io.membus.transport.rdma.SendWrLayout.IBV_WR_RDMA_READ;

/**
 * Maps a failed work completion ({@code ibv_wc.status} other than
 * {@code IBV_WC_SUCCESS}) to the typed exception its verb fails with.
 *
 * <table>
 *   <caption>completion status to exception</caption>
 *   <tr><th>status</th><th>exception</th></tr>
 *   <tr><td>REM_ACCESS_ERR</td><td>the first failing check of the verb against the peer's current
 *       catalog (UnknownSegment, WrongRemoteKey, AccessDenied, OutOfBounds); if every check passes the
 *       registration behind the key is gone: WrongRemoteKey</td></tr>
 *   <tr><td>REM_INV_REQ_ERR, REM_INV_RD_REQ_ERR</td><td>atomic on a misaligned word: MisalignedAtomic;
 *       atomic otherwise: AccessDenied (the responder refuses atomics); read/write: BadLength</td></tr>
 *   <tr><td>WR_FLUSH_ERR</td><td>NodeUnavailable (an earlier verb failed and the queue pair is in error)</td></tr>
 *   <tr><td>RETRY_EXC_ERR, RNR_RETRY_EXC_ERR, RESP_TIMEOUT_ERR, REM_OP_ERR, REM_ABORT_ERR, BAD_RESP_ERR,
 *       FATAL_ERR</td><td>NodeUnavailable (the peer or the path is gone)</td></tr>
 *   <tr><td>LOC_* , MW_BIND_ERR, GENERAL_ERR, anything else</td><td>DsmException INTERNAL: a local
 *       programming error of this transport (wrong lkey, length, QP state)</td></tr>
 * </table>
 *
 * Any failed completion moves a reliable connection's queue pair to the error
 * state; {@link VerbEngine} then fails every verb behind it, and the connection
 * is re-opened by the next {@code connect}.
 *
 * <p><b>Note:</b> stateless; thread-safe.
 */
public final class CompletionErrors {
    /** {@code vendorErr} when the completion's vendor error is not known (DiSNI 2.1 reads it only on success). */
    public static final int VENDOR_ERR_UNKNOWN = -1;

    private CompletionErrors() {
    }

    /**
     * The exception of a verb whose completion carried {@code status}.
     *
     * @param catalog   the peer's catalog now, or {@code null} when unknown
     * @param remoteKey the Membus remote key the verb named
     */
    public static DsmException toException(int status, int vendorErr, int opcode, long ptr, long remoteKey, int length,
                                           int peerNode, RemoteCatalog catalog) {
        boolean atomic = opcode == IBV_WR_ATOMIC_CMP_AND_SWP || opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
        String facts = "status=" + WcStatus.name(status) + ", vendorErr="
                + (vendorErr == VENDOR_ERR_UNKNOWN ? "unknown" : "0x" + Integer.toHexString(vendorErr))
                + ", opcode=" + SendWrLayout.opcodeName(opcode) + ", ptr=" + RemotePtr.toString(ptr)
                + ", length=" + length;
        switch (status) {
            case WcStatus.REM_ACCESS_ERR: {
                if (catalog != null) {
                    int required = atomic ? Access.ATOMIC : opcode == IBV_WR_RDMA_READ ? Access.READ : Access.WRITE;
                    try {
                        catalog.check(ptr, remoteKey, length, required, atomic);
                    } catch (VerbException e) {
                        return e;
                    }
                }
                return new WrongRemoteKeyException(ptr, length);
            }
            case WcStatus.REM_INV_REQ_ERR:
            case WcStatus.REM_INV_RD_REQ_ERR:
                if (atomic) {
                    if ((RemotePtr.offset(ptr) & 7) != 0) {
                        return new MisalignedAtomicException(ptr);
                    }
                    return new AccessDeniedException(ptr, length, Access.ATOMIC, Access.READ_WRITE);
                }
                return new BadLengthException(ptr, length, SegmentTable.MAX_VERB_LENGTH);
            case WcStatus.WR_FLUSH_ERR:
                return NodeUnavailableException.notSent(peerNode, "verb flushed: " + facts
                        + "; an earlier verb on this connection failed and the queue pair is in error state;"
                        + " connect again");
            case WcStatus.RETRY_EXC_ERR:
            case WcStatus.RNR_RETRY_EXC_ERR:
            case WcStatus.RESP_TIMEOUT_ERR:
            case WcStatus.REM_OP_ERR:
            case WcStatus.REM_ABORT_ERR:
            case WcStatus.BAD_RESP_ERR:
            case WcStatus.FATAL_ERR:
                return new NodeUnavailableException(peerNode, "connection lost: " + facts
                        + "; the peer crashed, closed the connection or the fabric path is down");
            default:
                return DsmException.internal("rdma work request failed locally: " + facts
                        + ", node=" + peerNode + "; this is a bug in the rdma transport: report it with this message");
        }
    }
}
