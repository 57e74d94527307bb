package difftest

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/cepheus-cep/cepheus/internal/conformance"
)

// Explanation is a deliberate difference between Cepheus and Flink
// (docs/flink-differences.md) together with the code that recognises it.
// A disagreement counts as explained only when an explanation applies.
type Explanation struct {
	// ID is the id of the entry in docs/flink-differences.md.
	ID string
	// Reason says why Cepheus differs, in one line.
	Reason string
	// Applies says whether the difference accounts for every way in which
	// flink and cepheus, the results of in, differ. It must not accept
	// anything else: an explanation that applies too widely hides bugs.
	Applies func(in *conformance.Input, flink, cepheus *conformance.Result) bool
}

// Explanations are the registered explanations. Every id has a row in
// docs/flink-differences.md marked as checked by code, and every such row
// an entry here (TestExplanationsDocumented).
var Explanations = []Explanation{
	{
		ID:      "epsilon-cycle",
		Reason:  "Flink loops forever on a cycle of proceed transitions; Cepheus reports an error",
		Applies: epsilonCycle,
	},
	{
		ID: "event-id-collision",
		Reason: "Flink gives an event whose timestamp returns to one already passed the buffer id of an " +
			"earlier event (a Flink bug, reachable only by feeding one NFA out of order)",
		Applies: eventIDCollision,
	},
	{
		ID: "cross-key-timer-order",
		Reason: "keys that fire at the same time come out in the order of Flink's timer heap there, " +
			"in (due time, key creation) order in Cepheus",
		Applies: crossKeyTimerOrder,
	},
	{
		ID: "window-timer",
		Reason: "Flink wakes a key only at its buffered elements' timers and at the within timer of a " +
			"partial match that started after time 0; Cepheus wakes it at every deadline",
		Applies: windowTimer,
	},
	{
		ID: "restored-watermark",
		Reason: "a restored Cepheus operator keeps its watermark (checkpoints persist watermarks); a restored " +
			"Flink CepOperator starts again at Long.MIN_VALUE, so elements at or behind the old watermark are not late there",
		Applies: restoredWatermark,
	},
	{
		ID: "stop-without-entry",
		Reason: "Flink 2.x fails with a NullPointerException when a NOT stage is reached before any " +
			"event was taken (releaseNode(null)); Cepheus drops the branch as Flink 1.x did",
		Applies: stopWithoutEntry,
	},
}

// Explain returns the first explanation that applies to the disagreement,
// or nil.
func Explain(in *conformance.Input, flink, cepheus *conformance.Result) *Explanation {
	for i := range Explanations {
		if Explanations[i].Applies(in, flink, cepheus) {
			return &Explanations[i]
		}
	}
	return nil
}

// epsilonCycle: Cepheus reports the cycle, Flink hit the runner's per-case
// timeout.
func epsilonCycle(_ *conformance.Input, flink, cepheus *conformance.Result) bool {
	return cepheus.Error != nil && strings.Contains(*cepheus.Error, "cycle of proceed transitions") &&
		flink.Error != nil && strings.HasPrefix(*flink.Error, "timeout:")
}

// eventIDCollision recognises the consequences of Flink's EventId reuse.
//
// Flink's SharedBuffer names an event by (timestamp, n), n counting the
// events registered with that timestamp, and advanceTime(t) drops the
// counters of the timestamps below t. When an nfa_harness stream goes back
// to a timestamp it has already passed (2, 3, 2), the later event gets the
// id of the earlier one: it replaces the earlier event in the buffer and
// shares its nodes, so Flink's matches show it in the earlier event's place
// (even twice in one match), and reference counts go wrong until a lookup
// fails (NullPointerException on Lockable.getElement, "Referring to non
// existent event") or an extraction loops. Cepheus keeps the ids for ordering but stores every
// event under its own key. The operator cannot reach this: it feeds each
// key's NFA in timestamp order.
//
// It applies when the case can collide and every differing match or
// timeout on Flink's side involves an event that may have collided. When
// Flink failed (with one of the symptoms above), the matches Cepheus found
// after that point are not constrained.
func eventIDCollision(in *conformance.Input, flink, cepheus *conformance.Result) bool {
	if in.Driver != conformance.DriverNFA || cepheus.Error != nil {
		return false
	}
	coll := collidingSeqs(in.Events)
	if len(coll) == 0 {
		return false
	}
	flinkFailed := flink.Error != nil
	if flinkFailed && !bufferCorruption(*flink.Error) {
		return false
	}
	involves := func(ms [][]uint64) bool {
		for _, m := range ms {
			if !slices.ContainsFunc(m, func(s uint64) bool { return coll[s] }) {
				return false
			}
		}
		return true
	}
	onlyF, onlyC := differing(matchKeys(flink.Matches), matchSeqs(flink.Matches),
		matchKeys(cepheus.Matches), matchSeqs(cepheus.Matches))
	onlyFT, onlyCT := differing(timeoutKeys(flink.Timeouts), timeoutSeqs(flink.Timeouts),
		timeoutKeys(cepheus.Timeouts), timeoutSeqs(cepheus.Timeouts))
	if !involves(onlyF) || !involves(onlyFT) {
		return false
	}
	return flinkFailed || involves(onlyC) && involves(onlyCT)
}

