package io.membus.codec;

import io.membus.core.error.DsmConfigException;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class CodecRegistryTest {

    enum Priority { LOW, HIGH }

    record Line(String sku, int qty, Priority priority) {
    }

    sealed interface Payment permits Card, Cash {
    }

    record Card(String number) implements Payment {
    }

    record Cash(long cents) implements Payment {
    }

    record Order(long id, List<Line> lines, Map<String, Priority> flags, Payment payment, Line[] extra) {
    }

    static final class Plain {
        int x;
    }

    @Test
    void nestedRecordsAndEnumsAreRegisteredDepthFirstInComponentOrder() {
        CodecRegistry r = CodecRegistry.builder().register(Order.class).build();
        List<String> user = r.lines().stream().filter(l -> Integer.parseInt(l.split(" ")[0]) >= 100).toList();
        assertEquals(List.of(
                "100 " + Order.class.getName() + " RecordSerializer",
                "101 " + Line.class.getName() + " RecordSerializer",
                "102 " + Priority.class.getName() + " EnumSerializer",
                "103 " + Card.class.getName() + " RecordSerializer",
                "104 " + Cash.class.getName() + " RecordSerializer",
                "105 " + Line[].class.getName() + " ObjectArraySerializer"), user);
        assertEquals(r.registrations().keySet().stream().toList(),
                List.of(Order.class, Line.class, Priority.class, Card.class, Cash.class, Line[].class));
    }

    @Test
    void twoRegistriesFromTheSameListAgreeOnEveryIdAndReadEachOthersBytes() {
        List<String> names = List.of(Order.class.getName(), Plain.class.getName());
        CodecRegistry a = CodecRegistry.builder().registerNames(names, getClass().getClassLoader(), "membus.codec.classes").build();
        CodecRegistry b = CodecRegistry.builder().register(Order.class, Plain.class).build();
        assertEquals(a.lines(), b.lines());
        assertEquals(a.fingerprint(), b.fingerprint());
        assertEquals(a.registrations(), b.registrations());
        a.checkSameAs(b.lines(), "node 2"); // no difference: no exception
        Order o = new Order(7, List.of(new Line("a", 1, Priority.HIGH)), Map.of("rush", Priority.HIGH), new Cash(250),
                new Line[] {new Line("b", 2, Priority.LOW)});
        Order back = b.codec(Order.class).decode(a.codec(Order.class).encode(o));
        assertEquals(o.lines(), back.lines());
        assertEquals(o.flags(), back.flags());
        assertEquals(o.payment(), back.payment());
        assertArrayEquals(o.extra(), back.extra());
        assertEquals(a.codec(Order.class).id(), b.codec(Order.class).id());
    }

    @Test
    void aDifferentListIsRefusedWithItsFirstDifference() {
        CodecRegistry here = CodecRegistry.builder().register(Order.class, Plain.class).build();
        CodecRegistry there = CodecRegistry.builder().register(Plain.class, Order.class).build();
        int builtIns = CodecRegistry.jdkOnly().lines().size();
        RegistrationMismatchException e = assertThrows(RegistrationMismatchException.class,
                () -> here.checkSameAs(there.lines(), "node 2"));
        assertEquals(builtIns, e.index());
        assertEquals("100 " + Order.class.getName() + " RecordSerializer", e.here());
        assertEquals("100 " + Plain.class.getName() + " FieldSerializer", e.there());
        assertTrue(e.getMessage().contains("index=" + builtIns) && e.getMessage().contains("node 2"), e.getMessage());

        // one list a prefix of the other: the first line only one side has
        RegistrationMismatchException shorter = assertThrows(RegistrationMismatchException.class,
                () -> CodecRegistry.jdkOnly().checkSameAs(here.lines(), "node 3"));
        assertEquals("(none)", shorter.here());
        assertEquals(here.lines().get(builtIns), shorter.there());
        assertNotEquals(here.fingerprint(), there.fingerprint());
    }

    @Test
    void configNamesThatAreNoClassAreConfigErrorsNamingTheKey() {
        DsmConfigException e = assertThrows(DsmConfigException.class, () -> CodecRegistry.builder()
                .registerNames(List.of("com.acme.Missing"), getClass().getClassLoader(), "membus.codec.classes"));
        assertEquals("membus.codec.classes", e.key());
        assertTrue(e.getMessage().contains("com.acme.Missing"), e.getMessage());
    }

    @Test
    void anUnregisteredTypeIsRefusedWithTheLineToAdd() {
        CodecRegistry r = CodecRegistry.builder().register(Line.class).build();
        UnregisteredClassException own = assertThrows(UnregisteredClassException.class, () -> r.codec(Order.class));
        assertEquals(Order.class.getName(), own.className());
        assertTrue(own.getMessage().contains("add \"" + Order.class.getName() + "\" to membus.codec.classes"),
                own.getMessage());

        Codec<List> lists = r.codec(List.class); // an interface: written with the element classes
        UnregisteredClassException inside = assertThrows(UnregisteredClassException.class,
                () -> lists.encode(List.of(new Plain())));
        assertEquals(Plain.class.getName(), inside.className());
        assertTrue(inside.getMessage().contains("register(io.membus.codec.CodecRegistryTest.Plain.class)"),
                inside.getMessage());

        // a JDK-internal class Membus has no serializer for: copy it, registering it would not help
        UnregisteredClassException jdk = assertThrows(UnregisteredClassException.class,
                () -> lists.encode(List.of(new java.util.TreeMap<>(Map.of(1, 2)).keySet())));
        assertTrue(jdk.getMessage().contains("JDK-internal") && jdk.getMessage().contains("List.copyOf"), jdk.getMessage());
    }

    @Test
    void everyJdkImmutableCollectionComesBackEqualOfTheSameClassAndImmutable() {
        Codec<Object> c = CodecRegistry.jdkOnly().codec(Object.class);
        List<Object> values = List.of(
                List.of(), List.of(1), List.of(1, 2), List.of(1, 2, 3), List.copyOf(new ArrayList<>(List.of("a", "b", "c"))),
                List.of(1, 2, 3, 4).subList(1, 3), Set.of(), Set.of("x"), Set.of("x", "y", "z"), Map.of(),
                Map.of("k", 1), Map.of("k", 1, "j", 2, "i", 3), Arrays.asList(1, 2), Collections.emptyList(),
                Collections.emptySet(), Collections.emptyMap(), Collections.singletonList(5), Collections.singleton(6),
                Collections.singletonMap("s", 7), Collections.unmodifiableCollection(new ArrayList<>(List.of(1))),
                Collections.unmodifiableList(new ArrayList<>(List.of(1, 2))),
                Collections.unmodifiableList(new LinkedList<>(List.of(3))),
                Collections.unmodifiableSet(new HashSet<>(Set.of(4, 5))),
                Collections.unmodifiableMap(new HashMap<>(Map.of("m", List.of(8)))),
                Stream.of("p", "q").collect(Collectors.toUnmodifiableList()), Stream.of("r", "s").toList());
        for (Object v : values) {
            Object back = c.decode(c.encode(v));
            String kind = v.getClass().getName();
            if (kind.endsWith("$UnmodifiableCollection")) { // equality is identity there: compare the elements
                assertEquals(new ArrayList<>((Collection<?>) v), new ArrayList<>((Collection<?>) back), kind);
            } else {
                assertEquals(v, back, kind);
            }
            if (v.getClass().getName().startsWith("java.util.ImmutableCollections$")) {
                // List.copyOf, toList, a sublist: read back as List.of (Set.of, Map.of) of the same elements
                Class<?> expected = v instanceof List<?> l ? List.copyOf(l).getClass()
                        : v instanceof Set<?> st ? Set.copyOf(st).getClass() : Map.copyOf((Map<?, ?>) v).getClass();
                Class<?> ofSame = v instanceof List<?> l ? List.of(l.toArray()).getClass() : expected;
                assertTrue(back.getClass() == expected || back.getClass() == ofSame, kind + " -> " + back.getClass());
            } else {
                assertSame(v.getClass(), back.getClass(), kind);
            }
            if (back instanceof Collection<?> col && !(back instanceof List<?> && v.getClass() == Arrays.asList().getClass())) {
                assertThrows(UnsupportedOperationException.class, () -> ((Collection<Object>) col).add(1), kind);
            } else if (back instanceof Map<?, ?> m) {
                assertThrows(UnsupportedOperationException.class, () -> ((Map<Object, Object>) m).put("z", 1), kind);
            }
        }
        // a list with nulls (Stream.toList allows them) comes back with them, still immutable
        List<String> withNull = Stream.of("a", null, "b").toList();
        @SuppressWarnings("unchecked")
        List<String> back = (List<String>) c.decode(c.encode(withNull));
        assertEquals(withNull, back);
        assertThrows(UnsupportedOperationException.class, () -> back.add("c"));
    }

    @Test
    void aCorruptElementCountIsRefusedBeforeAllocating() {
        Codec<Object> c = CodecRegistry.jdkOnly().codec(Object.class);
        byte[] good = c.encode(List.of(1, 2, 3));
        // class id varint then the count: make the count huge
        byte[] bad = Arrays.copyOf(good, good.length);
        bad[1] = (byte) 0xff;
        bad[2] = (byte) 0xff;
        CodecException e = assertThrows(CodecException.class, () -> c.decode(bad));
        assertTrue(e.getMessage().contains("do not decode"), e.getMessage());
        // duplicates where Set.of refuses them are corrupt bytes too, not an IllegalArgumentException
        byte[] dup = c.encode(Set.of(7, 8));
        byte[] one = c.encode(Set.of(7));
        byte[] seven = Arrays.copyOfRange(one, 2, one.length);
        byte[] twice = new byte[2 + 2 * seven.length];
        System.arraycopy(dup, 0, twice, 0, 2);
        System.arraycopy(seven, 0, twice, 2, seven.length);
        System.arraycopy(seven, 0, twice, 2 + seven.length, seven.length);
        assertThrows(CodecException.class, () -> c.decode(twice));
    }
}
