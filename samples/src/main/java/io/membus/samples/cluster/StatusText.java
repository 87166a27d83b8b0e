package io.membus.samples.cluster;

import io.membus.alloc.HeapUsage;
import io.membus.cluster.ClusterMessage;
import io.membus.cluster.ClusterMessage.MemberRow;
import io.membus.cluster.ClusterMessage.StatusReply;
import io.membus.cluster.NodeStatus;
import io.membus.core.SegmentDescriptor;

import java.util.List;
import java.util.Locale;

/**
 * How the {@code membus} command line prints what the library reports as data: a
 * node's status line ({@link NodeStatus}), the cluster table of {@code membus status}
 * ({@link StatusReply}), the heap-segment table ({@link HeapUsage}) and byte counts.
 *
 * <p><b>Note:</b> stateless; thread-safe.
 */
public final class StatusText {
    private StatusText() {
    }

    /** One line on a node's state, for a console. */
    public static String statusLine(NodeStatus s) {
        if (s.isDown()) {
            return String.format(Locale.ROOT, "node %d DOWN: %s", s.nodeId(), s.downReason());
        }
        return String.format(Locale.ROOT, "node %d UP | members %d %s | unreachable %d | segments %d (%s) | names %d"
                        + "%s | transport %s | incarnation %d | up %ds", s.nodeId(), s.members().size(), s.members(),
                s.unreachable(), s.segments(), human(s.exportedBytes()), s.names(),
                s.groups() == 0 ? "" : String.format(Locale.ROOT, " | groups %d (%s)", s.groups(),
                        s.groupsShort() == 0 ? "all ok" : s.groupsShort() + " short or not in sync"),
                s.transport() == null ? "-" : s.transport(), s.incarnation(), s.uptime().toSeconds());
    }

    /** {@code 64.0 MiB}-style size. */
    public static String human(long bytes) {
        if (bytes < 1024) {
            return bytes + " B";
        }
        String[] units = {"KiB", "MiB", "GiB", "TiB"};
        double v = bytes;
        int u = -1;
        while (v >= 1024 && u < units.length - 1) {
            v /= 1024;
            u++;
        }
        return String.format(Locale.ROOT, "%.1f %s", v, units[u]);
    }

    /** The heap segments as a table: one row per node and heap segment. */
    public static String heapTable(List<HeapUsage.SegmentUsage> segments) {
        StringBuilder b = new StringBuilder();
        b.append(String.format(Locale.ROOT, "%-5s %-4s %9s %7s %7s %7s %7s %7s %11s %11s %8s  %s%n", "node", "seg",
                "chunk", "chunks", "free", "small", "large", "used%", "blocks-used", "blocks-free", "objects",
                "owners"));
        for (HeapUsage.SegmentUsage s : segments) {
            if (s.problem() != null) {
                b.append(String.format(Locale.ROOT, "%-5d %-4d %s%n", s.nodeId(), s.segment(), s.problem()));
                continue;
            }
            b.append(String.format(Locale.ROOT, "%-5d %-4d %9s %7d %7d %7d %7d %6.1f%% %11d %11d %8d  %s%n",
                    s.nodeId(), s.segment(), chunkBytes(s.chunkSize()), s.chunks(), s.freeChunks(), s.smallChunks(),
                    s.largeChunks(), s.usedPercent(), s.blocksInUse(), s.blocksFree(), s.largeObjects(),
                    s.chunksByOwner()));
        }
        return b.toString();
    }

    /** {@link #heapTable(List)} of a usage reading. */
    public static String heapTable(HeapUsage usage) {
        return heapTable(usage.segments());
    }

    private static String chunkBytes(long n) {
        if (n >= (1 << 20) && n % (1 << 20) == 0) {
            return (n >> 20) + "MiB";
        }
        if (n >= 1024 && n % 1024 == 0) {
            return (n >> 10) + "KiB";
        }
        return n + "B";
    }

