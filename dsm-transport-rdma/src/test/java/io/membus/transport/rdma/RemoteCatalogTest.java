package io.membus.transport.rdma;

import io.membus.core.Access;
import io.membus.core.RemotePtr;
import io.membus.core.error.AccessDeniedException;
import io.membus.core.error.BadLengthException;
import io.membus.core.error.InvalidPointerException;
import io.membus.core.error.MisalignedAtomicException;
import io.membus.core.error.OutOfBoundsException;
import io.membus.core.error.UnknownSegmentException;
import io.membus.core.error.WrongRemoteKeyException;
import io.membus.core.transport.SegmentTable;
import org.junit.jupiter.api.Test;

import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

/** The initiator-side checks: the same typed errors, in the same order, as the target's SegmentTable. */
class RemoteCatalogTest {
    private static final long KEY = CatalogEntry.remoteKey(0xABCD, 0x1357);
    private final RemoteCatalog catalog = new RemoteCatalog(3);

    RemoteCatalogTest() {
        catalog.replaceAll(List.of(new CatalogEntry(0, 0x10000, 1024, KEY, Access.ALL),
                new CatalogEntry(1, 0x20000, 64, KEY + 1, Access.READ_ONLY)));
    }

    @Test
    void aGoodVerbGetsItsEntry() {
        CatalogEntry e = catalog.check(RemotePtr.pack(3, 0, 1016), KEY, 8, Access.ATOMIC, true);
        assertEquals(0x10000, e.address());
        assertEquals(0xABCD, e.rkey(), "the low word of the remote key is the rkey");
        assertFalse(e.toString().contains(Long.toString(KEY)), "the key is never printed");
    }

    @Test
    void badVerbsAreRefusedWithTheirTypedErrorInSegmentTableOrder() {
        assertThrows(InvalidPointerException.class, () -> catalog.check(RemotePtr.NULL, KEY, 8, Access.READ, false));
        assertThrows(InvalidPointerException.class, () -> catalog.check(RemotePtr.pack(4, 0, 0), KEY, 8, Access.READ, false));
        assertThrows(BadLengthException.class, () -> catalog.check(RemotePtr.pack(3, 0, 0), KEY, -1, Access.READ, false));
        assertThrows(BadLengthException.class, () -> catalog.check(RemotePtr.pack(3, 0, 0), KEY,
                SegmentTable.MAX_VERB_LENGTH + 1, Access.READ, false));
        assertThrows(UnknownSegmentException.class, () -> catalog.check(RemotePtr.pack(3, 9, 0), KEY, 8, Access.READ, false));
        // the key is checked before the flags and the bounds
        assertThrows(WrongRemoteKeyException.class, () -> catalog.check(RemotePtr.pack(3, 1, 4096), KEY, 8, Access.WRITE, false));
        assertThrows(AccessDeniedException.class, () -> catalog.check(RemotePtr.pack(3, 1, 4096), KEY + 1, 8, Access.WRITE, false));
        assertThrows(OutOfBoundsException.class, () -> catalog.check(RemotePtr.pack(3, 1, 57), KEY + 1, 8, Access.READ, false));
        assertThrows(MisalignedAtomicException.class, () -> catalog.check(RemotePtr.pack(3, 0, 4), KEY, 8, Access.ATOMIC, true));
    }

    @Test
    void aRefreshReplacesTheWholeCatalog() {
        catalog.replaceAll(List.of(new CatalogEntry(7, 0x30000, 8, 99, Access.READ)));
        assertNull(catalog.get(0));
        assertNull(catalog.get(1));
        assertEquals(99L, catalog.get(7).remoteKey());
        assertNull(catalog.get(300));
    }

    @Test
    void remoteKeysCarryTheRkeyInTheLowWord() {
        long k = CatalogEntry.remoteKey(0xFFFF_FFF0, 0x0000_0001);
        assertEquals(0x0000_0001_FFFF_FFF0L, k);
        assertEquals(0xFFFF_FFF0, CatalogEntry.rkeyOf(k));
    }
}
