package io.membus.transport.tcp;

import org.junit.jupiter.api.Test;

import java.net.InetAddress;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

/** The rules of {@link HandshakeSlots}: shares per source, waiting sources served in turn, bounded waits. */
class HandshakeSlotsTest {
    private static final InetAddress A = address(1);
    private static final InetAddress B = address(2);
    private static final InetAddress C = address(3);

    private static InetAddress address(int last) {
        try {
            return InetAddress.getByAddress(new byte[] {10, 0, 0, (byte) last});
        } catch (java.net.UnknownHostException e) {
            throw new AssertionError(e);
        }
    }

    /** Records what happens to each waiting connection, by its label. */
    private final List<String> events = new ArrayList<>();

    private HandshakeSlots.Waiter waiter(String label) {
        return new HandshakeSlots.Waiter() {
            @Override
            public void admitted() {
                events.add(label + " admitted");
            }

            @Override
            public void expired() {
                events.add(label + " expired");
            }
        };
    }

    @Test
    void aFloodingSourceHoldsItsShareAndWaitsBehindEveryOtherSource() {
        HandshakeSlots slots = new HandshakeSlots(4, 2, 60_000_000_000L);
        for (int i = 0; i < 2; i++) {
            assertEquals(HandshakeSlots.Offer.ADMITTED, slots.offer(A, waiter("a" + i)));
        }
        for (int i = 2; i < 6; i++) {
            assertEquals(HandshakeSlots.Offer.WAITING, slots.offer(A, waiter("a" + i)), "beyond its share: waits");
        }
        assertEquals(HandshakeSlots.Offer.REFUSED, slots.offer(A, waiter("a6")), "its queue holds at most 4 (total)");
        assertEquals(HandshakeSlots.Offer.ADMITTED, slots.offer(B, waiter("b0")), "another source gets a slot at once");
        assertEquals(HandshakeSlots.Offer.ADMITTED, slots.offer(C, waiter("c0")));
        assertEquals(HandshakeSlots.Offer.WAITING, slots.offer(C, waiter("c1")), "every slot is taken: it waits");
        assertEquals(4, slots.held());
        assertEquals(2, slots.held(A));
        assertEquals(5, slots.waiting());

        slots.release(B); // A and C wait: A is at its share, so C's connection gets the slot
        assertEquals(List.of("c1 admitted"), events);
        slots.release(A); // now A may take one of its own
        slots.release(C);
        assertEquals(List.of("c1 admitted", "a2 admitted"), events, "C waits no more; A's next is served");
        assertEquals(2, slots.held(A));
        assertThrows(IllegalStateException.class, () -> slots.release(B), "B holds nothing");
    }

    @Test
    void aConnectionWaitsAtMostItsTimeoutAndCloseEndsEveryWait() throws Exception {
        HandshakeSlots slots = new HandshakeSlots(1, 1, 50_000_000L);
        assertEquals(HandshakeSlots.Offer.ADMITTED, slots.offer(A, waiter("a0")));
        assertEquals(HandshakeSlots.Offer.WAITING, slots.offer(B, waiter("b0")));
        Thread.sleep(100);
        slots.release(A); // b0 waited past its deadline: closed, not admitted
        assertEquals(List.of("b0 expired"), events);
        assertEquals(0, slots.held());
        assertEquals(HandshakeSlots.Offer.ADMITTED, slots.offer(C, waiter("c0")));
        assertEquals(HandshakeSlots.Offer.WAITING, slots.offer(A, waiter("a1")));
        slots.close();
        assertEquals(List.of("b0 expired", "a1 expired"), events);
        assertEquals(HandshakeSlots.Offer.REFUSED, slots.offer(B, waiter("b1")), "closed: nothing more");
    }
}
