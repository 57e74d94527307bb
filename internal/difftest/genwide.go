package difftest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/cepheus-cep/cepheus/internal/conformance"
)

// The wide profile draws what users run, where [Generate] (the narrow
// profile) draws small cases that reach every corner of the semantics:
//
//   - 50-2,000 events (most cases near the low end), keyed by id with 1-50
//     keys of skewed popularity, epoch-millisecond timestamps with gaps of
//     milliseconds to minutes and bounded out-of-orderness, watermarks
//     that follow a bounded-out-of-orderness generator (so that a few
//     events come late), or processing time; up to five snapshot_restore
//     steps; comparators on every field;
//   - windows of seconds to hours (within, per-loop window_ms, and a
//     within on a stage with other stages after it), scaled to the pace of
//     the events;
//   - conditions on ts, on the volume that a plain Event lacks (nil),
//     chained where/or clauses, and aggregates over one or two stages
//     (count, avg, mean, min, max, any, none, filter, sum);
//   - groups nested up to four deep, until and per-loop windows on groups;
//   - 2-6 rules over the same stream in a fair share of the cases.
//
// A pattern that can multiply its partial matches (a loop, followedByAny,
// allowCombinations) always gets a pattern window of few events, and the
// case fewer events, so that a run of 5,000 wide cases stays fast.

// WideCaseID is the id of wide case i of seed: "w" and [CaseID], so that
// narrow and wide ids never collide.
func WideCaseID(seed uint64, i int) string { return "w" + CaseID(seed, i) }

// wideStream separates the random streams of the wide profile from those
// of the narrow one for the same (seed, i).
const wideStream = 0x77696465 << 32 // "wide"

// GenerateWide returns case i of seed in the wide profile. Like
// [Generate], every case has its own random source, seeded by (seed, i),
// and no pattern of it has a looping group that can loop without taking
// an event.
func GenerateWide(seed uint64, i int) conformance.Input {
	r := rand.New(rand.NewPCG(seed, uint64(i)^wideStream))
	for {
		g := &wideGen{generator: generator{r: r}}
		in := g.input(WideCaseID(seed, i))
		if !anyLoopsOverNothing(&in) {
			capWindows(&in)
			return in
		}
	}
}

// The most events one window of a pattern may span (per key), by the
// pattern's cost: windows are drawn from the case's mean pace, but gaps
// are drawn from an exponential distribution with pauses, so a burst can
// put many more events into one window, and nested loops over a dozen
// events take minutes in both engines.
const (
	maxWindowEventsExplosive = 6
	maxWindowEventsExpanding = 40
)

// capWindows narrows the windows of every pattern of in (within, a
// stage's within, per-loop windows) until no window spans more events of
// one key than the pattern's cost allows.
func capWindows(in *conformance.Input) {
	byKey := map[int64][]int64{}
	for _, e := range in.Events {
		if e.Ts == nil {
			continue
		}
		k := e.ID
		if in.Driver == conformance.DriverNFA {
			k = 0 // one NFA: every event in one stream
		}
		byKey[k] = append(byKey[k], *e.Ts)
	}
	for _, ts := range byKey {
		slices.Sort(ts)
	}
	span := func(w int64) int { // the most events in a window of w
		most := 0
		for _, ts := range byKey {
			j := 0
			for i := range ts {
				for ts[i]-ts[j] >= w {
					j++
				}
				most = max(most, i-j+1)
			}
		}
		return most
	}
	narrow := func(p *int64, limit int) {
		if p == nil {
			return
		}
		for *p > 1 && span(*p) > limit {
			*p = max(1, *p*2/3)
		}
	}
	patterns := []*conformance.PatternSpec{&in.Pattern}
	for k := range in.Rules {
		patterns = append(patterns, &in.Rules[k])
	}
	for _, p := range patterns {
		limit := math.MaxInt
		switch patternCost(p.Stages) {
		case explosive:
			limit = maxWindowEventsExplosive
		case expanding:
			limit = maxWindowEventsExpanding
		}
		if limit == math.MaxInt {
			continue
		}
		narrow(p.WithinMs, limit)
		walkStages(p.Stages, func(s *conformance.StageSpec) {
			narrow(s.WithinMs, limit)
			narrow(s.Quantifier.WindowMs, limit)
		})
	}
}

