package io.membus.test.history;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** The small JSON subset histories need: objects, arrays, strings, numbers, booleans, null. Stateless. */
final class Json {
    private Json() {
    }

    static String write(Object v) {
        StringBuilder sb = new StringBuilder();
        write(v, sb);
        return sb.toString();
    }

    private static void write(Object v, StringBuilder sb) {
        if (v == null) {
            sb.append("null");
        } else if (v instanceof String s) {
            sb.append('"');
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                switch (c) {
                    case '"' -> sb.append("\\\"");
                    case '\\' -> sb.append("\\\\");
                    case '\n' -> sb.append("\\n");
                    case '\r' -> sb.append("\\r");
                    case '\t' -> sb.append("\\t");
                    default -> {
                        if (c < 0x20) {
                            sb.append(String.format("\\u%04x", (int) c));
                        } else {
                            sb.append(c);
                        }
                    }
                }
            }
            sb.append('"');
        } else if (v instanceof Long || v instanceof Integer || v instanceof Short || v instanceof Byte) {
            sb.append(((Number) v).longValue());
        } else if (v instanceof Number n) {
            double d = n.doubleValue();
            if (Double.isNaN(d) || Double.isInfinite(d)) {
                throw new IllegalArgumentException("JSON has no " + d);
            }
            String text = Double.toString(d);
            sb.append(text.contains(".") || text.contains("E") ? text : text + ".0");
        } else if (v instanceof Boolean b) {
            sb.append(b);
        } else if (v instanceof Map<?, ?> m) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : m.entrySet()) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                write(String.valueOf(e.getKey()), sb);
                sb.append(':');
                write(e.getValue(), sb);
            }
            sb.append('}');
        } else if (v instanceof List<?> l) {
            sb.append('[');
            for (int i = 0; i < l.size(); i++) {
                if (i > 0) {
                    sb.append(',');
                }
                write(l.get(i), sb);
            }
            sb.append(']');
        } else {
            throw new IllegalArgumentException("not a history value: " + v.getClass().getName()
                    + " (use Long, Double, String, Boolean, null or a List of those)");
        }
    }

    static Object read(String text) {
        Reader r = new Reader(text);
        Object v = r.value();
        r.skipSpace();
        if (r.at < text.length()) {
            throw new IllegalArgumentException("trailing text at " + r.at);
        }
        return v;
    }

    private static final class Reader {
        private final String s;
        private int at;

        Reader(String s) {
            this.s = s;
        }

        void skipSpace() {
            while (at < s.length() && Character.isWhitespace(s.charAt(at))) {
                at++;
            }
        }

        Object value() {
            skipSpace();
            if (at >= s.length()) {
                throw new IllegalArgumentException("unexpected end");
            }
            char c = s.charAt(at);
            if (c == '{') {
                at++;
                Map<String, Object> m = new LinkedHashMap<>();
                skipSpace();
                if (peek('}')) {
                    return m;
                }
                do {
                    skipSpace();
                    Object k = value();
                    if (!(k instanceof String key)) {
                        throw new IllegalArgumentException("object key is not a string at " + at);
                    }
                    skipSpace();
                    expect(':');
                    m.put(key, value());
                    skipSpace();
                } while (peek(','));
                expect('}');
                return m;
            } else if (c == '[') {
                at++;
                List<Object> l = new ArrayList<>();
                skipSpace();
                if (peek(']')) {
                    return l;
                }
                do {
                    l.add(value());
                    skipSpace();
                } while (peek(','));
                expect(']');
                return l;
            } else if (c == '"') {
                at++;
                StringBuilder sb = new StringBuilder();
                while (true) {
                    if (at >= s.length()) {
                        throw new IllegalArgumentException("unterminated string");
                    }
                    char ch = s.charAt(at++);
                    if (ch == '"') {
                        return sb.toString();
                    }
                    if (ch == '\\') {
                        char e = s.charAt(at++);
                        switch (e) {
                            case 'n' -> sb.append('\n');
                            case 'r' -> sb.append('\r');
                            case 't' -> sb.append('\t');
                            case 'u' -> {
                                sb.append((char) Integer.parseInt(s.substring(at, at + 4), 16));
                                at += 4;
                            }
                            default -> sb.append(e);
                        }
                    } else {
                        sb.append(ch);
                    }
                }
            } else if (s.startsWith("null", at)) {
                at += 4;
                return null;
            } else if (s.startsWith("true", at)) {
                at += 4;
                return Boolean.TRUE;
            } else if (s.startsWith("false", at)) {
                at += 5;
                return Boolean.FALSE;
            }
            int start = at;
            while (at < s.length() && "+-0123456789.eE".indexOf(s.charAt(at)) >= 0) {
                at++;
            }
            String num = s.substring(start, at);
            if (num.isEmpty()) {
                throw new IllegalArgumentException("unexpected '" + c + "' at " + start);
            }
            return num.contains(".") || num.contains("e") || num.contains("E") ? (Object) Double.parseDouble(num)
                    : (Object) Long.parseLong(num);
        }

        private boolean peek(char c) {
            if (at < s.length() && s.charAt(at) == c) {
                at++;
                return true;
            }
            return false;
        }

        private void expect(char c) {
            if (!peek(c)) {
                throw new IllegalArgumentException("expected '" + c + "' at " + at);
            }
        }
    }
}
