package io.membus.core.replication;

/**
 * A job of the forwarding engine ({@link CopySide}, {@link Promotion}, {@link CopyPlacement},
 * {@link GracefulLeave}): each reads what the jobs share (transport, directory, config, the
 * groups, copies, claims and streams) from the one {@link ReplicatorState}, so that there is
 * one list of those fields, not a copy of it per job.
 *
 * <p><b>Note:</b> the reference is final and set before the engine starts; what it points
 * at documents its own thread-safety (concurrent maps and sets, the service's thread).
 */
abstract class ReplicatorJob {
    final ReplicatorState state;

    ReplicatorJob(ReplicatorState state) {
        this.state = state;
    }
}
