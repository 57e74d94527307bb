package cep

import (
	"fmt"
	"slices"
	"time"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/rules"
)

// plan is what an engine of a live job runs, as its checkpoints record it
// (jobMeta.Plan): the slot layout of the events it holds, the ruleset
// versions it keeps (the active one first), and its rules: the active
// version's, then the draining rules of earlier versions. A checkpoint
// restores into the engine its plan describes, so a restart resumes with
// the version that was active.
type plan struct {
	// Layout is the slot layout of events: it only grows, so that the
	// events held across a deploy keep their slots.
	Layout []event.Field
	// Versions are the versions kept: Versions[0] is the active one, then
	// the shadow's entry, if any, then the previous ones (the versions
	// that were active before), newest first. A shadow that was active
	// before has an entry of each kind; one that never was is no previous
	// version, and goes with its rules. (A plan of an older release may
	// hold the shadow's entry after previous ones: see shadowAt.)
	Versions []planVersion
	// Rules are the engine's rules in its order.
	Rules []planRule
	// Startup is the content hash of the ruleset the process that took
	// the checkpoint was started with (its -rules): a restart with the
	// same file resumes with the active version; with another file, that
	// file is deployed at the restore.
	Startup string
	// NextID is the ID of the next rule state.
	NextID int
	// Shadow is the hash of the shadow version (in Versions; "": none).
	Shadow string `json:",omitempty"`
	// RulesNext is the offset of the rules topic from which its records
	// are yet to deploy (KafkaInput.RulesTopic).
	RulesNext int64 `json:",omitempty"`
}

// sourcesKept is how many previous versions keep their source (the
// rollbacks at hand): the plan is in every checkpoint, so the older ones
// keep only their hash, name and rules.
const sourcesKept = 3

// trimSources drops the sources of the previous versions past the
// newest sourcesKept, but those a rule of the plan needs.
func (p *plan) trimSources(needed map[string]bool) {
	prev := 0
	for i := range p.Versions {
		if p.stateOf(i) != VersionPrevious || needed[p.Versions[i].Version] {
			continue
		}
		if prev++; prev > sourcesKept {
			p.Versions[i].Source = ""
		}
	}
}

// stateOf is the state of Versions[i].
func (p *plan) stateOf(i int) VersionState {
	switch {
	case i == 0:
		return VersionActive
	case i == p.shadowAt():
		return VersionShadow
	}
	return VersionPrevious
}

// shadowAt is the index in Versions of the shadow's entry (-1 without a
// shadow): the first after the active one with the shadow's hash. Any
// later entry of that hash is the version as it was active before. A
// plan of an older release keeps a single entry for the shadow, where
// the deploys left it.
func (p *plan) shadowAt() int {
	if p.Shadow == "" {
		return -1
	}
	for i := 1; i < len(p.Versions); i++ {
		if p.Versions[i].Version == p.Shadow {
			return i
		}
	}
	return -1
}

// needs reports whether a rule of p belongs to version hash.
func (p *plan) needs(hash string) bool {
	return slices.ContainsFunc(p.Rules, func(r planRule) bool { return r.Version == hash })
}

// withoutShadow returns p without its shadow: the shadow's rules go, and
// so does its entry in Versions (a version that was active before keeps
// its own entry, a previous version; one that never was is none). The
// entry stays only when a rule that stays needs its source and no other
// entry has it, which only a plan of an older release (one entry for
// both) may hold.
func (p *plan) withoutShadow() *plan {
	q := *p
	q.Shadow = ""
	q.Rules = slices.DeleteFunc(slices.Clone(p.Rules), func(r planRule) bool { return r.Shadow })
	q.Versions = slices.Clone(p.Versions)
	if i := p.shadowAt(); i > 0 {
		rest := slices.Delete(slices.Clone(p.Versions), i, i+1)
		inRest := slices.ContainsFunc(rest, func(v planVersion) bool { return v.Version == p.Shadow })
		if inRest || !q.needs(p.Shadow) {
			q.Versions = rest
		}
	}
	return &q
}

// planVersion is one ruleset version kept by an engine.
type planVersion struct {
	Ruleset, Version string
	// Source is the version's canonical source ([rules.Ruleset.Source]).
	Source   string
	Deployed time.Time
	Origin   string
	Rules    []string
}

