package io.membus.samples;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Properties;

/**
 * Starts further Membus JVMs (the demo's node processes) with this JVM's class
 * path and the JVM flags Membus needs, which the build writes into
 * {@code membus-jvm.properties} from the root pom (one source for surefire, JMH
 * and the launcher).
 *
 * <p><b>Note:</b> stateless; thread-safe.
 */
public final class JvmLauncher {
    /**
     * A system property of the launching JVM whose value (JVM options, separated by
     * white space) every JVM started here gets too, before the caller's own options.
     * Unset by default, and no command sets it: the samples' tests set it to start
     * their many short-lived node JVMs more cheaply ({@code -XX:TieredStopAtLevel=1}).
     */
    public static final String CHILD_JVM_OPTIONS = "membus.launcher.jvm-options";

    private JvmLauncher() {
    }

    /** The JVM flags Membus needs, from the build. */
    public static List<String> membusFlags() {
        Properties p = new Properties();
        try (InputStream in = JvmLauncher.class.getResourceAsStream("/membus-jvm.properties")) {
            if (in == null) {
                throw new IllegalStateException("membus-jvm.properties missing from the class path: rebuild with mvn package");
            }
            p.load(in);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read membus-jvm.properties", e);
        }
        String flags = p.getProperty("flags", "").trim();
        return flags.isEmpty() ? List.of() : Arrays.asList(flags.split("\\s+"));
    }

    /** {@code java <flags> -cp <this class path> MembusCli args...}. */
    public static ProcessBuilder membus(List<String> args) {
        return membus(List.of(), args);
    }

    /** {@code java <flags> <jvmOptions> -cp <this class path> MembusCli args...}. */
    public static ProcessBuilder membus(List<String> jvmOptions, List<String> args) {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        cmd.add("-Xmx256m");
        cmd.add("-XX:+UseSerialGC");
        cmd.addAll(membusFlags());
        String extra = System.getProperty(CHILD_JVM_OPTIONS, "").trim();
        if (!extra.isEmpty()) {
            cmd.addAll(Arrays.asList(extra.split("\\s+")));
        }
        cmd.addAll(jvmOptions);
        cmd.add("-cp");
        cmd.add(System.getProperty("java.class.path"));
        cmd.add(MembusCli.class.getName());
        cmd.addAll(args);
        return new ProcessBuilder(cmd);
    }
}
