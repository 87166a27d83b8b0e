package io.membus.cluster;

import io.membus.core.SegmentDescriptor;
import io.membus.core.error.DsmConfigException;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.Transport;
import io.membus.core.capability.TransportCapabilities;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * Where a {@link DsmNode}'s segments live and their export at start: a file-backed segment's
 * file goes where the transport needs it ({@link TransportCapabilities#segmentFiles()}: the
 * peers map it, e.g. shm's directory), else in {@code membus.segments.dir}; decided by the
 * transport's capability, never by its name. An index whose replica group lives on elsewhere
 * (a restart, docs/replication.md §7) is not exported again.
 *
 * <p><b>Note:</b> stateless; called by the starting thread.
 */
final class SegmentExports {
    private SegmentExports() {
    }

    /**
     * Exports segments {@code 0 .. membus.segments.count - 1} of this node but those in
     * {@code heldElsewhere}, in index order.
     *
     * @return their descriptors, for the node's directory entry
     * @throws DsmConfigException naming the directory key when a segment file cannot be created
     */
    static List<SegmentDescriptor> export(NodeConfig config, Transport transport, Set<Integer> heldElsewhere) {
        List<SegmentDescriptor> exported = new ArrayList<>();
        for (int i = 0; i < config.segmentCount(); i++) {
            if (heldElsewhere.contains(i)) {
                continue;
            }
            Path file = config.fileBacked() ? segmentFile(config, transport, i) : null;
            try {
                exported.add(transport.export(new SegmentSpec(i, config.segmentSize(), config.segmentAccess(), file))
                        .descriptor());
            } catch (java.io.UncheckedIOException e) {
                throw new DsmConfigException(transport.capabilities().segmentFiles()
                        .map(TransportCapabilities.SegmentFiles::key).orElse("membus.segments.dir"),
                        file == null ? "-" : file.getParent(), "a directory this node can"
                        + " create its segment files in: segment " + i + " could not be created (" + e.getMessage()
                        + ": " + e.getCause() + ")", e);
            }
        }
        return exported;
    }

    /** A file-backed segment's file: in the transport's directory where it needs one (peers map it), else membus.segments.dir. */
    static Path segmentFile(NodeConfig config, Transport transport, int index) {
        return transport.capabilities().segmentFiles()
                .map(f -> f.directory().resolve("node-" + config.nodeId() + "-persistent-" + index + ".seg"))
                .orElseGet(() -> config.segmentDir().toAbsolutePath()
                        .resolve("node-" + config.nodeId() + "-seg-" + index + ".seg"));
    }
}
