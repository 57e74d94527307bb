package difftest

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/cepheus-cep/cepheus/internal/conformance"
)

// shrink delta-debugs every finding: round by round, it builds the
// candidate reductions of each finding's current case (fewer events, steps
// or stages, simpler quantifiers, conditions and options), runs all of them
// through both engines in one batch, and moves each finding to its first
// candidate that still disagrees in the same way (see persists). A finding
// is done when none of its candidates does. At the end the events are
// renumbered 1..n when that keeps the disagreement.
func (d *driver) shrink(ctx context.Context, fs []Finding) error {
	for i := range fs {
		f := &fs[i]
		f.Minimal, f.MinimalDiffs, f.Shrunk = f.Original, f.Diffs, true
	}
	active := make([]int, len(fs))
	for i := range active {
		active[i] = i
	}
	for round := 1; len(active) > 0 && round <= d.opt.ShrinkRounds; round++ {
		var batch []conformance.Input
		owner := map[string]int{} // candidate id -> finding index
		order := map[int][]string{}
		for _, fi := range active {
			cur := fs[fi].Minimal
			for k, c := range candidates(&cur) {
				c.ID = fmt.Sprintf("%s~r%d-%d", fs[fi].Original.ID, round, k)
				owner[c.ID] = fi
				order[fi] = append(order[fi], c.ID)
				batch = append(batch, c)
			}
		}
		if len(batch) == 0 {
			break
		}
		flink, cepheus, err := d.evaluateWith(ctx, fmt.Sprintf("shrink-r%d", round), batch, shrinkCaseTimeout)
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			// A candidate can take the Flink runner down (a JVM out of
			// memory): keep what is shrunk so far.
			d.progressf("shrink round %d: %v; keeping the cases shrunk so far", round, err)
			return nil
		}
		byID := map[string]*conformance.Input{}
		for i := range batch {
			byID[batch[i].ID] = &batch[i]
		}
		cfs, err := d.shrinkCounterfactuals(ctx, fmt.Sprintf("shrink-r%d-cf", round), batch, flink, cepheus)
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			d.progressf("shrink round %d: counterfactuals: %v; keeping the cases shrunk so far", round, err)
			return nil
		}
		var next []int
		for _, fi := range active {
			f := &fs[fi]
			for _, id := range order[fi] {
				fr, cr := flink.Cases[id], cepheus.Cases[id]
				if fr == nil || cr == nil {
					continue
				}
				if diffs := Compare(fr, cr); persists(f, diffs, byID[id], fr, cr, cfs) {
					f.Minimal, f.MinimalDiffs, f.Flink, f.Cepheus = *byID[id], diffs, fr, cr
					next = append(next, fi)
					break
				}
			}
		}
		d.progressf("shrink round %d: %d candidates, %d of %d findings reduced", round, len(batch), len(next), len(active))
		active = next
	}

	// Renumber the events of each minimal case and keep the result if it
	// still disagrees.
	var batch []conformance.Input
	for i := range fs {
		r := renumber(fs[i].Minimal)
		r.ID = fs[i].Original.ID + "~renumbered"
		batch = append(batch, r)
	}
	flink, cepheus, err := d.evaluateWith(ctx, "shrink-renumber", batch, shrinkCaseTimeout)
	if err == nil {
		var cfs map[string]*conformance.Result
		if cfs, err = d.shrinkCounterfactuals(ctx, "shrink-renumber-cf", batch, flink, cepheus); err == nil {
			d.keepRenumbered(fs, batch, flink, cepheus, cfs)
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		d.progressf("shrink: renumbering: %v; the cases keep their numbers", err)
	}
	for i := range fs {
		fs[i].Minimal.ID = fs[i].Original.ID
	}
	return nil
}

// keepRenumbered moves each finding to its renumbered case when that still
// disagrees in the same way.
func (d *driver) keepRenumbered(fs []Finding, batch []conformance.Input, flink, cepheus *conformance.Results, cfs map[string]*conformance.Result) {
	for i := range fs {
		in := &batch[i]
		fr, cr := flink.Cases[in.ID], cepheus.Cases[in.ID]
		if fr == nil || cr == nil {
			continue
		}
		if diffs := Compare(fr, cr); persists(&fs[i], diffs, in, fr, cr, cfs) {
			fs[i].Minimal, fs[i].MinimalDiffs, fs[i].Flink, fs[i].Cepheus = *in, diffs, fr, cr
		}
	}
}

