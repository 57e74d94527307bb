package cep

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/event/jsonev"
	"github.com/cepheus-cep/cepheus/rules"
	"github.com/cepheus-cep/cepheus/runtime"
	"github.com/cepheus-cep/cepheus/runtime/state"
)

// run is one [Engine.Run]: the runtime subtask, the operator it hosts and
// the collector of the operator's outputs.
type run struct {
	e      *Engine
	sub    *runtime.Subtask[emitted]
	host   *hostOperator
	sink   *sink
	enrich *enrichStage // nil without lookups
	dec    *jsonev.Decoder
}

// emitted is one output of the engine's operator: an alert, or a late
// event. The alert is the operator's scratch, valid during Collect only.
type emitted struct {
	alert  *Alert
	shadow bool // the alert is the shadow version's
	late   *event.Event
	// limit, with late, makes it an event refused by a key's limit of
	// buffered events (MaxBufferedEvents): the rules that did not see it.
	limit []string
}

func (e *Engine) newRun(src runtime.Source) (*run, error) {
	c := &e.cfg
	dec, err := jsonev.NewDecoder(e.decoder)
	if err != nil {
		return nil, fmt.Errorf("cep: %w", err)
	}
	wm, err := runtime.NewWatermarkGenerator(c.outOfOrderness, c.watermarkEvery)
	if err != nil {
		return nil, fmt.Errorf("cep: %w", err)
	}
	for _, o := range c.observers {
		if eo, ok := o.(EventObserver); ok {
			if err := eo.Start(e.schema); err != nil {
				return nil, fmt.Errorf("cep: observer: %w", err)
			}
		}
	}
	host, err := e.newHost(EventTime)
	if err != nil {
		return nil, err
	}
	if host.agg, err = e.newAggregator(c.aggWorkers); err != nil {
		return nil, err
	}
	r := &run{e: e, host: host, sink: newSink(e), dec: dec}
	if r.enrich, err = e.newEnrichStage(nil); err != nil {
		return nil, err
	}
	var dead runtime.DeadLetter
	if c.dead != nil {
		dead = namedDeadLetter{ruleset: c.ruleset.Name, d: c.dead.w}
	}
	sc := runtime.SubtaskConfig[emitted]{
		Source:        src,
		Decoder:       dec,
		Watermarks:    wm,
		Operators:     []runtime.KeyedOperator[emitted]{host},
		Output:        r.sink,
		DeadLetter:    dead,
		MaxAhead:      c.input.MaxAhead,
		GiveUpAfter:   c.input.GiveUpAfter,
		ProgressEvery: c.progressEvery,
	}
	if r.enrich != nil {
		sc.Enrich, sc.EnrichBatch = r.enrich.enrich, c.lookupOpts.Batch
	}
	if c.progress != nil {
		sc.Progress = func(s runtime.Stats) {
			c.progress(Progress{InputStats: inputStats(s), Alerts: host.alerts})
		}
	}
	if c.checkpoint != nil {
		sc.CheckpointEvery = c.checkpointEvery
		sc.Checkpoint = func(runtime.Stats) error {
			// The outputs so far belong to the checkpoint: flush them
			// first (a sink's pre-commit).
			if err := r.sink.flush(); err != nil {
				return err
			}
			return c.checkpoint(r.sub.Snapshot)
		}
	}
	if r.sub, err = runtime.NewSubtask(sc); err != nil {
		return nil, fmt.Errorf("cep: %w", err)
	}
	if c.restore != nil {
		if err := r.sub.Restore(c.restore); err != nil {
			return nil, fmt.Errorf("cep: restore: %w", err)
		}
	}
	return r, nil
}

// finish returns the summary of the run and the error that ended it.
func (r *run) finish(runErr error) (*Summary, error) {
	e, rs := r.e, r.e.cfg.ruleset
	st := r.sub.Stats()
	s := &Summary{
		Ruleset:        rs.Name,
		RulesetVersion: rs.Hash,
		InputStats:     inputStats(st),
		Late:           r.host.late,
		LateBy:         time.Duration(r.host.lateBy) * time.Millisecond,
		Alerts:         r.host.alerts,
		Lookups:        r.enrich.stats(),
	}
	if r.host.agg != nil {
		s.Aggregates, _ = aggregateStats(e, r.host.agg)
	}
	if st.Decoded > 0 {
		s.Absent = absentFields(rs, r.dec.Absent())
	}
	s.Mixed = mixedFields(rs, r.dec.Mixed())
	for i, cr := range e.rules {
		rr := &r.host.rules[i]
		opStats, _ := r.host.keyOps[cr.spec].op.RuleCounts(i) // the summary reads counters only
		timeoutSeverity := ""
		if cr.rule.Timeout != nil {
			timeoutSeverity = cr.rule.Timeout.Severity.String()
		}
		s.Rules = append(s.Rules, RuleSummary{
			Rule:               cr.rule.Name,
			Severity:           cr.rule.Severity.String(),
			TimeoutSeverity:    timeoutSeverity,
			Alerts:             rr.alerts,
			TimedOut:           rr.timedOut,
			ConditionErrors:    cr.rule.ConditionErrors(),
			LastConditionError: cr.rule.LastConditionError(),
			EmitErrors:         cr.rule.EmitErrors(),
			LastEmitError:      cr.rule.LastEmitError(),
			Late:               int64(opStats.Late),
			Overflow:           rr.overflow,
			NoKey:              rr.noKey,
			EmptyKey:           rr.emptyKey,
			Dropped:            int64(opStats.DroppedPartialMatches),
			DroppedKeys:        topKeys(droppedKeys(r.host.keyOps[cr.spec].op, i, cr.rule)),
		})
	}
	var rejected int64
	for _, l := range s.Lookups {
		rejected += int64(l.Rejected)
	}
	if err := e.cfg.input.inputError(rs.Name, st, rejected, runErr); err != nil {
		return s, err
	}
	if runErr != nil {
		var oe *runtime.OperatorError
		var re *RuleError
		if errors.As(runErr, &oe) && errors.As(oe.Err, &re) {
			where := "at the end of the input" // the final watermark (Line 0)
			if oe.Line > 0 {
				where = fmt.Sprintf("line %d", oe.Line)
			}
			return s, fmt.Errorf("cep: rule %s, %s: %w", rs.Rules[re.Rule].Name, where, re.Err)
		}
		return s, fmt.Errorf("cep: %w", runErr)
	}
	return s, nil
}