// planRule is one rule of an engine.
type planRule struct {
	// ID names the rule's state: a rule kept by a deploy keeps it, a
	// changed rule's old version drains under it, a new rule gets a new
	// one.
	ID      int
	Rule    string
	Hash    string
	Version string // the hash of the version it belongs to
	// Drain marks a rule of an earlier version that goes on with the
	// matches whose first event is at or before From, until the watermark
	// passes Until.
	Drain       bool       `json:",omitempty"`
	From, Until event.Time `json:",omitempty"`
	// After: the rule emits only the matches whose first event is after
	// it (its draining predecessor has the others); event.MinTime: all.
	After event.Time
	// Shadow marks a rule of the shadow version: its alerts go to the
	// shadow output.
	Shadow bool `json:",omitempty"`
}

// fieldsOf returns the fields of s in slot order.
func fieldsOf(s *event.Schema) []event.Field {
	out := make([]event.Field, s.Len())
	for i := range out {
		out[i] = s.Field(i)
	}
	return out
}

// versionOf is the plan's entry of version rs.
func versionOf(rs *Ruleset, origin string, at time.Time) planVersion {
	v := planVersion{Ruleset: rs.Name, Version: rs.Hash, Source: rs.Source, Deployed: at, Origin: origin}
	for _, r := range rs.Rules {
		v.Rules = append(v.Rules, r.Name)
	}
	return v
}

// ownPlan is the plan of e: the one it was derived from, or, for an
// engine built by New, its ruleset as the only version, deployed at at.
func (e *Engine) ownPlan(at time.Time) *plan {
	if e.plan != nil {
		return e.plan
	}
	rs := e.cfg.ruleset
	p := &plan{Layout: fieldsOf(e.schema), Versions: []planVersion{versionOf(rs, "startup", at)}, Startup: rs.Hash}
	for _, cr := range e.rules {
		p.Rules = append(p.Rules, planRule{ID: cr.id, Rule: cr.rule.Name, Hash: cr.rule.Hash, Version: rs.Hash, After: event.MinTime})
	}
	p.NextID = len(e.rules) + 1
	return p
}

// derive returns the engine that runs p with e's options.
func (e *Engine) derive(p *plan) (*Engine, error) {
	layout, err := event.NewSchema(p.Layout...)
	if err != nil {
		return nil, fmt.Errorf("cep: plan: %w", err)
	}
	compiled := map[string]*Ruleset{}
	version := func(hash string) (*Ruleset, error) {
		if rs := compiled[hash]; rs != nil {
			return rs, nil
		}
		i := slices.IndexFunc(p.Versions, func(v planVersion) bool { return v.Version == hash })
		if i < 0 {
			return nil, fmt.Errorf("cep: plan: version %.12s is not kept", hash)
		}
		rs, err := rules.LoadStored(fmt.Sprintf("version %.12s", hash), []byte(p.Versions[i].Source), layout)
		if err != nil {
			return nil, fmt.Errorf("cep: plan: version %.12s: %w", hash, err)
		}
		if rs.Hash != hash {
			return nil, fmt.Errorf("cep: plan: version %.12s compiles to version %.12s", hash, rs.Hash)
		}
		compiled[hash] = rs
		return rs, nil
	}
	active, err := version(p.Versions[0].Version)
	if err != nil {
		return nil, err
	}
	if len(p.Rules) < len(active.Rules) {
		return nil, fmt.Errorf("cep: plan: %d rules for version %.12s of %d", len(p.Rules), active.Hash, len(active.Rules))
	}
	var extra []compiledRule
	for i, pr := range p.Rules {
		if i < len(active.Rules) {
			if r := active.Rules[i]; pr.Drain || r.Hash != pr.Hash {
				return nil, fmt.Errorf("cep: plan: rule %d is not %s of version %.12s", i, r.Name, active.Hash)
			}
			continue
		}
		if !pr.Drain && !pr.Shadow {
			return nil, fmt.Errorf("cep: plan: rule %d (%s) is neither active, draining nor shadow", i, pr.Rule)
		}
		rs, err := version(pr.Version)
		if err != nil {
			return nil, err
		}
		r := rs.Rule(pr.Rule)
		if r == nil || r.Hash != pr.Hash {
			return nil, fmt.Errorf("cep: plan: version %.12s has no rule %s of hash %.12s", pr.Version, pr.Rule, pr.Hash)
		}
		extra = append(extra, compiledRule{rule: r, nfa: r.NFA, rs: rs, drain: pr.Drain, shadow: pr.Shadow, from: pr.From, until: pr.Until, after: pr.After, id: pr.ID})
	}
	c := e.cfg
	c.ruleset = active
	ne, err := build(c, extra)
	if err != nil {
		return nil, err
	}
	for i := range active.Rules {
		ne.rules[i].id, ne.rules[i].after = p.Rules[i].ID, p.Rules[i].After
	}
	ne.plan = p
	return ne, nil
}

