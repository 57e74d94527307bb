package io.cepheus.flinkcep.results;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;

/** What one case produced, in the shape of the results file (cepheus-conformance-results/v1). */
public final class CaseResult {
    /** A match: what released it (event, time, watermark) and stage -> seqs in stage order. */
    public record Match(String via, LinkedHashMap<String, List<Integer>> stages) {}

    /** A timed-out partial match and the timestamp Flink reported with it. */
    public record Timeout(LinkedHashMap<String, List<Integer>> stages, long timestamp) {}

    /** One main-output item of an operator: a watermark, or a match flattened stage by stage. */
    public record OutputItem(Long watermark, List<Integer> match) {
        public static OutputItem watermark(long t) {
            return new OutputItem(t, null);
        }

        public static OutputItem match(List<Integer> seqs) {
            return new OutputItem(null, seqs);
        }
    }

    public final List<Match> matches = new ArrayList<>();
    public final List<Timeout> timeouts = new ArrayList<>();
    /** The operator's main output; always empty for nfa_harness cases, as in Cepheus's Go runner. */
    public final List<OutputItem> output = new ArrayList<>();
    public final List<Integer> late = new ArrayList<>();
    public String error;
}
