package difftest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cepheus-cep/cepheus/internal/conformance"
)

// The aspects in which two results can differ, in the order Compare checks
// them.
const (
	AspectCrash        = "crash"         // Cepheus panicked, crashed or hung: never an agreement
	AspectError        = "error"         // one side failed, the other did not
	AspectMatches      = "matches"       // the multisets of (via, match) differ
	AspectMatchOrder   = "match order"   // same multiset, another emission order
	AspectTimeouts     = "timeouts"      // the multisets of (timed-out match, timestamp) differ
	AspectTimeoutOrder = "timeout order" // same multiset, another order
	AspectOutput       = "output"        // the operator's main output sequence differs
	AspectLate         = "late"          // the late events differ
)

// Diff is one aspect in which Flink's and Cepheus's results of a case
// differ.
type Diff struct {
	Aspect string
	Detail string
}

func (d Diff) String() string { return d.Aspect + ": " + d.Detail }

// Compare compares what Flink and Cepheus produced for one case and returns
// every aspect in which they differ; nil means they agree.
//
// Error messages are not compared, only whether each side failed; but a
// Cepheus error that is a panic, a crash or a timeout is always a
// difference (aspect crash). Whatever
// was emitted before a failure is compared like any output. Matches are
// compared with their via, stage by stage and in stage order, first as a
// multiset and then, when the multisets agree, in emission order. (Both
// runners list the matches an nfa_harness step releases by advancing time
// before those of processing the event, so that order is comparable too.)
// Timeouts are compared the same way, with their timestamps; the
// operator's main output and the late events in exact order.
func Compare(flink, cepheus *conformance.Result) []Diff {
	var diffs []Diff
	if crashed(cepheus) {
		diffs = append(diffs, Diff{AspectCrash, fmt.Sprintf("cepheus: %s; flink: %s", errText(cepheus), errText(flink))})
	}
	if len(flink.Rules) > 0 || len(cepheus.Rules) > 0 {
		return append(diffs, compareRules(flink, cepheus)...)
	}
	switch {
	case (flink.Error == nil) != (cepheus.Error == nil):
		diffs = append(diffs, Diff{AspectError, fmt.Sprintf("flink: %s; cepheus: %s", errText(flink), errText(cepheus))})
	case flink.Error != nil && !crashed(cepheus) && !sameErrorClass(flink, cepheus):
		diffs = append(diffs, Diff{AspectError, fmt.Sprintf("flink: %s; cepheus: %s", errClassText(flink), errClassText(cepheus))})
	}
	fm, cm := matchKeys(flink.Matches), matchKeys(cepheus.Matches)
	diffs = appendListDiff(diffs, AspectMatches, AspectMatchOrder, fm, cm)
	ft, ct := timeoutKeys(flink.Timeouts), timeoutKeys(cepheus.Timeouts)
	diffs = appendListDiff(diffs, AspectTimeouts, AspectTimeoutOrder, ft, ct)
	if fo, co := outputKeys(flink.Output), outputKeys(cepheus.Output); !slices.Equal(fo, co) {
		diffs = append(diffs, Diff{AspectOutput, seqDiff(fo, co)})
	}
	if !slices.Equal(flink.Late, cepheus.Late) {
		diffs = append(diffs, Diff{AspectLate, fmt.Sprintf("flink %v, cepheus %v", flink.Late, cepheus.Late)})
	}
	return diffs
}

// compareRules compares a case with several rules rule by rule; each
// Diff's detail names its rule ("rule 2: ...").
func compareRules(flink, cepheus *conformance.Result) []Diff {
	var diffs []Diff
	if (flink.Error == nil) != (cepheus.Error == nil) || len(flink.Rules) != len(cepheus.Rules) {
		return append(diffs, Diff{AspectError, fmt.Sprintf("flink: %s, %d rules; cepheus: %s, %d rules",
			errText(flink), len(flink.Rules), errText(cepheus), len(cepheus.Rules))})
	}
	for k := range flink.Rules {
		for _, d := range Compare(flink.Rules[k], cepheus.Rules[k]) {
			d.Detail = fmt.Sprintf("rule %d: %s", k, d.Detail)
			diffs = append(diffs, d)
		}
	}
	return diffs
}