    /**
     * The replica-group table of {@code membus status} (docs/replication.md §1): one row per
     * group that is not served, short of copies or not all in sync; every group when
     * {@code all} ({@code --groups}). Empty when there is no row to show.
     */
    public static String groupTable(List<ClusterMessage.GroupRow> groups, boolean all) {
        StringBuilder b = new StringBuilder();
        for (ClusterMessage.GroupRow g : groups) {
            if (!all && !g.needsAttention()) {
                continue;
            }
            if (b.length() == 0) {
                b.append(String.format(Locale.ROOT, "%-12s %-8s %-7s %-16s %-14s %s%n", "group", "primary", "epoch",
                        "in-sync copies", "joining", "state"));
            }
            String segment = "segment " + g.groupText();
            b.append(String.format(Locale.ROOT, "%-12s %-8s %-7s %-16s %-14s %s", segment,
                    g.primary() == 0 ? "-" : "node " + g.primary(), g.epochText(), nodes(g.inSync()),
                    joining(g.joining()), state(g, segment)).stripTrailing()).append('\n');
        }
        return b.toString();
    }

    private static String nodes(List<Integer> nodes) {
        if (nodes.isEmpty()) {
            return "-";
        }
        StringBuilder b = new StringBuilder("node ");
        for (int i = 0; i < nodes.size(); i++) {
            b.append(i == 0 ? "" : ", ").append(nodes.get(i));
        }
        return b.toString();
    }

    private static String joining(List<ClusterMessage.JoiningCopy> joining) {
        if (joining.isEmpty()) {
            return "-";
        }
        StringBuilder b = new StringBuilder();
        for (ClusterMessage.JoiningCopy j : joining) {
            b.append(b.length() == 0 ? "" : ", ").append("node ").append(j.node())
                    .append(j.percent() < 0 ? "" : " (" + j.percent() + "%)");
        }
        return b.toString();
    }

    private static String state(ClusterMessage.GroupRow g, String segment) {
        return switch (g.state()) {
            case LOST -> "LOST: its primary and every in-sync copy died; its data is gone";
            case PROMOTING -> "promoting: its primary is gone, a copy takes over";
            case SERVING -> g.inSync().size() < g.backups()
                    ? segment + ": " + g.inSync().size() + " of " + g.backups() + " backups"
                            + (g.joining().isEmpty() ? "" : " (re-replicating)")
                    : "ok" + (g.note().isEmpty() ? "" : " (" + g.note() + ")");
        };
    }

    /** {@link #clusterTable(StatusReply, boolean)} listing only the groups that need attention. */
    public static String clusterTable(StatusReply reply) {
        return clusterTable(reply, false);
    }

