package io.membus.core.directory;

import io.membus.core.Access;
import io.membus.core.replication.Ballot;
import io.membus.core.replication.GroupClaim;
import io.membus.core.replication.GroupId;
import io.membus.core.capability.ReplicationSupport;
import io.membus.core.directory.PeerInfo;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

/** The one computation of group views: serving, promoting, lost — and awaiting adoption on shm. */
class GroupViewsTest {
    private static final int G = GroupId.of(1, 0);

    private static PeerInfo peer(int n) {
        return new PeerInfo(n, 100 + n, "x");
    }

    private static GroupClaim claim(GroupClaim.Role role, long epoch, int... inSync) {
        return new GroupClaim(G, epoch, role, 4096, Access.ALL, 42, inSync, 0);
    }

    @Test
    void aPrimaryServesAndItsCopiesAreInSyncThenACopyAloneIsPromotingAndNoneLeftIsLost() {
        long e = Ballot.initial(1);
        Map<Integer, ReplicaGroupView> serving = GroupViews.compute(Map.of(1, peer(1), 2, peer(2)),
                Map.of(1, List.of(claim(GroupClaim.Role.PRIMARY, e, 2)), 2, List.of(claim(GroupClaim.Role.COPY, e))),
                Map.of());
        assertEquals(ReplicaGroupView.State.SERVING, serving.get(G).state());
        assertEquals(1, serving.get(G).primary());
        assertArrayEquals(new int[]{2}, serving.get(G).inSync());

        Map<Integer, ReplicaGroupView> promoting = GroupViews.compute(Map.of(2, peer(2)),
                Map.of(2, List.of(claim(GroupClaim.Role.COPY, e))), serving);
        assertEquals(ReplicaGroupView.State.PROMOTING, promoting.get(G).state());
        assertArrayEquals(new int[]{2}, promoting.get(G).inSync());

        Map<Integer, ReplicaGroupView> lost = GroupViews.compute(Map.of(3, peer(3)), Map.of(), promoting);
        assertEquals(ReplicaGroupView.State.LOST, lost.get(G).state());
    }

    @Test
    void onATransportThatAdoptsAGroupWhoseHoldersAreGoneAwaitsItsAdopterAndIsNeverLost() {
        long e = Ballot.initial(1);
        Map<Integer, ReplicaGroupView> serving = GroupViews.compute(Map.of(1, peer(1), 2, peer(2)),
                Map.of(1, List.of(claim(GroupClaim.Role.PRIMARY, e))), Map.of(), ReplicationSupport.ADOPTION);
        assertEquals(ReplicaGroupView.State.SERVING, serving.get(G).state());
        Map<Integer, ReplicaGroupView> gone = GroupViews.compute(Map.of(2, peer(2)), Map.of(), serving,
                ReplicationSupport.ADOPTION);
        assertEquals(ReplicaGroupView.State.PROMOTING, gone.get(G).state(), "awaiting the adopter, not lost");
        assertEquals(ReplicaGroupView.State.LOST, GroupViews.compute(Map.of(2, peer(2)), Map.of(), serving,
                ReplicationSupport.FORWARDING).get(G).state(), "forwarding with no copy: lost");

        Map<Integer, ReplicaGroupView> adopted = GroupViews.compute(Map.of(2, peer(2)),
                Map.of(2, List.of(claim(GroupClaim.Role.PRIMARY, Ballot.next(e, 2)))), gone, ReplicationSupport.ADOPTION);
        assertEquals(ReplicaGroupView.State.SERVING, adopted.get(G).state());
        assertEquals(2, adopted.get(G).primary());
    }

    /**
     * A copy's claim can reach a directory before its primary's (the copy stream runs over the transport, claims
     * through membership): a group seen first through a joining copy alone was never served in this view and is not
     * lost. A full run caught it: a verb in that window failed with SegmentLostException while the primary was up.
     */
    @Test
    void aGroupSeenFirstThroughAJoiningCopyAloneHasNoViewYetAndIsNotLost() {
        long e = Ballot.initial(1);
        Map<Integer, ReplicaGroupView> early = GroupViews.compute(Map.of(1, peer(1), 2, peer(2)),
                Map.of(2, List.of(claim(GroupClaim.Role.JOINING, e))), Map.of());
        assertNull(early.get(G), "no view before the primary's claim arrives: " + early);
        Map<Integer, ReplicaGroupView> served = GroupViews.compute(Map.of(1, peer(1), 2, peer(2)),
                Map.of(1, List.of(claim(GroupClaim.Role.PRIMARY, e)), 2, List.of(claim(GroupClaim.Role.JOINING, e))),
                early);
        assertEquals(ReplicaGroupView.State.SERVING, served.get(G).state());
        assertArrayEquals(new int[]{2}, served.get(G).joining());
        // once served, a primary gone with only a joining copy left is lost, as before
        assertEquals(ReplicaGroupView.State.LOST, GroupViews.compute(Map.of(2, peer(2)),
                Map.of(2, List.of(claim(GroupClaim.Role.JOINING, e))), served).get(G).state());
    }
}
