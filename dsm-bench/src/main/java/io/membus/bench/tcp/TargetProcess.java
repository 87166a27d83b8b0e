package io.membus.bench.tcp;

import io.membus.core.directory.PeerInfo;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A {@link TcpBenchTarget} child process: node 1 of a tcp benchmark with its
 * floors, started with this JVM's module flags and a fresh cluster secret, and
 * stopped by closing its standard input.
 *
 * <p><b>Note:</b> not thread-safe; owned by one benchmark state.
 */
final class TargetProcess implements AutoCloseable {
    final String secret;
    final PeerInfo peer;
    final long remoteKey;
    final String host;
    final int nettyFloorPort;
    final int blockingFloorPort;
    /** The {@link BlockingFloor} that batches its replies ({@link BlockingFloor.Mode#BATCHED}). */
    final int batchingFloorPort;
    private final Process process;

    TargetProcess() throws IOException {
        this(1);
    }

    /** @param ioThreads {@code tcp.io-threads} of the target node */
    TargetProcess(int ioThreads) throws IOException {
        byte[] bytes = new byte[16];
        new SecureRandom().nextBytes(bytes);
        secret = HexFormat.of().formatHex(bytes);
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        for (String a : ManagementFactory.getRuntimeMXBean().getInputArguments()) {
            if (a.startsWith("--add-") || a.startsWith("-Dchronicle")) {
                cmd.add(a);
            }
        }
        cmd.addAll(List.of("-Xmx512m", "-cp", System.getProperty("java.class.path"), TcpBenchTarget.class.getName(),
                secret, Integer.toString(ioThreads)));
        process = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
        BufferedReader out = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
        String line;
        do {
            line = out.readLine();
            if (line == null) {
                throw new IllegalStateException("the target process exited before it was ready");
            }
        } while (!line.startsWith("READY "));
        String[] f = line.split(" ");
        peer = new PeerInfo(1, Long.parseLong(f[1]), f[2]);
        remoteKey = Long.parseLong(f[3]);
        host = io.membus.core.config.HostPort.parse("the target's tcp address", f[2]).host();
        nettyFloorPort = Integer.parseInt(f[4]);
        blockingFloorPort = Integer.parseInt(f[5]);
        batchingFloorPort = Integer.parseInt(f[6]);
    }

    @Override
    public void close() throws Exception {
        process.getOutputStream().close(); // the target exits when its stdin closes
        if (!process.waitFor(10, TimeUnit.SECONDS)) {
            process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
        }
    }
}