// patternCost classifies stages as the generator does: explosive with
// allowCombinations, a looping group, or a loop next to followedByAny;
// expanding with a loop or followedByAny; else cheap.
func patternCost(stages []conformance.StageSpec) cost {
	c := cheap
	walkStages(stages, func(s *conformance.StageSpec) {
		q := &s.Quantifier
		loop := q.Kind == "oneOrMore" || q.Kind == "timesOrMore" || q.Kind == "times" && (q.Max == nil || *q.Max > 1)
		switch {
		case q.Inner == "allowCombinations", s.Group != nil && loop:
			c = explosive
		case loop || s.Contiguity == "followedByAny":
			c = max(c, expanding)
		}
	})
	if c == expanding && slices.ContainsFunc(stages, func(s conformance.StageSpec) bool { return s.Contiguity == "followedByAny" }) {
		c = explosive
	}
	return c
}

// walkStages calls f on every stage, groups and their inner stages
// included.
func walkStages(stages []conformance.StageSpec, f func(*conformance.StageSpec)) {
	for i := range stages {
		f(&stages[i])
		if g := stages[i].Group; g != nil {
			walkStages(g.Stages, f)
		}
	}
}

// anyLoopsOverNothing is loopsOverNothing over the pattern or every rule.
func anyLoopsOverNothing(in *conformance.Input) bool {
	if loopsOverNothing(in.Pattern.Stages) {
		return true
	}
	for k := range in.Rules {
		if loopsOverNothing(in.Rules[k].Stages) {
			return true
		}
	}
	return false
}

// cost is how many partial matches a pattern can keep per event in its
// window: it bounds the window (in events) and the number of events.
type cost int

const (
	cheap     cost = iota // single stages only: partial matches grow linearly
	expanding             // loops or followedByAny: polynomially
	explosive             // allowCombinations, or a loop with followedByAny: exponentially
)

// wideGen draws one wide case. It reuses the narrow generator's state
// (the stage names, for ctx and skip targets) and helpers.
type wideGen struct {
	generator
	// base is the first timestamp; pace the mean gap between two events
	// (ms), which windows are scaled to.
	base, pace int64
	// cost is the cost of the pattern being drawn.
	cost cost
	// maxWindow is the largest window drawn in the case (ms).
	maxWindow int64
	// stageWindow is true when some stage of the pattern being drawn has a
	// within of its own.
	stageWindow bool
}

func (g *wideGen) input(id string) conformance.Input {
	in := conformance.Input{ID: id}
	g.base = 1_700_000_000_000 + g.r.Int64N(100_000_000_000)
	g.pace = pick(g.r, w(10, int64(20)), w(20, int64(100)), w(25, int64(500)), w(20, int64(2_000)),
		w(15, int64(10_000)), w(10, int64(60_000)))
	worst := cheap
	if g.chance(0.85) {
		in.Driver = conformance.DriverOperator
		if g.chance(0.25) {
			for range pick(g.r, w(30, 2), w(25, 3), w(20, 4), w(15, 5), w(10, 6)) {
				in.Rules = append(in.Rules, g.pattern())
				worst = max(worst, g.cost)
			}
		} else {
			in.Pattern = g.pattern()
			worst = g.cost
		}
		g.operator(&in, g.eventCount(worst, len(in.Rules)))
	} else {
		in.Driver = conformance.DriverNFA
		in.Pattern = g.pattern()
		in.Events = g.nfaEvents(g.eventCount(g.cost, 1) / 2)
	}
	in.TimeoutHandling = g.maxWindow > 0 && g.chance(0.4)
	return in
}

