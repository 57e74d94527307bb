package rules

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/rules/internal/cond"
)

// This file finds the stage references of a rule that can only ever read
// nothing: Flink accepts them (ctx.getEventsForPattern of such a stage is
// empty), so they are warnings, not errors, but the condition that reads
// one is never what its writer meant: a.amount in the condition of a
// stage a that takes one event is null (a condition never sees the event
// under test as its own stage's), as is a field of a stage that comes
// later, or of a negated stage.

// stagePlace is where a stage stands in its pattern, for stageRefWarnings.
type stagePlace struct {
	name    string
	negated bool // notNext, notFollowedBy: takes no event
	loops   bool // its quantifier takes more than one event
	// optional: a complete match may hold no event of it (the stage or a
	// group around it is optional).
	optional bool
	// groups are the looping groups around it, innermost last.
	groups []*GroupNode
}

// stagePlaces returns the places of the stages of rd, in leafStages order.
func stagePlaces(rd *RuleDecl) []stagePlace {
	var out []stagePlace
	var walk func(es []PatternElem, groups []*GroupNode, optional bool)
	walk = func(es []PatternElem, groups []*GroupNode, optional bool) {
		for _, e := range es {
			switch e := e.(type) {
			case *StageNode:
				out = append(out, stagePlace{name: e.Name.Value, negated: e.Contiguity.IsNot(),
					loops: takesMany(e.Quant), groups: groups, optional: optional || e.Quant.Optional.Set})
			case *GroupNode:
				inner := groups
				if takesMany(e.Quant) {
					inner = append(groups[:len(groups):len(groups)], e)
				}
				walk(e.Elems, inner, optional || e.Quant.Optional.Set)
			}
		}
	}
	if rd.Pattern != nil {
		walk(rd.Pattern.Elems, nil, false)
	}
	return out
}

// takesMany reports whether quantifier q may take more than one event.
func takesMany(q Quantifier) bool {
	return q.Kind != QuantOne && !(q.Kind == QuantTimes && q.Max <= 1)
}

// sharedLoop reports whether a looping group holds both stages: a later
// iteration of it reads the events of its earlier ones.
func sharedLoop(a, b stagePlace) bool {
	for _, g := range a.groups {
		for _, h := range b.groups {
			if g == h {
				return true
			}
		}
	}
	return false
}

// stageRefWarnings warns of the references of rc's conditions and emit
// expressions that always read nothing.
func (rc *ruleCompiler) stageRefWarnings() {
	rd := rc.rd
	places := stagePlaces(rd)
	if len(places) != len(rc.env.Stages) {
		return // a pattern the checker reported
	}
	lookups := rc.c.lookupNames()
	stage := -1
	keyless := false // warned of a rule without key comparing events
	var walk func(es []PatternElem)
	walk = func(es []PatternElem) {
		for _, e := range es {
			if g, ok := e.(*GroupNode); ok {
				walk(g.Elems)
				continue
			}
			stage++
			rc.neverWarnings(e.head().Clauses, lookups)
			rc.inFieldWarnings(e.head().Clauses, lookups)
			for _, cl := range e.head().Clauses {
				if cl.Expr == nil || rc.conds[cl] == nil {
					continue
				}
				refs, err := cond.StageRefs(cl.Expr.raw, rc.env.Stages, lookups...)
				if err != nil {
					continue
				}
				for _, r := range refs {
					if msg := emptyRef(places, stage, r); msg != "" {
						rc.c.warnf(cl.Expr.Pos+Pos(r.Offset), "%s", msg)
					}
					if rd.Key == nil && !keyless && r.Field != "" && r.Stage != stage {
						keyless = true
						rc.c.warnf(cl.Expr.Pos+Pos(r.Offset), "rule %s has no key, so its matches take their events from the whole stream (one partition, as Flink's CEP without keyBy), and this condition compares the event with another of the match (%s.%s): a match may join events of different cards or customers; add key FIELD to the rule%s to match each one's events apart",
							rd.Name, rc.env.Stages[r.Stage], r.Field, rc.idFields())
					}
				}
			}
		}
	}
	if rd.Pattern != nil {
		walk(rd.Pattern.Elems)
	}
	if rd.Emit != nil {
		rc.emitRefWarnings(rd.Emit, places, lookups, -1)
	}
	if t := rd.Timeout; t != nil && t.Emit != nil {
		rc.emitRefWarnings(t.Emit, places, lookups, lastTakesOne(rd, places))
	}
}

