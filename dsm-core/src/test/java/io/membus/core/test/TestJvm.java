package io.membus.core.test;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Starts child JVMs for multi-process tests with this JVM's class path and its
 * {@code --add-opens}/{@code --add-exports} flags, bounds their run time, and
 * destroys them whatever happens ({@link #close()}). Output goes to a file per
 * child, printed when the child fails.
 *
 * <p><b>Note:</b> not thread-safe; one test thread owns an instance.
 */
public final class TestJvm implements AutoCloseable {
    private final List<Process> processes = new ArrayList<>();
    private final List<Path> logs = new ArrayList<>();

    /** The class path of this (test) JVM, as surefire sets it. */
    public static String classPath() {
        String cp = System.getProperty("surefire.test.class.path");
        return cp != null && !cp.isBlank() ? cp : System.getProperty("java.class.path");
    }

    /** This JVM's module flags (the Chronicle ones), to pass on to children. */
    public static List<String> moduleFlags() {
        List<String> flags = new ArrayList<>();
        for (String a : ManagementFactory.getRuntimeMXBean().getInputArguments()) {
            if (a.startsWith("--add-opens") || a.startsWith("--add-exports") || a.startsWith("-Dchronicle")) {
                flags.add(a);
            }
        }
        return flags;
    }

    /** Starts {@code mainClass} with {@code args} in a new JVM. */
    public Process start(Class<?> mainClass, List<String> args) throws IOException {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        cmd.add("-Xmx256m");
        cmd.add("-XX:+UseSerialGC");
        cmd.add("-XX:TieredStopAtLevel=1");
        cmd.addAll(moduleFlags());
        cmd.add("-cp");
        cmd.add(classPath());
        cmd.add(mainClass.getName());
        cmd.addAll(args);
        Path log = Files.createTempFile("membus-child-", ".log");
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile()).start();
        processes.add(p);
        logs.add(log);
        return p;
    }

    /** Output of the {@code i}-th started child so far. */
    public String output(int i) {
        try {
            return Files.readString(logs.get(i), StandardCharsets.UTF_8);
        } catch (IOException e) {
            return "<cannot read child output: " + e + ">";
        }
    }

    /**
     * Waits for child {@code i} to exit within {@code seconds}.
     *
     * @return its exit code
     * @throws AssertionError when it does not exit in time (it is then destroyed)
     */
    public int await(int i, long seconds) throws InterruptedException {
        Process p = processes.get(i);
        if (!p.waitFor(seconds, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new AssertionError("child " + i + " did not exit within " + seconds + "s; output:\n" + output(i));
        }
        return p.exitValue();
    }

    public int size() {
        return processes.size();
    }

    @Override
    public void close() {
        for (Process p : processes) {
            if (p.isAlive()) {
                p.destroyForcibly();
            }
        }
        for (Process p : processes) {
            try {
                p.waitFor(10, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        }
        for (Path log : logs) {
            try {
                Files.deleteIfExists(log);
            } catch (IOException e) {
                System.err.println("could not delete child log " + log + ": " + e);
            }
        }
    }
}
