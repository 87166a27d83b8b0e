package io.membus.samples;

import java.io.ByteArrayOutputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Locale;

/**
 * What a test captures of a command's output, kept as it is in {@code sink}, and each
 * whole line also printed to {@code timed} as it comes, after the seconds since
 * {@code began}: where a multi-process run's time goes (node JVMs starting and joining,
 * the work, faults, teardown) is read in the test's output.
 *
 * <p><b>Note:</b> thread-safe: the command's threads and the node processes' log pumps
 * write at once; each write is under this object's lock, so the sink and the timed lines
 * see the bytes in one order.
 */
public final class TimedLines extends OutputStream {
    private final ByteArrayOutputStream sink;
    private final PrintStream timed;
    private final long began;
    private final ByteArrayOutputStream line = new ByteArrayOutputStream();

    /** @param began a {@link System#nanoTime()}: the time 0 of the printed lines */
    public TimedLines(ByteArrayOutputStream sink, PrintStream timed, long began) {
        this.sink = sink;
        this.timed = timed;
        this.began = began;
    }

    /** The seconds since {@code began}, as the lines show them. */
    public static String since(long began) {
        return String.format(Locale.ROOT, "[%6.1f s]", (System.nanoTime() - began) / 1e9);
    }

    @Override
    public synchronized void write(int b) {
        sink.write(b);
        if (b == '\n') {
            timed.println(since(began) + " " + line.toString(StandardCharsets.UTF_8));
            line.reset();
        } else {
            line.write(b);
        }
    }

    @Override
    public synchronized void write(byte[] b, int off, int len) {
        for (int i = off; i < off + len; i++) {
            write(b[i]);
        }
    }
}
