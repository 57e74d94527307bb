package cep

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/nfa"
	"github.com/cepheus-cep/cepheus/runtime/state"
)

// SharedConfig configures a [SharedOperator]: an [OperatorConfig] without
// the pattern, which each rule brings ([SharedRule]). The same
// configuration must be given to [RestoreSharedOperator].
type SharedConfig struct {
	// Key returns the partition key of an event, for every rule of the
	// operator; nil puts every event in one global partition (key "").
	Key func(*event.Event) event.Key
	// TimeMode, Less and MaxBufferedEvents are as in [OperatorConfig].
	// MaxBufferedEvents caps the key's buffer, which its rules share.
	TimeMode          TimeMode
	Less              func(a, b *event.Event) bool
	MaxBufferedEvents int
	// KeyGroups is the number of key groups the keys' state records are
	// split into ([SharedOperator.SnapshotTo]); 0 means
	// state.DefaultKeyGroups. At most state.MaxKeyGroups; restore with the
	// same value.
	KeyGroups int
	// CompactEvery is the number of elements between two sweeps that keep
	// the keys untouched since the previous sweep (nothing buffered, no
	// timer) as their encoded state record instead of Go objects (see
	// cold.go); 0 means DefaultCompactEvery, a negative value never. It
	// changes no output, only memory and CPU.
	CompactEvery int
}

func (c *SharedConfig) validate() error {
	if c.KeyGroups < 0 || c.KeyGroups > state.MaxKeyGroups {
		return fmt.Errorf("%w: %d key groups, want 0..%d", ErrInvalidConfig, c.KeyGroups, state.MaxKeyGroups)
	}
	oc := OperatorConfig{NFA: &nfa.NFA{}, TimeMode: c.TimeMode, MaxBufferedEvents: c.MaxBufferedEvents}
	return oc.validate()
}

// SharedRule is one rule of a [SharedOperator]: its compiled pattern and
// the id its output items carry (Item.Rule).
type SharedRule struct {
	// ID names the rule in the operator: >= 0 and unique.
	ID int
	// NFA is the rule's compiled pattern; required.
	NFA *nfa.NFA
	// MaxPartialMatches is the rule's per-key cap on partial matches, as
	// in [OperatorConfig]; 0 means unlimited.
	MaxPartialMatches int
	// StepDeadlines advances the rule's runs to each of their deadlines
	// in turn before a later time ([nfa.Run.NextDeadline]), as if a
	// watermark came at every deadline. Flink advances once, to the
	// watermark: partial matches past their deadlines all time out
	// before any match held back behind them is released, whose skip
	// would otherwise have pruned some, so what times out depends on how
	// far one advance went; and a partial match past two of its deadlines
	// (the pattern window and `within d of previous`) is reported at the
	// one Flink checks first, not the earlier. Stepped, both depend on the
	// events alone. The Engine sets it for rules with a timeout block
	// (docs/rules.md, "Timed-out partial matches"), as `cepheus test`
	// does ([OperatorConfig].StepDeadlines); the differential tests,
	// which compare with Flink, leave it off.
	StepDeadlines bool
}

// AllRules is the Item.Rule of the items of a [SharedOperator] that
// concern every rule: late, overflowing and watermark items.
const AllRules = -1

// RuleError is the error of one rule of a [SharedOperator]: the run of
// rule Rule failed at a key (Err is a *[KeyError]).
type RuleError struct {
	Rule int
	Err  error
}

func (e *RuleError) Error() string { return fmt.Sprintf("cep: rule %d: %v", e.Rule, e.Err) }

// Unwrap returns the key's error.
func (e *RuleError) Unwrap() error { return e.Err }

// ErrUnknownRule marks the errors of [SharedOperator] methods given a rule
// id it does not host.
var ErrUnknownRule = errors.New("cep: unknown rule")

// SharedOperator is the keyed CEP operator of several rules with the same
// key: each element is keyed, buffered, sorted and timed once per key, then
// offered to the run of every rule at that key in timestamp order. Per
// rule, its output is item for item what an [Operator] of that rule alone
// gives for the same calls (Flink runs one CepOperator per rule): the same
// matches and timeouts with the same At and Wake (the rule's own due time
// at the key), in the rule's own order of keys within a time advance (its
// due time, then the order in which that rule's state of the key was
// created), and the same late elements and forwarded watermarks, which
// appear once with Rule set to [AllRules]. The items of different rules
// interleave in no promised order.
//
// A rule whose run fails (a throw-on-miss skip that missed) fails alone,
// as the CepOperator of that rule would in Flink: the call returns a
// *[RuleError] for it (several, joined, when several rules fail in one
// call), what the rule emitted before the failure stays in the output,
// and the rule emits nothing afterwards while the other rules go on. The
// call's forwarded watermark is still appended, for the other rules (an
// Operator that fails does not append it). A failed rule's state is
// undefined: Snapshot refuses while it is hosted; remove it or restore the
// last snapshot. Whether a failed rule fails the whole job is the caller's
// choice ([Engine.Run] stops at the first error).
//
// Rules can be added and removed between calls ([SharedOperator.AddRule],
// [SharedOperator.RemoveRule]) without touching the state of the others.
//
// A SharedOperator is not safe for concurrent use; one goroutine owns it.
type SharedOperator struct {
	cfg   SharedConfig
	less  func(a, b *event.Event) int
	rules []*sharedRule
	// During a migrating restore only: each part's operator id and rule
	// migration, and the current part's.
	ops  []state.OperatorID
	migs []*ruleMigration
	mig  *ruleMigration
	// coldPartials are the partial matches of the cold keys.
	coldPartials int

	keys   map[event.Key]*keyState
	timers timerHeap // two timers per key: its earliest buffered element, its rules' earliest deadline

	watermark      event.Time
	procTime       event.Time
	buffered       int
	late, overflow uint64
	// drops counts the partial matches dropped at the limit, over the
	// rules, since the operator was made (not restored: only a change
	// detector, see Drops).
	drops uint64

	res     nfa.Result
	fired   []*keyState
	groups  []ruleGroup // what each (key, rule) fired in one time advance emitted
	fails   []ruleFail  // by rule position, during one time advance
	last    []ruleFail  // order's scratch
	scratch []Item
	wake    event.Time
	woken   bool

	freeKeys []*keyState
	// freeSlots are the rule slot arrays of released keys, for the next
	// keys materialize makes slots at: most keys never need theirs, so a
	// released key's array would otherwise go to a key that does not.
	freeSlots [][]ruleSlot
	evsPool   evsPool

	// starts are the groups of rules with a start signature, by it.
	starts map[string]*startGroup
	// quietKeys counts the uniform keys at which the rules of one start
	// group started quietly (keyState.quiet).
	quietKeys int
	// fireEpoch numbers the fireKey calls (startGroup.inert); fireElems is
	// how many elements the current one releases.
	fireEpoch uint64
	fireElems int
	// touchSink sums what touchKeys read, so that its loads stay.
	touchSink uintptr

	// ghosts are the elements held aside for keys with no state, ghostQ
	// them in arrival order from ghostHead (ghost.go). noGhosts turns them
	// off (tests).
	ghosts      map[event.Key]*ghost
	freeGhosts  []*ghost             // dropped ghosts, for reuse (dropGhost)
	ghostSpare  map[event.Key]*ghost // empty, for rebuildGhosts
	ghostQ      []ghostEntry
	ghostHead   int
	ghostAgain  []ghostEntry
	ghostGroups []*startGroup // the start groups, the last to find an element not inert first
	noGhosts    bool

	// dirty lists the keys whose state changed since the last SnapshotTo
	// (dropped keys included) while tracking; allDirty says every key must
	// be written (before the first SnapshotTo, after a rule change).
	dirty    []event.Key
	allDirty bool
	tracking bool
	// snap is the snapshot in progress (SnapshotBegin to its last step).
	snap *pendingSnapshot

	// cold holds the records of the keys kept encoded (cold.go).
	cold       map[event.Key][]byte
	coldBuf    []byte
	sinceSweep int
}

