package io.cepheus.flinkcep.flink;

import io.cepheus.flinkcep.event.Event;
import io.cepheus.flinkcep.model.CaseSpec;
import io.cepheus.flinkcep.results.CaseResult;

import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.cep.nfa.NFA;
import org.apache.flink.cep.nfa.NFAState;
import org.apache.flink.cep.nfa.aftermatch.AfterMatchSkipStrategy;
import org.apache.flink.cep.nfa.compiler.NFACompiler;
import org.apache.flink.cep.nfa.sharedbuffer.SharedBuffer;
import org.apache.flink.cep.nfa.sharedbuffer.SharedBufferAccessor;
import org.apache.flink.cep.pattern.Pattern;
import org.apache.flink.cep.utils.TestSharedBuffer;
import org.apache.flink.cep.utils.TestTimerService;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;

import java.util.Collection;
import java.util.List;
import java.util.Map;

/**
 * The {@code nfa_harness} driver: one NFA, no operator, no keys, exactly as Flink's newer
 * {@code NFATestHarness.consumeRecord}: per event, in list order,
 * {@code advanceTime(ts)} then {@code process(event, ts)} within one SharedBufferAccessor; no
 * flush at the end. The SharedBuffer is Flink's {@code TestSharedBuffer} (java collections behind
 * the state API) and the timer service its {@code TestTimerService}, as in Flink's tests.
 *
 * <p>Matches released by advanceTime (pending notFollowedBy-at-end matches) are recorded with
 * {@code via: time}, before that event's {@code via: event} matches, because advanceTime runs
 * first. (Flink's harness appends them after the process() results; only the order of the list
 * differs.) Timed-out partial matches (advanceTime's f1) are recorded when the case sets
 * {@code timeout_handling}, which also compiles the NFA with timeout handling, as
 * {@code NFATestHarness.withTimeoutHandling()} does.
 */
public final class NfaHarnessDriver {
    private NfaHarnessDriver() {}

    public static void run(CaseSpec c, Pattern<Event, ?> pattern, List<Event> events, List<String> stageOrder,
            CaseResult result) throws Exception {
        NFA<Event> nfa = NFACompiler.compileFactory(pattern, c.timeoutHandling()).createNFA();
        NFAState state = nfa.createInitialNFAState();
        SharedBuffer<Event> buffer = TestSharedBuffer.createTestBuffer(Events.serializer());
        TestTimerService timerService = new TestTimerService();
        AfterMatchSkipStrategy skip = pattern.getAfterMatchSkipStrategy();

        int step = -1;
        for (Event e : events) {
            step++;
            result.currentStep = step;
            // A record without a timestamp reports Long.MIN_VALUE, like StreamRecord.getTimestamp().
            StreamRecord<Event> rec = Events.record(e);
            long ts = rec.getTimestamp();
            try (SharedBufferAccessor<Event> accessor = buffer.getAccessor()) {
                Tuple2<Collection<Map<String, List<Event>>>, Collection<Tuple2<Map<String, List<Event>>, Long>>> adv =
                        nfa.advanceTime(accessor, state, ts, skip);
                for (Map<String, List<Event>> m : adv.f0) {
                    result.matches.add(new CaseResult.Match("time", ordered(m, stageOrder), step, null, null));
                }
                if (c.timeoutHandling()) {
                    for (Tuple2<Map<String, List<Event>>, Long> t : adv.f1) {
                        result.timeouts.add(new CaseResult.Timeout(ordered(t.f0, stageOrder), t.f1, step, null));
                    }
                }
                Collection<Map<String, List<Event>>> matches =
                        nfa.process(accessor, state, rec.getValue(), ts, skip, timerService);
                for (Map<String, List<Event>> m : matches) {
                    result.matches.add(new CaseResult.Match("event", ordered(m, stageOrder), step, null, null));
                }
            }
        }
    }

    private static java.util.LinkedHashMap<String, List<Integer>> ordered(
            Map<String, List<Event>> m, List<String> stageOrder) {
        return StageMaps.inStageOrder(StageMaps.toSeqs(m), stageOrder);
    }
}