    /**
     * A status reply as a table: one row per member (memory nodes and clients, with their
     * role), then totals, the replica groups (every one when {@code allGroups}, else those
     * not served, short of copies or not in sync), the heap segments and the channels.
     */
    public static String clusterTable(StatusReply reply, boolean allGroups) {
        StringBuilder sb = new StringBuilder();
        String header = String.format(Locale.ROOT, "%-5s %-6s %-40s %-8s %-11s %-9s %-22s %8s %12s",
                "node", "role", "member", "status", "reachable", "transport", "incarnation", "segments", "exported");
        sb.append(header).append('\n').append("-".repeat(header.length())).append('\n');
        long totalBytes = 0;
        int totalSegments = 0;
        int members = 0;
        int up = 0;
        int clients = 0;
        int clientsUp = 0;
        for (MemberRow m : reply.members()) {
            String node = m.nodeId() == 0 ? "-" : Integer.toString(m.nodeId());
            if (m.entry() != null) {
                long bytes = 0;
                for (SegmentDescriptor d : m.entry().segments()) {
                    bytes += d.size();
                }
                totalBytes += bytes;
                totalSegments += m.entry().segments().size();
                sb.append(String.format(Locale.ROOT, "%-5s %-6s %-40s %-8s %-11s %-9s %-22d %8d %12s%n", node,
                        m.role(), m.address(), m.status(), m.reachable() ? "yes" : "NO", m.entry().transport(),
                        m.entry().incarnation(), m.entry().segments().size(), human(bytes)));
            } else {
                sb.append(String.format(Locale.ROOT, "%-5s %-6s %-40s %-8s %-11s %-9s %-22s %8s %12s%n", node,
                        m.role(), m.address(), m.status(), m.reachable() ? "yes" : "NO", "-", "(no directory entry)",
                        "-", "-"));
            }
            boolean isUp = "Up".equals(m.status());
            if (m.isClient()) {
                clients++;
                clientsUp += isUp ? 1 : 0;
            } else {
                members++;
                up += isUp ? 1 : 0;
            }
        }
        sb.append('\n').append(String.format(Locale.ROOT, "%d members (%d Up)%s, %d segments, %s exported, %d names"
                        + " bound; answered by node %d; leader %s%n", members, up,
                clients == 0 ? "" : String.format(Locale.ROOT, ", %d client%s (%d Up)", clients, clients == 1 ? "" : "s",
                        clientsUp),
                totalSegments, human(totalBytes), reply.names(), reply.fromNode(),
                reply.leader().isEmpty() ? "-" : reply.leader()));
        if (!reply.groups().isEmpty()) {
            long attention = reply.groups().stream().filter(ClusterMessage.GroupRow::needsAttention).count();
            String table = groupTable(reply.groups(), allGroups);
            sb.append(String.format(Locale.ROOT, "%nreplica groups, as node %d sees them: %d, %s%n", reply.fromNode(),
                    reply.groups().size(), attention == 0 ? "every one served with its copies in sync"
                            + (allGroups ? "" : " (--groups lists them)")
                            : attention + " not served, short of copies or not in sync"
                            + (allGroups ? "" : " (--groups lists every group)")));
            sb.append(table);
        }
        if (!reply.heap().isEmpty() || !reply.heapProblem().isEmpty()) {
            sb.append("\nheap segments (global allocator), read by node ").append(reply.fromNode()).append(":\n")
                    .append(reply.heapProblem().isEmpty() ? heapTable(reply.heap()) : reply.heapProblem() + "\n");
        }
        if (!reply.channels().isEmpty()) {
            sb.append("\nmessage channels of node ").append(reply.fromNode()).append(":\n");
            sb.append(String.format(Locale.ROOT, "  %-7s %-24s %12s %12s %12s %12s %8s%n", "channel", "name",
                    "msgs in", "bytes in", "msgs out", "bytes out", "errors"));
            for (ClusterMessage.ChannelRow c : reply.channels()) {
                sb.append(String.format(Locale.ROOT, "  %-7d %-24s %12d %12d %12d %12d %8d%n", c.channel(), c.name(),
                        c.messagesIn(), c.bytesIn(), c.messagesOut(), c.bytesOut(), c.errors()));
            }
        }
        for (io.membus.cluster.StatusSection section : reply.sections()) {
            sb.append('\n').append(section.name()).append(" of node ").append(reply.fromNode()).append(":");
            if (section.name().equals("verbs")) { // a line per peer: node-2 -> "verbs=... latency p50=..."
                String transport = section.facts().getOrDefault("transport", "?");
                sb.append(" (").append(transport).append(", verbs that crossed a connection)\n");
                section.facts().forEach((k, v) -> {
                    if (!k.equals("transport")) {
                        sb.append("  to ").append(k.replace('-', ' ')).append(": ").append(v).append('\n');
                    }
                });
                if (section.facts().size() <= 1) {
                    sb.append("  none yet\n");
                }
                continue;
            }
            section.facts().forEach((k, v) -> sb.append(' ').append(k).append('=').append(v));
            sb.append('\n');
        }
        return sb.toString();
    }
}
