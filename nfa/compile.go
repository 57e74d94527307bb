package nfa

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
)

// The compiler below follows the construction of Flink's NFACompiler state by
// state, including the order in which transitions are added: the Dewey
// versions that tell partial matches apart depend on that order, so a
// "cleaner" graph would give different (wrong) matches under
// followedByAny and allowCombinations.

type stateType uint8

const (
	stNormal stateType = iota
	stStart
	stFinal
	stStop
	stPending
)

type action uint8

const (
	actTake action = iota
	actIgnore
	actProceed
)

func (a action) String() string { return [...]string{"take", "ignore", "proceed"}[a] }

type state struct {
	id    int
	name  string // unique internal name, Flink style: base, base:0, base:1, ...
	base  string // the stage name the state belongs to (buffer page)
	stage int    // index of base in NFA.stages, -1 for group dummies and the end state
	typ   stateType
	gap   int64 // PREVIOUS_AND_CURRENT window in ms for partial matches waiting here, 0 = none
	trans []transition
	// waits is set when an event that fails the condition of the first
	// transition leaves a computation here as it is (see markWait):
	// Process then evaluates that condition alone.
	waits bool
}

type transition struct {
	act  action
	src  *state
	dst  *state
	cond Condition
	// negOf, when > 0, says that cond is Not of the condition of
	// transition negOf-1 of the same state, evaluated before it: a run
	// negates that result instead of evaluating the condition again
	// (Flink evaluates it twice; conditions are pure, so only the count of
	// failed evaluations differs).
	negOf int
}

func (s *state) add(a action, dst *state, c Condition) {
	s.trans = append(s.trans, transition{act: a, src: s, dst: dst, cond: c})
}

func (s *state) addTake(dst *state, c Condition)    { s.add(actTake, dst, c) }
func (s *state) addTakeSelf(c Condition)            { s.add(actTake, s, c) }
func (s *state) addIgnore(dst *state, c Condition)  { s.add(actIgnore, dst, c) }
func (s *state) addIgnoreSelf(c Condition)          { s.add(actIgnore, s, c) }
func (s *state) addProceed(dst *state, c Condition) { s.add(actProceed, dst, c) }

func (s *state) isFinal() bool { return s.typ == stFinal }
func (s *state) isStop() bool  { return s.typ == stStop }

const endStateName = "$endState$"

type notStage struct {
	cond Condition
	name string
}

type compiler struct {
	used       map[string]bool
	nextSuffix map[string]int
	stopStates map[string]*state
	states     []*state
	stageIndex map[string]int

	windowTime    int64
	hasWindowTime bool

	currentGroup *Pattern
	firstOfLoop  map[*Pattern]bool
	current      *Pattern
	following    *Pattern
	original     map[string]*state
	copyDepth    int // recursion depth of copyWithoutTransitiveNots
	copyBase     int // states when the outermost copy began
}

// Option configures [Compile].
type Option func(*NFA)

// WithTimeouts makes runs report timed-out partial matches (Flink's
// timeoutHandling). Off by default: timed-out partial matches are dropped
// silently, which saves extracting them.
func WithTimeouts() Option { return func(n *NFA) { n.handleTimeout = true } }

// Compile checks p as Flink's Pattern API and NFACompiler do and builds the
// automaton. Every problem found is reported, joined; each wraps
// [ErrMalformedPattern]. The returned NFA is immutable and may be shared by
// any number of runs and goroutines.
func Compile(p *Pattern, opts ...Option) (*NFA, error) {
	if p == nil {
		return nil, &PatternError{Msg: "nil pattern"}
	}
	if errs := p.b.errs; len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	c := &compiler{
		used:        map[string]bool{},
		nextSuffix:  map[string]int{},
		stopStates:  map[string]*state{},
		firstOfLoop: map[*Pattern]bool{},
		original:    map[string]*state{},
		current:     p,
	}
	n := &NFA{skip: p.b.skip}
	n.stages, n.stageContiguity = leafStages(p)
	n.stageIndex = make(map[string]int, len(n.stages))
	for i, s := range n.stages {
		n.stageIndex[s] = i
	}
	c.stageIndex = n.stageIndex
	if err := c.checkNames(p); err != nil {
		return nil, err
	}
	if err := c.checkSkip(p); err != nil {
		return nil, err
	}
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				pe, ok := r.(*PatternError)
				if !ok {
					panic(r)
				}
				err = pe
			}
		}()
		sink := c.createEndingState()
		sink = c.createMiddleStates(sink)
		start := c.convertPattern(sink)
		start.typ = stStart
		n.start = start.id
	}()
	if err != nil {
		return nil, err
	}
	n.windowTime = 0
	if c.hasWindowTime {
		n.windowTime = c.windowTime
		for _, s := range c.states {
			if s.gap > c.windowTime {
				return nil, &PatternError{Stage: s.base, Msg: "the window length between the previous and current event cannot be larger than the window length between the first and last event for a pattern"}
			}
		}
	}
	if p.q.consuming == NotRelaxed && p.gapWindow <= 0 && n.windowTime == 0 {
		return nil, &PatternError{Stage: p.name, Msg: "notFollowedBy is not supported without a within window as the last part of a pattern"}
	}
	n.states = c.states
	for _, s := range n.states {
		markNegations(s)
		markWait(s)
	}
	for _, o := range opts {
		o(n)
	}
	n.deferrable = n.deferrableStart()
	n.startDies = n.deferrable && n.startCanDie()
	if st := n.states[n.start]; len(st.trans) == 1 && st.trans[0].act == actTake {
		n.startTake = &st.trans[0]
	}
	n.fingerprint = graphFingerprint(n)
	return n, nil
}

