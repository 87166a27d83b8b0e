package io.membus.test.nemesis;

/**
 * A node running in a process of its own, as the {@link ProcessNemesis} needs it:
 * its process id (for SIGSTOP / SIGCONT), a way to kill it at once (SIGKILL) and a
 * way to start it again (a new incarnation; with file-backed segments its data comes
 * back). The harness that started the process implements it.
 *
 * <p><b>Note:</b> implementations are thread-safe; {@link #restart()} is called only
 * after {@link #kill()}.
 */
public interface NodeProcess {

    int nodeId();

    /** The operating system's id of the node's current process. */
    long pid();

    /** Kills the process at once (like {@code kill -9}) and waits until it is gone. */
    void kill();

    /** Starts the node again after {@link #kill()}; returns when the process runs. */
    void restart();
}
