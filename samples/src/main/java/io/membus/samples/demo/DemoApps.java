package io.membus.samples.demo;

import io.membus.core.error.DsmConfigException;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The apps {@code membus demo} knows, in the order {@code membus demo} runs them,
 * and the apps the issue asks for that this build cannot run yet (with why).
 *
 * <p><b>Note:</b> immutable.
 */
final class DemoApps {
    private DemoApps() {
    }

    private static final Map<String, DemoApp> APPS = new LinkedHashMap<>();

    static {
        for (DemoApp app : List.<DemoApp>of(new CountersApp(), new KvApp(), new BankApp(), new JobsApp(), new ParamsApp())) {
            APPS.put(app.name(), app);
        }
    }

    /** Apps that are planned and the collection each waits for. */
    static final Map<String, String> NOT_YET = Map.of();

    static List<DemoApp> all() {
        return List.copyOf(APPS.values());
    }

    static DemoApp byName(String name) {
        DemoApp app = APPS.get(name);
        if (app == null) {
            if (NOT_YET.containsKey(name)) {
                throw new DsmConfigException("demo app", name, String.join(", ", APPS.keySet()) + " (" + name
                        + " needs " + NOT_YET.get(name) + ", which this build does not have yet)");
            }
            throw new DsmConfigException("demo app", name, String.join(", ", APPS.keySet()));
        }
        return app;
    }
}
