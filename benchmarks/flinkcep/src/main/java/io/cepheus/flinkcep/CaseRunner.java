package io.cepheus.flinkcep;

import io.cepheus.flinkcep.event.Event;
import io.cepheus.flinkcep.flink.Events;
import io.cepheus.flinkcep.flink.ExprConditions;
import io.cepheus.flinkcep.flink.NfaHarnessDriver;
import io.cepheus.flinkcep.flink.OperatorHarnessDriver;
import io.cepheus.flinkcep.flink.PatternFactory;
import io.cepheus.flinkcep.model.CaseSpec;
import io.cepheus.flinkcep.results.CaseResult;

import org.apache.flink.cep.nfa.compiler.NFACompiler;
import org.apache.flink.cep.pattern.Pattern;

import java.util.List;

/** Runs one case in isolation: anything thrown becomes the case's {@code error}. */
public final class CaseRunner {
    private CaseRunner() {}

    public static CaseResult run(CaseSpec c) {
        return run(c, new CaseResult());
    }

    /**
     * Runs c into result, so that a caller that gives up on a case (the per-case timeout) still
     * has what the case emitted so far and the step it was at.
     */
    public static CaseResult run(CaseSpec c, CaseResult result) {
        if (c.rules() != null) {
            // One CepOperator (or NFA) per rule over the same input, as Flink users run several
            // rules over one keyed stream.
            result.rules = new java.util.ArrayList<>();
            for (var p : c.rules()) {
                CaseResult sub = new CaseResult();
                result.rules.add(sub);
                run(c.withPattern(p), sub);
            }
            return result;
        }
        ExprConditions.resetErrors();
        Pattern<Event, ?> pattern;
        List<Event> events;
        List<String> stageOrder;
        try {
            // Everything Flink rejects before it sees an event: building the pattern and
            // compiling the NFA (which also checks the skip strategy's target).
            pattern = PatternFactory.build(c.pattern());
            NFACompiler.compileFactory(pattern, c.timeoutHandling());
            events = Events.fromSpecs(c.events());
            stageOrder = PatternFactory.stageOrder(c.pattern().stages());
        } catch (Throwable t) {
            result.error = describe(t);
            result.errorClass = CaseResult.ERROR_COMPILE;
            return result;
        }
        try {
            switch (c.driver()) {
                case "nfa_harness":
                    NfaHarnessDriver.run(c, pattern, events, stageOrder, result);
                    break;
                case "operator_harness":
                    OperatorHarnessDriver.run(c, pattern, events, stageOrder, result);
                    break;
                default:
                    throw new IllegalArgumentException("unknown driver: " + c.driver());
            }
        } catch (Throwable t) {
            // Keep what was emitted before the failure; the error says processing failed.
            result.error = describe(t);
            result.errorClass = CaseResult.ERROR_RUN;
            if (System.getenv("FLINKCEP_TRACE") != null) {
                t.printStackTrace(); // FLINKCEP_TRACE=1: the stack of every run error, on stderr
            }
            result.errorStep = result.currentStep >= 0 ? result.currentStep : null;
        }
        String lastCondError = ExprConditions.lastError();
        long condErrors = ExprConditions.resetErrors();
        if (condErrors > 0) {
            System.err.printf("flinkcep: %s: %d condition evaluation error(s) counted as false, e.g. %s%n",
                    c.id(), condErrors, lastCondError);
        }
        return result;
    }

    /** The exception's class and message, plus the root cause when it differs. */
    static String describe(Throwable t) {
        String msg = t.getClass().getName() + ": " + t.getMessage();
        Throwable root = t;
        while (root.getCause() != null && root.getCause() != root) {
            root = root.getCause();
        }
        if (root != t) {
            msg += " (cause: " + root.getClass().getName() + ": " + root.getMessage() + ")";
        }
        return msg;
    }
}
