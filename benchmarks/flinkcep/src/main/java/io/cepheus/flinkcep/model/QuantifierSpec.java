package io.cepheus.flinkcep.model;

/**
 * A stage's quantifier: kind one/times/timesOrMore/oneOrMore, min, max (null = unbounded),
 * optional, greedy, inner contiguity (relaxed/consecutive/allowCombinations) and the optional
 * per-loop gap window {@code window_ms}.
 */
public record QuantifierSpec(
        String kind, int min, Integer max, boolean optional, boolean greedy, String inner, Long windowMs) {

    public static final QuantifierSpec ONE = new QuantifierSpec("one", 1, 1, false, false, "relaxed", null);
}
