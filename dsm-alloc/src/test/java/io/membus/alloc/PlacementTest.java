package io.membus.alloc;

import io.membus.core.error.DsmConfigException;
import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class PlacementTest {

    /** A key type whose hashCode is the identity hash: different in every JVM. */
    static final class Opaque {
    }

    @Test
    void stringKeysHashToFixedValuesSoEveryJvmAgrees() {
        // pinned values: a change here would move every key to another node in a mixed-version cluster
        assertEquals(6371757786061637967L, Placement.byKey("order-42").keyHash());
        assertEquals(-780787492076525413L, Placement.stableHash(new byte[0]));
        assertEquals(Placement.byKey("order-42").keyHash(), Placement.byKey((Object) new StringBuilder("order-42")).keyHash());
        assertEquals(Placement.byKey("order-42").keyHash(), Placement.byKey("order-42".getBytes(StandardCharsets.UTF_8)).keyHash());
        assertNotEquals(Placement.byKey("order-42").keyHash(), Placement.byKey("order-43").keyHash());
    }

    @Test
    void numbersUuidsAndEnumsHaveJvmIndependentHashes() {
        assertEquals(Placement.byKey((Object) 7L).keyHash(), Placement.byKey((Object) 7).keyHash());
        UUID u = new UUID(1, 2);
        assertEquals(Placement.byKey(u).keyHash(), Placement.byKey(new UUID(1, 2)).keyHash());
        assertEquals(Placement.byKey(TimeUnit.SECONDS).keyHash(),
                Placement.byKey("java.util.concurrent.TimeUnit.SECONDS").keyHash());
    }

    @Test
    void aKeyWithoutAStableHashIsRefusedWithWhatToDo() {
        DsmConfigException e = assertThrows(DsmConfigException.class, () -> Placement.byKey(new Opaque()));
        assertEquals("placement key type", e.key());
        assertEquals(Opaque.class.getName(), e.value());
        assertTrue(e.getMessage().startsWith("bad config: key=placement key type, value=" + Opaque.class.getName()
                + ", allowed=String, a number") && e.getMessage().contains("byKey(long)"), e.getMessage());
        DsmConfigException nul = assertThrows(DsmConfigException.class, () -> Placement.byKey((Object) null));
        assertEquals("null", nul.value());
    }

    @Test
    void homeOfNoNodesIsRefusedWithWhatToDo() {
        DsmConfigException e = assertThrows(DsmConfigException.class, () -> Placement.homeOf("k"));
        assertEquals("bad config: key=nodes to place key=k on, value=[] (none), allowed=one or more node ids",
                e.getMessage());
    }
}