// leafStages lists the stage names in pattern order, descending into groups.
func leafStages(last *Pattern) (names []string, cont []Contiguity) {
	var chain []*Pattern
	for q := last; q != nil; q = q.prev {
		chain = append(chain, q)
	}
	for i := len(chain) - 1; i >= 0; i-- {
		q := chain[i]
		if q.group != nil {
			n, c := leafStages(q.group)
			names = append(names, n...)
			cont = append(cont, c...)
			continue
		}
		names = append(names, q.name)
		cont = append(cont, q.q.consuming)
	}
	return names, cont
}

func (c *compiler) fail(stage, format string, args ...any) {
	panic(&PatternError{Stage: stage, Msg: fmt.Sprintf(format, args...)})
}

func (c *compiler) checkNames(p *Pattern) error {
	seen := map[string]bool{endStateName: true}
	var errs []error
	var walk func(q *Pattern)
	walk = func(q *Pattern) {
		for ; q != nil; q = q.prev {
			if q.group != nil {
				walk(q.group)
				continue
			}
			if seen[q.name] {
				errs = append(errs, &PatternError{Stage: q.name, Msg: "duplicate pattern name; names must be unique"})
			}
			seen[q.name] = true
		}
	}
	walk(p)
	return errors.Join(errs...)
}

// checkSkip mirrors Flink: the skip target is looked up among the top-level
// stages only (a stage inside a group is not found).
func (c *compiler) checkSkip(p *Pattern) error {
	s := p.b.skip
	if s.Kind != SkipToFirst && s.Kind != SkipToLast {
		return nil
	}
	q := p
	for q.prev != nil && q.name != s.Stage {
		q = q.prev
	}
	if q.name != s.Stage {
		return &PatternError{Msg: fmt.Sprintf("the pattern name %q specified in the after-match skip strategy can not be found in the pattern", s.Stage)}
	}
	return nil
}

// uniqueName returns base, or base:i with the smallest i not yet used
// (Flink's NFAStateNameHandler). Counters only grow and names are never
// freed, so the search resumes where it last stopped for this base: without
// that, times(n) would cost O(n²).
func (c *compiler) uniqueName(base string) string {
	cand := base
	if c.used[cand] {
		i := c.nextSuffix[base]
		for {
			cand = base + ":" + strconv.Itoa(i)
			i++
			if !c.used[cand] {
				break
			}
		}
		c.nextSuffix[base] = i
	}
	c.used[cand] = true
	return cand
}

// newState creates a state for the stage base (the uniqueness suffix is
// added here).
func (c *compiler) newState(requested, base string, typ stateType) *state {
	s := &state{id: len(c.states), name: c.uniqueName(requested), base: base, typ: typ, stage: -1}
	if i, ok := c.stageIndex[base]; ok && base != groupName {
		s.stage = i
	}
	c.states = append(c.states, s)
	return s
}

// createState creates a state for the current pattern; take states record
// the gap window that applies to partial matches waiting in them.
func (c *compiler) createState(typ stateType, isTake bool) *state {
	p := c.current
	s := c.newState(p.name, p.name, typ)
	if p.group != nil {
		s.stage = -1
	}
	if isTake {
		if p.times == nil && p.gapWindow > 0 {
			s.gap = p.gapWindow
		} else if p.times != nil && p.times.window > 0 && strings.Contains(s.name, ":") {
			s.gap = p.times.window
		}
	}
	return s
}

func (c *compiler) createEndingState() *state {
	end := c.newState(endStateName, endStateName, stFinal)
	if w, ok := c.current.windowSize(); ok {
		c.windowTime, c.hasWindowTime = w, true
	}
	return end
}

