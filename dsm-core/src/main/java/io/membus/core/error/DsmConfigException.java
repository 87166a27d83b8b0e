package io.membus.core.error;

/**
 * A configuration value is missing, malformed or not allowed. Names the key, the
 * value found and what is allowed.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public final class DsmConfigException extends DsmException {

    /** Refused before anything was sent or executed. */
    @Override
    public boolean mayHaveRun() {
        return false;
    }
    private static final long serialVersionUID = 1L;

    private final String key;
    private final String value;
    private final String allowed;

    public DsmConfigException(String key, Object value, String allowed) {
        this(key, value, allowed, null);
    }

    public DsmConfigException(String key, Object value, String allowed, Throwable cause) {
        super(ErrorCode.CONFIG, "bad config: key=" + key + ", value=" + value + ", allowed=" + allowed, cause);
        this.key = key;
        this.value = String.valueOf(value);
        this.allowed = allowed;
    }

    /**
     * The same complaint about a value the user set under another key (a node's
     * {@code membus.secret} that reached the transport as {@code tcp.secret}).
     */
    public DsmConfigException reportedAs(String userKey) {
        return new DsmConfigException(userKey, value, allowed, this);
    }

    public String key() {
        return key;
    }

    /** The value found, as printed (secrets are never printed: their checks pass a placeholder). */
    public String value() {
        return value;
    }

    public String allowed() {
        return allowed;
    }
}
