package io.cepheus.flinkcep.expr;

import java.util.List;

/**
 * {@code ctx("X")}: the events stage X has already accepted in the current partial match, not
 * including the event under test (Flink's {@code Context.getEventsForPattern("X")}).
 */
@FunctionalInterface
public interface CtxLookup {
    List<? extends Record> eventsOf(String stage) throws Exception;
}
