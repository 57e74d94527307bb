package cep

import (
	"slices"

	"github.com/cepheus-cep/cepheus/rules"
)

// ruleTotals are the rules' counters over several jobs: a
// [StreamMonitor]'s over the process (MonitorSnapshot.Rules, Former and
// ShadowTotals; the metrics), and a run's over its switches (the rules of
// [StreamResult], job.totals): each rule's by name and severity, each
// shadow rule's by name.
//
// A job's figures are not that: its alerts, drops, events without the key
// and shadow comparison are per rule state (planRule.ID: a changed rule
// gets a new one, whose figures start at 0, and its old one goes when its
// draining ends; a rule added back gets a new one), restored from the
// checkpoint the job starts from; its condition and emit errors are per
// compiled rule (every switch compiles the rules again, from 0). The
// totals take from each of them what it grew by since it was last taken,
// so that none goes down: not when a switch lets a rule state go, nor when
// a restore goes back to an earlier checkpoint (the figures count again
// from the checkpoint's, and the totals grow again once they pass the
// highest taken, so that a replayed alert is not counted twice).
//
// REQUIRES: StreamMonitor.mu, for every method of a monitor's totals.
type ruleTotals struct {
	rules  []ruleTotal     // by name and severity, in the order first seen
	active []bool          // of rules: the rule is the active version's
	order  []int           // the active version's rules, in ruleset order: indexes in rules
	byKey  map[ruleKey]int // index in rules
	shadow []ShadowCount   // by shadow rule name, in the order first seen
	byName map[string]int  // index in shadow

	// What the totals took of the figures of each rule state (by id),
	// of each active rule's comparison with a shadow version, and of the
	// expression errors of each compiled rule of the engine running.
	ids      map[int]*taken
	retired  map[ruleKey]*taken // of the rule states let go (retiredCount), by name and severity
	compared map[comparedKey]*int64
	overlaps map[comparedKey]*int64 // of each shadow rule with an active twin, by the twin's comparison
	exprs    map[*rules.Rule]*exprTaken

	e     *Engine     // the engine slots are of
	slots []totalSlot // by index in e.rules
}

// ruleTotal is the totals of one rule name and severity: what the monitor
// publishes, and what a run's summary has besides (RuleSummary).
type ruleTotal struct {
	RuleCount
	overflow, partials int64      // of Dropped: events over the buffer limit, partial matches over theirs
	dropKeys           []KeyCount // the keys with the most of partials (a run's summary alone reads them)
	late               int64      // the highest late count of its operator seen (one per key specification, not per rule state)
	lastCond, lastEmit string     // the latest expression errors' messages (a run's summary alone reads them)
}

type ruleKey struct{ rule, severity, timeoutSeverity string }

// taken is the highest figures of a rule state the totals took.
type taken struct {
	alerts, timedOut, overflow, partials, noKey int64
	// gone says that the state was let go: its figures moved to the
	// totals' retired ones (bind).
	gone bool
}

// exprTaken is what the totals took of a compiled rule's expression
// errors.
type exprTaken struct{ cond, emit int64 }

// comparedKey names the comparison of an active rule (its id) with a
// shadow version: it starts at 0 with each shadow version.
type comparedKey struct {
	id     int
	shadow string
}

// totalSlot is where the figures of one rule of the engine go.
type totalSlot struct {
	total    int        // index in rules, or in shadow for a shadow rule
	taken    *taken     // of the rule's state
	compared *int64     // a shadow rule's: of its twin's comparison (nil: no twin)
	overlap  *int64     // a shadow rule's: of its overlap with that twin (nil: no twin)
	expr     *exprTaken // an active or draining rule's: of its expression errors
}

// ruleFigure is the counters of one rule of an engine, summed over the
// subtasks.
type ruleFigure struct {
	alerts, timedOut   int64
	overflow, partials int64      // events over the buffer limit, partial matches over theirs
	dropKeys           []KeyCount // the keys with the most of partials (a job's figures at its end; the monitor's have none)
	noKey              int64      // events without one of its key fields
	compared, overlap  int64      // of a shadow comparison
	late               int64      // its operator's late events (a run's summary's; the monitor leaves it 0)
}

// grow adds to *total what v grew past *took.
func grow(total, took *int64, v int64) {
	if v > *took {
		*total += v - *took
		*took = v
	}
}