// shrinkCounterfactuals runs the counterfactual cases of the candidates
// that disagree through Flink, so that a candidate that a counterfactual
// explains is not taken for the original disagreement.
func (d *driver) shrinkCounterfactuals(ctx context.Context, name string, batch []conformance.Input, flink, cepheus *conformance.Results) (map[string]*conformance.Result, error) {
	var differ []conformance.Input
	for i := range batch {
		fr, cr := flink.Cases[batch[i].ID], cepheus.Cases[batch[i].ID]
		if fr != nil && cr != nil && len(Compare(fr, cr)) > 0 {
			differ = append(differ, batch[i])
		}
	}
	cfs, _, err := d.counterfactualsWith(ctx, name, differ, shrinkCaseTimeout)
	return cfs, err
}

// shrinkCaseTimeout bounds a candidate on either engine. Candidates that
// run this long (Flink looping on a corrupt buffer) are not the reductions
// a shrink wants, and each would hold up the whole round.
const shrinkCaseTimeout = time.Second

// persists says whether a candidate still shows the disagreement of
// finding f: it is unexplained (counterfactuals included, from cfs),
// differs in the original's first aspect, differs in the error aspect
// exactly when the original did, and fails on the same engines.
func persists(f *Finding, diffs []Diff, in *conformance.Input, flink, cepheus *conformance.Result, cfs map[string]*conformance.Result) bool {
	orig := f.Diffs
	if len(diffs) == 0 || ExplainCase(in, flink, cepheus, cfs) != nil {
		return false
	}
	// The same engines fail, so that a reduction that makes the other
	// engine reject the pattern is not taken for the original problem.
	if failures(flink) != failures(f.Flink) || failures(cepheus) != failures(f.Cepheus) {
		return false
	}
	has := func(ds []Diff, aspect string) bool {
		return slices.ContainsFunc(ds, func(d Diff) bool { return d.Aspect == aspect })
	}
	return has(diffs, orig[0].Aspect) && has(diffs, AspectError) == has(orig, AspectError)
}

// failures says whether a result failed, as a whole or in one of its
// rules.
func failures(r *conformance.Result) bool {
	return r.Error != nil || slices.ContainsFunc(r.Rules, func(x *conformance.Result) bool { return x.Error != nil })
}

// candidates returns the reductions of in to try, the larger ones first.
func candidates(in *conformance.Input) []conformance.Input {
	var out []conformance.Input
	add := func(f func(c *conformance.Input) bool) {
		c := clone(in)
		// A reduction may leave a looping group whose stages can all be
		// skipped, on which Flink hangs until the runner's timeout.
		if f(&c) && !loopsOverNothing(c.Pattern.Stages) {
			out = append(out, c)
		}
	}
	// One rule of several: each rule alone (a one-rule case), then each
	// rule left out.
	for k := range in.Rules {
		add(func(c *conformance.Input) bool {
			c.Pattern, c.Rules = c.Rules[k], nil
			return true
		})
	}
	if len(in.Rules) > 2 {
		for k := range in.Rules {
			add(func(c *conformance.Input) bool {
				c.Rules = slices.Delete(c.Rules, k, k+1)
				return true
			})
		}
	}
	// Fewer events (with their steps), in chunks of halving size.
	n := len(in.Events)
	for size := n / 2; size >= 1; size /= 2 {
		for start := 0; start+size <= n; start += size {
			add(func(c *conformance.Input) bool { return dropEvents(c, start, start+size) })
		}
	}
	// Fewer non-event steps.
	for i, st := range in.OperatorSteps {
		if st.Event == nil {
			add(func(c *conformance.Input) bool {
				c.OperatorSteps = slices.Delete(c.OperatorSteps, i, i+1)
				return true
			})
		}
	}
	// Fewer stages: drop one, or replace a group by its inner stages.
	for _, path := range stagePaths(in.Pattern.Stages, nil) {
		add(func(c *conformance.Input) bool { return dropStage(c, path) })
		add(func(c *conformance.Input) bool { return ungroup(c, path) })
	}
	// Simpler pattern options.
	add(func(c *conformance.Input) bool {
		ok := c.Pattern.WithinMs != nil
		c.Pattern.WithinMs, c.Pattern.WithinType = nil, ""
		return ok
	})
	add(func(c *conformance.Input) bool {
		ok := c.Pattern.WithinType != ""
		c.Pattern.WithinType = ""
		return ok
	})
	add(func(c *conformance.Input) bool {
		ok := c.Pattern.Skip != "noSkip" && c.Pattern.Skip != ""
		c.Pattern.Skip, c.Pattern.SkipThrowOnMiss = "noSkip", false
		return ok
	})
	add(func(c *conformance.Input) bool {
		ok := c.Pattern.SkipThrowOnMiss
		c.Pattern.SkipThrowOnMiss = false
		return ok
	})
	add(func(c *conformance.Input) bool {
		ok := c.TimeoutHandling
		c.TimeoutHandling = false
		return ok
	})
	add(func(c *conformance.Input) bool {
		ok := len(c.EventComparator) > 0 && string(c.EventComparator) != "null"
		c.EventComparator = nil
		return ok
	})
	// Simpler stages.
	for _, path := range stagePaths(in.Pattern.Stages, nil) {
		for _, simplify := range stageSimplifications {
			add(func(c *conformance.Input) bool { return simplify(stageAt(c.Pattern.Stages, path)) })
		}
	}
	// Simpler events.
	for i := range in.Events {
		add(func(c *conformance.Input) bool {
			e := &c.Events[i]
			ok := e.Type != "Event"
			e.Type, e.Volume = "Event", nil
			return ok
		})
	}
	return out
}

