package io.membus.cluster.names;

/**
 * The tag of a name record: a MAC of (name, root pointer) under a key only holders of
 * the cluster secret have (the cluster module passes its {@code ClusterMacs}), kept in
 * the record beside the binding. A record whose tag is not this function's value is
 * ignored by every reader and binder, as a binding with a wrong tag was in the
 * Distributed Data registry.
 *
 * <p><b>Note:</b> implementations are thread-safe and pure (the same inputs give the
 * same tag); no memory ordering is involved.
 */
@FunctionalInterface
public interface NameTags {

    /** The 128-bit tag of {@code name} bound to {@code root}, as two words {@code {hi, lo}}. */
    long[] tag(String name, long root);
}