// sharedRule is a rule of a SharedOperator.
type sharedRule struct {
	id                         int
	nfa                        *nfa.NFA
	err                        error // sticky: the rule's first run error (*KeyError)
	dropped, matches, timeouts uint64
	// dropKeys are the first keys (at most maxDropKeys) at which the rule
	// dropped partial matches at the limit, with their drops since the
	// operator was made (not restored: see DroppedKeys).
	dropKeys    []KeyDrops
	freeRuns    []*nfa.Run
	start       *startGroup // the rules whose start states decide alike
	maxPartial  int
	step        bool // SharedRule.StepDeadlines
	coldPresent int  // cold keys at which the rule holds state
	// deferStart says that the rule's runs may start late (see
	// ruleSlot.pend): its NFA's DeferrableStart holds and it has no
	// partial-match limit; window is its NFA's window then (noWindow if
	// none).
	deferStart bool
	window     event.Time
	probe      *nfa.Run // an idle run of the rule's, for PendingIgnores and PendingDies (deferStart only)
}

// startGroup is a set of rules whose start states decide alike about an
// element (the same [nfa.NFA.StartSignature]; a rule without one is alone
// in its group): whether an element is inert for an idle run of one of
// them ([nfa.Run.Inert]) is whether it is for all, so a time advance
// evaluates it once per element and group instead of once per element and
// rule (docs/decisions.md, "Relevance filter").
type startGroup struct {
	sig   string   // "" for a rule alone in its group
	probe *nfa.Run // an idle run of the group's first rule
	rules int      // how many rules are in the group
	// inert caches, during one fireKey (epoch), what the probe gave for
	// each released element, by its position among them: 0 not known
	// yet, inertYes or inertNo.
	epoch uint64
	inert []int8
	// starts is the epoch in which startsAny found every released
	// element inert for the group.
	starts uint64
}

const (
	inertYes = 1
	inertNo  = 2
)

// A key's rule slots (keyState.rules) are made when a rule first needs
// state of its own there: a run, or hidden elements. Until then the key is
// uniform (len(ks.rules) != len(o.rules), its slots not made): every rule
// that has not failed is present there, ranked by the key's rank
// (ks.order), with no run and nothing hidden, which is what arrive gives
// every rule at a key it creates. Most keys of a stream stay uniform from
// their first element to their last: their elements start no rule, and
// they cost no slot and no per-rule work (materialize makes the slots).
// A rule change or failure first makes every key's slots, so the rules
// that are present at a uniform key are always those that have not failed.

// quietStart is a deferred start (ruleSlot.pend) of every rule of one
// start group at a uniform key, noted once for the key instead of in each
// rule's slot: those rules took ev at ts, their runs would have been
// advanced to at, and they hold it until ts + window. The other rules are
// present while others holds, ranked by othersOrder (the key's rank
// until nothing is buffered there: then they are absent, until the next
// element arrives), as at a key with slots. Elements released before
// ts + window that start no rule and leave every rule's partial match
// unchanged ([nfa.Run.PendingIgnores]) keep it as it is, with the later
// time; any other element, a rule change or failure make the key's slots
// (materialize; a state record is written without them, appendKeyNotes).
// At ts + window with nothing buffered
// the key is dropped, as every rule's run would be empty again.
type quietStart struct {
	group          *startGroup
	ev             *event.Event
	ts, at, window event.Time
	others         bool
	othersOrder    uint64 // the others' rank while others holds
}

// ruleSlot is one rule's state at one key. present says whether the rule's
// own operator would hold the key (it has elements buffered that it sees
// or a run that is not empty); order is its rank, the Seq of the element
// whose arrival created that state, which with the key bytes breaks ties
// between the rule's keys due at the same time.
type ruleSlot struct {
	run     *nfa.Run
	order   uint64
	present bool
	// pend, when not nil, is the first element the rule's run took at
	// the key, at pendTs, with no run made for it: for a rule whose start
	// is deferrable ([nfa.NFA.DeferrableStart]) it is noted instead, and
	// the run is made and given it (then advanced to pendAt if pendAdv)
	// when the rule's next element at the key comes (startPending), or
	// forgotten at pendTs + window when none came: the run would be empty
	// again then, having released nothing. run is nil while pend is not.
	pend    *event.Event
	pendTs  event.Time
	pendAt  event.Time
	pendAdv bool
	// hidden are the buffered elements that arrived before the rule was
	// added: the rule never sees them.
	hidden []hiddenElem
}

type hiddenElem struct {
	ts event.Time
	ev *event.Event
}

func (sl *ruleSlot) hides(ev *event.Event) bool {
	for _, h := range sl.hidden {
		if h.ev == ev {
			return true
		}
	}
	return false
}

// keyOrder is where a key comes in one rule's order of its keys within a
// time advance: by due time, then by rank (the Seq of the element that
// created the rule's state there), then by key bytes. It derives from the
// keys and the events only, so it survives splitting the keys by key group.
type keyOrder struct {
	due  event.Time
	rank uint64
	key  event.Key
}

func (a keyOrder) cmp(b keyOrder) int {
	switch {
	case a.due != b.due:
		return compareTime(a.due, b.due)
	case a.rank < b.rank:
		return -1
	case a.rank > b.rank:
		return 1
	}
	return strings.Compare(string(a.key), string(b.key))
}

// ruleGroup is the output of rule position rule at one key in one time
// advance: out.Items[start:end], at the key's place in the rule's order.
type ruleGroup struct {
	rule       int
	at         keyOrder
	start, end int
}

// ruleFail is the first failure of a rule in one time advance, in the
// rule's own order of keys.
type ruleFail struct {
	failed bool
	at     keyOrder
	err    *KeyError
}

// NewSharedOperator returns an operator hosting rules, with no state: the
// watermark at event.MinTime and the processing clock at 0.
func NewSharedOperator(cfg SharedConfig, rules ...SharedRule) (*SharedOperator, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	o := newSharedOperator(cfg)
	for _, r := range rules {
		if err := o.AddRule(r); err != nil {
			return nil, err
		}
	}
	return o, nil
}

func newSharedOperator(cfg SharedConfig) *SharedOperator {
	return &SharedOperator{
		cfg:       cfg,
		less:      compareFunc(cfg.Less),
		keys:      map[event.Key]*keyState{},
		watermark: event.MinTime,
		allDirty:  true,
	}
}