// stageSimplifications each simplify one stage, reporting whether they
// changed anything.
var stageSimplifications = []func(s *conformance.StageSpec) bool{
	func(s *conformance.StageSpec) bool { // a single event
		q := &s.Quantifier
		ok := q.Kind != "one"
		*q = conformance.QuantifierSpec{Kind: "one", Optional: q.Optional}
		s.Until = nil
		return ok
	},
	func(s *conformance.StageSpec) bool {
		ok := s.Quantifier.Optional
		s.Quantifier.Optional = false
		return ok
	},
	func(s *conformance.StageSpec) bool {
		ok := s.Quantifier.Greedy
		s.Quantifier.Greedy = false
		return ok
	},
	func(s *conformance.StageSpec) bool {
		ok := s.Quantifier.Inner != ""
		s.Quantifier.Inner = ""
		return ok
	},
	func(s *conformance.StageSpec) bool {
		ok := s.Quantifier.WindowMs != nil
		s.Quantifier.WindowMs = nil
		return ok
	},
	func(s *conformance.StageSpec) bool {
		ok := s.Until != nil
		s.Until = nil
		return ok
	},
	func(s *conformance.StageSpec) bool { // times(n, m) -> times(n)
		q := &s.Quantifier
		if q.Kind != "times" || q.Max == nil || *q.Max == q.Min || q.Min == 0 {
			return false
		}
		q.Max = &q.Min
		return true
	},
	func(s *conformance.StageSpec) bool { // fewer times
		q := &s.Quantifier
		if q.Kind == "times" && q.Max != nil && *q.Max == q.Min && q.Min > 1 {
			m := q.Min - 1
			q.Min, q.Max = m, &m
			return true
		}
		if q.Kind == "timesOrMore" && q.Min > 1 {
			q.Min--
			return true
		}
		return false
	},
	func(s *conformance.StageSpec) bool {
		if s.Contiguity != "next" && s.Contiguity != "followedByAny" {
			return false
		}
		s.Contiguity = "followedBy"
		return true
	},
	func(s *conformance.StageSpec) bool {
		if s.Group != nil || s.Condition == nil || *s.Condition == "true" {
			return false
		}
		t := "true"
		s.Condition = &t
		return true
	},
}

// clone deep-copies an input.
func clone(in *conformance.Input) conformance.Input {
	b, err := json.Marshal(in)
	if err != nil {
		panic(fmt.Sprintf("difftest: clone: %v", err)) // an Input always encodes
	}
	var c conformance.Input
	if err := json.Unmarshal(b, &c); err != nil {
		panic(fmt.Sprintf("difftest: clone: %v", err))
	}
	return c
}