// idFields returns " (say key F)" for the schema's fields that look like
// an entity's id (named id or ending in _id; at most three, "F or G"),
// "" when it has none.
func (rc *ruleCompiler) idFields() string {
	var ids []string
	if rc.c.schema == nil {
		return ""
	}
	for _, name := range rc.c.schema.Names() {
		if name == "id" || strings.HasSuffix(name, "_id") {
			ids = append(ids, "key "+name)
		}
	}
	if len(ids) == 0 {
		return ""
	}
	if len(ids) > 3 {
		ids = ids[:3]
	}
	return " (say " + strings.Join(ids, " or ") + ")"
}

// neverWarnings warns of the conditions of a stage that can never hold
// (cond.NeverHolds): its where clauses together when it has no other
// (they are ANDed), else each where, or and until clause alone.
func (rc *ruleCompiler) neverWarnings(clauses []*Clause, lookups []string) {
	var wheres []*Clause
	others := false
	for _, cl := range clauses {
		switch {
		case cl.Expr == nil || rc.conds[cl] == nil:
			if cl.Kind != ClauseGap {
				return // one that did not compile: its error is enough
			}
		case cl.Kind == ClauseWhere:
			wheres = append(wheres, cl)
		default:
			others = true
		}
	}
	groups := [][]*Clause{wheres}
	if others {
		groups = groups[:0]
		for _, cl := range clauses {
			if cl.Expr != nil {
				groups = append(groups, []*Clause{cl})
			}
		}
	}
	for _, g := range groups {
		srcs := make([]string, len(g))
		for i, cl := range g {
			srcs[i] = cl.Expr.raw
		}
		if n, err := cond.NeverHolds(srcs, lookups...); err == nil && n != nil {
			rc.c.warnf(g[n.Clause].Expr.Pos+Pos(n.Offset), "%s", cond.NeverText(n))
		}
	}
}

// inFieldWarnings warns of the membership tests of clauses over an event
// field of no declared type (x in tags): it holds a string, a number or a
// bool, never a list, so the test never holds, and an event with a JSON
// array there is a dead letter, for every rule (the messy-data trial's
// "gift" in tags). A warning, not an error: a version kept by a checkpoint
// of an earlier build must compile as it did.
func (rc *ruleCompiler) inFieldWarnings(clauses []*Clause, lookups []string) {
	isField := func(name string) bool {
		slot, ok := rc.env.Schema.Slot(name)
		switch {
		case !ok || slices.Contains(rc.env.Stages, name):
			return false
		case slices.ContainsFunc(rc.c.aggregates, func(d *AggregateDecl) bool { return d.Name.Value == name }):
			return false
		}
		return !rc.env.Declared || rc.env.Schema.Field(slot).Kind == event.KindNull
	}
	for _, cl := range clauses {
		if cl.Expr == nil || rc.conds[cl] == nil {
			continue
		}
		if f, off, err := cond.InOverField(cl.Expr.raw, isField, lookups...); err == nil && f != "" {
			rc.c.warnf(cl.Expr.Pos+Pos(off), "in needs a list on its right, and the field %s holds a string, a number or a bool, never a list: this never holds (and an event with a JSON array in %s does not decode, a dead letter for every rule); write the list in the rule (x in [\"a\", \"b\"]), or test a substring with contains", f, f)
		}
	}
}

