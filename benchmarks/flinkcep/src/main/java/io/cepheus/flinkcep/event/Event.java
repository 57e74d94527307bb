package io.cepheus.flinkcep.event;

import io.cepheus.flinkcep.expr.Record;

import java.io.Serializable;

/**
 * The conformance event, mirroring Flink's test {@code Event} (id, name, price) plus the case's
 * {@code ts} and a hidden {@code seq}.
 *
 * <p>{@code seq} is how results name events. Flink copies events (state snapshots, operator
 * output), so object identity cannot be relied on; the field travels with every copy. It is not
 * visible to conditions.
 *
 * <p>A Flink POJO (public no-arg constructor, public fields), so Flink's PojoSerializer handles it
 * and the {@link SubEvent} subclass. {@code equals}/{@code hashCode} are left as identity: nothing
 * in the NFA compares events by value, and value equality would make equal events
 * indistinguishable in the operator's buffers for no gain.
 */
public class Event implements Record, Serializable {
    private static final long serialVersionUID = 1L;

    public int seq;
    public int id;
    public String name;
    public double price;
    /** The case's timestamp; null when the Java record had none. */
    public Long ts;

    public Event() {}

    public Event(int seq, int id, String name, double price, Long ts) {
        this.seq = seq;
        this.id = id;
        this.name = name;
        this.price = price;
        this.ts = ts;
    }

    /** The {@code type} field of conditions: the Java class name of the event. */
    public String typeName() {
        return "Event";
    }

    @Override
    public Object field(String field) {
        switch (field) {
            case "id":
                return (long) id;
            case "name":
                return name;
            case "price":
                return price;
            case "ts":
                return ts;
            case "type":
                return typeName();
            case "volume":
                return null; // only SubEvent has a volume; plain events read nil
            default:
                throw new IllegalArgumentException("unknown field: " + field);
        }
    }

    @Override
    public String toString() {
        return typeName() + "{seq=" + seq + ", id=" + id + ", name=" + name + ", price=" + price
                + ", ts=" + ts + "}";
    }
}
