package cep

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/event/jsonev"
	"github.com/cepheus-cep/cepheus/nfa"
	"github.com/cepheus-cep/cepheus/rules"
	"github.com/cepheus-cep/cepheus/runtime"
)

// BacktestConfig configures [Backtest]: a ruleset replayed over a bounded
// input with the live operator and watermark strategy (docs/decisions.md,
// "Backtest semantics").
type BacktestConfig struct {
	// Ruleset is the compiled ruleset; required.
	Ruleset *rules.Ruleset
	// Source yields the input records (JSON lines); required. See
	// runtime.OpenFileSource.
	Source runtime.Source
	// OutOfOrderness is the bound of the watermark strategy: the watermark
	// trails the largest timestamp seen by this much. Events further
	// behind are late. Default (0): 0 (the input is taken as ordered);
	// negative values are an error.
	OutOfOrderness time.Duration
	// LabelField names a field that marks labelled (fraudulent) events, a
	// bool (or "true"/1). Empty: no label statistics. ScenarioField names
	// the field that says which scenario a labelled event belongs to
	// (default "scenario" when LabelField is set).
	LabelField    string
	ScenarioField string
	// Alerts receives one JSON object per alert, one per line. nil
	// discards them (the summary still counts them).
	Alerts io.Writer
	// Late receives the late events as JSON lines ({"line", "time",
	// "data"}); nil only counts them.
	Late io.Writer
	// DeadLetter receives the records that could not be decoded (malformed
	// JSON, a missing time or key field); nil only counts them.
	DeadLetter runtime.DeadLetter
	// Progress is called every ProgressEvery records (default 100,000) and
	// at the end, on the backtest's goroutine.
	Progress      func(BacktestProgress)
	ProgressEvery int64
	// WatermarkEvery is how many events pass between two watermarks
	// (default 256). Watermarks come from record timestamps, never a clock,
	// so a backtest is deterministic whatever the value; a coarser cadence
	// processes each key's buffered events in larger batches. Which events
	// are late depends on it only for input whose disorder exceeds
	// OutOfOrderness (1 gives Flink's per-record watermarks).
	WatermarkEvery int
	// MaxPartialMatches and MaxBufferedEvents are the per-key limits
	// (docs/decisions.md); 0, the default for backtests, means unlimited.
	MaxPartialMatches int
	MaxBufferedEvents int
	// Input is what to do with bad input (far-ahead times, a wrong time
	// unit, a run that decodes nearly nothing); the zero value checks
	// nothing.
	Input InputPolicy
}

// BacktestProgress is what a progress callback sees.
type BacktestProgress struct {
	runtime.Stats
	Alerts int64
}

// RuleSummary is the outcome of one rule in a backtest.
type RuleSummary struct {
	Rule            string
	Severity        string
	Alerts          int64
	TruePositives   int64 // alerts with at least one labelled event
	FalsePositives  int64
	LabelledCaught  int64 // distinct labelled events inside this rule's alerts
	ConditionErrors uint64
	Late            int64
	Overflow        int64 // events over MaxBufferedEvents
	NoKey           int64 // events skipped for lacking one of the rule's key fields
	Dropped         int64 // partial matches dropped over MaxPartialMatches
}

// Precision is TruePositives / Alerts (NaN-free: 0 when there are no alerts).
func (s RuleSummary) Precision() float64 { return ratio(s.TruePositives, s.Alerts) }

// ScenarioSummary is the outcome for one labelled scenario.
type ScenarioSummary struct {
	Scenario string
	Labelled int64 // labelled events of the scenario
	Caught   int64 // of them, inside at least one alert
	// ByRule counts, per rule, the scenario's events its alerts caught.
	ByRule map[string]int64
}

// Recall is Caught / Labelled.
func (s ScenarioSummary) Recall() float64 { return ratio(s.Caught, s.Labelled) }

// Missed is Labelled - Caught.
func (s ScenarioSummary) Missed() int64 { return s.Labelled - s.Caught }

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// BacktestSummary is the outcome of a backtest.
type BacktestSummary struct {
	Ruleset        string
	RulesetVersion string
	runtime.Stats
	Late      int64
	Alerts    int64
	Rules     []RuleSummary
	Labelled  int64 // labelled events in the input (0 without LabelField)
	Caught    int64 // labelled events inside at least one alert
	Scenarios []ScenarioSummary
}

