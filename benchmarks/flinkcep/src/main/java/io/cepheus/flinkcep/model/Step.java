package io.cepheus.flinkcep.model;

/** One operator_harness call: exactly one of the fields is set. */
public record Step(Integer event, Long watermark, Long processingTime, boolean snapshotRestore) {}
