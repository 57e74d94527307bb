package difftest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/cepheus-cep/cepheus/internal/conformance"
)

// CaseID is the id of generated case i of seed: "s<seed>-<i>", i zero-padded
// to five digits so that ids sort in generation order.
func CaseID(seed uint64, i int) string { return fmt.Sprintf("s%d-%05d", seed, i) }

// Generate returns case i of seed. Every case has its own random source,
// seeded by (seed, i), so a case can be regenerated alone and does not
// depend on how many cases were generated before it.
//
// Generate never returns a pattern with a looping group that can loop
// without taking an event (see loopsOverNothing): Flink loops forever, or
// recurses until its stack overflows, on such a pattern (doc id
// epsilon-cycle), and so may Cepheus. It draws again, from the same
// source, until the pattern has none.
func Generate(seed uint64, i int) conformance.Input {
	r := rand.New(rand.NewPCG(seed, uint64(i)))
	for {
		g := &generator{r: r}
		in := g.input(CaseID(seed, i))
		if !loopsOverNothing(in.Pattern.Stages) {
			return in
		}
	}
}

// loopsOverNothing says whether some looping group (oneOrMore,
// timesOrMore) of stages has a body that can be passed without taking an
// event: every stage of it optional, times(0, n), a NOT stage, or such a
// group. Its proceed transitions then form a cycle.
func loopsOverNothing(stages []conformance.StageSpec) bool {
	for i := range stages {
		s := &stages[i]
		if s.Group == nil {
			continue
		}
		if k := s.Quantifier.Kind; (k == "oneOrMore" || k == "timesOrMore") && skippable(s.Group.Stages) {
			return true
		}
		if loopsOverNothing(s.Group.Stages) {
			return true
		}
	}
	return false
}

// skippable says whether a sequence of stages can be passed without
// taking an event.
func skippable(stages []conformance.StageSpec) bool {
	for i := range stages {
		s := &stages[i]
		q := &s.Quantifier
		switch {
		case q.Optional, q.Kind == "times" && q.Min == 0, strings.HasPrefix(s.Contiguity, "not"):
		case s.Group != nil && skippable(s.Group.Stages):
		default:
			return false
		}
	}
	return true
}

// generator draws one case. The choices are weighted towards patterns both
// engines accept; some invalid combinations (a quantifier on a NOT stage,
// greedy on a single stage, a notFollowedBy at the end without a window,
// ...) are drawn on purpose, because both engines must then reject the
// pattern.
type generator struct {
	r *rand.Rand
	// leaves are the leaf stage names created so far, in order: the stages a
	// later condition may read with ctx.
	leaves []string
	// top are the top-level leaf names (skip strategy targets).
	top []string
	// windows is true when some stage has a per-loop window.
	windows bool
}

func (g *generator) chance(p float64) bool { return g.r.Float64() < p }

// pick returns one of the choices, weighted.
func pick[T any](r *rand.Rand, choices ...weighted[T]) T {
	total := 0
	for _, c := range choices {
		total += c.w
	}
	n := r.IntN(total)
	for _, c := range choices {
		if n < c.w {
			return c.v
		}
		n -= c.w
	}
	panic("difftest: pick: unreachable")
}

type weighted[T any] struct {
	w int
	v T
}

func w[T any](weight int, v T) weighted[T] { return weighted[T]{weight, v} }

func (g *generator) input(id string) conformance.Input {
	in := conformance.Input{ID: id}
	in.Pattern = g.pattern()
	if g.chance(0.35) {
		in.Driver = conformance.DriverOperator
		g.operator(&in)
	} else {
		in.Driver = conformance.DriverNFA
		in.Events = g.nfaEvents()
	}
	timed := in.Pattern.WithinMs != nil || g.windows
	in.TimeoutHandling = timed && g.chance(0.4) || g.chance(0.05)
	return in
}

