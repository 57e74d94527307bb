package io.cepheus.flinkcep.bench;

import org.apache.flink.cep.nfa.aftermatch.AfterMatchSkipStrategy;
import org.apache.flink.cep.pattern.Pattern;
import org.apache.flink.cep.pattern.conditions.IterativeCondition;
import org.apache.flink.cep.pattern.conditions.SimpleCondition;

import java.time.Duration;
import java.util.List;

/**
 * The benchmark workloads' patterns, written by hand with Flink's Pattern API as a Flink user
 * would. Each mirrors the ruleset benchmarks/workloads/*.cep of the same name stage for stage:
 * same stage names and order, same contiguity, quantifiers, window and skip strategy, and
 * conditions that compute the same thing (docs/rules.md gives the rule language's Flink
 * equivalents). Keep the two in step: the benchmark compares match counts and signature hashes,
 * so a difference shows up as a mismatch.
 */
final class Workloads {
    private Workloads() {}

    /**
     * A workload's patterns (one, or W4's hundred: the job runs one CEP operator per pattern, as
     * Flink users do), their rule names (empty for a workload of one rule; a W4 signature starts
     * with the rule's name and a colon), their stage names in pattern order (as in the ruleset;
     * signatures list stages in this order; the same for every pattern of a workload) and whether
     * it is keyed by customer (else unkeyed: Flink then runs CEP on one global key at
     * parallelism 1).
     */
    record Spec(List<Pattern<BenchEvent, ?>> patterns, List<String> ruleNames, List<String> stages, boolean keyed) {
        Spec(Pattern<BenchEvent, ?> pattern, List<String> stages, boolean keyed) {
            this(List.of(pattern), List.of(), stages, keyed);
        }
    }

    static Spec get(String name) {
        return switch (name) {
            case "W1" -> w1();
            case "W2-3" -> w2(3);
            case "W2-5" -> w2(5);
            case "W2-7" -> w2(7);
            case "W3" -> w3();
            case "W4", "W4-F" -> w4();
            default -> throw new IllegalArgumentException("no workload " + name);
        };
    }

    /**
     * benchmarks/workloads/w1.cep:
     *
     * <pre>
     * key customer
     * begin login where kind == "login_new_device"
     * followedBy large where kind == "payment" &amp;&amp; amount &gt; 100
     * followedBy foreign where kind == "payment" &amp;&amp; country != home
     * within 10m
     * skip pastLastEvent
     * </pre>
     */
    static Spec w1() {
        Pattern<BenchEvent, ?> p = Pattern.<BenchEvent>begin("login", AfterMatchSkipStrategy.skipPastLastEvent())
                .where(SimpleCondition.of(e -> "login_new_device".equals(e.kind)))
                .followedBy("large")
                .where(SimpleCondition.of(e -> "payment".equals(e.kind) && e.amount > 100))
                .followedBy("foreign")
                .where(SimpleCondition.of(e -> "payment".equals(e.kind) && !e.country.equals(e.home)))
                .within(Duration.ofMinutes(10));
        return new Spec(p, List.of("login", "large", "foreign"), true);
    }

    /**
     * benchmarks/workloads/w2-K.cep, K = 3, 5, 7 (unkeyed):
     *
     * <pre>
     * begin t1 where kind == "T1"
     * followedByAny t2 where kind == "T2"
     * ...
     * followedByAny tK where kind == "TK"
     * within 100ms
     * skip pastLastEvent
     * </pre>
     */
    static Spec w2(int k) {
        Pattern<BenchEvent, ?> p = Pattern.<BenchEvent>begin("t1", AfterMatchSkipStrategy.skipPastLastEvent())
                .where(kindIs("T1"));
        String[] stages = new String[k];
        stages[0] = "t1";
        for (int i = 2; i <= k; i++) {
            stages[i - 1] = "t" + i;
            p = p.followedByAny("t" + i).where(kindIs("T" + i));
        }
        return new Spec(p.within(Duration.ofMillis(100)), List.of(stages), false);
    }

