package conformance

import (
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/cepheus-cep/cepheus/cep"
	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/nfa"
	"github.com/cepheus-cep/cepheus/runtime/state"
)

// runOperator is the operator_harness driver (Flink's CEPOperatorTest): the
// keyed CEP operator, driven by the case's operator_steps. Matches are
// recorded both in Matches (via "event", "watermark" or "time" after the
// call that released them) and in Output, with the forwarded watermarks.
func runOperator(in *Input, c *compiled, r *Result) error {
	n := c.nfa
	cfg, err := operatorConfig(in, c)
	if err != nil {
		return err
	}
	op, err := cep.NewOperator(cfg)
	if err != nil {
		return fmt.Errorf("new operator: %w", err)
	}
	// One event per seq, created once: the operator keeps pointers to them.
	events := make(map[uint64]*event.Event, len(in.Events))
	for i := range in.Events {
		events[in.Events[i].Seq] = in.Events[i].toEvent()
	}
	var out cep.Output
	for i, st := range in.OperatorSteps {
		out.Reset()
		kind, err := st.kind()
		if err != nil {
			return runError(i, fmt.Errorf("step %d: %w", i, err))
		}
		var via string
		switch kind {
		case stepEvent:
			ev, ok := events[*st.Event]
			if !ok {
				return runError(i, fmt.Errorf("step %d: no event with seq %d", i, *st.Event))
			}
			via, err = ViaEvent, op.ProcessElement(ev, ev.Time, &out)
		case stepWatermark:
			via, err = ViaWatermark, op.ProcessWatermark(event.Time(*st.Watermark), &out)
		case stepProcessingTime:
			via, err = ViaTime, op.SetProcessingTime(event.Time(*st.ProcessingTime), &out)
		case stepSnapshotRestore:
			op, err = snapshotRestore(op, cfg)
		}
		// What the call emitted before it failed is kept, as Flink's
		// harness keeps what it emitted.
		if cerr := r.collectOutput(n, &out, via, i); cerr != nil {
			return runError(i, fmt.Errorf("step %d: %w", i, cerr))
		}
		if err != nil {
			return runError(i, fmt.Errorf("step %d: %w", i, err))
		}
	}
	return nil
}

// The kinds of operator step.
const (
	stepEvent           = "event"
	stepWatermark       = "watermark"
	stepProcessingTime  = "processing_time"
	stepSnapshotRestore = "snapshot_restore"
)

// kind returns the one call s makes; a step must set exactly one field,
// and snapshot_restore must be true.
func (s *Step) kind() (string, error) {
	var kinds []string
	if s.Event != nil {
		kinds = append(kinds, stepEvent)
	}
	if s.Watermark != nil {
		kinds = append(kinds, stepWatermark)
	}
	if s.ProcessingTime != nil {
		kinds = append(kinds, stepProcessingTime)
	}
	if s.SnapshotRestore != nil {
		if !*s.SnapshotRestore {
			return "", fmt.Errorf("snapshot_restore must be true")
		}
		kinds = append(kinds, stepSnapshotRestore)
	}
	if len(kinds) != 1 {
		return "", fmt.Errorf("want exactly one of event, watermark, processing_time and snapshot_restore, got %v", kinds)
	}
	return kinds[0], nil
}

// operatorConfig is the operator configuration of a case: keyed by
// key_by (through c's key), in its time characteristic, with its
// comparator.
func operatorConfig(in *Input, c *compiled) (cep.OperatorConfig, error) {
	cfg := cep.OperatorConfig{NFA: c.nfa, Key: c.key}
	switch in.TimeCharacteristic {
	case "", "event_time":
		cfg.TimeMode = cep.EventTime
	case "processing_time":
		cfg.TimeMode = cep.ProcessingTime
	default:
		return cfg, fmt.Errorf("unknown time_characteristic %q", in.TimeCharacteristic)
	}
	less, err := parseComparator(in.EventComparator)
	if err != nil {
		return cfg, err
	}
	cfg.Less = less
	return cfg, nil
}

// snapshotRestore takes a snapshot of op and restores it into a new
// operator, as the Java harness does when it closes and reopens one.
func snapshotRestore(op *cep.Operator, cfg cep.OperatorConfig) (*cep.Operator, error) {
	snap, err := op.Snapshot()
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	restored, err := cep.RestoreOperator(cfg, snap)
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	return restored, nil
}

