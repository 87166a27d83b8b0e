package io.membus.bench;

import org.openjdk.jmh.runner.Runner;
import org.openjdk.jmh.runner.options.CommandLineOptions;
import org.openjdk.jmh.runner.options.OptionsBuilder;

import java.io.InputStream;
import java.util.Properties;

/**
 * Runs JMH with its usual command-line options and adds the JVM flags Membus
 * needs (written by the build from the root pom) to every forked benchmark JVM,
 * so nobody types them. {@code benchmarks.jar peers [JMH options]} runs the peer comparison
 * instead ({@link PeersTable}).
 *
 * <p><b>Note:</b> a program entry point.
 */
public final class BenchMain {
    private BenchMain() {
    }

    /** The JVM flags Membus needs, written by the build from the root pom. */
    static String[] membusFlags() throws java.io.IOException {
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
        String[] flags = membusFlags();
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
