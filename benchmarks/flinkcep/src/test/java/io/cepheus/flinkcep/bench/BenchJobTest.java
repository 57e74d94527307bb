package io.cepheus.flinkcep.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class BenchJobTest {
    /** The Go side's TestSignatureHash (benchmarks/workloads_test.go) pins the same value. */
    @Test
    void hashMatchesTheGoSide() throws Exception {
        List<String> sigs = new ArrayList<>(List.of("login=3;pays=4,5;over=9", "login=1;pays=2,6;over=7", "t1=10;t2=11"));
        assertEquals("f299a5e197e50f13", BenchJob.hash(sigs));
    }

    /** Signatures list the stages that took events, in pattern order, seqs in the order taken. */
    @Test
    void signaturesFromTheMatchBuffer() throws Exception {
        // Two matches over login, pays, over, tfa (tfa never takes an event).
        long[] buf = {1, 3, 2, 4, 5, 1, 9, 0, 1, 1, 2, 2, 6, 1, 7, 0};
        String got = BenchJob.signatureHash(buf, buf.length, 2, List.of("login", "pays", "over", "tfa"));
        assertEquals(BenchJob.hash(new ArrayList<>(List.of("login=3;pays=4,5;over=9", "login=1;pays=2,6;over=7"))), got);
    }

    /** In a workload of several rules (W4) a signature starts with the rule's name and a colon. */
    @Test
    void signaturesOfSeveralRules() {
        long[] buf = {1, 3, 1, 4, 1, 9};
        List<String> out = new ArrayList<>();
        BenchJob.signatures(buf, buf.length, 1, "chain_07:", List.of("login", "large", "foreign"), out);
        assertEquals(List.of("chain_07:login=3;large=4;foreign=9"), out);
    }

    /** W4's patterns: one per rule of benchmarks/workloads/w4.cep, named as there. */
    @Test
    void w4HasOnePatternPerRule() {
        Workloads.Spec spec = Workloads.get("W4");
        assertEquals(100, spec.patterns().size());
        assertEquals("chain_00", spec.ruleNames().get(0));
        assertEquals("chain_99", spec.ruleNames().get(99));
    }
}
