package io.cepheus.flinkcep.bench;

/**
 * One event of a benchmark workload: the columns of the data files written by {@code cepbench
 * gen} (internal/gen/workloads.go). A workload uses only some fields; the others stay null or 0.
 *
 * <p>A Flink POJO (public no-arg constructor, public fields), so Flink's PojoSerializer moves it
 * across the keyBy. {@code seq} is the 1-based row of the event in its data file: match
 * signatures name events by it on both engines.
 */
public class BenchEvent {
    public long seq;
    public long ts;
    public String customer;
    public String kind;
    public double amount;
    public String country;
    public String home;

    public BenchEvent() {}
}
