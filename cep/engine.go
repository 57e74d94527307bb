package cep

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/cepheus-cep/cepheus/enrich"
	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/event/jsonev"
	"github.com/cepheus-cep/cepheus/nfa"
	"github.com/cepheus-cep/cepheus/rules"
	"github.com/cepheus-cep/cepheus/runtime"
	"github.com/cepheus-cep/cepheus/runtime/state"
)

// Engine runs the rules of a ruleset over events: every rule's keyed CEP
// operator in event time, with a bounded-out-of-orderness watermark that
// advances with the record timestamps (docs/decisions.md, "Backtest
// semantics"). It runs over bounded sources ([Engine.Run]: a backtest is
// exactly that) and as a live, checkpointed job ([Engine.Stream]).
//
// An Engine is built once by [New] and may run several times, one run at
// a time: each [Engine.Run] starts from empty state. It is not safe for
// concurrent use. The zero Engine runs nothing: its runs fail.
type Engine struct {
	cfg     config
	schema  *event.Schema // the ruleset's, plus the fields observers read
	decoder jsonev.Config
	encoder *AlertEncoder
	// rules are the compiled rules, in ruleset order; specs the key
	// specifications, in the order of their first rule.
	rules []compiledRule
	specs []keySpec
	// plan is what a live job's engine runs (hot-loading); nil for an
	// engine built by New: its ruleset alone.
	plan *plan
}

type compiledRule struct {
	rule *rules.Rule
	nfa  *nfa.NFA
	spec int // index in Engine.specs
	// rs is the ruleset version the rule belongs to (its alerts name it).
	rs *Ruleset
	// After a hot-loading switch (docs/operations.md, "Hot-loading"): a
	// draining rule (drain) emits only the matches whose first event is
	// at or before from, and goes once the watermark passes until; a
	// rule emits only the matches whose first event is after after (its
	// predecessor drains those). id names the rule's state across
	// versions (planRule.ID).
	drain       bool
	from, until event.Time
	after       event.Time
	id          int
	// shadow marks a rule of the shadow version (its alerts go to the
	// shadow output); twin is the rule of the other side of the
	// comparison of a shadow version (the active rule of a shadow rule's
	// name, the shadow rule of an active one's), or -1.
	shadow bool
	twin   int
	// null marks the slots of the velocity aggregates the rule's alerts
	// show as null (alertNulls; nil: none).
	null []bool
}

// keySpec is the key fields shared by some rules: one SharedOperator.
type keySpec struct {
	id    state.OperatorID
	key   func(*event.Event) event.Key
	slots []int // key slots an event may lack (hasNullKey)
	all   []int // every key slot (hasEmptyKey)
	rules []int // indexes in Engine.rules
	// counted are the rules of rules whose counters of the events the
	// operator refuses (without the key, over the buffer limit) grow:
	// all but a draining rule beside an active one of its name, which
	// is offered the same events (the rule's figures would count each
	// twice while it drains).
	counted []int
	// names are the names of rules, in order: the "rules" of an event
	// the spec's operator refused for its buffer limit.
	names []string
}

// config is what the options set.
type config struct {
	ruleset        *rules.Ruleset
	alerts, late   io.Writer
	dead           *DeadLetterWriter
	outOfOrderness time.Duration
	watermarkEvery int
	maxPartial     int
	maxBuffered    int
	input          InputPolicy
	gcPercent      int
	gcSet          bool
	memoryLimit    int64
	observers      []Observer
	lookupSources  map[string]enrich.Source
	lookupOpts     LookupOptions
	progress       func(Progress)
	progressEvery  int64
	aggWorkers     int
	// For the tests of checkpoints, until the streaming runtime makes
	// checkpoints an option: see withCheckpoints and withRestore.
	checkpointEvery int64
	checkpoint      func(snapshot func(state.Writer) error) error
	restore         state.Reader
}

// Option configures an [Engine]; see [New].
type Option func(*config)

// WithRuleset sets the ruleset whose rules the engine runs; required. An
// engine runs one ruleset; run several with several engines.
func WithRuleset(rs *Ruleset) Option { return func(c *config) { c.ruleset = rs } }

