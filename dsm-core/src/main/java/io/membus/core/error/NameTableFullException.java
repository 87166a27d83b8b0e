package io.membus.core.error;

/**
 * A bind found no empty slot in the cluster's name table: every slot of its probe
 * sequence holds a binding or the tombstone of an unbound one (slots are never reused,
 * so unbinds do not give room back). Nothing was bound; the record the bind had written
 * was given back.
 *
 * <p>The message names the table's capacity and the setting that sets it
 * ({@code membus.names.capacity}), which takes effect when a new cluster is formed.
 *
 * <p><b>Note:</b> immutable; thread-safe: every field is final, so any publication
 * makes it fully visible (final-field semantics); no other memory ordering.
 */
public final class NameTableFullException extends DsmException {
    private static final long serialVersionUID = 1L;

    /** The setting that holds the table's capacity. */
    public static final String SETTING = "membus.names.capacity";

    private final String name;
    private final int capacity;

    /**
     * @param name     the name that could not be bound
     * @param capacity the table's slots
     */
    public NameTableFullException(String name, int capacity) {
        super(ErrorCode.OUT_OF_REMOTE_MEMORY, "name table full: name=" + shown(name) + ", capacity=" + capacity
                + " slots (" + SETTING + "), every slot holds a binding or the tombstone of an unbound name;"
                + " nothing was bound: form the cluster with a larger " + SETTING);
        this.name = name;
        this.capacity = capacity;
    }

    private static String shown(String name) {
        return name.length() > 64 ? "\"" + name.substring(0, 64) + "\"...(" + name.length() + " chars)"
                : "\"" + name + "\"";
    }

    /** The name that could not be bound. */
    public String name() {
        return name;
    }

    /** The table's capacity in slots. */
    public int capacity() {
        return capacity;
    }

    /** The bind's CAS never succeeded: nothing was bound. */
    @Override
    public boolean mayHaveRun() {
        return false;
    }
}
