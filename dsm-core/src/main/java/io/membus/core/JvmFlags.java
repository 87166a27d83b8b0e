package io.membus.core;

import io.membus.core.error.DsmConfigException;

import java.util.ArrayList;
import java.util.List;

/**
 * The JVM flags Membus needs on Java 17+, and the check a node makes before it
 * starts. Chronicle Bytes (segments, mapped files) reaches into {@code java.base}
 * internals: without these packages opened or exported to it, native stores log
 * errors and mapped files (shm, file-backed segments) fail outright. A start
 * without them therefore fails at once, naming the exact line to add, instead of
 * half-working.
 *
 * <p>Where the flags go: the {@code java} command line, the {@code JDK_JAVA_OPTIONS}
 * environment variable (read by every {@code java} launcher), surefire's
 * {@code <argLine>}, or — for an executable jar — its manifest's
 * {@code Add-Opens}/{@code Add-Exports} entries (see {@link #MANIFEST_ADD_OPENS}).
 *
 * <p><b>Thread-safety:</b> stateless; every method may be called from any thread.
 */
public final class JvmFlags {

    /** Packages of {@code java.base} that must be open to Chronicle (deep reflection). */
    private static final List<String> OPENS = List.of("java.lang.reflect", "java.nio", "java.lang", "sun.nio.ch");
    /** Packages of {@code java.base} that must be exported to Chronicle (public API of internals). */
    private static final List<String> EXPORTS = List.of("jdk.internal.ref");

    /** The manifest entry value for an executable jar: {@code Add-Opens: ...}. */
    public static final String MANIFEST_ADD_OPENS = "java.base/java.lang.reflect java.base/java.nio java.base/java.lang java.base/sun.nio.ch";
    /** The manifest entry value for an executable jar: {@code Add-Exports: ...}. */
    public static final String MANIFEST_ADD_EXPORTS = "java.base/sun.nio.ch java.base/jdk.internal.ref";

    private JvmFlags() {
    }

    /** Every flag Membus needs, in command-line form, for code on the class path. */
    public static List<String> required() {
        List<String> flags = new ArrayList<>();
        for (String p : OPENS) {
            flags.add("--add-opens=java.base/" + p + "=ALL-UNNAMED");
        }
        for (String p : EXPORTS) {
            flags.add("--add-exports=java.base/" + p + "=ALL-UNNAMED");
        }
        return flags;
    }

    /** The flags of {@link #required()} that this JVM was not started with (empty when all are there). */
    public static List<String> missing() {
        Module base = Object.class.getModule();
        Module chronicle = net.openhft.chronicle.bytes.Bytes.class.getModule();
        String target = chronicle.isNamed() ? chronicle.getName() : "ALL-UNNAMED";
        List<String> missing = new ArrayList<>();
        for (String p : OPENS) {
            if (!base.isOpen(p, chronicle)) {
                missing.add("--add-opens=java.base/" + p + "=" + target);
            }
        }
        for (String p : EXPORTS) {
            if (!base.isExported(p, chronicle)) {
                missing.add("--add-exports=java.base/" + p + "=" + target);
            }
        }
        return missing;
    }

    /**
     * Fails when a flag is missing.
     *
     * @throws DsmConfigException naming the missing flags and the whole line to add
     */
    public static void require() {
        List<String> missing = missing();
        if (!missing.isEmpty()) {
            throw new DsmConfigException("JVM flags", "missing " + String.join(" ", missing),
                "start the JVM with: " + String.join(" ", required())
                    + " (on the java command line, in JDK_JAVA_OPTIONS, in surefire's <argLine>, or as the manifest entries"
                    + " Add-Opens: " + MANIFEST_ADD_OPENS + " and Add-Exports: " + MANIFEST_ADD_EXPORTS
                    + " of an executable jar; docs/getting-started.md)");
        }
    }
}