// AddRule adds a rule with no state. From this point on it sees the
// elements that arrive, as an [Operator] of the rule created now and given
// the current watermark and processing clock would: elements buffered
// before are not offered to it.
func (o *SharedOperator) AddRule(r SharedRule) error {
	switch {
	case r.NFA == nil:
		return fmt.Errorf("%w: rule %d: NFA is required", ErrInvalidConfig, r.ID)
	case r.ID < 0:
		return fmt.Errorf("%w: rule id %d, want >= 0", ErrInvalidConfig, r.ID)
	case o.pos(r.ID) >= 0:
		return fmt.Errorf("%w: rule %d is already hosted", ErrInvalidConfig, r.ID)
	}
	// A rule change alters every key: the snapshot in progress first.
	if err := o.finishSnapshot(); err != nil {
		return err
	}
	o.unghostAll()
	o.ghostGroups = nil
	o.thawAll()
	o.materializeAll()
	o.allDirty = true
	sr := &sharedRule{
		id: r.ID, nfa: r.NFA, start: o.startGroupOf(r.NFA), maxPartial: r.MaxPartialMatches, step: r.StepDeadlines,
		deferStart: r.NFA.DeferrableStart() && r.MaxPartialMatches == 0, window: event.Time(r.NFA.Window()),
	}
	if sr.window <= 0 {
		sr.window = noWindow
	}
	if sr.deferStart {
		sr.probe = r.NFA.NewRun()
	}
	o.rules = append(o.rules, sr)
	for _, ks := range o.keys {
		var sl ruleSlot
		for _, b := range ks.buf {
			for _, ev := range b.evs {
				sl.hidden = append(sl.hidden, hiddenElem{ts: b.ts, ev: ev})
			}
		}
		ks.rules = append(ks.rules, sl)
	}
	return nil
}

// startGroupOf returns the group of a rule being added with automaton n:
// the group of the hosted rules with its start signature, or a new one.
func (o *SharedOperator) startGroupOf(n *nfa.NFA) *startGroup {
	sig, ok := n.StartSignature()
	if !ok {
		return &startGroup{probe: n.NewRun(), rules: 1}
	}
	g := o.starts[sig]
	if g == nil {
		g = &startGroup{sig: sig, probe: n.NewRun()}
		if o.starts == nil {
			o.starts = map[string]*startGroup{}
		}
		o.starts[sig] = g
	}
	g.rules++
	return g
}

// RemoveRule removes a rule and drops its state; the other rules keep
// theirs. A failed rule can be removed too.
func (o *SharedOperator) RemoveRule(id int) error {
	i := o.pos(id)
	if i < 0 {
		return fmt.Errorf("%w: %d", ErrUnknownRule, id)
	}
	if err := o.finishSnapshot(); err != nil {
		return err
	}
	o.unghostAll()
	o.ghostGroups = nil
	o.thawAll()
	o.materializeAll()
	g := o.rules[i].start
	if g.rules--; g.rules == 0 && g.sig != "" {
		delete(o.starts, g.sig)
	}
	o.rules = slices.Delete(o.rules, i, i+1)
	o.allDirty = true
	for _, ks := range o.keys {
		if len(ks.rules) == len(o.rules)+1 { // not uniform
			ks.rules = slices.Delete(ks.rules, i, i+1)
		}
		o.touch(ks) // it may be dropped: its record must go
		o.settle(ks)
	}
	return nil
}

// Rules returns the ids of the hosted rules, in the order they were added.
func (o *SharedOperator) Rules() []int {
	ids := make([]int, len(o.rules))
	for i, r := range o.rules {
		ids[i] = r.id
	}
	return ids
}

// RuleErr returns the error of a failed rule (a *[RuleError]), nil for a
// rule that has not failed.
func (o *SharedOperator) RuleErr(id int) error {
	i := o.pos(id)
	if i < 0 {
		return fmt.Errorf("%w: %d", ErrUnknownRule, id)
	}
	if r := o.rules[i]; r.err != nil {
		return &RuleError{Rule: id, Err: r.err}
	}
	return nil
}

func (o *SharedOperator) pos(id int) int {
	for i, r := range o.rules {
		if r.id == id {
			return i
		}
	}
	return -1
}

// Watermark returns the current watermark (event.MinTime before the first).
func (o *SharedOperator) Watermark() event.Time { return o.watermark }

// ProcessingTime returns the processing clock (0 before the first
// SetProcessingTime).
func (o *SharedOperator) ProcessingTime() event.Time { return o.procTime }

// Stats returns the counters and gauges of the operator: matches,
// timeouts and dropped partial matches summed over the hosted rules.
func (o *SharedOperator) Stats() Stats {
	st := Stats{Late: o.late, Overflow: o.overflow, Keys: len(o.keys) + len(o.cold), BufferedEvents: o.buffered}
	keys, elems := o.pendingGhosts()
	st.Keys += keys
	st.BufferedEvents += elems
	for _, r := range o.rules {
		st.Matches += r.matches
		st.Timeouts += r.timeouts
		st.DroppedPartialMatches += r.dropped
	}
	return st
}

// RuleStats returns the Stats of one rule as its own [Operator] would give
// them: the keys and buffered elements it holds, its matches, timeouts and
// dropped partial matches, and the late and overflowing elements of the
// operator. It scans every key.
func (o *SharedOperator) RuleStats(id int) (Stats, error) {
	i := o.pos(id)
	if i < 0 {
		return Stats{}, fmt.Errorf("%w: %d", ErrUnknownRule, id)
	}
	r := o.rules[i]
	st := o.counts(r)
	st.Keys = r.coldPresent
	if keys, elems := o.pendingGhosts(); r.err == nil {
		st.Keys += keys
		st.BufferedEvents += elems
	}
	for _, ks := range o.keys {
		if o.uniform(ks) {
			q, quiet := &ks.quiet, ks.quiet.group != nil
			if r.err == nil && (!quiet || r.start == q.group || q.others) {
				st.Keys++
				st.BufferedEvents += ks.n
			}
		} else if sl := &ks.rules[i]; sl.present {
			st.Keys++
			st.BufferedEvents += ks.n - len(sl.hidden)
		}
	}
	return st, nil
}

// Drops changes whenever a rule drops partial matches at the limit: a
// cheap test of whether the rules' DroppedPartialMatches moved, not a
// count (it starts at 0 in a restored operator).
func (o *SharedOperator) Drops() uint64 { return o.drops }

// maxDropKeys is how many keys a rule follows the drops of (DroppedKeys).
const maxDropKeys = 8

// KeyDrops is a key at which a rule dropped partial matches at its
// MaxPartialMatches limit, and how many it dropped there: at least
// Dropped - Shared, at most Dropped (Shared is 0 when exact).
type KeyDrops struct {
	Key     event.Key
	Dropped uint64
	// Shared is what of Dropped may have been dropped at keys no longer
	// followed: the count the key took over (Space-Saving).
	Shared uint64
}

