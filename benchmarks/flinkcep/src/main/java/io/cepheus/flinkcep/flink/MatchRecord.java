package io.cepheus.flinkcep.flink;

import io.cepheus.flinkcep.event.Event;

import java.io.Serializable;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A match or timed-out partial match as the operator emits it in these tests: stage names in
 * Flink's map order with the seqs of their events, and the context timestamp. Built inside the
 * PatternProcessFunction, so what the test harness copies (it may serialize its outputs) is a
 * plain value, not Flink's map of events. A Flink POJO and Serializable.
 */
public class MatchRecord implements Serializable {
    private static final long serialVersionUID = 1L;

    public String[] stages;
    public int[][] seqs;
    public long timestamp;
    /** The timer that woke the key when this was emitted (null: an element released it). */
    public Long wake;

    public MatchRecord() {}

    static MatchRecord of(Map<String, List<Event>> match, long timestamp) {
        MatchRecord r = new MatchRecord();
        r.stages = new String[match.size()];
        r.seqs = new int[match.size()][];
        int i = 0;
        for (Map.Entry<String, List<Event>> e : match.entrySet()) {
            r.stages[i] = e.getKey();
            r.seqs[i] = e.getValue().stream().mapToInt(ev -> ev.seq).toArray();
            i++;
        }
        r.timestamp = timestamp;
        r.wake = OperatorHarnessDriver.WakingCepOperator.WAKE.get();
        return r;
    }

    /** stage -> seqs in Flink's order. */
    LinkedHashMap<String, List<Integer>> toSeqs() {
        LinkedHashMap<String, List<Integer>> out = new LinkedHashMap<>();
        for (int i = 0; i < stages.length; i++) {
            out.put(stages[i], java.util.Arrays.stream(seqs[i]).boxed().toList());
        }
        return out;
    }
}