// dropEvents removes events [from, to) and their operator steps; it keeps
// at least one event.
func dropEvents(c *conformance.Input, from, to int) bool {
	if to-from >= len(c.Events) {
		return false
	}
	gone := map[uint64]bool{}
	for _, e := range c.Events[from:to] {
		gone[e.Seq] = true
	}
	c.Events = slices.Delete(c.Events, from, to)
	c.OperatorSteps = slices.DeleteFunc(c.OperatorSteps, func(s conformance.Step) bool {
		return s.Event != nil && gone[*s.Event]
	})
	return true
}

// stagePaths lists the positions of every stage, groups and their inner
// stages, as index paths.
func stagePaths(stages []conformance.StageSpec, prefix []int) [][]int {
	var out [][]int
	for i, s := range stages {
		p := append(slices.Clone(prefix), i)
		out = append(out, p)
		if s.Group != nil {
			out = append(out, stagePaths(s.Group.Stages, p)...)
		}
	}
	return out
}

func stageAt(stages []conformance.StageSpec, path []int) *conformance.StageSpec {
	s := &stages[path[0]]
	for _, i := range path[1:] {
		s = &s.Group.Stages[i]
	}
	return s
}

// siblings returns the stage list that holds the stage at path.
func siblings(c *conformance.Input, path []int) *[]conformance.StageSpec {
	list := &c.Pattern.Stages
	for _, i := range path[:len(path)-1] {
		list = &(*list)[i].Group.Stages
	}
	return list
}

// dropStage removes the stage at path (not the only stage of its list).
func dropStage(c *conformance.Input, path []int) bool {
	list := siblings(c, path)
	i := path[len(path)-1]
	if len(*list) < 2 {
		return false
	}
	removed := leafNames((*list)[i : i+1])
	*list = slices.Delete(*list, i, i+1)
	if i == 0 {
		(*list)[0].Contiguity = "begin"
	}
	forgetStages(c, removed)
	return true
}

// ungroup replaces the group at path by its inner stages.
func ungroup(c *conformance.Input, path []int) bool {
	list := siblings(c, path)
	i := path[len(path)-1]
	g := (*list)[i]
	if g.Group == nil {
		return false
	}
	inner := g.Group.Stages
	inner[0].Contiguity = g.Contiguity
	*list = slices.Replace(*list, i, i+1, inner...)
	return true
}

// forgetStages rewrites what referred to the removed stages: conditions
// that read them with ctx become true (an until is dropped), a skip
// strategy that names one becomes noSkip.
func forgetStages(c *conformance.Input, removed []string) {
	for _, name := range removed {
		ref := regexp.MustCompile(`ctx\("` + regexp.QuoteMeta(name) + `"\)`)
		for _, p := range stagePaths(c.Pattern.Stages, nil) {
			s := stageAt(c.Pattern.Stages, p)
			if s.Condition != nil && ref.MatchString(*s.Condition) {
				t := "true"
				s.Condition = &t
			}
			if s.Until != nil && ref.MatchString(*s.Until) {
				s.Until = nil
			}
		}
		if _, target, ok := strings.Cut(c.Pattern.Skip, ":"); ok && target == name {
			c.Pattern.Skip, c.Pattern.SkipThrowOnMiss = "noSkip", false
		}
	}
}

func leafNames(stages []conformance.StageSpec) []string {
	var out []string
	for _, s := range stages {
		if s.Group != nil {
			out = append(out, leafNames(s.Group.Stages)...)
			continue
		}
		out = append(out, s.Name)
	}
	return out
}

// renumber gives the events seqs 1..n in list order.
func renumber(in conformance.Input) conformance.Input {
	c := clone(&in)
	to := map[uint64]uint64{}
	for i := range c.Events {
		to[c.Events[i].Seq] = uint64(i + 1)
		c.Events[i].Seq = uint64(i + 1)
	}
	for i := range c.OperatorSteps {
		if s := c.OperatorSteps[i].Event; s != nil {
			v := to[*s]
			c.OperatorSteps[i].Event = &v
		}
	}
	return c
}