// noteDrops counts d partial matches dropped at key k with the
// Space-Saving algorithm (Metwally et al.): maxDropKeys counters, and a
// key not followed takes over the counter of the fewest drops, keeping
// its count as Shared. A key that dropped more than a maxDropKeys-th of
// the rule's drops is always followed.
func (r *sharedRule) noteDrops(k event.Key, d uint64) {
	least := -1
	for i := range r.dropKeys {
		if r.dropKeys[i].Key == k {
			r.dropKeys[i].Dropped += d
			return
		}
		if least < 0 || r.dropKeys[i].Dropped < r.dropKeys[least].Dropped {
			least = i
		}
	}
	// A key's bytes may be lent by a store.
	kd := KeyDrops{Key: event.Key(strings.Clone(string(k))), Dropped: d}
	if len(r.dropKeys) < maxDropKeys {
		r.dropKeys = append(r.dropKeys, kd)
		return
	}
	kd.Shared = r.dropKeys[least].Dropped
	kd.Dropped += kd.Shared
	r.dropKeys[least] = kd
}

// DroppedKeys returns the keys at which rule id dropped the most partial
// matches at its limit, most first, at most 8, with their drops since the
// operator was made (a restored operator starts with none, unlike
// DroppedPartialMatches); see [KeyDrops]. The slice is the caller's.
func (o *SharedOperator) DroppedKeys(id int) ([]KeyDrops, error) {
	i := o.pos(id)
	if i < 0 {
		return nil, fmt.Errorf("%w: %d", ErrUnknownRule, id)
	}
	out := slices.Clone(o.rules[i].dropKeys)
	slices.SortStableFunc(out, func(a, b KeyDrops) int { return cmp.Compare(b.Dropped-b.Shared, a.Dropped-a.Shared) })
	return out, nil
}

// RuleCounts is RuleStats without the gauges (Keys and BufferedEvents stay
// 0): the counters, read without scanning the keys.
func (o *SharedOperator) RuleCounts(id int) (Stats, error) {
	i := o.pos(id)
	if i < 0 {
		return Stats{}, fmt.Errorf("%w: %d", ErrUnknownRule, id)
	}
	return o.counts(o.rules[i]), nil
}

// counts is the counters of rule r and of the operator.
func (o *SharedOperator) counts(r *sharedRule) Stats {
	return Stats{Late: o.late, Overflow: o.overflow, Matches: r.matches, Timeouts: r.timeouts, DroppedPartialMatches: r.dropped}
}

// ProcessElement is [Operator.ProcessElement] for every rule: the element
// is late, refused or buffered once, or, in processing time without Less,
// fed at once to the run of every rule at its key.
// REQUIRES: ev != nil, out != nil.
func (o *SharedOperator) ProcessElement(ev *event.Event, ts event.Time, out *Output) error {
	var k event.Key
	if o.cfg.Key != nil {
		k = o.cfg.Key(ev)
	}
	o.sinceSweep++
	switch {
	case o.cfg.TimeMode == ProcessingTime && o.less == nil:
		err := o.processNow(k, ev, out)
		o.maybeSweep()
		return err
	case o.cfg.TimeMode == ProcessingTime:
		o.buffer(k, ev, o.procTime, out)
	case ts > o.watermark:
		o.buffer(k, ev, ts, out)
	default:
		o.late++
		out.Items = append(out.Items, Item{Kind: ItemLate, Rule: AllRules, Key: k, At: ts, Event: ev})
	}
	return nil
}

// ProcessWatermark is [Operator.ProcessWatermark] for every rule. The
// watermark item is appended last, also when a rule failed.
// REQUIRES: out != nil.
func (o *SharedOperator) ProcessWatermark(w event.Time, out *Output) error {
	if w < o.watermark {
		// The ghosts tell the elements the watermark passed by the
		// watermark: before it goes back, they are buffered (ghost.go).
		o.unghostAll()
	}
	o.watermark = w
	var err error
	if o.cfg.TimeMode == EventTime {
		o.forgetGhosts(w)
		err = o.fireTimers(w, out)
	}
	out.Items = append(out.Items, Item{Kind: ItemWatermark, Rule: AllRules, At: w, Watermark: w})
	o.maybeSweep()
	return err
}

// SetProcessingTime is [Operator.SetProcessingTime] for every rule.
// REQUIRES: out != nil.
func (o *SharedOperator) SetProcessingTime(t event.Time, out *Output) error {
	o.procTime = t
	var err error
	if o.cfg.TimeMode == ProcessingTime {
		err = o.fireTimers(t, out)
	}
	o.maybeSweep()
	return err
}

// keyState returns k's state, creating it (with no rule present).
func (o *SharedOperator) keyState(k event.Key) (*keyState, bool) {
	if ks := o.keys[k]; ks != nil {
		return ks, false
	}
	return o.newKeyState(k), true
}

// newKeyState returns a new state for k, which has none, with no rule
// present.
func (o *SharedOperator) newKeyState(k event.Key) *keyState {
	var ks *keyState
	if n := len(o.freeKeys); n > 0 {
		ks = o.freeKeys[n-1]
		o.freeKeys[n-1] = nil
		o.freeKeys = o.freeKeys[:n-1]
	} else {
		ks = &keyState{}
	}
	ks.key = k
	ks.rules = ks.rules[:0] // uniform
	o.keys[k] = ks
	return ks
}

// uniform reports whether ks's rule slots are not made (see ruleSlot).
func (o *SharedOperator) uniform(ks *keyState) bool { return len(ks.rules) != len(o.rules) }

// materialize makes the rule slots of ks if it is uniform.
func (o *SharedOperator) materialize(ks *keyState) {
	if !o.uniform(ks) {
		return
	}
	q, quiet := ks.quiet, ks.quiet.group != nil
	if quiet {
		o.unquiet(ks)
	}
	if cap(ks.rules) < len(o.rules) {
		if n := len(o.freeSlots); n > 0 {
			ks.rules = o.freeSlots[n-1]
			o.freeSlots[n-1] = nil
			o.freeSlots = o.freeSlots[:n-1]
		}
	}
	ks.rules = slices.Grow(ks.rules[:0], len(o.rules))[:len(o.rules)]
	for i := range o.rules {
		ks.rules[i] = o.slotOf(i, ks.order, q)
	}
}

// slotOf is rule i's slot at a uniform key of rank order with quiet start
// q (none: q.group is nil).
func (o *SharedOperator) slotOf(i int, order uint64, q quietStart) ruleSlot {
	r := o.rules[i]
	sl := ruleSlot{present: r.err == nil, order: order}
	quiet := q.group != nil
	switch {
	case quiet && r.start == q.group:
		sl.pend, sl.pendTs, sl.pendAt, sl.pendAdv = q.ev, q.ts, q.at, true
	case r.err != nil || quiet && !q.others:
		sl.present, sl.order = false, 0
	case quiet:
		sl.order = q.othersOrder
	}
	return sl
}

// materializeAll makes the rule slots of every uniform key: before the
// rules change, or a rule fails (a uniform key says nothing of when its
// rules failed).
func (o *SharedOperator) materializeAll() {
	for _, ks := range o.keys {
		o.materialize(ks)
	}
}

