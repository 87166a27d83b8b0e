package io.membus.collections;

/**
 * What {@link DsmLongArray} and {@link DsmDoubleArray} share: their words (a
 * {@link StripedWords}), their root and life cycle, name, length and stripes.
 *
 * <p><b>Note:</b> thread-safe; the state is the {@link StripedWords}' (its life is a
 * volatile field of its {@link Handle}).
 */
abstract class StripedArray implements Rooted {
    final StripedWords w;

    StripedArray(StripedWords w) {
        this.w = w;
    }

    @Override
    public final Handle handle() {
        return w.handle;
    }

    /**
     * Destroys this array cluster-wide: its name is given back (when still bound to it)
     * and its stripes and root freed a grace later; from then on every operation of every
     * handle on it fails with a {@link StructureGoneException} (within a quarter second
     * on other nodes). Returns whether this call destroyed it (false: destroyed already).
     *
     * @throws CollectionArgumentException when the handle was not opened through {@link DsmCollections}
     */
    public final boolean destroy() {
        return Rooted.destroy(this);
    }

    /** Elements in the array, fixed at creation. */
    public final int length() {
        return w.length;
    }

    /** The node holding each stripe, in stripe order. */
    public final int[] stripeNodes() {
        return w.nodesOfStripes();
    }
}
