package conformance

import (
	"fmt"

	"github.com/cepheus-cep/cepheus/cep"
	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/nfa"
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