// eventCount draws 50-2,000 events, skewed towards the low end (mean
// about 300, median about 170), fewer for costly patterns and for cases
// with several rules (the Flink side costs about the same per event and
// rule).
func (g *wideGen) eventCount(c cost, rules int) int {
	u := g.r.Float64()
	n := 50 + int(450*u*u)
	if g.chance(0.3) {
		n = 50 + int(1950*u*u*u)
	}
	if rules > 1 {
		n = n * 3 / (2 * rules)
	}
	switch c {
	case explosive:
		n = min(n, 300)
	case expanding:
		n = min(n, 1000)
	}
	return max(n, 50)
}

// pattern draws a pattern of 1-5 top-level stages, with a pattern window
// whenever the pattern can multiply its partial matches.
func (g *wideGen) pattern() conformance.PatternSpec {
	var ps conformance.PatternSpec
	for {
		g.leaves, g.top, g.windows, g.cost, g.stageWindow = nil, nil, false, cheap, false
		n := pick(g.r, w(15, 1), w(35, 2), w(30, 3), w(15, 4), w(5, 5))
		ps = conformance.PatternSpec{Stages: g.stages(n, 0)}
		if !anyInRepeatedGroup(ps.Stages, false) {
			break
		}
	}
	g.earlierWindow(&ps)
	last := &ps.Stages[len(ps.Stages)-1]
	needWindow := g.cost > cheap || last.Contiguity == "notFollowedBy" && !g.chance(0.01)
	if needWindow || g.chance(0.75) {
		ms := g.window()
		ps.WithinMs = &ms
		// A gap window does not bound a match's length: costly patterns
		// keep FIRST_AND_LAST.
		if g.cost == cheap && g.chance(0.25) && !lastHasGap(last) {
			ps.WithinType = "PREVIOUS_AND_CURRENT"
		}
	}
	if !g.chance(0.02) {
		clampGaps(&ps)
	}
	ps.Skip = g.wideSkip()
	if strings.HasPrefix(ps.Skip, "skipTo") && !strings.HasPrefix(ps.Skip, "skipToNext") {
		ps.SkipThrowOnMiss = g.chance(0.05)
	}
	return ps
}

// wideSkip draws a skip strategy; the target of skipToFirst and skipToLast
// is a top-level stage but rarely (a stage inside a group, which Flink
// does not find, or no stage at all: both engines must reject them).
func (g *wideGen) wideSkip() string {
	kind := pick(g.r, w(40, "noSkip"), w(15, "skipToNext"), w(20, "skipPastLastEvent"),
		w(12, "skipToFirst"), w(13, "skipToLast"))
	if kind != "skipToFirst" && kind != "skipToLast" {
		return kind
	}
	target := g.top
	if len(target) == 0 || g.chance(0.01) {
		target = g.leaves
	}
	name := target[g.r.IntN(len(target))]
	if g.chance(0.005) {
		name = "nosuch"
	}
	return kind + ":" + name
}

// clampGaps shortens every gap window of a pattern (PREVIOUS_AND_CURRENT
// windows, per-loop windows) to its FIRST_AND_LAST window: Flink rejects
// a longer one, which the wide profile draws rarely only.
func clampGaps(ps *conformance.PatternSpec) {
	limit := int64(math.MaxInt64)
	if ps.WithinMs != nil && ps.WithinType != "PREVIOUS_AND_CURRENT" {
		limit = *ps.WithinMs
	}
	for _, s := range ps.Stages {
		if s.WithinMs != nil && s.WithinType != "PREVIOUS_AND_CURRENT" {
			limit = min(limit, *s.WithinMs)
		}
	}
	clamp := func(p *int64) {
		if p != nil {
			*p = min(*p, limit)
		}
	}
	if ps.WithinType == "PREVIOUS_AND_CURRENT" {
		clamp(ps.WithinMs)
	}
	var walk func([]conformance.StageSpec)
	walk = func(stages []conformance.StageSpec) {
		for i := range stages {
			s := &stages[i]
			if s.WithinType == "PREVIOUS_AND_CURRENT" {
				clamp(s.WithinMs)
			}
			clamp(s.Quantifier.WindowMs)
			if s.Group != nil {
				walk(s.Group.Stages)
			}
		}
	}
	walk(ps.Stages)
}

