package io.membus.bench;

import org.openjdk.jmh.runner.Runner;
import org.openjdk.jmh.runner.options.CommandLineOptions;
import org.openjdk.jmh.runner.options.OptionsBuilder;

import java.io.InputStream;
import java.util.Properties;

/**
 * Runs JMH with its usual command-line options and adds the JVM flags Membus
 * needs (written by the build from the root pom) and those its peers need
 * (Hazelcast) to every forked benchmark JVM, so nobody types them and no benchmark
 * class repeats them. {@code benchmarks.jar peers [JMH options]} runs the peer comparison
 * instead ({@link PeersTable}).
 *
 * <p><b>Note:</b> a program entry point.
 */
public final class BenchMain {
    private BenchMain() {
    }

    /**
     * What the peers need besides (Hazelcast's members and clients in the benchmark JVM): the
     * modules and packages Hazelcast opens for its own metrics, no phone-home, no Hazelcast
     * logging. Harmless to the benchmarks that run no Hazelcast; one list instead of one per class.
     */
    private static final String[] PEER_FLAGS = {"--add-modules", "java.se",
        "--add-opens", "java.management/sun.management=ALL-UNNAMED",
        "--add-opens", "jdk.management/com.sun.management.internal=ALL-UNNAMED",
        "-Dhazelcast.phone.home.enabled=false", "-Dhazelcast.logging.type=none"};

    /**
     * The JVM flags every forked benchmark JVM gets: Membus' (written by the build from the
     * root pom) and the peers' ({@link #PEER_FLAGS}).
     */
    static String[] forkFlags() throws java.io.IOException {
        String[] membus = membusFlags();
        String[] all = java.util.Arrays.copyOf(membus, membus.length + PEER_FLAGS.length);
        System.arraycopy(PEER_FLAGS, 0, all, membus.length, PEER_FLAGS.length);
        return all;
    }

    /** The JVM flags Membus needs, written by the build from the root pom. */
    private static String[] membusFlags() throws java.io.IOException {
        Properties p = new Properties();
        try (InputStream in = BenchMain.class.getResourceAsStream("/membus-bench.properties")) {
            if (in == null) {
                throw new IllegalStateException("membus-bench.properties missing: rebuild dsm-bench with mvn package");
            }
            p.load(in);
        }
        return p.getProperty("flags", "").trim().split("\\s+");
    }

    public static void main(String[] args) throws Exception {
        if (args.length > 0 && args[0].equals("peers")) {
            // the peer comparison of issue 28: PeersTable runs it and prints the table
            String[] rest = new String[args.length - 1];
            System.arraycopy(args, 1, rest, 0, rest.length);
            PeersTable.run(rest);
            return;
        }
        String[] flags = forkFlags();
        CommandLineOptions cli = new CommandLineOptions(args);
        Runner runner = new Runner(new OptionsBuilder().parent(cli).jvmArgsAppend(flags).build());
        // JMH's informational options, as its own Main handles them: they run nothing
        if (cli.shouldHelp()) {
            cli.showHelp();
        } else if (cli.shouldList()) {
            runner.list();
        } else if (cli.shouldListWithParams()) {
            runner.listWithParams(cli);
        } else if (cli.shouldListProfilers()) {
            cli.listProfilers();
        } else if (cli.shouldListResultFormats()) {
            cli.listResultFormats();
        } else {
            runner.run();
        }
    }
}