// WithAlerts sets where alerts go: one JSON line per alert, encoded by the
// engine's [AlertEncoder], through a 64 KiB buffer flushed when Run
// returns (whole lines only). Default: none (the summary and the
// observers still count them).
func WithAlerts(w io.Writer) Option { return func(c *config) { c.alerts = w } }

// WithLate sets where late events go (events at or behind the watermark
// when they arrive): one JSON line each ({"line", "time", "event"}),
// buffered like the alerts. Default: none, they are only counted.
func WithLate(w io.Writer) Option { return func(c *config) { c.late = w } }

// WithDeadLetters sets where the records that cannot become events go
// (malformed JSON, a missing time or key field, a refused time), each
// naming the ruleset. Run does not close d. Default: none, they are only
// counted.
func WithDeadLetters(d *DeadLetterWriter) Option { return func(c *config) { c.dead = d } }

// WithOutOfOrderness sets the bound of the watermark strategy: the
// watermark trails the largest timestamp seen by d (whole milliseconds),
// and events further behind are late. Default: 0, the input is taken as
// ordered (cepheus backtest and run -out-of-orderness: 5s, so that the
// same input gives other late events and alerts). Negative values are an
// error.
func WithOutOfOrderness(d time.Duration) Option { return func(c *config) { c.outOfOrderness = d } }

// WithWatermarkEvery sets how many events pass between two watermarks.
// Watermarks come from record timestamps, never a clock, so a run is
// deterministic whatever the value; a coarser cadence processes each key's
// buffered events in larger batches. Which events are late depends on it
// only for input whose disorder exceeds the out-of-orderness bound (1
// gives Flink's per-record watermarks). Default: 256. Negative values are
// an error.
func WithWatermarkEvery(n int) Option { return func(c *config) { c.watermarkEvery = n } }

// WithLimits sets the per-key limits (docs/decisions.md): the partial
// matches of one rule at one key (the oldest are dropped and counted), and
// the events of one key waiting for the watermark (the overflow is
// counted and not processed). 0, the default, means unlimited; negative
// values are an error.
func WithLimits(maxPartialMatches, maxBufferedEvents int) Option {
	return func(c *config) { c.maxPartial, c.maxBuffered = maxPartialMatches, maxBufferedEvents }
}

// WithInputPolicy sets what to do with bad input (far-ahead times, a wrong
// time unit, a run that decodes nearly nothing); see [InputPolicy].
// Default: the zero policy, which checks nothing (cepheus backtest and run
// check numeric times and -max-ahead 24h; backtest also fails a run of
// more than half dead letters, and stops one whose first 10,000 records
// decode none).
func WithInputPolicy(p InputPolicy) Option { return func(c *config) { c.input = p } }

// DefaultOutOfOrderness is the watermark bound of cepheus backtest and run
// (-out-of-orderness), which [CommandDefaults] sets.
const DefaultOutOfOrderness = 5 * time.Second

// DefaultInputPolicy returns the input policy of cepheus backtest: times
// written as numbers checked as epoch milliseconds, an event more than 24h
// ahead of the stream held until the next ones judge it, a run failing
// when more than half its records are dead letters, or stopped when none
// of its first 10,000 decodes ([Engine.Stream] applies the first two, as
// cepheus run does).
func DefaultInputPolicy() InputPolicy {
	return InputPolicy{CheckNumericTimes: true, MaxAhead: 24 * time.Hour, MaxDeadFraction: 0.5, GiveUpAfter: 10_000}
}

// CommandDefaults returns the options that make an engine read its input
// as cepheus backtest and run do by default: [WithOutOfOrderness]
// ([DefaultOutOfOrderness]) and [WithInputPolicy] ([DefaultInputPolicy]).
// The engine's own defaults take the input as ordered and check nothing,
// as conformance runs need; an embedding program that compares its alerts
// with the commands' starts from these:
//
//	e, err := cep.New(append(cep.CommandDefaults(), cep.WithRuleset(rs))...)
func CommandDefaults() []Option {
	return []Option{WithOutOfOrderness(DefaultOutOfOrderness), WithInputPolicy(DefaultInputPolicy())}
}

// WithGCPercent sets the garbage collector's target percentage
// ([debug.SetGCPercent]) while Run runs, and restores the previous one
// when it returns. A run's heap is mostly short-lived events: collecting
// less often (400, say) costs memory and saves CPU. The setting is
// process-wide, so runs of engines with this option must not overlap.
// Default: the process's setting is left alone.
func WithGCPercent(p int) Option { return func(c *config) { c.gcPercent, c.gcSet = p, true } }

