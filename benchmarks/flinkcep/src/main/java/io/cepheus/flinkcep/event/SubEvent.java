package io.cepheus.flinkcep.event;

/** Flink's test {@code SubEvent}: an {@link Event} with a volume (conditions test {@code type}). */
public class SubEvent extends Event {
    private static final long serialVersionUID = 1L;

    public double volume;

    public SubEvent() {}

    public SubEvent(int seq, int id, String name, double price, Long ts, double volume) {
        super(seq, id, name, price, ts);
        this.volume = volume;
    }

    @Override
    public String typeName() {
        return "SubEvent";
    }

    @Override
    public Object field(String field) {
        return "volume".equals(field) ? (Object) volume : super.field(field);
    }

    @Override
    public String toString() {
        return super.toString() + "{volume=" + volume + "}";
    }
}