// anyInRepeatedGroup says whether a group that repeats (any quantifier
// but one) holds a followedByAny or allowCombinations stage: its partial
// matches multiply with every repetition, and 50 events keep Flink busy
// for more than its 10 s per case.
func anyInRepeatedGroup(stages []conformance.StageSpec, repeated bool) bool {
	for i := range stages {
		s := &stages[i]
		if repeated && (s.Contiguity == "followedByAny" || s.Quantifier.Inner == "allowCombinations") {
			return true
		}
		if s.Group != nil && anyInRepeatedGroup(s.Group.Stages, repeated || s.Quantifier.Kind != "one") {
			return true
		}
	}
	return false
}

func lastHasGap(s *conformance.StageSpec) bool {
	return s.WithinMs != nil && s.WithinType == "PREVIOUS_AND_CURRENT"
}

// earlierWindow now and then sets a within on a top-level single stage
// that has stages after it: FIRST_AND_LAST (Flink keeps the smallest of
// the chain) or PREVIOUS_AND_CURRENT (the time from the previous event to
// this stage's). When the pattern ends in notFollowedBy, or in a group
// that ends in one, none is drawn: Flink's compiler sees such a window
// only after it compiled that notFollowedBy, which then holds no match
// until the window closes, and the rule language's one window, the
// pattern's, cannot say that (conformance.CaseSource refuses it).
func (g *wideGen) earlierWindow(ps *conformance.PatternSpec) {
	if len(ps.Stages) < 2 || !g.chance(0.2) {
		return
	}
	// k is drawn first so that the other patterns' draws stay as they were.
	k := g.r.IntN(len(ps.Stages) - 1)
	if conformance.EndsInNotFollowedBy(ps.Stages) {
		return
	}
	s := &ps.Stages[k]
	if s.Group != nil || strings.HasPrefix(s.Contiguity, "not") {
		return
	}
	ms := g.window()
	s.WithinMs = &ms
	if g.chance(0.5) {
		s.WithinType = "PREVIOUS_AND_CURRENT"
	}
	g.stageWindow = true
}

// window draws a window of a few to a few hundred events at the case's
// pace: few for costly patterns. Windows of 5 s or more are whole seconds.
func (g *wideGen) window() int64 {
	var events float64
	switch g.cost {
	case explosive:
		// Gaps are drawn from an exponential distribution, so a window
		// of a few paces can still hold a burst of a dozen events, on
		// which nested loops take minutes in both engines.
		events = 1 + 1.5*g.r.Float64()
	case expanding:
		events = 2 + 12*g.r.Float64()
	default:
		events = 2 + 300*math.Pow(g.r.Float64(), 2)
	}
	ms := max(1, int64(events*float64(g.pace)))
	if ms >= 5_000 {
		ms = ms / 1000 * 1000
	}
	g.maxWindow = max(g.maxWindow, ms)
	return ms
}

// stages draws n stages at group depth depth (0 = top level); groups nest
// up to four deep, ever more rarely.
func (g *wideGen) stages(n, depth int) []conformance.StageSpec {
	out := make([]conformance.StageSpec, 0, n)
	for i := range n {
		cont := "begin"
		if i > 0 {
			cont = pick(g.r, w(25, "next"), w(35, "followedBy"), w(12, "followedByAny"),
				w(12, "notNext"), w(12, "notFollowedBy"))
		}
		not := strings.HasPrefix(cont, "not")
		if not && !g.chance(0.01) {
			makeRequired(&out[len(out)-1].Quantifier)
		}
		if cont == "followedByAny" {
			g.cost = max(g.cost, expanding)
		}
		groupP := []float64{0.15, 0.15, 0.12, 0.1}
		if depth < len(groupP) && !not && g.chance(groupP[depth]) {
			out = append(out, g.group(cont, depth))
			continue
		}
		out = append(out, g.leaf(cont, not, depth))
	}
	return out
}

