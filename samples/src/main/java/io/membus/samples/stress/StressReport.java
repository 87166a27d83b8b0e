package io.membus.samples.stress;

import io.membus.test.check.CheckResult;
import io.membus.test.check.KeyResult;
import io.membus.test.check.Verdict;
import io.membus.test.history.FaultWindow;
import io.membus.test.history.History;
import io.membus.test.history.Operation;
import io.membus.test.history.Outcome;
import org.jfree.chart.ChartUtils;
import org.jfree.chart.JFreeChart;
import org.jfree.chart.axis.LogarithmicAxis;
import org.jfree.chart.axis.NumberAxis;
import org.jfree.chart.plot.IntervalMarker;
import org.jfree.chart.plot.XYPlot;
import org.jfree.chart.renderer.xy.XYLineAndShapeRenderer;
import org.jfree.chart.renderer.xy.XYStepRenderer;
import org.jfree.chart.ui.Layer;
import org.jfree.chart.ui.RectangleAnchor;
import org.jfree.chart.ui.TextAnchor;
import org.jfree.data.xy.XYSeries;
import org.jfree.data.xy.XYSeriesCollection;

import java.awt.BasicStroke;
import java.awt.Color;
import java.awt.Font;
import java.awt.geom.Ellipse2D;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.EnumMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The report folder of a stress run: {@code latency.png} (every operation's latency
 * against the time it was invoked, by outcome, with the fault windows shaded),
 * {@code throughput.png} (completions per second, by outcome, same shading), and
 * {@code index.html} with the verdict per key, the counts and the faults. Charts are
 * drawn by JFreeChart without a display (headless AWT).
 *
 * <p><b>Note:</b> used by one thread, once per run.
 */
final class StressReport {

    /** The run's parameters, as the report prints them. */
    record Run(String workload, String nemesis, String transport, int nodes, int clients, int keys,
               int durationSeconds, long seed, String commandLine) {
    }

    private static final Color OK = new Color(0x2E7D32);
    private static final Color FAIL = new Color(0xC62828);
    private static final Color INFO = new Color(0xF9A825);
    private static final Map<String, Color> FAULT_COLOURS = Map.of("partition", new Color(0xE57373),
            "kill", new Color(0xBA68C8), "pause", new Color(0x64B5F6), "delay", new Color(0xFFB74D),
            "skew", new Color(0x81C784));

    private StressReport() {
    }

    static Map<Outcome, Integer> count(List<Operation> ops) {
        Map<Outcome, Integer> m = new EnumMap<>(Outcome.class);
        for (Outcome o : Outcome.values()) {
            m.put(o, 0);
        }
        if (ops != null) {
            for (Operation op : ops) {
                m.merge(op.outcome(), 1, Integer::sum);
            }
        }
        return m;
    }

    /** Writes the folder; the history's time 0 is when the clients started. */
    static void write(Path folder, Run run, History history, CheckResult result, List<String> keyOrder) {
        System.setProperty("java.awt.headless", "true");
        try {
            Files.createDirectories(folder);
            ChartUtils.saveChartAsPNG(folder.resolve("latency.png").toFile(), latencyChart(history), 1000, 450);
            ChartUtils.saveChartAsPNG(folder.resolve("throughput.png").toFile(), throughputChart(history), 1000, 300);
            Files.writeString(folder.resolve("index.html"), html(run, history, result, keyOrder));
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write the report in " + folder + ": " + e.getMessage(), e);
        }
    }

    private static JFreeChart latencyChart(History history) {
        XYSeries ok = new XYSeries("ok", false, true);
        XYSeries fail = new XYSeries("fail", false, true);
        XYSeries info = new XYSeries("indeterminate", false, true);
        for (Operation op : history.operations()) {
            double x = op.invokeNanos() / 1e9;
            double y = Math.max(op.completeNanos() - op.invokeNanos(), 1_000) / 1e6;
            switch (op.outcome()) {
                case OK -> ok.add(x, y);
                case FAIL -> fail.add(x, y);
                default -> info.add(x, y);
            }
        }
        XYSeriesCollection data = new XYSeriesCollection();
        data.addSeries(ok);
        data.addSeries(fail);
        data.addSeries(info);
        XYLineAndShapeRenderer dots = new XYLineAndShapeRenderer(false, true);
        Ellipse2D dot = new Ellipse2D.Double(-1.5, -1.5, 3, 3);
        Color[] colours = {OK, FAIL, INFO};
        for (int i = 0; i < 3; i++) {
            dots.setSeriesShape(i, dot);
            dots.setSeriesPaint(i, colours[i]);
        }
        LogarithmicAxis y = new LogarithmicAxis("latency (ms, log)");
        y.setAllowNegativesFlag(false);
        XYPlot plot = new XYPlot(data, new NumberAxis("time since the clients started (s)"), y, dots);
        shade(plot, history.faults());
        return styled(new JFreeChart("Latency of every operation, by outcome; faults shaded", title(), plot, true));
    }