// hostOperator is the runtime operator of an engine: it hosts one
// SharedOperator per key specification, tells the event observers of
// each event, and emits the matches as alerts in rule order, as one
// operator per rule called in rule order did.
type hostOperator struct {
	e      *Engine
	keyOps []keyOperator // by Engine.specs
	rules  []ruleCounters
	out    Output // the matches of one call, for dispatch
	events []EventObserver
	lates  []LateObserver
	alert  Alert // scratch
	// needAlerts says that someone reads the alerts (a writer or an
	// observer): else they are only counted.
	needAlerts    bool
	alerts, late  int64
	lateBy        event.Time     // the furthest a late event was behind its operator's watermark (Summary.LateBy)
	shadowSigs    map[string]int // compareShadow's scratch
	sigBuf        []byte
	counterRecord state.Key
	mode          TimeMode // of the shared operators
	// changes counts the changes of the rules' alerts, overflow, events
	// without the key and dropped partial matches (comparisons change
	// with alerts): a subtask
	// hands them to its monitor only when it moved.
	changes uint64
	// vanished are the records of operators a migration dropped, to
	// delete at the next snapshot.
	vanished []state.Key
	// agg holds the events until the watermark and sets their velocity
	// aggregates (a backtest's host; nil without aggregates, and in a
	// live job, whose coordinator runs them).
	agg runtime.Aggregation
	// retired are the counters of the rule states a switch let go (a
	// removed rule's, a changed one's once drained), by rule name and
	// severity, checkpointed with the others: a restarted process's
	// totals count them as the process that let them go did.
	retired []retiredCount
}

// retiredCount is the counters of the rule states let go of one rule
// name and severity (ruleCounters; a shadow rule's are not kept, nor its
// partial matches over the limit, which its operator counted).
type retiredCount struct {
	key                               ruleKey
	alerts, timedOut, overflow, noKey int64
}

// addRetired adds to list the counters c of a rule of key k.
func addRetired(list []retiredCount, k ruleKey, c retiredCount) []retiredCount {
	i := slices.IndexFunc(list, func(r retiredCount) bool { return r.key == k })
	if i < 0 {
		list = append(list, retiredCount{key: k})
		i = len(list) - 1
	}
	r := &list[i]
	r.alerts += c.alerts
	r.timedOut += c.timedOut
	r.overflow += c.overflow
	r.noKey += c.noKey
	return list
}

// keyOperator is the shared operator of the rules of one key
// specification.
type keyOperator struct {
	spec  *keySpec
	op    *SharedOperator
	out   Output
	drops uint64 // op.Drops() when drain last looked
}

// ruleCounters are the engine's counters of one rule (the operator keeps
// the others). Of a shadow comparison: an active rule's compared are its
// alerts while a shadow rule of its name runs; a shadow rule's compared
// its alerts while that active rule runs (since the later of the two
// switches: see sameTwin), its overlap the matches the active rule raised
// too.
type ruleCounters struct {
	alerts, overflow, noKey int64
	emptyKey                int64 // events whose key is an empty string (a backtest's figure: not checkpointed)
	compared, overlap       int64
	timedOut                int64 // of alerts, those of timed-out partial matches
}

func (e *Engine) newHost(mode TimeMode) (*hostOperator, error) {
	h := &hostOperator{
		e:             e,
		mode:          mode,
		rules:         make([]ruleCounters, len(e.rules)),
		needAlerts:    e.cfg.alerts != nil || len(e.cfg.observers) > 0,
		counterRecord: e.counterKey(),
	}
	for _, o := range e.cfg.observers {
		if eo, ok := o.(EventObserver); ok {
			h.events = append(h.events, eo)
		}
		if lo, ok := o.(LateObserver); ok {
			h.lates = append(h.lates, lo)
		}
	}
	for i := range e.specs {
		op, err := NewSharedOperator(h.sharedConfig(i), e.sharedRules(i)...)
		if err != nil {
			return nil, fmt.Errorf("cep: rule %s: %w", e.rules[e.specs[i].rules[0]].rule.Name, err)
		}
		h.keyOps = append(h.keyOps, keyOperator{spec: &e.specs[i], op: op})
	}
	return h, nil
}

