package conformance

import (
	"fmt"
	"slices"
	"strings"
)

// The compare modes of the cases (README § compare_mode).
const (
	ModeMultiset        = "multiset"
	ModeSetOfMaps       = "set_of_maps"
	ModeOrdered         = "ordered"
	ModeCountTimeouts   = "match_count+timeout_set"
	ModePerStageOrdered = "per_stage_ordered"
	ModeKeyOrder        = "key_order"
	ModeLateEventsOnly  = "late_events_only"
	ModeExpectsError    = "expects_error"
)

// Verdict is the judgement of one case.
type Verdict struct {
	ID   string
	Pass bool
	// Diff says, when the case failed, what was expected and what the
	// engine produced, one problem after the other.
	Diff string
}

// Judge compares r, the result of c (as read back from a results file), with
// c's expectation. The compare mode decides how matches are compared;
// timeouts and late events are checked as well wherever the case lists them.
// Events are compared by value where the Java test does so (Event.equals:
// id, name, price, and volume for a SubEvent): a result that names another
// event with the same value is as good.
func Judge(c *Case, r *Result) Verdict {
	j := &judge{c: c, r: r}
	j.run()
	return Verdict{ID: c.ID(), Pass: len(j.problems) == 0, Diff: strings.Join(j.problems, "\n")}
}

// judge collects the problems of one case.
type judge struct {
	c        *Case
	r        *Result
	evs      eventIndex
	problems []string
}

func (j *judge) failf(format string, args ...any) {
	j.problems = append(j.problems, fmt.Sprintf(format, args...))
}

func (j *judge) run() {
	if j.r == nil {
		j.failf("no result for the case in the results file")
		return
	}
	evs, err := indexEvents(j.c.Input.Events)
	if err != nil {
		j.failf("bad case: %v", err)
		return
	}
	j.evs = evs
	x := &j.c.Expect
	mode := x.CompareMode
	if mode == ModeExpectsError {
		if j.r.Error == nil {
			j.failf("expected an error (%s), got none", deref(x.Error, "any"))
		}
		return
	}
	if j.r.Error != nil {
		j.failf("the engine failed: %s", *j.r.Error)
		return
	}
	switch mode {
	case ModeMultiset:
		j.multiset()
	case ModeSetOfMaps:
		j.setOfMaps()
	case ModeOrdered:
		j.ordered()
	case ModeCountTimeouts:
		j.matchCount()
		j.timeouts()
	case ModePerStageOrdered:
		j.perStage()
	case ModeKeyOrder:
		j.keyOrder()
	case ModeLateEventsOnly:
		j.late()
	default:
		j.failf("bad case: unknown compare_mode %q", mode)
		return
	}
	if x.TimeoutsSeq != nil && mode != ModeCountTimeouts {
		j.timeouts()
	}
	if x.LateEventsSeq != nil && mode != ModeLateEventsOnly {
		j.late()
	}
}

// gotMatches returns the produced matches flattened stage by stage.
func (j *judge) gotMatches() [][]uint64 {
	out := make([][]uint64, len(j.r.Matches))
	for i, m := range j.r.Matches {
		out[i] = m.Stages.Flat()
	}
	return out
}

// multiset compares matches as Flink's comparePatterns does: a multiset of
// matches, each a multiset of events compared by value.
func (j *judge) multiset() {
	x := &j.c.Expect
	if x.MatchesSeq == nil {
		if x.MatchCount != nil {
			j.matchCount()
		}
		return // the test asserts no match content
	}
	j.compareEntries("matches (multiset; events by value, order inside a match ignored)",
		j.entries(x.MatchesSeq, j.sortedKey), j.entries(j.gotMatches(), j.sortedKey), false)
}

// setOfMaps compares matches as a HashSet<Map<stage, List<Event>>>: a set of
// matches, the order of events inside a match kept.
func (j *judge) setOfMaps() {
	j.compareEntries("matches (set; events by value, order kept)",
		j.entries(j.c.Expect.MatchesSeq, j.orderedKey), j.entries(j.gotMatches(), j.orderedKey), true)
}

// ordered compares the operator's main output item by item; without an
// expected output sequence, the matches in emission order.
func (j *judge) ordered() {
	x := &j.c.Expect
	if x.OutputSequence != nil {
		j.output()
		return
	}
	exp, got := x.MatchesSeq, j.gotMatches()
	bad := differing(len(exp), len(got), func(i int) bool { return j.sameSeqs(exp[i], got[i]) })
	if len(bad) > 0 {
		j.failf("matches differ (exact order; ! marks differing items)\n%s", j.marked(j.seqLabels(exp), j.seqLabels(got), bad))
	}
}