func (c *compiler) currentWindow() int64 {
	if c.hasWindowTime {
		return c.windowTime
	}
	return 0
}

func (c *compiler) createMiddleStates(sink *state) *state {
	last := sink
	for c.current.prev != nil {
		p := c.current
		switch p.q.consuming {
		case NotRelaxed:
			if (p.gapWindow > 0 || c.currentWindow() > 0) && last.isFinal() {
				nf := c.createState(stPending, true)
				notC := c.takeCondition(p)
				stop := c.createStopState(notC, p.name)
				nf.addProceed(stop, notC)
				nf.addIgnoreSelf(Not(notC))
				last = nf
			}
		case NotStrict:
			nn := c.createState(stNormal, true)
			notC := c.takeCondition(p)
			stop := c.createStopState(notC, p.name)
			if last.isFinal() {
				nn.addIgnore(last, Not(notC))
			} else {
				nn.addProceed(last, Not(notC))
			}
			nn.addProceed(stop, notC)
			last = nn
		default:
			last = c.convertPattern(last)
		}
		c.following = c.current
		c.current = c.current.prev
		if w, ok := c.current.windowSize(); ok {
			cur := int64(math.MaxInt64)
			if c.hasWindowTime {
				cur = c.windowTime
			}
			if w < cur {
				c.windowTime, c.hasWindowTime = w, true
			}
		}
	}
	return last
}

func (c *compiler) convertPattern(sink *state) *state {
	p := c.current
	var last *state
	switch p.q.kind {
	case quantLooping:
		c.setFirstOfLoop(false)
		s := c.copyWithoutTransitiveNots(sink)
		looping := c.createLooping(s)
		c.setFirstOfLoop(true)
		last = c.createTimesState(looping, sink, p.times)
	case quantTimes:
		last = c.createTimesState(sink, sink, p.times)
	default:
		last = c.createSingletonState(sink, sink, c.takeCondition(p), c.ignoreCondition(p), p.q.optional)
	}
	c.addStopStates(last)
	return last
}

func (c *compiler) currentNotConditions() []notStage {
	var out []notStage
	prev := c.current
	for prev.prev != nil && (prev.prev.q.optional || prev.prev.q.consuming == NotRelaxed) {
		prev = prev.prev
		if prev.q.consuming == NotRelaxed {
			out = append(out, notStage{cond: c.takeCondition(prev), name: prev.name})
		}
	}
	return out
}

func (c *compiler) createStopState(notC Condition, name string) *state {
	if s, ok := c.stopStates[name]; ok {
		return s
	}
	s := c.newState(name, name, stStop)
	s.addTakeSelf(notC)
	c.stopStates[name] = s
	return s
}

// copyWithoutTransitiveNots copies sink without the transitions into stop
// states of NOT stages that an optional current stage lets a match skip:
// begin(a).notFollowedBy(b).followedByAny(c).optional().followedByAny(d)
// accepts a c b d but not a b d.
func (c *compiler) copyWithoutTransitiveNots(sink *state) *state {
	nots := c.currentNotConditions()
	if len(nots) == 0 || !c.current.q.optional {
		return sink
	}
	// The copy follows proceed transitions; a cycle of them (a looping
	// group whose body can be skipped entirely) would recurse forever, as
	// it does in Flink (StackOverflowError).
	// Every level copies a state, so the bound is taken from the graph as
	// it was when the outermost copy began.
	if c.copyDepth == 0 {
		c.copyBase = len(c.states)
	}
	if c.copyDepth++; c.copyDepth > c.copyBase+64 {
		c.fail(c.current.name, "pattern has a cycle of proceed transitions (a looping group whose every stage is optional)")
	}
	defer func() { c.copyDepth-- }()
	cp := c.newState(sink.name, sink.base, sink.typ)
	cp.stage = sink.stage
	for _, t := range sink.trans {
		if t.act == actProceed {
			target := t.dst
			remove := false
			if target.isStop() {
				for _, n := range nots {
					if target.name == n.name {
						remove = true
					}
				}
			} else {
				target = c.copyWithoutTransitiveNots(t.dst)
			}
			if !remove {
				cp.add(t.act, target, t.cond)
			}
			continue
		}
		dst := t.dst
		if t.dst == t.src {
			dst = cp
		}
		cp.add(t.act, dst, t.cond)
	}
	return cp
}

func (c *compiler) copyState(s *state) *state {
	cp := c.newState(s.base, s.base, s.typ)
	cp.stage = s.stage
	for _, t := range s.trans {
		dst := t.dst
		if t.dst == t.src {
			dst = cp
		}
		cp.add(t.act, dst, t.cond)
	}
	return cp
}