// sharedConfig is the configuration of the shared operator of key
// specification spec.
func (h *hostOperator) sharedConfig(spec int) SharedConfig {
	return SharedConfig{Key: h.e.specs[spec].key, MaxBufferedEvents: h.e.cfg.maxBuffered, TimeMode: h.mode}
}

func (e *Engine) sharedRules(spec int) []SharedRule {
	var out []SharedRule
	for _, i := range e.specs[spec].rules {
		cr := &e.rules[i]
		out = append(out, SharedRule{ID: i, NFA: cr.nfa, MaxPartialMatches: e.cfg.maxPartial, StepDeadlines: cr.rule.Timeout != nil})
	}
	return out
}

func (h *hostOperator) ProcessElement(ev *event.Event, ts event.Time, out runtime.Collector[emitted]) error {
	for _, o := range h.events {
		o.OnEvent(ev)
	}
	if h.agg != nil && h.agg.Add(ev) {
		return nil // until the watermark passes it
	}
	return h.processMasked(ev, ts, allSpecs, out)
}

// allSpecs is the mask of processMasked for every key specification.
const allSpecs = ^uint64(0)

// processMasked hands ev to the shared operators of the key
// specifications in mask (bits of Engine.specs; allSpecs for all): a
// subtask of a streaming job owns only some of an event's keys.
func (h *hostOperator) processMasked(ev *event.Event, ts event.Time, mask uint64, out runtime.Collector[emitted]) error {
	var errs []error // nil unless something failed: no allocation per event
	for i := range h.keyOps {
		if mask != allSpecs && mask&(1<<i) == 0 {
			continue
		}
		ko := &h.keyOps[i]
		if hasNullKey(ev, ko.spec.slots) {
			for _, r := range ko.spec.counted {
				h.rules[r].noKey++
			}
			h.changes++ // (the monitor's status and metrics have them)
			continue
		}
		if hasEmptyKey(ev, ko.spec.all) {
			// Matched as one key, as Flink does: counted, for the
			// summary's word (web clients without a device id).
			for _, r := range ko.spec.counted {
				h.rules[r].emptyKey++
			}
		}
		err := ko.op.ProcessElement(ev, ts, &ko.out)
		if derr := h.drain(ko, out); derr != nil || err != nil {
			errs = append(errs, derr, err)
		}
	}
	return h.dispatch(errors.Join(errs...), out)
}

// setProcessingTime advances the processing clock of every shared
// operator to t (processing time only).
func (h *hostOperator) setProcessingTime(t event.Time, out runtime.Collector[emitted]) error {
	return h.advance(out, func(op *SharedOperator, o *Output) error { return op.SetProcessingTime(t, o) })
}

func (h *hostOperator) ProcessWatermark(w event.Watermark, out runtime.Collector[emitted]) error {
	if h.agg != nil {
		if err := h.agg.Advance(w, func(ev *event.Event) error { return h.processMasked(ev, ev.Time, allSpecs, out) }); err != nil {
			return err
		}
	}
	return h.processWatermarkMasked(w, 0, out)
}

// processWatermarkMasked is ProcessWatermark for the shared operators of
// the key specifications in mask only (0: all): a Kafka job's rules keyed
// by the record key go by the input's watermark, the repartitioned ones
// by their repartition partitions'.
func (h *hostOperator) processWatermarkMasked(w event.Watermark, mask uint64, out runtime.Collector[emitted]) error {
	return h.advanceMasked(mask, out, func(op *SharedOperator, o *Output) error { return op.ProcessWatermark(w, o) })
}

// advance applies a time advance to every shared operator, then emits
// what they released.
func (h *hostOperator) advance(out runtime.Collector[emitted], f func(*SharedOperator, *Output) error) error {
	return h.advanceMasked(0, out, f)
}

// advanceMasked is advance for the operators of the specifications in
// mask (0: all).
func (h *hostOperator) advanceMasked(mask uint64, out runtime.Collector[emitted], f func(*SharedOperator, *Output) error) error {
	var errs []error
	for i := range h.keyOps {
		if mask != 0 && mask&(1<<i) == 0 {
			continue
		}
		ko := &h.keyOps[i]
		err := f(ko.op, &ko.out)
		if derr := h.drain(ko, out); derr != nil || err != nil {
			errs = append(errs, derr, err)
		}
	}
	return h.dispatch(errors.Join(errs...), out)
}