// arrive records that element ev reached ks: every rule not present there
// gets state now, ranked by ev.Seq (after all state created before, as
// Seq follows arrival).
func (o *SharedOperator) arrive(ks *keyState, created bool, ev *event.Event) {
	if created {
		ks.order = ev.Seq
	}
	if o.uniform(ks) {
		if created {
			return // every rule that has not failed is present
		}
		if q := &ks.quiet; q.group != nil && !q.others {
			q.others, q.othersOrder = true, ev.Seq
		}
		return // every rule that has not failed is present already
	}
	for i, r := range o.rules {
		if sl := &ks.rules[i]; r.err == nil && !sl.present {
			sl.present, sl.order = true, ev.Seq
		}
	}
}

func (o *SharedOperator) runOf(i int, ks *keyState) *nfa.Run {
	o.materialize(ks)
	sl := &ks.rules[i]
	if sl.run == nil {
		sl.run = o.newRun(i)
	}
	return sl.run
}

// newRun returns an empty run of rule i, a recycled one if any.
func (o *SharedOperator) newRun(i int) *nfa.Run {
	r := o.rules[i]
	var run *nfa.Run
	if n := len(r.freeRuns); n > 0 {
		run = r.freeRuns[n-1]
		r.freeRuns[n-1] = nil
		r.freeRuns = r.freeRuns[:n-1]
	} else {
		run = r.nfa.NewRun()
	}
	run.SetMaxPartialMatches(r.maxPartial)
	return run
}

func (o *SharedOperator) recycleRun(i int, sl *ruleSlot) {
	if r := o.rules[i]; sl.run != nil && r.err == nil && len(r.freeRuns) < maxFree {
		sl.run.Reset()
		r.freeRuns = append(r.freeRuns, sl.run)
	}
	sl.run = nil
}

// release recycles the record of a key whose state was dropped.
func (o *SharedOperator) release(ks *keyState) {
	o.unquiet(ks)
	for i := range ks.rules {
		o.recycleRun(i, &ks.rules[i])
	}
	if len(o.freeKeys) < maxFree {
		clear(ks.buf)
		clear(ks.rules)
		rules := ks.rules[:0]
		if cap(rules) > 0 && len(o.freeSlots) < maxFree {
			o.freeSlots = append(o.freeSlots, rules)
			rules = nil
		}
		gen, dgen := ks.timer.gen, ks.deadline.gen // see Operator.release
		*ks = keyState{buf: ks.buf[:0], rules: rules}
		ks.timer.gen, ks.deadline.gen = gen, dgen
		o.freeKeys = append(o.freeKeys, ks)
	}
}

func (o *SharedOperator) bufferDue(ts event.Time) event.Time {
	if o.cfg.TimeMode == ProcessingTime && ts < event.MaxTime {
		return ts + 1
	}
	return ts
}

// buffer buffers ev at ts at key k, or holds it as a ghost (ghost.go).
func (o *SharedOperator) buffer(k event.Key, ev *event.Event, ts event.Time, out *Output) {
	if len(o.ghosts) > 0 {
		if g := o.ghostOf(k); g != nil {
			if n := 2 + len(g.more); len(g.more) < maxGhostMore && (o.cfg.MaxBufferedEvents <= 0 || n <= o.cfg.MaxBufferedEvents) && o.mayGhost(ev, ts) {
				// No snapshot is in progress (mayGhost): nothing to copy first.
				o.addGhost(k, g, ev, ts)
				return
			}
			o.unghost(k, g, out)
		}
	}
	o.beforeChange(k)
	ks := o.keys[k]
	if ks == nil && o.cold != nil {
		ks = o.thaw(k)
	}
	if ks == nil && o.mayGhost(ev, ts) {
		o.addGhost(k, nil, ev, ts)
		return
	}
	o.bufferAt(k, ks, ev, ts, ev.Seq, out)
}

// bufferRanked buffers ev at ts at key k, which has no ghost, ranked by
// rank if k has no state yet.
func (o *SharedOperator) bufferRanked(k event.Key, ev *event.Event, ts event.Time, rank uint64, out *Output) {
	o.beforeChange(k)
	ks := o.keys[k]
	if ks == nil && o.cold != nil {
		ks = o.thaw(k)
	}
	o.bufferAt(k, ks, ev, ts, rank, out)
}

// bufferAt buffers ev at ts at key k, whose state is ks (nil: none, then
// made, ranked by rank).
func (o *SharedOperator) bufferAt(k event.Key, ks *keyState, ev *event.Event, ts event.Time, rank uint64, out *Output) {
	created := false
	if ks != nil && o.cfg.MaxBufferedEvents > 0 && ks.n >= o.cfg.MaxBufferedEvents {
		o.overflow++
		out.Items = append(out.Items, Item{Kind: ItemOverflow, Rule: AllRules, Key: k, At: ts, Event: ev})
		return
	}
	if ks == nil {
		ks, created = o.newKeyState(k), true
	}
	ks.warm = true
	o.arrive(ks, created, ev)
	if created {
		ks.order = rank
	}
	o.touch(ks)
	ks.insert(ev, ts, &o.evsPool)
	o.buffered++
	if due := o.bufferDue(ts); !ks.timer.armed || due < ks.timer.due {
		o.timers.arm(ks, due)
	}
}

// processNow feeds ev to the run of every rule at k at the processing
// clock (processing time without a comparator).
func (o *SharedOperator) processNow(k event.Key, ev *event.Event, out *Output) error {
	o.beforeChange(k)
	if o.cold != nil {
		o.thaw(k)
	}
	ks, created := o.keyState(k)
	ks.warm = true
	o.arrive(ks, created, ev)
	o.touch(ks)
	t := o.procTime
	var errs []error
	for i, r := range o.rules {
		if r.err != nil {
			continue
		}
		run := o.runOf(i, ks)
		err := run.AdvanceTime(t, &o.res)
		if err == nil {
			o.emit(i, ks, t, out)
			err = run.Process(ev, t, &o.res)
		}
		if err != nil {
			o.res.Reset()
			o.materializeAll()
			r.err = &KeyError{Key: ks.key, Err: err}
			errs = append(errs, &RuleError{Rule: r.id, Err: r.err})
			continue
		}
		o.emit(i, ks, t, out)
	}
	o.settle(ks)
	return errors.Join(errs...)
}

// fireTimers fires every key due at or before t. A key fires once, for
// every rule due there; each rule's groups of items are then put in that
// rule's own order of keys (they are computed independently, so only
// their order in out depends on the order of firing).
func (o *SharedOperator) fireTimers(t event.Time, out *Output) error {
	base := len(out.Items)
	o.fired, o.groups = o.fired[:0], o.groups[:0]
	o.fails = slices.Grow(o.fails[:0], len(o.rules))[:len(o.rules)]
	clear(o.fails)
	for {
		ks, _ := o.timers.popDue(t)
		if ks == nil {
			break
		}
		o.fired = append(o.fired, ks)
	}
	o.touchSink += touchKeys(o.fired)
	for _, ks := range o.fired {
		o.fireKey(ks, t, out)
	}
	err := o.order(base, out)
	for _, ks := range o.fired {
		o.settle(ks)
	}
	clear(o.fired)
	return err
}