// sameRules reports whether e and o run the same rule states (their
// checkpoints restore into each other without a migration).
func (e *Engine) sameRules(o *Engine) bool {
	if len(e.rules) != len(o.rules) || len(e.specs) != len(o.specs) {
		return false
	}
	for i := range e.rules {
		a, b := &e.rules[i], &o.rules[i]
		if a.id != b.id || a.rule.Hash != b.rule.Hash || a.drain != b.drain || a.spec != b.spec {
			return false
		}
	}
	for i := range e.specs {
		if e.specs[i].id != o.specs[i].id {
			return false
		}
	}
	return e.counterKey() == o.counterKey() && slices.Equal(fieldsOf(e.schema), fieldsOf(o.schema))
}

// planDeploy returns the plan that runs rs (compiled over e's layout)
// after e's, switching at watermark w: the rules of rs whose hash e runs
// keep their state; a changed rule's old version drains from w until its
// window has passed (or is dropped with drop, or when it has no window);
// the draining rules of e go on until theirs has; the others start
// empty. It says what it did in the result.
func (e *Engine) planDeploy(rs *Ruleset, drop bool, w event.Time, origin string, now time.Time) (*plan, *DeployResult) {
	p := e.ownPlan(now)
	q := &plan{Layout: fieldsOf(rs.Schema), Startup: p.Startup, NextID: p.NextID, RulesNext: p.RulesNext}
	res := &DeployResult{Ruleset: rs.Name, Version: rs.Hash, Previous: p.Versions[0].Version, Watermark: w}
	byHash := map[string]int{}
	byName := map[string]int{}
	for i, cr := range e.rules {
		if cr.active() {
			byHash[cr.rule.Hash], byName[cr.rule.Name] = i, i
		}
	}
	var drains []planRule
	names := map[string]bool{}
	if p.Shadow != "" && p.Shadow != rs.Hash {
		// The shadow goes on beside the new active version (deployed as
		// the active one, it is promoted: the shadow goes).
		q.Shadow = p.Shadow
	}
	for _, r := range rs.Rules {
		names[r.Name] = true
		if i, ok := byHash[r.Hash]; ok {
			q.Rules = append(q.Rules, planRule{ID: e.rules[i].id, Rule: r.Name, Hash: r.Hash, Version: rs.Hash, After: e.rules[i].after})
			res.Kept = append(res.Kept, r.Name)
			continue
		}
		nr := planRule{ID: q.NextID, Rule: r.Name, Hash: r.Hash, Version: rs.Hash, After: event.MinTime}
		q.NextID++
		if i, ok := byName[r.Name]; ok {
			res.Changed = append(res.Changed, r.Name)
			old := &e.rules[i]
			if win := old.nfa.Window(); !drop && win > 0 && w > event.MinTime && w < event.MaxTime {
				nr.After = w
				// Until is MaxTime at most (Plus): a window past it
				// wrapped to before w, and the old version went at once.
				drains = append(drains, planRule{
					ID: old.id, Rule: old.rule.Name, Hash: old.rule.Hash, Version: old.rs.Hash,
					Drain: true, From: w, Until: w.Plus(win), After: old.after,
				})
			}
		} else {
			res.Added = append(res.Added, r.Name)
		}
		q.Rules = append(q.Rules, nr)
	}
	for _, cr := range e.rules {
		if cr.active() && !names[cr.rule.Name] {
			res.Removed = append(res.Removed, cr.rule.Name)
		}
	}
	// The draining rules still draining, then the new ones.
	for _, cr := range e.rules {
		if cr.drain && cr.until > w {
			drains = append([]planRule{{
				ID: cr.id, Rule: cr.rule.Name, Hash: cr.rule.Hash, Version: cr.rs.Hash,
				Drain: true, From: cr.from, Until: cr.until, After: cr.after,
			}}, drains...)
		}
	}
	q.Rules = append(q.Rules, drains...)
	if q.Shadow != "" {
		q.Rules = append(q.Rules, e.shadowRules()...)
	}
	// The versions: the new one first (moved up when kept already), the
	// shadow's entry if it stays, then the previous ones, the version
	// replaced first; at most keptVersions but every one a draining rule
	// or the shadow belongs to. A promoted shadow's entry goes.
	q.Versions = []planVersion{versionOf(rs, origin, now)}
	shadow := p.shadowAt()
	if q.Shadow != "" && shadow > 0 {
		q.Versions = append(q.Versions, p.Versions[shadow])
	}
	needed := map[string]bool{}
	if q.Shadow != "" {
		needed[q.Shadow] = true
	}
	for _, d := range drains {
		needed[d.Version] = true
	}
	for i, v := range p.Versions {
		if i == shadow || v.Version == rs.Hash {
			continue
		}
		if len(q.Versions) < keptVersions || needed[v.Version] {
			q.Versions = append(q.Versions, v)
		}
	}
	q.trimSources(needed)
	return q, res
}