// differing returns the indexes at which two lists of lengths ne and ng
// differ, given whether the items at an index both lists have are equal.
func differing(ne, ng int, same func(i int) bool) map[int]bool {
	bad := map[int]bool{}
	for i := range max(ne, ng) {
		if i >= ne || i >= ng || !same(i) {
			bad[i] = true
		}
	}
	return bad
}

// output compares Result.Output with expected_output_sequence.
func (j *judge) output() {
	exp, got := j.c.Expect.OutputSequence, j.r.Output
	el := make([]string, len(exp))
	for i, it := range exp {
		if it.Watermark != nil {
			el[i] = fmt.Sprintf("watermark %d", *it.Watermark)
		} else {
			el[i] = "match " + j.seqsLabel(it.MatchSeq)
		}
	}
	gl := make([]string, len(got))
	for i, it := range got {
		if it.Watermark != nil {
			gl[i] = fmt.Sprintf("watermark %d", *it.Watermark)
		} else {
			gl[i] = "match " + j.seqsLabel(it.Match)
		}
	}
	bad := differing(len(exp), len(got), func(i int) bool {
		e, g := exp[i], got[i]
		if e.Watermark != nil {
			return g.Watermark != nil && *g.Watermark == *e.Watermark
		}
		return g.Watermark == nil && j.sameSeqs(e.MatchSeq, g.Match)
	})
	if len(bad) > 0 {
		j.failf("output differs (exact order; ! marks differing items)\n%s", j.marked(el, gl, bad))
	}
}

// matchCount checks the number of matches against expected_match_count (or
// the number of expected matches).
func (j *judge) matchCount() {
	x := &j.c.Expect
	want := len(x.MatchesSeq)
	if x.MatchCount != nil {
		want = *x.MatchCount
	} else if x.MatchesSeq == nil {
		return
	}
	if got := len(j.r.Matches); got != want {
		j.failf("match count: expected %d, got %d: %s", want, got, j.seqLabels(j.gotMatches()))
	}
}

// timeouts compares the timed-out partial matches, with their timestamps,
// as a set (Flink's HashSet of (map, timestamp)).
func (j *judge) timeouts() {
	x := &j.c.Expect
	if x.TimeoutsSeq == nil {
		return
	}
	if x.TimeoutTimestamps != nil && len(x.TimeoutTimestamps) != len(x.TimeoutsSeq) {
		j.failf("bad case: %d expected timeouts but %d timestamps", len(x.TimeoutsSeq), len(x.TimeoutTimestamps))
		return
	}
	withTs := x.TimeoutTimestamps != nil
	mk := func(seqs []uint64, ts int64) entry {
		e := entry{key: j.orderedKey(seqs), label: j.seqsLabel(seqs)}
		if withTs {
			e.key += fmt.Sprintf("@%d", ts)
			e.label += fmt.Sprintf(" @%d", ts)
		}
		return e
	}
	var exp, got []entry
	for i, seqs := range x.TimeoutsSeq {
		var ts int64
		if withTs {
			ts = x.TimeoutTimestamps[i]
		}
		exp = append(exp, mk(seqs, ts))
	}
	for _, t := range j.r.Timeouts {
		got = append(got, mk(t.Stages.Flat(), t.Timestamp))
	}
	j.compareEntries("timeouts (set; events by value, with timestamps)", exp, got, true)
}

// perStage compares the events of the stages listed in
// expected_stage_map_seq, stage by stage and in order.
func (j *judge) perStage() {
	exp := j.c.Expect.StageMapSeq
	var stages []string
	for _, m := range exp {
		for s := range m {
			if !slices.Contains(stages, s) {
				stages = append(stages, s)
			}
		}
	}
	slices.Sort(stages)
	entryOf := func(m map[string][]uint64) entry {
		var k, l []string
		for _, s := range stages {
			k = append(k, s+"="+j.orderedKey(m[s]))
			l = append(l, s+": "+j.seqsLabel(m[s]))
		}
		return entry{key: strings.Join(k, "\n"), label: "{" + strings.Join(l, ", ") + "}"}
	}
	var ee, ge []entry
	for _, m := range exp {
		ee = append(ee, entryOf(m))
	}
	for _, m := range j.r.Matches {
		gm := map[string][]uint64{}
		for _, st := range m.Stages {
			gm[st.Stage] = st.Seqs
		}
		ge = append(ge, entryOf(gm))
	}
	j.compareEntries("matches per stage (events by value, order inside a stage kept)", ee, ge, false)
}

// keyOrder checks the matches and that each match lists its stages in
// pattern order.
func (j *judge) keyOrder() {
	j.multiset()
	order := leafNames(j.c.Input.Pattern.Stages, nil)
	for i, m := range j.r.Matches {
		names := m.Stages.Names()
		last := -1
		for _, n := range names {
			at := slices.Index(order, n)
			if at <= last {
				j.failf("match %d: stage keys %v are not in pattern stage order %v", i, names, order)
				break
			}
			last = at
		}
	}
}