// sameErrorClass says whether two failed results failed alike: both
// rejected the pattern, or both failed while processing, at the same step.
func sameErrorClass(a, b *conformance.Result) bool {
	if a.ErrorClass != b.ErrorClass {
		return false
	}
	if a.ErrorClass == conformance.ErrorRun && a.ErrorStep != nil && b.ErrorStep != nil {
		return *a.ErrorStep == *b.ErrorStep
	}
	return true
}

func errClassText(r *conformance.Result) string {
	s := r.ErrorClass + " error"
	if r.ErrorStep != nil {
		s += fmt.Sprintf(" at step %d", *r.ErrorStep)
	}
	return s + " " + errText(r)
}

// crashed says whether Cepheus's error is a panic (recovered by the
// conformance driver), a crash of the worker process, or a case that did
// not end in time: failures of Cepheus itself, which Flink failing too
// does not excuse.
func crashed(r *conformance.Result) bool {
	if r.Error == nil {
		return false
	}
	for _, p := range []string{"panic:", "cepheus crashed:", "timeout:"} {
		if strings.HasPrefix(*r.Error, p) {
			return true
		}
	}
	return false
}

// timedOut says whether r's run did not end within the runner's limit.
func timedOut(r *conformance.Result) bool {
	return r != nil && r.Error != nil && strings.HasPrefix(*r.Error, "timeout:")
}

func errText(r *conformance.Result) string {
	if r.Error == nil {
		return "no error"
	}
	msg := *r.Error
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return strconv.Quote(msg)
}

// appendListDiff compares two lists first as multisets (aspect set) and,
// when those agree, in order (aspect order).
func appendListDiff(diffs []Diff, set, order string, f, c []string) []Diff {
	onlyF, onlyC := multisetMinus(f, c), multisetMinus(c, f)
	switch {
	case len(onlyF) > 0 || len(onlyC) > 0:
		return append(diffs, Diff{set, fmt.Sprintf("only flink %s; only cepheus %s", fmtList(onlyF), fmtList(onlyC))})
	case !slices.Equal(f, c):
		return append(diffs, Diff{order, seqDiff(f, c)})
	}
	return diffs
}

// multisetMinus returns the elements of a not matched by an element of b,
// in a's order.
func multisetMinus(a, b []string) []string {
	var out []string
	for _, i := range onlyItems(a, b) {
		out = append(out, a[i])
	}
	return out
}

func fmtList(xs []string) string {
	if len(xs) == 0 {
		return "[]"
	}
	return "[" + strings.Join(xs, ", ") + "]"
}

// seqDiff describes where two sequences start to differ.
func seqDiff(f, c []string) string {
	i := 0
	for i < len(f) && i < len(c) && f[i] == c[i] {
		i++
	}
	return fmt.Sprintf("differ from item %d: flink %s; cepheus %s", i, fmtList(f[i:]), fmtList(c[i:]))
}

// stagesKey writes a match as {stage:[seqs] ...} in its stage order.
func stagesKey(s conformance.StageSeqs) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, st := range s {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(st.Stage)
		b.WriteByte(':')
		b.WriteString(seqsKey(st.Seqs))
	}
	b.WriteByte('}')
	return b.String()
}

func seqsKey(seqs []uint64) string {
	parts := make([]string, len(seqs))
	for i, s := range seqs {
		parts[i] = strconv.FormatUint(s, 10)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// matchKeys writes each match as via{stages}, then " step N" and " ts T"
// when the result gives them: <via>{<stage>:[seqs] ...}[ step N][ ts T].
func matchKeys(ms []conformance.MatchResult) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		k := m.Via + stagesKey(m.Stages)
		if m.Step != nil {
			k += " step " + strconv.Itoa(*m.Step)
		}
		if m.Timestamp != nil {
			k += " ts " + strconv.FormatInt(*m.Timestamp, 10)
		}
		out[i] = k
	}
	return out
}

// timeoutKeys writes each timeout as {stages}@timestamp[ step N].
func timeoutKeys(ts []conformance.TimeoutResult) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		k := stagesKey(t.Stages) + "@" + strconv.FormatInt(t.Timestamp, 10)
		if t.Step != nil {
			k += " step " + strconv.Itoa(*t.Step)
		}
		out[i] = k
	}
	return out
}

func outputKeys(items []conformance.OutputItem) []string {
	out := make([]string, len(items))
	for i, it := range items {
		if it.Watermark != nil {
			out[i] = "wm " + strconv.FormatInt(*it.Watermark, 10)
		} else {
			out[i] = "match " + seqsKey(it.Match)
		}
	}
	return out
}
