package io.membus.core.transport.pipeline;

/**
 * The verbs one thread issued on one pipeline that are not settled: not answered, not
 * failed before they were posted, not lost with their connection. A transport gives
 * each issuing thread its owner (a thread-local per connection) and sets it on the
 * verbs that thread issues ({@link Verb#owner}); the pipeline counts them. What tcp's
 * blocking lanes ask before a thread may bypass the pipeline: a verb the thread posted
 * earlier must never be overtaken ({@link VerbPipeline#settledFor}).
 *
 * <p>A verb that timed out on the wire may still run (its late answer may come): it
 * marks its owner until the connection's next epoch (the channel is lost or closed,
 * {@link VerbPipeline#failAll}), so that thread keeps to the pipeline until then.
 *
 * <p><b>Note:</b> thread-safe: written under the pipeline's lock, read by the owning
 * thread through volatile fields.
 */
public final class VerbOwner {
    /** Verbs issued and not settled; written under the pipeline's lock. */
    volatile int unsettled;
    /** The pipeline epoch in which a verb of this owner timed out on the wire, or -1. */
    volatile long unsettledEpoch = -1;
}
