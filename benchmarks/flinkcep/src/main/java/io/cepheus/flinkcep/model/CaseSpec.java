package io.cepheus.flinkcep.model;

import com.fasterxml.jackson.databind.JsonNode;

import java.util.List;

/**
 * The parts of a conformance case the runner may read. Deliberately has no expected_*,
 * compare_mode, comparison or notes: results must not depend on them.
 */
public record CaseSpec(
        String id,
        String driver,
        PatternSpec pattern,
        List<EventSpec> events,
        boolean timeoutHandling,
        String timeCharacteristic,
        String keyBy,
        /** Prose string or {"field", "order"} object; null when absent. */
        JsonNode eventComparator,
        List<Step> operatorSteps,
        /** Several rules over the same input (null for a one-pattern case, whose pattern is set). */
        List<PatternSpec> rules,
        /**
         * A counterfactual for the differential tester: before each watermark (or processing-time)
         * step, a timer at that time for every key seen so far, so that Flink wakes every key at
         * every time advance, as Cepheus wakes a key at every deadline.
         */
        boolean wakeEveryKey) {

    /** The same case with another pattern (one rule of a case with several). */
    public CaseSpec withPattern(PatternSpec p) {
        return new CaseSpec(id, driver, p, events, timeoutHandling, timeCharacteristic, keyBy, eventComparator,
                operatorSteps, null, wakeEveryKey);
    }
}