// add takes the figures c of the rules of e (by index in e.rules), and
// the counters of the rule states let go before e's job (retired, summed
// over its subtasks).
func (t *ruleTotals) add(e *Engine, c []ruleFigure, retired []retiredCount) {
	if t.e != e {
		t.bind(e)
	}
	for _, r := range retired {
		// Taken already as a rule state's figures in this process
		// (bind), they grow nothing; a restarted process takes them
		// here, as the rule name's (Former once no rule has it).
		tk := t.retired[r.key]
		if tk == nil {
			tk = new(taken)
			t.retired[r.key] = tk
		}
		rt := &t.rules[t.ruleOfKey(r.key)]
		grow(&rt.Alerts, &tk.alerts, r.alerts)
		grow(&rt.TimedOut, &tk.timedOut, r.timedOut)
		grow(&rt.overflow, &tk.overflow, r.overflow)
		rt.Dropped = rt.overflow + rt.partials
		grow(&rt.NoKey, &tk.noKey, r.noKey)
	}
	if len(retired) > 0 && len(t.active) < len(t.rules) {
		t.active = append(t.active, make([]bool, len(t.rules)-len(t.active))...)
	}
	for i := range t.slots {
		if i >= len(c) {
			break
		}
		sl, cr, f := &t.slots[i], &e.rules[i], &c[i]
		if cr.shadow {
			sc := &t.shadow[sl.total]
			grow(&sc.Shadow, &sl.taken.alerts, f.alerts)
			if sl.compared != nil {
				grow(&sc.Overlap, sl.overlap, f.overlap)
				grow(&sc.Active, sl.compared, c[cr.twin].compared)
			}
			continue
		}
		rt := &t.rules[sl.total]
		grow(&rt.Alerts, &sl.taken.alerts, f.alerts)
		grow(&rt.TimedOut, &sl.taken.timedOut, f.timedOut)
		grow(&rt.overflow, &sl.taken.overflow, f.overflow)
		grow(&rt.partials, &sl.taken.partials, f.partials)
		rt.Dropped = rt.overflow + rt.partials
		rt.dropKeys = addKeyCounts(rt.dropKeys, f.dropKeys)
		grow(&rt.NoKey, &sl.taken.noKey, f.noKey)
		grow(&rt.ConditionErrors, &sl.expr.cond, int64(cr.rule.ConditionErrors()))
		grow(&rt.EmitErrors, &sl.expr.emit, int64(cr.rule.EmitErrors()))
		rt.late = max(rt.late, f.late)
	}
}

// takeLastErrors keeps the messages of the latest expression errors of
// the rules of the engine bound (a run's summary): a rule's compiled
// again by a switch has none until it fails again.
func (t *ruleTotals) takeLastErrors() {
	if t.e == nil {
		return
	}
	for i := range t.slots {
		cr := &t.e.rules[i]
		if cr.shadow {
			continue
		}
		rt := &t.rules[t.slots[i].total]
		if msg := cr.rule.LastConditionError(); msg != "" {
			rt.lastCond = msg
		}
		if msg := cr.rule.LastEmitError(); msg != "" {
			rt.lastEmit = msg
		}
	}
}

// bind makes the slots of the rules of e, a new job's engine.
func (t *ruleTotals) bind(e *Engine) {
	if t.byKey == nil {
		t.byKey, t.byName = map[ruleKey]int{}, map[string]int{}
		t.forgetIDs()
	}
	shadowVersion := ""
	if e.plan != nil {
		shadowVersion = e.plan.Shadow
	}
	if old := t.e; old != nil {
		t.retire(old, e)
	}
	t.e = e
	t.slots = make([]totalSlot, len(e.rules))
	// Only the running rules' expression errors are kept: a rule
	// compiled again counts from 0.
	exprs := make(map[*rules.Rule]*exprTaken, len(e.rules))
	for i := range e.rules {
		cr, sl := &e.rules[i], &t.slots[i]
		if sl.taken = t.ids[cr.id]; sl.taken == nil {
			sl.taken = new(taken)
			t.ids[cr.id] = sl.taken
		}
		if cr.shadow {
			sl.total = t.shadowOf(cr.rule.Name)
			if cr.twin >= 0 {
				k := comparedKey{e.rules[cr.twin].id, shadowVersion}
				if sl.compared = t.compared[k]; sl.compared == nil {
					sl.compared = new(int64)
					t.compared[k] = sl.compared
				}
				// The overlap starts again with the twin (sameTwin).
				if sl.overlap = t.overlaps[k]; sl.overlap == nil {
					sl.overlap = new(int64)
					t.overlaps[k] = sl.overlap
				}
			}
			continue
		}
		sl.total = t.ruleOf(cr.rule)
		if sl.expr = t.exprs[cr.rule]; sl.expr == nil {
			sl.expr = new(exprTaken)
		}
		exprs[cr.rule] = sl.expr
	}
	t.exprs = exprs
	t.order = t.order[:0]
	for _, r := range e.cfg.ruleset.Rules {
		t.order = append(t.order, t.ruleOf(r))
	}
	t.active = append(t.active[:0], make([]bool, len(t.rules))...)
	for _, i := range t.order {
		t.active[i] = true
	}
}

