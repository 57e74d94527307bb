package io.cepheus.flinkcep.model;

import java.util.List;

/**
 * One stage of a case's pattern. A group stage has {@code group} set (its inner stages) and no
 * condition. {@code chain} holds the conditions applied after {@code condition} (empty when none);
 * {@code withinMs}/{@code withinType} a window set on this stage itself (null when none).
 */
public record StageSpec(
        String name,
        String contiguity,
        String condition,
        List<ChainedCondition> chain,
        QuantifierSpec quantifier,
        String until,
        Long withinMs,
        String withinType,
        List<StageSpec> group) {

    public boolean isGroup() {
        return group != null;
    }
}
