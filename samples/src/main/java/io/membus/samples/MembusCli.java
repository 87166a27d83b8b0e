package io.membus.samples;

import io.membus.samples.cluster.NodeCommand;
import io.membus.samples.cluster.StatusCommand;
import io.membus.samples.demo.DemoCommand;
import io.membus.samples.demo.DemoNodeCommand;
import io.membus.samples.stress.StressCommand;
import io.membus.samples.stress.StressNodeCommand;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/**
 * The {@code membus} command line.
 *
 * <p><b>Note:</b> one instance per process; not thread-safe.
 */
@Command(name = "membus", mixinStandardHelpOptions = true, version = "membus 0.1.0-SNAPSHOT",
        description = "Membus: a distributed shared-memory heap for the JVM.",
        subcommands = {DemoCommand.class, StressCommand.class, NodeCommand.class, StatusCommand.class,
                DemoNodeCommand.class, StressNodeCommand.class, CommandLine.HelpCommand.class})
public final class MembusCli implements Runnable {

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    public static void main(String[] args) {
        System.exit(run(args));
    }

    /** Runs the command line and returns its exit code (for tests). */
    public static int run(String... args) {
        CommandLine cli = new CommandLine(new MembusCli());
        cli.setExecutionExceptionHandler((e, cmd, parsed) -> {
            // an exception without a message (seen as "membus: null") is named by its type
            cmd.getErr().println("membus: " + (e.getMessage() != null ? e.getMessage() : e.toString()));
            if (Boolean.getBoolean("membus.debug")) {
                e.printStackTrace(cmd.getErr());
            } else {
                cmd.getErr().println("(run with -Dmembus.debug=true for the stack trace)");
            }
            return 1;
        });
        return cli.execute(args);
    }

    @Override
    public void run() {
        spec.commandLine().usage(System.out);
    }
}
