package io.membus.test.nemesis;

import java.util.Random;

/**
 * Starts faults of one kind against a cluster under test, as Jepsen's nemeses do.
 * {@link NemesisSchedule} runs nemeses on a seeded schedule; tests may also start a
 * fault by hand and heal it.
 *
 * <p><b>Note:</b> implementations are thread-safe; at most one fault of a nemesis
 * should be active at a time (the schedule guarantees it).
 */
public interface Nemesis {

    /** The kind of fault this nemesis starts. */
    String kind();

    /** Starts one fault, choosing its targets with {@code random}. */
    Fault start(Random random);
}
