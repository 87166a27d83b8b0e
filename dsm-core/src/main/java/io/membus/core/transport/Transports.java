package io.membus.core.transport;

import io.membus.core.error.DsmConfigException;

import java.util.ArrayList;
import java.util.List;
import java.util.ServiceLoader;

/**
 * Finds {@link TransportProvider}s on the class path.
 *
 * <p><b>Note:</b> stateless; thread-safe.
 */
public final class Transports {
    private Transports() {
    }

    /** Every provider on the class path. */
    public static List<TransportProvider> providers() {
        List<TransportProvider> list = new ArrayList<>();
        ServiceLoader.load(TransportProvider.class).forEach(list::add);
        return list;
    }

    /**
     * The provider with that name.
     *
     * @throws DsmConfigException naming the transports that are available
     */
    public static TransportProvider provider(String name) {
        List<String> names = new ArrayList<>();
        for (TransportProvider p : providers()) {
            if (p.name().equals(name)) {
                return p;
            }
            names.add(p.name());
        }
        throw new DsmConfigException("transport", name, "one of " + names
                + " (a transport's module must be on the class path)");
    }

    /** Creates this node's end of the named transport. */
    public static Transport create(String name, TransportConfig config) {
        return provider(name).create(config);
    }
}
