package io.membus.cluster;

import io.membus.core.JvmFlags;
import io.membus.core.error.DsmConfigException;
import io.membus.core.test.TestJvm;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * An application started without the JVM flags Chronicle needs fails at
 * {@link DsmNode#start} with a typed error naming the exact line to add, before
 * any segment is made; the build's own flags (surefire's argLine) are complete.
 */
class JvmFlagsStartTest {

    @Test
    void theBuildsFlagsAreComplete() {
        assertEquals(List.of(), JvmFlags.missing(), "surefire's argLine (membus.jvm.flags in the root pom) lacks a flag");
        JvmFlags.require();
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aStartWithoutTheFlagsFailsNamingTheLineToAdd() throws Exception {
        ProcessBuilder pb = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
            "-Xmx128m", "-XX:TieredStopAtLevel=1", "-cp", TestJvm.classPath(), Child.class.getName())
            .redirectErrorStream(true);
        pb.environment().remove("JDK_JAVA_OPTIONS"); // a user's JVM: no flags from anywhere
        pb.environment().remove("JAVA_TOOL_OPTIONS");
        Process p = pb.start();
        String out;
        try {
            assertTrue(p.waitFor(50, TimeUnit.SECONDS), "the child did not exit");
            out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        } finally {
            p.destroyForcibly();
        }
        assertEquals(3, p.exitValue(), out);
        assertTrue(out.contains("REFUSED key=JVM flags"), out);
        assertTrue(out.contains("start the JVM with: " + String.join(" ", JvmFlags.required())), out);
        for (String flag : JvmFlags.required()) {
            assertTrue(out.contains("missing") && out.contains(flag), flag + " not named:\n" + out);
        }
    }

    /** A node start in a JVM without the flags: prints how it was refused, exits 3. */
    public static final class Child {
        public static void main(String[] args) {
            try {
                DsmNode.start(NodeConfig.parse(TestClusters.config(1, 0, 0, "local", "membus.seed-nodes = []\n")));
                System.out.println("STARTED");
                System.exit(1);
            } catch (DsmConfigException e) {
                System.out.println("REFUSED key=" + e.key() + " " + e.getMessage());
                System.exit(3);
            }
        }
    }
}
