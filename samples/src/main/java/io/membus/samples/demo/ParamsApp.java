package io.membus.samples.demo;

import io.membus.collections.DsmDoubleArray;
import org.HdrHistogram.Histogram;

import java.io.PrintStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;

/**
 * {@code membus demo params}: a parameter server. Worker nodes train a logistic
 * regression on a generated data set with asynchronous SGD: the weights live in one
 * {@link DsmDoubleArray} striped over the nodes; every worker reads them (one bulk
 * read), computes the gradient of a mini-batch of its shard, and adds its update
 * into the shared weights (one bulk {@code addAll}: a CAS per element), without any
 * lock: updates race, as in Hogwild!. The demo prints the loss after every epoch and
 * compares it with a single-process run of the same SGD.
 *
 * <p><b>Note:</b> stateless; every node regenerates the same data set from the seed.
 */
final class ParamsApp implements DemoApp {
    static final int FEATURES = 8;
    static final int SAMPLES = 4000;
    static final int BATCH = 32;
    static final int EPOCHS = 10;
    static final double LEARNING_RATE = 0.1;
    /** The check: the cluster's final loss is within this of the single process's. */
    static final double LOSS_TOLERANCE = 0.05;

    @Override
    public String name() {
        return "params";
    }

    @Override
    public String title() {
        return "asynchronous SGD of a logistic regression, weights shared in a DsmDoubleArray (parameter server)";
    }

    /** The data set: features x (with a constant 1 for the bias) and labels from hidden weights plus noise. */
    record Data(double[][] x, double[] y) {
        static Data generate(long seed) {
            SplittableRandom r = new SplittableRandom(seed);
            double[] hidden = new double[FEATURES + 1];
            for (int j = 0; j <= FEATURES; j++) {
                hidden[j] = r.nextDouble(-2, 2);
            }
            double[][] x = new double[SAMPLES][FEATURES + 1];
            double[] y = new double[SAMPLES];
            for (int i = 0; i < SAMPLES; i++) {
                x[i][FEATURES] = 1;
                for (int j = 0; j < FEATURES; j++) {
                    x[i][j] = r.nextDouble(-1, 1);
                }
                double p = sigmoid(dot(hidden, x[i]) + r.nextDouble(-0.5, 0.5));
                y[i] = r.nextDouble() < p ? 1 : 0;
            }
            return new Data(x, y);
        }
    }

    static double sigmoid(double z) {
        return 1 / (1 + Math.exp(-z));
    }

    static double dot(double[] w, double[] x) {
        double s = 0;
        for (int j = 0; j < w.length; j++) {
            s += w[j] * x[j];
        }
        return s;
    }

    /** Mean log loss and accuracy of weights {@code w} on the whole data set. */
    static double[] loss(Data d, double[] w) {
        double loss = 0;
        int right = 0;
        for (int i = 0; i < SAMPLES; i++) {
            double p = Math.min(1 - 1e-12, Math.max(1e-12, sigmoid(dot(w, d.x()[i]))));
            loss -= d.y()[i] * Math.log(p) + (1 - d.y()[i]) * Math.log(1 - p);
            right += (p >= 0.5) == (d.y()[i] == 1) ? 1 : 0;
        }
        return new double[]{loss / SAMPLES, (double) right / SAMPLES};
    }

    /** The update (minus learning rate times the mean gradient) of samples {@code from..to} of a shard. */
    static double[] step(Data d, double[] w, int[] shard, int from, int to) {
        double[] g = new double[FEATURES + 1];
        for (int k = from; k < to; k++) {
            double[] x = d.x()[shard[k]];
            double err = sigmoid(dot(w, x)) - d.y()[shard[k]];
            for (int j = 0; j <= FEATURES; j++) {
                g[j] += err * x[j];
            }
        }
        for (int j = 0; j <= FEATURES; j++) {
            g[j] *= -LEARNING_RATE / (to - from);
        }
        return g;
    }

    static int[] shard(int node, int nodes) {
        int[] s = new int[(SAMPLES - (node - 1) + nodes - 1) / nodes];
        for (int k = 0, i = node - 1; i < SAMPLES; i += nodes, k++) {
            s[k] = i;
        }
        return s;
    }

    private static DsmDoubleArray weights(DemoNode node, long seed) {
        return node.membus().doubleArray("params-weights-" + Long.toHexString(seed), FEATURES + 1);
    }

    private static final class Latency {
        final Histogram push = new Histogram(60_000_000_000L, 3);
    }