// pattern draws 1-4 top-level stages, a within window and a skip strategy.
func (g *generator) pattern() conformance.PatternSpec {
	n := pick(g.r, w(25, 1), w(35, 2), w(25, 3), w(15, 4))
	ps := conformance.PatternSpec{Stages: g.stages(n, 0)}
	last := &ps.Stages[len(ps.Stages)-1]
	// A notFollowedBy at the end needs a window; leave it out now and then,
	// which both engines must reject.
	needWindow := last.Contiguity == "notFollowedBy" && g.chance(0.9)
	if needWindow || g.chance(0.4) {
		ms := int64(2 + g.r.IntN(9))
		ps.WithinMs = &ms
		if g.chance(0.3) {
			ps.WithinType = "PREVIOUS_AND_CURRENT"
		}
	}
	ps.Skip = g.skip()
	if strings.HasPrefix(ps.Skip, "skipTo") && !strings.HasPrefix(ps.Skip, "skipToNext") {
		ps.SkipThrowOnMiss = g.chance(0.3)
	}
	return ps
}

func (g *generator) skip() string {
	kind := pick(g.r, w(40, "noSkip"), w(15, "skipToNext"), w(15, "skipPastLastEvent"),
		w(15, "skipToFirst"), w(15, "skipToLast"))
	if kind != "skipToFirst" && kind != "skipToLast" {
		return kind
	}
	// Mostly a top-level stage; now and then a stage inside a group (which
	// Flink does not find) or a name that is no stage.
	target := g.top
	if len(target) == 0 || g.chance(0.1) {
		target = g.leaves
	}
	name := target[g.r.IntN(len(target))]
	if g.chance(0.03) {
		name = "nosuch"
	}
	return kind + ":" + name
}

// stages draws a sequence of n stages at group depth depth (0 = top level).
func (g *generator) stages(n, depth int) []conformance.StageSpec {
	out := make([]conformance.StageSpec, 0, n)
	for i := range n {
		cont := "begin"
		if i > 0 {
			cont = pick(g.r, w(22, "next"), w(30, "followedBy"), w(16, "followedByAny"),
				w(14, "notNext"), w(14, "notFollowedBy"))
		}
		not := strings.HasPrefix(cont, "not")
		if not && g.chance(0.9) {
			// Flink rejects an optional stage before a NOT stage; draw that
			// now and then only.
			makeRequired(&out[len(out)-1].Quantifier)
		}
		if depth < 2 && !not && g.chance(0.15) {
			out = append(out, g.group(cont, depth))
			continue
		}
		out = append(out, g.leaf(cont, not, depth))
	}
	return out
}

func (g *generator) group(cont string, depth int) conformance.StageSpec {
	inner := g.stages(pick(g.r, w(40, 1), w(45, 2), w(15, 3)), depth+1)
	s := conformance.StageSpec{Name: "(group)", Contiguity: cont, Group: &conformance.GroupSpec{Stages: inner}}
	s.Quantifier = g.quantifier(false, true)
	return s
}

func (g *generator) leaf(cont string, not bool, depth int) conformance.StageSpec {
	name := fmt.Sprintf("s%d", len(g.leaves)+1)
	s := conformance.StageSpec{Name: name, Contiguity: cont}
	looping := false
	if not && !g.chance(0.02) {
		s.Quantifier = conformance.QuantifierSpec{Kind: "one"}
	} else {
		s.Quantifier = g.quantifier(not, false)
		looping = s.Quantifier.Kind != "one"
	}
	// The condition may read earlier stages, and a looping stage itself.
	readable := g.leaves
	if looping {
		readable = append(readable[:len(readable):len(readable)], name)
	}
	cond := g.condition(readable, not)
	s.Condition = &cond
	// until needs a loop (oneOrMore, timesOrMore); now and then it is drawn
	// for another stage, which both engines must reject.
	loop := s.Quantifier.Kind == "oneOrMore" || s.Quantifier.Kind == "timesOrMore"
	if loop && g.chance(0.2) || !not && g.chance(0.01) {
		u := g.untilCondition()
		s.Until = &u
	}
	g.leaves = append(g.leaves, name)
	if depth == 0 {
		g.top = append(g.top, name)
	}
	return s
}

