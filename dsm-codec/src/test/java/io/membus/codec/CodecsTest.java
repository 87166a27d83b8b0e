package io.membus.codec;

import io.membus.core.error.DsmConfigException;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class CodecsTest {

    record Item(String sku, int count) {
    }

    record Order(long id, String customer, List<Item> items) {
    }

    static final class Gadget {
        String name = "x";
    }

    @Test
    void fixedCodecsRoundTripAndRefuseWrongLengths() {
        assertEquals(-42L, Codecs.longs().decode(Codecs.longs().encode(-42L)));
        assertEquals(Integer.MIN_VALUE, Codecs.ints().decode(Codecs.ints().encode(Integer.MIN_VALUE)));
        assertEquals(0x12345678, Codecs.ints().decode(Codecs.ints().encode(0x12345678)));
        assertEquals(Math.PI, Codecs.doubles().decode(Codecs.doubles().encode(Math.PI)));
        assertEquals("grüße 👋", Codecs.strings().decode(Codecs.strings().encode("grüße 👋")));
        assertArrayEquals(new byte[] {1, 2, 3}, Codecs.bytes().decode(Codecs.bytes().encode(new byte[] {1, 2, 3})));
        assertEquals(8, Codecs.longs().fixedSize());
        assertEquals(-1, Codecs.strings().fixedSize());

        CodecException e = assertThrows(CodecException.class, () -> Codecs.longs().decode(new byte[7]));
        assertTrue(e.getMessage().contains("codec=long") && e.getMessage().contains("length=7"), e.getMessage());
        assertThrows(CodecException.class, () -> Codecs.strings().decode(new byte[] {(byte) 0xff, (byte) 0xfe}));
    }

    @Test
    void ofPicksFixedCodecsForWordsAndKryoForTheRest() {
        assertEquals("long", Codecs.of(Long.class).id());
        assertEquals("utf8", Codecs.of(String.class).id());
        assertTrue(Codecs.of(Order.class, Item.class).id().startsWith("kryo:" + Order.class.getName() + "#"));
    }

    @Test
    void kryoRoundTripsRegisteredRecordsWithCollections() {
        Codec<Order> codec = KryoCodec.of(Order.class, Item.class);
        Order order = new Order(42, "ada", new ArrayList<>(List.of(new Item("a", 1), new Item("b", 2))));
        assertEquals(order, codec.decode(codec.encode(order)));
    }

    enum Status { NEW, PAID, SHIPPED { @Override public String toString() { return "shipped!"; } } }

    record Address(String city, Status lastStatus) {
    }

    record Shipment(String id, Status status, Address to, List<Item> items, java.util.Set<String> tags,
                    java.util.Map<String, Integer> counts) {
    }

    @Test
    void aRecordHoldingImmutableCollectionsAnEnumAndANestedRecordRoundTrips() {
        // only the root type is named: its nested records and enums are registered from its components
        Codec<Shipment> codec = KryoCodec.of(Shipment.class);
        Shipment s = new Shipment("s1", Status.SHIPPED, new Address("Oslo", Status.PAID),
                List.of(new Item("a", 1), new Item("b", 2), new Item("c", 3)), java.util.Set.of("x", "y"),
                java.util.Map.of("a", 1, "b", 2));
        Shipment back = codec.decode(codec.encode(s));
        assertEquals(s, back);
        assertSame(Status.SHIPPED, back.status());
        assertThrows(UnsupportedOperationException.class, () -> back.items().add(new Item("d", 4)));
        assertThrows(UnsupportedOperationException.class, () -> back.tags().add("z"));
        assertThrows(UnsupportedOperationException.class, () -> back.counts().put("c", 3));
    }

    @Test
    void anUnregisteredClassIsRefusedWhenEncoding() {
        Codec<ArrayList> codec = KryoCodec.of(ArrayList.class); // Gadget not registered
        ArrayList<Object> list = new ArrayList<>(List.of(new Gadget()));
        UnregisteredClassException e = assertThrows(UnregisteredClassException.class, () -> codec.encode(list));
        assertEquals(Gadget.class.getName(), e.className());
        assertTrue(e.getMessage().contains("add \"io.membus.codec.CodecsTest$Gadget\" to membus.codec.classes")
                && e.getMessage().contains("register(io.membus.codec.CodecsTest.Gadget.class)"), e.getMessage());
    }

    record Holder(String name, Gadget gadget) {
    }

    @Test
    void aPlainClassInsideARecordIsNotFollowedAndIsNamedWhenMissing() {
        Codec<Holder> codec = KryoCodec.of(Holder.class); // records and enums are followed, plain classes are not
        UnregisteredClassException e = assertThrows(UnregisteredClassException.class,
                () -> codec.encode(new Holder("h", new Gadget())));
        assertEquals(Gadget.class.getName(), e.className());
        assertTrue(e.getMessage().contains("found in value=" + Holder.class.getName()), e.getMessage());
        Codec<Holder> listed = KryoCodec.of(Holder.class, Gadget.class);
        assertEquals("x", listed.decode(listed.encode(new Holder("h", new Gadget()))).gadget().name);
    }

    @Test
    void bytesNamingAnUnregisteredClassAreRefusedWhenDecoding() {
        // a writer that registered Gadget stores a list holding one; a reader that did not must refuse it
        Codec<ArrayList> writer = KryoCodec.builder(ArrayList.class).register(Gadget.class).build();
        ArrayList<Object> list = new ArrayList<>();
        list.add(new Gadget());
        byte[] bytes = writer.encode(list);
        Codec<ArrayList> reader = KryoCodec.of(ArrayList.class);
        CodecException e = assertThrows(CodecException.class, () -> reader.decode(bytes));
        assertTrue(e.getMessage().contains("do not decode"), e.getMessage());
    }

    @Test
    void corruptOrTruncatedBytesAreTypedErrors() {
        Codec<Order> codec = KryoCodec.of(Order.class, Item.class);
        byte[] good = codec.encode(new Order(7, "c", new ArrayList<>(List.of(new Item("z", 9)))));
        assertThrows(CodecException.class, () -> codec.decode(good, 0, good.length - 3));
        byte[] longer = java.util.Arrays.copyOf(good, good.length + 2);
        CodecException e = assertThrows(CodecException.class, () -> codec.decode(longer));
        assertTrue(e.getMessage().contains("trailing"), e.getMessage());
    }

    @Test
    void theIdChangesWithTheRegistrationList() {
        assertEquals(KryoCodec.of(Order.class, Item.class).id(), KryoCodec.of(Order.class, Item.class).id());
        assertNotEquals(KryoCodec.of(Order.class, Gadget.class).id(), KryoCodec.of(Order.class).id());
        assertEquals(KryoCodec.of(Order.class, Item.class).id(), KryoCodec.of(Order.class).id()); // Item is nested
        DsmConfigException taken = assertThrows(DsmConfigException.class,
                () -> KryoCodec.builder(Order.class).register(Item.class, 100)); // 100 is Order's, Item nested got 101
        assertEquals("codec id of " + Item.class.getName(), taken.key(), taken.getMessage());
        assertTrue(taken.getMessage().startsWith("bad config: key=codec id of " + Item.class.getName() + ", value=100,"
                + " allowed=its id "), taken.getMessage());
        DsmConfigException low = assertThrows(DsmConfigException.class,
                () -> KryoCodec.builder(Order.class).register(Item.class, 5));
        assertEquals("bad config: key=codec id of " + Item.class.getName() + ", value=5, allowed="
                + KryoCodec.FIRST_USER_ID + " or more (ids below " + KryoCodec.FIRST_USER_ID
                + " are Kryo's and Membus' own)", low.getMessage());
        DsmConfigException twice = assertThrows(DsmConfigException.class,
                () -> KryoCodec.builder(Order.class).register(Gadget.class, 100)); // 100 is Order's
        assertTrue(twice.getMessage().contains("value=100, allowed=an id no other class has (100 is taken by "
                + Order.class.getName()), twice.getMessage());
    }

    @Test
    void aCodecIsSharedByManyThreads() throws Exception {
        Codec<Order> codec = KryoCodec.of(Order.class, Item.class);
        ExecutorService pool = Executors.newFixedThreadPool(4);
        try {
            List<Future<Boolean>> results = new ArrayList<>();
            for (int t = 0; t < 4; t++) {
                int base = t * 10_000;
                results.add(pool.submit(() -> {
                    for (int i = 0; i < 2_000; i++) {
                        Order o = new Order(base + i, "c" + i, new ArrayList<>(List.of(new Item("s" + i, i))));
                        if (!o.equals(codec.decode(codec.encode(o)))) {
                            return false;
                        }
                    }
                    return true;
                }));
            }
            for (Future<Boolean> r : results) {
                assertTrue(r.get());
            }
        } finally {
            pool.shutdownNow();
        }
    }
}
