package io.membus.samples.stress;

import io.membus.coherence.RemoteRef;

import java.util.SplittableRandom;
import java.util.function.IntFunction;

/**
 * {@code register --coherent}: a register on a coherent object of the coherence layer
 * ({@link RemoteRef} of a {@code Long}, read with caching on: a read is served from this
 * node's cache while its lease holds, and writers invalidate the sharers first).
 * {@code read} (get), {@code write} (set) of 0..4, {@code cas} (compareAndSet). Under
 * the {@code skew} nemesis the node's lease clock is the one the nemesis moves: the
 * protocol promises linearizability while clocks stay within its bound ε.
 *
 * <p><b>Note:</b> confined to one client thread; the refs are shared by the node's clients.
 */
final class CoherentRegister implements Workload {
    private final IntFunction<RemoteRef<Long>> ref;
    private final StaleReads reads;
    private final SplittableRandom random;

    CoherentRegister(IntFunction<RemoteRef<Long>> ref, boolean plant, SplittableRandom random) {
        this.ref = ref;
        this.reads = new StaleReads(plant);
        this.random = random;
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
        return dice == 2 ? new Call("write", r.nextInt(RawWordWorkloads.REGISTER_VALUES), 0)
                : new Call("cas", r.nextInt(RawWordWorkloads.REGISTER_VALUES), r.nextInt(RawWordWorkloads.REGISTER_VALUES));
    }

    @Override
    public Outcome run(int key, Call call) {
        RemoteRef<Long> r = ref.apply(key);
        return switch (call.f()) {
            case "read" -> Outcome.ok(reads.read(key, r.get(), random), 0);
            case "write" -> {
                r.set(call.a());
                yield Outcome.ok(call.a(), 0);
            }
            case "cas" -> Outcome.ok(r.compareAndSet(call.a(), call.b()) ? 1 : 0, 0); // 1: swapped
            default -> throw new IllegalArgumentException("register has no operation " + call.f());
        };
    }
}
