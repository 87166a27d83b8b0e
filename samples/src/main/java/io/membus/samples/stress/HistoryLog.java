package io.membus.samples.stress;

import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * The history file of one node process: every event is written with one
 * {@code write} system call before the operation it records starts (an invocation)
 * or right after it ends, so a {@code kill -9} loses no invocation whose effect other
 * clients could see: the bytes are in the kernel's page cache, not in a buffer of
 * the dying JVM.
 *
 * <p><b>Note:</b> thread-safe: client threads append whole lines under this object's lock.
 */
public final class HistoryLog implements AutoCloseable {
    private final OutputStream out;

    /** Creates the file; one that exists already (another run's) is refused: histories never mix. */
    public HistoryLog(Path file) {
        try {
            this.out = Files.newOutputStream(file, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot create the history file " + file + " (" + e + "): is another run"
                    + " writing to the same --out folder?", e);
        }
    }

    /** Appends one event; returns it. */
    public Event append(Event e) {
        byte[] line = (e.line() + "\n").getBytes(StandardCharsets.US_ASCII);
        synchronized (this) {
            try {
                out.write(line);
            } catch (IOException x) {
                throw new UncheckedIOException("cannot write the history: " + x.getMessage(), x);
            }
        }
        return e;
    }

    @Override
    public synchronized void close() {
        try {
            out.close();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