func (g *wideGen) group(cont string, depth int) conformance.StageSpec {
	inner := g.stages(pick(g.r, w(40, 1), w(45, 2), w(15, 3)), depth+1)
	s := conformance.StageSpec{Name: "(group)", Contiguity: cont, Group: &conformance.GroupSpec{Stages: inner}}
	s.Quantifier = g.quantifier(false, true)
	loop := s.Quantifier.Kind == "oneOrMore" || s.Quantifier.Kind == "timesOrMore"
	if loop && g.chance(0.1) {
		u := g.untilCondition()
		s.Until = &u
	}
	return s
}

func (g *wideGen) leaf(cont string, not bool, depth int) conformance.StageSpec {
	name := fmt.Sprintf("s%d", len(g.leaves)+1)
	s := conformance.StageSpec{Name: name, Contiguity: cont}
	looping := false
	if not && !g.chance(0.005) {
		s.Quantifier = conformance.QuantifierSpec{Kind: "one"}
	} else {
		s.Quantifier = g.quantifier(not, false)
		looping = s.Quantifier.Kind != "one"
	}
	readable := g.leaves
	if looping {
		readable = append(readable[:len(readable):len(readable)], name)
	}
	cond := g.condition(readable)
	s.Condition = &cond
	if g.chance(0.2) {
		s.Chain = g.chain(readable)
		if cond == "true" {
			cond = g.simple()
			s.Condition = &cond
		}
	}
	loop := s.Quantifier.Kind == "oneOrMore" || s.Quantifier.Kind == "timesOrMore"
	if loop && g.chance(0.15) || !not && g.chance(0.003) {
		u := g.untilCondition()
		s.Until = &u
	}
	g.leaves = append(g.leaves, name)
	if depth == 0 {
		g.top = append(g.top, name)
	}
	return s
}

// quantifier draws a quantifier (rarely an invalid one) and raises the
// pattern's cost for loops and allowCombinations.
func (g *wideGen) quantifier(not, group bool) conformance.QuantifierSpec {
	q := conformance.QuantifierSpec{Kind: "one"}
	kind := pick(g.r, w(50, "one"), w(18, "oneOrMore"), w(10, "timesN"), w(12, "timesRange"), w(10, "timesOrMore"))
	if not {
		kind = pick(g.r, w(1, "oneOrMore"), w(1, "timesN"))
	}
	switch kind {
	case "oneOrMore":
		q.Kind, q.Min = "oneOrMore", 1
	case "timesN":
		n := 1 + g.r.IntN(3)
		q.Kind, q.Min, q.Max = "times", n, &n
	case "timesRange":
		lo := pick(g.r, w(25, 0), w(50, 1), w(25, 2))
		hi := lo + 1 + g.r.IntN(3)
		q.Kind, q.Min, q.Max = "times", lo, &hi
	case "timesOrMore":
		q.Kind, q.Min = "timesOrMore", pick(g.r, w(60, 1), w(30, 2), w(10, 3))
	}
	looping := q.Kind != "one"
	q.Optional = g.chance(0.2) && !(q.Kind == "times" && q.Min == 0)
	if !looping {
		if g.chance(0.005) {
			q.Greedy = true // invalid: greedy on a single stage
		}
		return q
	}
	g.cost = max(g.cost, expanding)
	if group && q.Kind != "times" {
		g.cost = explosive // a looping group
	}
	q.Inner = pick(g.r, w(60, ""), w(25, "consecutive"), w(15, "allowCombinations"))
	if q.Inner == "allowCombinations" {
		g.cost = explosive
	}
	q.Greedy = !group && q.Inner != "allowCombinations" && g.chance(0.1) || g.chance(0.003)
	if g.chance(0.15) && (!group || g.chance(0.6)) {
		ms := g.window()
		q.WindowMs = &ms
		g.windows = true
	}
	return q
}