// drain emits the late elements and the overflowing ones (counted per
// rule, and written to the late output with the rules that did not see
// them: one record per key specification that refused the event) and
// moves the matches to h.out, for dispatch.
func (h *hostOperator) drain(ko *keyOperator, out runtime.Collector[emitted]) error {
	var err error
	for i := range ko.out.Items {
		it := &ko.out.Items[i]
		switch it.Kind {
		case ItemMatch, ItemTimeout:
			// Timeouts come only from the rules with a timeout block
			// (their NFAs alone are compiled with nfa.WithTimeouts).
			h.out.Items = append(h.out.Items, *it)
		case ItemLate:
			// Every rule sees the same watermark, so an event late for
			// one is late for all: report it once, for the first
			// operator.
			if ko.spec.rules[0] == 0 {
				h.late++
				h.lateBy = max(h.lateBy, ko.op.Watermark()-it.At)
				for _, o := range h.lates {
					o.OnLate(it.Event)
				}
				if cerr := out.Collect(emitted{late: it.Event}); err == nil {
					err = cerr
				}
			}
		case ItemOverflow:
			for _, r := range ko.spec.counted {
				h.rules[r].overflow++
				h.changes++
			}
			if cerr := out.Collect(emitted{late: it.Event, limit: ko.spec.names}); err == nil {
				err = cerr
			}
		}
	}
	ko.out.Reset()
	if d := ko.op.Drops(); d != ko.drops {
		ko.drops = d
		h.changes++ // a rule dropped partial matches (the operator counts them)
	}
	return err
}

// dispatch emits the matches gathered from the shared operators in rule
// order, then returns err or the first error of the collector.
func (h *hostOperator) dispatch(err error, out runtime.Collector[emitted]) error {
	items := h.out.Items
	if !slices.IsSortedFunc(items, byRule) {
		slices.SortStableFunc(items, byRule)
	}
	items = h.sortTimeouts(items)
	var cerr error
	compare := false
	for i := range items {
		it := &items[i]
		cr := &h.e.rules[it.Rule]
		if (cr.drain || cr.after > event.MinTime) && !cr.emits(firstTime(it.Match.Events)) {
			it.Rule = -1 // the match belongs to the other side of a switch
			continue
		}
		if it.Kind == ItemMatch && cr.rule.Timeout != nil && cr.rule.Timeout.Only {
			it.Rule = -1 // the rule alerts for its timed-out partial matches alone
			continue
		}
		h.rules[it.Rule].alerts++
		if it.Kind == ItemTimeout {
			h.rules[it.Rule].timedOut++
		}
		h.changes++
		if !cr.shadow {
			h.alerts++ // the main output's
		}
		if cr.twin >= 0 {
			compare = true
		}
		if !h.needAlerts {
			continue
		}
		makeAlert(&h.alert, cr.rs, cr.rule, it, cr.null)
		if err := out.Collect(emitted{alert: &h.alert, shadow: cr.shadow}); cerr == nil {
			cerr = err
		}
	}
	if compare {
		h.compareShadow(items)
	}
	h.out.Reset()
	if err != nil {
		return err
	}
	return cerr
}

// compareShadow counts, among the matches of one call, those of active
// rules compared with a shadow rule, and those both sides raised: the
// same events at the same key (a match both versions find completes at
// the same element or timeout, so in the same call).
func (h *hostOperator) compareShadow(items []Item) {
	clear(h.shadowSigs)
	if h.shadowSigs == nil {
		h.shadowSigs = map[string]int{}
	}
	sig := func(pair int, it *Item) string {
		b := binary.AppendUvarint(h.sigBuf[:0], uint64(pair))
		b = append(b, byte(it.Kind)) // a match and a timeout of the same events differ
		b = binary.AppendUvarint(b, uint64(len(it.Key)))
		b = append(b, it.Key...)
		for _, evs := range it.Match.Events {
			b = binary.AppendUvarint(b, uint64(len(evs)))
			for _, e := range evs {
				b = binary.AppendUvarint(b, e.Seq)
			}
		}
		h.sigBuf = b
		return string(b)
	}
	for i := range items {
		it := &items[i]
		if it.Rule >= 0 {
			if cr := &h.e.rules[it.Rule]; cr.shadow && cr.twin >= 0 {
				h.shadowSigs[sig(it.Rule, it)]++
				h.rules[it.Rule].compared++
			}
		}
	}
	for i := range items {
		it := &items[i]
		if it.Rule < 0 {
			continue
		}
		cr := &h.e.rules[it.Rule]
		if cr.shadow || cr.twin < 0 {
			continue
		}
		h.rules[it.Rule].compared++
		if k := sig(cr.twin, it); h.shadowSigs[k] > 0 {
			h.shadowSigs[k]--
			h.rules[cr.twin].overlap++
		}
	}
}

func byRule(a, b Item) int { return a.Rule - b.Rule }

// sortTimeouts puts each run of timed-out partial matches of one rule and
// key in items in the order of their times, then of their alert ids. The
// automaton gives those of one time advance in the order of its queue,
// which depends on how time advanced (a watermark every event or every
// 256): sorted, a key's alerts come in the same order whatever the
// cadence, layout or restarts. Timeouts of one run that came from two
// advances stay in order: those of the later one timed out after the
// earlier one's time. Matches keep the automaton's order, which is
// canonical already.
func (h *hostOperator) sortTimeouts(items []Item) []Item {
	return sortTimeouts(items, func(it *Item) string {
		cr := &h.e.rules[it.Rule]
		return alertID(cr.rs, cr.rule, it.Key, it.Match.Events, true)
	})
}

