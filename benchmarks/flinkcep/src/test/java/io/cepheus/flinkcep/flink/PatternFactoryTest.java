package io.cepheus.flinkcep.flink;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;

import io.cepheus.flinkcep.CaseRunner;
import io.cepheus.flinkcep.event.Event;
import io.cepheus.flinkcep.model.CaseParser;
import io.cepheus.flinkcep.model.CaseSpec;
import io.cepheus.flinkcep.results.CaseResult;

import org.apache.flink.cep.pattern.Pattern;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.List;
import java.util.Optional;

/** End-to-end checks of features the transcribed cases do not cover (the generated-case extensions). */
class PatternFactoryTest {
    private static CaseSpec parse(String json) throws Exception {
        return CaseParser.parseCase(new ObjectMapper().readTree(json.replace('\'', '"')));
    }

    private static final String EVENTS = "'events': ["
            + "{'seq':1,'id':1,'name':'a','price':1.0,'ts':1,'type':'Event'},"
            + "{'seq':2,'id':1,'name':'b','price':1.0,'ts':2,'type':'Event'},"
            + "{'seq':3,'id':1,'name':'b','price':2.0,'ts':10,'type':'Event'},"
            + "{'seq':4,'id':1,'name':'b','price':3.0,'ts':12,'type':'Event'},"
            + "{'seq':5,'id':1,'name':'c','price':1.0,'ts':13,'type':'Event'}]";

    /** a b+ c with a 5 ms window on the loop (oneOrMore(Duration)). */
    private static String loopWindowCase(String driver, String extra) {
        return "{'id':'t','driver':'" + driver + "','pattern':{'skip':'noSkip','within_ms':null,'stages':["
                + "{'name':'a','contiguity':'begin','condition':'name == \\'a\\'','quantifier':null,'until':null},"
                + "{'name':'b','contiguity':'followedBy','condition':'name == \\'b\\'','until':null,"
                + "'quantifier':{'kind':'oneOrMore','min':1,'max':null,'optional':false,'greedy':false,"
                + "'inner':'relaxed','window_ms':5}},"
                + "{'name':'c','contiguity':'followedBy','condition':'name == \\'c\\'','quantifier':null,'until':null}]},"
                + EVENTS + extra + "}";
    }

    @Test
    void loopWindowUsesDurationOverloads() throws Exception {
        CaseSpec c = parse(loopWindowCase("nfa_harness", ""));
        Pattern<Event, ?> p = PatternFactory.build(c.pattern());
        assertEquals(Optional.of(Duration.ofMillis(5)), p.getPrevious().getTimes().getWindowSize());
        assertNull(CaseRunner.run(c).error);
    }

    @Test
    void timesWindowChangesMatches() throws Exception {
        // b{2,3} with times(2, 3, 5 ms): b@2 -> b@10 is 8 ms apart. What Flink 2.3 does here was
        // observed, not derived: the window only acts on some of the states NFACompiler expands
        // times() into, and here it removes every match.
        String times = "'kind':'times','min':2,'max':3";
        String base = loopWindowCase("nfa_harness", "").replace("'kind':'oneOrMore','min':1,'max':null", times);
        CaseResult without = CaseRunner.run(parse(base.replace(",'window_ms':5", "")));
        CaseResult with = CaseRunner.run(parse(base));
        assertNull(without.error);
        assertNull(with.error);
        assertEquals(List.of("{a=[1], b=[2, 3, 4], c=[5]}", "{a=[1], b=[2, 3], c=[5]}"), stages(without));
        assertEquals(List.of(), stages(with));
    }

    private static List<String> stages(CaseResult r) {
        return r.matches.stream().map(m -> m.stages().toString()).sorted().toList();
    }

    @Test
    void structuredComparatorOperator() throws Exception {
        String steps = ",'time_characteristic':'event_time','key_by':'id',"
                + "'event_comparator':{'field':'price','order':'desc'},"
                + "'operator_steps':[{'event':1},{'event':2},{'event':3},{'event':4},{'snapshot_restore':true},{'watermark':20}]";
        CaseResult r = CaseRunner.run(parse(loopWindowCase("operator_harness", steps)));
        assertNull(r.error);
        assertEquals(20L, r.output.get(r.output.size() - 1).watermark());
        assertTrue(r.matches.stream().allMatch(m -> m.via().equals("watermark")));
    }