// condition draws the condition of a leaf: a narrow one, a wide simple one
// (ts, nil volume), or an iterative one over one or two readable stages.
func (g *wideGen) condition(readable []string) string {
	switch {
	case len(readable) > 0 && g.chance(0.3):
		return g.aggregate(readable)
	case g.chance(0.05):
		return "true"
	case g.chance(0.45):
		return g.simple()
	}
	return g.wideSimple()
}

// chain draws 1-3 chained where/or conditions.
func (g *wideGen) chain(readable []string) []conformance.ChainedCondition {
	out := make([]conformance.ChainedCondition, 1+g.r.IntN(3))
	for k := range out {
		out[k].Op = pick(g.r, w(1, "where"), w(1, "or"))
		switch {
		case len(readable) > 0 && g.chance(0.25):
			out[k].Expr = g.aggregate(readable)
		case g.chance(0.5):
			out[k].Expr = g.wideSimple()
		default:
			out[k].Expr = g.simple()
		}
	}
	return out
}

// wideSimple draws a condition on the event alone that the narrow profile
// never draws: on ts, on the volume that a plain Event lacks (nil, and an
// ordering of nil, which is a run-time error and so false), on a price
// range.
func (g *wideGen) wideSimple() string {
	v := fmtPrice(float64(g.r.IntN(8)))
	p, q := g.price(), g.price()
	if p > q {
		p, q = q, p
	}
	switch g.r.IntN(11) {
	case 0:
		return "volume == nil"
	case 1:
		return "volume != nil && volume > " + v
	case 2:
		return "(volume ?? 0.0) >= " + v
	case 3:
		return fmt.Sprintf("volume > %s || name == %q", v, g.eventName()) // an error on a plain Event
	case 4:
		return fmt.Sprintf("type == %q || price > %s", "SubEvent", fmtPrice(p))
	case 5:
		return fmt.Sprintf("ts %% %d < %d", 2+g.r.IntN(9), 1+g.r.IntN(4))
	case 6:
		return fmt.Sprintf("ts > %d", g.base+g.r.Int64N(200)*g.pace)
	case 7:
		return fmt.Sprintf("ts %% 1000 >= %d && name != %q", 100*g.r.IntN(10), g.eventName())
	case 8:
		return fmt.Sprintf("price >= %s && price < %s", fmtPrice(p), fmtPrice(q+1))
	case 9:
		return fmt.Sprintf("not (volume == nil) || price <= %s", fmtPrice(p))
	default:
		return fmt.Sprintf("name in [%q, %q, %q]", g.eventName(), g.eventName(), g.eventName())
	}
}

// aggregate draws an iterative condition over readable stages: an
// aggregate over one stage (count, avg, mean, min, max, any, none,
// filter), over two, or on ts.
func (g *wideGen) aggregate(readable []string) string {
	s := readable[g.r.IntN(len(readable))]
	s2 := readable[g.r.IntN(len(readable))]
	k := 1 + g.r.IntN(3)
	p := fmtPrice(g.price())
	d := max(1, g.r.Int64N(10)*g.pace)
	switch g.r.IntN(14) {
	case 0:
		return fmt.Sprintf("count(ctx(%q), .price > %s) < %d", s, p, k)
	case 1:
		return fmt.Sprintf("avg(map(ctx(%q), .price)) <= price", s)
	case 2:
		return fmt.Sprintf("len(ctx(%q)) == 0 || mean(map(ctx(%q), .price)) > %s", s, s, p)
	case 3:
		return fmt.Sprintf("min(map(ctx(%q), .price)) <= price", s) // an error while s is empty
	case 4:
		return fmt.Sprintf("len(ctx(%q)) == 0 || max(map(ctx(%q), .price)) < price + %s", s, s, p)
	case 5:
		return fmt.Sprintf("any(ctx(%q), .name == name)", s)
	case 6:
		return fmt.Sprintf("none(ctx(%q), .price >= price)", s)
	case 7:
		return fmt.Sprintf("len(filter(ctx(%q), .price > %s)) < %d", s, p, k)
	case 8:
		return fmt.Sprintf("sum(map(ctx(%q), .price)) + sum(map(ctx(%q), .price)) < %s", s, s2, fmtPrice(float64(5+g.r.IntN(15))))
	case 9:
		return fmt.Sprintf("len(ctx(%q)) + len(ctx(%q)) <= %d", s, s2, k+1)
	case 10:
		return fmt.Sprintf("len(ctx(%q)) == 0 || ts - last(ctx(%q)).ts >= %d", s, s, d)
	case 11:
		return fmt.Sprintf("len(ctx(%q)) > 0 && ts - ctx(%q)[0].ts < %d", s, s, d)
	case 12:
		return fmt.Sprintf("all(ctx(%q), .ts <= ts)", s)
	default:
		return fmt.Sprintf("count(ctx(%q), .volume != nil) + count(ctx(%q), .volume == nil) == len(ctx(%q))", s, s2, s)
	}
}

