package io.cepheus.flinkcep.flink;

import io.cepheus.flinkcep.event.Event;
import io.cepheus.flinkcep.expr.EvalException;
import io.cepheus.flinkcep.expr.Expr;

import org.apache.flink.cep.pattern.conditions.IterativeCondition;
import org.apache.flink.cep.pattern.conditions.SimpleCondition;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Flink conditions backed by an expr-lang expression. A condition that reads {@code ctx(...)}
 * becomes an {@link IterativeCondition}, any other a {@link SimpleCondition}, as a hand-written
 * Flink test would do.
 *
 * <p>A run-time evaluation error counts as false, matching Cepheus's Go engine (rules.Cond), and
 * is counted in {@link #ERRORS} so the runner can warn about it. The conditions hold only the
 * source string (Flink serializes conditions with the operator) and re-parse after
 * deserialization.
 */
public final class ExprConditions {
    /** Run-time evaluation errors since the last {@link #resetErrors()}; one case runs at a time. */
    public static final AtomicLong ERRORS = new AtomicLong();

    private static volatile String lastError;

    private ExprConditions() {}

    /** Compiles {@code source} (throws ExprException if it does not parse) into a Flink condition. */
    public static IterativeCondition<Event> of(String source) {
        Expr e = Expr.compile(source);
        return e.usesCtx() ? new Iterative(source) : new Simple(source);
    }

    public static long resetErrors() {
        lastError = null;
        return ERRORS.getAndSet(0);
    }

    public static String lastError() {
        return lastError;
    }

    private static boolean failed(EvalException e) {
        ERRORS.incrementAndGet();
        lastError = e.getMessage();
        return false;
    }

    /** A condition on the event alone. */
    static final class Simple extends SimpleCondition<Event> {
        private static final long serialVersionUID = 1L;
        private final String source;
        private transient Expr expr;

        Simple(String source) {
            this.source = source;
        }

        @Override
        public boolean filter(Event value) {
            if (expr == null) {
                expr = Expr.compile(source);
            }
            try {
                return expr.test(value, null);
            } catch (EvalException e) {
                return failed(e);
            }
        }

        @Override
        public String toString() {
            return "where(" + source + ")";
        }
    }

    /** A condition that reads the current partial match through {@code ctx("X")}. */
    static final class Iterative extends IterativeCondition<Event> {
        private static final long serialVersionUID = 1L;
        private final String source;
        private transient Expr expr;

        Iterative(String source) {
            this.source = source;
        }

        @Override
        public boolean filter(Event value, Context<Event> ctx) throws Exception {
            if (expr == null) {
                expr = Expr.compile(source);
            }
            try {
                return expr.test(value, stage -> {
                    List<Event> events = new ArrayList<>();
                    for (Event e : ctx.getEventsForPattern(stage)) {
                        events.add(e);
                    }
                    return events;
                });
            } catch (EvalException e) {
                return failed(e);
            }
        }

        @Override
        public String toString() {
            return "where(" + source + ")";
        }
    }
}
