package io.membus.core.transport;

import io.membus.core.capability.TransportCapabilities;
import io.membus.core.error.DsmConfigException;
import io.membus.core.error.TransportUnavailableException;

/**
 * Service-provider interface of a transport, found with {@link java.util.ServiceLoader}
 * (list the implementation in
 * {@code META-INF/services/io.membus.core.transport.TransportProvider}).
 *
 * <p><b>Note:</b> implementations are stateless and thread-safe.
 */
public interface TransportProvider {

    /** The name a config selects this transport by ({@code transport = tcp}). */
    String name();

    /**
     * Creates this node's end of the transport.
     *
     * @throws DsmConfigException            when a setting in {@code config} is missing or not allowed
     * @throws TransportUnavailableException when the transport cannot run on this machine
     *                                       (says what to install, and what to use instead)
     */
    Transport create(TransportConfig config);

    /**
     * What every transport this provider creates promises, whatever its configuration
     * (what {@link TransportCapabilities#of(String)} answers before one exists); each
     * transport's own {@link Transport#capabilities()} promises at least this. By default
     * {@link TransportCapabilities#NONE}: no promise, the safe answer.
     */
    default TransportCapabilities capabilities() {
        return TransportCapabilities.NONE;
    }
}
