package io.membus.samples.stress;

import io.membus.test.history.FaultWindow;
import io.membus.test.history.History;
import io.membus.test.history.Operation;
import io.membus.test.history.Outcome;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

/**
 * Reads the node processes' history files ({@link Event} lines) back into one
 * {@link History} of the test kit: invocations paired with their completions by
 * process (a process runs one operation at a time), times moved onto the run's time
 * line, inputs and outputs in the form the kit's models take.
 *
 * <table>
 *   <caption>from event lines to the kit's operations</caption>
 *   <tr><th>line</th><th>operation</th></tr>
 *   <tr><td>read, ok a</td><td>{@code read} → a</td></tr>
 *   <tr><td>write a</td><td>{@code write}: a</td></tr>
 *   <tr><td>cas a b, ok 1 / ok 0</td><td>{@code cas}: [a, b] → true (swapped) / false (found another value)</td></tr>
 *   <tr><td>add a, ok b</td><td>{@code getAndAdd}: a → b</td></tr>
 *   <tr><td>get / poll, ok a</td><td>{@code get} / {@code poll} → a (-1: null)</td></tr>
 *   <tr><td>put / putIfAbsent a, ok b; remove, ok b</td><td>→ previous value b (-1: null)</td></tr>
 *   <tr><td>offer a, ok b</td><td>{@code offer}: a → b == 1</td></tr>
 *   <tr><td>tryAcquire, ok a; release a</td><td>→ token a (-1: null); {@code release}: a</td></tr>
 * </table>
 *
 * An operation whose process died before it completed is indeterminate, completing
 * at the end of the history.
 *
 * <p><b>Note:</b> stateless.
 */
final class HistoryLines {
    private HistoryLines() {
    }

    /**
     * Every {@code *.log} file of {@code folder}, as a history whose time 0 is
     * {@code originNanos} (a {@code System.nanoTime()}); a torn last line of a killed
     * writer is skipped.
     */
    static History read(Path folder, long originNanos, List<FaultWindow> faults) {
        List<Event> events = new ArrayList<>();
        try (Stream<Path> files = Files.list(folder)) {
            for (Path f : files.filter(p -> p.toString().endsWith(".log")).sorted().toList()) {
                for (String line : Files.readAllLines(f)) {
                    Event e = Event.parse(line);
                    if (e != null) {
                        events.add(e);
                    }
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read the histories in " + folder, e);
        }
        return toHistory(events, originNanos, faults);
    }

    static History toHistory(List<Event> unordered, long originNanos, List<FaultWindow> faults) {
        List<Event> events = new ArrayList<>(unordered);
        events.sort(Comparator.comparingLong(Event::nanos));
        long end = events.isEmpty() ? originNanos : events.get(events.size() - 1).nanos();
        Map<Long, Integer> processes = new HashMap<>();
        Map<Long, Event> open = new HashMap<>();
        List<Event[]> pairs = new ArrayList<>();
        for (Event e : events) {
            processes.computeIfAbsent(e.process(), p -> processes.size());
            if (e.isInvoke()) {
                Event previous = open.put(e.process(), e);
                if (previous != null) {
                    throw new IllegalStateException("process " + e.process() + " invoked " + e.f() + " while its "
                            + previous.f() + " was open: a client broke the one-operation-at-a-time rule");
                }
            } else {
                Event inv = open.remove(e.process());
                if (inv == null) {
                    throw new IllegalStateException("process " + e.process() + " completed " + e.f()
                            + " without an invocation");
                }
                pairs.add(new Event[]{inv, e});
            }
        }
        open.values().forEach(inv -> pairs.add(new Event[]{inv, null}));
        pairs.sort(Comparator.comparingLong(p -> p[0].nanos()));
        List<Operation> ops = new ArrayList<>(pairs.size());
        for (Event[] p : pairs) {
            ops.add(operation(ops.size(), processes.get(p[0].process()), p[0], p[1], originNanos, end));
        }
        return new History(ops, faults);
    }

    private static Long absentIsNull(long v) {
        return v == CollectionWorkloads.ABSENT ? null : v;
    }

    private static Operation operation(int id, int process, Event inv, Event done, long origin, long end) {
        Outcome outcome = done == null ? Outcome.INFO : switch (done.type()) {
            case OK -> Outcome.OK;
            case FAIL -> Outcome.FAIL;
            default -> Outcome.INFO;
        };
        String f = inv.f();
        Object input;
        Object output = null;
        switch (f) {
            case "read" -> {
                input = null;
                if (done != null) {
                    output = done.a();
                }
            }
            case "write" -> input = inv.a();
            case "cas" -> {
                input = List.of(inv.a(), inv.b());
                if (done != null) {
                    output = done.a() == 1;
                }
            }
            case "add" -> {
                f = "getAndAdd";
                input = inv.a();
                if (done != null) {
                    output = done.b();
                }
            }
            case "get", "poll" -> {
                input = null;
                if (done != null) {
                    output = absentIsNull(done.a());
                }
            }
            case "put", "putIfAbsent" -> {
                input = inv.a();
                if (done != null) {
                    output = absentIsNull(done.b());
                }
            }
            case "remove" -> {
                input = null;
                if (done != null) {
                    output = absentIsNull(done.b());
                }
            }
            case "offer" -> {
                input = inv.a();
                if (done != null) {
                    output = done.b() == 1;
                }
            }
            case "tryAcquire" -> {
                input = null;
                if (done != null) {
                    output = absentIsNull(done.a());
                }
            }
            case "release" -> input = inv.a();
            default -> throw new IllegalStateException("unknown operation in a history: " + inv.line());
        }
        long invoke = inv.nanos() - origin;
        long complete = (done == null ? end : done.nanos()) - origin;
        return new Operation(id, process, Integer.toString(inv.key()), f, input, output, outcome, invoke,
                Math.max(invoke, complete));
    }
}
