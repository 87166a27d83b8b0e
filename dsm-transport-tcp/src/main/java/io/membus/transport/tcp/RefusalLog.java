package io.membus.transport.tcp;

import org.slf4j.Logger;

import java.util.concurrent.TimeUnit;

/**
 * Logs refused peers (wrong secret, protocol errors, handshake timeouts) at WARN,
 * at most {@link #PER_WINDOW} lines per {@link #WINDOW_NANOS}: a hostile or
 * broken peer that reconnects in a loop cannot flood the log. Lines over the
 * limit go to DEBUG, and the next WARN line says how many were held back.
 *
 * <p><b>Note:</b> thread-safe (one lock, taken only when a peer is refused).
 */
final class RefusalLog {
    static final int PER_WINDOW = 20;
    static final long WINDOW_NANOS = TimeUnit.SECONDS.toNanos(10);

    private final Logger log;
    private long windowStart = System.nanoTime();
    private int inWindow;
    private int heldBack;

    RefusalLog(Logger log) {
        this.log = log;
    }

    void warn(String message) {
        String suffix;
        synchronized (this) {
            long now = System.nanoTime();
            if (now - windowStart > WINDOW_NANOS) {
                windowStart = now;
                inWindow = 0;
            }
            if (inWindow >= PER_WINDOW) {
                heldBack++;
                suffix = null;
            } else {
                inWindow++;
                suffix = heldBack == 0 ? "" : " (" + heldBack + " more refusals were logged at DEBUG only)";
                heldBack = 0;
            }
        }
        if (suffix == null) {
            log.debug(message);
        } else {
            log.warn(message + suffix);
        }
    }
}
