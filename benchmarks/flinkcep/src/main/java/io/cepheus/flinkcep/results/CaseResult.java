package io.cepheus.flinkcep.results;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;

/** What one case produced, in the shape of the results file (cepheus-conformance-results/v1). */
public final class CaseResult {
    /**
     * A match: what released it (event, time, watermark), stage -> seqs in stage order, the step
     * whose call released it, the operator's context timestamp (null in nfa_harness cases) and
     * the timer that woke the key (null when an element released it directly).
     */
    public record Match(String via, LinkedHashMap<String, List<Integer>> stages, int step, Long timestamp,
            Long wake) {}

    /** A timed-out partial match, the timestamp Flink reported with it, its step and wake timer. */
    public record Timeout(LinkedHashMap<String, List<Integer>> stages, long timestamp, int step, Long wake) {}

    /** One main-output item of an operator: a watermark, or a match flattened stage by stage. */
    public record OutputItem(Long watermark, List<Integer> match) {
        public static OutputItem watermark(long t) {
            return new OutputItem(t, null);
        }

        public static OutputItem match(List<Integer> seqs) {
            return new OutputItem(null, seqs);
        }
    }

    /** Error classes: the pattern was rejected before any input, or processing failed. */
    public static final String ERROR_COMPILE = "compile";
    public static final String ERROR_RUN = "run";

    public final List<Match> matches = new ArrayList<>();
    public final List<Timeout> timeouts = new ArrayList<>();
    /** The operator's main output; always empty for nfa_harness cases, as in Cepheus's Go runner. */
    public final List<OutputItem> output = new ArrayList<>();
    public final List<Integer> late = new ArrayList<>();
    public String error;
    /** ERROR_COMPILE or ERROR_RUN when error is set. */
    public String errorClass;
    /** The step whose call failed, for a run error (null when unknown). */
    public Integer errorStep;
    /** The step being run now: drivers set it before each call, so a failure knows its step. */
    public int currentStep = -1;
    /** For a case with several rules: one result per rule, in rule order. */
    public List<CaseResult> rules;
}
