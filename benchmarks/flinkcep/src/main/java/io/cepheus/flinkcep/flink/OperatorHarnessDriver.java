package io.cepheus.flinkcep.flink;

import io.cepheus.flinkcep.event.Event;
import io.cepheus.flinkcep.model.CaseSpec;
import io.cepheus.flinkcep.model.Step;
import io.cepheus.flinkcep.results.CaseResult;

import org.apache.flink.api.common.typeinfo.BasicTypeInfo;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.cep.EventComparator;
import org.apache.flink.cep.functions.PatternProcessFunction;
import org.apache.flink.cep.functions.TimedOutPartialMatchHandler;
import org.apache.flink.cep.nfa.compiler.NFACompiler;
import org.apache.flink.cep.operator.CepOperator;
import org.apache.flink.cep.pattern.Pattern;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.streaming.util.KeyedOneInputStreamOperatorTestHarness;
import org.apache.flink.util.Collector;
import org.apache.flink.util.OutputTag;

import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.runtime.state.VoidNamespaceSerializer;
import org.apache.flink.streaming.api.operators.InternalTimer;
import org.apache.flink.streaming.api.operators.InternalTimerService;

import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.Set;
import java.util.List;
import java.util.Map;
import java.util.Queue;

/**
 * The {@code operator_harness} driver: Flink's {@link CepOperator} in a
 * {@link KeyedOneInputStreamOperatorTestHarness} keyed by {@code Event.id} (heap state backend),
 * as CEPOperatorTest runs it, driven by the case's {@code operator_steps}.
 *
 * <p>A late-data side output tag is always set, so that every late element is observed (without
 * one Flink only counts them); it does not change the main output. With {@code timeout_handling}
 * the process function implements {@link TimedOutPartialMatchHandler} (which is also what makes
 * {@code CEP.pattern} compile the NFA with timeout handling) and writes timed-out partial matches
 * to a side output.
 *
 * <p>After every step the harness's main and side outputs are drained into the result, so the
 * output survives {@code snapshot_restore} (snapshot, close, new operator and harness,
 * initializeState(snapshot), open), which is how CEPOperatorTest restores.
 */
public final class OperatorHarnessDriver {
    private OperatorHarnessDriver() {}

    private static final OutputTag<Event> LATE =
            new OutputTag<>("late-data", TypeInformation.of(Event.class));
    private static final OutputTag<MatchRecord> TIMED_OUT =
            new OutputTag<>("timed-out", TypeInformation.of(MatchRecord.class));