func (c *compiler) addStopStates(s *state) {
	for _, n := range c.currentNotConditions() {
		stop := c.createStopState(n.cond, n.name)
		s.addProceed(stop, n.cond)
	}
}

func (c *compiler) addStopStateToLooping(s *state) {
	if f := c.following; f != nil && f.q.consuming == NotRelaxed {
		notC := c.takeCondition(f)
		stop := c.createStopState(notC, f.name)
		s.addProceed(stop, notC)
	}
}

func (c *compiler) createTimesState(sink, proceed *state, t *times) *state {
	p := c.current
	last := sink
	c.setFirstOfLoop(false)
	until := p.until
	innerIgnore := extendWithUntil(c.innerIgnoreCondition(p), until, false)
	take := extendWithUntil(c.takeCondition(p), until, true)
	if p.q.greedy && t.from != t.to {
		if until != nil {
			c.original[sink.name] = c.copyState(sink)
		}
		updateWithGreedyCondition(sink, take)
	}
	for i := t.from; i < t.to; i++ {
		last = c.createSingletonState(last, proceed, take, innerIgnore, true)
		c.addStopStateToLooping(last)
	}
	for i := 0; i < t.from-1; i++ {
		last = c.createSingletonState(last, nil, take, innerIgnore, false)
		c.addStopStateToLooping(last)
	}
	c.setFirstOfLoop(true)
	return c.createSingletonState(last, proceed, take, c.ignoreCondition(p), p.q.optional)
}

func (c *compiler) setFirstOfLoop(v bool) {
	if c.current.group != nil {
		c.firstOfLoop[c.current] = v
	}
}

func (c *compiler) isCurrentGroupFirstOfLoop() bool {
	v, ok := c.firstOfLoop[c.currentGroup]
	if !ok {
		return true
	}
	return v
}

func (c *compiler) headOfGroup(p *Pattern) bool { return c.currentGroup != nil && p.prev == nil }

func (c *compiler) isHeadOfOptionalGroup(p *Pattern) bool {
	return c.headOfGroup(p) && c.isCurrentGroupFirstOfLoop() && c.currentGroup.q.optional
}

func (c *compiler) createSingletonState(sink, proceed *state, take, ignore Condition, optional bool) *state {
	p := c.current
	if p.group != nil {
		return c.createGroupPatternState(p, sink, proceed, optional)
	}
	single := c.createState(stNormal, true)
	s := c.copyWithoutTransitiveNots(sink)
	single.addTake(s, take)
	proceedC := c.trueCondition()
	if optional {
		if p.q.greedy {
			until := p.until
			if until != nil && proceed != nil {
				if orig := c.original[proceed.name]; orig != nil {
					single.addProceed(orig, And(proceedC, until))
				}
			}
			pc := proceedC
			if until != nil {
				pc = And(proceedC, Not(until))
			}
			single.addProceed(proceed, pc)
		} else {
			single.addProceed(proceed, proceedC)
		}
	}
	if ignore != nil {
		ignoreState := single
		if optional || c.isHeadOfOptionalGroup(p) {
			ignoreState = c.createState(stNormal, false)
			ignoreState.addTake(s, take)
			ignoreState.addIgnoreSelf(ignore)
			c.addStopStates(ignoreState)
		}
		single.addIgnore(ignoreState, ignore)
	}
	return single
}

func (c *compiler) createGroupPatternState(g *Pattern, sink, proceed *state, optional bool) *state {
	proceedC := c.trueCondition()
	oldCurrent, oldFollowing, oldGroup := c.current, c.following, c.currentGroup
	c.currentGroup = g
	c.current = g.group
	last := c.createMiddleStates(sink)
	last = c.convertPattern(last)
	if optional {
		last.addProceed(proceed, proceedC)
	}
	c.current, c.following, c.currentGroup = oldCurrent, oldFollowing, oldGroup
	return last
}

func (c *compiler) createLoopingGroupPatternState(g *Pattern, sink *state) *state {
	proceedC := c.trueCondition()
	oldCurrent, oldFollowing, oldGroup := c.current, c.following, c.currentGroup
	dummy := c.createState(stNormal, true)
	c.currentGroup = g
	c.current = g.group
	last := c.createMiddleStates(dummy)
	last = c.convertPattern(last)
	last.addProceed(sink, proceedC)
	dummy.addProceed(last, proceedC)
	c.current, c.following, c.currentGroup = oldCurrent, oldFollowing, oldGroup
	return last
}