// collectOutput records the items of operator call step.
func (r *Result) collectOutput(n *nfa.NFA, out *cep.Output, via string, step int) error {
	for _, it := range out.Items {
		var wake *int64
		if it.Woken {
			w := int64(it.Wake)
			wake = &w
		}
		switch it.Kind {
		case cep.ItemMatch:
			st := stageSeqs(n, it.Match)
			at := int64(it.At)
			r.Matches = append(r.Matches, MatchResult{Via: via, Stages: st, Step: &step, Timestamp: &at, Wake: wake})
			r.Output = append(r.Output, OutputItem{Match: nonNil(st.Flat())})
		case cep.ItemTimeout:
			r.Timeouts = append(r.Timeouts, TimeoutResult{Stages: stageSeqs(n, it.Match), Timestamp: int64(it.At), Step: &step, Wake: wake})
		case cep.ItemLate:
			r.Late = append(r.Late, it.Event.Seq)
		case cep.ItemWatermark:
			w := int64(it.Watermark)
			r.Output = append(r.Output, OutputItem{Watermark: &w})
		default:
			return fmt.Errorf("unexpected operator output %v", it.Kind)
		}
	}
	return nil
}

// RuleChange changes the rules of a case with several rules between two
// of its operator steps, as a hot-load would: before step Step, the rules
// Remove (indexes into Input.Rules) leave the operator with their state,
// and the rules Add join it with none.
type RuleChange struct {
	Step   int
	Remove []int
	Add    []int
}

// RunCaseChanging runs an operator_harness case with several rules through
// one shared operator, with its rules changed by changes: a rule that some
// change adds is not hosted before it. Each rule's result holds what the
// rule emitted while it was hosted. A panic is recovered and reported as
// the case's error.
func RunCaseChanging(in *Input, mode Mode, changes []RuleChange) (r *Result) {
	r = &Result{}
	defer func() {
		if p := recover(); p != nil {
			errorResult(r, fmt.Errorf("panic: %v\n%s", p, debug.Stack()))
		}
	}()
	if err := runShared(in, mode, changes, r); err != nil {
		errorResult(r, err)
	}
	return r
}

// SharedCompactEvery is the CompactEvery of the shared operators that
// runShared makes (0: cep's default, under which the small cases never
// sweep). Tests of cold keys set it to 1: every element then sweeps.
var SharedCompactEvery int

// SharedStateRecords makes the snapshot_restore steps of runShared write
// the operator's state as records into one in-memory store, changed keys
// only (SharedOperator.SnapshotTo), and restore from the store
// (RestoreSharedOperatorFrom), instead of the one-blob Snapshot. Tests of
// the state records set it.
var SharedStateRecords bool

