package io.membus.core.transport.pipeline;

import io.membus.core.transport.LongCompletion;
import io.membus.core.transport.VerbObserver;

import java.util.concurrent.CompletableFuture;

/**
 * One verb as a {@link VerbPipeline} carries it: what to do (kind, pointer, key,
 * operands, bytes), where its result goes (a {@link CompletableFuture} or a
 * {@link LongCompletion}), and the pipeline's bookkeeping. Transports that need more
 * per verb (rdma: the remote address and the parts posted) subclass it.
 *
 * <p>Kinds are {@link VerbObserver}'s: {@link VerbObserver#READ}, {@link VerbObserver#WRITE},
 * {@link VerbObserver#CAS}, {@link VerbObserver#FAA}; {@code a} is the CAS's expected
 * value or the FAA's delta, {@code b} the CAS's update.
 *
 * <p><b>Note:</b> not thread-safe by itself: its pipeline fields are guarded by the
 * pipeline's lock; the operand fields are written before {@link VerbPipeline#issue} and
 * read by the wire under that lock afterwards (the lock orders them).
 */
public class Verb {
    static final byte QUEUED = 0;  // waiting in the backlog (possibly held)
    static final byte SENT = 1;    // on the wire, its answer expected
    static final byte SKIPPED = 2; // never answered (dropped here, or by the target): waits for its deadline
    static final byte DONE = 3;    // resolved (answered, failed or timed out); its outcome may still be undelivered

    public final int kind;
    public final long ptr;
    public final long remoteKey;
    public final int length;
    public final long a;
    public final long b;
    /** A write's bytes (a read's destination for transports that fill it); may be replaced by a copy. */
    public byte[] data;
    public int dataOffset;

    private final CompletableFuture<Object> future;
    private final LongCompletion longSink;
    /** The issuing thread's record of unsettled verbs (see {@link VerbOwner}), or null; set before issue. */
    public VerbOwner owner;

    // pipeline state, guarded by the pipeline's lock; kept small: one object per verb is all the pipeline allocates
    long seq;
    long issuedNanos;
    /** When it fails with a timeout: its issue plus the timeout, or its issuing thread's {@code OperationDeadline}. */
    long deadlineNanos;
    /** While queued: the release time of an injected delay (0: none). Once resolved: an atomic's result. */
    long word;
    byte state;
    boolean sent;
    boolean settled; // counted out of its owner
    private boolean failed;
    Verb nextDone;
    /** Once resolved: a read's bytes, or the failure when {@link #failed}. */
    private Object value;

    /** A verb whose result goes to a new future ({@link #future()}). */
    public Verb(int kind, long ptr, long remoteKey, int length, long a, long b, byte[] data, int dataOffset) {
        this(kind, ptr, remoteKey, length, a, b, data, dataOffset, null);
    }

    /**
     * A verb whose result goes to {@code sink} when it is not null (an atomic's primitive
     * result, no future, no boxing), else to a new future.
     */
    public Verb(int kind, long ptr, long remoteKey, int length, long a, long b, byte[] data, int dataOffset,
                LongCompletion sink) {
        this.kind = kind;
        this.ptr = ptr;
        this.remoteKey = remoteKey;
        this.length = length;
        this.a = a;
        this.b = b;
        this.data = data;
        this.dataOffset = dataOffset;
        this.longSink = sink;
        this.future = sink == null ? new CompletableFuture<>() : null;
    }

    /** The verb's future, typed as its result ({@code byte[]}, {@code Void} or {@code Long}); null with a sink. */
    @SuppressWarnings("unchecked")
    public <T> CompletableFuture<T> future() {
        return (CompletableFuture<T>) (CompletableFuture<?>) future;
    }

    /** The verb's sequence number in its pipeline (1, 2, ...; tcp's correlation id); 0 before issue. */
    public long seq() {
        return seq;
    }

    /** The operation's name in errors: {@code read}, {@code write}, {@code compareAndSwap}, {@code fetchAndAdd}. */
    public static String operationName(int kind) {
        return switch (kind) {
            case VerbObserver.READ -> "read";
            case VerbObserver.WRITE -> "write";
            case VerbObserver.CAS -> "compareAndSwap";
            default -> "fetchAndAdd";
        };
    }

    /**
     * Fails a verb its connection refused before issuing it to a pipeline (too long,
     * connection down): completes its future or calls its sink at once, on this thread.
     */
    public void refuse(Throwable e) {
        resolve(null, 0, e);
        deliver();
    }

    void resolve(Object v, long l, Throwable e) {
        state = DONE;
        failed = e != null;
        value = e != null ? e : v;
        word = l;
    }

    Throwable failure() {
        return failed ? (Throwable) value : null;
    }

    /** Completes the future or calls the sink with the outcome (outside the pipeline's lock, in issue order). */
    void deliver() {
        Throwable e = failure();
        if (longSink != null) {
            if (e != null) {
                longSink.completed(0, e);
            } else {
                longSink.completed(word, null);
            }
            return;
        }
        if (e != null) {
            future.completeExceptionally(e);
        } else if (kind == VerbObserver.CAS || kind == VerbObserver.FAA) {
            future.complete(word); // boxed here, once, for the future form only
        } else {
            future.complete(value);
        }
    }
}
