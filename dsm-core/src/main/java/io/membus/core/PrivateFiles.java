package io.membus.core;

import java.io.IOException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.FileAttribute;
import java.nio.file.attribute.GroupPrincipal;
import java.nio.file.attribute.PosixFileAttributeView;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Set;

/**
 * The permissions of the files and directories a node creates for shared memory and
 * persistence (segment files, shm registries and message rings, and the directories that
 * hold them): readable and writable by the owning user only ({@code 0600} files,
 * {@code 0700} directories), or, with a group named for a multi-user setup, by that group
 * too ({@code 0660}, {@code 0770}, owned by the group). Anyone else who can open a segment
 * file reads the cluster's live memory, so nothing is ever created wider than that.
 *
 * <p>A file is created with owner-only permissions (the process umask can only narrow
 * them) and only then given to the group, so no one outside ever sees it open. A node's
 * own directory that already exists and belongs to this user is set the same way
 * ({@link #secureDirectory}: a directory left {@code 0755} by an earlier version is fixed at
 * the next start), and so is a file it reopens; other existing directories (a segment
 * file's parent may be any directory) are not touched. Something owned by another user is
 * left alone (it cannot be changed, and this user then cannot use it either). On a file
 * system without POSIX permissions (Windows) nothing is set.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public final class PrivateFiles {
    private static final Set<PosixFilePermission> OWNER_FILE = PosixFilePermissions.fromString("rw-------");
    private static final Set<PosixFilePermission> OWNER_DIR = PosixFilePermissions.fromString("rwx------");
    private static final Set<PosixFilePermission> GROUP_FILE = PosixFilePermissions.fromString("rw-rw----");
    private static final Set<PosixFilePermission> GROUP_DIR = PosixFilePermissions.fromString("rwxrwx---");
    private static final PrivateFiles OWNER_ONLY = new PrivateFiles(null);

    private final GroupPrincipal group;

    private PrivateFiles(GroupPrincipal group) {
        this.group = group;
    }

    /** Files and directories of the owning user only. */
    public static PrivateFiles ownerOnly() {
        return OWNER_ONLY;
    }

    /**
     * Files and directories of the owning user and {@code groupName} (empty: owner only).
     *
     * @throws IllegalArgumentException when no group of that name exists (callers turn it into
     *                                  their typed configuration error, naming their key)
     */
    public static PrivateFiles forGroup(String groupName) {
        if (groupName == null || groupName.isEmpty()) {
            return OWNER_ONLY;
        }
        try {
            Path probe = Path.of(System.getProperty("java.io.tmpdir"));
            return new PrivateFiles(probe.getFileSystem().getUserPrincipalLookupService()
                    .lookupPrincipalByGroupName(groupName));
        } catch (IOException | UnsupportedOperationException e) {
            throw new IllegalArgumentException("no group named '" + groupName + "' on this host (" + e + ")", e);
        }
    }

    /** The group that shares the files, or {@code null} for owner only. */
    public String groupName() {
        return group == null ? null : group.getName();
    }

    /** Permissions a file gets. */
    public Set<PosixFilePermission> filePermissions() {
        return group == null ? OWNER_FILE : GROUP_FILE;
    }

    /** Permissions a directory gets. */
    public Set<PosixFilePermission> directoryPermissions() {
        return group == null ? OWNER_DIR : GROUP_DIR;
    }

    private static boolean posix(Path p) {
        return p.getFileSystem().supportedFileAttributeViews().contains("posix");
    }

    /**
     * Creates {@code dir} and any missing parents, each directory it creates with the
     * directory permissions. Directories that exist already are not changed (a file's
     * parent may be any directory; see {@link #secureDirectory} for a node's own).
     */
    public void createDirectories(Path dir) throws IOException {
        Path abs = dir.toAbsolutePath();
        if (!posix(abs)) {
            Files.createDirectories(abs);
            return;
        }
        if (Files.isDirectory(abs)) {
            return;
        }
        Path parent = abs.getParent();
        if (parent != null && !Files.isDirectory(parent)) {
            createDirectories(parent);
        }
        try {
            Files.createDirectory(abs, PosixFilePermissions.asFileAttribute(OWNER_DIR));
        } catch (FileAlreadyExistsException e) {
            if (!Files.isDirectory(abs)) {
                throw e;
            }
            return; // another process made it first
        }
        apply(abs, directoryPermissions());
    }

    /**
     * Creates {@code dir} as {@link #createDirectories} does and gives it the directory
     * permissions even when it existed: a node's own directory (the shm directory), which an
     * earlier version may have left {@code 0755}. A directory of another user, or one every
     * user may write in (such as {@code /tmp} or {@code /dev/shm} itself), is left as it is.
     *
     * @return whether {@code dir} now has the directory permissions (false: shared or not ours)
     */
    public boolean secureDirectory(Path dir) throws IOException {
        createDirectories(dir);
        Path abs = dir.toAbsolutePath();
        if (!posix(abs)) {
            return false;
        }
        Set<PosixFilePermission> now = Files.getPosixFilePermissions(abs);
        if (now.contains(PosixFilePermission.OTHERS_WRITE)) {
            return false; // a shared directory (sticky, world-writable): not a node's to narrow
        }
        apply(abs, directoryPermissions());
        return Files.getPosixFilePermissions(abs).equals(directoryPermissions());
    }

    /**
     * Creates the new, empty file {@code file} with the file permissions.
     *
     * @throws FileAlreadyExistsException when it exists (callers delete or reuse it first)
     */
    public void createFile(Path file) throws IOException {
        if (!posix(file.toAbsolutePath())) {
            Files.createFile(file);
            return;
        }
        Files.createFile(file, PosixFilePermissions.asFileAttribute(OWNER_FILE));
        apply(file, filePermissions());
    }

    /** Sets the file permissions on an existing file of this user (a segment file reopened after a restart). */
    public void secureFile(Path file) throws IOException {
        if (posix(file.toAbsolutePath())) {
            apply(file, filePermissions());
        }
    }

    /** The group first (while the permissions are still the owner's only), then the permissions. */
    private void apply(Path p, Set<PosixFilePermission> permissions) throws IOException {
        PosixFileAttributeView view = Files.getFileAttributeView(p, PosixFileAttributeView.class,
                LinkOption.NOFOLLOW_LINKS);
        if (!view.getOwner().equals(Me.USER)) {
            return; // another user's: not ours to change (and this user cannot use it either)
        }
        if (group != null && !view.readAttributes().group().equals(group)) {
            view.setPermissions(permissions.contains(PosixFilePermission.OWNER_EXECUTE) ? OWNER_DIR : OWNER_FILE);
            try {
                view.setGroup(group);
            } catch (java.nio.file.FileSystemException e) {
                throw new IOException("cannot give " + p + " to group " + group.getName()
                        + ": this user must be a member of it (" + e.getMessage() + ")", e);
            }
        }
        view.setPermissions(permissions);
    }

    /** This process's user, as the file system names owners: the owner of a file it creates. */
    private static final class Me {
        static final java.nio.file.attribute.UserPrincipal USER = probe();

        private static java.nio.file.attribute.UserPrincipal probe() {
            try {
                Path f = Files.createTempFile("membus-owner-", ".probe");
                try {
                    return Files.getOwner(f);
                } finally {
                    Files.deleteIfExists(f);
                }
            } catch (IOException e) {
                throw new java.io.UncheckedIOException("cannot tell this process's user from a temporary file", e);
            }
        }
    }

    @Override
    public String toString() {
        return group == null ? "owner only (files 0600, directories 0700)"
                : "owner and group " + group.getName() + " (files 0660, directories 0770)";
    }
}
