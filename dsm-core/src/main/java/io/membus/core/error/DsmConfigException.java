package io.membus.core.error;

/**
 * A configuration value is missing, malformed or not allowed. Names the key, the
 * value found and what is allowed.
 *
 * <p><b>Note:</b> immutable; thread-safe.
 */
public final class DsmConfigException extends DsmException {
    private static final long serialVersionUID = 1L;

    private final String key;

    public DsmConfigException(String key, Object value, String allowed) {
        super(ErrorCode.CONFIG, "bad config: key=" + key + ", value=" + value + ", allowed=" + allowed);
        this.key = key;
    }

    public DsmConfigException(String key, Object value, String allowed, Throwable cause) {
        super(ErrorCode.CONFIG, "bad config: key=" + key + ", value=" + value + ", allowed=" + allowed, cause);
        this.key = key;
    }

    public String key() {
        return key;
    }
}
