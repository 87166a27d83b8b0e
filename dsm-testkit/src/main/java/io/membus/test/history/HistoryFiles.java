package io.membus.test.history;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Histories as JSON lines, one object per line: operations
 * ({@code {"type":"op","id":..,"process":..,"key":..,"f":..,"input":..,"output":..,
 * "outcome":"OK","invoke":..,"complete":..}}) and fault windows
 * ({@code {"type":"fault","kind":..,"targets":..,"start":..,"end":..}}). Values are
 * JSON numbers (read back as {@code Long}, or {@code Double} with a fraction),
 * strings, booleans, null and arrays of those. A saved history can be checked again
 * later, or by hand.
 *
 * <p><b>Note:</b> stateless; thread-safe.
 */
public final class HistoryFiles {
    private HistoryFiles() {
    }

    public static void write(History history, Path file) throws IOException {
        try (BufferedWriter w = Files.newBufferedWriter(file, StandardCharsets.UTF_8)) {
            for (Operation op : history.operations()) {
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("type", "op");
                m.put("id", (long) op.id());
                m.put("process", (long) op.process());
                m.put("key", op.key());
                m.put("f", op.f());
                m.put("input", op.input());
                m.put("output", op.output());
                m.put("outcome", op.outcome().name());
                m.put("invoke", op.invokeNanos());
                m.put("complete", op.completeNanos());
                w.write(Json.write(m));
                w.newLine();
            }
            for (FaultWindow f : history.faults()) {
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("type", "fault");
                m.put("kind", f.kind());
                m.put("targets", f.targets());
                m.put("start", f.startNanos());
                m.put("end", f.endNanos());
                w.write(Json.write(m));
                w.newLine();
            }
        }
    }

    /**
     * Reads a history written by {@link #write}.
     *
     * @throws IOException when the file cannot be read or a line is not a history record
     *                     (the message names the line)
     */
    public static History read(Path file) throws IOException {
        List<Operation> ops = new ArrayList<>();
        List<FaultWindow> faults = new ArrayList<>();
        try (BufferedReader r = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
            String line;
            int n = 0;
            while ((line = r.readLine()) != null) {
                n++;
                if (line.isBlank()) {
                    continue;
                }
                try {
                    @SuppressWarnings("unchecked")
                    Map<String, Object> m = (Map<String, Object>) Json.read(line);
                    if ("op".equals(m.get("type"))) {
                        ops.add(new Operation(((Long) m.get("id")).intValue(), ((Long) m.get("process")).intValue(),
                                (String) m.get("key"), (String) m.get("f"), m.get("input"), m.get("output"),
                                Outcome.valueOf((String) m.get("outcome")), (Long) m.get("invoke"),
                                (Long) m.get("complete")));
                    } else if ("fault".equals(m.get("type"))) {
                        faults.add(new FaultWindow((String) m.get("kind"), (String) m.get("targets"),
                                (Long) m.get("start"), (Long) m.get("end")));
                    } else {
                        throw new IllegalArgumentException("type=" + m.get("type"));
                    }
                } catch (RuntimeException e) {
                    throw new IOException(file + ":" + n + ": not a history record (" + e + "): " + line, e);
                }
            }
        }
        return new History(ops, faults);
    }
}
