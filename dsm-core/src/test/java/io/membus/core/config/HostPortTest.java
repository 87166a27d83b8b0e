package io.membus.core.config;

import io.membus.core.error.DsmConfigException;
import org.junit.jupiter.api.Test;

import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The one peer-address parser: good and bad addresses, IPv6 in brackets, port ranges, the typed error. */
class HostPortTest {

    @Test
    void namesIpv4AndBracketedIpv6AddressesParseAndPrintBack() {
        assertEquals(new HostPort("127.0.0.1", 2551), HostPort.parse("membus.seed-nodes", "127.0.0.1:2551"));
        assertEquals(new HostPort("node-1.example.org", 1), HostPort.parse("k", " node-1.example.org:1 "));
        assertEquals(new HostPort("localhost", 65535), HostPort.parse("k", "localhost:65535"));
        assertEquals(new HostPort("::1", 2551), HostPort.parse("k", "[::1]:2551"));
        assertEquals(new HostPort("fe80::1%eth0", 7), HostPort.parse("k", "[fe80::1%eth0]:7"));
        assertEquals(new HostPort("2001:db8::a:b", 443), HostPort.parse("k", "[2001:db8::a:b]:443"));
        for (String s : List.of("127.0.0.1:2551", "node-1.example.org:1", "[::1]:2551", "[2001:db8::a:b]:443")) {
            assertEquals(s, HostPort.parse("k", s).toString(), "prints back as parsed");
        }
        assertEquals("[::1]:80", HostPort.format("::1", 80));
        assertEquals("[::1]:80", HostPort.format("[::1]", 80), "an already bracketed host is not bracketed twice");
        assertEquals("10.0.0.1:1:2", HostPort.format("10.0.0.1", 1, 2));
    }

    @Test
    void portZeroOnlyWhereTheCallerAllowsIt() {
        assertEquals(0, HostPort.parse("k", "h:0", 0).port());
        DsmConfigException e = assertThrows(DsmConfigException.class, () -> HostPort.parse("membus.seed-nodes", "h:0"));
        assertEquals("membus.seed-nodes", e.key());
        assertEquals("h:0", e.value());
        assertTrue(e.getMessage().contains("outside 1..65535"), e.getMessage());
    }

    @Test
    void severalPortsOfOneHost() {
        List<HostPort> a = HostPort.parse("peer address", "10.0.0.7:4000:4001", 2, 1);
        assertEquals(List.of(new HostPort("10.0.0.7", 4000), new HostPort("10.0.0.7", 4001)), a);
        assertEquals(List.of(new HostPort("::1", 1), new HostPort("::1", 2)), HostPort.parse("k", "[::1]:1:2", 2, 1));
        assertTrue(assertThrows(DsmConfigException.class, () -> HostPort.parse("peer address", "10.0.0.7:4000", 2, 1))
                .getMessage().contains("found 1 port"));
        assertTrue(assertThrows(DsmConfigException.class, () -> HostPort.parse("peer address", "10.0.0.7:1:2:3", 2, 1))
                .getMessage().contains("host:port:port"));
    }

    @Test
    void everyBadAddressIsATypedErrorNamingTheKeyTheValueAndWhy() {
        String[][] bad = {
                {"localhost", "there is no port"},
                {"localhost:", "is not a decimal number"},
                {":2551", "the host is empty"},
                {"h:port", "\"port\" is not a decimal number"},
                {"h:+80", "is not a decimal number"},
                {"h:-1", "is not a decimal number"},
                {"h:65536", "outside 1..65535"},
                {"h:99999", "outside 1..65535"},
                {"h:123456", "is not a decimal number"},
                {"::1:2551", "an IPv6 address goes in brackets"},
                {"fe80::1", "an IPv6 address goes in brackets"},
                {"[::1:2551", "no closing ']'"},
                {"[::1]", "a port must follow"},
                {"[::1]2551", "a port must follow"},
                {"[]:2551", "is not an IPv6 address"},
                {"[host]:2551", "is not an IPv6 address"},
                {"a b:1", "has a character no host has"},
                {"user@h:1", "has a character no host has"},
                {"", "host:port"},
                {"   ", "host:port"},
        };
        for (String[] c : bad) {
            DsmConfigException e = assertThrows(DsmConfigException.class, () -> HostPort.parse("membus.seed-nodes",
                    c[0]), c[0]);
            assertEquals("membus.seed-nodes", e.key(), c[0]);
            assertTrue(e.getMessage().contains(c[1]), c[0] + " -> " + e.getMessage());
            assertTrue(e.allowed().contains("[::1]:2551"), "says what is allowed: " + e.getMessage());
        }
        assertEquals("<missing>", assertThrows(DsmConfigException.class, () -> HostPort.parse("k", null)).value());
    }
}
