package io.cepheus.flinkcep.flink;

import io.cepheus.flinkcep.event.Event;
import io.cepheus.flinkcep.model.PatternSpec;
import io.cepheus.flinkcep.model.QuantifierSpec;
import io.cepheus.flinkcep.model.StageSpec;

import org.apache.flink.cep.nfa.aftermatch.AfterMatchSkipStrategy;
import org.apache.flink.cep.pattern.Pattern;
import org.apache.flink.cep.pattern.WithinType;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * Builds a Flink {@link Pattern} from a case's {@code pattern}, calling the public Pattern API the
 * way a hand-written Flink job would. Flink's own validation (MalformedPatternException and the
 * like) is left to fire: such a case is reported with an error.
 */
public final class PatternFactory {
    private PatternFactory() {}

    public static Pattern<Event, ?> build(PatternSpec spec) {
        Pattern<Event, Event> p = chain(spec.stages(), skipStrategy(spec));
        if (spec.withinMs() != null) {
            // within() goes on the last pattern of the chain, as in the Flink tests
            // (FLINK-16011: a window set elsewhere used to be ignored).
            WithinType type = spec.withinType() == null
                    ? WithinType.FIRST_AND_LAST
                    : WithinType.valueOf(spec.withinType());
            p = p.within(Duration.ofMillis(spec.withinMs()), type);
        }
        return p;
    }

    /** Stage names in pattern order, groups replaced by their inner stage names (depth first). */
    public static List<String> stageOrder(List<StageSpec> stages) {
        List<String> out = new ArrayList<>();
        for (StageSpec s : stages) {
            if (s.isGroup()) {
                out.addAll(stageOrder(s.group()));
            } else {
                out.add(s.name());
            }
        }
        return out;
    }

    static AfterMatchSkipStrategy skipStrategy(PatternSpec spec) {
        String skip = spec.skip() == null ? "noSkip" : spec.skip();
        AfterMatchSkipStrategy s;
        if (skip.equals("noSkip")) {
            s = AfterMatchSkipStrategy.noSkip();
        } else if (skip.equals("skipToNext")) {
            s = AfterMatchSkipStrategy.skipToNext();
        } else if (skip.equals("skipPastLastEvent")) {
            s = AfterMatchSkipStrategy.skipPastLastEvent();
        } else if (skip.startsWith("skipToFirst:")) {
            var first = AfterMatchSkipStrategy.skipToFirst(skip.substring("skipToFirst:".length()));
            return spec.skipThrowOnMiss() ? first.throwExceptionOnMiss() : first;
        } else if (skip.startsWith("skipToLast:")) {
            var last = AfterMatchSkipStrategy.skipToLast(skip.substring("skipToLast:".length()));
            return spec.skipThrowOnMiss() ? last.throwExceptionOnMiss() : last;
        } else {
            throw new IllegalArgumentException("unknown skip strategy: " + skip);
        }
        if (spec.skipThrowOnMiss()) {
            throw new IllegalArgumentException("skip_throw_on_miss needs skipToFirst/skipToLast, not " + skip);
        }
        return s;
    }

    /**
     * Builds one sequence of stages. {@code skip} is set only for the outermost sequence: Flink
     * takes the strategy from its begin(); inner group sequences use begin(name) without one.
     */
    private static Pattern<Event, Event> chain(List<StageSpec> stages, AfterMatchSkipStrategy skip) {
        Pattern<Event, Event> p = null;
        for (int i = 0; i < stages.size(); i++) {
            StageSpec st = stages.get(i);
            if (i == 0) {
                if (!"begin".equals(st.contiguity())) {
                    throw new IllegalArgumentException("first stage must have contiguity begin, not " + st.contiguity());
                }
                p = begin(st, skip);
            } else {
                p = append(p, st);
            }
            p = applyStage(p, st);
        }
        return p;
    }

    private static Pattern<Event, Event> begin(StageSpec st, AfterMatchSkipStrategy skip) {
        if (st.isGroup()) {
            Pattern<Event, Event> inner = chain(st.group(), null);
            return skip == null ? Pattern.begin(inner) : Pattern.begin(inner, skip);
        }
        return skip == null ? Pattern.<Event>begin(st.name()) : Pattern.<Event>begin(st.name(), skip);
    }

