package conformance

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/cepheus-cep/cepheus/nfa"
)

// Inputs returns the input part of each case, for [Produce].
func Inputs(cases []Case) []Input {
	in := make([]Input, len(cases))
	for i := range cases {
		in[i] = cases[i].Input
	}
	return in
}

// Produce runs every input in the default mode ([ModeText]) and returns the
// results by case id; see [ProduceMode].
func Produce(ctx context.Context, inputs []Input) *Results {
	return ProduceMode(ctx, inputs, ModeText)
}

// ProduceMode runs every input, its pattern compiled in the given mode, and
// returns the results by case id. It never fails: a case that cannot be
// built, fails or panics gets Result.Error set. Cases not run because ctx
// was cancelled get ctx's error.
func ProduceMode(ctx context.Context, inputs []Input, mode Mode) *Results {
	rs := &Results{Cases: make(map[string]*Result, len(inputs))}
	for i := range inputs {
		in := &inputs[i]
		if err := ctx.Err(); err != nil {
			rs.Cases[in.ID] = errorResult(&Result{}, err)
			continue
		}
		rs.Cases[in.ID] = RunCaseMode(in, mode)
	}
	return rs
}

// RunCase runs one case in the default mode ([ModeText]); see
// [RunCaseMode].
func RunCase(in *Input) *Result { return RunCaseMode(in, ModeText) }

// RunCaseMode runs one case with its driver, its pattern compiled in the
// given mode, and returns what the engine produced. A panic is recovered
// and reported as the case's error.
func RunCaseMode(in *Input, mode Mode) (r *Result) {
	r = &Result{}
	defer func() {
		if p := recover(); p != nil {
			errorResult(r, fmt.Errorf("panic: %v\n%s", p, debug.Stack()))
		}
	}()
	if err := runCase(in, mode, r); err != nil {
		errorResult(r, err)
	}
	return r
}

func runCase(in *Input, mode Mode, r *Result) error {
	c, err := compileCase(in, mode)
	if err != nil {
		return fmt.Errorf("build: %w", err)
	}
	switch in.Driver {
	case DriverNFA:
		return runNFA(in, c.nfa, r)
	case DriverOperator:
		return runOperator(in, c, r)
	}
	return fmt.Errorf("unknown driver %q", in.Driver)
}

func errorResult(r *Result, err error) *Result {
	msg := err.Error()
	r.Error = &msg
	return r
}

// stageSeqs converts a match to its stages in pattern order, leaving out
// stages without events.
func stageSeqs(n *nfa.NFA, m nfa.Match) StageSeqs {
	out := StageSeqs{}
	for i, name := range n.Stages() {
		if i >= len(m.Events) || len(m.Events[i]) == 0 {
			continue
		}
		seqs := make([]uint64, len(m.Events[i]))
		for j, e := range m.Events[i] {
			seqs[j] = e.Seq
		}
		out = append(out, StageEvents{Stage: name, Seqs: seqs})
	}
	return out
}
