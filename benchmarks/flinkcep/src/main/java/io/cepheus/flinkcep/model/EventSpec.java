package io.cepheus.flinkcep.model;

/** One input event of a case; {@code ts} and {@code volume} may be null. */
public record EventSpec(int seq, int id, String name, double price, Long ts, String type, Double volume) {}
