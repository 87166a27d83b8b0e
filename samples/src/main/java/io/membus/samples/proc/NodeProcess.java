package io.membus.samples.proc;

import io.membus.samples.JvmLauncher;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * One Membus JVM started by the command line (a node of {@code membus stress} or of a
 * demo app), driven by lines on its standard input and answering with lines on its
 * standard output: the parent {@link #send sends} a command and {@link #expect
 * expects} the answer's prefix. An answer that comes while the driver waits for
 * another (a node saying it is done while a fault is being set) is kept for the
 * {@code expect} that wants it; other lines go to a consumer. The process is ended only through this object, by its
 * pid: {@link #exit} asks, {@link #kill} is {@code kill -9}, {@link #pause} and
 * {@link #resume} are SIGSTOP and SIGCONT. Its standard error (its log) goes to the
 * parent's, each line prefixed with {@link #logPrefix} (a daemon thread per process, which
 * ends when the process' stderr closes).
 *
 * <p><b>Note:</b> {@link #send} and {@link #expect} are called by one driving thread
 * at a time; {@link #kill}, {@link #destroy} and {@link #isAlive} from any thread.
 */
public final class NodeProcess {
    private final String name;
    private final Process process;
    private final Writer stdin;
    private final BlockingQueue<String> lines = new LinkedBlockingQueue<>();
    private final Consumer<String> other;
    /** Answers that came while the driver waited for another one, in arrival order. */
    private final java.util.List<String> stash = new java.util.ArrayList<>();

    /**
     * Starts {@code java <flags> <jvmOptions> MembusCli args...} with the given extra
     * environment (secrets go there, never on the command line, which {@code ps} shows).
     */
    public NodeProcess(String name, List<String> jvmOptions, List<String> args, Map<String, String> env,
                       Consumer<String> other) throws IOException {
        this.name = name;
        this.other = other;
        ProcessBuilder pb = JvmLauncher.membus(jvmOptions, args);
        pb.environment().putAll(env);
        this.process = pb.start();
        // its log (stderr) to ours, each line saying which node printed it: the nodes of a run share one
        // terminal, and the same warning from two nodes (both lose the killed one) looked like a line printed twice
        Thread errors = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(process.getErrorStream(),
                    StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null) {
                    System.err.println(logPrefix(name) + line);
                }
            } catch (IOException e) {
                System.err.println(logPrefix(name) + "(its log ended: " + e.getMessage() + ")");
            }
        }, "membus-log-" + name);
        errors.setDaemon(true);
        errors.start();
        this.stdin = new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8);
        Thread reader = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(process.getInputStream(),
                    StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null) {
                    lines.add(line);
                }
            } catch (IOException e) {
                lines.add("ERROR reading the output of " + name + ": " + e.getMessage());
            }
            lines.add("EOF");
        }, "membus-reader-" + name);
        reader.setDaemon(true);
        reader.start();
    }

    public String name() {
        return name;
    }

    /** What starts each line of this process' log on the parent's stderr: {@code [node 2] }. */
    public static String logPrefix(String name) {
        return "[" + name + "] ";
    }

    public long pid() {
        return process.pid();
    }

    public boolean isAlive() {
        return process.isAlive();
    }

    /** Sends one command line. */
    public synchronized void send(String line) throws IOException {
        stdin.write(line + "\n");
        stdin.flush();
    }

    /**
     * The rest of the next line that starts with {@code prefix}. An {@code ERROR} line
     * or the end of the output fails with the node's words; other lines go to the
     * consumer.
     *
     * @param deadlineNanos a {@link System#nanoTime()} by which the line must come
     */
    public String expect(String prefix, long deadlineNanos) throws InterruptedException {
        while (true) {
            synchronized (stash) {
                for (java.util.Iterator<String> it = stash.iterator(); it.hasNext(); ) {
                    String kept = it.next();
                    if (kept.startsWith(prefix)) {
                        it.remove();
                        return kept.substring(prefix.length()).trim();
                    }
                }
            }
            long left = deadlineNanos - System.nanoTime();
            if (left <= 0) {
                throw new IllegalStateException(name + " (pid " + pid() + ") did not answer " + prefix.trim()
                        + " in time; is the machine overloaded?");
            }
            // a short wait: another thread waiting on this process may have stashed our answer meanwhile
            String line = lines.poll(Math.min(left, 50_000_000L), TimeUnit.NANOSECONDS);
            if (line == null) {
                continue;
            }
            if (line.startsWith(prefix)) {
                return line.substring(prefix.length()).trim();
            }
            if (line.equals("EOF")) {
                lines.add(line); // every later expect fails the same way
                throw new IllegalStateException(name + " (pid " + pid() + ") exited, code " + exitCode());
            }
            if (line.startsWith("ERROR")) {
                throw new IllegalStateException(name + " failed: " + line.substring("ERROR".length()).trim());
            }
            if (line.matches("[A-Z]+( .*)?")) {
                synchronized (stash) {
                    stash.add(line);
                }
            } else {
                other.accept("[" + name + "] " + line);
            }
        }
    }

    private String exitCode() {
        try {
            return process.waitFor(2, TimeUnit.SECONDS) ? Integer.toString(process.exitValue()) : "still running";
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "unknown";
        }
    }

    /** {@code kill -9} of this process (by its pid), waiting until it is gone. */
    public void kill() {
        process.destroyForcibly();
        try {
            process.waitFor(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** SIGSTOP: every thread of the process stops where it is (a GC pause, a stalled VM). */
    public void pause() {
        signal("STOP");
    }

    /** SIGCONT after {@link #pause}. */
    public void resume() {
        signal("CONT");
    }

    private void signal(String signal) {
        try {
            Process kill = new ProcessBuilder("kill", "-" + signal, Long.toString(pid()))
                    .redirectErrorStream(true).start();
            if (!kill.waitFor(10, TimeUnit.SECONDS) || kill.exitValue() != 0) {
                String said = new String(kill.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
                throw new IllegalStateException("kill -" + signal + " " + pid() + " (" + name + ") failed: " + said);
            }
        } catch (IOException e) {
            throw new IllegalStateException("cannot run kill -" + signal + " " + pid() + ": " + e.getMessage(), e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while signalling " + name, e);
        }
    }

    /** Asks the process to leave ({@code EXIT}) if it is still there; does not wait. */
    public void exit() {
        try {
            if (process.isAlive()) {
                send("EXIT");
            }
        } catch (IOException e) {
            // its pipe is closed: it is exiting or gone; destroy() makes sure
        }
    }

    /**
     * Waits up to {@code graceSeconds} for the process to end, then kills it. A paused
     * process is resumed first so that it can leave.
     */
    public void destroy(int graceSeconds) {
        try {
            if (process.isAlive()) {
                try {
                    resume();
                } catch (IllegalStateException e) {
                    // it ended meanwhile
                }
            }
            if (!process.waitFor(graceSeconds, TimeUnit.SECONDS)) {
                process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            process.destroyForcibly();
        }
    }
}
