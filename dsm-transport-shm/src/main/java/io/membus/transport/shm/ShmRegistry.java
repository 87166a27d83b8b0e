package io.membus.transport.shm;

import io.membus.core.error.DsmException;
import io.membus.core.error.NodeUnavailableException;

import java.io.IOException;
import java.io.Reader;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Map;
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
 * segment.0=node-3-seg-0.seg
 * segment.1=node-3-seg-1.seg
 * inbox=node-3.inbox
 * inbox.credits=64
 * inbox.max-size=65536
 * </pre>
 *
 * Written whole to a temporary file and renamed over the old one, so a reader
 * sees the old or the new registry, never a torn one.
 *
 * @param nodeId      the node
 * @param incarnation its incarnation
 * @param pid         its process id (a registry whose process is gone is stale)
 * @param segments    segment index to file name, relative to the directory
 * @param inbox       the node's message ring file (relative to the directory), or {@code null}
 * @param inboxCredits messages one sender may have unanswered in the node's inbox
 * @param inboxMaxSize the largest message payload the node takes
 *
 * <p><b>Note:</b> immutable value; thread-safe.
 */
public record ShmRegistry(int nodeId, long incarnation, long pid, Map<Integer, String> segments, String inbox,
                          int inboxCredits, int inboxMaxSize) {

    /** A registry without a message ring. */
    public ShmRegistry(int nodeId, long incarnation, long pid, Map<Integer, String> segments) {
        this(nodeId, incarnation, pid, segments, null, 0, 0);
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
        segments.forEach((i, f) -> p.setProperty("segment." + i, f));
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
            if (node != nodeId) {
                throw NodeUnavailableException.notSent(nodeId, "shm registry names another node: path=" + file
                        + ", node=" + node);
            }
            Map<Integer, String> segments = new TreeMap<>();
            for (String key : p.stringPropertyNames()) {
                if (key.startsWith("segment.")) {
                    segments.put(Integer.parseInt(key.substring("segment.".length())), p.getProperty(key));
                }
            }
            String inbox = p.getProperty("inbox");
            ShmRegistry reg = new ShmRegistry(node, incarnation, pid, Map.copyOf(segments), inbox,
                    inbox == null ? 0 : Integer.parseInt(p.getProperty("inbox.credits")),
                    inbox == null ? 0 : Integer.parseInt(p.getProperty("inbox.max-size")));
            if (!reg.processAlive()) {
                throw NodeUnavailableException.notSent(nodeId, "shm registry is stale: path=" + file + ", pid=" + pid
                        + " is not running; the node crashed: restart it, or remove the file");
            }
            return reg;
        } catch (RuntimeException e) {
            if (e instanceof NodeUnavailableException nue) {
                throw nue;
            }
            throw NodeUnavailableException.notSent(nodeId, "malformed shm registry: path=" + file + ", error=" + e, e);
        }
    }

    /** Whether the registry's process is still running. */
    public boolean processAlive() {
        return ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false);
    }
}
