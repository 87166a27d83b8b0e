package io.membus.alloc;

import io.membus.core.RemoteMemory;
import io.membus.core.Words;
import io.membus.core.error.DsmException;
import io.membus.core.error.ErrorCode;

import java.util.concurrent.CompletionException;

/**
 * The synchronous verbs the allocator uses, on {@link RemoteMemory}, with every
 * failure surfaced as its typed {@link DsmException}. {@code RemoteMemory} can throw
 * a {@link CompletionException} wrapping the typed error when the connection to a
 * peer has already failed (its {@code getNow} on the failed connect future); this
 * unwraps it. Each call waits for its verb, so the allocator never has two verbs in
 * flight and never depends on their order.
 *
 * <p>Not final so that tests can inject a verb that executes and then reports a
 * timeout (the outcome a deadline leaves unknown).
 *
 * <p><b>Note:</b> stateless apart from the memory; thread-safe.
 */
class Remote {
    private final RemoteMemory memory;

    Remote(RemoteMemory memory) {
        this.memory = memory;
    }

    byte[] read(long ptr, int length) {
        try {
            return memory.readSync(ptr, length);
        } catch (CompletionException e) {
            throw unwrap(e);
        }
    }

    long readLong(long ptr) {
        return Words.getLong(read(ptr, Long.BYTES), 0);
    }

    void write(long ptr, byte[] src) {
        try {
            memory.writeSync(ptr, src);
        } catch (CompletionException e) {
            throw unwrap(e);
        }
    }

    void writeLong(long ptr, long value) {
        byte[] b = new byte[Long.BYTES];
        Words.putLong(b, 0, value);
        write(ptr, b);
    }

    long compareAndSwap(long ptr, long expected, long update) {
        try {
            return memory.compareAndSwapSync(ptr, expected, update);
        } catch (CompletionException e) {
            throw unwrap(e);
        }
    }

    long fetchAndAdd(long ptr, long delta) {
        try {
            return memory.fetchAndAddSync(ptr, delta);
        } catch (CompletionException e) {
            throw unwrap(e);
        }
    }

    static DsmException unwrap(CompletionException e) {
        Throwable cause = e.getCause();
        if (cause instanceof DsmException d) {
            return d;
        }
        return new DsmException(ErrorCode.INTERNAL, "verb failed: " + cause, cause != null ? cause : e);
    }
}
