package io.membus.samples.stress;

import io.membus.core.RemoteMemory;

import java.util.SplittableRandom;
import java.util.function.IntToLongFunction;

/**
 * The workloads that run on raw verbs: one 8-byte word per key in a node's segment,
 * reached with {@link RemoteMemory} (one-sided read, write, compare-and-swap,
 * fetch-and-add). They check the verbs' own promise: every verb on one word is
 * atomic and linearizable, across processes and through faults.
 *
 * <p>With {@code plantViolation} the reads lie ({@link StaleReads}).
 *
 * <p><b>Note:</b> each instance is confined to one client thread.
 */
final class RawWordWorkloads {
    private RawWordWorkloads() {
    }

    /** Values a register takes: few, so that reads, writes and CAS often meet. */
    static final int REGISTER_VALUES = 5;

    /** Register: read, write (values 0..4) and compare-and-swap. */
    static final class Register implements Workload {
        private final RemoteMemory memory;
        private final IntToLongFunction word;
        private final StaleReads reads;
        private final SplittableRandom random;

        Register(RemoteMemory memory, IntToLongFunction word, boolean plantViolation, SplittableRandom random) {
            this.memory = memory;
            this.word = word;
            this.reads = new StaleReads(plantViolation);
            this.random = random;
        }

        @Override
        public boolean preciseFailure(Call call) {
            return true; // get, set, compare-and-swap, fetch-and-add: one verb each
        }

        @Override
        public String model() {
            return "register";
        }

        @Override
        public Call next(SplittableRandom r) {
            int dice = r.nextInt(4);
            if (dice < 2) {
                return new Call("read", 0, 0);
            }
            if (dice == 2) {
                return new Call("write", r.nextInt(REGISTER_VALUES), 0);
            }
            return new Call("cas", r.nextInt(REGISTER_VALUES), r.nextInt(REGISTER_VALUES));
        }

        @Override
        public Outcome run(int key, Call call) {
            long ptr = word.applyAsLong(key);
            switch (call.f()) {
                case "read" -> {
                    return Outcome.ok(reads.read(key, memory.readLong(ptr), random), 0);
                }
                case "write" -> {
                    memory.writeLong(ptr, call.a());
                    return Outcome.ok(call.a(), 0);
                }
                case "cas" -> {
                    long witnessed = memory.compareAndSwap(ptr, call.a(), call.b());
                    return Outcome.ok(witnessed == call.a() ? 1 : 0, 0); // 1: swapped, 0: found another value
                }
                default -> throw new IllegalArgumentException("register has no operation " + call.f());
            }
        }
    }

    /** Counter: fetch-and-add of 1 (the value before is recorded) and read. */
    static final class Counter implements Workload {
        private final RemoteMemory memory;
        private final IntToLongFunction word;
        private final StaleReads reads;
        private final SplittableRandom random;

        Counter(RemoteMemory memory, IntToLongFunction word, boolean plantViolation, SplittableRandom random) {
            this.memory = memory;
            this.word = word;
            this.reads = new StaleReads(plantViolation);
            this.random = random;
        }

        @Override
        public boolean preciseFailure(Call call) {
            return true; // get, set, compare-and-swap, fetch-and-add: one verb each
        }

        @Override
        public String model() {
            return "counter";
        }

        @Override
        public Call next(SplittableRandom r) {
            return r.nextBoolean() ? new Call("read", 0, 0) : new Call("add", 1, 0);
        }

        @Override
        public Outcome run(int key, Call call) {
            long ptr = word.applyAsLong(key);
            switch (call.f()) {
                case "read" -> {
                    return Outcome.ok(reads.read(key, memory.readLong(ptr), random), 0);
                }
                case "add" -> {
                    long before = memory.fetchAndAdd(ptr, call.a());
                    return Outcome.ok(call.a(), before);
                }
                default -> throw new IllegalArgumentException("counter has no operation " + call.f());
            }
        }
    }
}