    public static void run(CaseSpec c, Pattern<Event, ?> pattern, List<Event> events, List<String> stageOrder,
            CaseResult result) throws Exception {
        if (c.keyBy() != null && !c.keyBy().equals("id")) {
            throw new IllegalArgumentException("only key_by \"id\" is supported, not " + c.keyBy());
        }
        String tc = c.timeCharacteristic() == null ? "event_time" : c.timeCharacteristic();
        if (!tc.equals("event_time") && !tc.equals("processing_time")) {
            throw new IllegalArgumentException("unknown time_characteristic: " + tc);
        }
        if (c.operatorSteps() == null) {
            throw new IllegalArgumentException("operator_harness case without operator_steps");
        }
        Map<Integer, Event> bySeq = new HashMap<>();
        for (Event e : events) {
            bySeq.put(e.seq, e);
        }
        boolean processingTime = tc.equals("processing_time");
        OperatorFactory factory = new OperatorFactory(
                pattern, processingTime, EventComparators.of(c.eventComparator()), c.timeoutHandling());
        Drain drain = new Drain(result, stageOrder);

        KeyedOneInputStreamOperatorTestHarness<Integer, Event, MatchRecord> harness = factory.newHarness();
        long checkpointId = 0;
        String via = "time";
        // The latest processing-time clock of the case: every harness starts at 0
        // (AbstractStreamOperatorTestHarness sets its TestProcessingTimeService to 0), so a
        // first step to 0 moves no clock: elements that came before it were buffered at 0,
        // with their timer at 1 (narrow seed 4612 case 8970: a wake at that step fed them
        // before their timer, and before an element that came after it).
        long maxClock = 0;
        try {
            harness.open();
            int index = -1;
            for (Step step : c.operatorSteps()) {
                index++;
                result.currentStep = index;
                drain.step = index;
                if (step.event() != null) {
                    Event e = bySeq.get(step.event());
                    if (e == null) {
                        throw new IllegalArgumentException("operator step names unknown event seq " + step.event());
                    }
                    via = "event";
                    harness.processElement(Events.record(e));
                    drain.from(harness, via);
                } else if (step.watermark() != null) {
                    via = "watermark";
                    if (c.wakeEveryKey() && !processingTime) {
                        factory.current.wakeEveryKey(step.watermark(), false);
                    }
                    harness.processWatermark(step.watermark());
                    drain.from(harness, via);
                } else if (step.processingTime() != null) {
                    via = "time";
                    // Only a clock that moves past every earlier clock wakes every key: in
                    // processing time onProcessingTime drains all buffered elements, so a wake at
                    // a clock reached before (a clock set back after a restore) would feed
                    // elements buffered at that time before their own timer. Without a
                    // comparator nothing is buffered: reaching the latest clock again wakes
                    // every key too, as it fires a deadline passed since in Cepheus.
                    boolean again = c.eventComparator() == null && step.processingTime() == maxClock;
                    if (c.wakeEveryKey() && processingTime && (step.processingTime() > maxClock || again)) {
                        factory.current.wakeEveryKey(step.processingTime(), true);
                    }
                    maxClock = Math.max(maxClock, step.processingTime());
                    harness.setProcessingTime(step.processingTime());
                    drain.from(harness, via);
                } else if (step.snapshotRestore()) {
                    via = "time";
                    checkpointId++;
                    OperatorSubtaskState snapshot = harness.snapshot(checkpointId, checkpointId);
                    drain.from(harness, via);
                    harness.close();
                    drain.from(harness, via);
                    harness = factory.newHarness();
                    harness.setup();
                    harness.initializeState(snapshot);
                    harness.open();
                    drain.from(harness, via);
                } else {
                    throw new IllegalArgumentException("empty operator step");
                }
            }
        } catch (Exception e) {
            // What the failing call emitted before it threw is output too (Cepheus keeps it).
            drain.from(harness, via);
            throw e;
        } finally {
            harness.close();
        }
    }

    /**
     * Flink's CepOperator, observed: it records the timer that woke a key while the key fires
     * (MatchRecord.wake), and, for the wake_every_key counterfactual, can set a timer for every
     * key it has seen. Its matching is CepOperator's own.
     */
    static final class WakingCepOperator extends CepOperator<Event, Integer, MatchRecord> {
        private static final long serialVersionUID = 1L;
        /** The timer being fired on this thread, or null. */
        static final ThreadLocal<Long> WAKE = new ThreadLocal<>();

        private final Set<Integer> keys;
        private transient InternalTimerService<VoidNamespace> timers;

        WakingCepOperator(OperatorFactory f, PatternProcessFunction<Event, MatchRecord> fn, Set<Integer> keys) {
            super(Events.serializer(), f.processingTime, NFACompiler.compileFactory(f.pattern, f.timeoutHandling),
                    f.comparator, f.pattern.getAfterMatchSkipStrategy(), fn, LATE);
            this.keys = keys;
        }

        @Override
        public void open() throws Exception {
            super.open();
            // The same service CepOperator.open() made (services are kept by name).
            timers = getInternalTimerService("watermark-callbacks", VoidNamespaceSerializer.INSTANCE, this);
        }

        @Override
        public void processElement(StreamRecord<Event> element) throws Exception {
            keys.add(element.getValue().id);
            super.processElement(element);
        }

        @Override
        public void onEventTime(InternalTimer<Integer, VoidNamespace> timer) throws Exception {
            WAKE.set(timer.getTimestamp());
            try {
                super.onEventTime(timer);
            } finally {
                WAKE.remove();
            }
        }

        @Override
        public void onProcessingTime(InternalTimer<Integer, VoidNamespace> timer) throws Exception {
            WAKE.set(timer.getTimestamp());
            try {
                super.onProcessingTime(timer);
            } finally {
                WAKE.remove();
            }
        }

        /** Sets a timer at t for every key seen so far, in the order they were first seen. */
        void wakeEveryKey(long t, boolean processingTime) {
            for (Integer k : keys) {
                setCurrentKey(k);
                if (processingTime) {
                    timers.registerProcessingTimeTimer(VoidNamespace.INSTANCE, t);
                } else {
                    timers.registerEventTimeTimer(VoidNamespace.INSTANCE, t);
                }
            }
        }
    }