// fireKey fires ks at t for every rule due there (Flink's onEventTime or
// onProcessingTime of the rule's operator), then drops the elements it
// released from the buffer.
func (o *SharedOperator) fireKey(ks *keyState, t event.Time, out *Output) {
	o.beforeChange(ks.key)
	o.touch(ks)
	ks.warm = true
	n := 0
	if o.cfg.TimeMode == EventTime {
		for n < len(ks.buf) && ks.buf[n].ts <= t {
			n++
		}
	} else if len(ks.buf) > 0 && o.bufferDue(ks.buf[0].ts) <= t {
		// Every element is stamped before t then (see Operator).
		n = len(ks.buf)
	}
	o.fireEpoch++
	o.fireElems = 0
	for i := range n {
		if o.less != nil {
			slices.SortStableFunc(ks.buf[i].evs, o.less)
		}
		o.fireElems += len(ks.buf[i].evs)
	}
	if o.uniform(ks) {
		if q := &ks.quiet; q.group != nil {
			switch {
			case n == 0 && ks.n == 0 && t >= expiry(q.ts, q.window):
				o.unquiet(ks) // the runs would be empty again: settle drops the key
			case t < expiry(q.ts, q.window) && !o.startsAny(ks, n) && o.quietIgnores(ks, n, q):
				q.at = t // every run would be advanced to t, having ignored them
			default:
				o.materialize(ks)
			}
		} else if o.startsAny(ks, n) && !o.startQuietly(ks, n, t) {
			o.materialize(ks)
		}
	}
	for i, r := range o.rules {
		if o.uniform(ks) {
			// No rule has state of its own at ks and no released element
			// starts any: every rule would skip them all (fireRule).
			break
		}
		if r.err != nil {
			continue
		}
		sl := &ks.rules[i]
		due, ok := o.slotDue(ks, sl, r)
		f := &o.fails[i]
		at := keyOrder{due: due, rank: sl.order, key: ks.key}
		if !ok || due > t || f.failed && at.cmp(f.at) >= 0 {
			continue
		}
		start := len(out.Items)
		o.wake, o.woken = due, true
		err := o.fireRule(i, ks, n, t, out)
		o.woken = false
		// Only groups with items need ordering (a failure's place is kept
		// in o.fails): most firings emit nothing.
		if len(out.Items) > start {
			o.groups = append(o.groups, ruleGroup{rule: i, at: at, start: start, end: len(out.Items)})
		}
		if err != nil {
			o.res.Reset()
			*f = ruleFail{failed: true, at: at, err: &KeyError{Key: ks.key, Err: err}}
		}
	}
	for i := range n {
		ks.n -= len(ks.buf[i].evs)
		o.buffered -= len(ks.buf[i].evs)
		o.evsPool.put(ks.buf[i].evs)
	}
	rest := copy(ks.buf, ks.buf[n:])
	clear(ks.buf[rest:])
	ks.buf = ks.buf[:rest]
	if n > 0 {
		for i := range ks.rules {
			sl := &ks.rules[i]
			if len(sl.hidden) == 0 {
				continue
			}
			// Bucket timestamps are unique and ascending: the released
			// ones are those before the first left.
			keep := sl.hidden[:0]
			for _, h := range sl.hidden {
				if rest > 0 && h.ts >= ks.buf[0].ts {
					keep = append(keep, h)
				}
			}
			clear(sl.hidden[len(keep):])
			sl.hidden = keep
		}
	}
}

// fireRule feeds the first n buckets of ks, the elements rule i sees, to
// its run, then advances the run to t. While the run is idle (or not made
// yet), an element it would only ignore ([nfa.Run.Inert]) is skipped, and
// so is the time advance before it: both would change nothing. This is
// the rule's relevance filter; it is exact because it only skips calls
// that are no-ops (docs/decisions.md, "Relevance filter"). Whether an
// element is inert for an idle run is asked of the rule's start group,
// which evaluates it once for all its rules.
func (o *SharedOperator) fireRule(i int, ks *keyState, n int, t event.Time, out *Output) error {
	sl := &ks.rules[i]
	r := o.rules[i]
	k := -1 // the element's position among the released ones
	for j := range n {
		b := &ks.buf[j]
		advanced := false
		for _, ev := range b.evs {
			k++
			if len(sl.hidden) > 0 && sl.hides(ev) {
				continue
			}
			if sl.pend != nil && b.ts < expiry(sl.pendTs, r.window) && r.probe.PendingDies(sl.pend, ev, b.ts, &o.res) {
				// The run would be advanced to b.ts, releasing nothing,
				// and drop the noted start's partial match at ev: it
				// would be an idle run given ev.
				sl.pend = nil
			}
			if sl.pend == nil && (sl.run == nil || sl.run.Idle()) && o.inert(r.start, k, ev, b.ts) {
				continue
			}
			if sl.pend != nil && b.ts < expiry(sl.pendTs, r.window) && o.inert(r.start, k, ev, b.ts) &&
				r.probe.PendingIgnores(sl.pend, ev, b.ts, &o.res) {
				continue // the run would be advanced to b.ts and change nothing
			}
			if sl.run == nil && sl.pend == nil && r.deferStart && t < expiry(b.ts, r.window) {
				// The run would be made, advanced to b.ts (nothing to do
				// for a new run) and given ev: note ev instead.
				sl.pend, sl.pendTs, sl.pendAdv = ev, b.ts, false
				advanced = true
				continue
			}
			if err := o.startPending(i, ks, out); err != nil {
				return err
			}
			run := o.runOf(i, ks)
			if !advanced {
				advanced = true
				if err := o.advance(i, ks, run, b.ts, out); err != nil {
					return err
				}
			}
			if err := run.Process(ev, b.ts, &o.res); err != nil {
				return err
			}
			o.emit(i, ks, b.ts, out)
		}
	}
	if sl.pend != nil {
		switch {
		case t < expiry(sl.pendTs, r.window):
			sl.pendAt, sl.pendAdv = t, true // what the run would be advanced to
			return nil
		case r.window != noWindow && t >= expiry(sl.pendTs, r.window) && !o.seesAfter(ks, sl, n):
			// The run would release nothing and be empty, then dropped
			// as the rule sees nothing more at the key.
			sl.pend = nil
			return nil
		}
		if err := o.startPending(i, ks, out); err != nil {
			return err
		}
	}
	if sl.run == nil {
		return nil
	}
	return o.advance(i, ks, sl.run, t, out)
}

// advance advances run, rule i's at ks, to t and emits what it released;
// for a rule that steps (SharedRule.StepDeadlines), to each deadline
// before t first, in turn.
func (o *SharedOperator) advance(i int, ks *keyState, run *nfa.Run, t event.Time, out *Output) error {
	if o.rules[i].step {
		prev := event.MinTime
		for d, ok := run.NextDeadline(); ok && d < t && d > prev; d, ok = run.NextDeadline() {
			if err := run.AdvanceTime(d, &o.res); err != nil {
				return err
			}
			o.emit(i, ks, d, out)
			prev = d
		}
	}
	if err := run.AdvanceTime(t, &o.res); err != nil {
		return err
	}
	o.emit(i, ks, t, out)
	return nil
}

