package io.membus.samples;

import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * For a test class that runs {@code membus} commands starting node JVMs: while it runs,
 * those JVMs compile with C1 only ({@code -XX:TieredStopAtLevel=1}, through
 * {@link JvmLauncher#CHILD_JVM_OPTIONS}). With 3 to 5 of them starting at once on 2 cores,
 * C2's compiler threads took the CPU their joins needed; the runs are seconds long, so
 * C1's code is fast enough. The commands' own defaults are untouched: the property is
 * unset outside these classes, and cleared after each.
 *
 * <p><b>Note:</b> sets a system property of the test JVM: for classes that run one at a
 * time in it (the slow tier runs one class at a time in samples).
 */
public final class CheapNodeJvms implements BeforeAllCallback, AfterAllCallback {
    @Override
    public void beforeAll(ExtensionContext context) {
        System.setProperty(JvmLauncher.CHILD_JVM_OPTIONS, "-XX:TieredStopAtLevel=1");
    }

    @Override
    public void afterAll(ExtensionContext context) {
        System.clearProperty(JvmLauncher.CHILD_JVM_OPTIONS);
    }
}
