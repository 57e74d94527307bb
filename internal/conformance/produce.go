package conformance

import (
	"context"
	"errors"
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
	if len(in.Rules) > 0 {
		return runRules(in, mode, r)
	}
	c, err := compileCase(in, mode)
	if err != nil {
		return &stepError{class: ErrorCompile, err: fmt.Errorf("build: %w", err)}
	}
	switch in.Driver {
	case DriverNFA:
		return runNFA(in, c.nfa, r)
	case DriverOperator:
		return runOperator(in, c, r)
	}
	return fmt.Errorf("unknown driver %q", in.Driver)
}

// runRules runs a case with several rules, each rule's result in
// r.Rules: an operator_harness case through one shared operator for all
// its rules (runShared), whose per-rule output is what one operator per
// rule gives (Flink runs one CepOperator per rule); an nfa_harness case
// with one NFA per rule.
func runRules(in *Input, mode Mode, r *Result) error {
	if in.Driver == DriverOperator {
		return runShared(in, mode, nil, r)
	}
	for k := range in.Rules {
		sub := in.Rule(k)
		r.Rules = append(r.Rules, RunCaseMode(&sub, mode))
	}
	return nil
}

// stepError is an error with its class and, for a run error, the step
// whose call failed.
type stepError struct {
	class string
	step  int
	err   error
}

func (e *stepError) Error() string { return e.err.Error() }
func (e *stepError) Unwrap() error { return e.err }

// runError is the error of step i.
func runError(i int, err error) error { return &stepError{class: ErrorRun, step: i, err: err} }

func errorResult(r *Result, err error) *Result {
	msg := err.Error()
	r.Error = &msg
	r.ErrorClass = ErrorRun
	var se *stepError
	if errors.As(err, &se) {
		r.ErrorClass = se.class
		if se.class == ErrorRun {
			r.ErrorStep = &se.step
		}
	}
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
