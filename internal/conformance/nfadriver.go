package conformance

import (
	"fmt"

	"github.com/cepheus-cep/cepheus/nfa"
)

// runNFA is the nfa_harness driver (Flink's NFATestHarness): one run, no
// keys; for each event in list order, AdvanceTime(ts) and then
// Process(event, ts). Nothing is flushed at the end. Matches released by
// AdvanceTime are "via time", those of Process "via event".
func runNFA(in *Input, n *nfa.NFA, r *Result) error {
	run := n.NewRun()
	var res nfa.Result
	for i := range in.Events {
		e := &in.Events[i]
		ev := e.toEvent()
		res.Reset()
		if err := run.AdvanceTime(ev.Time, &res); err != nil {
			return runError(i, fmt.Errorf("advance time to %d before event %d: %w", ev.Time, e.Seq, err))
		}
		r.collect(n, &res, ViaTime, i)
		res.Reset()
		if err := run.Process(ev, ev.Time, &res); err != nil {
			return runError(i, fmt.Errorf("process event %d: %w", e.Seq, err))
		}
		r.collect(n, &res, ViaEvent, i)
	}
	return nil
}

// collect appends the matches and timeouts of res, released at step.
func (r *Result) collect(n *nfa.NFA, res *nfa.Result, via string, step int) {
	for _, m := range res.Matches {
		r.Matches = append(r.Matches, MatchResult{Via: via, Stages: stageSeqs(n, m), Step: &step})
	}
	for _, t := range res.Timeouts {
		r.Timeouts = append(r.Timeouts, TimeoutResult{Stages: stageSeqs(n, t.Match), Timestamp: int64(t.At), Step: &step})
	}
}
