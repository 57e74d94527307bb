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
        List<Step> operatorSteps) {}
