package io.membus.coherence;

import io.membus.core.error.DsmConfigException;
import org.junit.jupiter.api.Test;

import java.time.Duration;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

/** Each bad duration of {@link CoherenceConfig} is refused with a DsmConfigException naming it. */
class CoherenceConfigTest {

    @Test
    void badDurationsAreRefusedOneByOneWithWhatIsAllowed() {
        CoherenceConfig d = CoherenceConfig.defaults();
        assertEquals("bad config: key=coherence clockBound, value=PT-0.001S, allowed=a duration of 0 or more",
                assertThrows(DsmConfigException.class, () -> d.withClockBound(Duration.ofMillis(-1))).getMessage());
        assertEquals(Duration.ZERO, d.withClockBound(Duration.ZERO).clockBound(), "a bound of 0 is allowed");
        assertEquals("bad config: key=coherence minLease, value=PT0S, allowed=a positive duration",
                assertThrows(DsmConfigException.class, () -> d.withLeases(Duration.ZERO, Duration.ofMillis(5)))
                        .getMessage());
        assertEquals("bad config: key=coherence maxLease, value=PT0.001S, allowed=at least minLease (PT0.002S)",
                assertThrows(DsmConfigException.class, () -> d.withLeases(Duration.ofMillis(2), Duration.ofMillis(1)))
                        .getMessage());
        DsmConfigException lock = assertThrows(DsmConfigException.class, () -> d.withLockTimeout(Duration.ZERO));
        assertEquals("coherence lockTimeout", lock.key());
        assertEquals("PT0S", lock.value());
    }
}