    private static Pattern<Event, Event> append(Pattern<Event, Event> p, StageSpec st) {
        if (st.isGroup()) {
            Pattern<Event, Event> inner = chain(st.group(), null);
            switch (st.contiguity()) {
                case "next":
                    return p.next(inner);
                case "followedBy":
                    return p.followedBy(inner);
                case "followedByAny":
                    return p.followedByAny(inner);
                default:
                    // Flink has no notNext(Pattern)/notFollowedBy(Pattern).
                    throw new IllegalArgumentException("a group stage cannot have contiguity " + st.contiguity());
            }
        }
        switch (st.contiguity()) {
            case "next":
                return p.next(st.name());
            case "followedBy":
                return p.followedBy(st.name());
            case "followedByAny":
                return p.followedByAny(st.name());
            case "notNext":
                return p.notNext(st.name());
            case "notFollowedBy":
                return p.notFollowedBy(st.name());
            default:
                throw new IllegalArgumentException("unknown contiguity: " + st.contiguity());
        }
    }

    /**
     * Condition and its chain, then quantifier, optional, inner contiguity, greedy, until, and the
     * stage's own window: Flink's usual order.
     */
    private static Pattern<Event, Event> applyStage(Pattern<Event, Event> p, StageSpec st) {
        boolean chained = !st.chain().isEmpty();
        if (st.condition() != null && !st.isGroup() && (chained || !st.condition().trim().equals("true"))) {
            // A bare "true" is how the cases write "no where() call"; leave the condition unset,
            // unless a chain follows: or(c) on a stage without a condition would make c the whole
            // condition, where the case means true || c.
            p = p.where(ExprConditions.of(st.condition()));
        }
        for (var c : st.chain()) {
            // On a group, where and or throw (GroupPattern supports neither): left to fire.
            p = c.op().equals("or") ? p.or(ExprConditions.of(c.expr())) : p.where(ExprConditions.of(c.expr()));
        }
        QuantifierSpec q = st.quantifier();
        boolean alreadyOptional = applyQuantifier(p, q);
        if (q.optional() && !alreadyOptional) {
            p = p.optional();
        }
        switch (q.inner() == null ? "relaxed" : q.inner()) {
            case "relaxed":
                break;
            case "consecutive":
                p = p.consecutive();
                break;
            case "allowCombinations":
                p = p.allowCombinations();
                break;
            default:
                throw new IllegalArgumentException("unknown inner contiguity: " + q.inner());
        }
        if (q.greedy()) {
            p = p.greedy();
        }
        if (st.until() != null) {
            p = p.until(ExprConditions.of(st.until()));
        }
        if (st.withinMs() != null) {
            WithinType type = st.withinType() == null
                    ? WithinType.FIRST_AND_LAST
                    : WithinType.valueOf(st.withinType());
            p = p.within(Duration.ofMillis(st.withinMs()), type);
        }
        return p;
    }

    /**
     * Applies the quantifier kind. Returns true when Flink already made the stage optional:
     * {@code times(0, n)} is Flink's own {@code optional() + times(1, n)}, and a second
     * optional() would throw "Optional already applied".
     */
    private static boolean applyQuantifier(Pattern<Event, Event> p, QuantifierSpec q) {
        Duration window = q.windowMs() == null ? null : Duration.ofMillis(q.windowMs());
        switch (q.kind()) {
            case "one":
                if (window != null) {
                    throw new IllegalArgumentException("window_ms needs a looping quantifier");
                }
                return false;
            case "oneOrMore":
                if (window == null) {
                    p.oneOrMore();
                } else {
                    p.oneOrMore(window);
                }
                return false;
            case "timesOrMore":
                if (window == null) {
                    p.timesOrMore(q.min());
                } else {
                    p.timesOrMore(q.min(), window);
                }
                return false;
            case "times":
                if (q.max() == null) {
                    throw new IllegalArgumentException("times needs max (use timesOrMore for unbounded)");
                }
                if (q.min() == q.max()) {
                    if (window == null) {
                        p.times(q.min());
                    } else {
                        p.times(q.min(), window);
                    }
                } else if (window == null) {
                    p.times(q.min(), q.max());
                } else {
                    p.times(q.min(), q.max(), window);
                }
                return q.min() == 0;
            default:
                throw new IllegalArgumentException("unknown quantifier kind: " + q.kind());
        }
    }
}
