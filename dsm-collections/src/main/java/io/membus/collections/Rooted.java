package io.membus.collections;

/**
 * A handle on a named structure: its root.
 *
 * <p><b>Note:</b> implementations are thread-safe.
 */
interface Rooted {
    /** The structure's root (name, kind, descriptor, block). */
    Root root();
}