// quantifier draws a quantifier; rarely an invalid one (greedy on a single
// stage, combinations on a single stage, a loop on a NOT stage).
func (g *generator) quantifier(not, group bool) conformance.QuantifierSpec {
	q := conformance.QuantifierSpec{Kind: "one"}
	kind := pick(g.r, w(45, "one"), w(20, "oneOrMore"), w(10, "timesN"), w(15, "timesRange"), w(10, "timesOrMore"))
	if not {
		kind = pick(g.r, w(1, "oneOrMore"), w(1, "timesN"))
	}
	switch kind {
	case "oneOrMore":
		q.Kind, q.Min = "oneOrMore", 1
	case "timesN":
		n := 1 + g.r.IntN(3)
		if group {
			n = 1 + g.r.IntN(2)
		}
		q.Kind, q.Min, q.Max = "times", n, &n
	case "timesRange":
		lo := pick(g.r, w(30, 0), w(45, 1), w(25, 2))
		hi := lo + 1 + g.r.IntN(2)
		q.Kind, q.Min, q.Max = "times", lo, &hi
	case "timesOrMore":
		q.Kind, q.Min = "timesOrMore", pick(g.r, w(3, 0), w(50, 1), w(35, 2), w(12, 3))
	}
	looping := q.Kind != "one"
	// times(0, n) is already optional in Flink (a second optional() throws);
	// the case format cannot say which of the two a case means, so min 0
	// never comes with optional.
	q.Optional = g.chance(0.2) && !(q.Kind == "times" && q.Min == 0)
	switch {
	case looping:
		q.Inner = pick(g.r, w(60, "relaxed"), w(25, "consecutive"), w(15, "allowCombinations"))
		switch {
		case group || q.Inner == "allowCombinations":
			q.Greedy = g.chance(0.02) // Flink rejects both
		default:
			q.Greedy = g.chance(0.15)
		}
		if !group && g.chance(0.12) {
			ms := int64(2 + g.r.IntN(7))
			q.WindowMs = &ms
			g.windows = true
		}
	case g.chance(0.02):
		q.Greedy = true // invalid: greedy on a single stage
	case g.chance(0.02):
		q.Inner = "consecutive" // invalid: not a loop
	}
	if q.Inner == "relaxed" {
		q.Inner = ""
	}
	return q
}

// The vocabulary of conditions: event names a-d, prices 1-5.
var (
	eventNames  = []string{"a", "b", "c", "d"}
	nameWeights = []int{35, 30, 20, 15}
)

func (g *generator) eventName() string {
	n := g.r.IntN(100)
	for i, wt := range nameWeights {
		if n < wt {
			return eventNames[i]
		}
		n -= wt
	}
	return eventNames[0]
}

func (g *generator) price() float64 { return float64(1 + g.r.IntN(5)) }

// condition draws a condition over name and price; with some probability an
// iterative one reading one of readable with ctx.
func (g *generator) condition(readable []string, not bool) string {
	if len(readable) > 0 && g.chance(0.2) {
		return g.iterative(readable[g.r.IntN(len(readable))])
	}
	if !not && g.chance(0.08) {
		return "true"
	}
	return g.simple()
}

func (g *generator) simple() string {
	n1, n2 := g.eventName(), g.eventName()
	p := fmtPrice(g.price())
	switch pick(g.r, w(40, 0), w(6, 1), w(8, 2), w(8, 3), w(6, 4), w(12, 5), w(8, 6), w(5, 7), w(4, 8), w(3, 9)) {
	case 0:
		return fmt.Sprintf("name == %q", n1)
	case 1:
		return fmt.Sprintf("name != %q", n1)
	case 2:
		return fmt.Sprintf("name in [%q, %q]", n1, n2)
	case 3:
		return "price > " + p
	case 4:
		return "price <= " + p
	case 5:
		return fmt.Sprintf("name == %q && price > %s", n1, p)
	case 6:
		return fmt.Sprintf("name == %q || name == %q", n1, n2)
	case 7:
		return fmt.Sprintf("!(name == %q)", n1)
	case 8:
		return "price == " + p
	default:
		return fmt.Sprintf(`type == "SubEvent" && volume > %s`, fmtPrice(float64(g.r.IntN(4))))
	}
}