// WithMemoryLimit sets the Go runtime's soft memory limit
// ([debug.SetMemoryLimit]) to n bytes while Run runs, and restores the
// previous one when it returns: the collector then runs more often as the
// heap nears n, whatever WithGCPercent allows (it never spends more than
// about half the CPU on it, so a state larger than n still runs, slower).
// It is process-wide, as WithGCPercent. Default (or n <= 0): the process's
// setting is left alone.
func WithMemoryLimit(n int64) Option { return func(c *config) { c.memoryLimit = n } }

// WithAggregateWorkers sets the workers of the velocity aggregates
// (docs/rules.md, "Skew"): n > 1 spreads their windows over n goroutines
// and salts a hot key's window (more than 20% of a watermark's release,
// at least 64 events) into partials on several of them, merged exactly,
// for an aggregate whose events one key dominates; the values are the
// same. Default (or n <= 1): one aggregator on the caller's goroutine.
// A stream's [StreamConfig.AggregateWorkers] overrides it; checkpoints
// restore across the setting. At most MaxAggregateWorkers.
func WithAggregateWorkers(n int) Option { return func(c *config) { c.aggWorkers = n } }

// MaxAggregateWorkers is the most workers WithAggregateWorkers and
// StreamConfig.AggregateWorkers take.
const MaxAggregateWorkers = runtime.MaxAggregateWorkers

// WithObservers adds observers of the alerts (and, for an
// [EventObserver], of the events) of every run. Observers are called in
// the order given, on Run's goroutine.
func WithObservers(obs ...Observer) Option {
	return func(c *config) { c.observers = append(c.observers, obs...) }
}

// WithProgress makes Run call fn every `every` records (0: every 100,000)
// and once at the end, on Run's goroutine; fn must be quick. Default: no
// progress calls.
func WithProgress(every int64, fn func(Progress)) Option {
	return func(c *config) { c.progress, c.progressEvery = fn, every }
}

// withCheckpoints makes Run call fn every n records, between two records,
// once the outputs are flushed: snapshot writes the run's state (the
// subtask's position and the operators') into a state writer. An error of
// fn stops the run. Tests use it until the streaming runtime makes
// checkpoints an option.
func withCheckpoints(n int64, fn func(snapshot func(state.Writer) error) error) Option {
	return func(c *config) { c.checkpointEvery, c.checkpoint = n, fn }
}

// withRestore makes Run start from the checkpoint r holds, taken by a run
// of an engine with the same options over the same input.
func withRestore(r state.Reader) Option { return func(c *config) { c.restore = r } }

// errNotNew is the error of the runs of an Engine that New did not make
// (its zero value).
var errNotNew = errors.New("cep: the Engine was not made by New")

// defaultWatermarkEvery is the default of WithWatermarkEvery.
const defaultWatermarkEvery = 256

// New returns an engine configured by opts. It compiles every rule and
// checks the options together: the error lists every problem.
func New(opts ...Option) (*Engine, error) {
	var c config
	var errs []error
	for i, o := range opts {
		if o == nil {
			errs = append(errs, fmt.Errorf("cep: option %d of New is nil", i))
			continue
		}
		o(&c)
	}
	if err := errors.Join(append(errs, c.validate())...); err != nil {
		return nil, err
	}
	if c.watermarkEvery == 0 {
		c.watermarkEvery = defaultWatermarkEvery
	}
	if c.progressEvery == 0 {
		c.progressEvery = 100_000
	}
	return build(c, nil)
}

