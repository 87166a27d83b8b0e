package io.membus.cluster;

import io.membus.core.error.DsmConfigException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFileAttributeView;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.GeneralSecurityException;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The cluster secret and the keys derived from it. The secret is {@code membus.secret}
 * when set, else the content of {@code membus.secret-file} (default
 * {@code ~/.membus/cluster-secret}), which is created with 32 random bytes (64 hex
 * characters) on first use, mode 0600 in a 0700 directory, like Erlang's cookie: every
 * node of one user on one host then shares it with no step; for several hosts the file is
 * copied. A file that group or others can read is refused ({@link DsmConfigException}
 * saying which {@code chmod} to run).
 *
 * <p>Keys are derived with HMAC-SHA256 under the secret and a label per use, so the
 * membership certificates ({@link MembershipTls}), the name registry's entries
 * ({@link ClusterNames}) and the verbs' transport (which uses the secret itself) never
 * share a key.
 *
 * <p><b>Note:</b> immutable; thread-safe. Files are read (or created) once per JVM and
 * path; creation is atomic (written aside, then hard-linked into place), so processes
 * starting together agree on one secret.
 */
final class ClusterSecret {
    private static final Logger LOG = LoggerFactory.getLogger(ClusterSecret.class);
    /** Bytes of a generated secret. */
    static final int GENERATED_BYTES = 32;
    /** The least a secret may have: what the tcp and rdma transports also require. */
    static final int MIN_LENGTH = 16;

    private static final Map<Path, String> FILES = new ConcurrentHashMap<>();

    private final String secret;
    /** Where it came from, for logs: "membus.secret" or the file. */
    private final String source;

    private ClusterSecret(String secret, String source) {
        this.secret = secret;
        this.source = source;
    }

    /** {@code secret} when not empty, else the secret file's content (created on first use). */
    static ClusterSecret resolve(String secret, String secretFile) {
        if (!secret.isEmpty()) {
            if (secret.getBytes(StandardCharsets.UTF_8).length < MIN_LENGTH) {
                throw new DsmConfigException("membus.secret", "<hidden, " + secret.length() + " characters>",
                        "at least " + MIN_LENGTH + " bytes, the same on every node (e.g. 32 random hex characters);"
                                + " or leave it empty to use membus.secret-file");
            }
            return new ClusterSecret(secret, "membus.secret");
        }
        if (secretFile.isBlank()) {
            throw new DsmConfigException("membus.secret-file", secretFile, "a file path (default"
                    + " ${user.home}/.membus/cluster-secret) when membus.secret is empty");
        }
        Path file = Path.of(secretFile).toAbsolutePath().normalize();
        String s = FILES.computeIfAbsent(file, ClusterSecret::readOrCreate);
        return new ClusterSecret(s, file.toString());
    }

    private static String readOrCreate(Path file) {
        try {
            if (!Files.exists(file, LinkOption.NOFOLLOW_LINKS)) {
                create(file);
            }
            checkPrivate(file);
            String s = Files.readString(file, StandardCharsets.UTF_8).strip();
            if (s.getBytes(StandardCharsets.UTF_8).length < MIN_LENGTH) {
                throw new DsmConfigException("membus.secret-file", file, "a file holding the cluster secret, at least "
                        + MIN_LENGTH + " bytes (it holds " + s.length() + " characters); delete it to have a new one"
                        + " made, or copy the cluster's file here");
            }
            LOG.info("cluster secret: read from {} (membus.secret-file; copy this file to every host of the cluster)",
                    file);
            return s;
        } catch (IOException e) {
            throw new DsmConfigException("membus.secret-file", file, "a file this user can read, or create in a"
                    + " directory it can write (" + e + "); or set membus.secret", e);
        }
    }

    private static void create(Path file) throws IOException {
        Path dir = file.getParent();
        boolean posix = Files.getFileStore(existingAncestor(dir)).supportsFileAttributeView(PosixFileAttributeView.class);
        if (!Files.isDirectory(dir)) {
            if (posix) {
                Files.createDirectories(dir, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
            } else {
                Files.createDirectories(dir);
            }
        }
        byte[] bytes = new byte[GENERATED_BYTES];
        new SecureRandom().nextBytes(bytes);
        Path aside = posix
                ? Files.createTempFile(dir, ".cluster-secret", ".tmp",
                        PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")))
                : Files.createTempFile(dir, ".cluster-secret", ".tmp");
        try {
            Files.writeString(aside, HexFormat.of().formatHex(bytes) + "\n", StandardCharsets.UTF_8);
            try {
                Files.createLink(file, aside); // atomic, fails if another process made it first: then theirs is used
                LOG.info("cluster secret: created {} with {} random bytes (mode 0600)", file, GENERATED_BYTES);
            } catch (FileAlreadyExistsException raced) {
                // another process created it meanwhile
            } catch (UnsupportedOperationException noLinks) {
                try {
                    Files.move(aside, file);
                } catch (FileAlreadyExistsException raced) {
                    // another process created it meanwhile
                }
            }
        } finally {
            Files.deleteIfExists(aside);
        }
    }

    private static Path existingAncestor(Path p) {
        Path a = p;
        while (a != null && !Files.exists(a)) {
            a = a.getParent();
        }
        return a == null ? Path.of("/") : a;
    }

    /** Refuses a secret file that group or others may read or write. */
    private static void checkPrivate(Path file) throws IOException {
        if (!Files.getFileStore(file).supportsFileAttributeView(PosixFileAttributeView.class)) {
            return;
        }
        Set<PosixFilePermission> p = Files.getPosixFilePermissions(file);
        for (PosixFilePermission bad : new PosixFilePermission[] {PosixFilePermission.GROUP_READ,
                PosixFilePermission.GROUP_WRITE, PosixFilePermission.OTHERS_READ, PosixFilePermission.OTHERS_WRITE}) {
            if (p.contains(bad)) {
                throw new DsmConfigException("membus.secret-file", file + " (mode " + PosixFilePermissions.toString(p)
                        + ")", "a file only its owner can read: run chmod 600 " + file);
            }
        }
    }

    /** The secret (never printed). */
    String value() {
        return secret;
    }

    /** Where the secret came from: {@code membus.secret} or the secret file's path. */
    String source() {
        return source;
    }

    /** A 32-byte key for one use, {@code HMAC-SHA256(secret, label)}. */
    byte[] derive(String label) {
        return hmac(secret.getBytes(StandardCharsets.UTF_8), label.getBytes(StandardCharsets.UTF_8));
    }

    static byte[] hmac(byte[] key, byte[] data) {
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(key, "HmacSHA256"));
            return mac.doFinal(data);
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("HmacSHA256 is part of every JDK", e);
        }
    }

    @Override
    public String toString() {
        return "ClusterSecret[from " + source + "]"; // never the secret
    }
}
