package io.cepheus.flinkcep.model;

import java.util.List;

/** A case's pattern: stages, window, after-match skip strategy. */
public record PatternSpec(
        List<StageSpec> stages, Long withinMs, String withinType, String skip, boolean skipThrowOnMiss) {}