// startPending makes the run of rule i at ks if its start was deferred
// (ruleSlot.pend) and makes it the calls it was spared: Process of the
// noted element, then AdvanceTime to pendAt if the run would have been
// advanced. They release nothing ([nfa.NFA.DeferrableStart]).
func (o *SharedOperator) startPending(i int, ks *keyState, out *Output) error {
	sl := &ks.rules[i]
	if sl.pend == nil {
		return nil
	}
	ev, ts := sl.pend, sl.pendTs
	sl.pend = nil
	run := o.runOf(i, ks)
	if err := run.Process(ev, ts, &o.res); err != nil {
		return err
	}
	o.emit(i, ks, ts, out)
	if sl.pendAdv {
		if err := run.AdvanceTime(sl.pendAt, &o.res); err != nil {
			return err
		}
		o.emit(i, ks, sl.pendAt, out)
	}
	return nil
}

// pendingRun returns a run of rule i made of the deferred start of sl as
// startPending makes it (Process of the noted element, AdvanceTime to
// pendAt if due), sl and its key left as they are: a state record writes
// it (recycleRun takes it back). It releases nothing
// ([nfa.NFA.DeferrableStart]).
func (o *SharedOperator) pendingRun(i int, sl *ruleSlot) *nfa.Run {
	r := o.rules[i]
	run := o.newRun(i)
	err := run.Process(sl.pend, sl.pendTs, &o.res)
	if err == nil && sl.pendAdv {
		err = run.AdvanceTime(sl.pendAt, &o.res)
	}
	if err != nil || len(o.res.Matches) > 0 || len(o.res.Timeouts) > 0 || o.res.Dropped > 0 {
		panic(fmt.Sprintf("cep: a deferred start of rule %d did not replay quietly: %v, %d matches, %d timeouts", r.id, err, len(o.res.Matches), len(o.res.Timeouts)))
	}
	o.res.Reset()
	return run
}

// noWindow is the window of a rule whose NFA has none.
const noWindow = event.MaxTime

// expiry is when a partial match started at ts ends with window (never
// without one).
func expiry(ts, window event.Time) event.Time {
	if window == noWindow {
		return event.MaxTime
	}
	return ts.Plus(int64(window)) // MaxTime for a window past it, never a wrap
}

// seesAfter reports whether the rule of sl sees an element buffered at ks
// after the first n buckets.
func (o *SharedOperator) seesAfter(ks *keyState, sl *ruleSlot, n int) bool {
	for j := n; j < len(ks.buf); j++ {
		if len(sl.hidden) == 0 || o.seesAny(sl, &ks.buf[j]) {
			return true
		}
	}
	return false
}

// startQuietly notes the start of the rules of one group at uniform key
// ks as a quietStart, when that is what fireRule would do for each of
// them: the last element released, and no other, is not inert for the
// rules of that group and inert for every other rule; the group's rules
// defer their starts (with one window, which t has not reached since the
// element) and no rule failed. It reports whether it did.
func (o *SharedOperator) startQuietly(ks *keyState, n int, t event.Time) bool {
	var g *startGroup
	var window event.Time
	for _, r := range o.rules {
		if r.err != nil {
			return false
		}
		if r.start == g {
			if !r.deferStart || r.window != window {
				return false
			}
			continue
		}
		starts, lastOnly := o.starting(r.start, ks, n)
		if !starts {
			continue
		}
		if g != nil || !lastOnly || !r.deferStart || r.window == noWindow {
			return false // a quiet start ends with its window
		}
		g, window = r.start, r.window
	}
	b := &ks.buf[n-1]
	if g == nil || t >= expiry(b.ts, window) {
		return false
	}
	ks.quiet = quietStart{group: g, ev: b.evs[len(b.evs)-1], ts: b.ts, at: t, window: window, others: true, othersOrder: ks.order}
	o.quietKeys++
	return true
}

// unquiet forgets the quiet start at ks, if any.
func (o *SharedOperator) unquiet(ks *keyState) {
	if ks.quiet.group != nil {
		ks.quiet = quietStart{}
		o.quietKeys--
	}
}

// quietIgnores reports whether the rules of q's group all leave their
// partial match unchanged given each of the elements of the first n
// buckets of ks (nfa.Run.PendingIgnores), which start no rule.
func (o *SharedOperator) quietIgnores(ks *keyState, n int, q *quietStart) bool {
	for _, r := range o.rules {
		if r.start != q.group {
			continue
		}
		for j := range n {
			b := &ks.buf[j]
			for _, ev := range b.evs {
				if !r.probe.PendingIgnores(q.ev, ev, b.ts, &o.res) {
					return false
				}
			}
		}
	}
	return true
}

// starting reports whether an element of the first n buckets of ks is
// not inert for the rules of g, and whether the last one is the only one.
func (o *SharedOperator) starting(g *startGroup, ks *keyState, n int) (starts, lastOnly bool) {
	k := 0
	for j := range n {
		b := &ks.buf[j]
		for _, ev := range b.evs {
			if !o.inert(g, k, ev, b.ts) {
				if k != o.fireElems-1 {
					return true, false
				}
				starts = true
			}
			k++
		}
	}
	return starts, starts
}

// startsAny reports whether an element of the first n buckets of ks (all
// released by the current fireKey) is not inert for the start group of
// some rule.
func (o *SharedOperator) startsAny(ks *keyState, n int) bool {
	for _, r := range o.rules {
		g := r.start
		if g.starts == o.fireEpoch {
			continue // asked already, as the group of an earlier rule
		}
		k := 0
		for j := range n {
			b := &ks.buf[j]
			for _, ev := range b.evs {
				if !o.inert(g, k, ev, b.ts) {
					return true
				}
				k++
			}
		}
		g.starts = o.fireEpoch
	}
	return false
}

// inert reports whether the k-th element released by the current fireKey,
// ev at ts, is inert for an idle run of the rules of g.
func (o *SharedOperator) inert(g *startGroup, k int, ev *event.Event, ts event.Time) bool {
	if g.epoch != o.fireEpoch {
		g.epoch = o.fireEpoch
		g.inert = slices.Grow(g.inert[:0], o.fireElems)[:o.fireElems]
		clear(g.inert)
	}
	switch g.inert[k] {
	case inertYes:
		return true
	case inertNo:
		return false
	}
	in := g.probe.Inert(ev, ts, &o.res)
	g.inert[k] = inertNo
	if in {
		g.inert[k] = inertYes
	}
	return in
}

func (o *SharedOperator) seesAny(sl *ruleSlot, b *bucket) bool {
	for _, ev := range b.evs {
		if !sl.hides(ev) {
			return true
		}
	}
	return false
}

