package io.membus.codec;

/**
 * This node's codec registrations differ from another node's: the same class
 * would get another id (or another serializer) here than there, so values one
 * writes would be misread by the other. Carries the first difference: its index in
 * the registration list and the line on each side ({@code "101 com.acme.Item
 * RecordSerializer"}, or {@code (none)} where one list is shorter).
 *
 * <p><b>Note:</b> immutable once thrown; thread-safe.
 */
public final class RegistrationMismatchException extends CodecException {
    private static final long serialVersionUID = 1L;

    private final int index;
    private final String here;
    private final String there;
    private final String otherNode;

    RegistrationMismatchException(String fingerprint, String otherNode, int index, String here, String there) {
        super("registry#" + fingerprint, "registrations differ from " + otherNode + "'s: index=" + index
                + ", here=\"" + here + "\", on " + otherNode + "=\"" + there + "\""
                + "; list the same classes in the same order on every node (the classes registered in code, then"
                + " membus.codec.classes; nested records and enums follow the record that uses them), docs/codecs.md");
        this.index = index;
        this.here = here;
        this.there = there;
        this.otherNode = otherNode;
    }

    /** Position of the first differing line (0 = the first built-in registration). */
    public int index() {
        return index;
    }

    /** The line at {@link #index()} on this node, or {@code (none)}. */
    public String here() {
        return here;
    }

    /** The line at {@link #index()} on the other node, or {@code (none)}. */
    public String there() {
        return there;
    }

    /** Which node the lists were compared with, e.g. {@code node 2}. */
    public String otherNode() {
        return otherNode;
    }
}