// sortTimeouts sorts each run of ItemTimeout items of one rule and key by
// At, then by id (their alert ids, computed once per item of a run of
// two or more), and drops the repeats of an item: the same id (the same
// events in the same stages) at the same time. Flink times out each of
// its computation states, and two of them may hold one partial match (a
// branch that ignored an event beside one that proceeded past an optional
// stage or a loop): one partial match is one alert. It returns items
// without the repeats.
func sortTimeouts(items []Item, id func(*Item) string) []Item {
	out := 0
	for i := 0; i < len(items); {
		j := i + 1
		if items[i].Kind == ItemTimeout {
			for j < len(items) && items[j].Kind == ItemTimeout && items[j].Rule == items[i].Rule && items[j].Key == items[i].Key {
				j++
			}
		}
		if j-i == 1 {
			items[out] = items[i]
			out++
			i = j
			continue
		}
		type keyed struct {
			it Item
			id string
		}
		run := make([]keyed, 0, j-i)
		for k := range items[i:j] {
			run = append(run, keyed{items[i+k], id(&items[i+k])})
		}
		slices.SortFunc(run, func(a, b keyed) int {
			if c := cmp.Compare(a.it.At, b.it.At); c != 0 {
				return c
			}
			return strings.Compare(a.id, b.id)
		})
		for k, x := range run {
			if k > 0 && x.it.At == run[k-1].it.At && x.id == run[k-1].id {
				continue
			}
			items[out] = x.it
			out++
		}
		i = j
	}
	clear(items[out:])
	return items[:out]
}

// counterStateVersion is the first byte of the counter record (1: without
// the shadow counters; 2: without the timed-out alerts; 3: without the
// furthest late event and the retired rule states' counters).
const counterStateVersion = 4

// Snapshot writes, for each shared operator, what changed since the last
// checkpoint ([SharedOperator.SnapshotTo]: its header record and a record
// per changed key, in the key's key group), and the engine's counters as
// one more record. w is the store every checkpoint writes into.
func (h *hostOperator) Snapshot(w state.Writer) error {
	if err := h.snapshotBegin(w); err != nil {
		return err
	}
	_, err := h.snapshotStep(-1)
	return err
}

// snapshotBegin is the incremental Snapshot: the headers and the counters
// now, the keys by snapshotStep ([SharedOperator.SnapshotBegin]).
func (h *hostOperator) snapshotBegin(w state.Writer) error {
	for _, k := range h.vanished {
		if err := w.Delete(k); err != nil {
			return err
		}
	}
	h.vanished = nil
	for i := range h.keyOps {
		ko := &h.keyOps[i]
		if err := ko.op.SnapshotBegin(w, ko.spec.id); err != nil {
			return err
		}
	}
	b := []byte{counterStateVersion}
	b = binary.AppendVarint(b, h.alerts)
	b = binary.AppendVarint(b, h.late)
	b = binary.AppendUvarint(b, uint64(len(h.rules)))
	for _, r := range h.rules {
		b = binary.AppendVarint(b, r.alerts)
		b = binary.AppendVarint(b, r.overflow)
		b = binary.AppendVarint(b, r.noKey)
		b = binary.AppendVarint(b, r.compared)
		b = binary.AppendVarint(b, r.overlap)
		b = binary.AppendVarint(b, r.timedOut)
	}
	b = binary.AppendVarint(b, int64(h.lateBy))
	b = binary.AppendUvarint(b, uint64(len(h.retired)))
	for _, r := range h.retired {
		for _, s := range [...]string{r.key.rule, r.key.severity, r.key.timeoutSeverity} {
			b = binary.AppendUvarint(b, uint64(len(s)))
			b = append(b, s...)
		}
		b = binary.AppendVarint(b, r.alerts)
		b = binary.AppendVarint(b, r.timedOut)
		b = binary.AppendVarint(b, r.overflow)
		b = binary.AppendVarint(b, r.noKey)
	}
	if h.agg != nil {
		if err := w.Put(h.e.aggregateRecord(), h.agg.AppendBinary(nil)); err != nil {
			return err
		}
	}
	return w.Put(h.counterRecord, b)
}

// snapshotStep writes up to n more keys of the snapshot in progress (all
// for n < 0) and reports whether it is done.
func (h *hostOperator) snapshotStep(n int) (done bool, err error) {
	for i := range h.keyOps {
		op := h.keyOps[i].op
		if !op.Snapshotting() {
			continue
		}
		if n < 0 {
			_, err := op.SnapshotStep(-1)
			if err != nil {
				return true, err
			}
			continue
		}
		done, err := op.SnapshotStep(n)
		if err != nil || !done {
			return done, err
		}
		return false, nil // the next operator at the next step
	}
	return true, nil
}

// Restore replaces each shared operator by the one its records restore,
// and sets the engine's counters.
func (h *hostOperator) Restore(r state.Reader) error {
	for i := range h.keyOps {
		ko := &h.keyOps[i]
		op, err := RestoreSharedOperatorFrom(h.sharedConfig(i), h.e.sharedRules(i), r, ko.spec.id)
		if err != nil {
			return err
		}
		ko.op = op
	}
	b, err := oneRecord(r, h.counterRecord)
	if err != nil {
		return err
	}
	c, err := decodeCounters(b, len(h.rules))
	if err != nil {
		return err
	}
	h.alerts, h.late, h.lateBy, h.rules, h.retired = c.alerts, c.late, c.lateBy, c.rules, c.retired
	if h.agg != nil {
		b, err := oneRecord(r, h.e.aggregateRecord())
		if err != nil {
			return err
		}
		if err := h.agg.Restore(b); err != nil {
			return err
		}
	}
	return nil
}