    @Override
    public String onNode(DemoNode node, int nodes, String phase, List<String> args) {
        long seed = Long.parseLong(args.get(0));
        Data data = node.state(Data.class, () -> Data.generate(seed));
        DsmDoubleArray w = weights(node, seed);
        switch (phase) {
            case "epoch" -> {
                Latency latency = node.state(Latency.class, Latency::new);
                int[] shard = shard(node.nodeId(), nodes);
                int updates = 0;
                for (int from = 0; from < shard.length; from += BATCH) {
                    double[] current = w.toArray();
                    double[] update = step(data, current, shard, from, Math.min(shard.length, from + BATCH));
                    long t0 = System.nanoTime();
                    w.addAll(update);
                    latency.push.recordValue(Math.max(1, System.nanoTime() - t0));
                    updates++;
                }
                return Integer.toString(updates);
            }
            case "loss" -> {
                double[] l = loss(data, w.toArray());
                return l[0] + " " + l[1];
            }
            case "latency" -> {
                Histogram h = node.state(Latency.class, Latency::new).push;
                return h.getTotalCount() + " " + h.getValueAtPercentile(50) / 1000.0 + " "
                        + h.getValueAtPercentile(99) / 1000.0 + " " + h.getValueAtPercentile(99.9) / 1000.0;
            }
            default -> throw new IllegalArgumentException("params has no phase " + phase);
        }
    }

    @Override
    public boolean drive(Driver d) throws Exception {
        PrintStream out = d.out();
        long seed = d.options().seed();
        List<String> arg = List.of(Long.toString(seed));
        out.printf("  %d samples of %d features (seed %d), %d workers each training on its shard: mini-batches of %d,"
                + " learning rate %.2f, %d epochs; weights in a DsmDoubleArray of %d doubles, updated without locks%n%n",
                SAMPLES, FEATURES, seed, d.nodes(), BATCH, LEARNING_RATE, EPOCHS, FEATURES + 1);
        // the same SGD in this process, the shards taken one after the other: the reference
        Data data = Data.generate(seed);
        double[] single = new double[FEATURES + 1];
        List<double[]> reference = new ArrayList<>();
        for (int e = 0; e < EPOCHS; e++) {
            for (int node = 1; node <= d.nodes(); node++) {
                int[] shard = shard(node, d.nodes());
                for (int from = 0; from < shard.length; from += BATCH) {
                    double[] u = step(data, single, shard, from, Math.min(shard.length, from + BATCH));
                    for (int j = 0; j <= FEATURES; j++) {
                        single[j] += u[j];
                    }
                }
            }
            reference.add(loss(data, single));
        }
        String[] start = d.onNode(1, "loss", arg).split(" ");
        out.printf(Locale.ROOT, "%-6s %14s %10s %18s %12s%n", "epoch", "cluster loss", "accuracy", "single-process loss",
                "accuracy");
        out.printf(Locale.ROOT, "%-6d %14.4f %10.3f %18s %12s%n", 0, Double.parseDouble(start[0]),
                Double.parseDouble(start[1]), "", "");
        double last = Double.NaN;
        long updates = 0;
        for (int e = 0; e < EPOCHS; e++) {
            for (String u : d.onEveryNode("epoch", arg)) {
                updates += Long.parseLong(u);
            }
            String[] l = d.onNode(1, "loss", arg).split(" ");
            last = Double.parseDouble(l[0]);
            out.printf(Locale.ROOT, "%-6d %14.4f %10.3f %18.4f %12.3f%n", e + 1, last, Double.parseDouble(l[1]),
                    reference.get(e)[0], reference.get(e)[1]);
        }
        out.printf("%n  push latency (DsmDoubleArray.addAll of %d doubles), per node:%n", FEATURES + 1);
        List<String> lat = d.onEveryNode("latency", arg);
        for (int i = 0; i < lat.size(); i++) {
            String[] f = lat.get(i).split(" ");
            out.printf(Locale.ROOT, "    node %d: %,d pushes  p50 %.1f us  p99 %.1f us  p99.9 %.1f us%n", i + 1,
                    Long.parseLong(f[0]), Double.parseDouble(f[1]), Double.parseDouble(f[2]), Double.parseDouble(f[3]));
        }
        double target = reference.get(EPOCHS - 1)[0];
        boolean ok = Math.abs(last - target) <= LOSS_TOLERANCE && last < Double.parseDouble(start[0]);
        out.printf(Locale.ROOT, "%n  %,d updates applied; final loss %.4f vs single process %.4f (|diff| %.4f, allowed %.2f): %s%n",
                updates, last, target, Math.abs(last - target), LOSS_TOLERANCE, ok ? "OK" : "MISMATCH");
        return ok;
    }
}