// build compiles the engine of c's ruleset and of extra, the draining
// rules of earlier versions (hot-loading; their spec is set here).
func build(c config, extra []compiledRule) (*Engine, error) {
	e := &Engine{cfg: c}
	rs := c.ruleset
	var err error
	if e.schema, err = engineSchema(rs, c.observers); err != nil {
		return nil, err
	}
	all := make([]compiledRule, 0, len(rs.Rules)+len(extra))
	for i, r := range rs.Rules {
		all = append(all, compiledRule{rule: r, nfa: r.NFA, rs: rs, after: event.MinTime, id: i + 1})
	}
	all = append(all, extra...)
	// One shared operator per key specification: the rules with the same
	// key fields share the keying, buffering and timers of an event.
	specs := map[string]int{}
	for i, cr := range all {
		r := cr.rule
		name := strings.Join(r.KeyFields, "\x00")
		si, ok := specs[name]
		if !ok {
			si = len(e.specs)
			specs[name] = si
			e.specs = append(e.specs, keySpec{
				id:    state.OperatorID("cep/" + rs.Name + "/" + strings.Join(r.KeyFields, ",")),
				key:   r.Key,
				slots: nullableKeys(r, rs),
				all:   r.KeySlots,
			})
		}
		e.specs[si].rules = append(e.specs[si].rules, i)
		e.specs[si].names = append(e.specs[si].names, r.Name)
		cr.spec, cr.twin = si, -1
		e.rules = append(e.rules, cr)
	}
	// A name's counting rule: its active one, else its newest draining
	// one (a removed rule's versions may drain together; the newest come
	// last).
	counting := map[string]int{}
	for i := range e.rules {
		cr := &e.rules[i]
		if j, ok := counting[cr.rule.Name]; cr.active() || cr.drain && (!ok || !e.rules[j].active()) {
			counting[cr.rule.Name] = i
		}
	}
	for si := range e.specs {
		sp := &e.specs[si]
		for _, i := range sp.rules {
			if cr := &e.rules[i]; !cr.drain || counting[cr.rule.Name] == i {
				sp.counted = append(sp.counted, i)
			}
		}
	}
	var others []*rules.Ruleset // the versions of the draining and shadow rules
	for _, cr := range extra {
		if cr.rs != rs && !slices.Contains(others, cr.rs) {
			others = append(others, cr.rs)
		}
	}
	e.decoder = decoderConfig(rs, e.schema, others)
	c.input.decoder(&e.decoder)
	if _, err := jsonev.NewDecoder(e.decoder); err != nil {
		return nil, fmt.Errorf("cep: %w", err)
	}
	e.encoder = newAlertEncoder(rs, e.schema, e.decoder.TimeFields)
	for i := range e.rules {
		e.rules[i].null = alertNulls(e.rules[i].rule, e.Aggregates(), e.schema.Len())
	}
	for i := range e.rules {
		if a := &e.rules[i]; a.shadow {
			for j := range e.rules {
				if b := &e.rules[j]; b.active() && b.rule.Name == a.rule.Name {
					a.twin, b.twin = j, i
				}
			}
		}
	}
	return e, nil
}