// counterRecord is the engine's counters of one subtask.
type counterRecord struct {
	alerts, late int64
	lateBy       event.Time
	rules        []ruleCounters
	retired      []retiredCount
}

// decodeCounters decodes the counter record of an engine of n rules.
func decodeCounters(b []byte, n int) (counterRecord, error) {
	var c counterRecord
	d := event.Reader{B: b, Corrupt: ErrCorruptSnapshot}
	v := d.Byte()
	if d.Err == nil && v > counterStateVersion {
		return c, state.LaterRecord("the engine's counters", uint64(v), counterStateVersion)
	}
	if v < 1 {
		d.Fail()
	}
	c.alerts, c.late = d.Varint(), d.Varint()
	if d.Count() != n {
		d.Fail()
	}
	c.rules = make([]ruleCounters, n)
	for i := range c.rules {
		c.rules[i] = ruleCounters{alerts: d.Varint(), overflow: d.Varint(), noKey: d.Varint()}
		if v >= 2 {
			c.rules[i].compared, c.rules[i].overlap = d.Varint(), d.Varint()
		}
		if v >= 3 {
			c.rules[i].timedOut = d.Varint()
		}
	}
	if v >= 4 {
		c.lateBy = event.Time(d.Varint())
		for range d.Count() {
			var r retiredCount
			for _, s := range [...]*string{&r.key.rule, &r.key.severity, &r.key.timeoutSeverity} {
				*s = string(d.Bytes(d.Count()))
			}
			r.alerts, r.timedOut, r.overflow, r.noKey = d.Varint(), d.Varint(), d.Varint(), d.Varint()
			if d.Err != nil {
				break
			}
			c.retired = append(c.retired, r)
		}
	}
	if d.Err != nil || len(d.B) != 0 {
		return counterRecord{}, fmt.Errorf("%w: the engine's counters", ErrCorruptSnapshot)
	}
	return c, nil
}

// counterKey is the state key of the engine's counters (one record per
// subtask).
func (e *Engine) counterKey() state.Key {
	return state.Key{Operator: state.OperatorID("cep/" + e.cfg.ruleset.Name)}
}

// restoreParts restores the host of a subtask owning the key groups of
// groups from the stores of the subtasks of a checkpoint taken with
// another parallelism or backend, or of several checkpoints (parts): each
// shared operator takes its keys in groups; the counters of the parts
// counted says, summed, go to the subtask given counted (one per job),
// the others start at zero.
func (h *hostOperator) restoreParts(parts []state.Reader, groups state.KeyGroupRange, counted func(part int) bool, prevs []*Engine) error {
	if err := h.dropVanished(parts, groups, prevs); err != nil {
		return err
	}
	var fresh []int // operators of key fields no part has
	for i := range h.keyOps {
		ko := &h.keyOps[i]
		var op *SharedOperator
		var err error
		if prevs == nil {
			op, err = RestoreSharedOperatorParts(h.sharedConfig(i), h.e.sharedRules(i), parts, ko.spec.id, groups, counted)
		} else {
			var isNew bool
			if op, isNew, err = h.restoreMigrated(i, parts, groups, counted, prevs); isNew {
				fresh = append(fresh, i)
			}
		}
		if err != nil {
			return err
		}
		ko.op = op
	}
	if err := h.seed(fresh, parts, groups, prevs); err != nil {
		return err
	}
	h.alerts, h.late, h.lateBy, h.retired = 0, 0, 0, nil
	h.rules = make([]ruleCounters, len(h.rules))
	if counted == nil {
		return nil
	}
	for i, r := range parts {
		if !counted(i) {
			continue
		}
		from := h.e
		if prevs != nil && prevs[i] != nil {
			from = prevs[i]
		}
		b, err := oneRecord(r, from.counterKey())
		if err != nil {
			return err
		}
		c, err := decodeCounters(b, len(from.rules))
		if err != nil {
			return err
		}
		h.alerts += c.alerts
		h.late += c.late
		h.lateBy = max(h.lateBy, c.lateBy)
		for _, r := range c.retired {
			h.retired = addRetired(h.retired, r.key, r)
		}
		for ri, rc := range c.rules {
			t := ri
			if from != h.e {
				if t = h.e.ruleByID(from.rules[ri].id); t < 0 {
					if fr := &from.rules[ri]; !fr.shadow {
						// Let go: its counters go on as the retired ones.
						h.retired = addRetired(h.retired, keyOf(fr.rule), retiredCount{alerts: rc.alerts, timedOut: rc.timedOut, overflow: rc.overflow, noKey: rc.noKey})
					}
					continue
				}
			}
			h.rules[t].alerts += rc.alerts
			h.rules[t].timedOut += rc.timedOut
			h.rules[t].overflow += rc.overflow
			h.rules[t].noKey += rc.noKey
			if (from.plan == nil || h.e.plan == nil || from.plan.Shadow == h.e.plan.Shadow) && sameTwin(from, ri, h.e, t) {
				// (A new shadow is compared from its start, and a
				// shadow rule from its active twin's last change.)
				h.rules[t].compared += rc.compared
				h.rules[t].overlap += rc.overlap
			}
		}
	}
	return nil
}

