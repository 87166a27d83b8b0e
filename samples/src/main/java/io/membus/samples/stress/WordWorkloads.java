package io.membus.samples.stress;

import io.membus.coherence.RemoteRef;
import io.membus.collections.DsmAtomicLong;
import io.membus.core.RemoteMemory;

import java.util.SplittableRandom;
import java.util.function.IntFunction;
import java.util.function.LongConsumer;
import java.util.function.LongSupplier;
import java.util.function.LongUnaryOperator;

/**
 * The register and counter workloads, written once over a {@link Word}: a raw 8-byte
 * word in a node's segment reached with {@link RemoteMemory}'s one-sided verbs
 * ({@code register-verbs}, {@code counter-verbs}), a {@link DsmAtomicLong}
 * ({@code register}, {@code counter}) or a coherent {@link RemoteRef} read through this
 * node's cache ({@code register --coherent}). Whatever holds the word, the model is the
 * same and so is the promise checked: every operation on one word is atomic and
 * linearizable, across processes and through faults.
 *
 * <p>With {@code plant} the reads lie ({@link StaleReads}): the planted bug the checker
 * must catch.
 *
 * <p><b>Note:</b> each workload instance is confined to one client thread; the words it
 * reaches may be shared by the node's clients (one handle per name per node).
 */
final class WordWorkloads {
    private WordWorkloads() {
    }

    /** Values a register takes: few, so that reads, writes and CAS often meet. */
    static final int REGISTER_VALUES = 5;

    /** The operations a register or counter runs on one word. */
    interface Word {
        long get();

        void set(long value);

        /** Whether the word held {@code expected} and now holds {@code update}. */
        boolean compareAndSet(long expected, long update);

        /** Adds {@code delta}; returns the value before. */
        long getAndAdd(long delta);

        /** A word whose operations are these functions (each holder below is one line of them). */
        static Word of(LongSupplier get, LongConsumer set, Cas cas, LongUnaryOperator getAndAdd) {
            return new Word() {
                @Override
                public long get() {
                    return get.getAsLong();
                }

                @Override
                public void set(long value) {
                    set.accept(value);
                }

                @Override
                public boolean compareAndSet(long expected, long update) {
                    return cas.compareAndSet(expected, update);
                }

                @Override
                public long getAndAdd(long delta) {
                    return getAndAdd.applyAsLong(delta);
                }
            };
        }
    }

    /** {@link Word#compareAndSet} as a function. */
    @FunctionalInterface
    interface Cas {
        boolean compareAndSet(long expected, long update);
    }

    /** The word at {@code ptr}: each operation is one verb. */
    static Word raw(RemoteMemory memory, long ptr) {
        return Word.of(() -> memory.readLong(ptr), v -> memory.writeLong(ptr, v),
                (expected, update) -> memory.compareAndSwap(ptr, expected, update) == expected,
                delta -> memory.fetchAndAdd(ptr, delta));
    }

    /** A {@link DsmAtomicLong}: each operation is one verb. */
    static Word atomic(DsmAtomicLong a) {
        return Word.of(a::get, a::set, a::compareAndSet, a::getAndAdd);
    }

    /** A coherent object holding a {@code Long}: a read may be served from this node's cache. */
    static Word coherent(RemoteRef<Long> ref) {
        return Word.of(ref::get, ref::set, ref::compareAndSet, delta -> {
            throw new UnsupportedOperationException("the coherent workload is a register, not a counter");
        });
    }

    /**
     * Register: {@code read}, {@code write} (values 0..4) and {@code cas}. {@code precise}:
     * each operation is one verb, so a failure says whether it may have run
     * ({@link Workload#preciseFailure}).
     */
    static final class Register implements Workload {
        private final IntFunction<Word> word;
        private final boolean precise;
        private final StaleReads reads;
        private final SplittableRandom random;

        Register(IntFunction<Word> word, boolean precise, boolean plant, SplittableRandom random) {
            this.word = word;
            this.precise = precise;
            this.reads = new StaleReads(plant);
            this.random = random;
        }

        @Override
        public boolean preciseFailure(Call call) {
            return precise;
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
            return dice == 2 ? new Call("write", r.nextInt(REGISTER_VALUES), 0)
                    : new Call("cas", r.nextInt(REGISTER_VALUES), r.nextInt(REGISTER_VALUES));
        }

        @Override
        public Outcome run(int key, Call call) {
            Word w = word.apply(key);
            return switch (call.f()) {
                case "read" -> Outcome.ok(reads.read(key, w.get(), random), 0);
                case "write" -> {
                    w.set(call.a());
                    yield Outcome.ok(call.a(), 0);
                }
                case "cas" -> Outcome.ok(w.compareAndSet(call.a(), call.b()) ? 1 : 0, 0); // 1: swapped, 0: another value
                default -> throw new IllegalArgumentException("register has no operation " + call.f());
            };
        }
    }

    /** Counter: {@code add} (fetch-and-add of 1; the value before is recorded) and {@code read}; one verb each. */
    static final class Counter implements Workload {
        private final IntFunction<Word> word;
        private final StaleReads reads;
        private final SplittableRandom random;

        Counter(IntFunction<Word> word, boolean plant, SplittableRandom random) {
            this.word = word;
            this.reads = new StaleReads(plant);
            this.random = random;
        }

        @Override
        public boolean preciseFailure(Call call) {
            return true;
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
            Word w = word.apply(key);
            return switch (call.f()) {
                case "read" -> Outcome.ok(reads.read(key, w.get(), random), 0);
                case "add" -> Outcome.ok(call.a(), w.getAndAdd(call.a()));
                default -> throw new IllegalArgumentException("counter has no operation " + call.f());
            };
        }
    }
}