// bufferCorruption says whether a Flink error is a symptom of an
// inconsistent shared buffer; a node whose edges lead back to itself also
// makes Flink's extraction loop until the runner's timeout.
func bufferCorruption(msg string) bool {
	return strings.HasPrefix(msg, "timeout:") ||
		strings.Contains(msg, "NullPointerException") ||
		// "Referring to non existent event"; the checkState of
		// NFA.extractCurrentMatches when a condition reads ctx.
		strings.Contains(msg, "IllegalStateException") ||
		strings.Contains(msg, "IndexOutOfBoundsException")
}

// collidingSeqs returns the events that may share a Flink EventId: an
// event whose timestamp equals that of an earlier event after a later
// event went past it, and that earlier event. Flink registers only the
// events some partial match takes, so this is the most that can collide.
func collidingSeqs(evs []conformance.EventSpec) map[uint64]bool {
	out := map[uint64]bool{}
	for j := range evs {
		if evs[j].Ts == nil {
			continue
		}
		t := *evs[j].Ts
		for i := range j {
			if evs[i].Ts == nil || *evs[i].Ts != t {
				continue
			}
			passed := slices.ContainsFunc(evs[i+1:j], func(e conformance.EventSpec) bool { return e.Ts != nil && *e.Ts > t })
			if passed {
				out[evs[i].Seq], out[evs[j].Seq] = true, true
			}
		}
	}
	return out
}

// stopWithoutEntry recognises Flink 2.x's NullPointerException when a
// branch reaches the stop state of a NOT stage before it took any event.
//
// Flink rejects an optional stage right before notNext/notFollowedBy, but
// not a group that can be skipped entirely (its inner stages optional).
// When such a NOT stage matches the first event, NFA.doProcess releases
// the stop state's previous buffer entry, which is null, and Flink 2.x's
// SharedBuffer.getEntry passes it to its Guava cache, which throws. Flink
// 1.x looked the null key up in a map, found nothing and dropped the
// branch; Cepheus does the same. The job fails in Flink, so its results
// stop there: what Flink produced must be a prefix of what Cepheus did.
func stopWithoutEntry(in *conformance.Input, flink, cepheus *conformance.Result) bool {
	if flink.Error == nil || cepheus.Error != nil || !strings.Contains(*flink.Error, "NullPointerException") {
		return false
	}
	if !notReachableEmpty(in.Pattern.Stages, true) {
		return false
	}
	return isPrefix(matchKeys(flink.Matches), matchKeys(cepheus.Matches)) &&
		isPrefix(timeoutKeys(flink.Timeouts), timeoutKeys(cepheus.Timeouts)) &&
		isPrefix(outputKeys(flink.Output), outputKeys(cepheus.Output)) &&
		isPrefix(flink.Late, cepheus.Late)
}

// notReachableEmpty says whether some NOT stage of stages can be reached
// before any event was taken, given that the start of stages can be
// (reachable).
func notReachableEmpty(stages []conformance.StageSpec, reachable bool) bool {
	for i := range stages {
		if !reachable {
			return false
		}
		s := &stages[i]
		if i > 0 && strings.HasPrefix(s.Contiguity, "not") {
			return true
		}
		if s.Group != nil && notReachableEmpty(s.Group.Stages, true) {
			return true
		}
		reachable = nullable(s)
	}
	return false
}

// nullable says whether a stage can match without taking an event.
func nullable(s *conformance.StageSpec) bool {
	q := &s.Quantifier
	if q.Optional || q.Kind == "times" && q.Min == 0 {
		return true
	}
	if s.Group != nil {
		for i := range s.Group.Stages {
			if !nullable(&s.Group.Stages[i]) {
				return false
			}
		}
		return true
	}
	return false
}

func isPrefix[T comparable](p, s []T) bool {
	return len(p) <= len(s) && slices.Equal(p, s[:len(p)])
}

