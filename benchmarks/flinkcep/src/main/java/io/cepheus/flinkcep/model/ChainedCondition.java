package io.cepheus.flinkcep.model;

/**
 * One condition of a stage's {@code chain}: {@code op} is {@code where} (ANDed with everything
 * before it) or {@code or} (ORed with everything before it), as Flink's {@code where(c).or(c2)}.
 */
public record ChainedCondition(String op, String expr) {}