// iterative draws a condition that reads stage s with ctx.
func (g *generator) iterative(s string) string {
	n := g.eventName()
	k := g.r.IntN(3) + 1
	switch g.r.IntN(7) {
	case 0:
		return fmt.Sprintf("len(ctx(%q)) < %d", s, k)
	case 1:
		return fmt.Sprintf("sum(map(ctx(%q), .price)) + price < %s", s, fmtPrice(float64(4+g.r.IntN(8))))
	case 2:
		return fmt.Sprintf("len(ctx(%q)) > 0 && ctx(%q)[0].price == price", s, s)
	case 3:
		return fmt.Sprintf("ctx(%q)[0].price < price", s) // false while s is empty
	case 4:
		return fmt.Sprintf("all(ctx(%q), .name != name)", s)
	case 5:
		return fmt.Sprintf("name == %q && len(ctx(%q)) <= %d", n, s, k)
	default:
		return fmt.Sprintf("len(ctx(%q)) == 0 || last(ctx(%q)).price <= price", s, s)
	}
}

func (g *generator) untilCondition() string {
	switch g.r.IntN(3) {
	case 0:
		return fmt.Sprintf("name == %q", g.eventName())
	case 1:
		return "price >= " + fmtPrice(float64(3+g.r.IntN(3)))
	default:
		return fmt.Sprintf("name == %q && price > %s", g.eventName(), fmtPrice(g.price()))
	}
}

// fmtPrice writes a price as a float literal (2.0, not 2).
func fmtPrice(p float64) string { return fmt.Sprintf("%.1f", p) }

// event draws one event with the given seq, id and ts.
func (g *generator) event(seq uint64, id int64, ts *int64) conformance.EventSpec {
	e := conformance.EventSpec{Seq: seq, ID: id, Name: g.eventName(), Price: g.price(), Ts: ts, Type: "Event"}
	if g.chance(0.1) {
		e.Type = "SubEvent"
		v := float64(g.r.IntN(5))
		e.Volume = &v
	}
	return e
}

// nfaEvents draws 3-12 events with small timestamps that often repeat and
// sometimes go backwards; rarely none has a timestamp.
//
// A timestamp that goes back to a value already passed (2, 3, 2) makes
// Flink give the later event the buffer id of the earlier one (doc id
// event-id-collision); that is drawn in few cases only, so that the
// explanation does not cover much of the space.
func (g *generator) nfaEvents() []conformance.EventSpec {
	n := 3 + g.r.IntN(10)
	noTs := g.chance(0.02)
	collide := g.chance(0.05)
	ts := int64(g.r.IntN(3))
	var seen []int64
	evs := make([]conformance.EventSpec, n)
	for i := range evs {
		if !collide && collides(seen, ts) {
			ts = slices.Max(seen)
		}
		var p *int64
		if !noTs {
			t := ts
			p = &t
		}
		seen = append(seen, ts)
		evs[i] = g.event(uint64(i+1), int64(1+g.r.IntN(3)), p)
		ts = max(0, ts+pick(g.r, w(5, int64(-2)), w(6, int64(-1)), w(25, int64(0)), w(34, int64(1)), w(20, int64(2)), w(10, int64(3))))
	}
	return evs
}

// collides says whether an event with timestamp t after events with the
// timestamps seen (in feed order) may get the buffer id of an earlier
// event in Flink: an earlier event has timestamp t and a later one passed
// it, which made advanceTime drop the counter of t.
func collides(seen []int64, t int64) bool {
	for i, s := range seen {
		if s != t {
			continue
		}
		for _, later := range seen[i+1:] {
			if later > t {
				return true
			}
		}
	}
	return false
}

