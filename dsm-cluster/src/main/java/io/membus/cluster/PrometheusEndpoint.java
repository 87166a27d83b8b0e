package io.membus.cluster;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.membus.core.error.DsmConfigException;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;

import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.Executors;

/**
 * A node's Prometheus scrape endpoint ({@code membus.metrics.prometheus}): a
 * {@link PrometheusMeterRegistry} in the node's composite registry and the JDK's HTTP
 * server answering {@code GET /metrics} with its text format (or OpenMetrics when
 * the {@code Accept} header asks for it, as Prometheus does). Anything else gets 404, a method other
 * than GET or HEAD 405.
 *
 * <p><b>Note:</b> thread-safe: requests run one at a time on the server's one thread
 * (a daemon), and the registry's scrape is itself thread-safe. {@link #close()} stops
 * the server at once (no grace for a scrape in flight) and closes the registry.
 */
final class PrometheusEndpoint implements AutoCloseable {
    private static final String TEXT = "text/plain; version=0.0.4; charset=utf-8";
    private static final String OPEN_METRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8";

    private final PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    private final HttpServer server;
    private final java.util.concurrent.ExecutorService executor;

    /**
     * Listens on {@code host:port} (port 0: an ephemeral one).
     *
     * @throws DsmConfigException ({@code membus.metrics.prometheus.port} or {@code .host}) when
     *                            the address cannot be bound
     */
    PrometheusEndpoint(String host, int port, int nodeId) {
        try {
            server = HttpServer.create(new InetSocketAddress(host, port), 16);
        } catch (IOException | IllegalArgumentException | SecurityException e) {
            registry.close();
            String key = new InetSocketAddress(host, 0).isUnresolved() ? "membus.metrics.prometheus.host"
                    : "membus.metrics.prometheus.port";
            throw new DsmConfigException(key, host + ":" + port, "an address this node can listen on for the"
                    + " Prometheus scrape endpoint (a free port on a local interface; 0 takes an ephemeral one): "
                    + e, e);
        }
        executor = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "membus-node-" + nodeId + "-prometheus");
            t.setDaemon(true);
            return t;
        });
        server.setExecutor(executor);
        server.createContext("/", this::handle);
        server.start();
    }

    PrometheusMeterRegistry registry() {
        return registry;
    }

    /** Where the endpoint listens (the port actually bound). */
    InetSocketAddress address() {
        return server.getAddress();
    }

    private void handle(HttpExchange exchange) throws IOException {
        try (exchange) {
            String method = exchange.getRequestMethod();
            if (!exchange.getRequestURI().getPath().equals("/metrics")) {
                reply(exchange, 404, "text/plain; charset=utf-8", "not found: the metrics are at /metrics\n", method);
                return;
            }
            if (!method.equals("GET") && !method.equals("HEAD")) {
                exchange.getResponseHeaders().set("Allow", "GET, HEAD");
                reply(exchange, 405, "text/plain; charset=utf-8", "method not allowed: use GET\n", method);
                return;
            }
            String accept = exchange.getRequestHeaders().getFirst("Accept");
            String contentType = accept != null && accept.contains("application/openmetrics-text")
                    ? OPEN_METRICS : TEXT;
            reply(exchange, 200, contentType, registry.scrape(contentType), method);
        }
    }

    private static void reply(HttpExchange exchange, int status, String contentType, String body, String method)
            throws IOException {
        byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
        exchange.getResponseHeaders().set("Content-Type", contentType);
        boolean head = method.equals("HEAD");
        exchange.sendResponseHeaders(status, head ? -1 : bytes.length);
        if (!head) {
            try (OutputStream out = exchange.getResponseBody()) {
                out.write(bytes);
            }
        }
    }

    @Override
    public void close() {
        server.stop(0);
        executor.shutdownNow();
        registry.close();
    }
}
