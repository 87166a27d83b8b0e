package io.membus.samples.stress;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;

/**
 * The events of a stress run, read back from the node processes' history files and
 * paired into operations (an invocation and its completion, by process: a process
 * runs one operation at a time).
 *
 * <p><b>Note:</b> immutable once read.
 */
public final class History {

    /**
     * One operation.
     *
     * @param invoke     its invocation
     * @param completion its completion, or {@code null} when its process died first (unknown outcome)
     */
    public record Op(Event invoke, Event completion) {
        public Event.Type outcome() {
            return completion == null ? Event.Type.INFO : completion.type();
        }

        /** Latency in nanoseconds, or -1 without a completion. */
        public long latencyNanos() {
            return completion == null ? -1 : completion.nanos() - invoke.nanos();
        }
    }

    private final List<Event> events;
    private final List<Op> ops;

    private History(List<Event> events) {
        this.events = events;
        List<Op> paired = new ArrayList<>();
        Map<Long, Event> open = new HashMap<>();
        for (Event e : events) {
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
                paired.add(new Op(inv, e));
            }
        }
        open.values().forEach(inv -> paired.add(new Op(inv, null)));
        paired.sort(Comparator.comparingLong(o -> o.invoke().nanos()));
        this.ops = List.copyOf(paired);
    }

    /** Reads every {@code *.log} file of a folder; a torn last line (a killed writer) is skipped. */
    public static History read(Path folder) {
        List<Event> all = new ArrayList<>();
        try (Stream<Path> files = Files.list(folder)) {
            for (Path f : files.filter(p -> p.toString().endsWith(".log")).sorted().toList()) {
                for (String line : Files.readAllLines(f)) {
                    Event e = Event.parse(line);
                    if (e != null) {
                        all.add(e);
                    }
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read the histories in " + folder, e);
        }
        return of(all);
    }

    /** A history of these events, in any order (sorted here by time). */
    public static History of(List<Event> events) {
        List<Event> sorted = new ArrayList<>(events);
        sorted.sort(Comparator.comparingLong(Event::nanos));
        return new History(List.copyOf(sorted));
    }

    /** Every event, by time. */
    public List<Event> events() {
        return events;
    }

    /** Every operation, by invocation time. */
    public List<Op> ops() {
        return ops;
    }

    /** The events of each key, by time. */
    public Map<Integer, List<Event>> byKey() {
        Map<Integer, List<Event>> m = new TreeMap<>();
        for (Event e : events) {
            m.computeIfAbsent(e.key(), k -> new ArrayList<>()).add(e);
        }
        return m;
    }

    /** The first invocation's time, or 0. */
    public long startNanos() {
        return events.isEmpty() ? 0 : events.get(0).nanos();
    }
}
