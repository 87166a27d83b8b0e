package io.membus.cluster;

import org.apache.pekko.actor.ActorSystem;
import org.apache.pekko.actor.ExtendedActorSystem;
import org.apache.pekko.remote.RemoteActorRefProvider;
import org.apache.pekko.remote.artery.ArteryTransport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.time.Duration;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Waits for a leaving node's actor system to terminate, with the deadline on Artery's
 * stream shutdown that Pekko 1.7 lacks (added upstream later as
 * {@code advanced.shutdown-streams-timeout}).
 *
 * <p>Why: Artery stops by flushing (every peer acknowledges {@code ActorSystemTerminating},
 * at most {@code advanced.shutdown-flush-timeout}), aborting its outbound streams, and then
 * waiting, without a deadline, for every stream to complete before it unbinds and lets the
 * actor system stop. Over membership TLS an aborted outbound stream's TLS stage sends its
 * {@code close_notify} ("closing output") and completes only when the peer answers it or
 * closes the TCP connection. Measured with {@code WholeClusterStopTest} (three nodes over
 * TLS, replication on, the whole-cluster stop of {@code GracefulLeaveTest}): now and then a
 * peer answers on the message-stream connection but never on the control-stream one, which
 * stays open until the peer itself stops, and the leaver's {@code close()} waited the full
 * 15 s ({@code actor-system-terminate timed out after 10000 milliseconds}).
 *
 * <p>So once Artery's shutdown has begun and the flush timeout plus {@link #STREAMS_GRACE}
 * have passed without the system terminating, its stream materializers are shut down: the
 * stalled streams stop (their TCP connections close, which is what the peer was waiting
 * for), Artery's wait ends, it unbinds and the actor system terminates with no thread left.
 * Everything a peer had to get was acknowledged by the flush, or the peer did not answer it.
 *
 * <p><b>Note:</b> stateless; thread-safe. {@link #await} blocks the calling thread (polling
 * the system's termination future) and calls only Pekko methods that are safe from any
 * thread.
 */
final class ArteryStop {
    private static final Logger LOG = LoggerFactory.getLogger(DsmNode.class); // the node's lines
    /** How long Artery's streams may take to complete after its flush before they are stopped. */
    static final Duration STREAMS_GRACE = Duration.ofSeconds(1);
    private static final long POLL_MS = 50;

    private ArteryStop() {
    }

    /**
     * Waits until {@code system} has terminated, at most {@code wait}; stops Artery's stalled
     * streams once its shutdown is older than the flush timeout plus {@link #STREAMS_GRACE}.
     *
     * @return whether the system terminated within {@code wait}
     * @throws InterruptedException if the calling thread is interrupted while it waits
     */
    static boolean await(ActorSystem system, Duration wait, int nodeId) throws InterruptedException {
        ArteryTransport artery = artery(system);
        long streamsGraceNanos = flushTimeout(system).toNanos() + STREAMS_GRACE.toNanos();
        long deadline = System.nanoTime() + wait.toNanos();
        boolean shutdownSeen = false;
        long shutdownSeenAt = 0;
        boolean stopped = false;
        while (true) {
            try {
                system.getWhenTerminated().toCompletableFuture().get(POLL_MS, TimeUnit.MILLISECONDS);
                return true;
            } catch (TimeoutException e) {
                // not yet
            } catch (ExecutionException e) {
                return true; // the termination future never fails; if it did, the system is gone
            }
            long now = System.nanoTime();
            if (now - deadline >= 0) {
                return false;
            }
            if (artery == null || stopped) {
                continue;
            }
            if (!shutdownSeen) {
                shutdownSeen = artery.isShutdown();
                shutdownSeenAt = now;
            } else if (now - shutdownSeenAt >= streamsGraceNanos) {
                stopped = true;
                LOG.info("node {}: Artery's streams did not complete within {} ms of its shutdown (a peer did not"
                                + " close its connection); stopping them so the actor system stops", nodeId,
                        (now - shutdownSeenAt) / 1_000_000);
                try {
                    artery.materializer().shutdown();
                    artery.controlMaterializer().shutdown();
                } catch (RuntimeException ex) {
                    LOG.warn("node {}: stopping Artery's streams: {}", nodeId, ex.toString());
                }
            }
        }
    }

    /** The system's Artery transport, or {@code null} when it has none (not a remoting provider). */
    private static ArteryTransport artery(ActorSystem system) {
        if (system instanceof ExtendedActorSystem e && e.provider() instanceof RemoteActorRefProvider r
                && r.transport() instanceof ArteryTransport a) {
            return a;
        }
        return null;
    }

    private static Duration flushTimeout(ActorSystem system) {
        String key = "pekko.remote.artery.advanced.shutdown-flush-timeout";
        return system.settings().config().hasPath(key) ? system.settings().config().getDuration(key) : Duration.ZERO;
    }
}
