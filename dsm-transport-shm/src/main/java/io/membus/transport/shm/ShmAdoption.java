package io.membus.transport.shm;

import io.membus.core.PrivateFiles;
import io.membus.core.error.DsmException;
import io.membus.core.error.NodeUnavailableException;
import io.membus.core.replication.GroupId;

import java.io.IOException;
import java.io.Reader;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.time.Instant;
import java.util.Collection;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.stream.Collectors;

/**
 * The two steps of an shm adoption (docs/replication.md §8) that do not touch memory:
 * <b>who</b> adopts a dead node's files, decided by the file system, and the <b>fence</b>
 * (STONITH) that makes sure the dead node's process can never write into them again.
 * {@link ShmTransport#adopt} runs them and then maps the files.
 *
 * <p><b>Who.</b> Every survivor that tries creates {@code node-<n>-<incarnation>.adopt} in the
 * shared directory with {@code O_CREAT|O_EXCL} semantics: the file is written whole under a
 * temporary name and then hard-linked to its final name, which fails when the name exists, so
 * exactly one survivor wins per incarnation of the dead node and a reader never sees a
 * half-written claim. The file names the winner ({@code node}, {@code incarnation}).
 *
 * <p><b>Fence.</b> The registry's {@code pid} and {@code pid.start} name the dead process
 * for good; a process with that pid and another start instant is not it (a reused pid) and
 * is never signalled. The dead process is killed with SIGKILL
 * ({@code ProcessHandle.destroyForcibly()}, which ends a SIGSTOPped process too; a
 * SIGKILLed process never runs user code again) and waited for until the deadline. A process
 * that cannot be killed (no permission, pid 1, this very process) or that does not exit by
 * the deadline is not adopted: {@link #fence} returns the line that says so, and the caller
 * tries again later.
 *
 * <p><b>Note:</b> static helpers; thread-safe (the race is decided by the file system, across
 * processes and threads alike).
 */
public final class ShmAdoption {

    /** Ends a process; a seam for tests that must simulate a process this user cannot kill. */
    @FunctionalInterface
    interface ProcessControl {
        /** Sends SIGKILL; false when the kernel refused (e.g. {@code EPERM}). */
        boolean destroyForcibly(ProcessHandle process);
    }

    /** The real thing: SIGKILL. */
    static final ProcessControl KILL = ProcessHandle::destroyForcibly;

    /**
     * The node that won the race to adopt a dead node's files.
     *
     * @param node        the adopter's node id
     * @param incarnation the adopter's incarnation
     *
     * <p><b>Note:</b> immutable value; thread-safe.
     */
    public record Claim(int node, long incarnation) {
    }

    private ShmAdoption() {
    }

    /** The claim file of incarnation {@code incarnation} of node {@code node}. */
    public static Path claimFile(Path dir, int node, long incarnation) {
        return dir.resolve("node-" + node + "-" + incarnation + ".adopt");
    }

    /**
     * Tries to become the adopter of incarnation {@code deadIncarnation} of {@code deadNode}.
     *
     * @return the winner: {@code self} when this call (or an earlier one of the same node and
     * incarnation) won, else the node that did
     * @throws NodeUnavailableException (not sent) when the claim cannot be written or read
     */
    static Claim race(Path dir, PrivateFiles files, int deadNode, long deadIncarnation, Claim self) {
        Path claim = claimFile(dir, deadNode, deadIncarnation);
        Path tmp = dir.resolve(claim.getFileName() + ".tmp-" + self.node() + "-" + ProcessHandle.current().pid()
                + "-" + Thread.currentThread().getId());
        try {
            Files.deleteIfExists(tmp);
            files.createFile(tmp);
            Properties p = new Properties();
            p.setProperty("node", Integer.toString(self.node()));
            p.setProperty("incarnation", Long.toString(self.incarnation()));
            try (Writer w = Files.newBufferedWriter(tmp, StandardCharsets.UTF_8)) {
                p.store(w, "membus shm adoption of node " + deadNode + " incarnation " + deadIncarnation);
            }
            try {
                Files.createLink(claim, tmp); // link(2): fails with EEXIST, as O_CREAT|O_EXCL does
                return self;
            } catch (FileAlreadyExistsException lost) {
                return read(dir, deadNode, deadIncarnation).orElseThrow(() -> NodeUnavailableException.notSent(
                        deadNode, "adoption claim vanished while it was read: path=" + claim
                                + "; another node is cleaning up this directory"));
            } catch (UnsupportedOperationException noLinks) {
                return raceByCreate(claim, files, deadNode, deadIncarnation, self);
            }
        } catch (IOException e) {
            throw NodeUnavailableException.notSent(deadNode, "cannot write adoption claim: path=" + claim
                    + "; check that membus.transports.shm.dir is writable by every node", e);
        } finally {
            try {
                Files.deleteIfExists(tmp);
            } catch (IOException ignored) {
                // a leftover temporary file is named after its writer and harmless
            }
        }
    }

