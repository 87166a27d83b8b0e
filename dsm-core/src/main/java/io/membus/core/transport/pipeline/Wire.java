package io.membus.core.transport.pipeline;

/**
 * What a transport plugs into a {@link VerbPipeline}: putting a verb on its wire. The
 * pipeline keeps order, window, backlog, deadlines and fault holds; the wire encodes
 * and sends, and later reports each verb's outcome back through
 * {@link VerbPipeline#complete}, {@link VerbPipeline#completeLong} or
 * {@link VerbPipeline#fail}.
 *
 * <p><b>Note:</b> {@link #post} and {@link #flush} are called with the pipeline's lock
 * held ({@link VerbPipeline#lock()}), one thread at a time, from the thread that runs
 * {@link VerbPipeline#pump()}; they must not block.
 */
public interface Wire<V extends Verb> {

    /**
     * Puts {@code v} on the wire (tcp: encodes it into the burst's buffer; rdma: posts
     * its work request). Called in issue order.
     *
     * @return true when the verb is wholly on the wire; false when the wire has no room
     *         now (nothing posted, or, see {@link #mustFinish}, only part of it): the
     *         pipeline stops and calls again with the same verb at its next pump
     */
    boolean post(V v);

    /** The end of a burst in which {@link #post} put at least one verb on the wire (tcp: one flush). */
    default void flush() {
    }

    /**
     * The pipeline has verbs to post: arrange for {@link VerbPipeline#pump()} to run where
     * this wire may post. The default pumps on the calling thread; tcp hands it to the
     * connection's I/O thread (at most one wake-up per burst).
     */
    default void wake(VerbPipeline<V> pipeline) {
        pipeline.pump();
    }

    /**
     * Whether {@code v}, whose {@link #post} returned false after posting part of it, must
     * still be posted to its end even if its deadline fired meanwhile (rdma: the parts on
     * the wire own ring slots that only their completions free).
     */
    default boolean mustFinish(V v) {
        return false;
    }
}