func (c *compiler) createLooping(sink *state) *state {
	p := c.current
	if p.group != nil {
		return c.createLoopingGroupPatternState(p, sink)
	}
	until := p.until
	ignore := extendWithUntil(c.innerIgnoreCondition(p), until, false)
	take := extendWithUntil(c.takeCondition(p), until, true)
	proceedC := c.trueCondition()
	looping := c.createState(stNormal, true)
	if p.q.greedy {
		if until != nil {
			cp := c.copyState(sink)
			looping.addProceed(cp, And(proceedC, until))
			c.original[sink.name] = cp
		}
		pc := proceedC
		if until != nil {
			pc = And(proceedC, Not(until))
		}
		looping.addProceed(sink, pc)
		updateWithGreedyCondition(sink, c.takeCondition(p))
	} else {
		looping.addProceed(sink, proceedC)
	}
	looping.addTakeSelf(take)
	c.addStopStateToLooping(looping)
	if ignore != nil {
		ignoreState := c.createState(stNormal, false)
		ignoreState.addTake(looping, take)
		ignoreState.addIgnoreSelf(ignore)
		looping.addIgnore(ignoreState, ignore)
		c.addStopStateToLooping(ignoreState)
	}
	return looping
}

func extendWithUntil(cond, until Condition, isTake bool) Condition {
	switch {
	case until != nil && cond != nil:
		return And(Not(until), cond)
	case until != nil && isTake:
		return Not(until)
	}
	return cond
}

func (c *compiler) strategyCondition(p *Pattern, cs Contiguity) Condition {
	var cond Condition
	switch cs {
	case Relaxed:
		cond = Not(p.condition())
	case NonDeterministicRelaxed:
		cond = True
	}
	if g := c.currentGroup; g != nil && g.until != nil {
		cond = extendWithUntil(cond, g.until, false)
	}
	return cond
}

func (c *compiler) innerIgnoreCondition(p *Pattern) Condition {
	cs := p.q.inner
	if c.headOfGroup(p) {
		cs = c.currentGroup.q.inner
	}
	return c.strategyCondition(p, cs)
}

func (c *compiler) ignoreCondition(p *Pattern) Condition {
	cs := p.q.consuming
	if c.headOfGroup(p) {
		if c.isCurrentGroupFirstOfLoop() {
			cs = c.currentGroup.q.consuming
		} else {
			cs = c.currentGroup.q.inner
		}
	}
	return c.strategyCondition(p, cs)
}

func (c *compiler) takeCondition(p *Pattern) Condition {
	cond := p.condition()
	if g := c.currentGroup; g != nil && g.until != nil {
		cond = extendWithUntil(cond, g.until, true)
	}
	return cond
}

func (c *compiler) trueCondition() Condition {
	cond := True
	if g := c.currentGroup; g != nil && g.until != nil {
		cond = extendWithUntil(cond, g.until, true)
	}
	return cond
}

func updateWithGreedyCondition(s *state, take Condition) {
	for i := range s.trans {
		s.trans[i].cond = And(s.trans[i].cond, Not(take))
	}
}

// markNegations sets negOf on the transitions of s whose condition is the
// negation of an earlier transition's (the ignore transition of a relaxed
// stage is Not of its take).
func markNegations(s *state) {
	for j := range s.trans {
		not, ok := s.trans[j].cond.(notCond)
		if !ok {
			continue
		}
		for i := range j {
			if sameCondition(s.trans[i].cond, not.c) {
				s.trans[j].negOf = i + 1
				break
			}
		}
	}
}

// markWait sets s.waits when the transitions of s are a take with a
// condition, then, but in the start state, nothing but an ignore back to s
// that negates it (the relaxed followedBy): an event that fails the take
// is only ignored, without a branch, so a computation in s (the start
// computation: one that took nothing) goes on unchanged, version
// included (computeNextStates).
func markWait(s *state) {
	if len(s.trans) == 0 {
		return
	}
	take := &s.trans[0]
	if take.act != actTake || take.cond == nil {
		return
	}
	switch rest := s.trans[1:]; len(rest) {
	case 0:
		s.waits = s.typ == stStart // elsewhere the computation ends
	case 1:
		s.waits = rest[0].act == actIgnore && rest[0].dst == s && rest[0].negOf == 1
	}
}

// sameCondition reports whether a and b are the same condition value,
// without comparing values that cannot be compared (functions).
func sameCondition(a, b Condition) bool {
	if a == nil || b == nil {
		return false
	}
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if va.Type() != vb.Type() || !va.Comparable() || !vb.Comparable() {
		return false
	}
	return a == b
}