    /** On a file system without hard links: create with O_EXCL, then write (readers retry a short read). */
    private static Claim raceByCreate(Path claim, PrivateFiles files, int deadNode, long deadIncarnation, Claim self)
            throws IOException {
        try {
            files.createFile(claim);
        } catch (FileAlreadyExistsException lost) {
            Path dir = claim.getParent();
            for (int i = 0; i < 1000; i++) {
                Optional<Claim> c = read(dir, deadNode, deadIncarnation);
                if (c.isPresent()) {
                    return c.get();
                }
                Thread.onSpinWait();
            }
            throw NodeUnavailableException.notSent(deadNode, "adoption claim stays empty: path=" + claim
                    + "; its writer died while writing it; remove the file to let the survivors race again");
        }
        Properties p = new Properties();
        p.setProperty("node", Integer.toString(self.node()));
        p.setProperty("incarnation", Long.toString(self.incarnation()));
        try (Writer w = Files.newBufferedWriter(claim, StandardCharsets.UTF_8)) {
            p.store(w, null);
        }
        return self;
    }

    /**
     * The adopter of incarnation {@code incarnation} of {@code node}, as its claim file says;
     * empty when no survivor has claimed it (or the file is still being written).
     */
    public static Optional<Claim> read(Path dir, int node, long incarnation) {
        Path claim = claimFile(dir, node, incarnation);
        Properties p = new Properties();
        try (Reader r = Files.newBufferedReader(claim, StandardCharsets.UTF_8)) {
            p.load(r);
        } catch (NoSuchFileException e) {
            return Optional.empty();
        } catch (IOException e) {
            throw NodeUnavailableException.notSent(node, "cannot read adoption claim: path=" + claim, e);
        }
        String n = p.getProperty("node");
        String i = p.getProperty("incarnation");
        if (n == null || i == null) {
            return Optional.empty();
        }
        try {
            return Optional.of(new Claim(Integer.parseInt(n), Long.parseLong(i)));
        } catch (NumberFormatException e) {
            throw NodeUnavailableException.notSent(node, "malformed adoption claim: path=" + claim + ", node=" + n
                    + ", incarnation=" + i + "; remove the file to let the survivors race again");
        }
    }