// emitRefWarnings warns of the references of emit block e to negated
// stages, which never hold an event, and to stage last (-1: none), which a
// timed-out partial match never holds.
func (rc *ruleCompiler) emitRefWarnings(e *EmitBlock, places []stagePlace, lookups []string, last int) {
	for _, f := range e.Fields {
		refs, err := cond.StageRefs(f.Expr.raw, rc.env.Stages, lookups...)
		if err != nil {
			continue
		}
		for _, r := range refs {
			switch p := places[r.Stage]; {
			case p.negated:
				rc.c.warnf(f.Expr.Pos+Pos(r.Offset), "stage %s is negated: it never takes an event, so %s in a match", p.name, emptyText(p.name, r.Field))
			case r.Stage == last:
				rc.c.warnf(f.Expr.Pos+Pos(r.Offset), "stage %s is the pattern's last and takes one event, which completes the match: a timed-out partial match never holds it, so %s here", p.name, emptyText(p.name, r.Field))
			case p.optional && r.NullFails:
				rc.c.warnf(f.Expr.Pos+Pos(r.Offset), "stage %s is optional: in a match without it %s.%s is null, which fails here (the alert's %s is then null, an emit error); give it a default: %s.%s ?? %s",
					p.name, p.name, r.Field, f.Name.Value, p.name, r.Field, rc.defaultText(r.Field))
			}
		}
	}
}

// defaultText is a default to write after ?? for the schema field named
// field: 0, "" or false by its declared kind, DEFAULT when it has none.
func (rc *ruleCompiler) defaultText(field string) string {
	if slot, ok := rc.c.schema.Slot(field); ok {
		switch rc.c.schema.Field(slot).Kind {
		case event.KindInt, event.KindFloat:
			return "0"
		case event.KindString:
			return `""`
		case event.KindBool:
			return "false"
		}
	}
	return "DEFAULT"
}

// lastTakesOne returns the index (in places) of rd's last stage when the
// pattern ends with it, outside any group, and it takes exactly one event
// (no loop, not optional, not negated): the event that completes a match,
// which no timed-out partial match holds. -1 otherwise.
func lastTakesOne(rd *RuleDecl, places []stagePlace) int {
	if rd.Pattern == nil || len(rd.Pattern.Elems) == 0 || len(places) == 0 {
		return -1
	}
	s, ok := rd.Pattern.Elems[len(rd.Pattern.Elems)-1].(*StageNode)
	if !ok || s.Contiguity.IsNot() || takesMany(s.Quant) || s.Quant.Optional.Set {
		return -1
	}
	return len(places) - 1
}

// emptyRef is the warning for reference r of a condition of stage at, ""
// when r may read an event.
func emptyRef(places []stagePlace, at int, r cond.StageRef) string {
	p, to := places[at], places[r.Stage]
	switch {
	case to.negated:
		return fmt.Sprintf("stage %s is negated: it never takes an event, so %s here", to.name, emptyText(to.name, r.Field))
	case r.Stage == at && !p.loops && len(p.groups) == 0:
		msg := fmt.Sprintf("stage %s takes one event, and its condition tests the event before %s takes it, so %s here", p.name, p.name, emptyText(p.name, r.Field))
		if r.Field != "" {
			msg += fmt.Sprintf(" (the event under test's field is %s alone)", r.Field)
		}
		return msg
	case r.Stage > at && !sharedLoop(p, to):
		return fmt.Sprintf("stage %s comes after %s: when %s's condition is tested, %s has taken no event, so %s here", to.name, p.name, p.name, to.name, emptyText(to.name, r.Field))
	}
	return ""
}

// emptyText says what a reference to a stage without events reads.
func emptyText(stage, field string) string {
	if field != "" {
		return fmt.Sprintf("%s.%s is always null", stage, field)
	}
	return fmt.Sprintf("%s is always empty", stage)
}
