package io.membus.core;

/**
 * Access flags of a segment, as a bit set: what remote peers may do with its bytes.
 * A segment's owner always has full local access; the flags govern verbs.
 *
 * <p><b>Note:</b> constants and static helpers only; thread-safe.
 */
public final class Access {
    /** Remote reads are allowed. */
    public static final int READ = 1;
    /** Remote writes are allowed. */
    public static final int WRITE = 1 << 1;
    /** Remote compare-and-swap and fetch-and-add are allowed. */
    public static final int ATOMIC = 1 << 2;

    public static final int READ_ONLY = READ;
    public static final int READ_WRITE = READ | WRITE;
    public static final int ALL = READ | WRITE | ATOMIC;

    private Access() {
    }

    public static boolean allows(int flags, int required) {
        return (flags & required) == required;
    }

    public static void validate(int flags) {
        if ((flags & ~ALL) != 0 || flags == 0) {
            throw new IllegalArgumentException("invalid access flags: flags=" + flags + ", allowed=any non-empty mix of "
                    + "READ(1), WRITE(2), ATOMIC(4)");
        }
    }

    /** {@code "rwa"}-style text, with '-' for a missing right. */
    public static String toString(int flags) {
        return ((flags & READ) != 0 ? "r" : "-") + ((flags & WRITE) != 0 ? "w" : "-") + ((flags & ATOMIC) != 0 ? "a" : "-");
    }

    /** Parses the text form of {@link #toString(int)}. */
    public static int parse(String text) {
        int flags = 0;
        for (char c : text.toCharArray()) {
            switch (c) {
                case 'r' -> flags |= READ;
                case 'w' -> flags |= WRITE;
                case 'a' -> flags |= ATOMIC;
                case '-' -> { }
                default -> throw new IllegalArgumentException("invalid access text: '" + text
                        + "', allowed: letters r, w, a or '-'");
            }
        }
        validate(flags);
        return flags;
    }
}