    private static SimpleCondition<BenchEvent> kindIs(String kind) {
        return SimpleCondition.of(e -> kind.equals(e.kind));
    }

    /**
     * benchmarks/workloads/w3.cep:
     *
     * <pre>
     * key customer
     * begin login where kind == "login"
     * followedBy pays timesOrMore 2 where kind == "payment"
     * followedBy over where kind == "payment" &amp;&amp; sum(pays.amount) + amount &gt; 1000
     * notFollowedBy tfa where kind == "2fa"
     * within 1h
     * skip pastLastEvent
     * </pre>
     *
     * The rule language's {@code sum(pays.amount)} is the sum over
     * {@code ctx.getEventsForPattern("pays")}, in the order the loop took them (amounts are whole
     * numbers, so the sum is exact either way).
     */
    static Spec w3() {
        Pattern<BenchEvent, ?> p = Pattern.<BenchEvent>begin("login", AfterMatchSkipStrategy.skipPastLastEvent())
                .where(SimpleCondition.of(e -> "login".equals(e.kind)))
                .followedBy("pays")
                .where(SimpleCondition.of(e -> "payment".equals(e.kind)))
                .timesOrMore(2)
                .followedBy("over")
                .where(new IterativeCondition<BenchEvent>() {
                    @Override
                    public boolean filter(BenchEvent e, Context<BenchEvent> ctx) throws Exception {
                        if (!"payment".equals(e.kind)) {
                            return false;
                        }
                        double sum = 0;
                        for (BenchEvent pay : ctx.getEventsForPattern("pays")) {
                            sum += pay.amount;
                        }
                        return sum + e.amount > 1000;
                    }
                })
                .notFollowedBy("tfa")
                .where(SimpleCondition.of(e -> "2fa".equals(e.kind)))
                .within(Duration.ofHours(1));
        return new Spec(p, List.of("login", "pays", "over", "tfa"), true);
    }

    /** The countries of internal/gen's chain workload, in its order (benchmarks/w4.go). */
    private static final String[] COUNTRIES = {"DE", "FR", "US", "GB", "ES", "IT", "NL", "PL", "SE", "BR"};

    /** The number of rules of W4 (benchmarks.W4Rules). */
    static final int W4_RULES = 100;

    /**
     * benchmarks/workloads/w4.cep, generated by benchmarks/w4.go: rule {@code chain_NN} (NN = 00
     * to 99) is W1's with a threshold of 100 + 100 * (NN / 10) and a foreign country of
     * COUNTRIES[NN % 10]:
     *
     * <pre>
     * key customer
     * begin login where kind == "login_new_device"
     * followedBy large where kind == "payment" &amp;&amp; amount &gt; THRESHOLD
     * followedBy foreign where kind == "payment" &amp;&amp; country != home &amp;&amp; country == "COUNTRY"
     * within 10m
     * skip pastLastEvent
     * </pre>
     */
    static Spec w4() {
        List<Pattern<BenchEvent, ?>> patterns = new java.util.ArrayList<>();
        List<String> names = new java.util.ArrayList<>();
        for (int i = 0; i < W4_RULES; i++) {
            double threshold = 100 + 100 * (i / 10);
            String country = COUNTRIES[i % COUNTRIES.length];
            patterns.add(Pattern.<BenchEvent>begin("login", AfterMatchSkipStrategy.skipPastLastEvent())
                    .where(SimpleCondition.of(e -> "login_new_device".equals(e.kind)))
                    .followedBy("large")
                    .where(SimpleCondition.of(e -> "payment".equals(e.kind) && e.amount > threshold))
                    .followedBy("foreign")
                    .where(SimpleCondition.of(e -> "payment".equals(e.kind) && !e.country.equals(e.home)
                            && e.country.equals(country)))
                    .within(Duration.ofMinutes(10)));
            names.add(String.format(java.util.Locale.ROOT, "chain_%02d", i));
        }
        return new Spec(List.copyOf(patterns), List.copyOf(names), List.of("login", "large", "foreign"), true);
    }
}