func (c *config) validate() error {
	var errs []error
	if c.ruleset == nil {
		errs = append(errs, errors.New("cep: WithRuleset is required"))
	}
	if c.outOfOrderness < 0 {
		errs = append(errs, fmt.Errorf("cep: out-of-orderness %v is negative", c.outOfOrderness))
	}
	if c.aggWorkers > MaxAggregateWorkers {
		errs = append(errs, fmt.Errorf("cep: %d aggregate workers: at most %d", c.aggWorkers, MaxAggregateWorkers))
	}
	if c.maxPartial < 0 || c.maxBuffered < 0 || c.watermarkEvery < 0 || c.progressEvery < 0 {
		errs = append(errs, errors.New("cep: limits and intervals must be >= 0"))
	}
	for i, o := range c.observers {
		if o == nil {
			errs = append(errs, fmt.Errorf("cep: observer %d is nil", i))
		}
	}
	if c.dead != nil && c.dead.w == nil {
		errs = append(errs, errors.New("cep: WithDeadLetters: the DeadLetterWriter was not made by NewDeadLetterWriter"))
	}
	if c.checkpoint != nil && c.checkpointEvery <= 0 {
		errs = append(errs, errors.New("cep: checkpoints need a positive interval"))
	}
	if err := c.input.validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.checkLookups(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// decoderConfig is the configuration of the decoder of the events of an
// engine of rs over schema (rs's, or a live job's layout, with the
// observers' fields), whose other rules belong to the versions others
// (draining, shadow). The layout keeps every field a version declared
// (docs/operations.md, "Schema growth"), with the kind of its latest
// declaration, and of those fields rs alone says which hold times: a
// field another version the engine runs declares as a time (and rs does
// not declare) is read as one too, so that the rules of that version
// get its time as they do in a run of their own; a field no version the
// engine runs declares is read with no kind, so that no event is refused
// for a field none of them reads. (Before, such a field was read as a
// plain int, the kind of a time: every event that wrote it as an RFC
// 3339 string was a dead letter.)
func decoderConfig(rs *rules.Ruleset, schema *event.Schema, others []*rules.Ruleset) jsonev.Config {
	cfg := rs.DecoderConfig(jsonev.Lenient)
	cfg.Schema = schema
	declared := map[int]bool{} // by rs or by others
	declare := func(v *rules.Ruleset) {
		for _, slot := range v.IDSlots {
			declared[slot] = true
		}
		for _, l := range v.Lookups {
			for _, f := range l.Fields {
				declared[f.Slot] = true
			}
		}
		for _, a := range v.Aggregates {
			declared[a.Slot] = true
		}
	}
	declare(rs)
	for _, o := range others {
		for _, name := range o.TimeFields() {
			slot, ok := schema.Slot(name)
			if !ok || declared[slot] || slices.Contains(cfg.TimeFields, name) {
				continue // rs's declaration first
			}
			if k := schema.Field(slot).Kind; k == event.KindInt || k == event.KindNull {
				cfg.TimeFields = append(cfg.TimeFields, name)
			}
		}
	}
	for _, o := range others {
		declare(o)
	}
	var fields []event.Field
	for slot := range schema.Len() {
		if f := schema.Field(slot); !declared[slot] && f.Kind != event.KindNull {
			if fields == nil {
				fields = fieldsOf(schema)
			}
			fields[slot].Kind = event.KindNull
		}
	}
	if fields != nil {
		cfg.Schema = event.MustSchema(fields...)
	}
	return cfg
}

// engineSchema is the ruleset's schema plus the fields the event observers
// read when the rules do not, so that the decoder keeps them.
func engineSchema(rs *rules.Ruleset, obs []Observer) (*event.Schema, error) {
	var extra []string
	for i, o := range obs {
		if eo, ok := o.(EventObserver); ok {
			fields := eo.Fields()
			if slices.Contains(fields, "") {
				// The zero Labels, or NewLabels without a field.
				return nil, fmt.Errorf("cep: observer %d (%T) reads a field with no name", i, o)
			}
			extra = append(extra, fields...)
		}
	}
	if len(extra) == 0 {
		return rs.Schema, nil
	}
	fields := make([]event.Field, 0, rs.Schema.Len()+len(extra))
	for i := range rs.Schema.Len() {
		fields = append(fields, rs.Schema.Field(i))
	}
	seen := map[string]bool{}
	for _, f := range extra {
		if _, ok := rs.Schema.Slot(f); ok || seen[f] {
			continue
		}
		seen[f] = true
		fields = append(fields, event.Field{Name: f})
	}
	s, err := event.NewSchema(fields...)
	if err != nil {
		return nil, fmt.Errorf("cep: %w", err)
	}
	return s, nil
}

// Schema returns the schema events are decoded into: the ruleset's, plus
// the fields the event observers read.
func (e *Engine) Schema() *event.Schema { return e.schema }

// AlertEncoder returns the encoder of the engine's alerts, the one that
// [WithAlerts] writes with.
func (e *Engine) AlertEncoder() *AlertEncoder { return e.encoder }

// Summary is the outcome of a run.
type Summary struct {
	Ruleset        string
	RulesetVersion string
	InputStats
	Late int64 // late events
	// LateBy is the furthest a late event came behind the watermark (its
	// operator's when it came): an -out-of-orderness more than that much
	// larger takes such an event on time. A backtest's only.
	LateBy time.Duration
	Alerts int64
	// Rules are the ruleset's rules, in ruleset order; a live job's
	// (StreamResult) are then followed by those the run counted that the
	// active version has not (Former).
	Rules []RuleSummary
	// Lookups are the counters of the ruleset's lookups, in declaration
	// order; Aggregates the figures of its velocity aggregates.
	Lookups    []LookupStats
	Aggregates []AggregateStats
	// Absent are the fields that rules read and that no decoded event
	// had (a field misnamed in the ruleset or in the input: each of its
	// reads is null), in schema order; none when nothing decoded. A live
	// run's: only of a run from a fresh state, before any switch (a job
	// sees the events since it started).
	Absent []AbsentField
	// Mixed are the fields of no declared type (an inferred schema) that
	// rules read and that some decoded events gave as a number, others
	// as a string: a string never equals a number (==, in) nor orders
	// with one (<: a condition error). A live run's count the events its
	// last job decoded (since the resume or the latest switch).
	Mixed []MixedField
}

// MixedField is a field of no declared type that a run's events gave as
// a number and as a string (Summary.Mixed), how many gave each, and the
// rules that read it, in ruleset order.
type MixedField struct {
	Field            string
	Numbers, Strings int64
	Rules            []string
	Key              bool // a key field of some of them ("7" and 7 are two keys)
}

// AbsentField is a field that no event of a run had, and the rules that
// read it, in ruleset order.
type AbsentField struct {
	Field string
	Rules []string
}

// RuleSummary is the outcome of one rule in a run. A live job's
// ([StreamResult]) is by rule name, severity and timeout severity, over
// the ruleset versions the run switched through (as
// MonitorSnapshot.Rules): a draining old version's figures count with
// the active rule of its name and severities, those of a removed rule or
// of a rule's former severity in a row of their own, Former.
type RuleSummary struct {
	Rule     string
	Severity string
	// TimeoutSeverity is the severity of the rule's timeout block ("" for
	// a rule without one).
	TimeoutSeverity string
	// Former says that the active version has no rule of this name and
	// severities (a removed rule, a rule's former severity): its figures
	// are those of earlier versions in the run.
	Former bool
	Alerts int64
	// TimedOut counts, of Alerts, those of timed-out partial matches (a
	// rule with a timeout block).
	TimedOut        int64
	ConditionErrors uint64
	// LastConditionError is the message of the last condition error
	// ("" when none), such as "amount is null (in amount > 10)".
	LastConditionError string
	// EmitErrors counts the emit fields that failed to evaluate (each
	// null in its alert); LastEmitError is the last ("name: message").
	EmitErrors    uint64
	LastEmitError string
	Late          int64
	Overflow      int64 // events over the MaxBufferedEvents limit
	NoKey         int64 // events skipped for lacking one of the rule's key fields
	// EmptyKey counts the events whose key (one of its fields) is the
	// empty string: matched together as one key. A backtest's figure
	// ([Engine.Run]); a stream's summary leaves it 0.
	EmptyKey int64
	Dropped  int64 // partial matches dropped over the MaxPartialMatches limit
	// DroppedKeys are the keys with the most of Dropped, most first, at
	// most 3, counted since the process started (drops before a restore
	// are in Dropped alone, and those of events replayed after it count
	// again here).
	DroppedKeys []KeyCount
}

// KeyCount is a key of a rule as [rules.Rule.KeyText] shows it
// (card="c42"), and a count of it: exact, or at least Count when Exact
// is false (more keys counted than followed; see [KeyDrops]).
type KeyCount struct {
	Key   string
	Count int64
	Exact bool
}

// summaryKeys is how many keys a RuleSummary names of its drops.
const summaryKeys = 3

// addKeyCounts adds the counts of add to into, by key (the drops of a
// later job of a run to those of the jobs before), and returns the
// maxDropKeys with the most, most first (into's order among equals). A
// key in one of them alone is exact only if the other is not full (it
// may have let the key go).
func addKeyCounts(into, add []KeyCount) []KeyCount {
	full := len(into) == maxDropKeys
	for i := range into {
		if len(add) == maxDropKeys && !slices.ContainsFunc(add, func(c KeyCount) bool { return c.Key == into[i].Key }) {
			into[i].Exact = false
		}
	}
	for _, a := range add {
		if i := slices.IndexFunc(into, func(c KeyCount) bool { return c.Key == a.Key }); i >= 0 {
			into[i].Count += a.Count
			into[i].Exact = into[i].Exact && a.Exact
			continue
		}
		a.Exact = a.Exact && !full
		into = append(into, a)
	}
	slices.SortStableFunc(into, func(a, b KeyCount) int { return cmp.Compare(b.Count, a.Count) })
	return into[:min(len(into), maxDropKeys)]
}

// droppedKeys returns the keys at which op dropped partial matches of
// rule id, shown as rule r's, most first: each with its least count.
func droppedKeys(op *SharedOperator, id int, r *rules.Rule) []KeyCount {
	ks, _ := op.DroppedKeys(id)
	out := make([]KeyCount, len(ks))
	for i, k := range ks {
		out[i] = KeyCount{Key: r.KeyText(k.Key), Count: int64(k.Dropped - k.Shared), Exact: k.Shared == 0}
	}
	return out
}

// topKeys returns the first summaryKeys of c, a copy (nil for none).
func topKeys(c []KeyCount) []KeyCount {
	if len(c) == 0 {
		return nil
	}
	return slices.Clone(c[:min(len(c), summaryKeys)])
}

// InputStats are the counters of the input of a run.
type InputStats struct {
	Records int64 // records read (non-blank lines, dead ones included)
	Decoded int64 // records decoded into events
	Dead    int64 // records sent to the dead letters
	Ahead   int64 // of Dead, the events too far ahead of the stream (InputPolicy.MaxAhead)
	// FirstDeadLine and FirstDeadReason are the line and reason of the
	// first dead record (0 and "" when there is none); FirstDeadFile the
	// input partition its line is of (a file's name, stdin, TOPIC-P) in a
	// live job's result and in a backtest of a directory or a topic, ""
	// in a backtest of one file or stdin.
	FirstDeadLine   int64
	FirstDeadReason string
	FirstDeadFile   string
	Line            int64           // line number of the last record read
	Watermark       event.Watermark // last watermark (event.MinTime before the first)
	// BytesRead and TotalBytes are the bytes read from the input and its
	// size; -1 when the source cannot tell (TotalBytes alone -1 when only
	// the size is unknown).
	BytesRead, TotalBytes int64
}

func inputStats(s runtime.Stats) InputStats {
	return InputStats{
		Records: s.Records, Decoded: s.Decoded, Dead: s.Dead, Ahead: s.Ahead,
		FirstDeadLine: s.FirstDeadLine, FirstDeadReason: s.FirstDeadReason, FirstDeadFile: s.FirstDeadFile,
		Line: s.Line, Watermark: s.Watermark, BytesRead: s.BytesRead, TotalBytes: s.TotalBytes,
	}
}

// Progress is what a progress callback sees ([WithProgress]).
type Progress struct {
	InputStats
	Alerts int64
}

// Run runs every rule over src, exactly as a live run would: the keyed
// operators in event time, a bounded-out-of-orderness watermark that
// advances with the record timestamps, and a final watermark of +infinity
// at the end of the input that releases every pending absence match. It
// writes alerts, late events and dead letters as they happen, calls the
// observers, and returns the summary. It runs on the calling goroutine;
// ctx cancels it, looked at between records (every 4,096), so a Read of
// src that blocks (a pipe or a connection whose writer stalls) holds the
// cancellation back until it returns. Once the run has started, the summary of what was read
// is returned with any error (cancellation, a broken input, an
// [*InputError], a rule's error with its line). Run does not close src,
// and refuses one that an earlier run read.
func (e *Engine) Run(ctx context.Context, src *EventSource) (*Summary, error) {
	switch {
	case e.encoder == nil:
		return nil, errNotNew
	case ctx == nil:
		return nil, errors.New("cep: Run: nil Context")
	case src == nil || src.source() == nil:
		return nil, errors.New("cep: Run: no source (open one with OpenEventSource, NewEventSource, OpenDirEventSource or OpenTopicEventSource)")
	case src.read:
		return nil, fmt.Errorf("cep: Run: source %s was read by an earlier run: open it again", src.Name())
	}
	if e.cfg.gcSet {
		defer debug.SetGCPercent(debug.SetGCPercent(e.cfg.gcPercent))
	}
	if e.cfg.memoryLimit > 0 {
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(e.cfg.memoryLimit))
	}
	r, err := e.newRun(src.source())
	if err != nil {
		return nil, err // nothing read: src may be run again
	}
	src.read = true
	if r.host.agg != nil {
		defer r.host.agg.Close()
	}
	runErr := r.sub.Run(ctx)
	if err := r.sink.flush(); err != nil && runErr == nil {
		runErr = err
	}
	return r.finish(runErr)
}