// retire moves what the totals took of the rule states of old that e let
// go to what they took of the retired counters of their rule name: e's
// job counts them among those (retiredCount), with the figures it took.
func (t *ruleTotals) retire(old, e *Engine) {
	for i := range old.rules {
		cr := &old.rules[i]
		tk := t.ids[cr.id]
		if cr.shadow || tk == nil || tk.gone || e.ruleByID(cr.id) >= 0 {
			continue
		}
		tk.gone = true
		k := keyOf(cr.rule)
		r := t.retired[k]
		if r == nil {
			r = new(taken)
			t.retired[k] = r
		}
		r.alerts += tk.alerts
		r.timedOut += tk.timedOut
		r.overflow += tk.overflow
		r.noKey += tk.noKey
	}
}

// ruleOf returns the index in t.rules of r's name, severity and timeout
// severity, added if new.
func (t *ruleTotals) ruleOf(r *rules.Rule) int {
	return t.ruleOfKey(keyOf(r))
}

// keyOf is the name and severities of r.
func keyOf(r *rules.Rule) ruleKey {
	k := ruleKey{rule: r.Name, severity: r.Severity.String()}
	if r.Timeout != nil {
		k.timeoutSeverity = r.Timeout.Severity.String()
	}
	return k
}

// ruleOfKey returns the index in t.rules of k, added if new.
func (t *ruleTotals) ruleOfKey(k ruleKey) int {
	i, ok := t.byKey[k]
	if !ok {
		i = len(t.rules)
		t.byKey[k] = i
		t.rules = append(t.rules, ruleTotal{RuleCount: RuleCount{Rule: k.rule, Severity: k.severity, TimeoutSeverity: k.timeoutSeverity}})
	}
	return i
}

// shadowOf returns the index in t.shadow of a shadow rule's name, added
// if new.
func (t *ruleTotals) shadowOf(name string) int {
	i, ok := t.byName[name]
	if !ok {
		i = len(t.shadow)
		t.byName[name] = i
		t.shadow = append(t.shadow, ShadowCount{Rule: name})
	}
	return i
}

// forgetIDs forgets what was taken of the rule states: a job without a
// checkpoint numbers them again from 1, every figure from 0.
func (t *ruleTotals) forgetIDs() {
	t.ids, t.compared, t.overlaps = map[int]*taken{}, map[comparedKey]*int64{}, map[comparedKey]*int64{}
	t.retired = map[ruleKey]*taken{}
	t.e = nil
}

// counts appends to rules the counts of the active version's rules, in
// ruleset order, and to former those of the others, in the order first
// seen.
func (t *ruleTotals) counts(rules, former []RuleCount) ([]RuleCount, []RuleCount) {
	for _, i := range t.order {
		rules = append(rules, t.rules[i].RuleCount)
	}
	for i := range t.rules {
		if !t.active[i] {
			former = append(former, t.rules[i].RuleCount)
		}
	}
	return rules, former
}

// summaries are the rules of a run's summary: the active version's, in
// ruleset order, then the others counted in the run (Former).
func (t *ruleTotals) summaries() []RuleSummary {
	out := make([]RuleSummary, 0, len(t.rules))
	for _, i := range t.order {
		out = append(out, t.rules[i].summary(false))
	}
	for i := range t.rules {
		if !t.active[i] {
			out = append(out, t.rules[i].summary(true))
		}
	}
	return slices.Clip(out)
}

// summary is rt as a run's summary has it.
func (rt *ruleTotal) summary(former bool) RuleSummary {
	return RuleSummary{
		Rule: rt.Rule, Severity: rt.Severity, TimeoutSeverity: rt.TimeoutSeverity, Former: former,
		Alerts: rt.Alerts, TimedOut: rt.TimedOut,
		ConditionErrors: uint64(rt.ConditionErrors), LastConditionError: rt.lastCond,
		EmitErrors: uint64(rt.EmitErrors), LastEmitError: rt.lastEmit,
		Late: rt.late, Overflow: rt.overflow, NoKey: rt.NoKey, Dropped: rt.partials,
		DroppedKeys: topKeys(rt.dropKeys),
	}
}