// late compares the late events, in arrival order.
func (j *judge) late() {
	exp, got := j.c.Expect.LateEventsSeq, j.r.Late
	if !j.sameSeqs(exp, got) {
		j.failf("late events (arrival order): expected %s, got %s", j.seqsLabel(exp), j.seqsLabel(got))
	}
}

// sameSeqs reports whether two seq lists name the same events, in order,
// by seq or by value.
func (j *judge) sameSeqs(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] && j.valueKey(a[i]) != j.valueKey(b[i]) {
			return false
		}
	}
	return true
}

// entry is one compared item: key decides equality, label is shown.
type entry struct {
	key, label string
}

func (j *judge) entries(seqs [][]uint64, key func([]uint64) string) []entry {
	out := make([]entry, len(seqs))
	for i, s := range seqs {
		out[i] = entry{key: key(s), label: j.seqsLabel(s)}
	}
	return out
}

// compareEntries compares exp and got as multisets (or as sets, where
// duplicates collapse) and reports the differences under title.
func (j *judge) compareEntries(title string, exp, got []entry, set bool) {
	count := func(es []entry) map[string]int {
		m := map[string]int{}
		for _, e := range es {
			if !set || m[e.key] == 0 {
				m[e.key]++
			}
		}
		return m
	}
	ec, gc := count(exp), count(got)
	missing := surplus(exp, ec, gc)
	extra := surplus(got, gc, ec)
	if len(missing) == 0 && len(extra) == 0 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s differ: expected %d, got %d", title, len(exp), len(got))
	for _, e := range missing {
		fmt.Fprintf(&b, "\n    missing:    %s", e.label)
	}
	for _, e := range extra {
		fmt.Fprintf(&b, "\n    unexpected: %s", e.label)
	}
	b.WriteString("\n" + j.sideBySide(labels(exp), labels(got)))
	j.failf("%s", b.String())
}

// surplus returns the entries of es (counted in have) beyond what other
// counts, each key once per missing copy, in the order of es.
func surplus(es []entry, have, other map[string]int) []entry {
	left := map[string]int{}
	for k, n := range have {
		if d := n - other[k]; d > 0 {
			left[k] = d
		}
	}
	var out []entry
	for _, e := range es {
		if left[e.key] > 0 {
			left[e.key]--
			out = append(out, e)
		}
	}
	return out
}

func labels(es []entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.label
	}
	return out
}

// sideBySide lists the expected and the produced items, one per line.
func (j *judge) sideBySide(exp, got []string) string { return j.marked(exp, got, nil) }

// marked is sideBySide with the items at the indexes in bad marked "!".
func (j *judge) marked(exp, got []string, bad map[int]bool) string {
	var b strings.Builder
	b.WriteString("    expected:")
	writeList(&b, exp, bad)
	b.WriteString("\n    got:")
	writeList(&b, got, bad)
	return b.String()
}

func writeList(b *strings.Builder, items []string, bad map[int]bool) {
	if len(items) == 0 {
		b.WriteString(" (none)")
	}
	for i, s := range items {
		mark := " "
		if bad[i] {
			mark = "!"
		}
		fmt.Fprintf(b, "\n    %s %2d  %s", mark, i, s)
	}
}

// valueKey is the by-value identity of the event with seq s.
func (j *judge) valueKey(s uint64) string {
	if e, ok := j.evs[s]; ok {
		return e.valueKey()
	}
	return fmt.Sprintf("unknown seq %d", s)
}

// orderedKey identifies a list of events by value, order kept.
func (j *judge) orderedKey(seqs []uint64) string {
	keys := make([]string, len(seqs))
	for i, s := range seqs {
		keys[i] = j.valueKey(s)
	}
	return strings.Join(keys, "\n")
}

// sortedKey identifies a list of events by value, order ignored.
func (j *judge) sortedKey(seqs []uint64) string {
	keys := make([]string, len(seqs))
	for i, s := range seqs {
		keys[i] = j.valueKey(s)
	}
	slices.Sort(keys)
	return strings.Join(keys, "\n")
}

// seqsLabel shows a seq list with the event names: [1:start 4:foo 6:end].
func (j *judge) seqsLabel(seqs []uint64) string {
	parts := make([]string, len(seqs))
	for i, s := range seqs {
		name := "?"
		if e, ok := j.evs[s]; ok {
			name = e.Name
		}
		parts[i] = fmt.Sprintf("%d:%s", s, name)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func (j *judge) seqLabels(ms [][]uint64) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = j.seqsLabel(m)
	}
	return out
}

func deref(s *string, def string) string {
	if s == nil {
		return def
	}
	return *s
}
