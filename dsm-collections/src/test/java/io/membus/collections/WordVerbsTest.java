package io.membus.collections;

import io.membus.core.RemoteMemory;
import io.membus.core.Segment;
import io.membus.core.directory.StaticDirectory;
import io.membus.core.transport.DeclaringTransport;
import io.membus.core.transport.SegmentSpec;
import io.membus.core.transport.Transport;
import io.membus.core.capability.TransportCapabilities;
import io.membus.core.transport.TransportConfig;
import io.membus.core.transport.Transports;
import org.junit.jupiter.api.Test;

import java.time.Duration;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * How {@link WordVerbs} stores a word follows the transport's declared
 * {@link TransportCapabilities#plainWritesAtomicWithAtomics()}, not its name: a double named
 * {@code local} that does not promise it gets the CAS loop, one with an unknown name that
 * does gets the plain write; and the word is stored either way.
 */
class WordVerbsTest {

    private static void withWords(String name, TransportCapabilities caps, java.util.function.BiConsumer<WordVerbs,
            Segment> test) {
        StaticDirectory directory = new StaticDirectory();
        try (Transport local = Transports.create("local", TransportConfig.builder(1)
                .property("local.fabric", "word-verbs-" + System.nanoTime()).build())) {
            Transport t = new DeclaringTransport(local, name, caps);
            directory.addMember(t.self());
            Segment seg = t.export(SegmentSpec.of(0, 4096));
            directory.addSegment(seg.descriptor());
            test.accept(new WordVerbs(new RemoteMemory(t, directory, Duration.ofSeconds(10))), seg);
        }
    }

    @Test
    void aTransportThatDoesNotPromiseAtomicPlainWritesGetsTheCasLoopWhateverItsName() {
        withWords("local", TransportCapabilities.SOFTWARE.withPlainWritesAtomicWithAtomics(false), (words, seg) -> {
            assertFalse(words.plainWriteAtomic(), "declared: plain writes race atomics, so stores are CAS loops");
            words.store(seg.pointer(8), 41);
            assertEquals(41, seg.readLong(8));
            assertEquals(41, words.swap(seg.pointer(8), 42));
            assertEquals(42, seg.readLong(8));
        });
    }

    @Test
    void aTransportThatPromisesAtomicPlainWritesGetsThePlainWriteWhateverItsName() {
        withWords("not-a-known-name", TransportCapabilities.SOFTWARE, (words, seg) -> {
            assertTrue(words.plainWriteAtomic(), "declared: a plain write lands whole against atomics");
            words.store(seg.pointer(16), -7);
            assertEquals(-7, seg.readLong(16));
        });
    }
}
