package io.cepheus.flinkcep.flink;

import io.cepheus.flinkcep.event.Event;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Turns Flink's {@code Map<stage, List<Event>>} into stage -> seq lists, keys in pattern stage
 * order (the results format requires it). Flink's own map is a LinkedHashMap in the order of the
 * match's path, which is the stage order; if it ever differs, the runner says so on stderr.
 */
public final class StageMaps {
    private StageMaps() {}

    public static LinkedHashMap<String, List<Integer>> toSeqs(Map<String, List<Event>> match) {
        LinkedHashMap<String, List<Integer>> out = new LinkedHashMap<>();
        for (Map.Entry<String, List<Event>> e : match.entrySet()) {
            List<Integer> seqs = new ArrayList<>(e.getValue().size());
            for (Event ev : e.getValue()) {
                seqs.add(ev.seq);
            }
            out.put(e.getKey(), seqs);
        }
        return out;
    }

    /**
     * Reorders {@code flinkOrder} by {@code stageOrder}, dropping empty stages; names not in the
     * pattern (should not happen) go last in Flink's order.
     */
    public static LinkedHashMap<String, List<Integer>> inStageOrder(
            Map<String, List<Integer>> flinkOrder, List<String> stageOrder) {
        LinkedHashMap<String, List<Integer>> out = new LinkedHashMap<>();
        for (String s : stageOrder) {
            List<Integer> seqs = flinkOrder.get(s);
            if (seqs != null && !seqs.isEmpty()) {
                out.put(s, seqs);
            }
        }
        for (Map.Entry<String, List<Integer>> e : flinkOrder.entrySet()) {
            if (!out.containsKey(e.getKey()) && !e.getValue().isEmpty()) {
                out.put(e.getKey(), e.getValue());
            }
        }
        if (!new ArrayList<>(out.keySet()).equals(nonEmptyKeys(flinkOrder))) {
            System.err.println("flinkcep: note: Flink's match key order " + flinkOrder.keySet()
                    + " differs from stage order " + out.keySet());
        }
        return out;
    }

    private static List<String> nonEmptyKeys(Map<String, List<Integer>> m) {
        List<String> keys = new ArrayList<>();
        m.forEach((k, v) -> {
            if (!v.isEmpty()) {
                keys.add(k);
            }
        });
        return keys;
    }

    public static List<Integer> flatten(Map<String, List<Integer>> stages) {
        List<Integer> out = new ArrayList<>();
        stages.values().forEach(out::addAll);
        return out;
    }
}
