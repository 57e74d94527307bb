package cep

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/nfa"
	"github.com/cepheus-cep/cepheus/rules"
)

// TestDataDriven runs the scripts of testdata (github.com/cockroachdb/datadriven
// format; go test ./cep -run TestDataDriven -rewrite regenerates the expected
// outputs) through an Operator or a SharedOperator. Commands:
//
//	ruleset                the input is a ruleset (rule language), compiled
//	                       by rules.Load; prints its rules or its errors
//	operator [rule=R]      a new Operator of rule R (default: the first),
//	shared [rules=(R,...)] or a SharedOperator of those rules (default:
//	                       all; rule ids are positions in the ruleset), keyed
//	                       by the first rule's key. Options of both: timeouts
//	                       (compile with nfa.WithTimeouts), limit=N
//	                       (MaxPartialMatches), buffer=N (MaxBufferedEvents),
//	                       processing (processing time); of shared:
//	                       compact=N (CompactEvery)
//	event                  the input is JSON events, one a line, decoded as
//	                       the ruleset's tests decode them; each gets the next
//	                       Seq (from 1 per operator) and goes to
//	                       ProcessElement with its event time
//	watermark T            ProcessWatermark(T); T is in ms, or max
//	time T                 SetProcessingTime(T)
//	snapshot               Snapshot, kept for restore
//	restore                the operator is replaced by one restored from the
//	                       last snapshot, with the same configuration
//	stats                  Stats (and, of shared, the cold keys)
//	add-rule R             (shared) AddRule; its id is its ruleset position
//	remove-rule R          (shared) RemoveRule
//
// The calls print the items they emitted, one a line, in order: a match
// or timeout as "match [rule] key=K stage:seq,seq ... at=T" (with "wake=T"
// when a timer released it), a late or overflowing element with its Seq,
// a forwarded watermark; then the call's error if any. The items of a
// SharedOperator's rules interleave in no promised order, so between two
// items for every rule they are printed by rule id, each rule's in order.
//
// testdata holds the fuzz corpus too (fuzz/), so the files are globbed
// rather than walked.
func TestDataDriven(t *testing.T) {
	paths, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no test files testdata/*.txt (%v)", err)
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			h := &ddHarness{}
			datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
				return h.run(t, d)
			})
		})
	}
}

// ddOperator is what the script drives of an Operator and a SharedOperator.
type ddOperator interface {
	ProcessElement(ev *event.Event, ts event.Time, out *Output) error
	ProcessWatermark(w event.Time, out *Output) error
	SetProcessingTime(t event.Time, out *Output) error
	Snapshot() ([]byte, error)
	Stats() Stats
}

// ddHarness is the state of one script.
type ddHarness struct {
	rs   *rules.Ruleset
	nfas []*nfa.NFA // by rule position, compiled as the operator's options say
	// rules are the positions of the rules the operator hosts (one for an
	// Operator, its rule).
	rules []int
	// single says the operator is an Operator, not a SharedOperator.
	single bool
	cfg    SharedConfig
	limit  int
	op     ddOperator
	seq    uint64
	snap   []byte
	out    Output
}

func (h *ddHarness) run(t *testing.T, d *datadriven.TestData) string {
	if d.Cmd == "ruleset" {
		rs, err := rules.Load("in.cep", []byte(d.Input+"\n"))
		if err != nil {
			var b strings.Builder
			if l, ok := err.(rules.ErrorList); ok {
				_ = l.Print(&b, false)
				return b.String()
			}
			return "error: " + err.Error()
		}
		h.rs, h.op = rs, nil
		var b strings.Builder
		for i, r := range rs.Rules {
			fmt.Fprintf(&b, "rule %d: %s, key %v, stages %v\n", i, r.Name, r.KeyFields, r.NFA.Stages())
		}
		return b.String()
	}
	if h.rs == nil {
		d.Fatalf(t, "%s before a ruleset", d.Cmd)
	}
	switch d.Cmd {
	case "operator", "shared":
		h.newOperator(t, d)
		return ""
	}
	if h.op == nil {
		d.Fatalf(t, "%s before an operator", d.Cmd)
	}
	h.out.Reset()
	var err error
	switch d.Cmd {
	case "event":
		for _, line := range strings.Split(d.Input, "\n") {
			ev, derr := h.rs.DecodeEvent([]byte(line))
			if derr != nil {
				d.Fatalf(t, "%s: %v", line, derr)
			}
			h.seq++
			ev.Seq = h.seq
			if err = h.op.ProcessElement(ev, ev.Time, &h.out); err != nil {
				break
			}
		}
	case "watermark":
		err = h.op.ProcessWatermark(h.timeArg(t, d), &h.out)
	case "time":
		err = h.op.SetProcessingTime(h.timeArg(t, d), &h.out)
	case "snapshot":
		if h.snap, err = h.op.Snapshot(); err != nil {
			return "error: " + err.Error()
		}
		return ""
	case "restore":
		if h.snap == nil {
			d.Fatalf(t, "restore without a snapshot")
		}
		h.restore(t, d)
		return h.stats()
	case "stats":
		return h.stats()
	case "add-rule", "remove-rule":
		so, ok := h.op.(*SharedOperator)
		if !ok {
			d.Fatalf(t, "%s needs a shared operator", d.Cmd)
		}
		i := h.ruleArg(t, d)
		if d.Cmd == "add-rule" {
			err = so.AddRule(SharedRule{ID: i, NFA: h.nfas[i], MaxPartialMatches: h.limit})
			if err == nil {
				h.rules = append(h.rules, i)
			}
		} else {
			err = so.RemoveRule(i)
			if err == nil {
				h.rules = slices.DeleteFunc(h.rules, func(r int) bool { return r == i })
			}
		}
		if err != nil {
			return "error: " + err.Error()
		}
		return ""
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	items := h.out.Items
	if !h.single {
		// The items of different rules interleave in no promised order:
		// between two items for every rule, each rule's items keep their
		// order and the rules go by id.
		for start := 0; start < len(items); start++ {
			end := start
			for end < len(items) && items[end].Rule != AllRules {
				end++
			}
			slices.SortStableFunc(items[start:end], func(a, b Item) int { return cmp.Compare(a.Rule, b.Rule) })
			start = end
		}
	}
	var b strings.Builder
	for _, it := range items {
		b.WriteString(h.item(it) + "\n")
	}
	if err != nil {
		fmt.Fprintf(&b, "error: %v\n", err)
	}
	return b.String()
}

func (h *ddHarness) newOperator(t *testing.T, d *datadriven.TestData) {
	h.single = d.Cmd == "operator"
	h.rules = nil
	if h.single {
		name := h.rs.Rules[0].Name
		d.MaybeScanArgs(t, "rule", &name)
		h.rules = []int{h.ruleIndex(t, d, name)}
	} else if arg, ok := d.Arg("rules"); ok {
		for _, name := range arg.Vals {
			h.rules = append(h.rules, h.ruleIndex(t, d, name))
		}
	} else {
		for i := range h.rs.Rules {
			h.rules = append(h.rules, i)
		}
	}
	h.nfas = make([]*nfa.NFA, len(h.rs.Rules))
	for i, r := range h.rs.Rules {
		h.nfas[i] = r.NFA
		if d.HasArg("timeouts") {
			n, err := nfa.Compile(r.Pattern, nfa.WithTimeouts())
			if err != nil {
				d.Fatalf(t, "rule %s: %v", r.Name, err)
			}
			h.nfas[i] = n
		}
	}
	first := h.rs.Rules[h.rules[0]]
	h.cfg = SharedConfig{Key: first.Key}
	if len(first.KeySlots) == 0 {
		h.cfg.Key = nil
	}
	if d.HasArg("processing") {
		h.cfg.TimeMode = ProcessingTime
	}
	h.limit = 0
	d.MaybeScanArgs(t, "limit", &h.limit)
	d.MaybeScanArgs(t, "buffer", &h.cfg.MaxBufferedEvents)
	if !h.single {
		d.MaybeScanArgs(t, "compact", &h.cfg.CompactEvery)
	}
	h.seq, h.snap = 0, nil
	var err error
	if h.single {
		h.op, err = NewOperator(h.operatorConfig())
	} else {
		h.op, err = NewSharedOperator(h.cfg, h.sharedRules()...)
	}
	if err != nil {
		d.Fatalf(t, "%v", err)
	}
}

func (h *ddHarness) operatorConfig() OperatorConfig {
	return OperatorConfig{
		NFA:               h.nfas[h.rules[0]],
		MaxPartialMatches: h.limit,
		Key:               h.cfg.Key,
		TimeMode:          h.cfg.TimeMode,
		MaxBufferedEvents: h.cfg.MaxBufferedEvents,
	}
}

func (h *ddHarness) sharedRules() []SharedRule {
	out := make([]SharedRule, len(h.rules))
	for i, r := range h.rules {
		out[i] = SharedRule{ID: r, NFA: h.nfas[r], MaxPartialMatches: h.limit}
	}
	return out
}

func (h *ddHarness) restore(t *testing.T, d *datadriven.TestData) {
	var err error
	if h.single {
		h.op, err = RestoreOperator(h.operatorConfig(), h.snap)
	} else {
		h.op, err = RestoreSharedOperator(h.cfg, h.sharedRules(), h.snap)
	}
	if err != nil {
		d.Fatalf(t, "restore: %v", err)
	}
}

func (h *ddHarness) ruleIndex(t *testing.T, d *datadriven.TestData, name string) int {
	for i, r := range h.rs.Rules {
		if r.Name == name {
			return i
		}
	}
	d.Fatalf(t, "no rule %q", name)
	return 0
}

// ruleArg returns the rule named by the command's one argument.
func (h *ddHarness) ruleArg(t *testing.T, d *datadriven.TestData) int {
	if len(d.CmdArgs) != 1 {
		d.Fatalf(t, "%s takes a rule name", d.Cmd)
	}
	return h.ruleIndex(t, d, d.CmdArgs[0].Key)
}

// timeArg returns the command's one argument, a time in milliseconds or
// max (event.MaxTime).
func (h *ddHarness) timeArg(t *testing.T, d *datadriven.TestData) event.Time {
	if len(d.CmdArgs) != 1 {
		d.Fatalf(t, "%s takes a time", d.Cmd)
	}
	if d.CmdArgs[0].Key == "max" {
		return event.MaxTime
	}
	ms, err := strconv.ParseInt(d.CmdArgs[0].Key, 10, 64)
	if err != nil {
		d.Fatalf(t, "%s: %v", d.Cmd, err)
	}
	return event.Time(ms)
}

// item formats one output item.
func (h *ddHarness) item(it Item) string {
	switch it.Kind {
	case ItemMatch, ItemTimeout:
		var b strings.Builder
		b.WriteString(it.Kind.String())
		if !h.single {
			b.WriteString(" " + h.rs.Rules[it.Rule].Name)
		}
		fmt.Fprintf(&b, " key=%q", string(it.Key))
		stages := h.nfas[it.Rule].Stages()
		if h.single {
			stages = h.nfas[h.rules[0]].Stages()
		}
		for i, evs := range it.Match.Events {
			if len(evs) == 0 {
				continue
			}
			seqs := make([]string, len(evs))
			for j, e := range evs {
				seqs[j] = strconv.FormatUint(e.Seq, 10)
			}
			fmt.Fprintf(&b, " %s:%s", stages[i], strings.Join(seqs, ","))
		}
		b.WriteString(" at=" + ddTime(it.At))
		if it.Woken {
			b.WriteString(" wake=" + ddTime(it.Wake))
		}
		return b.String()
	case ItemLate, ItemOverflow:
		return fmt.Sprintf("%s key=%q seq=%d at=%s", it.Kind, string(it.Key), it.Event.Seq, ddTime(it.At))
	case ItemWatermark:
		return "watermark " + ddTime(it.Watermark)
	}
	return fmt.Sprintf("item %v", it.Kind)
}

// stats prints the operator's Stats and, for a SharedOperator, how many
// keys it keeps cold (encoded).
func (h *ddHarness) stats() string {
	s := h.op.Stats()
	out := fmt.Sprintf("keys %d, buffered %d; matches %d, timeouts %d, late %d, overflow %d, dropped %d",
		s.Keys, s.BufferedEvents, s.Matches, s.Timeouts, s.Late, s.Overflow, s.DroppedPartialMatches)
	if so, ok := h.op.(*SharedOperator); ok {
		out += fmt.Sprintf("; cold %d", len(so.cold))
	}
	return out + "\n"
}

// ddTime formats a time in ms, event.MaxTime as max.
func ddTime(t event.Time) string {
	if t == event.MaxTime {
		return "max"
	}
	return strconv.FormatInt(int64(t), 10)
}
