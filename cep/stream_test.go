package cep

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/runtime"
)

// The tests of Engine.Stream compare runs instead of hard-coding answers:
// one generated log, reordered within the out-of-orderness bound, run at
// several parallelisms and on both backends, stopped at random
// checkpoints and resumed with another layout, must give the alerts, late
// events and dead letters of Engine.Run over the log, exactly once.

// streamBound is the out-of-orderness bound of the tests' engines and
// streamShift the most a shuffle delays a timestamp: comfortably less, so
// that no event of a shuffled log is late (see shuffleLog).
const (
	streamBound = 10 * time.Second
	streamShift = 4000 // milliseconds
)

// streamInterval is the checkpoint interval of the tests' runs: short, so
// that a run of a few thousand events takes several checkpoints.
const streamInterval = 5 * time.Millisecond

func loadCardsRuleset(t testing.TB) *Ruleset {
	t.Helper()
	return loadCardsRulesetWith(t, "")
}

// captureTimeoutRule, added to cards.cep by the metamorphic test: a rule
// with a timeout block, whose timed-out alerts come out at time advances
// (an auth of 100 or more not captured within 20 minutes, one in eight of
// the generated log's, and those still open at its end) and must come out
// the same through every layout, restart and backend, as matches do.
const captureTimeoutRule = `
rule capture_late {
  key card_id
  pattern {
    begin auth where type == "auth" && amount >= 100
    followedBy capture where type == "capture" && amount == auth.amount
    within 20m
  }
  skip pastLastEvent
  timeout {
    severity low
    emit {
      amount: auth.amount
    }
  }
}
`