    /** Builds a fresh operator and harness with the same configuration (for restores). */
    private static final class OperatorFactory {
        /** Keys seen by this case's operators, across restores, in first-seen order. */
        private final Set<Integer> keys = new LinkedHashSet<>();
        /** The operator of the harness made last. */
        WakingCepOperator current;
        private final Pattern<Event, ?> pattern;
        private final boolean processingTime;
        private final EventComparator<Event> comparator;
        private final boolean timeoutHandling;

        OperatorFactory(Pattern<Event, ?> pattern, boolean processingTime, EventComparator<Event> comparator,
                boolean timeoutHandling) {
            this.pattern = pattern;
            this.processingTime = processingTime;
            this.comparator = comparator;
            this.timeoutHandling = timeoutHandling;
        }

        KeyedOneInputStreamOperatorTestHarness<Integer, Event, MatchRecord> newHarness() throws Exception {
            // CEP.pattern() compiles the NFA with timeout handling exactly when the function
            // implements TimedOutPartialMatchHandler.
            PatternProcessFunction<Event, MatchRecord> fn =
                    timeoutHandling ? new EmitWithTimeouts(TIMED_OUT) : new Emit();
            current = new WakingCepOperator(this, fn, keys);
            return new KeyedOneInputStreamOperatorTestHarness<>(current, new IdKey(), BasicTypeInfo.INT_TYPE_INFO);
        }
    }

    /** Moves what the harness emitted so far into the result. */
    private static final class Drain {
        private final CaseResult result;
        private final List<String> stageOrder;
        /** The step being drained. */
        int step;

        Drain(CaseResult result, List<String> stageOrder) {
            this.result = result;
            this.stageOrder = stageOrder;
        }

        void from(KeyedOneInputStreamOperatorTestHarness<Integer, Event, MatchRecord> h, String via) {
            Queue<Object> out = h.getOutput();
            Object o;
            while ((o = out.poll()) != null) {
                if (o instanceof Watermark w) {
                    result.output.add(CaseResult.OutputItem.watermark(w.getTimestamp()));
                } else if (o instanceof StreamRecord<?> r && r.getValue() instanceof MatchRecord m) {
                    var stages = StageMaps.inStageOrder(m.toSeqs(), stageOrder);
                    result.matches.add(new CaseResult.Match(via, stages, step, m.timestamp, m.wake));
                    result.output.add(CaseResult.OutputItem.match(StageMaps.flatten(stages)));
                } else {
                    System.err.println("flinkcep: ignoring operator output item " + o);
                }
            }
            Queue<StreamRecord<Event>> late = h.getSideOutput(LATE);
            StreamRecord<Event> lr;
            while (late != null && (lr = late.poll()) != null) {
                result.late.add(lr.getValue().seq);
            }
            Queue<StreamRecord<MatchRecord>> timedOut = h.getSideOutput(TIMED_OUT);
            StreamRecord<MatchRecord> tr;
            while (timedOut != null && (tr = timedOut.poll()) != null) {
                MatchRecord m = tr.getValue();
                result.timeouts.add(
                        new CaseResult.Timeout(StageMaps.inStageOrder(m.toSeqs(), stageOrder), m.timestamp, step, m.wake));
            }
        }
    }

    /** Keys by Event.id, like CepOperatorTestUtilities.TestKeySelector. */
    private static final class IdKey implements KeySelector<Event, Integer> {
        private static final long serialVersionUID = 1L;

        @Override
        public Integer getKey(Event e) {
            return e.id;
        }
    }

    /** Emits every match on the main output. */
    static class Emit extends PatternProcessFunction<Event, MatchRecord> {
        private static final long serialVersionUID = 1L;

        @Override
        public void processMatch(Map<String, List<Event>> match, Context ctx, Collector<MatchRecord> out) {
            out.collect(MatchRecord.of(match, ctx.timestamp()));
        }
    }

    /** Also receives timed-out partial matches, with ctx.timestamp() as their timestamp. */
    static final class EmitWithTimeouts extends Emit implements TimedOutPartialMatchHandler<Event> {
        private static final long serialVersionUID = 1L;
        private final OutputTag<MatchRecord> tag;

        EmitWithTimeouts(OutputTag<MatchRecord> tag) {
            this.tag = tag;
        }

        @Override
        public void processTimedOutMatch(Map<String, List<Event>> match, Context ctx) {
            ctx.output(tag, MatchRecord.of(match, ctx.timestamp()));
        }
    }
}