// Recall is Caught / Labelled over all scenarios.
func (s *BacktestSummary) Recall() float64 { return ratio(s.Caught, s.Labelled) }

// Backtest runs every rule of cfg.Ruleset over cfg.Source, exactly as a live
// run would: the keyed operator in event time, a bounded-out-of-orderness
// watermark that advances with the record timestamps, and a final watermark
// of +infinity at the end of the input that releases every pending absence
// match. It writes alerts, late events and dead letters as they happen and
// returns the summary. It runs on the calling goroutine; ctx cancels it.
// Once the run has started, the summary of what was read is returned with
// any error (cancellation, a broken input, an [*InputError]).
func Backtest(ctx context.Context, cfg BacktestConfig) (*BacktestSummary, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	rs := cfg.Ruleset
	schema, labelSlot, scenarioSlot, err := backtestSchema(rs, cfg.LabelField, cfg.ScenarioField)
	if err != nil {
		return nil, err
	}
	dec, err := backtestDecoder(rs, schema, cfg.Input)
	if err != nil {
		return nil, err
	}
	every := cfg.WatermarkEvery
	if every <= 0 {
		every = defaultWatermarkEvery
	}
	wm, err := runtime.NewWatermarkGenerator(cfg.OutOfOrderness, every)
	if err != nil {
		return nil, fmt.Errorf("cep: backtest: %w", err)
	}

	bt := &backtest{cfg: cfg, rs: rs, schema: schema, labelSlot: labelSlot, scenarioSlot: scenarioSlot,
		encoder: jsonev.NewEncoder(schema, append([]string{rs.TimeField}, rs.TimeFields()...)...)}
	if cfg.Alerts != nil {
		bt.alerts = bufio.NewWriterSize(cfg.Alerts, 1<<16)
	}
	if cfg.Late != nil {
		bt.late = bufio.NewWriterSize(cfg.Late, 1<<12)
	}
	// One shared operator per key specification: the rules with the same
	// key fields share the keying, buffering and timers of an event.
	keyOps := map[string]*keyOperator{}
	for i, r := range rs.Rules {
		var opts []nfa.Option
		if cfg.MaxPartialMatches > 0 {
			opts = append(opts, nfa.WithMaxPartialMatches(cfg.MaxPartialMatches))
		}
		n, err := nfa.Compile(r.Pattern, opts...)
		if err != nil {
			return nil, fmt.Errorf("cep: backtest: rule %s: %w", r.Name, err)
		}
		spec := strings.Join(r.KeyFields, "\x00")
		ko := keyOps[spec]
		if ko == nil {
			op, err := NewSharedOperator(SharedConfig{Key: r.Key, MaxBufferedEvents: cfg.MaxBufferedEvents})
			if err != nil {
				return nil, fmt.Errorf("cep: backtest: rule %s: %w", r.Name, err)
			}
			ko = &keyOperator{bt: bt, op: op, keySlots: nullableKeys(r, rs)}
			keyOps[spec] = ko
			bt.keyOps = append(bt.keyOps, ko)
		}
		if err := ko.op.AddRule(SharedRule{ID: i, NFA: n}); err != nil {
			return nil, fmt.Errorf("cep: backtest: rule %s: %w", r.Name, err)
		}
		ro := &ruleOperator{bt: bt, rule: r, index: i, ko: ko}
		ko.rules = append(ko.rules, ro)
		bt.rules = append(bt.rules, ro)
	}
	ops := []runtime.KeyedOperator{bt.labels(), rulesOperator{bt}}
	progressEvery := cfg.ProgressEvery
	if progressEvery <= 0 {
		progressEvery = 100_000
	}
	var dead runtime.DeadLetter
	if cfg.DeadLetter != nil {
		dead = namedDeadLetter{ruleset: rs.Name, d: cfg.DeadLetter}
	}
	sub, err := runtime.NewSubtask(runtime.SubtaskConfig{
		Source:        cfg.Source,
		Decoder:       dec,
		Watermarks:    wm,
		Operators:     ops,
		DeadLetter:    dead,
		MaxAhead:      cfg.Input.MaxAhead,
		GiveUpAfter:   cfg.Input.GiveUpAfter,
		ProgressEvery: progressEvery,
		Progress: func(s runtime.Stats) {
			if cfg.Progress != nil {
				cfg.Progress(BacktestProgress{Stats: s, Alerts: bt.alertCount})
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("cep: backtest: %w", err)
	}
	runErr := sub.Run(ctx)
	if err := bt.flush(); err != nil && runErr == nil {
		runErr = err
	}
	sum := bt.summary(sub.Stats())
	if err := cfg.Input.inputError(rs.Name, sum.Stats, runErr); err != nil {
		return sum, err
	}
	if runErr != nil {
		var oe *runtime.OperatorError
		var re *RuleError
		if errors.As(runErr, &oe) && errors.As(oe.Err, &re) {
			return sum, fmt.Errorf("cep: backtest: rule %s, line %d: %w", rs.Rules[re.Rule].Name, oe.Line, re.Err)
		}
		return sum, fmt.Errorf("cep: backtest: %w", runErr)
	}
	return sum, nil
}

func (c *BacktestConfig) validate() error {
	var errs []error
	if c.Ruleset == nil {
		errs = append(errs, errors.New("cep: backtest: Ruleset is required"))
	}
	if c.Source == nil {
		errs = append(errs, errors.New("cep: backtest: Source is required"))
	}
	if c.OutOfOrderness < 0 {
		errs = append(errs, fmt.Errorf("cep: backtest: OutOfOrderness %v is negative", c.OutOfOrderness))
	}
	if c.MaxPartialMatches < 0 || c.MaxBufferedEvents < 0 || c.WatermarkEvery < 0 {
		errs = append(errs, errors.New("cep: backtest: limits must be >= 0"))
	}
	errs = append(errs, c.Input.validate())
	return errors.Join(errs...)
}

// backtestSchema is the ruleset's schema plus the label and scenario fields
// when the rules do not read them, so that the decoder keeps them.
func backtestSchema(rs *rules.Ruleset, label, scenario string) (*event.Schema, int, int, error) {
	if label == "" {
		return rs.Schema, -1, -1, nil
	}
	if scenario == "" {
		scenario = "scenario"
	}
	fields := make([]event.Field, 0, rs.Schema.Len()+2)
	for i := range rs.Schema.Len() {
		fields = append(fields, rs.Schema.Field(i))
	}
	slotOf := func(name string) int {
		if i, ok := rs.Schema.Slot(name); ok {
			return i
		}
		fields = append(fields, event.Field{Name: name})
		return len(fields) - 1
	}
	ls := slotOf(label)
	ss := slotOf(scenario)
	s, err := event.NewSchema(fields...)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("cep: backtest: %w", err)
	}
	return s, ls, ss, nil
}

// backtestDecoder returns the decoder of a backtest: the ruleset's own
// (the one its in-file tests decode with, [rules.Ruleset.DecoderConfig]),
// in lenient mode, over schema (the ruleset's plus the label fields).
func backtestDecoder(rs *rules.Ruleset, schema *event.Schema, p InputPolicy) (*jsonev.Decoder, error) {
	dc := rs.DecoderConfig(jsonev.Lenient)
	dc.Schema = schema
	p.decoder(&dc)
	dec, err := jsonev.NewDecoder(dc)
	if err != nil {
		return nil, fmt.Errorf("cep: backtest: %w", err)
	}
	return dec, nil
}

// backtest is the state of one run: the rule operators, the label
// bookkeeping and the writers.
type backtest struct {
	cfg                     BacktestConfig
	rs                      *rules.Ruleset
	schema                  *event.Schema
	labelSlot, scenarioSlot int
	rules                   []*ruleOperator
	keyOps                  []*keyOperator // by first rule
	out                     Output         // the matches of one call, for dispatch

	alerts, late *bufio.Writer
	alertCount   int64
	lateCount    int64
	writeErr     error

	labelled map[uint64]string  // seq of each labelled event -> its scenario
	caught   map[uint64]bool    // labelled events inside some alert
	caughtBy map[caughtKey]bool // (rule, labelled event) pairs seen in alerts
	encoder  *jsonev.Encoder    // alerts and late events
	alert    jsonev.Alert       // scratch for appendAlert
	buf      []byte
}

func (bt *backtest) fail(err error) {
	if bt.writeErr == nil && err != nil {
		bt.writeErr = err
	}
}

func (bt *backtest) flush() error {
	for _, w := range []*bufio.Writer{bt.alerts, bt.late} {
		if w != nil {
			bt.fail(w.Flush())
		}
	}
	return bt.writeErr
}

// labels returns the operator that sees every event first and records the
// labelled ones.
func (bt *backtest) labels() runtime.KeyedOperator { return labelOperator{bt} }

type labelOperator struct{ bt *backtest }

func (l labelOperator) ProcessElement(ev *event.Event, _ event.Time) error {
	bt := l.bt
	if bt.labelSlot < 0 || !truthy(ev.Field(bt.labelSlot)) {
		return nil
	}
	if bt.labelled == nil {
		bt.labelled = map[uint64]string{}
		bt.caught = map[uint64]bool{}
	}
	sc, _ := ev.Field(bt.scenarioSlot).AsString()
	bt.labelled[ev.Seq] = sc
	return nil
}

func (l labelOperator) ProcessWatermark(event.Watermark) error { return l.bt.writeErr }

// truthy reports whether a label value marks an event: true, a non-zero
// number, or the strings "true"/"1"/"yes".
func truthy(v event.Value) bool {
	if b, ok := v.AsBool(); ok {
		return b
	}
	if f, ok := v.AsFloat(); ok {
		return f != 0
	}
	if s, ok := v.AsString(); ok {
		return s == "true" || s == "1" || s == "yes"
	}
	return false
}

// rulesOperator runs every keyOperator of the subtask on each element and
// watermark, then hands the matches to their rules in rule order, as one
// operator per rule called in rule order did.
type rulesOperator struct{ bt *backtest }

func (r rulesOperator) ProcessElement(ev *event.Event, ts event.Time) error {
	var errs []error
	for _, ko := range r.bt.keyOps {
		errs = append(errs, ko.processElement(ev, ts))
	}
	return r.bt.dispatch(errors.Join(errs...))
}

func (r rulesOperator) ProcessWatermark(w event.Watermark) error {
	var errs []error
	for _, ko := range r.bt.keyOps {
		errs = append(errs, ko.processWatermark(w))
	}
	return r.bt.dispatch(errors.Join(errs...))
}

// dispatch writes the matches gathered from the keyOperators in rule
// order, then returns err or a write error.
func (bt *backtest) dispatch(err error) error {
	items := bt.out.Items
	if !slices.IsSortedFunc(items, byRule) {
		slices.SortStableFunc(items, byRule)
	}
	for i := range items {
		bt.rules[items[i].Rule].alert(&items[i])
	}
	bt.out.Reset()
	if err != nil {
		return err
	}
	return bt.writeErr
}

func byRule(a, b Item) int { return a.Rule - b.Rule }

// keyOperator hosts the shared operator of the rules with one key
// specification.
type keyOperator struct {
	bt    *backtest
	op    *SharedOperator
	rules []*ruleOperator
	out   Output
	// keySlots are the key slots that an event may lack (null): such an
	// event is skipped for these rules, never keyed by null.
	keySlots []int
}

func (ko *keyOperator) processElement(ev *event.Event, ts event.Time) error {
	if hasNullKey(ev, ko.keySlots) {
		for _, r := range ko.rules {
			r.noKey++
		}
		return nil
	}
	err := ko.op.ProcessElement(ev, ts, &ko.out)
	ko.drain()
	return err
}

func (ko *keyOperator) processWatermark(w event.Watermark) error {
	err := ko.op.ProcessWatermark(w, &ko.out)
	ko.drain()
	return err
}

// drain handles the late and overflowing elements and moves the matches
// to the backtest's output, for dispatch.
func (ko *keyOperator) drain() {
	bt := ko.bt
	for i := range ko.out.Items {
		it := &ko.out.Items[i]
		switch it.Kind {
		case ItemMatch:
			bt.out.Items = append(bt.out.Items, *it)
		case ItemLate:
			// Every rule sees the same watermark, so an event late for
			// one is late for all: report it once.
			if ko.rules[0].index == 0 {
				bt.lateCount++
				if bt.late != nil {
					bt.buf = bt.encoder.AppendLate(bt.buf[:0], it.Event)
					_, err := bt.late.Write(bt.buf)
					bt.fail(err)
				}
			}
		case ItemOverflow:
			for _, r := range ko.rules {
				r.overflow++
			}
		}
	}
	ko.out.Reset()
}

// ruleOperator is one rule of a backtest: its counters and alerts.
type ruleOperator struct {
	bt    *backtest
	rule  *rules.Rule
	index int
	ko    *keyOperator

	alerts, tp, caught, overflow, noKey int64
}

func (r *ruleOperator) alert(it *Item) {
	bt := r.bt
	r.alerts++
	bt.alertCount++
	if bt.labelled != nil {
		hit := false
		for _, evs := range it.Match.Events {
			for _, e := range evs {
				if _, ok := bt.labelled[e.Seq]; ok {
					hit = true
					bt.caught[e.Seq] = true
					r.markCaught(e.Seq)
				}
			}
		}
		if hit {
			r.tp++
		}
	}
	if bt.alerts == nil {
		return
	}
	bt.buf = appendAlert(bt.buf[:0], bt, r.rule, it)
	_, err := bt.alerts.Write(bt.buf)
	bt.fail(err)
}

// markCaught counts the labelled events this rule caught, each once.
func (r *ruleOperator) markCaught(seq uint64) {
	if r.bt.caughtBy == nil {
		r.bt.caughtBy = map[caughtKey]bool{}
	}
	k := caughtKey{rule: r.index, seq: seq}
	if !r.bt.caughtBy[k] {
		r.bt.caughtBy[k] = true
		r.caught++
	}
}

type caughtKey struct {
	rule int
	seq  uint64
}

func (bt *backtest) summary(st runtime.Stats) *BacktestSummary {
	s := &BacktestSummary{
		Ruleset:        bt.rs.Name,
		RulesetVersion: bt.rs.Hash,
		Stats:          st,
		Late:           bt.lateCount,
		Alerts:         bt.alertCount,
		Labelled:       int64(len(bt.labelled)),
		Caught:         int64(len(bt.caught)),
	}
	for _, r := range bt.rules {
		opStats, _ := r.ko.op.RuleStats(r.index)
		s.Rules = append(s.Rules, RuleSummary{
			Rule:            r.rule.Name,
			Severity:        r.rule.Severity.String(),
			Alerts:          r.alerts,
			TruePositives:   r.tp,
			FalsePositives:  r.alerts - r.tp,
			LabelledCaught:  r.caught,
			ConditionErrors: r.rule.ConditionErrors(),
			Late:            int64(opStats.Late),
			Overflow:        r.overflow,
			NoKey:           r.noKey,
			Dropped:         int64(opStats.DroppedPartialMatches),
		})
	}
	if bt.labelled == nil {
		return s
	}
	byScenario := map[string]*ScenarioSummary{}
	var order []string
	for seq, sc := range bt.labelled {
		ss := byScenario[sc]
		if ss == nil {
			ss = &ScenarioSummary{Scenario: sc, ByRule: map[string]int64{}}
			byScenario[sc] = ss
			order = append(order, sc)
		}
		ss.Labelled++
		if bt.caught[seq] {
			ss.Caught++
		}
	}
	for k := range bt.caughtBy {
		sc := bt.labelled[k.seq]
		byScenario[sc].ByRule[bt.rules[k.rule].rule.Name]++
	}
	sortStrings(order)
	for _, sc := range order {
		s.Scenarios = append(s.Scenarios, *byScenario[sc])
	}
	return s
}

// defaultWatermarkEvery is the default of BacktestConfig.WatermarkEvery.
const defaultWatermarkEvery = 256