func matchSeqs(ms []conformance.MatchResult) [][]uint64 {
	out := make([][]uint64, len(ms))
	for i, m := range ms {
		out[i] = m.Stages.Flat()
	}
	return out
}

func timeoutSeqs(ts []conformance.TimeoutResult) [][]uint64 {
	out := make([][]uint64, len(ts))
	for i, t := range ts {
		out[i] = t.Stages.Flat()
	}
	return out
}

// differing compares two lists of items by key, as multisets, and returns
// the seqs of the items found only in the first list and only in the
// second.
func differing(fKeys []string, fSeqs [][]uint64, cKeys []string, cSeqs [][]uint64) (onlyF, onlyC [][]uint64) {
	minus := func(aKeys []string, aSeqs [][]uint64, bKeys []string) [][]uint64 {
		left := map[string]int{}
		for _, k := range bKeys {
			left[k]++
		}
		var out [][]uint64
		for i, k := range aKeys {
			if left[k] > 0 {
				left[k]--
				continue
			}
			out = append(out, aSeqs[i])
		}
		return out
	}
	return minus(fKeys, fSeqs, cKeys), minus(cKeys, cSeqs, fKeys)
}

// keyed splits the operator outputs of a result by key (the id of the
// events of each item; the operator keys by id): per key, the matches (with
// their via), the timeouts, and the match items of the main output. The
// watermark items of the output are returned apart, in order.
type keyed struct {
	matches, timeouts, output map[int64][]string
	watermarks                []string
}

func splitByKey(in *conformance.Input, r *conformance.Result) (*keyed, bool) {
	ids := map[uint64]int64{}
	for _, e := range in.Events {
		ids[e.Seq] = e.ID
	}
	k := &keyed{matches: map[int64][]string{}, timeouts: map[int64][]string{}, output: map[int64][]string{}}
	keyOf := func(seqs []uint64) (int64, bool) {
		if len(seqs) == 0 {
			return 0, false
		}
		id, ok := ids[seqs[0]]
		return id, ok
	}
	for i, m := range r.Matches {
		id, ok := keyOf(m.Stages.Flat())
		if !ok {
			return nil, false
		}
		k.matches[id] = append(k.matches[id], matchKeys(r.Matches[i : i+1])[0])
	}
	for i, t := range r.Timeouts {
		id, ok := keyOf(t.Stages.Flat())
		if !ok {
			return nil, false
		}
		k.timeouts[id] = append(k.timeouts[id], timeoutKeys(r.Timeouts[i : i+1])[0])
	}
	for i, it := range r.Output {
		key := outputKeys(r.Output[i : i+1])[0]
		if it.Watermark != nil {
			k.watermarks = append(k.watermarks, key)
			continue
		}
		id, ok := keyOf(it.Match)
		if !ok {
			return nil, false
		}
		k.output[id] = append(k.output[id], key)
	}
	return k, true
}

// operatorOnly says whether a disagreement is confined to the operator's
// emissions: same error state (none), same late events.
func operatorOnly(in *conformance.Input, flink, cepheus *conformance.Result) bool {
	return in.Driver == conformance.DriverOperator && flink.Error == nil && cepheus.Error == nil &&
		slices.Equal(flink.Late, cepheus.Late)
}

// crossKeyTimerOrder recognises outputs that differ only in the order in
// which different keys come out at the same time.
//
// Flink keeps one timer per (key, timestamp) in a binary heap; timers of
// equal time fire in heap order, which depends on the history of
// insertions and removals. Cepheus fires keys by (due time, the order in
// which their state was created). So items of different keys released by
// one watermark (or one processing-time advance) can come out in another
// order. It applies when every key's own sequence of matches, timeouts and
// output items is the same on both sides, the watermarks are forwarded
// alike, and between two watermarks the output holds the same items.
func crossKeyTimerOrder(in *conformance.Input, flink, cepheus *conformance.Result) bool {
	if !operatorOnly(in, flink, cepheus) {
		return false
	}
	f, okF := splitByKey(in, flink)
	c, okC := splitByKey(in, cepheus)
	if !okF || !okC || len(f.matches)+len(f.timeouts) == 0 {
		return false
	}
	if !sameKeyed(f.matches, c.matches) || !sameKeyed(f.timeouts, c.timeouts) ||
		!sameKeyed(f.output, c.output) || !slices.Equal(f.watermarks, c.watermarks) {
		return false
	}
	fs, cs := outputSegments(flink.Output), outputSegments(cepheus.Output)
	if len(fs) != len(cs) {
		return false
	}
	for i := range fs {
		if len(multisetMinus(fs[i], cs[i])) > 0 || len(multisetMinus(cs[i], fs[i])) > 0 {
			return false
		}
	}
	return true
}

