package cep

import "github.com/cepheus-cep/cepheus/rules"

// ruleTotals are the rules' counters a [StreamMonitor] publishes
// (MonitorSnapshot.Rules, Former and ShadowTotals; the metrics): each
// rule's by name and severity, each shadow rule's by name, over the
// process.
//
// A job's figures are not that: its alerts, drops and shadow comparison
// are per rule state (planRule.ID: a changed rule gets a new one, whose
// figures start at 0, and its old one goes when its draining ends; a rule
// added back gets a new one), restored from the checkpoint the job starts
// from; its condition errors are per compiled rule (every switch compiles
// the rules again, from 0). The totals take from each of them what it
// grew by since it was last taken, so that none goes down: not when a
// switch lets a rule state go, nor when a restore goes back to an earlier
// checkpoint (the figures count again from the checkpoint's, and the
// totals grow again once they pass the highest taken, so that a replayed
// alert is not counted twice).
//
// REQUIRES: StreamMonitor.mu, for every method.
type ruleTotals struct {
	rules  []RuleCount     // by name and severity, in the order first seen
	active []bool          // of rules: the rule is the active version's
	order  []int           // the active version's rules, in ruleset order: indexes in rules
	byKey  map[ruleKey]int // index in rules
	shadow []ShadowCount   // by shadow rule name, in the order first seen
	byName map[string]int  // index in shadow

	// What the totals took of the figures of each rule state (by id),
	// of each active rule's comparison with a shadow version, and of the
	// condition errors of each compiled rule of the engine running.
	ids      map[int]*taken
	compared map[comparedKey]*int64
	conds    map[*rules.Rule]*int64

	e     *Engine     // the engine slots are of
	slots []totalSlot // by index in e.rules
}

type ruleKey struct{ rule, severity, timeoutSeverity string }

// taken is the highest figures of a rule state the totals took.
type taken struct{ alerts, timedOut, dropped, overlap int64 }

// comparedKey names the comparison of an active rule (its id) with a
// shadow version: it starts at 0 with each shadow version.
type comparedKey struct {
	id     int
	shadow string
}

// totalSlot is where the figures of one rule of the engine go.
type totalSlot struct {
	total    int    // index in rules, or in shadow for a shadow rule
	taken    *taken // of the rule's state
	compared *int64 // a shadow rule's: of its twin's comparison (nil: no twin)
	cond     *int64 // an active or draining rule's: of its condition errors
}

// grow adds to *total what v grew past *took.
func grow(total, took *int64, v int64) {
	if v > *took {
		*total += v - *took
		*took = v
	}
}

// add takes the figures c of the rules of e.
func (t *ruleTotals) add(e *Engine, c ruleFigures) {
	if t.e != e {
		t.bind(e)
	}
	for i := range t.slots {
		if i >= len(c.alerts) {
			break
		}
		sl, cr := &t.slots[i], &e.rules[i]
		if cr.shadow {
			sc := &t.shadow[sl.total]
			grow(&sc.Shadow, &sl.taken.alerts, c.alerts[i])
			grow(&sc.Overlap, &sl.taken.overlap, c.overlap[i])
			if sl.compared != nil {
				grow(&sc.Active, sl.compared, c.compared[cr.twin])
			}
			continue
		}
		rc := &t.rules[sl.total]
		grow(&rc.Alerts, &sl.taken.alerts, c.alerts[i])
		grow(&rc.TimedOut, &sl.taken.timedOut, c.timedOut[i])
		grow(&rc.Dropped, &sl.taken.dropped, c.dropped[i])
		grow(&rc.ConditionErrors, sl.cond, int64(cr.rule.ConditionErrors()))
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
	t.e = e
	t.slots = make([]totalSlot, len(e.rules))
	// Only the running rules' condition errors are kept: a rule compiled
	// again counts from 0.
	conds := make(map[*rules.Rule]*int64, len(e.rules))
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
			}
			continue
		}
		sl.total = t.ruleOf(cr.rule)
		if sl.cond = t.conds[cr.rule]; sl.cond == nil {
			sl.cond = new(int64)
		}
		conds[cr.rule] = sl.cond
	}
	t.conds = conds
	t.order = t.order[:0]
	for _, r := range e.cfg.ruleset.Rules {
		t.order = append(t.order, t.ruleOf(r))
	}
	t.active = append(t.active[:0], make([]bool, len(t.rules))...)
	for _, i := range t.order {
		t.active[i] = true
	}
}

// ruleOf returns the index in t.rules of r's name, severity and timeout
// severity, added if new.
func (t *ruleTotals) ruleOf(r *rules.Rule) int {
	k := ruleKey{rule: r.Name, severity: r.Severity.String()}
	if r.Timeout != nil {
		k.timeoutSeverity = r.Timeout.Severity.String()
	}
	i, ok := t.byKey[k]
	if !ok {
		i = len(t.rules)
		t.byKey[k] = i
		t.rules = append(t.rules, RuleCount{Rule: k.rule, Severity: k.severity, TimeoutSeverity: k.timeoutSeverity})
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
	t.ids, t.compared = map[int]*taken{}, map[comparedKey]*int64{}
	t.e = nil
}