// gap draws the time to the next event: none now and then (equal
// timestamps), mostly about the case's pace, and now and then a pause of
// many windows.
func (g *wideGen) gap() int64 {
	switch {
	case g.chance(0.1):
		return 0
	case g.chance(0.01):
		return g.pace * int64(50+g.r.IntN(500))
	}
	return int64(g.r.ExpFloat64() * float64(g.pace))
}

// wideEvent draws one event with the given seq, key and timestamp: names
// a-d, prices in quarters from 0.25 to 10 (exact in binary, so sums are
// the same in Java and Go), some SubEvents with a volume.
func (g *wideGen) wideEvent(seq uint64, id int64, ts int64) conformance.EventSpec {
	e := conformance.EventSpec{Seq: seq, ID: id, Name: g.eventName(), Ts: &ts, Type: "Event"}
	e.Price = float64(1+g.r.IntN(40)) / 4
	if g.chance(0.15) {
		e.Type = "SubEvent"
		v := float64(g.r.IntN(17)) / 2
		e.Volume = &v
	}
	return e
}

// nfaEvents draws n events of one stream (nfa_harness: no keys) whose
// timestamps never go back: Flink gives an event that returns to a
// timestamp already passed the buffer id of an earlier one (doc id
// event-id-collision).
func (g *wideGen) nfaEvents(n int) []conformance.EventSpec {
	n = max(n, 50)
	t := g.base
	evs := make([]conformance.EventSpec, n)
	for i := range evs {
		evs[i] = g.wideEvent(uint64(i+1), int64(1+g.r.IntN(50)), t)
		t += g.gap()
	}
	return evs
}

// keyer draws the keys of events: 1-50 keys (most cases few), of skewed
// popularity (Zipf), the hottest one not always id 1.
type keyer struct {
	ids  []int
	zipf *rand.Zipf
}

func (g *wideGen) keyer() *keyer {
	u := g.r.Float64()
	n := 1 + int(49*u*u)
	k := &keyer{ids: g.r.Perm(n)}
	if n > 1 {
		k.zipf = rand.NewZipf(g.r, 1.05+g.r.Float64(), 1+2*g.r.Float64(), uint64(n-1))
	}
	return k
}

func (k *keyer) next() int64 {
	if k.zipf == nil {
		return int64(k.ids[0] + 1)
	}
	return int64(k.ids[k.zipf.Uint64()] + 1)
}

// operator draws the events and the step script of an operator_harness
// case keyed by id, in event time (watermarks of a bounded-out-of-orderness
// generator) or processing time.
func (g *wideGen) operator(in *conformance.Input, n int) {
	in.KeyBy = "id"
	if g.chance(0.3) {
		field := pick(g.r, w(3, "price"), w(2, "name"), w(2, "id"), w(2, "volume"), w(1, "ts"), w(1, "type"))
		order := pick(g.r, w(1, "asc"), w(1, "desc"))
		in.EventComparator = fmt.Appendf(nil, `{"field": %q, "order": %q}`, field, order)
	}
	keys := g.keyer()
	snaps := g.snapshotPoints(n)
	if g.chance(0.15) {
		in.TimeCharacteristic = "processing_time"
		g.processingTime(in, n, keys, snaps)
		return
	}
	g.eventTime(in, n, keys, snaps)
}