// loadCardsRulesetWith compiles cards.cep with extra appended to it.
func loadCardsRulesetWith(t testing.TB, extra string) *Ruleset {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "rulesets", "cards.cep"))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := CompileRuleset("cards.cep", append(src, extra...))
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func newStreamEngine(t *testing.T, rs *Ruleset, watermarkEvery int, opts ...Option) *Engine {
	t.Helper()
	e, err := New(append([]Option{WithRuleset(rs), WithOutOfOrderness(streamBound), WithWatermarkEvery(watermarkEvery)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// logLayout says where the records of a log are in one input: its files
// (partitions, in name order) and, for each, the log index of each of its
// lines.
type logLayout struct {
	files []string
	from  [][]int // from[p][l-1]: the log index of line l of file p
}

func singleLayout(name string, from []int) logLayout {
	return logLayout{files: []string{name}, from: [][]int{from}}
}

// identityLayout is the layout of the log itself, in one file.
func identityLayout(n int) logLayout {
	from := make([]int, n)
	for i := range from {
		from[i] = i
	}
	return singleLayout("log", from)
}

func (l logLayout) fromLine(p int, line int64) (int64, error) {
	if p < 0 || p >= len(l.from) || line < 1 || line > int64(len(l.from[p])) {
		return 0, fmt.Errorf("line %d of partition %d is not in the input", line, p)
	}
	return int64(l.from[p][line-1]) + 1, nil
}

// streamOutputs are the outputs of a run with every line number made the
// log's: what a reordering or a split of the log must not change.
type streamOutputs struct {
	alerts []string            // normalized alert lines, sorted
	ids    []string            // alert ids, sorted
	perKey map[string][]string // alert ids of each rule and key (and kind), in output order
	late   []string            // normalized late lines, sorted
	dead   []string            // "line reason data" of each dead letter, sorted
}

// lineField is a "line" field of an event, with its "partition" when not
// the first (event.SeqOf): the line of an alert's matched event, of a
// late event (twice: the late line's and its event's) or of a dead
// letter. The encoders write it first in its object, as a number.
var lineField = regexp.MustCompile(`"line":([0-9]+)(?:,"partition":([0-9]+))?`)

// alertHead is the start of an alert line ([AlertEncoder]): its id, its
// rule and its key object (flat: field to value).
var alertHead = regexp.MustCompile(`^\{"alert_id":"([0-9a-f]+)","rule":"([^"]+)".*?"key":(\{[^{}]*\})`)

// normalizeLine replaces every "line" field of a JSON line (with its
// "partition") by the log's line.
func normalizeLine(line string, l logLayout) (string, error) {
	var err error
	out := lineField.ReplaceAllStringFunc(line, func(f string) string {
		m := lineField.FindStringSubmatch(f)
		ln, perr := strconv.ParseInt(m[1], 10, 64)
		p := 0
		if m[2] != "" {
			p, _ = strconv.Atoi(m[2])
		}
		n, lerr := l.fromLine(p, ln)
		if err == nil {
			err = cmp.Or(perr, lerr)
		}
		return `"line":` + strconv.FormatInt(n, 10)
	})
	if err != nil {
		return "", fmt.Errorf("%w: %.200q", err, line)
	}
	return out, nil
}

// makeOutputs normalizes the lines of a run's outputs, alerts in the
// order they were written.
func makeOutputs(t *testing.T, l logLayout, alerts, late, dead []string) streamOutputs {
	t.Helper()
	o := streamOutputs{perKey: map[string][]string{}}
	for _, line := range alerts {
		m := alertHead.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("not an alert: %.200q", line)
		}
		n, err := normalizeLine(line, l)
		if err != nil {
			t.Fatalf("alert: %v", err)
		}
		k := m[2] + " " + m[3]
		if strings.Contains(line, `"timed_out":true`) {
			// A key's timed-out alerts keep their order, and its
			// matches theirs; the two interleave as time advanced
			// (docs/rules.md, "Timed-out partial matches").
			k += " (timed out)"
		}
		o.alerts = append(o.alerts, n)
		o.ids = append(o.ids, m[1])
		o.perKey[k] = append(o.perKey[k], m[1])
	}
	for _, line := range late {
		n, err := normalizeLine(line, l)
		if err != nil {
			t.Fatalf("late event: %v", err)
		}
		o.late = append(o.late, n)
	}
	for _, line := range dead {
		var d struct {
			File         string
			Line         int64
			Reason, Data string
		}
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatalf("dead letter: %v: %q", err, line)
		}
		p := 0
		if len(l.files) > 1 {
			if p = slices.Index(l.files, d.File); p < 0 {
				t.Fatalf("dead letter of file %q, not a partition of %v: %q", d.File, l.files, line)
			}
		}
		n, err := l.fromLine(p, d.Line)
		if err != nil {
			t.Fatalf("dead letter: %v: %q", err, line)
		}
		o.dead = append(o.dead, fmt.Sprintf("%d %s %q", n, d.Reason, d.Data))
	}
	slices.Sort(o.alerts)
	slices.Sort(o.ids)
	slices.Sort(o.late)
	slices.Sort(o.dead)
	return o
}

// jsonLines returns the lines of b, without their newlines.
func jsonLines(b []byte) []string {
	s := strings.TrimSuffix(string(b), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// batchRun is Engine.Run over lines: the reference.
func batchRun(t *testing.T, rs *Ruleset, watermarkEvery int, lines []string, opts ...Option) (*Summary, []string, []string, []string) {
	t.Helper()
	var alerts, late, dead bytes.Buffer
	dl := NewDeadLetterWriter(&dead)
	e, err := New(append([]Option{WithRuleset(rs), WithOutOfOrderness(streamBound), WithWatermarkEvery(watermarkEvery),
		WithAlerts(&alerts), WithLate(&late), WithDeadLetters(dl)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	src, err := NewEventSource(strings.NewReader(strings.Join(lines, "\n")+"\n"), "input")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := e.Run(context.Background(), src)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := dl.Close(); err != nil {
		t.Fatal(err)
	}
	return sum, jsonLines(alerts.Bytes()), jsonLines(late.Bytes()), jsonLines(dead.Bytes())
}

// multisetDiff describes how got differs from want, sorted multisets of
// lines: the first few lines missing and extra.
func multisetDiff(want, got []string) string {
	count := map[string]int{}
	for _, s := range want {
		count[s]++
	}
	for _, s := range got {
		count[s]--
	}
	var missing, extra []string
	for _, s := range slices.Sorted(maps.Keys(count)) {
		for n := count[s]; n > 0; n-- {
			missing = append(missing, s)
		}
		for n := count[s]; n < 0; n++ {
			extra = append(extra, s)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d lines, want %d: %d missing, %d extra", len(got), len(want), len(missing), len(extra))
	for i, s := range missing[:min(len(missing), 3)] {
		fmt.Fprintf(&b, "\n  missing %d: %.400s", i, s)
	}
	for i, s := range extra[:min(len(extra), 3)] {
		fmt.Fprintf(&b, "\n  extra %d: %.400s", i, s)
	}
	return b.String()
}

// compareOutputs checks that got has the outputs of want: the same alert
// ids and alert lines, each rule and key's alerts in the same order (its
// matches, and its timed-out partial matches), the same late events and
// the same dead letters.
func compareOutputs(t *testing.T, what string, want, got streamOutputs) {
	t.Helper()
	if !slices.Equal(got.ids, want.ids) {
		t.Errorf("%s: alert ids: %s", what, multisetDiff(want.ids, got.ids))
	} else if !slices.Equal(got.alerts, want.alerts) {
		t.Errorf("%s: alert lines: %s", what, multisetDiff(want.alerts, got.alerts))
	}
	if slices.Equal(got.ids, want.ids) {
		for k, ids := range want.perKey {
			if !slices.Equal(got.perKey[k], ids) {
				t.Errorf("%s: the alerts of %s in another order: %v, want %v", what, k, got.perKey[k], ids)
				break
			}
		}
	}
	if !slices.Equal(got.late, want.late) {
		t.Errorf("%s: late events: %s", what, multisetDiff(want.late, got.late))
	}
	if !slices.Equal(got.dead, want.dead) {
		t.Errorf("%s: dead letters: %s", what, multisetDiff(want.dead, got.dead))
	}
}

// compareSummary checks the counters of a stream's last run against those
// of Engine.Run over the same input.
func compareSummary(t *testing.T, what string, want *Summary, got *StreamResult) {
	t.Helper()
	w := [6]int64{want.Records, want.Decoded, want.Dead, want.Ahead, want.Late, want.Alerts}
	g := [6]int64{got.Records, got.Decoded, got.Dead, got.Ahead, got.Late, got.Alerts}
	if g != w {
		t.Errorf("%s: records, decoded, dead, ahead, late, alerts = %v, Engine.Run's %v", what, g, w)
	}
	if got.Watermark != want.Watermark {
		t.Errorf("%s: watermark %v, Engine.Run's %v", what, got.Watermark, want.Watermark)
	}
	if got.Stats.Records != want.Records || got.Stats.Alerts != want.Alerts || got.Stats.Late != want.Late {
		t.Errorf("%s: stats records %d, alerts %d, late %d; want %d, %d, %d", what,
			got.Stats.Records, got.Stats.Alerts, got.Stats.Late, want.Records, want.Alerts, want.Late)
	}
	if len(got.Rules) != len(want.Rules) {
		t.Fatalf("%s: %d rule summaries, want %d", what, len(got.Rules), len(want.Rules))
	}
	for i, wr := range want.Rules {
		gr := got.Rules[i]
		// ConditionErrors counts on the shared *rules.Rule, over every
		// engine: not a counter of one run.
		gr.ConditionErrors, wr.ConditionErrors = 0, 0
		if !reflect.DeepEqual(gr, wr) {
			t.Errorf("%s: rule summary %+v, Engine.Run's %+v", what, gr, wr)
		}
	}
}

// outDirs are the directories of one stream: its state and outputs.
type outDirs struct{ state, alerts, late, dead string }

func newOutDirs(t *testing.T) outDirs {
	root := t.TempDir()
	d := outDirs{
		state: filepath.Join(root, "state"), alerts: filepath.Join(root, "alerts"),
		late: filepath.Join(root, "late"), dead: filepath.Join(root, "dead"),
	}
	for _, dir := range []string{d.alerts, d.late, d.dead} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// outDirsOf returns the directories of cfg.
func outDirsOf(cfg StreamConfig) outDirs {
	return outDirs{state: cfg.StateDir, alerts: cfg.AlertsDir, late: cfg.LateDir, dead: cfg.DeadDir}
}

func (d outDirs) config(events string) StreamConfig {
	return StreamConfig{
		Events: events, StateDir: d.state, AlertsDir: d.alerts, LateDir: d.late, DeadDir: d.dead,
		CheckpointInterval: streamInterval,
	}
}

var partFile = regexp.MustCompile(`^(alerts|late|dead)-(\d+)-(\d+)\.jsonl$`)

// committedParts returns the lines of the committed part files of prefix
// in dir, in checkpoint order (subtask order within a checkpoint). Every
// file of dir must be a committed part file: once a run has returned,
// nothing is in progress or pending.
func committedParts(t *testing.T, dir, prefix string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	type part struct {
		sub, chk int64
		name     string
	}
	var parts []part
	for _, e := range entries {
		if e.Name() == runtime.OutputIDFile {
			continue // the directory's id, not output
		}
		m := partFile.FindStringSubmatch(e.Name())
		if m == nil {
			t.Errorf("%s: %s is not a committed part file", dir, e.Name())
			continue
		}
		if m[1] != prefix {
			continue
		}
		sub, _ := strconv.ParseInt(m[2], 10, 64)
		chk, _ := strconv.ParseInt(m[3], 10, 64)
		parts = append(parts, part{sub, chk, e.Name()})
	}
	slices.SortFunc(parts, func(a, b part) int { return cmp.Or(cmp.Compare(a.chk, b.chk), cmp.Compare(a.sub, b.sub)) })
	var lines []string
	for _, p := range parts {
		b, err := os.ReadFile(filepath.Join(dir, p.name))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 || b[len(b)-1] != '\n' {
			t.Errorf("%s: %s is empty or ends in a partial line", dir, p.name)
		}
		lines = append(lines, jsonLines(b)...)
	}
	return lines
}

// outputs reads the stream's committed outputs.
func (d outDirs) outputs(t *testing.T, l logLayout) streamOutputs {
	t.Helper()
	return makeOutputs(t, l, committedParts(t, d.alerts, "alerts"), committedParts(t, d.late, "late"), committedParts(t, d.dead, "dead"))
}

// streamLeg is one Stream of a chain over one state directory: its
// parallelism and backend, and the checkpoint after which it stops,
// counted from the one it resumes from (0: it runs to the end); a leg
// that has read nothing yet goes on to the next checkpoint. A leg with
// cancel set is cancelled instead, at its first progress report after it
// read something.
type streamLeg struct {
	parallelism int
	backend     Backend
	stopAfter   int64
	cancel      bool
	aggWorkers  int // StreamConfig.AggregateWorkers
}

func (l streamLeg) String() string {
	if l.aggWorkers != 0 {
		w := l
		w.aggWorkers = 0
		return fmt.Sprintf("%v/agg%d", w, l.aggWorkers)
	}
	if l.cancel {
		return fmt.Sprintf("p%d/%s/cancel", l.parallelism, l.backend)
	}
	return fmt.Sprintf("p%d/%s/stop%d", l.parallelism, l.backend, l.stopAfter)
}

// runLegs runs the legs one after another over cfg's state directory,
// each resuming from the checkpoint the one before ended with, until one
// reads the input to its end; then one more Stream, which must find the
// run finished and change nothing. It returns the results of the legs it
// ran.
func runLegs(t *testing.T, e *Engine, cfg StreamConfig, legs []streamLeg) []*StreamResult {
	t.Helper()
	// A run stopped while the far-ahead check holds events takes no
	// final checkpoint (its events belong to none): the next resumes from
	// the last one taken, perhaps the one before the run, and reads them
	// again; its sinks' open transactions stay until the next run's
	// recovery deletes them.
	ahead := e.cfg.input.MaxAhead > 0
	var results []*StreamResult
	var from int64    // the checkpoint the next leg resumes from
	var records int64 // the records the legs before read
	for i, l := range legs {
		c := cfg
		c.Parallelism, c.Backend, c.AggregateWorkers = l.parallelism, l.backend, l.aggWorkers
		// The progress reports come at every tick, the last one at the
		// end of the run; the hook runs on the same goroutine.
		ctx, cancel := context.WithCancel(context.Background())
		var last StreamProgress
		c.Progress, c.ProgressInterval = func(p StreamProgress) {
			last = p
			if l.cancel && p.RunRecords > 0 {
				cancel()
			}
		}, time.Nanosecond
		if l.stopAfter > 0 {
			stopAt := from + l.stopAfter
			c.hooks.afterCommit = func(id int64) bool { return id >= stopAt && last.RunRecords > 0 }
		}
		res, err := e.Stream(ctx, c)
		cancel()
		if l.cancel && errors.Is(err, context.Canceled) && res != nil && !res.Finished {
			err = nil // stopped, as asked
		}
		if err != nil {
			t.Fatalf("leg %d (%v): Stream: %v", i, l, err)
		}
		results = append(results, res)
		if res.Restored != from || res.AlreadyFinished {
			t.Fatalf("leg %d (%v): restored %d (already finished %v), want checkpoint %d", i, l, res.Restored, res.AlreadyFinished, from)
		}
		if res.Stats.LastCheckpoint < from || !ahead && res.Stats.LastCheckpoint == from {
			t.Fatalf("leg %d (%v): last checkpoint %d, not after the restored %d", i, l, res.Stats.LastCheckpoint, from)
		}
		if l.stopAfter > 0 && !res.Finished && !ahead && res.Stats.LastCheckpoint <= from+l.stopAfter {
			t.Fatalf("leg %d (%v): stopped at checkpoint %d: no final checkpoint after the stop at %d", i, l, res.Stats.LastCheckpoint, from+l.stopAfter)
		}
		if l.stopAfter == 0 && !l.cancel && !res.Finished {
			t.Fatalf("leg %d (%v): not finished", i, l)
		}
		// The run read on from where the checkpoint it resumed from had
		// read, and processed everything it read.
		restored := res.Stats.Records - last.RunRecords
		if restored > records || !ahead && restored != records || last.Records != res.Stats.Records || last.Queued != 0 ||
			res.Stats.RunRecords != last.RunRecords {
			t.Errorf("leg %d (%v): the final progress report has %d records, %d of this run, %d queued; the result %d records, %d of this run; %d before it",
				i, l, last.Records, last.RunRecords, last.Queued, res.Stats.Records, res.Stats.RunRecords, records)
		}
		// Whatever stopped it, the run committed its outputs before it
		// returned: nothing is left in progress or pending.
		for _, f := range listOutputFiles(t, cfg.AlertsDir, cfg.LateDir, cfg.DeadDir) {
			if name, _, _ := strings.Cut(filepath.Base(f), " "); !partFile.MatchString(name) && !ahead {
				t.Errorf("leg %d (%v): %s left behind", i, l, f)
			}
		}
		from, records = res.Stats.LastCheckpoint, res.Stats.Records
		if res.Finished {
			break
		}
	}
	if !results[len(results)-1].Finished {
		t.Fatalf("no leg of %v read the input to its end", legs)
	}
	before := listOutputFiles(t, cfg.AlertsDir, cfg.LateDir, cfg.DeadDir)
	c := cfg
	c.Parallelism, c.Backend = 1, BackendMemory
	res, err := e.Stream(context.Background(), c)
	if err != nil {
		t.Fatalf("Stream after the end: %v", err)
	}
	if !res.AlreadyFinished || !res.Finished || res.Restored != from {
		t.Errorf("Stream after the end: already finished %v, finished %v, restored %d; want true, true, %d",
			res.AlreadyFinished, res.Finished, res.Restored, from)
	}
	if after := listOutputFiles(t, cfg.AlertsDir, cfg.LateDir, cfg.DeadDir); !slices.Equal(after, before) {
		t.Errorf("Stream after the end changed the outputs: %v, before %v", after, before)
	}
	return results
}

// cumulativeRecords returns the records read by the end of each run.
func cumulativeRecords(res []*StreamResult) []int64 {
	var out []int64
	for _, r := range res {
		out = append(out, r.Stats.Records)
	}
	return out
}

// listOutputFiles returns the names and sizes of the files in dirs.
func listOutputFiles(t *testing.T, dirs ...string) []string {
	t.Helper()
	var out []string
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.Name() == runtime.OutputIDFile {
				continue // the directory's id, not output
			}
			fi, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%s %d", filepath.Join(dir, e.Name()), fi.Size()))
		}
	}
	return out
}

// randomLegs returns 2 to 4 legs of random layouts, each differing from
// the one before in parallelism, backend or both, every one but the last
// stopping at its first or second checkpoint (a run of the tests' inputs
// takes only a few: a checkpoint writes and syncs files).
func randomLegs(rnd *rand.Rand) []streamLeg {
	ps := []int{1, 2, 4}
	bs := []Backend{BackendMemory, BackendPebble}
	n := 2 + rnd.IntN(3)
	var legs []streamLeg
	for i := range n {
		l := streamLeg{parallelism: ps[rnd.IntN(len(ps))], backend: bs[rnd.IntN(len(bs))]}
		for i > 0 && l.parallelism == legs[i-1].parallelism && l.backend == legs[i-1].backend {
			l = streamLeg{parallelism: ps[rnd.IntN(len(ps))], backend: bs[rnd.IntN(len(bs))]}
		}
		if i < n-1 {
			l.stopAfter = 1 + int64(rnd.IntN(2))
		}
		legs = append(legs, l)
	}
	return legs
}

// metamorphicLog is a log of TestStreamMetamorphic and Engine.Run's
// outputs and summary over it, in its order.
type metamorphicLog struct {
	rs   *Ruleset
	opts []Option // of the engines, after the ruleset and the bound
	log  []logRecord
	want streamOutputs
	sum  *Summary
	// deadReason is the reason of each dead letter, by its line in the
	// log.
	deadReason map[int64]string
}

// newMetamorphicLog runs Engine.Run over log with a watermark every 16
// events and checks that the log exercises what the tests claim to: every
// rule alerts, some events are late, some records are dead.
func newMetamorphicLog(t *testing.T, rs *Ruleset, log []logRecord, opts ...Option) *metamorphicLog {
	t.Helper()
	m := &metamorphicLog{rs: rs, opts: opts, log: log}
	base := m.lines()
	sum, alerts, late, dead := batchRun(t, rs, 16, base, opts...)
	m.want, m.sum = makeOutputs(t, identityLayout(len(base)), alerts, late, dead), sum
	m.deadReason = map[int64]string{}
	for _, line := range dead {
		var d struct {
			Line   int64
			Reason string
		}
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatal(err)
		}
		m.deadReason[d.Line] = d.Reason
	}
	for i, r := range log {
		if _, ok := m.deadReason[int64(i+1)]; ok != r.dead {
			t.Fatalf("line %d (%.100q) is a dead letter: %v, want %v", i+1, r.line, ok, r.dead)
		}
	}
	if line, reason := m.firstDead(identityLayout(len(base))); sum.FirstDeadLine != line || sum.FirstDeadReason != reason {
		t.Fatalf("Engine.Run: first dead letter at line %d (%q), want line %d (%q)", sum.FirstDeadLine, sum.FirstDeadReason, line, reason)
	}
	for _, r := range sum.Rules {
		if r.Alerts == 0 {
			t.Fatalf("rule %s has no alert over the generated log", r.Rule)
		}
	}
	if sum.Late == 0 || sum.Dead == 0 || sum.Late != int64(len(m.want.late)) || sum.Dead != int64(len(m.want.dead)) {
		t.Fatalf("generated log: %d late (%d lines), %d dead (%d lines): want some of each", sum.Late, len(m.want.late), sum.Dead, len(m.want.dead))
	}
	t.Logf("log: %d records, %d alerts, %d late, %d dead (%d too far ahead)", sum.Records, sum.Alerts, sum.Late, sum.Dead, sum.Ahead)
	return m
}

func (m *metamorphicLog) lines() []string {
	lines := make([]string, len(m.log))
	for i, r := range m.log {
		lines[i] = r.line
	}
	return lines
}

// engine returns a stream engine of the log's options.
func (m *metamorphicLog) engine(t *testing.T, watermarkEvery int) *Engine {
	return newStreamEngine(t, m.rs, watermarkEvery, m.opts...)
}

// firstDead returns the line (in its partition) and the reason of the
// first dead letter of an input laid out as l.
func (m *metamorphicLog) firstDead(l logLayout) (int64, string) {
	for _, f := range l.from {
		for i, j := range f {
			if m.log[j].dead {
				return int64(i + 1), m.deadReason[int64(j+1)]
			}
		}
	}
	return 0, ""
}

// shuffledFile writes a shuffle of the log to a new file named name
// (gzip-compressed when gz is set) and returns its path and layout.
func (m *metamorphicLog) shuffledFile(t *testing.T, rnd *rand.Rand, name string, gz bool) (string, logLayout) {
	t.Helper()
	lines, from := shuffleLog(rnd, m.log, streamShift)
	path := filepath.Join(t.TempDir(), name)
	writeLogFile(t, path, lines, gz)
	return path, singleLayout(name, from)
}

// checkStream checks a stream's outputs and the counters of its last run
// against the log's.
func (m *metamorphicLog) checkStream(t *testing.T, name string, d outDirs, l logLayout, last *StreamResult) {
	t.Helper()
	compareOutputs(t, name, m.want, d.outputs(t, l))
	compareSummary(t, name, m.sum, last)
	if line, reason := m.firstDead(l); last.FirstDeadLine != line || last.FirstDeadReason != reason {
		t.Errorf("%s: first dead letter at line %d (%q), want line %d (%q)", name, last.FirstDeadLine, last.FirstDeadReason, line, reason)
	}
}

// TestStreamMetamorphic runs one log of card events through Engine.Stream
// in many ways: reordered within the out-of-orderness bound (no event
// becoming late), at parallelism 1, 2 and 4 on the memory and the Pebble
// backend, stopped at random checkpoints and resumed with another
// parallelism and backend, as one file, a directory of partitions and a
// gzip file resumed in the middle, with watermarks at several cadences,
// checkpoints by time and by records, and a far-ahead check.
// Every way must give Engine.Run's alerts over the log (the same ids and
// lines, and each rule and key's in the same order), its late events and
// its dead letters, each once, and its counters.
func TestStreamMetamorphic(t *testing.T) {
	seed := streamSeed(t)
	rs := loadCardsRulesetWith(t, captureTimeoutRule)
	m := newMetamorphicLog(t, rs, genCardLog(newStreamRand(seed, "log"), logConfig{records: 5000, padded: true}), logProfiles(t, rs))
	// Neither the watermark cadence nor a shuffle within the bound
	// changes what Engine.Run finds in this log: the reference of every
	// stream below, whatever its cadence and shuffle.
	{
		lines, from := shuffleLog(newStreamRand(seed, "batch"), m.log, streamShift)
		sum, alerts, late, dead := batchRun(t, rs, 1, lines, m.opts...)
		compareOutputs(t, "Engine.Run over a shuffle with a watermark after every event", m.want, makeOutputs(t, singleLayout("shuffled", from), alerts, late, dead))
		compareSummary(t, "Engine.Run over a shuffle", m.sum, &StreamResult{Summary: *sum, Stats: StreamStats{Records: sum.Records, Alerts: sum.Alerts, Late: sum.Late}})
	}
	if t.Failed() {
		t.FailNow()
	}

	t.Run("layouts", func(t *testing.T) {
		// Every parallelism and backend, once through, each over a
		// shuffle of its own.
		for i, p := range []int{1, 2, 4} {
			for j, b := range []Backend{BackendMemory, BackendPebble} {
				every := []int{4, 16, 64}[(i+j)%3]
				name := fmt.Sprintf("p%d-%s-every%d", p, b, every)
				path, layout := m.shuffledFile(t, newStreamRand(seed, "layouts/"+name), "events.jsonl", false)
				d := newOutDirs(t)
				res := runLegs(t, m.engine(t, every), d.config(path), []streamLeg{{parallelism: p, backend: b}})
				last := res[len(res)-1]
				m.checkStream(t, name, d, layout, last)
			}
		}
	})

	t.Run("restarts", func(t *testing.T) {
		// Chains of runs over one state directory, each stopped at a
		// random checkpoint and resumed with another layout (the first
		// chain's layouts are chosen). The last two chains also take a
		// checkpoint every 500 to 1,200 records, between two records of a
		// reader's batch; the last one's runs are cancelled instead (the
		// checkpoints the coordinator completes while it waits to send a
		// record barrier do not call afterCommit).
		const every = 16
		e := m.engine(t, every)
		stops := 0
		for c := range 4 {
			rnd := newStreamRand(seed, fmt.Sprintf("restarts/%d", c))
			path, layout := m.shuffledFile(t, rnd, "events.jsonl", false)
			legs := randomLegs(rnd)
			cfg := newOutDirs(t).config(path)
			if c >= 2 {
				cfg.CheckpointRecords = 500 + rnd.Int64N(700)
			}
			if c == 3 {
				for i := range legs[:len(legs)-1] {
					legs[i].stopAfter, legs[i].cancel = 0, true
				}
			}
			if c == 0 {
				// Every kind of restore at least once: the same layout
				// (each subtask its own store back), another parallelism
				// on Pebble, Pebble to memory, memory to Pebble.
				// Cancelled as soon as they read something, so that the
				// input lasts for all of them.
				legs = []streamLeg{
					{parallelism: 2, backend: BackendPebble, cancel: true},
					{parallelism: 2, backend: BackendPebble, cancel: true},
					{parallelism: 4, backend: BackendPebble, cancel: true},
					{parallelism: 1, backend: BackendMemory, cancel: true},
					{parallelism: 1, backend: BackendMemory, cancel: true},
					{parallelism: 3, backend: BackendPebble},
				}
			}
			res := runLegs(t, e, cfg, legs)
			for _, r := range res {
				if !r.Finished {
					stops++
				}
			}
			name := fmt.Sprintf("chain %d %v every %d records", c, legs[:len(res)], cfg.CheckpointRecords)
			t.Logf("%s: the runs read %v records", name, cumulativeRecords(res))
			m.checkStream(t, name, outDirsOf(cfg), layout, res[len(res)-1])
		}
		if stops == 0 {
			t.Fatalf("no run stopped before the end of its input: the test restored nothing")
		}
	})

	t.Run("directory", func(t *testing.T) {
		// The shuffled log cut into three partitions read in name order,
		// the second gzip-compressed, and an empty one between the first
		// two.
		const every = 64
		rnd := newStreamRand(seed, "directory")
		lines, from := shuffleLog(rnd, m.log, streamShift)
		dir := t.TempDir()
		cut1 := len(lines)/4 + rnd.IntN(len(lines)/4)
		cut2 := cut1 + 1 + rnd.IntN(len(lines)-cut1-1)
		layout := logLayout{
			files: []string{"p0.jsonl", "p1-empty.jsonl", "p1.jsonl.gz", "p2.jsonl"},
			from:  [][]int{from[:cut1], nil, from[cut1:cut2], from[cut2:]},
		}
		writeLogFile(t, filepath.Join(dir, "p0.jsonl"), lines[:cut1], false)
		if err := os.WriteFile(filepath.Join(dir, "p1-empty.jsonl"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		writeLogFile(t, filepath.Join(dir, "p1.jsonl.gz"), lines[cut1:cut2], true)
		writeLogFile(t, filepath.Join(dir, "p2.jsonl"), lines[cut2:], false)
		legs := randomLegs(rnd)
		d := newOutDirs(t)
		cfg := d.config(dir)
		if rnd.IntN(2) == 0 {
			cfg.CheckpointRecords = 500 + rnd.Int64N(700)
		}
		res := runLegs(t, m.engine(t, every), cfg, legs)
		name := fmt.Sprintf("directory %v every %d records", legs[:len(res)], cfg.CheckpointRecords)
		t.Logf("%s: the runs read %v records", name, cumulativeRecords(res))
		m.checkStream(t, name, d, layout, res[len(res)-1])
	})

	t.Run("gzip", func(t *testing.T) {
		// One gzip file; the first run is cancelled once it has read
		// something, in the middle of the file, and the next resumes
		// from its final checkpoint (decompressing again up to the
		// position), then stops at a checkpoint and so on.
		const every = 32
		rnd := newStreamRand(seed, "gzip")
		path, layout := m.shuffledFile(t, rnd, "events.jsonl.gz", true)
		legs := randomLegs(rnd)
		legs[0].stopAfter, legs[0].cancel = 0, true
		d := newOutDirs(t)
		cfg := d.config(path)
		if rnd.IntN(2) == 0 {
			cfg.CheckpointRecords = 500 + rnd.Int64N(700)
		}
		res := runLegs(t, m.engine(t, every), cfg, legs)
		name := fmt.Sprintf("gzip %v every %d records", legs[:len(res)], cfg.CheckpointRecords)
		t.Logf("%s: the runs read %v records", name, cumulativeRecords(res))
		if first := res[0]; first.Finished || first.Records <= 0 || first.Records >= m.sum.Records {
			t.Fatalf("%s: the first run read %d records of %d (finished %v): want it stopped in the middle", name, first.Records, m.sum.Records, first.Finished)
		}
		m.checkStream(t, name, d, layout, res[len(res)-1])
	})

	t.Run("ahead", func(t *testing.T) {
		// Another log, with events 20 to 40 days ahead of the others,
		// and engines with a far-ahead check of a day: the outliers are
		// dead letters, the jump of 61 days (confirmed by the events
		// after it) is not, and a barrier waits for the check to hold
		// nothing.
		const every = 16
		rnd := newStreamRand(seed, "ahead")
		am := newMetamorphicLog(t, rs, genCardLog(rnd, logConfig{records: 4000, padded: true, outliers: true}),
			WithInputPolicy(InputPolicy{MaxAhead: 24 * time.Hour}), logProfiles(t, rs))
		if am.sum.Ahead == 0 {
			t.Fatalf("no event of the log is too far ahead")
		}
		lines, from := shuffleLog(rnd, am.log, streamShift)
		path := filepath.Join(t.TempDir(), "events.jsonl")
		writeLogFile(t, path, lines, false)
		layout := singleLayout("events.jsonl", from)
		// The reason of an outlier's dead letter names the stream's time
		// when it was judged, which a shuffle moves: the dead letters are
		// those of Engine.Run over the shuffled file, the rest the log's.
		ref, alerts, late, dead := batchRun(t, rs, every, lines, am.opts...)
		refOut := makeOutputs(t, layout, alerts, late, dead)
		want := am.want
		want.dead = refOut.dead
		compareOutputs(t, "Engine.Run over the shuffled log", want, refOut)
		legs := randomLegs(rnd)
		legs[0].stopAfter, legs[0].cancel = 0, true
		d := newOutDirs(t)
		cfg := d.config(path)
		if rnd.IntN(2) == 0 {
			cfg.CheckpointRecords = 500 + rnd.Int64N(700)
		}
		res := runLegs(t, am.engine(t, every), cfg, legs)
		name := fmt.Sprintf("ahead %v every %d records", legs[:len(res)], cfg.CheckpointRecords)
		t.Logf("%s: the runs read %v records", name, cumulativeRecords(res))
		last := res[len(res)-1]
		compareOutputs(t, name, want, d.outputs(t, layout))
		compareSummary(t, name, am.sum, last)
		if last.FirstDeadLine != ref.FirstDeadLine || last.FirstDeadReason != ref.FirstDeadReason {
			t.Errorf("%s: first dead letter at line %d (%q), Engine.Run's at %d (%q)", name, last.FirstDeadLine, last.FirstDeadReason, ref.FirstDeadLine, ref.FirstDeadReason)
		}
	})
}

// TestStreamResultRunRecords checks the result's RunRecords: "the records
// read by this run" (StreamStats), as the progress reports count them,
// in a fresh run and in one resumed from a checkpoint.
func TestStreamResultRunRecords(t *testing.T) {
	seed := streamSeed(t)
	log := genCardLog(newStreamRand(seed, "runrecords"), logConfig{records: 4000, padded: true})
	lines := make([]string, len(log))
	for i, r := range log {
		lines[i] = r.line
	}
	path := filepath.Join(t.TempDir(), "events.jsonl")
	writeLogFile(t, path, lines, false)
	d := newOutDirs(t)
	e := newStreamEngine(t, loadCardsRuleset(t), 16)
	var records int64 // read by the runs before
	for i := range 2 {
		c := d.config(path)
		c.Parallelism = 2
		var last StreamProgress
		c.Progress, c.ProgressInterval = func(p StreamProgress) { last = p }, time.Nanosecond
		if i == 0 {
			c.hooks.afterCommit = func(int64) bool { return last.RunRecords > 0 }
		}
		res, err := e.Stream(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		if want := res.Stats.Records - records; res.Stats.RunRecords != want || last.RunRecords != want {
			t.Errorf("run %d (resumed from checkpoint %d): RunRecords %d in the result, %d in the last progress report; want %d (%d records, %d before the run)",
				i, res.Restored, res.Stats.RunRecords, last.RunRecords, want, res.Stats.Records, records)
		}
		records = res.Stats.Records
	}
}