    private static JFreeChart throughputChart(History history) {
        long last = history.operations().stream().mapToLong(Operation::completeNanos).max().orElse(0);
        int seconds = (int) (last / 1_000_000_000L) + 1;
        int[][] perSecond = new int[3][seconds];
        for (Operation op : history.operations()) {
            int s = (int) (op.completeNanos() / 1_000_000_000L);
            int row = switch (op.outcome()) {
                case OK -> 0;
                case FAIL -> 1;
                default -> 2;
            };
            if (s >= 0 && s < seconds) {
                perSecond[row][s]++;
            }
        }
        String[] names = {"ok", "fail", "indeterminate"};
        XYSeriesCollection data = new XYSeriesCollection();
        for (int row = 0; row < 3; row++) {
            XYSeries series = new XYSeries(names[row]);
            for (int s = 0; s < seconds; s++) {
                series.add(s, perSecond[row][s]);
            }
            data.addSeries(series);
        }
        XYStepRenderer steps = new XYStepRenderer();
        Color[] colours = {OK, FAIL, INFO};
        for (int i = 0; i < 3; i++) {
            steps.setSeriesPaint(i, colours[i]);
            steps.setSeriesStroke(i, new BasicStroke(2f));
        }
        XYPlot plot = new XYPlot(data, new NumberAxis("time since the clients started (s)"),
                new NumberAxis("completions per second"), steps);
        shade(plot, history.faults());
        return styled(new JFreeChart("Throughput by outcome; faults shaded", title(), plot, true));
    }

    private static Font title() {
        return new Font(Font.SANS_SERIF, Font.BOLD, 14);
    }

    private static JFreeChart styled(JFreeChart chart) {
        chart.setBackgroundPaint(Color.WHITE);
        XYPlot plot = chart.getXYPlot();
        plot.setBackgroundPaint(Color.WHITE);
        plot.setDomainGridlinePaint(Color.LIGHT_GRAY);
        plot.setRangeGridlinePaint(Color.LIGHT_GRAY);
        return chart;
    }

    private static void shade(XYPlot plot, List<FaultWindow> faults) {
        for (FaultWindow w : faults) {
            IntervalMarker m = new IntervalMarker(w.startNanos() / 1e9, w.endNanos() / 1e9);
            Color c = FAULT_COLOURS.getOrDefault(w.kind(), Color.GRAY);
            m.setPaint(new Color(c.getRed(), c.getGreen(), c.getBlue(), 70));
            m.setLabel(w.kind());
            m.setLabelFont(new Font(Font.SANS_SERIF, Font.PLAIN, 11));
            m.setLabelAnchor(RectangleAnchor.TOP_LEFT);
            m.setLabelTextAnchor(TextAnchor.TOP_LEFT);
            plot.addDomainMarker(m, Layer.BACKGROUND);
        }
    }