// snapshotPoints draws where snapshot_restore steps go: after the events
// whose index is true. Most cases have none, some up to five.
func (g *wideGen) snapshotPoints(n int) map[int]bool {
	out := map[int]bool{}
	for range pick(g.r, w(55, 0), w(15, 1), w(10, 2), w(10, 3), w(5, 4), w(5, 5)) {
		out[g.r.IntN(n)] = true
	}
	return out
}

// eventTime writes an event-time script: events out of order by at most a
// bound (a few by more, which may come late), a watermark of max ts -
// bound - 1 every few events when it advances, and at the end a watermark
// past every window, Long.MAX_VALUE, or none.
func (g *wideGen) eventTime(in *conformance.Input, n int, keys *keyer, snaps map[int]bool) {
	bound := g.pace * pick(g.r, w(25, int64(0)), w(30, int64(1)), w(30, int64(4)), w(15, int64(20)))
	every := 1 + g.r.IntN(20)
	trueT := g.base
	maxTs, wm := int64(math.MinInt64), int64(math.MinInt64)
	var steps []conformance.Step
	for i := range n {
		trueT += g.gap()
		t := trueT - g.r.Int64N(bound+1)
		if g.chance(0.02) {
			t -= bound + g.r.Int64N(2*bound+g.pace+1) // beyond the bound: maybe late
		}
		e := g.wideEvent(uint64(i+1), keys.next(), t)
		in.Events = append(in.Events, e)
		steps = append(steps, conformance.Step{Event: ptr(e.Seq)})
		maxTs = max(maxTs, t)
		if (i+1)%every == 0 || g.chance(0.05) {
			if next := maxTs - bound - 1; next > wm {
				wm = next
				steps = append(steps, conformance.Step{Watermark: ptr(wm)})
			}
		}
		if snaps[i] {
			steps = append(steps, conformance.Step{SnapshotRestore: ptr(true)})
		}
	}
	switch {
	case g.chance(0.4):
		steps = append(steps, conformance.Step{Watermark: ptr(int64(math.MaxInt64))})
	case g.chance(0.8):
		steps = append(steps, conformance.Step{Watermark: ptr(maxTs + g.maxWindow + 1 + g.r.Int64N(g.pace+1))})
	}
	in.OperatorSteps = steps
}

// processingTime writes a processing-time script: the clock starts at the
// case's base and advances by the events' gaps every event or few, is set
// again after each snapshot_restore (Flink's restored harness starts its
// clock at 0 again, which no real clock does), and ends past every window.
func (g *wideGen) processingTime(in *conformance.Input, n int, keys *keyer, snaps map[int]bool) {
	clock := g.base
	steps := []conformance.Step{{ProcessingTime: ptr(clock)}}
	advance := 0.3 + 0.7*g.r.Float64()
	trueT := g.base
	for i := range n {
		trueT += g.gap()
		e := g.wideEvent(uint64(i+1), keys.next(), trueT)
		in.Events = append(in.Events, e)
		steps = append(steps, conformance.Step{Event: ptr(e.Seq)})
		if trueT > clock && g.chance(advance) {
			clock = trueT
			steps = append(steps, conformance.Step{ProcessingTime: ptr(clock)})
		}
		if snaps[i] {
			steps = append(steps, conformance.Step{SnapshotRestore: ptr(true)}, conformance.Step{ProcessingTime: ptr(clock)})
		}
	}
	if g.chance(0.85) {
		steps = append(steps, conformance.Step{ProcessingTime: ptr(clock + g.maxWindow + 1 + g.r.Int64N(g.pace+1))})
	}
	in.OperatorSteps = steps
}
