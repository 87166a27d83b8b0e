package io.membus.core.config;

import io.membus.core.error.DsmConfigException;

import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * A peer's address, {@code host:port}: the one parser and printer of every address a
 * node is given or publishes (seed nodes, the {@code membus status --seed} argument, a
 * tcp or rdma peer's directory address). The host is a name, an IPv4 address or an IPv6
 * address in brackets ({@code [::1]:2551}; an IPv6 address without them is refused, as
 * its last group cannot be told from a port). The port is decimal, {@code 1..65535}, or
 * {@code 0..65535} where the caller allows 0. A bad address is a
 * {@link DsmConfigException} naming the key (or what the address is), the value, and the
 * form allowed.
 *
 * <p>{@link #host()} holds the host without brackets (what {@link InetSocketAddress}
 * takes); {@link #toString()} prints the address back in the parsed form.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 *
 * @param host the host name or address literal, without brackets
 * @param port the port
 */
public record HostPort(String host, int port) {
    private static final String FORM = "host:port, where host is a name, an IPv4 address or an IPv6 address in"
            + " brackets (e.g. 127.0.0.1:2551, node-1.example:2551, [::1]:2551)";

    public HostPort {
        Objects.requireNonNull(host, "host");
        if (port < 0 || port > 65535) {
            throw new IllegalArgumentException("port " + port + " is outside 0..65535");
        }
    }

    /**
     * Parses {@code host:port} with a port in {@code minPort..65535}.
     *
     * @param key     the configuration key the value was set at, or what it is ("peer address"): the error names it
     * @param minPort 1, or 0 where an ephemeral port is allowed
     * @throws DsmConfigException when {@code value} is not such an address
     */
    public static HostPort parse(String key, String value, int minPort) {
        return parse(key, value, 1, minPort).get(0);
    }

    /** {@link #parse(String, String, int)} with a port {@code 1..65535}. */
    public static HostPort parse(String key, String value) {
        return parse(key, value, 1);
    }

    /**
     * Parses a host and {@code ports} ports, {@code host:port:port...} (an rdma peer's
     * {@code host:controlPort:cmPort}), each in {@code minPort..65535}: one address per port,
     * in order, all of the one host.
     *
     * @throws DsmConfigException when {@code value} is not such an address
     */
    public static List<HostPort> parse(String key, String value, int ports, int minPort) {
        if (ports < 1 || minPort < 0 || minPort > 1) {
            throw new IllegalArgumentException("ports=" + ports + " (at least 1), minPort=" + minPort + " (0 or 1)");
        }
        String form = ports == 1 ? FORM : FORM.replace("host:port", "host" + ":port".repeat(ports));
        String allowed = form + ", port" + (ports == 1 ? "" : "s") + " " + minPort + "..65535";
        if (value == null || value.isBlank()) {
            throw new DsmConfigException(key, value == null ? "<missing>" : "\"" + value + "\"", allowed);
        }
        String v = value.trim();
        String host;
        String rest;
        if (v.startsWith("[")) {
            int close = v.indexOf(']');
            if (close < 0) {
                throw new DsmConfigException(key, value, allowed + "; the IPv6 address has no closing ']'");
            }
            host = v.substring(1, close);
            if (host.indexOf(':') < 0 || !host.chars().allMatch(c -> c < 128 && (Character.isLetterOrDigit(c)
                    || c == ':' || c == '.' || c == '%' || c == '_' || c == '-'))) { // hex groups, a zone: %eth0
                throw new DsmConfigException(key, value, allowed + "; [" + host + "] is not an IPv6 address");
            }
            rest = v.substring(close + 1);
            if (!rest.startsWith(":")) {
                throw new DsmConfigException(key, value, allowed + "; a port must follow the ']' after a ':'");
            }
            rest = rest.substring(1);
        } else {
            int colon = v.indexOf(':');
            if (colon < 0) {
                throw new DsmConfigException(key, value, allowed + "; there is no port");
            }
            if (v.chars().filter(c -> c == ':').count() > ports) {
                throw new DsmConfigException(key, value, allowed + "; an IPv6 address goes in brackets");
            }
            host = v.substring(0, colon);
            rest = v.substring(colon + 1);
            if (host.isEmpty()) {
                throw new DsmConfigException(key, value, allowed + "; the host is empty");
            }
        }
        if (host.chars().anyMatch(c -> Character.isWhitespace(c) || c == '/' || c == '@' || c == '[' || c == ']')) {
            throw new DsmConfigException(key, value, allowed + "; the host \"" + host + "\" has a character no host has");
        }
        String[] portTexts = rest.split(":", -1);
        if (portTexts.length != ports) {
            throw new DsmConfigException(key, value, allowed + "; found " + portTexts.length + " port"
                    + (portTexts.length == 1 ? "" : "s"));
        }
        List<HostPort> out = new ArrayList<>(ports);
        for (String p : portTexts) {
            if (p.isEmpty() || p.length() > 5 || !p.chars().allMatch(c -> c >= '0' && c <= '9')) {
                throw new DsmConfigException(key, value, allowed + "; the port \"" + p + "\" is not a decimal number");
            }
            int port = Integer.parseInt(p);
            if (port < minPort || port > 65535) {
                throw new DsmConfigException(key, value, allowed + "; the port " + port + " is outside " + minPort
                        + "..65535");
            }
            out.add(new HostPort(host, port));
        }
        return List.copyOf(out);
    }

    /** Prints a host and ports as {@link #parse(String, String, int, int)} reads them (an IPv6 host in brackets). */
    public static String format(String host, int... ports) {
        String h = host.startsWith("[") ? host : host.indexOf(':') >= 0 ? "[" + host + "]" : host;
        StringBuilder b = new StringBuilder(h);
        for (int p : ports) {
            b.append(':').append(p);
        }
        return b.toString();
    }

    /** The socket address to connect to (the host is resolved now). */
    public InetSocketAddress socketAddress() {
        return new InetSocketAddress(host, port);
    }

    /** {@code host:port}, an IPv6 host in brackets: what {@link #parse} reads back. */
    @Override
    public String toString() {
        return format(host, port);
    }
}
