package io.membus.core.error;

/**
 * A value is larger than the structure it was given to accepts: a map entry (key and
 * value together), a queue element or a coherent object's value, measured after
 * encoding. Thrown before anything is allocated or written, so nothing changed and
 * nothing stays claimed; retrying the same value fails the same way.
 *
 * <p>The message names the structure, the encoded size, the limit and the setting
 * that holds the limit (e.g. {@code membus.collections.max-value-size}), and what to
 * do: store the data in smaller parts, or raise the setting (up to the largest value
 * one verb carries).
 *
 * <p><b>Note:</b> immutable; thread-safe: every field is final, so any publication
 * makes it fully visible (final-field semantics); no other memory ordering.
 */
public final class ValueTooLargeException extends DsmException {
    private static final long serialVersionUID = 1L;

    private final String structure;
    private final long size;
    private final long limit;
    private final String setting;

    /**
     * @param structure what was refused the value, e.g. {@code map "orders" entry (key 12 B + value 104857600 B)}
     * @param size      the encoded bytes that were refused
     * @param limit     the largest size accepted
     * @param setting   where the limit is set, e.g. {@code membus.collections.max-value-size}
     */
    public ValueTooLargeException(String structure, long size, long limit, String setting) {
        super(ErrorCode.BAD_LENGTH, "value too large: structure=" + structure + ", size=" + size + " B, limit="
                + limit + " B (" + setting + "); nothing was stored or claimed: store the data in smaller parts,"
                + " or raise " + setting);
        this.structure = structure;
        this.size = size;
        this.limit = limit;
        this.setting = setting;
    }

    /** The structure (and part of it) the value was refused by. */
    public String structure() {
        return structure;
    }

    /** The encoded size refused, in bytes. */
    public long size() {
        return size;
    }

    /** The limit, in bytes. */
    public long limit() {
        return limit;
    }

    /** The setting that holds the limit. */
    public String setting() {
        return setting;
    }

    /** Refused before anything was sent: never took effect. */
    @Override
    public boolean mayHaveRun() {
        return false;
    }
}
