package io.membus.transport.shm;

import io.membus.core.error.DsmException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.replication.GroupId;

import java.io.IOException;
import java.io.Reader;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Instant;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.TreeMap;

/**
 * The small registry file through which {@code shm} nodes find each other: one
 * file per node, {@code node-<id>.reg} in the shared directory, in
 * {@link Properties} form:
 *
 * <pre>
 * node=3
 * incarnation=1763800000000123
 * pid=41234
 * pid.start=2026-11-26T20:01:02.340Z
 * segment.0=node-3-seg-0.seg
 * segment.1=node-3-seg-1.seg
 * inbox=node-3.inbox
 * inbox.credits=64
 * inbox.max-size=65536
 * hosted.2.0=node-3-hosted-2-0.seg
 * </pre>
 *
 * <p>{@code pid.start} is the process's start instant ({@code ProcessHandle.info().startInstant()}):
 * with the pid it names one process for good, so a pid the kernel gave to another process
 * after this one exited is never taken for it (never killed by an adopter, never seen as
 * this node alive). {@code hosted.<n>.<s>} lists the segment files of other nodes' logical
 * segments {@code (n, s)} that this node adopted and serves ({@link ShmAdoption}).
 * Registries written before these keys existed still read (no start instant, nothing hosted).
 *
 * Written whole to a temporary file and renamed over the old one, so a reader
 * sees the old or the new registry, never a torn one.
 *
 * @param nodeId      the node
 * @param incarnation its incarnation
 * @param pid         its process id (a registry whose process is gone is stale)
 * @param pidStart    the start instant of that process, or {@code null} (a registry of an older version)
 * @param segments    segment index to file name, relative to the directory
 * @param inbox       the node's message ring file (relative to the directory), or {@code null}
 * @param inboxCredits messages one sender may have unanswered in the node's inbox
 * @param inboxMaxSize the largest message payload the node takes
 * @param hosted      adopted logical segments served by this node: {@link io.membus.core.replication.GroupId}
 *                    to file name, relative to the directory
 *
 * <p><b>Note:</b> immutable value; thread-safe.
 */