    /**
     * Makes sure the process of {@code dead} can never write into its files again: kills it
     * if it still runs (by pid and start instant) and waits for it to exit until
     * {@code deadlineNanos} ({@link System#nanoTime()} scale).
     *
     * @param groups the logical segments at stake (named by the line)
     * @return {@code null} when no such process runs any more; else the reason it may still
     * write, as one log line: the files must not be adopted yet
     */
    static String fence(ShmRegistry dead, Path registryFile, Collection<Integer> groups, long deadlineNanos,
                        ProcessControl control) {
        long pid = dead.pid();
        Optional<ProcessHandle> handle = ProcessHandle.of(pid);
        if (handle.isEmpty() || !handle.get().isAlive()) {
            return null;
        }
        ProcessHandle h = handle.get();
        Optional<Instant> started = h.info().startInstant();
        if (dead.pidStart() != null) {
            if (started.isPresent() && !started.get().equals(dead.pidStart())) {
                return null; // the pid runs another process, started after node's exited: never signal it
            }
            if (started.isEmpty()) {
                return line(dead, groups, h, "cannot be told apart from another process with its pid (the system"
                        + " does not say when it started)", "; it will be adopted when it exits");
            }
        } else {
            // a registry of an older version: the owner wrote it after it started, so a process
            // started after the registry's last write cannot be the owner
            Instant written = lastModified(registryFile);
            if (started.isPresent() && written != null && started.get().isAfter(written)) {
                return null;
            }
        }
        String state = state(pid);
        if ("Z".equals(state) || "X".equals(state)) {
            return null; // exited, not yet reaped: its memory mappings are gone
        }
        if (pid == 1) {
            return line(dead, groups, h, "is the first process of this pid namespace and is never signalled",
                    "; it will be adopted when it exits");
        }
        if (pid == ProcessHandle.current().pid()) {
            return line(dead, groups, h, "is this process (the dead node ran in this JVM) and cannot be killed by"
                    + " its adopter", "; it will be adopted when it exits");
        }
        boolean sent;
        try {
            sent = control.destroyForcibly(h);
        } catch (RuntimeException e) { // SecurityException, or the JDK refusing this process
            sent = false;
        }
        if (!sent) {
            return line(dead, groups, h, "cannot be killed by this user", "; it will be adopted when it exits");
        }
        long wait = deadlineNanos - System.nanoTime();
        try {
            h.onExit().get(Math.max(0, wait), TimeUnit.NANOSECONDS);
            return null;
        } catch (TimeoutException e) {
            if (!h.isAlive() || "Z".equals(state(pid))) {
                return null;
            }
            return line(dead, groups, h, "did not exit by the deadline after SIGKILL", "; it will be adopted when it"
                    + " exits");
        } catch (ExecutionException e) {
            throw DsmException.internal("waiting for the exit of process " + pid + " failed", e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return line(dead, groups, h, "was killed, but this thread was interrupted before it exited",
                    "; it will be adopted when it exits");
        }
    }

    /** The doc's line: {@code replication: cannot adopt segment 3/0: node 3's process 4242 (state T, user bob) ...}. */
    private static String line(ShmRegistry dead, Collection<Integer> groups, ProcessHandle h, String why, String then) {
        String state = state(h.pid());
        String user = h.info().user().orElse("unknown");
        String segments = groups.isEmpty() ? "none listed"
                : groups.stream().sorted().map(GroupId::toString).collect(Collectors.joining(", "));
        return "replication: cannot adopt segment " + segments + ": node " + dead.nodeId() + "'s process " + h.pid()
                + " (state " + (state == null ? "?" : state) + ", user " + user + ")" + describe(state) + why + then;
    }

    private static String describe(String state) {
        if (state == null) {
            return " ";
        }
        return switch (state) {
            case "T", "t" -> " is stopped and ";
            case "D" -> " is in uninterruptible sleep and ";
            default -> " is running and ";
        };
    }

    /** The state letter of {@code /proc/<pid>/stat} (R, S, D, T, Z, ...), or {@code null} off Linux. */
    static String state(long pid) {
        try {
            String stat = Files.readString(Path.of("/proc", Long.toString(pid), "stat"), StandardCharsets.US_ASCII);
            int close = stat.lastIndexOf(')'); // the command name may hold spaces and parentheses
            return close < 0 || close + 2 >= stat.length() ? null : stat.substring(close + 2, close + 3);
        } catch (IOException | RuntimeException e) {
            return null;
        }
    }

    private static Instant lastModified(Path file) {
        try {
            return Files.getLastModifiedTime(file).toInstant();
        } catch (IOException e) {
            return null;
        }
    }
}
