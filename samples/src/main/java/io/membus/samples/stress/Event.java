package io.membus.samples.stress;

import java.util.Locale;

/**
 * One line of a stress history: a client's invocation of an operation on a key, or
 * its completion. A completion is {@link Type#OK} (it happened, with this result),
 * {@link Type#FAIL} (it certainly did not happen) or {@link Type#INFO} (unknown: a
 * timeout, a lost connection; it may or may not have happened, now or later).
 * An invocation with no completion at all (its process was killed) counts as INFO.
 *
 * <pre>
 * line: process type f key a b nanos
 *   read   invoke: a = b = 0            ok: a = value read
 *   write  invoke: a = value            ok: a = value
 *   cas    invoke: a = expected, b = new; ok a = 1: swapped, ok a = 0: the word held another value
 *   add    invoke: a = delta            ok: a = delta, b = value before the add
 *   get, put, putIfAbsent, remove, offer, poll, tryAcquire, release: see CollectionWorkloads (absent: -1)
 * nanos: System.nanoTime() of the node process: CLOCK_MONOTONIC, one origin for every
 *        process of this machine (checked when each node starts)
 * </pre>
 *
 * <p><b>Note:</b> immutable.
 *
 * @param process the client (unique over the run, restarts included)
 * @param type    invocation or kind of completion
 * @param f       the operation
 * @param key     which independent object
 * @param a       first argument or result
 * @param b       second argument or result
 * @param nanos   when it was invoked or completed
 */
public record Event(long process, Type type, String f, int key, long a, long b, long nanos) {

    /** Invocation or completion kinds. */
    public enum Type { INVOKE, OK, FAIL, INFO }

    /** The history file line. */
    public String line() {
        return process + " " + type.name().toLowerCase(Locale.ROOT) + " " + f + " " + key + " " + a + " " + b + " "
                + nanos;
    }

    /** Parses {@link #line()}; a torn last line of a killed process gives {@code null}. */
    public static Event parse(String line) {
        String[] f = line.trim().split(" ");
        if (f.length != 7) {
            return null;
        }
        try {
            return new Event(Long.parseLong(f[0]), Type.valueOf(f[1].toUpperCase(Locale.ROOT)), f[2],
                    Integer.parseInt(f[3]), Long.parseLong(f[4]), Long.parseLong(f[5]), Long.parseLong(f[6]));
        } catch (IllegalArgumentException e) {
            return null;
        }
    }

    public boolean isInvoke() {
        return type == Type.INVOKE;
    }
}