// operator draws the events and the step script of an operator_harness
// case: 1-2 keys, event or processing time, watermarks that mostly advance,
// late events, now and then a snapshot_restore and a comparator.
func (g *generator) operator(in *conformance.Input) {
	// Keyed by id, as the Java harness keys every operator case.
	in.KeyBy = "id"
	keys := pick(g.r, w(60, 1), w(40, 2))
	n := 3 + g.r.IntN(10)
	procTime := g.chance(0.2)
	if procTime {
		in.TimeCharacteristic = "processing_time"
	}
	if g.chance(0.25) {
		field := pick(g.r, w(3, "price"), w(1, "name"))
		order := pick(g.r, w(1, "asc"), w(1, "desc"))
		in.EventComparator = fmt.Appendf(nil, `{"field": %q, "order": %q}`, field, order)
	}
	// Time mostly starts after 0: Flink sets no window timer for a partial
	// match that starts at time 0 or before (doc id window-timer).
	ts, floor := int64(1+g.r.IntN(3)), int64(1)
	if g.chance(0.1) {
		ts, floor = 0, 0
	}
	var maxTs int64
	wm := int64(math.MinInt64)
	clock := int64(0)
	var steps []conformance.Step
	if procTime && g.chance(0.9) {
		clock = ts
		steps = append(steps, conformance.Step{ProcessingTime: ptr(clock)})
	}
	snapshots := 0
	for i := range n {
		t := max(floor, ts)
		e := g.event(uint64(i+1), int64(1+g.r.IntN(keys)), &t)
		in.Events = append(in.Events, e)
		steps = append(steps, conformance.Step{Event: ptr(e.Seq)})
		maxTs = max(maxTs, t)
		ts = t + pick(g.r, w(5, int64(-3)), w(8, int64(-1)), w(25, int64(0)), w(35, int64(1)), w(17, int64(2)), w(10, int64(4)))
		switch {
		case procTime && g.chance(0.35):
			clock += int64(1 + g.r.IntN(4))
			steps = append(steps, conformance.Step{ProcessingTime: ptr(clock)})
		case g.chance(0.3):
			next := maxTs - int64(g.r.IntN(3))
			if next <= wm && !g.chance(0.05) {
				break // watermarks mostly advance; rarely one goes back
			}
			wm = next
			steps = append(steps, conformance.Step{Watermark: ptr(wm)})
		}
		if snapshots < 2 && g.chance(0.05) {
			steps = append(steps, conformance.Step{SnapshotRestore: ptr(true)})
			snapshots++
			if procTime && g.chance(0.8) {
				// Flink's harness restores into a new harness whose clock
				// starts again at 0; a real clock goes on. Mostly set it
				// back to where it was, so that both engines see the same
				// clock; else an element may arrive before the clock
				// advances again (doc id restored-processing-clock).
				steps = append(steps, conformance.Step{ProcessingTime: ptr(clock)})
			}
		}
	}
	// The end: mostly a watermark (or a clock advance) past every window,
	// sometimes Long.MAX_VALUE, sometimes nothing.
	switch {
	case procTime:
		if g.chance(0.8) {
			steps = append(steps, conformance.Step{ProcessingTime: ptr(clock + int64(1+g.r.IntN(12)))})
		}
	case g.chance(0.04):
		steps = append(steps, conformance.Step{Watermark: ptr(int64(math.MaxInt64))})
	case g.chance(0.85):
		steps = append(steps, conformance.Step{Watermark: ptr(max(wm, maxTs) + int64(1+g.r.IntN(12)))})
	}
	in.OperatorSteps = steps
}

// makeRequired makes q not optional; times(0, n) becomes times(1, n).
func makeRequired(q *conformance.QuantifierSpec) {
	q.Optional = false
	if q.Kind == "times" && q.Min == 0 {
		q.Min = 1
	}
}

func ptr[T any](v T) *T { return &v }