// sameTwin says whether rule i of engine a and rule j of engine b, the
// same rule state, are compared with the same rule state: a shadow rule
// whose active twin changed (a deploy of another active version that
// changes the rule of its name) starts its comparison again, as the new
// twin's does (its alerts compared, and the overlap, from 0: the overlap
// kept beside an active count from 0 made only-active negative). An
// active rule's comparison is its own (compared from its own id).
func sameTwin(a *Engine, i int, b *Engine, j int) bool {
	ta, tb := a.rules[i].twin, b.rules[j].twin
	switch {
	case !a.rules[i].shadow || ta < 0 && tb < 0:
		return true
	case ta < 0 || tb < 0:
		return false // a twin came, or went
	}
	return a.rules[ta].id == b.rules[tb].id
}

// restoreMigrated restores the shared operator of key specification
// spec from parts taken by other engines (a hot-loading switch): prevs[i]
// took part i (nil: this engine). From each part, the operator of the
// same key fields, each rule's state going to the rule of the same id
// (planRule.ID); a part without such an operator gives nothing.
func (h *hostOperator) restoreMigrated(spec int, parts []state.Reader, groups state.KeyGroupRange, counted func(part int) bool, prevs []*Engine) (op *SharedOperator, isNew bool, err error) {
	e := h.e
	fields := e.rules[e.specs[spec].rules[0]].rule.KeyFields
	ops := make([]state.OperatorID, len(parts))
	migs := make([]*ruleMigration, len(parts))
	for p := range parts {
		prev := prevs[p]
		if prev == nil {
			ops[p] = e.specs[spec].id
			continue
		}
		old := slices.IndexFunc(prev.specs, func(ks keySpec) bool {
			return slices.Equal(prev.rules[ks.rules[0]].rule.KeyFields, fields)
		})
		if old < 0 {
			continue
		}
		mig := &ruleMigration{old: prev.sharedRules(old)}
		for _, ri := range prev.specs[old].rules {
			mig.to = append(mig.to, slices.IndexFunc(e.specs[spec].rules, func(i int) bool { return e.rules[i].id == prev.rules[ri].id }))
		}
		ops[p], migs[p] = prev.specs[old].id, mig
	}
	isNew = !slices.ContainsFunc(ops, func(id state.OperatorID) bool { return id != "" })
	op, err = restoreMigrated(h.sharedConfig(spec), e.sharedRules(spec), parts, ops, groups, counted, migs)
	return op, isNew, err
}

// seed gives the new operators (of key fields no operator had before a
// switch) the events the others buffer, those after the switch's
// watermark, in arrival order, with the others' clocks: so that a rule
// with new key fields sees, as one with old ones does, every event after
// the switch. The events come from every part (the source operator, the
// first restored one, restored over all key groups: its keys, and so its
// buffered events, are spread over every subtask of the checkpoint), and
// each new operator takes those of its own key groups, groups: with
// parallelism above 1 an event buffered at one subtask may belong, by
// the new key fields, to another. (An event that lacked the key fields of
// the source operator is not there.)
func (h *hostOperator) seed(fresh []int, parts []state.Reader, groups state.KeyGroupRange, prevs []*Engine) error {
	if len(fresh) == 0 {
		return nil
	}
	srcSpec := -1
	for i := range h.keyOps {
		if !slices.Contains(fresh, i) {
			srcSpec = i
			break
		}
	}
	if srcSpec < 0 {
		return nil
	}
	src := h.keyOps[srcSpec].op
	all, _, err := h.restoreMigrated(srcSpec, parts, state.AllKeyGroups, nil, prevs)
	if err != nil {
		return err
	}
	var evs []*event.Event
	for _, ks := range all.keys {
		for _, b := range ks.buf {
			evs = append(evs, b.evs...)
		}
	}
	slices.SortFunc(evs, func(a, b *event.Event) int {
		if c := compareTime(a.Time, b.Time); c != 0 {
			return c
		}
		return cmp.Compare(a.Seq, b.Seq)
	})
	for _, i := range fresh {
		ko := &h.keyOps[i]
		ko.op.watermark, ko.op.procTime = src.watermark, src.procTime
		for _, ev := range evs {
			if hasNullKey(ev, ko.spec.slots) || !groups.Contains(state.GroupOf(ko.spec.key(ev), keyGroups)) {
				continue
			}
			if err := ko.op.ProcessElement(ev, ev.Time, &ko.out); err != nil {
				return err
			}
		}
		ko.out.Reset() // buffered: nothing comes out before a watermark
	}
	return nil
}

