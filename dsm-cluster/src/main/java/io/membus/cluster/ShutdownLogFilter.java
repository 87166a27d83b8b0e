package io.membus.cluster;

import org.apache.pekko.actor.ActorSystem;
import org.apache.pekko.event.EventStream;
import org.apache.pekko.event.slf4j.Slf4jLoggingFilter;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A node's Pekko logging filter ({@code pekko.logging-filter}): Pekko's
 * {@link Slf4jLoggingFilter} (levels as the slf4j binding sets them), except that while
 * the node leaves the cluster cleanly ({@link DsmNode#close()}) the warnings of Pekko
 * Streams' {@code Materializer} are not logged. Those are Artery's TCP streams saying
 * {@code [outbound connection to [...], control stream] Upstream failed, cause:
 * StreamTcpException: The connection has been aborted}: the members close their
 * connections to a member that has left, which is the leave working, not a fault.
 * Nor are the warnings of Artery's {@code Association} then ({@code Outbound control stream
 * to [...] failed after shutdown}): its streams end as the system stops, and when
 * {@link ArteryStop} stops streams a peer never closed, they end abruptly.
 * Everything else, and those warnings at any other time (a peer that dies), is logged
 * as before.
 *
 * <p><b>Note:</b> thread-safe: the set of leaving actor systems is concurrent, and a
 * filter reads it on each log call (a node marks its system before the leave starts).
 */
public final class ShutdownLogFilter extends Slf4jLoggingFilter {
    /** The settings objects (one per actor system, compared by identity) of the systems leaving cleanly. */
    private static final Set<ActorSystem.Settings> LEAVING = ConcurrentHashMap.newKeySet();

    /** Artery's per-peer state (internal to Pekko: named, not linked). */
    private static final String ASSOCIATION = "org.apache.pekko.remote.artery.Association";
    private final ActorSystem.Settings settings;

    public ShutdownLogFilter(ActorSystem.Settings settings, EventStream eventStream) {
        super(settings, eventStream);
        this.settings = settings;
    }

    /** {@code system} now leaves the cluster cleanly (or, {@code false}, no longer exists). */
    static void leaving(ActorSystem system, boolean leaving) {
        if (leaving) {
            LEAVING.add(system.settings());
        } else {
            LEAVING.remove(system.settings());
        }
    }

    @Override
    public boolean isWarningEnabled(Class<?> logClass, String logSource) {
        return super.isWarningEnabled(logClass, logSource) && !expectedOnLeave(logClass);
    }

    @Override
    public boolean isWarningEnabled(Class<?> logClass, String logSource, org.apache.pekko.event.LogMarker marker) {
        return super.isWarningEnabled(logClass, logSource, marker) && !expectedOnLeave(logClass);
    }

    private boolean expectedOnLeave(Class<?> logClass) {
        return logClass != null && (org.apache.pekko.stream.Materializer.class.isAssignableFrom(logClass)
                || ASSOCIATION.equals(logClass.getName())) && LEAVING.contains(settings);
    }
}