    @Test
    void stageOrderFlattensGroups() throws Exception {
        CaseSpec c = parse("{'id':'g','driver':'nfa_harness','pattern':{'skip':'noSkip','stages':["
                + "{'name':'s','contiguity':'begin','condition':'true','quantifier':null,'until':null},"
                + "{'name':'(group)','contiguity':'followedBy','condition':null,'until':null,"
                + "'quantifier':{'kind':'times','min':2,'max':2,'optional':false,'greedy':false,'inner':'relaxed'},"
                + "'group':{'stages':[{'name':'x','contiguity':'begin','condition':'true','quantifier':null,'until':null},"
                + "{'name':'y','contiguity':'next','condition':'true','quantifier':null,'until':null}]}}]},"
                + "'events':[]}");
        assertEquals(List.of("s", "x", "y"), PatternFactory.stageOrder(c.pattern().stages()));
        assertNull(CaseRunner.run(c).error);
    }

    @Test
    void malformedPatternIsAnError() throws Exception {
        // until() on a non-looping stage: Flink's MalformedPatternException becomes the case error.
        CaseSpec c = parse("{'id':'m','driver':'nfa_harness','pattern':{'skip':'noSkip','stages':["
                + "{'name':'s','contiguity':'begin','condition':'true','quantifier':null,'until':'price > 1'}]},"
                + "'events':[]}");
        String err = CaseRunner.run(c).error;
        assertTrue(err != null && err.contains("MalformedPatternException"), err);
    }
    /** A single stage over EVENTS whose condition is 'name == a' and the given chain. */
    private static List<String> chained(String chain) throws Exception {
        CaseSpec c = parse("{'id':'c','driver':'nfa_harness','pattern':{'skip':'noSkip','stages':["
                + "{'name':'s','contiguity':'begin','condition':'name == \\'a\\'','chain':[" + chain + "],"
                + "'quantifier':null,'until':null}]}," + EVENTS + "}");
        CaseResult r = CaseRunner.run(c);
        assertNull(r.error);
        return stages(r);
    }

    @Test
    void chainAppliesWhereAndOrInOrder() throws Exception {
        // (name == a || price > 1.5) && ts > 5: only b@10 and b@12.
        assertEquals(List.of("{s=[3]}", "{s=[4]}"),
                chained("{'op':'or','expr':'price > 1.5'},{'op':'where','expr':'ts > 5'}"));
        // ((name == a) && ts > 5) || price > 2.5: only b@12.
        assertEquals(List.of("{s=[4]}"),
                chained("{'op':'where','expr':'ts > 5'},{'op':'or','expr':'price > 2.5'}"));
    }

    @Test
    void chainAfterTrueKeepsTheTrue() throws Exception {
        // true || name == c: every event, not only the c.
        CaseSpec c = parse("{'id':'t','driver':'nfa_harness','pattern':{'skip':'noSkip','stages':["
                + "{'name':'s','contiguity':'begin','condition':'true','chain':[{'op':'or','expr':'name == \\'c\\''}],"
                + "'quantifier':null,'until':null}]}," + EVENTS + "}");
        assertEquals(5, CaseRunner.run(c).matches.size());
    }

    @Test
    void stageWithinOnAnEarlierStage() throws Exception {
        // within(3 ms) on a, with b after it: Flink keeps the smallest window of the chain.
        CaseSpec c = parse("{'id':'w','driver':'nfa_harness','pattern':{'skip':'noSkip','stages':["
                + "{'name':'a','contiguity':'begin','condition':'name == \\'a\\'','quantifier':null,'until':null,'within_ms':3},"
                + "{'name':'b','contiguity':'followedByAny','condition':'name == \\'b\\'','quantifier':null,'until':null}]},"
                + EVENTS + "}");
        Pattern<Event, ?> p = PatternFactory.build(c.pattern());
        assertEquals(Optional.of(Duration.ofMillis(3)), p.getPrevious().getWindowSize());
        assertEquals(List.of("{a=[1], b=[2]}"), stages(CaseRunner.run(c)));
    }
}
