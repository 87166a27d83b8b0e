package io.membus.bench.peers;

import io.membus.core.error.DsmConfigException;
import io.membus.core.error.DsmTimeoutException;
import redis.clients.jedis.Jedis;

import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/**
 * A {@code redis-server} of the benchmark's own: started on a free loopback port with no
 * persistence ({@code --save "" --appendonly no}), no protected mode and no other client, and
 * stopped by {@link #close()} (SIGTERM, then SIGKILL if it has not exited within 10 s). The
 * executable is looked up on {@code PATH}, then in {@code /usr/bin} and {@code /usr/local/bin}
 * (or named by the system property {@value #EXECUTABLE_PROPERTY});
 * when there is none, {@link #start()} fails with a {@link DsmConfigException} that names the
 * Debian package to install ({@code apt-get install redis-server}), and the benchmarks that
 * need Redis are skipped with that message (JMH prints it; the other peers still run).
 *
 * <p><b>Note:</b> not thread-safe: started and closed by one thread (JMH's trial setup and
 * teardown). The server it starts is a separate process; clients reach it over loopback.
 */
public final class RedisServer implements AutoCloseable {
    /** Where the executable is looked for after {@code PATH}. */
    private static final List<Path> FALLBACK_DIRS = List.of(Path.of("/usr/bin"), Path.of("/usr/local/bin"));
    private static final Duration READY_DEADLINE = Duration.ofSeconds(20);
    private static final Duration STOP_DEADLINE = Duration.ofSeconds(10);

    public final String host = "127.0.0.1";
    public final int port;
    public final String version;
    private final Process process;

    private RedisServer(int port, String version, Process process) {
        this.port = port;
        this.version = version;
        this.process = process;
    }

    /**
     * A system property naming the {@code redis-server} executable to use instead of looking it
     * up (for an installation elsewhere); when set, nothing else is looked up.
     */
    public static final String EXECUTABLE_PROPERTY = "membus.bench.redis-server";

    /** The {@code redis-server} executable, if installed (or the one {@value #EXECUTABLE_PROPERTY} names, if executable). */
    public static Optional<Path> executable() {
        String named = System.getProperty(EXECUTABLE_PROPERTY);
        if (named != null) {
            return Optional.of(Path.of(named)).filter(Files::isExecutable);
        }
        List<Path> dirs = new ArrayList<>();
        String path = System.getenv("PATH");
        if (path != null) {
            for (String d : path.split(File.pathSeparator)) {
                if (!d.isEmpty()) {
                    dirs.add(Path.of(d));
                }
            }
        }
        dirs.addAll(FALLBACK_DIRS);
        return dirs.stream().map(d -> d.resolve("redis-server")).filter(Files::isExecutable).findFirst();
    }

    /**
     * Starts a server on a free loopback port and waits (at most 20 s) until it answers
     * {@code PING}.
     *
     * @throws DsmConfigException when {@code redis-server} is not installed
     * @throws DsmTimeoutException when it does not answer in time (it is stopped then)
     */
    public static RedisServer start() {
        Path exe = executable().orElseThrow(() -> new DsmConfigException("redis-server",
                System.getProperty(EXECUTABLE_PROPERTY, "not found on PATH, in /usr/bin or /usr/local/bin"),
                "an installed redis-server on PATH or in /usr/bin to measure Redis: on Debian or Ubuntu run"
                        + " 'apt-get install redis-server' (the benchmark starts its own server on a free loopback"
                        + " port and stops it; the system service may stay disabled); the Redis benchmarks are"
                        + " skipped until then, the other peers run without it"));
        int port = freePort();
        List<String> cmd = List.of(exe.toString(), "--port", Integer.toString(port), "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "no", "--protected-mode", "no", "--daemonize", "no",
                "--loglevel", "warning", "--dir", System.getProperty("java.io.tmpdir"));
        Process p;
        try {
            p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot start " + exe, e);
        }
        long deadline = System.nanoTime() + READY_DEADLINE.toNanos();
        while (true) {
            try (Jedis j = new Jedis("127.0.0.1", port, 2_000)) {
                if ("PONG".equals(j.ping())) {
                    String info = j.info("server");
                    String version = info.lines().filter(l -> l.startsWith("redis_version:"))
                            .map(l -> l.substring("redis_version:".length()).trim()).findFirst().orElse("?");
                    return new RedisServer(port, version, p);
                }
            } catch (RuntimeException notYet) {
                // not listening yet
            }
            if (!p.isAlive() || System.nanoTime() - deadline > 0) {
                stop(p);
                throw new DsmTimeoutException("redis-server on 127.0.0.1:" + port + " answering PING", 0,
                        READY_DEADLINE, p.isAlive() ? "the machine may be too loaded: run the benchmark again"
                        : "it exited with " + p.exitValue() + ": run '" + String.join(" ", cmd) + "' to see why");
            }
            sleep(50);
        }
    }

    /** Whether the server's process is still running. */
    public boolean isAlive() {
        return process.isAlive();
    }

    /** A new connection to this server (the caller closes it); its socket timeout is 10 s. */
    public Jedis connect() {
        return new Jedis(host, port, 10_000);
    }

    private static int freePort() {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getByName("127.0.0.1"))) {
            return s.getLocalPort();
        } catch (IOException e) {
            throw new UncheckedIOException("no free loopback port", e);
        }
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while waiting for redis-server", e);
        }
    }

    private static void stop(Process p) {
        p.destroy(); // SIGTERM: redis-server exits at once (nothing to save)
        try {
            if (!p.waitFor(STOP_DEADLINE.toMillis(), TimeUnit.MILLISECONDS)) {
                p.destroyForcibly().waitFor(STOP_DEADLINE.toMillis(), TimeUnit.MILLISECONDS);
            }
        } catch (InterruptedException e) {
            p.destroyForcibly();
            Thread.currentThread().interrupt();
        }
    }

    /** Stops the server (SIGTERM, then SIGKILL after 10 s) and waits for it to exit. */
    @Override
    public void close() {
        stop(process);
    }
}