// order puts the groups of items emitted from out.Items[base] on in each
// rule's own order of keys, drops what a failed rule emitted after its
// failure in that order, and marks the failed rules.
func (o *SharedOperator) order(base int, out *Output) error {
	if len(o.groups) == 0 && !slices.ContainsFunc(o.fails, func(f ruleFail) bool { return f.failed }) {
		return nil // nothing emitted, nothing failed: the common time advance
	}
	// Per rule: the last group seen, to check the order.
	o.last = slices.Grow(o.last[:0], len(o.rules))[:len(o.rules)]
	clear(o.last)
	last := o.last
	sorted := true
	for _, g := range o.groups {
		l := &last[g.rule]
		if l.failed && l.at.cmp(g.at) >= 0 {
			sorted = false
		}
		*l = ruleFail{failed: true, at: g.at}
	}
	var errs []error
	for i := range o.fails {
		if o.fails[i].failed {
			o.materializeAll()
			break
		}
	}
	for i := range o.fails {
		if f := &o.fails[i]; f.failed {
			sorted = false
			r := o.rules[i]
			r.err = f.err
			errs = append(errs, &RuleError{Rule: r.id, Err: f.err})
		}
	}
	if sorted {
		return nil
	}
	o.scratch = append(o.scratch[:0], out.Items[base:]...)
	keep := o.groups[:0]
	for _, g := range o.groups {
		if f := &o.fails[g.rule]; f.failed && f.at.cmp(g.at) < 0 {
			o.unemit(g.rule, o.scratch[g.start-base:g.end-base])
			continue
		}
		keep = append(keep, g)
	}
	// (rule, key) is unique: a rule has one group per fired key.
	slices.SortFunc(keep, func(a, b ruleGroup) int {
		if a.rule != b.rule {
			return a.rule - b.rule
		}
		return a.at.cmp(b.at)
	})
	clear(out.Items[base:])
	out.Items = out.Items[:base]
	for _, g := range keep {
		out.Items = append(out.Items, o.scratch[g.start-base:g.end-base]...)
	}
	clear(o.scratch)
	return errors.Join(errs...)
}

// emit moves what the last run call of rule i released into out, as
// [Operator] does.
func (o *SharedOperator) emit(i int, ks *keyState, at event.Time, out *Output) {
	r := o.rules[i]
	for _, m := range o.res.Matches {
		out.Items = append(out.Items, Item{Kind: ItemMatch, Rule: r.id, Key: ks.key, Match: m, At: at, Wake: o.wake, Woken: o.woken})
	}
	for _, to := range o.res.Timeouts {
		out.Items = append(out.Items, Item{Kind: ItemTimeout, Rule: r.id, Key: ks.key, Match: to.Match, At: to.At, Wake: o.wake, Woken: o.woken})
	}
	r.matches += uint64(len(o.res.Matches))
	r.timeouts += uint64(len(o.res.Timeouts))
	if d := uint64(o.res.Dropped); d > 0 {
		r.dropped += d
		o.drops += d
		r.noteDrops(ks.key, d)
	}
	o.res.Reset()
}

// unemit uncounts items of rule i dropped after its failure.
func (o *SharedOperator) unemit(i int, items []Item) {
	r := o.rules[i]
	for _, it := range items {
		switch it.Kind {
		case ItemMatch:
			r.matches--
		case ItemTimeout:
			r.timeouts--
		}
	}
}

// slotDue is the time at which the rule of sl must fire at ks next, as
// its own operator would fire it (the earlier of its timers,
// [Operator.armTimers]) over the elements it sees.
func (o *SharedOperator) slotDue(ks *keyState, sl *ruleSlot, r *sharedRule) (event.Time, bool) {
	due, ok := event.MaxTime, false
	for j := range ks.buf {
		if len(sl.hidden) == 0 || o.seesAny(sl, &ks.buf[j]) {
			due, ok = o.bufferDue(ks.buf[j].ts), true
			break
		}
	}
	// A deadline at MaxTime (a window past the range of times, Plus) is
	// one still: the final watermark fires it.
	if sl.run != nil {
		if d, has := sl.run.NextDeadline(); has && (!ok || d < due) {
			due, ok = d, true
		}
	}
	if sl.pend != nil && r.window != noWindow {
		if d := expiry(sl.pendTs, r.window); !ok || d < due {
			due, ok = d, true
		}
	}
	return due, ok
}

// settle updates which rules hold state at ks, drops the key when none
// does and nothing is buffered, or re-arms its timers for its first
// buffered element and its rules' earliest window deadline.
func (o *SharedOperator) settle(ks *keyState) {
	if o.uniform(ks) {
		// Every rule that has not failed is present while elements are
		// buffered, waiting for the first one; none holds anything else,
		// but a quiet start's rules, until its window ends.
		due, ok := event.MaxTime, false
		if q := &ks.quiet; q.group != nil {
			if ks.n == 0 && q.others {
				q.others = false
			}
			due, ok = expiry(q.ts, q.window), true
		}
		if ks.n == 0 && !ok {
			o.timers.disarm(ks)
			delete(o.keys, ks.key)
			o.release(ks)
			return
		}
		o.settleTimers(ks, due, ok)
		return
	}
	keep := ks.n > 0
	due, ok := event.MaxTime, false
	for i, r := range o.rules {
		if r.err != nil {
			continue
		}
		sl := &ks.rules[i]
		sl.present = ks.n > len(sl.hidden) || sl.run != nil && !sl.run.Empty() || sl.pend != nil
		if !sl.present {
			o.recycleRun(i, sl)
			continue
		}
		keep = true
		if sl.run != nil {
			if d, has := sl.run.NextDeadline(); has && (!ok || d < due) {
				due, ok = d, true
			}
		}
		if sl.pend != nil && r.window != noWindow {
			if d := expiry(sl.pendTs, r.window); !ok || d < due {
				due, ok = d, true
			}
		}
	}
	if !keep {
		o.timers.disarm(ks)
		delete(o.keys, ks.key)
		o.release(ks)
		return
	}
	o.settleTimers(ks, due, ok)
}

// settleTimers arms ks's timers for its first buffered element, if any,
// and for deadline if ok, and disarms them otherwise.
func (o *SharedOperator) settleTimers(ks *keyState, deadline event.Time, ok bool) {
	switch {
	case ks.n == 0:
		o.timers.disarmKind(ks, bufferTimer)
	case !ks.timer.armed || ks.timer.due != o.bufferDue(ks.buf[0].ts):
		o.timers.arm(ks, o.bufferDue(ks.buf[0].ts))
	}
	switch {
	case !ok:
		o.timers.disarmKind(ks, deadlineTimer)
	case !ks.deadline.armed || ks.deadline.due != deadline:
		o.timers.armDeadline(ks, deadline)
	}
}

// touchKeys reads a word of the state each key of keys will need when it
// fires: its first buffered element and each rule's noted start or run.
// The loads are independent of each other, so the processor overlaps
// their cache misses instead of taking them one after another inside
// fireKey. The sum is kept only so that the loads are not removed.
func touchKeys(keys []*keyState) uintptr {
	var sum uintptr
	for _, ks := range keys {
		if len(ks.buf) > 0 && len(ks.buf[0].evs) > 0 {
			sum += uintptr(ks.buf[0].evs[0].Seq)
		}
		for i := range ks.rules {
			sl := &ks.rules[i]
			if sl.pend != nil {
				sum += uintptr(sl.pend.Time)
			}
			if sl.run != nil {
				sum += sl.run.Touch()
			}
		}
		if q := ks.quiet.ev; q != nil {
			sum += uintptr(q.Time)
		}
	}
	return sum
}
