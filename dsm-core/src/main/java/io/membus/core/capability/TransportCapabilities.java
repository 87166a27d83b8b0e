package io.membus.core.capability;

import io.membus.core.error.DsmConfigException;
import io.membus.core.transport.Transports;

import java.nio.file.Path;
import java.util.Objects;
import java.util.Optional;

/**
 * What a transport promises beyond the {@link io.membus.core.transport.Verbs} contract that every transport
 * keeps: the facts layers above decide on, so that no layer decides by a
 * transport's {@link io.membus.core.transport.Transport#name() name}. A {@code false} is the absence of a
 * promise, never a promise of the opposite: a layer that finds it takes the path
 * that is correct without the promise.
 *
 * <ul>
 *   <li>{@link #wholeWords()}: a read or write moves every 8-byte aligned word it
 *       covers whole (the "whole words" clause of {@link io.membus.core.transport.Verbs}). {@code local},
 *       {@code shm}, {@code tcp}: yes (one 8-byte access per word,
 *       {@link io.membus.core.WordCopy}); {@code rdma} over a NIC: no promise (NICs
 *       do it, the InfiniBand specification does not say so).</li>
 *   <li>{@link #plainWritesAtomicWithAtomics()}: a plain write of an aligned word
 *       lands whole before or after any compare-and-swap or fetch-and-add on that
 *       word. Where it holds, a word that peers change by atomics may be stored with
 *       one write; where not ({@code rdma}: InfiniBand atomics are atomic only among
 *       atomics) it is stored by a CAS loop.</li>
 *   <li>{@link #fencesInitiators()}: after {@link io.membus.core.transport.Transport#fence}, the target
 *       refuses the fenced node's verbs. {@code shm}: no — the initiator's CPU runs
 *       a verb on its own mapping of the target's file, and nothing stops a fenced
 *       (say, paused) process from writing there once it runs again.</li>
 *   <li>{@link #segmentFiles()}: where a file-backed segment's file must be, when
 *       the transport requires a place (peers map the files from there: {@code shm}'s
 *       directory); empty when any directory does.</li>
 *   <li>{@link #replication()}: how the transport can keep copies of segments
 *       ({@link ReplicationSupport}): {@code local} and {@code tcp} forward changes
 *       from the target's CPU, {@code shm} adopts files, {@code rdma} cannot.</li>
 * </ul>
 *
 * <p>Whether this node's own CPU atomics are atomic with its peers' verbs is not a
 * fixed fact of the transport kind but of the device: {@link io.membus.core.transport.Transport#localAtomicsCoherent()}.
 *
 * <p>Application API (beside the transport SPI, which implements it): a transport says
 * its own with {@link io.membus.core.transport.Transport#capabilities()}; what every
 * transport of a kind promises in any configuration, before one exists, is
 * {@link #of(String)} (a launcher choosing what it may ask of the transport named in a
 * config).
 *
 * <p><b>Note:</b> immutable; thread-safe.
 *
 * @param wholeWords                    reads and writes move aligned words whole
 * @param plainWritesAtomicWithAtomics  a plain aligned write is atomic with atomics on the same word
 * @param fencesInitiators              the target refuses verbs from a node it fenced
 * @param segmentFiles                  the directory segment files must be in; empty: any
 * @param replication                   how copies of segments can be kept
 */
public record TransportCapabilities(boolean wholeWords, boolean plainWritesAtomicWithAtomics,
                                    boolean fencesInitiators, Optional<SegmentFiles> segmentFiles,
                                    ReplicationSupport replication) {

    public TransportCapabilities {
        Objects.requireNonNull(segmentFiles, "segmentFiles (Optional.empty() for: anywhere)");
        Objects.requireNonNull(replication, "replication");
    }

    /**
     * Where a transport needs its segment files.
     *
     * @param directory the directory (absolute) the files must be directly in
     * @param key       the configuration key that sets it, as a user writes it
     *                  ({@code membus.transports.shm.dir}): errors about the directory name it
     */
    public record SegmentFiles(Path directory, String key) {
        public SegmentFiles {
            Objects.requireNonNull(directory, "directory");
            Objects.requireNonNull(key, "key");
        }
    }

    /**
     * A software transport whose target runs every verb with {@link io.membus.core.WordCopy} and
     * the CPU's atomics and refuses fenced initiators ({@code local}, {@code tcp}); segment files
     * anywhere.
     */
    public static final TransportCapabilities SOFTWARE = new TransportCapabilities(true, true, true, Optional.empty(),
            ReplicationSupport.FORWARDING);

    /** No promise beyond {@link io.membus.core.transport.Verbs}: the safe answer for a transport that does not know. */
    public static final TransportCapabilities NONE = new TransportCapabilities(false, false, false, Optional.empty(),
            ReplicationSupport.NONE);

    /**
     * What every transport named {@code transport} ({@code tcp}, {@code shm}, ...) promises
     * whatever its configuration: its provider's
     * {@link io.membus.core.transport.TransportProvider#capabilities()}. A transport of that
     * kind may promise more once made (a device's facts, its files' directory).
     *
     * @throws DsmConfigException when no transport of that name is on the class path (naming those that are)
     */
    public static TransportCapabilities of(String transport) {
        return Transports.provider(transport).capabilities();
    }

    public TransportCapabilities withWholeWords(boolean value) {
        return new TransportCapabilities(value, plainWritesAtomicWithAtomics, fencesInitiators, segmentFiles, replication);
    }

    public TransportCapabilities withPlainWritesAtomicWithAtomics(boolean value) {
        return new TransportCapabilities(wholeWords, value, fencesInitiators, segmentFiles, replication);
    }

    public TransportCapabilities withFencesInitiators(boolean value) {
        return new TransportCapabilities(wholeWords, plainWritesAtomicWithAtomics, value, segmentFiles, replication);
    }

    /** These capabilities, with segment files required directly in {@code directory} (set by {@code key}). */
    public TransportCapabilities withSegmentFiles(Path directory, String key) {
        return new TransportCapabilities(wholeWords, plainWritesAtomicWithAtomics, fencesInitiators,
                Optional.of(new SegmentFiles(directory.toAbsolutePath(), key)), replication);
    }

    public TransportCapabilities withReplication(ReplicationSupport value) {
        return new TransportCapabilities(wholeWords, plainWritesAtomicWithAtomics, fencesInitiators, segmentFiles, value);
    }
}
