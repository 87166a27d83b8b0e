package io.membus.codec;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
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

    @Test
    void anUnregisteredClassIsRefusedWhenEncoding() {
        Codec<Order> codec = KryoCodec.of(Order.class); // Item not registered
        Order order = new Order(1, "bob", new ArrayList<>(List.of(new Item("a", 1))));
        CodecException e = assertThrows(CodecException.class, () -> codec.encode(order));
        assertTrue(e.getMessage().contains("register"), e.getMessage());
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
        assertNotEquals(KryoCodec.of(Order.class, Item.class).id(), KryoCodec.of(Order.class).id());
        assertThrows(IllegalArgumentException.class,
                () -> KryoCodec.builder(Order.class).register(Item.class, 100)); // 100 is Order's
        assertThrows(IllegalArgumentException.class, () -> KryoCodec.builder(Order.class).register(Item.class, 5));
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