func sameKeyed(a, b map[int64][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// outputSegments splits an output at its watermark items.
func outputSegments(out []conformance.OutputItem) [][]string {
	segs := [][]string{nil}
	for i, it := range out {
		if it.Watermark != nil {
			segs = append(segs, nil)
			continue
		}
		segs[len(segs)-1] = append(segs[len(segs)-1], outputKeys(out[i : i+1])[0])
	}
	return segs
}

// windowTimer recognises outputs where Flink releases time-driven items
// later than Cepheus, or never.
//
// Flink 2.3's CepOperator wakes a key only through timers: one per
// buffered element timestamp, and one at start + within when a partial
// match starts (NFA.doProcess sets the new-start flag only when the start
// timestamp is > 0; in processing time the timer is set 1 ms later).
// Gap windows (PREVIOUS_AND_CURRENT, per-loop windows) get no timer, and
// there is no timer at the watermark any more. What a deadline releases
// (timeouts, pending notFollowedBy matches, matches held back behind an
// earlier partial match) therefore comes out only when the key is woken
// by a later element or timer, or never. Cepheus wakes a key at its next
// deadline. The content is the same; Flink's is late or missing.
//
// It applies, when the pattern has such a window, if per key Flink's
// matches, timeouts and output items are a prefix of Cepheus's (Cepheus's
// extra items coming out at a watermark or a clock advance), the
// watermarks are forwarded alike, and the keys whose items differ are
// keys that can have a partial match without a timer: any key when the
// pattern has a gap window, in processing time any key, else a key with
// an event at time 0 or before. Cepheus may also have failed where Flink
// did not, when what it released early was a match that a throw-on-miss
// skip strategy rejects (skipMissOnTime); Flink's items after that point
// are then not compared.
func windowTimer(in *conformance.Input, flink, cepheus *conformance.Result) bool {
	stopped := skipMissOnTime(in, flink, cepheus)
	if !stopped && !operatorOnly(in, flink, cepheus) {
		return false
	}
	gap := hasGapWindow(in.Pattern)
	within := in.Pattern.WithinMs != nil && (in.Pattern.WithinType == "" || in.Pattern.WithinType == "FIRST_AND_LAST")
	if !gap && !within {
		return false
	}
	f, okF := splitByKey(in, flink)
	c, okC := splitByKey(in, cepheus)
	if !okF || !okC || !slices.Equal(f.watermarks, c.watermarks) {
		return false
	}
	procTime := in.TimeCharacteristic == "processing_time"
	early := keysAtTimeZero(in)
	untimed := func(key int64) bool { return gap || procTime || early[key] }
	for i, pair := range [][2]map[int64][]string{{f.matches, c.matches}, {f.timeouts, c.timeouts}, {f.output, c.output}} {
		fk, ck := pair[0], pair[1]
		same := func(f, c string) bool { return f == c }
		if i == 0 {
			same = laterVia
		}
		for key, fv := range fk {
			cv := ck[key]
			if stopped && len(cv) < len(fv) {
				// Cepheus stopped at its error; Flink went on.
				fv = fv[:len(cv)]
			}
			if len(fv) > len(cv) || !slices.EqualFunc(fv, cv[:len(fv)], same) {
				return false
			}
		}
		for key, cv := range ck {
			fv := fk[key]
			if len(cv) == len(fv) {
				continue
			}
			if !untimed(key) {
				return false
			}
			for _, item := range cv[len(fv):] {
				if strings.HasPrefix(item, conformance.ViaEvent+"{") {
					return false // a match released by an element would not be late in Flink
				}
			}
		}
	}
	return true
}

// skipMissOnTime says whether Cepheus, and not Flink, failed with a
// throw-on-miss skip strategy that missed, at a watermark or a clock
// advance of the operator: what a deadline released there is a match whose
// skip target is not in it, which Flink has not released (yet). The late
// events must agree up to that step.
func skipMissOnTime(in *conformance.Input, flink, cepheus *conformance.Result) bool {
	if in.Driver != conformance.DriverOperator || flink.Error != nil || cepheus.Error == nil ||
		!in.Pattern.SkipThrowOnMiss || !strings.Contains(*cepheus.Error, "skip target missing") {
		return false
	}
	var step int
	if _, err := fmt.Sscanf(*cepheus.Error, "step %d:", &step); err != nil || step < 0 || step >= len(in.OperatorSteps) {
		return false
	}
	st := in.OperatorSteps[step]
	return (st.Watermark != nil || st.ProcessingTime != nil) && isPrefix(cepheus.Late, flink.Late)
}

// laterVia says whether match keys f (Flink) and c (Cepheus) are the same
// match, where Flink may have released by an element what Cepheus
// released earlier by time.
func laterVia(f, c string) bool {
	if f == c {
		return true
	}
	fVia, fStages, _ := strings.Cut(f, "{")
	cVia, cStages, _ := strings.Cut(c, "{")
	return fStages == cStages && fVia == conformance.ViaEvent && cVia != conformance.ViaEvent
}

// hasGapWindow says whether the pattern has a PREVIOUS_AND_CURRENT window
// or a per-loop window.
func hasGapWindow(p conformance.PatternSpec) bool {
	if p.WithinMs != nil && p.WithinType == "PREVIOUS_AND_CURRENT" {
		return true
	}
	var walk func([]conformance.StageSpec) bool
	walk = func(stages []conformance.StageSpec) bool {
		for i := range stages {
			if stages[i].Quantifier.WindowMs != nil {
				return true
			}
			if g := stages[i].Group; g != nil && walk(g.Stages) {
				return true
			}
		}
		return false
	}
	return walk(p.Stages)
}

// keysAtTimeZero returns the keys that have an event with a timestamp of 0
// or less (event time).
func keysAtTimeZero(in *conformance.Input) map[int64]bool {
	out := map[int64]bool{}
	for _, e := range in.Events {
		if e.Ts == nil || *e.Ts <= 0 {
			out[e.ID] = true
		}
	}
	return out
}

// restoredWatermark recognises the consequences of Flink not restoring the
// operator's watermark. After a snapshot_restore, until the next watermark
// step, an element at or behind the watermark in force before the restore
// is late for Cepheus (whose snapshot keeps the watermark) but buffered by
// Flink, whose timer service starts again at Long.MIN_VALUE. Flink then
// feeds it to the NFA behind time it already passed, which changes what
// follows (it may complete a notNext, break a strict contiguity, prune) or
// breaks it (NullPointerException, timeouts).
//
// It applies when such elements exist, Cepheus reports exactly them as late
// on top of Flink's late elements, Cepheus did not fail, no Cepheus match
// takes one of them, and both outputs are equal up to the first watermark
// step after the first such element arrived: nothing emitted before that
// element could reach the operators may differ.
func restoredWatermark(in *conformance.Input, flink, cepheus *conformance.Result) bool {
	if in.Driver != conformance.DriverOperator || cepheus.Error != nil {
		return false
	}
	extra := map[uint64]bool{}
	wm := int64(math.MinInt64)
	restored := false
	watermarks, before := 0, -1 // watermark steps; those before the first extra element
	for _, st := range in.OperatorSteps {
		switch {
		case st.Watermark != nil:
			wm = *st.Watermark
			restored = false
			watermarks++
		case st.SnapshotRestore != nil && *st.SnapshotRestore:
			restored = true
		case st.Event != nil && restored:
			for _, e := range in.Events {
				if e.Seq == *st.Event && e.Ts != nil && *e.Ts <= wm {
					extra[e.Seq] = true
					if before < 0 {
						before = watermarks
					}
				}
			}
		}
	}
	if len(extra) == 0 {
		return false
	}
	want := append([]uint64(nil), flink.Late...)
	for seq := range extra {
		if slices.Contains(flink.Late, seq) {
			return false
		}
		want = append(want, seq)
	}
	got := append([]uint64(nil), cepheus.Late...)
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(want, got) {
		return false
	}
	for _, m := range cepheus.Matches {
		if slices.ContainsFunc(m.Stages.Flat(), func(s uint64) bool { return extra[s] }) {
			return false
		}
	}
	// The outputs up to (and including) the watermark that precedes the
	// first extra element are what both engines emitted before it arrived.
	prefix := func(out []conformance.OutputItem) []conformance.OutputItem {
		n := 0
		for i, it := range out {
			if it.Watermark != nil {
				n++
				if n == before {
					return out[:i+1]
				}
			}
		}
		if before == 0 {
			return nil
		}
		return out
	}
	fp, cp := prefix(flink.Output), prefix(cepheus.Output)
	if len(fp) != len(cp) {
		return flink.Error != nil && len(fp) < len(cp)
	}
	for i := range fp {
		if !sameItem(fp[i], cp[i]) {
			return false
		}
	}
	return true
}

func sameItem(a, b conformance.OutputItem) bool {
	if (a.Watermark == nil) != (b.Watermark == nil) {
		return false
	}
	if a.Watermark != nil {
		return *a.Watermark == *b.Watermark
	}
	return slices.Equal(a.Match, b.Match)
}
