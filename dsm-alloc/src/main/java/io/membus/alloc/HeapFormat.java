package io.membus.alloc;

import io.membus.core.SegmentDescriptor;
import io.membus.core.Words;
import io.membus.core.error.DsmConfigException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import static io.membus.alloc.HeapLayout.ENTRY_LENGTH;

/**
 * Writing and reading a heap segment's header: formatting a zeroed segment (table
 * first, the magic word last) and validating the geometry a formatted header holds.
 * Split out of {@link GlobalAllocator}, which decides which segments to format.
 *
 * <p><b>Note:</b> stateless apart from its final fields; thread-safe. Its verbs are
 * ordered by {@link Remote} (each waits for its verb).
 */
final class HeapFormat {
    private static final Logger LOG = LoggerFactory.getLogger(HeapFormat.class);

    private final Remote remote;
    private final int self;
    private final AllocatorConfig config;

    HeapFormat(Remote remote, int self, AllocatorConfig config) {
        this.remote = remote;
        this.self = self;
        this.config = config;
    }

    /**
     * Formats segment {@code d} if its header is zero; leaves a valid heap as it is.
     *
     * @return whether this call formatted it
     */
    boolean format(SegmentDescriptor d) {
        long base = d.pointer(0);
        byte[] hdr = remote.read(base, HeapLayout.HEADER_LENGTH);
        long magic = Words.getLong(hdr, HeapLayout.MAGIC_OFFSET);
        if (magic != 0) {
            geometry(d, hdr); // validates, throws HeapCorruptedException
            return false;
        }
        for (byte b : hdr) {
            if (b != 0) {
                throw new HeapCorruptedException(d.nodeId(), d.index(), "the header holds bytes that are not a heap"
                        + " header (magic=0), so the segment is in use for something else");
            }
        }
        int shift = config.chunkShift();
        int count = HeapLayout.chunkCount(d.size(), shift);
        if (count < 1) {
            throw new DsmConfigException("alloc.chunk-size", config.chunkSize(), "at most about "
                    + (d.size() - HeapLayout.HEADER_LENGTH - ENTRY_LENGTH) + " bytes: segment " + d.index()
                    + " has " + d.size() + " bytes, too small for one chunk");
        }
        long dataStart = HeapLayout.dataStart(count);
        for (long off = HeapLayout.TABLE_OFFSET; off < dataStart; off += HeapSegment.TABLE_READ_PIECE) {
            remote.write(base + off, new byte[(int) Math.min(HeapSegment.TABLE_READ_PIECE, dataStart - off)]);
        }
        byte[] fields = new byte[HeapLayout.HEADER_LENGTH - 8];
        Words.putInt(fields, HeapLayout.VERSION_OFFSET - 8, HeapLayout.LAYOUT_VERSION);
        Words.putInt(fields, HeapLayout.CHUNK_SHIFT_OFFSET - 8, shift);
        Words.putLong(fields, HeapLayout.CHUNK_COUNT_OFFSET - 8, count);
        Words.putLong(fields, HeapLayout.DATA_START_OFFSET - 8, dataStart);
        Words.putLong(fields, HeapLayout.CHECK_OFFSET - 8,
                HeapLayout.checkWord(HeapLayout.LAYOUT_VERSION, shift, count, dataStart));
        remote.write(base + 8, fields);
        remote.writeLong(base + HeapLayout.MAGIC_OFFSET, HeapLayout.MAGIC); // last: readers that see it see the rest
        LOG.info("formatted heap segment: node={}, segment={}, chunkSize={}, chunks={}", d.nodeId(), d.index(),
                1 << shift, count);
        return true;
    }

    /** The heap geometry in a header with the magic, validated. */
    HeapSegment geometry(SegmentDescriptor d, byte[] hdr) {
        long magic = Words.getLong(hdr, HeapLayout.MAGIC_OFFSET);
        int version = Words.getInt(hdr, HeapLayout.VERSION_OFFSET);
        int shift = Words.getInt(hdr, HeapLayout.CHUNK_SHIFT_OFFSET);
        long count = Words.getLong(hdr, HeapLayout.CHUNK_COUNT_OFFSET);
        long dataStart = Words.getLong(hdr, HeapLayout.DATA_START_OFFSET);
        long check = Words.getLong(hdr, HeapLayout.CHECK_OFFSET);
        if (magic != HeapLayout.MAGIC) {
            throw new HeapCorruptedException(d.nodeId(), d.index(), "wrong magic: magic=0x" + Long.toHexString(magic)
                    + ", expected=0x" + Long.toHexString(HeapLayout.MAGIC));
        }
        if (version != HeapLayout.LAYOUT_VERSION) {
            throw new HeapCorruptedException(d.nodeId(), d.index(), "layout version=" + version + ", expected="
                    + HeapLayout.LAYOUT_VERSION + " (formatted by another Membus version)");
        }
        if (check != HeapLayout.checkWord(version, shift, count, dataStart)
                || shift < HeapLayout.MIN_CHUNK_SHIFT || shift > HeapLayout.MAX_CHUNK_SHIFT || count < 1
                || count > Integer.MAX_VALUE || dataStart != HeapLayout.dataStart(count)
                || dataStart + (count << shift) > d.size()) {
            throw new HeapCorruptedException(d.nodeId(), d.index(), "header fields do not agree: chunkShift=" + shift
                    + ", chunkCount=" + count + ", dataStart=" + dataStart + ", segmentSize=" + d.size()
                    + ", checkWordValid=" + (check == HeapLayout.checkWord(version, shift, count, dataStart)));
        }
        return new HeapSegment(remote, self, config, d, shift, (int) count, dataStart);
    }
}