// shadowRules are the plan's entries of e's shadow rules.
func (e *Engine) shadowRules() []planRule {
	var out []planRule
	for _, cr := range e.rules {
		if cr.shadow {
			out = append(out, planRule{ID: cr.id, Rule: cr.rule.Name, Hash: cr.rule.Hash, Version: cr.rs.Hash, After: cr.after, Shadow: true})
		}
	}
	return out
}

// planShadow returns the plan that runs rs (compiled over e's layout) as
// the shadow beside e's active version, from the switch at watermark w
// on: its rules start empty (with the events the keys buffer), a shadow
// before it goes (withoutShadow). rs is not the active version
// (askSwitch refuses that).
func (e *Engine) planShadow(rs *Ruleset, w event.Time, origin string, now time.Time) (*plan, *DeployResult) {
	p := e.ownPlan(now)
	base := p.withoutShadow()
	q := &plan{Layout: fieldsOf(rs.Schema), Startup: p.Startup, NextID: p.NextID, Shadow: rs.Hash, RulesNext: p.RulesNext}
	res := &DeployResult{Ruleset: rs.Name, Version: rs.Hash, Previous: p.Shadow, Shadow: true, Watermark: w}
	q.Rules = base.Rules
	for _, r := range rs.Rules {
		q.Rules = append(q.Rules, planRule{ID: q.NextID, Rule: r.Name, Hash: r.Hash, Version: rs.Hash, After: event.MinTime, Shadow: true})
		q.NextID++
		res.Added = append(res.Added, r.Name)
	}
	needed := map[string]bool{}
	for _, r := range q.Rules {
		needed[r.Version] = true
	}
	// The versions: the active one, the shadow, the previous ones (rs's
	// own among them when it was active before), at most keptVersions
	// but every one a rule belongs to.
	q.Versions = []planVersion{base.Versions[0], versionOf(rs, origin, now)}
	for _, v := range base.Versions[1:] {
		if len(q.Versions) < keptVersions || needed[v.Version] {
			q.Versions = append(q.Versions, v)
		}
	}
	q.trimSources(needed)
	return q, res
}

// expired reports whether a draining rule of e has passed its window at
// watermark w.
func (e *Engine) expired(w event.Time) bool {
	for _, cr := range e.rules {
		if cr.drain && cr.until <= w {
			return true
		}
	}
	return false
}

// firstTime is the time of the earliest event of a match.
func firstTime(m [][]*event.Event) event.Time {
	t := event.MaxTime
	for _, evs := range m {
		for _, e := range evs {
			t = min(t, e.Time)
		}
	}
	return t
}

// active reports whether cr is a rule of the active version.
func (cr *compiledRule) active() bool { return !cr.drain && !cr.shadow }

// emits reports whether rule cr emits a match whose earliest event is at
// first (a draining rule and its successor split the matches at the
// switch).
func (cr *compiledRule) emits(first event.Time) bool {
	if cr.drain && first > cr.from {
		return false
	}
	return first > cr.after
}
