package io.membus.transport.shm;

import io.membus.core.PrivateFiles;
import io.membus.core.Segment;
import io.membus.core.error.DsmConfigException;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.Transport;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.Transports;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFileAttributes;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * Issue 26.4: a cluster's shm files hold its live memory, its registries and its message
 * rings; they were created 0644 in a 0755 directory, so any local user could read them.
 * Every file a node creates must be 0600 and every directory 0700, or 0660/0770 owned by
 * the configured {@code membus.transports.shm.group}; file-backed segments of any
 * transport the same.
 */
class ShmPermissionsTest {
    private Path root;
    private final List<Transport> nodes = new ArrayList<>();

    @BeforeEach
    void root() throws IOException {
        Path base = Files.isDirectory(Path.of("/dev/shm")) ? Path.of("/dev/shm")
                : Path.of(System.getProperty("java.io.tmpdir"));
        assumeTrue(base.getFileSystem().supportedFileAttributeViews().contains("posix"), "POSIX permissions only");
        root = base.resolve("membus-perm-test-" + ProcessHandle.current().pid() + "-" + System.nanoTime());
        // a parent every user may read, as /dev/shm is: what is below it must protect itself
        Files.createDirectory(root, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwxr-xr-x")));
        Files.setPosixFilePermissions(root, PosixFilePermissions.fromString("rwxr-xr-x"));
    }

    @AfterEach
    void cleanUp() throws IOException {
        nodes.forEach(Transport::close);
        if (root != null) {
            try (Stream<Path> walk = Files.walk(root)) {
                walk.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            }
        }
    }

    private Transport node(int id, Path dir, String... extra) {
        TransportConfig.Builder b = TransportConfig.builder(id).property("shm.dir", dir.toString());
        for (int i = 0; i < extra.length; i += 2) {
            b.property(extra[i], extra[i + 1]);
        }
        Transport t = Transports.create("shm", b.build());
        nodes.add(t);
        return t;
    }

    private static String mode(Path p) throws IOException {
        return PosixFilePermissions.toString(Files.getPosixFilePermissions(p));
    }

    /** Every file in {@code dir}, with its mode: all must be {@code expected}. */
    private static void assertEveryFile(Path dir, String expected, int atLeast) throws IOException {
        List<String> seen = new ArrayList<>();
        try (Stream<Path> files = Files.list(dir)) {
            for (Path f : (Iterable<Path>) files::iterator) {
                assertEquals(expected, mode(f), f.toString());
                seen.add(f.getFileName().toString());
            }
        }
        assertTrue(seen.size() >= atLeast, "expected segment files, a registry and a ring: " + seen);
    }

    @Test
    void everyFileAndDirectoryANodeCreatesIsTheOwnersOnly() throws IOException {
        Path dir = root.resolve("cluster").resolve("shm"); // two levels the node creates
        Transport a = node(1, dir);
        Transport b = node(2, dir);
        a.export(SegmentSpec.of(0, 64 * 1024));
        b.export(SegmentSpec.of(0, 64 * 1024));
        a.export(new SegmentSpec(1, 64 * 1024, io.membus.core.Access.ALL, dir.resolve("node-1-kept.seg")));
        assertEquals("rwx------", mode(dir));
        assertEquals("rwx------", mode(dir.getParent()), "a parent the node created");
        assertEquals("rwxr-xr-x", mode(root), "a parent that existed is not changed");
        // segment files, registries (node-N.reg) and message rings (node-N.inbox)
        assertEveryFile(dir, "rw-------", 7);
    }

    @Test
    void aDirectoryAnEarlierVersionLeftOpenIsClosedAtTheNextStart() throws IOException {
        Path dir = root.resolve("old");
        Files.createDirectory(dir);
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxr-xr-x"));
        Path oldSegment = dir.resolve("node-1-kept.seg");
        Segment s = Segment.createOrOpenFile(oldSegment, 1, 1, 1, 4096, 7, false);
        s.close(true);
        Files.setPosixFilePermissions(oldSegment, PosixFilePermissions.fromString("rw-r--r--"));

        Transport a = node(1, dir);
        a.export(new SegmentSpec(1, 4096, io.membus.core.Access.ALL, oldSegment)); // reopened: its data kept, its mode narrowed
        assertEquals("rwx------", mode(dir));
        assertEveryFile(dir, "rw-------", 3);
    }

    @Test
    void aConfiguredGroupSharesTheFilesWithThatGroupOnly() throws IOException {
        // a group this user belongs to: the group of a file it creates
        Path probe = Files.createTempFile(root, "probe", "");
        String group = Files.readAttributes(probe, PosixFileAttributes.class).group().getName();
        Files.delete(probe);
        Path dir = root.resolve("shared");
        Transport a = node(1, dir, "shm.group", group);
        a.export(SegmentSpec.of(0, 64 * 1024));
        assertEquals("rwxrwx---", mode(dir));
        assertEquals(group, Files.readAttributes(dir, PosixFileAttributes.class).group().getName());
        assertEveryFile(dir, "rw-rw----", 3);
        try (Stream<Path> files = Files.list(dir)) {
            for (Path f : (Iterable<Path>) files::iterator) {
                assertEquals(group, Files.readAttributes(f, PosixFileAttributes.class).group().getName(), f.toString());
            }
        }
        assertEquals(group, ((ShmTransport) a).files().groupName());
    }

    @Test
    void anUnknownGroupIsATypedConfigErrorNamingTheKey() {
        DsmConfigException e = assertThrows(DsmConfigException.class,
                () -> node(1, root.resolve("x"), "shm.group", "no-such-group-membus-" + System.nanoTime()));
        assertTrue(e.getMessage().contains("membus.transports.shm.group"), e.getMessage());
        assertTrue(e.getMessage().contains("no-such-group-membus-"), e.getMessage());
    }

    @Test
    void fileBackedSegmentsOfAnyTransportAreTheOwnersOnly() throws IOException {
        // what membus.segments.dir gets on tcp or local: Segment.createOrOpenFile
        Path file = root.resolve("data").resolve("deeper").resolve("node-3-seg-0.seg");
        Segment s = Segment.createOrOpenFile(file, 3, 1, 0, 4096, 7, false);
        try {
            assertEquals("rw-------", mode(file));
            assertEquals("rwx------", mode(file.getParent()));
            assertEquals("rwx------", mode(file.getParent().getParent()));
        } finally {
            s.close(false);
        }
        Path group = root.resolve("g").resolve("node-3-seg-0.seg");
        Segment g = Segment.createOrOpenFile(group, 3, 1, 0, 4096, 7, false, PrivateFiles.ownerOnly());
        g.close(true);
        assertEquals("rw-------", mode(group));
    }
}