public record ShmRegistry(int nodeId, long incarnation, long pid, Instant pidStart, Map<Integer, String> segments,
                          String inbox, int inboxCredits, int inboxMaxSize, Map<Integer, String> hosted) {

    public ShmRegistry {
        segments = Map.copyOf(segments);
        hosted = Map.copyOf(hosted);
    }

    /** A registry of this process (its pid and start instant), hosting nothing. */
    public ShmRegistry(int nodeId, long incarnation, long pid, Map<Integer, String> segments, String inbox,
                       int inboxCredits, int inboxMaxSize) {
        this(nodeId, incarnation, pid, startOf(pid), segments, inbox, inboxCredits, inboxMaxSize, Map.of());
    }

    /** A registry without a message ring. */
    public ShmRegistry(int nodeId, long incarnation, long pid, Map<Integer, String> segments) {
        this(nodeId, incarnation, pid, segments, null, 0, 0);
    }

    /** The start instant of process {@code pid}, or {@code null} when it is gone or the system does not say. */
    public static Instant startOf(long pid) {
        return ProcessHandle.of(pid).flatMap(h -> h.info().startInstant()).orElse(null);
    }

    public static Path fileOf(Path dir, int nodeId) {
        return dir.resolve("node-" + nodeId + ".reg");
    }

    /** Writes this registry atomically into {@code dir}, its file created with the permissions of {@code files}. */
    public void write(Path dir, io.membus.core.PrivateFiles files) {
        Properties p = new Properties();
        p.setProperty("node", Integer.toString(nodeId));
        p.setProperty("incarnation", Long.toString(incarnation));
        p.setProperty("pid", Long.toString(pid));
        if (pidStart != null) {
            p.setProperty("pid.start", pidStart.toString());
        }
        segments.forEach((i, f) -> p.setProperty("segment." + i, f));
        hosted.forEach((g, f) -> p.setProperty("hosted." + GroupId.node(g) + "." + GroupId.index(g), f));
        if (inbox != null) {
            p.setProperty("inbox", inbox);
            p.setProperty("inbox.credits", Integer.toString(inboxCredits));
            p.setProperty("inbox.max-size", Integer.toString(inboxMaxSize));
        }
        Path target = fileOf(dir, nodeId);
        Path tmp = dir.resolve("node-" + nodeId + ".reg.tmp-" + ProcessHandle.current().pid());
        try {
            Files.deleteIfExists(tmp); // left by a process of this pid that died half way
            files.createFile(tmp);
            try (Writer w = Files.newBufferedWriter(tmp, StandardCharsets.UTF_8)) {
                p.store(w, "membus shm registry");
            }
            try {
                Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            } catch (AtomicMoveNotSupportedException e) {
                Files.move(tmp, target, StandardCopyOption.REPLACE_EXISTING);
            }
        } catch (IOException e) {
            throw DsmException.internal("cannot write shm registry: path=" + target
                    + "; check that the directory exists and is writable", e);
        }
    }

    /**
     * Reads and checks a peer's registry.
     *
     * @throws NodeUnavailableException when the file is missing, malformed, or names a
     *                                  process that is no longer running (stale)
     */
    public static ShmRegistry read(Path dir, int nodeId) {
        ShmRegistry reg = readAny(dir, nodeId);
        if (!reg.processAlive()) {
            throw NodeUnavailableException.notSent(nodeId, "shm registry is stale: path=" + fileOf(dir, nodeId)
                    + ", pid=" + reg.pid() + " is not running; the node crashed: restart it, or remove the file");
        }
        return reg;
    }

    /**
     * Reads a node's registry whether or not its process still runs: what an adopter reads
     * of a dead node.
     *
     * @throws NodeUnavailableException when the file is missing or malformed
     */
    public static ShmRegistry readAny(Path dir, int nodeId) {
        Path file = fileOf(dir, nodeId);
        Properties p = new Properties();
        try (Reader r = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
            p.load(r);
        } catch (NoSuchFileException e) {
            throw NodeUnavailableException.notSent(nodeId, "shm registry file missing: path=" + file
                    + "; the node is not running with transport=shm on this directory, or has exited");
        } catch (IOException e) {
            throw NodeUnavailableException.notSent(nodeId, "cannot read shm registry: path=" + file, e);
        }
        try {
            int node = Integer.parseInt(p.getProperty("node"));
            long incarnation = Long.parseLong(p.getProperty("incarnation"));
            long pid = Long.parseLong(p.getProperty("pid"));
            String start = p.getProperty("pid.start");
            if (node != nodeId) {
                throw NodeUnavailableException.notSent(nodeId, "shm registry names another node: path=" + file
                        + ", node=" + node);
            }
            Map<Integer, String> segments = new TreeMap<>();
            Map<Integer, String> hosted = new TreeMap<>();
            for (String key : p.stringPropertyNames()) {
                if (key.startsWith("segment.")) {
                    segments.put(Integer.parseInt(key.substring("segment.".length())), p.getProperty(key));
                } else if (key.startsWith("hosted.")) {
                    String[] ns = key.substring("hosted.".length()).split("\\.");
                    if (ns.length != 2) {
                        throw new IllegalArgumentException("hosted entry is not hosted.<node>.<segment>: " + key);
                    }
                    hosted.put(GroupId.of(Integer.parseInt(ns[0]), Integer.parseInt(ns[1])), p.getProperty(key));
                }
            }
            String inbox = p.getProperty("inbox");
            return new ShmRegistry(node, incarnation, pid, start == null ? null : Instant.parse(start), segments,
                    inbox, inbox == null ? 0 : Integer.parseInt(p.getProperty("inbox.credits")),
                    inbox == null ? 0 : Integer.parseInt(p.getProperty("inbox.max-size")), hosted);
        } catch (RuntimeException e) {
            if (e instanceof NodeUnavailableException nue) {
                throw nue;
            }
            throw NodeUnavailableException.notSent(nodeId, "malformed shm registry: path=" + file + ", error=" + e, e);
        }
    }

    /** This registry with {@code hosted} as its adopted segments. */
    public ShmRegistry withHosted(Map<Integer, String> hosted) {
        return new ShmRegistry(nodeId, incarnation, pid, pidStart, segments, inbox, inboxCredits, inboxMaxSize, hosted);
    }

    /**
     * Whether the registry's process is still running: its pid runs and, when the registry
     * has a start instant, the process with that pid started then (else the pid was reused
     * by another process after this node's exited).
     */
    public boolean processAlive() {
        Optional<ProcessHandle> h = ProcessHandle.of(pid);
        if (h.isEmpty() || !h.get().isAlive()) {
            return false;
        }
        if (pidStart == null) {
            return true;
        }
        Optional<Instant> start = h.get().info().startInstant();
        return start.isEmpty() || start.get().equals(pidStart);
    }
}