    private static String html(Run run, History history, CheckResult result, List<String> keyOrder) {
        StringBuilder h = new StringBuilder();
        Map<Outcome, Integer> all = count(history.operations());
        boolean valid = result.verdict() == Verdict.LINEARIZABLE && !history.operations().isEmpty();
        Map<String, List<Operation>> byKey = history.byKey();
        h.append("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>membus stress: ")
                .append(esc(run.workload())).append(" / ").append(esc(run.nemesis())).append("</title>\n<style>")
                .append("body{font-family:sans-serif;margin:2em;max-width:1050px}table{border-collapse:collapse}")
                .append("td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#eee}")
                .append("td.l{text-align:left;font-family:monospace;font-size:85%}.ok{color:#2E7D32;font-weight:bold}")
                .append(".bad{color:#C62828;font-weight:bold}.unk{color:#b8860b;font-weight:bold}")
                .append("code{background:#f4f4f4}</style></head><body>\n");
        h.append("<h1>membus stress: ").append(esc(run.workload())).append(" under ").append(esc(run.nemesis()))
                .append("</h1>\n<p class=\"").append(valid ? "ok\">VALID: every key's history is linearizable"
                        : result.verdict() == Verdict.VIOLATION ? "bad\">INVALID: a key's history is not linearizable"
                        : "unk\">UNDECIDED: the checker could not decide every key").append("</p>\n");
        h.append("<p>").append(run.nodes()).append(" nodes over ").append(esc(run.transport())).append(", ")
                .append(run.clients()).append(" client threads per node, ").append(run.keys()).append(" keys, ")
                .append(run.durationSeconds()).append(" s, seed ").append(run.seed()).append(". Replay: <code>")
                .append(esc(run.commandLine())).append("</code></p>\n");
        h.append("<p>Operations: ").append(history.operations().size()).append(" &mdash; ok ")
                .append(all.get(Outcome.OK)).append(", fail ").append(all.get(Outcome.FAIL))
                .append(", indeterminate ").append(all.get(Outcome.INFO))
                .append(" (a timeout or a lost node: it may or may not have taken effect, and the checker allows both)."
                        + " Checked by the dsm-testkit <code>LinearizabilityChecker</code> (Wing &amp; Gong search with"
                        + " Lowe's memoisation), each key on its own.</p>\n");
        h.append("<h2>Verdict per key</h2>\n<table><tr><th>key</th><th>verdict</th><th>ok</th><th>fail</th>"
                + "<th>indeterminate</th><th>search steps</th><th class=\"l\">explanation</th></tr>\n");
        for (String key : keyOrder) {
            KeyResult k = result.keys().get(key);
            Map<Outcome, Integer> c = count(byKey.get(key));
            String cls = switch (k.verdict()) {
                case LINEARIZABLE -> "ok";
                case VIOLATION -> "bad";
                default -> "unk";
            };
            h.append("<tr><td>").append(esc(key)).append("</td><td class=\"").append(cls).append("\">")
                    .append(k.verdict()).append("</td><td>").append(c.get(Outcome.OK)).append("</td><td>")
                    .append(c.get(Outcome.FAIL)).append("</td><td>").append(c.get(Outcome.INFO)).append("</td><td>")
                    .append(k.steps()).append("</td><td class=\"l\">")
                    .append(k.verdict() == Verdict.LINEARIZABLE ? "" : esc(k.explanation())).append("</td></tr>\n");
        }
        h.append("</table>\n<h2>Latency</h2>\n<p>Each dot is one operation: when it was invoked (x) and how long it "
                + "took (y, log scale); green ok, red failed (certainly without effect), yellow indeterminate (drawn "
                + "until its caller gave up, or the end of the run when its process died). Shaded bands are the faults "
                + "below.</p>\n<img src=\"latency.png\" width=\"1000\">\n");
        h.append("<h2>Throughput</h2>\n<img src=\"throughput.png\" width=\"1000\">\n");
        h.append("<h2>Faults</h2>\n");
        if (history.faults().isEmpty()) {
            h.append("<p>none</p>\n");
        } else {
            h.append("<table><tr><th>fault</th><th>from (s)</th><th>to (s)</th><th class=\"l\">targets</th></tr>\n");
            for (FaultWindow w : history.faults()) {
                h.append(String.format(Locale.ROOT, "<tr><td class=\"l\">%s</td><td>%.2f</td><td>%.2f</td>"
                        + "<td class=\"l\">%s</td></tr>%n", esc(w.kind()), w.startNanos() / 1e9, w.endNanos() / 1e9,
                        esc(w.targets())));
            }
            h.append("</table>\n");
        }
        h.append("<h2>Histories</h2>\n<p>One file per node process in <a href=\"history/\">history/</a>, a line per "
                + "event: <code>process type f key a b nanos</code>.</p>\n</body></html>\n");
        return h.toString();
    }

    private static String esc(String s) {
        return s == null ? "" : s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
                .replace("\"", "&quot;");
    }
}
