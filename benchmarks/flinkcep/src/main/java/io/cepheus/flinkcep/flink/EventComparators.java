package io.cepheus.flinkcep.flink;

import com.fasterxml.jackson.databind.JsonNode;

import io.cepheus.flinkcep.event.Event;

import org.apache.flink.cep.EventComparator;

import java.util.Locale;

/**
 * The operator's tie-break for events with equal timestamps. Cases give it structured,
 * {@code {"field": "price", "order": "asc"}}, or (transcribed cases) as prose such as "price
 * ascending (ties on equal timestamp)", which is read for a field name and a direction.
 */
public final class EventComparators {
    private EventComparators() {}

    public static EventComparator<Event> of(JsonNode spec) {
        if (spec == null || spec.isNull()) {
            return null;
        }
        String field;
        boolean descending;
        if (spec.isObject()) {
            field = spec.path("field").asText(null);
            String order = spec.path("order").asText("asc").toLowerCase(Locale.ROOT);
            if (!order.equals("asc") && !order.equals("desc")) {
                throw new IllegalArgumentException("event_comparator order must be asc or desc: " + order);
            }
            descending = order.equals("desc");
        } else if (spec.isTextual()) {
            String prose = spec.asText().toLowerCase(Locale.ROOT);
            field = null;
            for (String f : new String[] {"price", "id", "name", "volume", "ts"}) {
                if (prose.contains(f)) {
                    field = f;
                    break;
                }
            }
            descending = prose.contains("desc");
            if (!descending && !prose.contains("asc")) {
                throw new IllegalArgumentException("event_comparator prose names no direction: " + spec.asText());
            }
        } else {
            throw new IllegalArgumentException("event_comparator must be a string or an object");
        }
        if (field == null) {
            throw new IllegalArgumentException("event_comparator names no known field: " + spec);
        }
        return new FieldComparator(field, descending);
    }

    /** Compares one field; nil sorts first. Serializable, as Flink ships it with the operator. */
    static final class FieldComparator implements EventComparator<Event> {
        private static final long serialVersionUID = 1L;
        private final String field;
        private final boolean descending;

        FieldComparator(String field, boolean descending) {
            this.field = field;
            this.descending = descending;
        }

        @Override
        @SuppressWarnings({"unchecked", "rawtypes"})
        public int compare(Event a, Event b) {
            Object x = a.field(field), y = b.field(field);
            int c;
            if (x == null || y == null) {
                c = x == null ? (y == null ? 0 : -1) : 1;
            } else if (x instanceof Number nx && y instanceof Number ny) {
                c = Double.compare(nx.doubleValue(), ny.doubleValue());
            } else {
                c = ((Comparable) x).compareTo(y);
            }
            return descending ? -c : c;
        }
    }
}