// runShared is the operator_harness driver of a case with several rules:
// one cep.SharedOperator hosts them all, and each rule's result is its
// share of the output (its matches and timeouts, and the late elements and
// watermarks of every rule), so that it is what runOperator gives for
// that rule alone. A rule whose run fails gets its error and is removed;
// the others go on, as Flink's one CepOperator per rule would.
func runShared(in *Input, mode Mode, changes []RuleChange, r *Result) error {
	r.Rules = make([]*Result, len(in.Rules))
	nfas := make([]*nfa.NFA, len(in.Rules))
	var cfg cep.SharedConfig
	haveCfg := false
	for k := range in.Rules {
		r.Rules[k] = &Result{}
		sub := in.Rule(k)
		c, err := compileCase(&sub, mode)
		if err != nil {
			errorResult(r.Rules[k], &stepError{class: ErrorCompile, err: fmt.Errorf("build: %w", err)})
			continue
		}
		oc, err := operatorConfig(&sub, c)
		if err != nil {
			errorResult(r.Rules[k], err)
			continue
		}
		nfas[k] = c.nfa
		if !haveCfg {
			cfg = cep.SharedConfig{Key: oc.Key, TimeMode: oc.TimeMode, Less: oc.Less, CompactEvery: SharedCompactEvery}
			haveCfg = true
		}
	}
	if !haveCfg {
		return nil
	}
	hosted := make([]bool, len(in.Rules))
	later := map[int]bool{}
	for _, ch := range changes {
		for _, k := range ch.Add {
			later[k] = true
		}
	}
	op, err := cep.NewSharedOperator(cfg)
	if err != nil {
		return fmt.Errorf("new operator: %w", err)
	}
	store := state.NewMem() // the case's state records (SharedStateRecords)
	for k, n := range nfas {
		if n != nil && !later[k] {
			if err := op.AddRule(cep.SharedRule{ID: k, NFA: n}); err != nil {
				return err
			}
			hosted[k] = true
		}
	}
	// failAll gives every hosted rule the error of step i.
	failAll := func(i int, err error) {
		for k := range hosted {
			if hosted[k] {
				errorResult(r.Rules[k], runError(i, fmt.Errorf("step %d: %w", i, err)))
			}
		}
	}
	events := make(map[uint64]*event.Event, len(in.Events))
	for i := range in.Events {
		events[in.Events[i].Seq] = in.Events[i].toEvent()
	}
	var out, share cep.Output
	for i, st := range in.OperatorSteps {
		for _, ch := range changes {
			if ch.Step != i {
				continue
			}
			for _, k := range ch.Remove {
				if hosted[k] {
					if err := op.RemoveRule(k); err != nil {
						return err
					}
					hosted[k] = false
				}
			}
			for _, k := range ch.Add {
				if nfas[k] != nil && !hosted[k] {
					if err := op.AddRule(cep.SharedRule{ID: k, NFA: nfas[k]}); err != nil {
						return err
					}
					hosted[k] = true
				}
			}
		}
		out.Reset()
		kind, err := st.kind()
		if err != nil {
			failAll(i, err)
			return nil
		}
		var via string
		switch kind {
		case stepEvent:
			ev, ok := events[*st.Event]
			if !ok {
				failAll(i, fmt.Errorf("no event with seq %d", *st.Event))
				return nil
			}
			via, err = ViaEvent, op.ProcessElement(ev, ev.Time, &out)
		case stepWatermark:
			via, err = ViaWatermark, op.ProcessWatermark(event.Time(*st.Watermark), &out)
		case stepProcessingTime:
			via, err = ViaTime, op.SetProcessingTime(event.Time(*st.ProcessingTime), &out)
		case stepSnapshotRestore:
			op, err = snapshotRestoreShared(op, cfg, nfas, store)
			if err != nil {
				failAll(i, err)
				return nil
			}
		}
		failed := map[int]error{}
		for _, e := range ruleErrors(err) {
			var re *cep.RuleError
			if !errors.As(e, &re) {
				failAll(i, err)
				return nil
			}
			failed[re.Rule] = re.Err
		}
		for k := range hosted {
			if !hosted[k] {
				continue
			}
			share.Reset()
			for _, it := range out.Items {
				// A rule's own operator does not forward the watermark of
				// the call it failed in.
				if it.Rule == k || it.Rule == cep.AllRules && (it.Kind != cep.ItemWatermark || failed[k] == nil) {
					share.Items = append(share.Items, it)
				}
			}
			if cerr := r.Rules[k].collectOutput(nfas[k], &share, via, i); cerr != nil {
				errorResult(r.Rules[k], runError(i, fmt.Errorf("step %d: %w", i, cerr)))
				failed[k] = cerr
				continue
			}
			if ferr := failed[k]; ferr != nil {
				errorResult(r.Rules[k], runError(i, fmt.Errorf("step %d: %w", i, ferr)))
			}
		}
		for k := range failed {
			if err := op.RemoveRule(k); err != nil {
				return err
			}
			hosted[k] = false
		}
	}
	return nil
}

// ruleErrors splits the errors of a SharedOperator call.
func ruleErrors(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// snapshotRestoreShared is snapshotRestore for a shared operator.
// With SharedStateRecords it goes through store, which every
// snapshot_restore step of the case writes into in turn.
func snapshotRestoreShared(op *cep.SharedOperator, cfg cep.SharedConfig, nfas []*nfa.NFA, store *state.Mem) (*cep.SharedOperator, error) {
	var rules []cep.SharedRule
	for _, id := range op.Rules() {
		rules = append(rules, cep.SharedRule{ID: id, NFA: nfas[id]})
	}
	if SharedStateRecords {
		if err := op.SnapshotTo(store, "shared"); err != nil {
			return nil, fmt.Errorf("snapshot: %w", err)
		}
		restored, err := cep.RestoreSharedOperatorFrom(cfg, rules, store.Snapshot(), "shared")
		if err != nil {
			return nil, fmt.Errorf("restore: %w", err)
		}
		return restored, nil
	}
	snap, err := op.Snapshot()
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	restored, err := cep.RestoreSharedOperator(cfg, rules, snap)
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	return restored, nil
}
