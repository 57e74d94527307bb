package io.cepheus.flinkcep.model;

import java.util.List;

/**
 * One stage of a case's pattern. A group stage has {@code group} set (its inner stages) and no
 * condition.
 */
public record StageSpec(
        String name,
        String contiguity,
        String condition,
        QuantifierSpec quantifier,
        String until,
        List<StageSpec> group) {

    public boolean isGroup() {
        return group != null;
    }
}