// dropVanished lists for deletion, at the first snapshot, the keyed
// records in groups of the operators of prevs whose key fields no
// operator of this engine has (their rules all went): a changelog keeps
// records until they are deleted, and a later version with those key
// fields must not read them.
func (h *hostOperator) dropVanished(parts []state.Reader, groups state.KeyGroupRange, prevs []*Engine) error {
	keys := state.KeyGroupRange{First: groups.First, Last: min(groups.Last, headerGroup-1)}
	for p, prev := range prevs {
		if prev == nil {
			continue
		}
		for _, ks := range prev.specs {
			fields := prev.rules[ks.rules[0]].rule.KeyFields
			if slices.ContainsFunc(h.e.specs, func(s keySpec) bool {
				return slices.Equal(h.e.rules[s.rules[0]].rule.KeyFields, fields)
			}) {
				continue
			}
			for rec, err := range parts[p].Records(ks.id, keys) {
				if err != nil {
					return err
				}
				k := rec.Key
				k.Key = event.Key(strings.Clone(string(k.Key))) // a store may lend its bytes
				h.vanished = append(h.vanished, k)
			}
		}
	}
	return nil
}

// ruleByID is the index of the rule whose state is id, or -1.
func (e *Engine) ruleByID(id int) int {
	return slices.IndexFunc(e.rules, func(cr compiledRule) bool { return cr.id == id })
}

// oneRecord returns the value of the record k of r.
func oneRecord(r state.Reader, k state.Key) ([]byte, error) {
	groups := state.KeyGroupRange{First: k.KeyGroup, Last: k.KeyGroup}
	for rec, err := range r.Records(k.Operator, groups) {
		if err != nil {
			return nil, err
		}
		if rec.Key == k {
			return slices.Clone(rec.Value), nil
		}
	}
	return nil, fmt.Errorf("%w: no record %v", ErrCorruptSnapshot, k)
}

// sink is the collector of a run: it writes alerts and late events as JSON
// lines and tells the observers of each alert.
type sink struct {
	enc          *AlertEncoder
	observers    []Observer
	alerts, late *bufio.Writer
	buf          []byte
	err          error // the first write error, sticky
}

func newSink(e *Engine) *sink {
	s := &sink{enc: e.encoder, observers: e.cfg.observers}
	if e.cfg.alerts != nil {
		s.alerts = bufio.NewWriterSize(e.cfg.alerts, 1<<16)
	}
	if e.cfg.late != nil {
		s.late = bufio.NewWriterSize(e.cfg.late, 1<<12)
	}
	return s
}

func (s *sink) Collect(x emitted) error {
	if s.err != nil {
		return s.err
	}
	switch {
	case x.alert != nil:
		for _, o := range s.observers {
			o.OnAlert(x.alert)
		}
		if s.alerts != nil {
			s.buf = s.enc.AppendAlert(s.buf[:0], x.alert)
			s.write(s.alerts, alertsOutput)
		}
	case x.late != nil && s.late != nil && x.limit != nil:
		s.buf = s.enc.appendOverflow(s.buf[:0], x.late, x.limit)
		s.write(s.late, lateOutput)
	case x.late != nil && s.late != nil:
		s.buf = s.enc.appendLate(s.buf[:0], x.late)
		s.write(s.late, lateOutput)
	}
	return s.err
}

// The outputs a write error of a sink names (it said "cep: " and the
// writer's error alone).
const (
	alertsOutput = "alerts output"
	lateOutput   = "late events output"
)

func (s *sink) write(w io.Writer, output string) {
	if _, err := w.Write(s.buf); err != nil && s.err == nil {
		s.err = fmt.Errorf("cep: %s: %w", output, err)
	}
}

// flush writes what the buffers hold.
func (s *sink) flush() error {
	for _, out := range []struct {
		w    *bufio.Writer
		name string
	}{{s.alerts, alertsOutput}, {s.late, lateOutput}} {
		if out.w != nil {
			if err := out.w.Flush(); err != nil && s.err == nil {
				s.err = fmt.Errorf("cep: %s: %w", out.name, err)
			}
		}
	}
	return s.err
}

// mixedFields are the fields of mixed that rules of rs read (or key by),
// with those rules.
func mixedFields(rs *rules.Ruleset, mixed []jsonev.MixedField) []MixedField {
	var out []MixedField
	for _, f := range mixed {
		m := MixedField{Field: f.Name, Numbers: f.Numbers, Strings: f.Strings}
		for _, r := range rs.Rules {
			// A key field too: "123" and 123 are two keys.
			key := slices.Contains(r.KeyFields, f.Name)
			if key || slices.Contains(r.Reads, f.Name) {
				m.Rules = append(m.Rules, r.Name)
				m.Key = m.Key || key
			}
		}
		if len(m.Rules) > 0 {
			out = append(out, m)
		}
	}
	return out
}

// absentFields returns the fields of absent (no decoded event had them)
// that rules of rs read, each with those rules: what a rule reads of the
// input, not an aggregate's or a lookup's value, nor a field that only an
// observer reads (a label).
func absentFields(rs *rules.Ruleset, absent []string) []AbsentField {
	var out []AbsentField
	for _, f := range absent {
		if slices.ContainsFunc(rs.Aggregates, func(a *rules.Aggregate) bool { return a.Name == f }) ||
			slices.ContainsFunc(rs.Lookups, func(l *rules.Lookup) bool { return strings.HasPrefix(f, l.Name+".") }) {
			continue
		}
		a := AbsentField{Field: f}
		for _, r := range rs.Rules {
			if slices.Contains(r.Reads, f) {
				a.Rules = append(a.Rules, r.Name)
			}
		}
		if len(a.Rules) > 0 {
			out = append(out, a)
		}
	}
	return out
}
