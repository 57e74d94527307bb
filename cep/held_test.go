package cep

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/enrich"
	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/rules"
	"github.com/cepheus-cep/cepheus/runtime"
	"github.com/cepheus-cep/cepheus/runtime/state"
)

// The events a job holds at a switch (a deploy, a restart with another
// rules file) were decoded and enriched under the version before: those
// in the rules' buffers, waiting for the watermark, and those in the
// velocity aggregates' stage. The tests of this file check that a rule
// of the new version sees them as the new version declares them: with
// the new lookups' records and the new aggregates' values.

// heldV1 has no lookup; heldV2 adds lookup holder and rule tiered,
// which shows it; heldV2Kept adds the lookup alone (every rule kept).
var (
	heldV1     = "ruleset held\n" + deployHeaderV1 + deployKeep
	heldLookup = `
lookup holder {
  key card
  fields {
    tier: string default "none"
  }
}
`
	heldTiered = `
rule tiered {
  key card
  pattern {
    begin a where type == "auth"
    followedBy b where type == "capture"
    within 1m
  }
  emit {
    tier: a.holder.tier
  }
}
`
	heldV2     = heldV1 + heldLookup + heldTiered
	heldV2Kept = heldV1 + heldLookup
)

// heldBound is the out-of-orderness of the tests of held events: ten
// minutes of deployInput's events (one every 7 s) wait in the buffers.
const heldBound = 10 * time.Minute

// heldTiers are holder's records: every card of deployInput but zz (its
// last event's), which gets the default.
var heldTiers = map[string]string{"c0": "gold", "c1": "silver", "c2": "gold", "c3": "bronze", "c4": "silver", "c5": "bronze", "za": "gold", "zb": "silver"}

// heldEngine is an engine of src over heldBound, holder bound to a
// heldSource when src declares it (unless opts bind it).
func heldEngine(t *testing.T, src string, opts ...Option) *Engine {
	t.Helper()
	rs := loadRules(t, src)
	base := []Option{WithRuleset(rs), WithOutOfOrderness(heldBound), WithWatermarkEvery(3)}
	if _, err := lookupSpec(rs, "holder"); err == nil {
		base = append(base, WithLookups(map[string]LookupSource{"holder": heldSource(t, rs)}, LookupOptions{}))
	}
	e, err := New(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// heldSource is a source of rs's lookup holder: heldTiers.
func heldSource(t *testing.T, rs *Ruleset) *enrich.MemSource {
	t.Helper()
	spec, err := lookupSpec(rs, "holder")
	if err != nil {
		t.Fatal(err)
	}
	recs := map[string][]event.Value{}
	for card, tier := range heldTiers {
		recs[card] = []event.Value{event.String(tier)}
	}
	return enrich.NewMemSource(spec, recs)
}

// heldBacktest returns the alert lines of a backtest of heldEngine(src)
// over input.
func heldBacktest(t *testing.T, src, input string) []string {
	t.Helper()
	var alerts bytes.Buffer
	es, err := NewEventSource(strings.NewReader(input), "input")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := heldEngine(t, src, WithAlerts(&alerts)).Run(context.Background(), es); err != nil {
		t.Fatal(err)
	}
	return sortedLines(alerts.String())
}

// heldAlert is what the tests of held events read of an alert line.
type heldAlert struct {
	Rule    string                      `json:"rule"`
	Matched map[string][]map[string]any `json:"matched"`
}

// fieldsSorted is an alert line with the fields of its events (and every
// object's members) in name order: a job whose layout grew over versions
// has the fields of the version it started with first, a backtest of the
// last version has its schema's order.
func fieldsSorted(t *testing.T, line string) string {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(line), &v); err != nil {
		t.Fatalf("alert %q: %v", line, err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func parseHeldAlert(t *testing.T, line string) heldAlert {
	t.Helper()
	var a heldAlert
	if err := json.Unmarshal([]byte(line), &a); err != nil {
		t.Fatalf("alert %q: %v", line, err)
	}
	return a
}

// events calls f with each matched event of a, its time and line.
func (a heldAlert) events(t *testing.T, f func(ev map[string]any, ts event.Time, line int64)) {
	t.Helper()
	for _, evs := range a.Matched {
		for _, ev := range evs {
			ts, err := time.Parse(time.RFC3339Nano, ev["ts"].(string))
			if err != nil {
				t.Fatal(err)
			}
			f(ev, event.Time(ts.UnixMilli()), int64(ev["line"].(float64)))
		}
	}
}

// first is the time of a's earliest matched event.
func (a heldAlert) first(t *testing.T) event.Time {
	first := event.MaxTime
	a.events(t, func(_ map[string]any, ts event.Time, _ int64) { first = min(first, ts) })
	return first
}

// heldSwitch is how a test of held events moves a job from one version
// to the next, with half of the input read.
type heldSwitch int

const (
	// switchRestart stops the job of the first version and starts one
	// of the second, which deploys it at the restore.
	switchRestart heldSwitch = iota
	// switchDeploy deploys the second version into the running job.
	switchDeploy
	// switchCheckpoint deploys it into a job that stops at the switch's
	// checkpoint (as a crash there would), then restarts from it.
	switchCheckpoint
	// switchThenStop deploys it, stops the job at once and restarts it:
	// from a checkpoint the new version's job took, which holds the
	// events the switch gave their values to.
	switchThenStop
)

func (s heldSwitch) String() string {
	return [...]string{"restart", "deploy", "switch checkpoint", "deploy then stop"}[s]
}

// runHeldSwitch runs a job of v1 over the first half of input (followed),
// moves it to v2 as sw says, then reads the rest, and returns the
// committed alert lines, the switch's watermark and how many lines of the
// input were read before it. The jobs run with workers aggregate workers.
func runHeldSwitch(t *testing.T, v1, v2 string, sw heldSwitch, input string, workers int) (alerts []string, w event.Time, before int) {
	t.Helper()
	lines := strings.SplitAfter(input, "\n")
	half := lines[:len(lines)/2]
	events := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(events, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d := newStreamDirs(t)
	config := func() StreamConfig {
		c := d.config(events)
		c.AggregateWorkers = workers
		return c
	}
	var f *followed
	if sw == switchRestart || sw == switchCheckpoint {
		f = follow(t, heldEngine(t, v1), config())
	} else {
		// The process runs v2's file (which binds its lookup) and v1 is
		// deployed at once: the events of the first half are v1's.
		f = follow(t, heldEngine(t, v2), config())
		waitMonitor(t, f.m, 0)
		if _, err := f.m.Deploy(context.Background(), Deploy{Name: "v1.cep", Source: []byte(v1)}); err != nil {
			t.Fatal(err)
		}
	}
	appendFile(t, events, half)
	waitMonitor(t, f.m, int64(len(half)))
	waitHeldWatermark(t, f.m, half)
	switch sw {
	case switchRestart:
		w = f.stop().Stats.Watermark
		f = follow(t, heldEngine(t, v2), config())
	case switchDeploy, switchThenStop:
		res, err := f.m.Deploy(context.Background(), Deploy{Name: "v2.cep", Source: []byte(v2)})
		if err != nil {
			t.Fatal(err)
		}
		w = res.Watermark
		if sw == switchThenStop {
			f.stop()
			f = follow(t, heldEngine(t, v2), config())
		}
	case switchCheckpoint:
		f.stop()
		cfg := config()
		cfg.hooks.stopAtSwitch = true
		f = follow(t, heldEngine(t, v1), cfg)
		waitMonitor(t, f.m, int64(len(half)))
		res, err := f.m.Deploy(context.Background(), Deploy{Name: "v2.cep", Source: []byte(v2)})
		if err == nil || !strings.Contains(err.Error(), "stopped at the switch") {
			t.Fatalf("the deploy with the hook: %+v, %v", res, err)
		}
		if end, err := f.end(); err != nil {
			t.Fatalf("the run stopped at the switch: %v", err)
		} else {
			w = end.Stats.Watermark
		}
		f = follow(t, heldEngine(t, v2), config())
	}
	appendFile(t, events, lines[len(half):])
	waitMonitor(t, f.m, int64(strings.Count(input, "\n")))
	f.stop()
	return committedLines(t, d.alerts), w, len(half)
}

// waitHeldWatermark waits until the job's watermark is the one the
// events of half allow (a followed file's goes out on a timer).
func waitHeldWatermark(t *testing.T, m *StreamMonitor, half []string) {
	t.Helper()
	waitWatermarkOf(t, m, half, heldBound)
}

// waitWatermarkOf waits until m's watermark is the one lines allow: the
// latest of their "ts" times less bound (and 1 ms).
func waitWatermarkOf(t *testing.T, m *StreamMonitor, lines []string, bound time.Duration) {
	t.Helper()
	most := event.MinTime
	for _, l := range lines {
		var ev struct {
			Ts time.Time `json:"ts"`
		}
		if json.Unmarshal([]byte(l), &ev) == nil {
			most = max(most, event.Time(ev.Ts.UnixMilli()))
		}
	}
	want := most - event.Time(bound.Milliseconds()) - 1
	waitSnapshot(t, m, fmt.Sprintf("at watermark %v", want), func(sn MonitorSnapshot) bool { return sn.Progress.Watermark >= want })
}

// TestSwitchHeldLookups: a version that adds a lookup, and a rule that
// shows it, switched in (a deploy, a restart with its file, a restart
// from the switch's checkpoint or from one taken after it) while events
// wait in the rules' buffers, or in the aggregates' stage of a ruleset
// with aggregates: the new rule's alerts are those of a backtest of the
// new version whose events all come after the switch's watermark, line
// for line, the events read before the switch with their records as much
// as the later ones (before the fix, they showed null).
func TestSwitchHeldLookups(t *testing.T) {
	input := deployInput(900)
	for _, held := range []struct{ where, v1 string }{
		{"buffers", heldV1},
		{"aggregates", heldV1 + heldRecent + heldBusy},
	} {
		v2 := held.v1 + heldLookup + heldTiered
		for _, sw := range []heldSwitch{switchRestart, switchDeploy, switchCheckpoint, switchThenStop} {
			t.Run(held.where+"/"+sw.String(), func(t *testing.T) { testSwitchHeldLookups(t, held.v1, v2, sw, input) })
		}
	}
}

func testSwitchHeldLookups(t *testing.T, v1, v2 string, sw heldSwitch, input string) {
	t.Helper()
	got, w, before := runHeldSwitch(t, v1, v2, sw, input, 1)
	checkHeldLookups(t, v2, input, got, w, readBefore(before))
}

// readBefore reports whether a line of the input was read before the
// switch: one of its first n.
func readBefore(n int) func(line int64) bool {
	return func(line int64) bool { return line <= int64(n) }
}

// checkHeldLookups checks the alerts of rule tiered among got, the
// alerts of a job switched to v2 at watermark w having read the lines
// for which read holds: those of a backtest of v2 over input whose events
// all come after w, line for line, and some with events read before the
// switch (held at it).
func checkHeldLookups(t *testing.T, v2, input string, got []string, w event.Time, read func(line int64) bool) {
	t.Helper()
	var want []string
	for _, l := range heldBacktest(t, v2, input) {
		if a := parseHeldAlert(t, l); a.Rule == "tiered" && a.first(t) > w {
			want = append(want, fieldsSorted(t, l))
		}
	}
	var tiered []string
	held, nulls := 0, 0
	for _, l := range got {
		a := parseHeldAlert(t, l)
		if a.Rule != "tiered" {
			continue
		}
		tiered = append(tiered, fieldsSorted(t, l))
		isHeld, isNull := false, false
		a.events(t, func(ev map[string]any, _ event.Time, line int64) {
			isHeld = isHeld || read(line)
			isNull = isNull || ev["holder.tier"] == nil
		})
		if isHeld {
			held++
		}
		if isNull {
			nulls++
		}
	}
	t.Logf("switch at watermark %v: %d alerts of tiered, %d of them of events read before the switch, %d with a null tier", w, len(tiered), held, nulls)
	if held == 0 {
		t.Fatal("no alert of tiered holds an event read before the switch: the test checks nothing")
	}
	if nulls > 0 {
		t.Errorf("%d of %d alerts of tiered show a null tier", nulls, len(tiered))
	}
	slices.Sort(want)
	slices.Sort(tiered)
	if !slices.Equal(want, tiered) {
		t.Errorf("the alerts of tiered are not the backtest's after the switch:\n%s", multisetDiff(want, tiered))
	}
}

// heldRecent counts a card's events over heldBound; heldBusy reads it.
// heldSpent sums a card's amounts; heldSpender reads it and shows
// recent. heldRecent5 is heldRecent over 5 minutes (another declaration
// of it). heldAbroad is a rule keyed by country; heldCrowd counts a
// country's events, and heldCrowded reads it.
var (
	heldRecent = `
aggregate recent {
  key card
  count
  window 10m
}
`
	heldRecent5 = strings.Replace(heldRecent, "window 10m", "window 5m", 1)
	heldBusy    = `
rule busy {
  key card
  pattern {
    begin a where type == "capture" && recent >= 3
  }
}
`
	heldSpent = `
aggregate spent {
  key card
  sum amount
  window 10m
}
`
	heldSpender = `
rule spender {
  key card
  pattern {
    begin a where spent > 1500
  }
  emit {
    recent: a.recent
  }
}
`
	heldAbroad = `
rule abroad {
  key country
  pattern {
    begin a where type == "capture" && amount > 450
    followedBy b where type == "capture" && amount > 450
    within 5m
  }
}
`
	heldCrowd = `
aggregate crowd {
  key country
  count
  window 10m
}
`
	heldCrowded = `
rule crowded {
  key country
  pattern {
    begin a where type == "auth" && amount > 400 && crowd >= 10
  }
}
`
)

// heldAggValues returns, by line of input, the value of each aggregate of
// rs at the event of that line, as a backtest of the events for which
// counted holds (alone, in input order) computes it; JSON's view of it
// (float64, or nil for null).
func heldAggValues(t *testing.T, rs *Ruleset, input string, counted func(event.Time) bool) map[int64]map[string]any {
	t.Helper()
	var evs []*event.Event
	for i, l := range strings.SplitAfter(input, "\n") {
		ev, err := rs.DecodeEvent([]byte(l))
		if err != nil || !counted(ev.Time) {
			continue
		}
		ev.Seq = uint64(i + 1)
		evs = append(evs, ev)
	}
	if err := FillAggregates(rs.Aggregates, evs); err != nil {
		t.Fatal(err)
	}
	out := map[int64]map[string]any{}
	for _, ev := range evs {
		vals := map[string]any{}
		for _, a := range rs.Aggregates {
			if f, ok := ev.Field(a.Slot).AsFloat(); ok {
				vals[a.Name] = f
			} else {
				vals[a.Name] = nil
			}
		}
		out[int64(ev.Seq)] = vals
	}
	return out
}

// heldMatches returns the alerts of rule among lines as rule, alert id,
// key and matched lines, those for which keep holds of the alert (nil:
// all), sorted.
func heldMatches(t *testing.T, rule string, lines []string, keep func(heldAlert) bool) []string {
	t.Helper()
	var out []string
	for _, l := range lines {
		var a struct {
			heldAlert
			ID  string         `json:"alert_id"`
			Key map[string]any `json:"key"`
		}
		if err := json.Unmarshal([]byte(l), &a); err != nil {
			t.Fatal(err)
		}
		if a.Rule != rule || keep != nil && !keep(a.heldAlert) {
			continue
		}
		var ls []int64
		a.events(t, func(_ map[string]any, _ event.Time, line int64) { ls = append(ls, line) })
		slices.Sort(ls)
		out = append(out, fmt.Sprint(a.Rule, " ", a.ID, " ", a.Key, ls))
	}
	slices.Sort(out)
	return out
}

// afterOnly is input with the lines of events at or before w made dead
// letters: a backtest of it counts, in its windows, only the events after
// w, with the lines of the whole input.
func afterOnly(t *testing.T, rs *Ruleset, input string, w event.Time) string {
	t.Helper()
	lines := strings.SplitAfter(input, "\n")
	for i, l := range lines {
		if ev, err := rs.DecodeEvent([]byte(l)); err == nil && ev.Time <= w {
			lines[i] = "before the switch\n"
		}
	}
	return strings.Join(lines, "")
}

// heldAggCase is a restart whose rules file changes the velocity
// aggregates, while events wait for the watermark.
type heldAggCase struct {
	name   string
	v1, v2 string
	// kept are the aggregates both files declare alike: their windows go
	// on, so their values are the whole input's; the others start empty
	// at the switch's watermark w and count the events after it.
	kept  []string
	rules []heldAggRule // the rules compared
	// workers: the jobs' aggregate workers.
	workers int
}

// heldAggRule is what a rule of a heldAggCase raises.
type heldAggRule struct {
	name string
	// old: the rule is in v1 (kept or changed), and its matches that
	// begin at or before w are those of a backtest of v1 (a changed
	// rule's version before drains them; none of an added rule).
	old bool
	// after: its matches that begin after w read an aggregate that starts
	// at w, and are those of a backtest of the events after w alone
	// (afterOnly); else of the whole input.
	after bool
}

// heldAggCases are the restarts of TestRestartHeldAggregates, and of
// TestKafkaRestartHeld: the job before ran no aggregates (its events wait
// in the rules' buffers), or others (they wait in the aggregates' stage).
var heldAggCases = []heldAggCase{
	{
		name: "new aggregates", v1: heldV1, v2: heldV1 + heldRecent + heldBusy,
		rules: []heldAggRule{{name: "keep", old: true}, {name: "busy", after: true}}, workers: 1,
	},
	{
		// Rules keyed by another field than the record key: in a
		// transactional Kafka job, the aggregates of the repartition
		// topic's partitions.
		name: "new aggregates of another key", v1: heldV1 + heldAbroad, v2: heldV1 + heldAbroad + heldCrowd + heldCrowded,
		rules: []heldAggRule{{name: "keep", old: true}, {name: "abroad", old: true}, {name: "crowded", after: true}}, workers: 1,
	},
	{
		name: "more aggregates", v1: heldV1 + heldRecent + heldBusy, v2: heldV1 + heldRecent + heldBusy + heldSpent + heldSpender,
		kept:  []string{"recent"},
		rules: []heldAggRule{{name: "keep", old: true}, {name: "busy", old: true}, {name: "spender", after: true}}, workers: 1,
	},
	{
		name: "more aggregates, 2 workers", v1: heldV1 + heldRecent + heldBusy, v2: heldV1 + heldRecent + heldBusy + heldSpent + heldSpender,
		kept:  []string{"recent"},
		rules: []heldAggRule{{name: "keep", old: true}, {name: "busy", old: true}, {name: "spender", after: true}}, workers: 2,
	},
	{
		// recent changed: busy, which reads it, starts at w, and so does
		// spender, which shows it (its matches depend on spent alone,
		// kept).
		name: "changed aggregate", v1: heldV1 + heldRecent + heldBusy + heldSpent + heldSpender, v2: heldV1 + heldRecent5 + heldBusy + heldSpent + heldSpender,
		kept:  []string{"spent"},
		rules: []heldAggRule{{name: "keep", old: true}, {name: "busy", old: true, after: true}, {name: "spender", old: true}}, workers: 1,
	},
}

// TestRestartHeldAggregates: a restart whose rules file adds or changes
// velocity aggregates, and rules that read them, while events wait for
// the watermark: in the rules' buffers (the job before had no
// aggregates), or in the aggregates' stage (it had others). A new or
// changed aggregate's windows start empty at the restore and count the
// events held, so the events after the checkpoint's watermark, those
// read before the restart too, carry its value as a backtest of those
// events alone gives it (before the fix, the held ones carried null); an
// aggregate both files declare keeps its windows, its values those of
// the uninterrupted run (before, every window started empty).
func TestRestartHeldAggregates(t *testing.T) {
	input := deployInput(900)
	for _, tc := range heldAggCases {
		t.Run(tc.name, func(t *testing.T) {
			got, w, before := runHeldSwitch(t, tc.v1, tc.v2, switchRestart, input, tc.workers)
			checkHeldAggregates(t, tc, input, got, w, func([]string) event.Time { return w }, readBefore(before))
		})
	}
}

// TestRestartAggregatesSaysKept: a restart with other aggregates says in
// its log which kept their windows and which start empty (it said only
// that those it did not have, or had declared otherwise, start empty),
// and how many rules the restore's deploy kept, naming the others.
func TestRestartAggregatesSaysKept(t *testing.T) {
	input := deployInput(300)
	lines := strings.SplitAfter(input, "\n")
	half := lines[:len(lines)/2]
	for _, c := range []struct{ v1, v2, want, rules string }{
		{heldV1 + heldRecent + heldBusy, heldV1 + heldRecent + heldBusy + heldSpent + heldSpender,
			"recent keeps its windows, spent starts empty (new, or declared otherwise)",
			"(2 kept, changed [], added [spender], removed [])"},
		{heldV1 + heldRecent + heldBusy + heldSpent + heldSpender, heldV1 + heldRecent5 + heldBusy + heldSpent + heldSpender,
			"spent keeps its windows, recent starts empty (new, or declared otherwise)",
			"(1 kept, changed [busy spender], added [], removed [])"},
	} {
		events := filepath.Join(t.TempDir(), "events.jsonl")
		appendFile(t, events, half)
		d := newStreamDirs(t)
		f := follow(t, heldEngine(t, c.v1), d.config(events))
		waitMonitor(t, f.m, int64(len(half)))
		waitHeldWatermark(t, f.m, half)
		f.stop()
		f = follow(t, heldEngine(t, c.v2), d.config(events))
		waitMonitor(t, f.m, 0)
		f.stop()
		want := "the velocity aggregates changed since checkpoint "
		if !slices.ContainsFunc(f.lines(), func(l string) bool { return strings.HasPrefix(l, want) && strings.Contains(l, ": "+c.want+"; ") }) {
			t.Errorf("the restart's log does not say %q: %q", c.want, f.lines())
		}
		// The rules deployed at the restore: the kept ones counted, the
		// others named.
		rules := "deploying them at the restore " + c.rules
		if !slices.ContainsFunc(f.lines(), func(l string) bool { return strings.HasSuffix(l, rules) }) {
			t.Errorf("the restart's log does not say %q: %q", rules, f.lines())
		}
	}
	decls := []*rules.Aggregate{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	for _, c := range []struct {
		kept []bool
		want string
	}{
		{[]bool{true, true, false}, "a, b keep their windows, c starts empty (new, or declared otherwise)"},
		{[]bool{false, true, false}, "b keeps its windows, a, c start empty (new, or declared otherwise)"},
	} {
		if got := keptWindows(decls, c.kept); got != c.want {
			t.Errorf("keptWindows %v = %q, want %q", c.kept, got, c.want)
		}
	}
}

// checkHeldAggregates checks got, the alerts of a job restarted from
// tc.v1's rules to tc.v2's at watermark w having read the lines of input
// for which read holds: the matches of each rule of tc are those its
// heldAggRule says, and each event in every alert shows each aggregate
// of its rule's key as tc says (the others null, as in Kafka mode:
// docs/decisions.md, "Velocity aggregates"), but for those taken before
// the switch; some of them were read before the restart. wOf gives the
// watermark the rules keyed by some fields had at the checkpoint (w, but
// for the repartitioned rules of a transactional Kafka job, which go by
// their repartition topic's): the aggregates keyed so start there, and
// the events of those rules at or before it were taken before the
// switch, shown as they were.
func checkHeldAggregates(t *testing.T, tc heldAggCase, input string, got []string, w event.Time, wOf func(key []string) event.Time, read func(line int64) bool) {
	t.Helper()
	v2 := loadRules(t, tc.v2)
	after := map[event.Time]map[int64]map[string]any{} // the values counted after a watermark, by it
	afterOf := func(from event.Time) map[int64]map[string]any {
		if _, ok := after[from]; !ok {
			after[from] = heldAggValues(t, v2, input, func(ts event.Time) bool { return ts > from })
		}
		return after[from]
	}
	whole := heldAggValues(t, v2, input, func(event.Time) bool { return true })
	refs := map[string][]string{} // the backtests, by rules and input
	ref := func(src string, from event.Time) []string {
		k := fmt.Sprint(from, src)
		if _, ok := refs[k]; !ok {
			in := input
			if from > event.MinTime {
				in = afterOnly(t, v2, input, from)
			}
			refs[k] = heldBacktest(t, src, in)
		}
		return refs[k]
	}
	keyOf := map[string][]string{}
	for _, r := range v2.Rules {
		keyOf[r.Name] = r.KeyFields
	}
	var want, gotMatches []string
	for _, r := range tc.rules {
		// A rule of v1 (kept, or changed: its version before drains)
		// goes on, its matches split at w; an added rule sees what its
		// rules get after the checkpoint, after their watermark.
		split := w
		if r.old {
			want = append(want, heldMatches(t, r.name, ref(tc.v1, event.MinTime), func(a heldAlert) bool { return a.first(t) <= w })...)
		} else {
			split = wOf(keyOf[r.name])
		}
		from := event.MinTime
		if r.after {
			from = wOf(keyOf[r.name])
		}
		want = append(want, heldMatches(t, r.name, ref(tc.v2, from), func(a heldAlert) bool { return a.first(t) > split })...)
		gotMatches = append(gotMatches, heldMatches(t, r.name, got, nil)...)
	}
	held, bad := 0, 0
	heldBy := map[string]int{}
	for _, l := range got {
		a := parseHeldAlert(t, l)
		a.events(t, func(ev map[string]any, ts event.Time, line int64) {
			if ts <= wOf(keyOf[a.Rule]) {
				return // taken before the switch: shown as it was
			}
			if read(line) {
				held++
				heldBy[a.Rule]++
			}
			for _, agg := range v2.Aggregates {
				var want any
				switch {
				case !slices.Equal(agg.KeyFields, keyOf[a.Rule]):
				case slices.Contains(tc.kept, agg.Name):
					want = whole[line][agg.Name]
				default:
					want = afterOf(wOf(agg.KeyFields))[line][agg.Name]
				}
				if ev[agg.Name] != want {
					if bad++; bad <= 10 {
						t.Errorf("%s: line %d (%v): %s is %v, want %v", a.Rule, line, ts, agg.Name, ev[agg.Name], want)
					}
				}
			}
		})
	}
	t.Logf("switch at watermark %v: %d alerts; %d events read before the switch in their matches (%v); %d wrong aggregates", w, len(got), held, heldBy, bad)
	for _, r := range tc.rules {
		if r.after && heldBy[r.name] == 0 {
			t.Errorf("no alert of %s holds an event read before the switch: its aggregates' values in the events held are not checked", r.name)
		}
	}
	slices.Sort(want)
	slices.Sort(gotMatches)
	if !slices.Equal(want, gotMatches) {
		t.Errorf("the matches of %v are not the backtests':\n%s", tc.rules, multisetDiff(want, gotMatches))
	}
}

// TestSwitchHeldLookupsKept: a version that adds a lookup and keeps every
// rule (no rule reads the lookup: their states restore as they are,
// without a migration) gives it to the events held at the switch all the
// same, and the checkpoints after the switch keep them so: an alert of a
// kept rule shows each of its events read after the switch's watermark
// with its record, also those read before the switch, and after a
// restart from such a checkpoint; the events its partial matches took
// before the switch are shown as they were (no record).
func TestSwitchHeldLookupsKept(t *testing.T) {
	input := deployInput(900)
	for _, sw := range []heldSwitch{switchDeploy, switchThenStop, switchCheckpoint} {
		t.Run(sw.String(), func(t *testing.T) {
			got, w, before := runHeldSwitch(t, heldV1, heldV2Kept, sw, input, 1)
			// Ids too: in the deploy modes the process started with
			// heldV2Kept's file, and v1, deployed at once, runs on its
			// layout, whose lookup slot v1 does not read: no part of
			// v1's ids (rules.Ruleset.IDSlots).
			want := heldMatches(t, "keep", heldBacktest(t, heldV2Kept, input), nil)
			if gotKeep := heldMatches(t, "keep", got, nil); !slices.Equal(want, gotKeep) {
				t.Errorf("the matches of keep are not the backtest's:\n%s", multisetDiff(want, gotKeep))
			}
			checkHeldTiers(t, got, w, readBefore(before))
		})
	}
}

// checkHeldTiers checks that each event of the alerts got, of a job
// switched at watermark w to a version that adds lookup holder having
// read the lines for which read holds, shows its record (or the
// default) when it is after w, and none when it is not (taken before the
// switch: shown as it was); some events after w were read before the
// switch.
func checkHeldTiers(t *testing.T, got []string, w event.Time, read func(line int64) bool) {
	t.Helper()
	held, bad := 0, 0
	for _, l := range got {
		a := parseHeldAlert(t, l)
		a.events(t, func(ev map[string]any, ts event.Time, line int64) {
			var want any // taken before the switch: shown as it was
			if ts > w {
				want = "none"
				if tier, ok := heldTiers[ev["card"].(string)]; ok {
					want = tier
				}
				if read(line) {
					held++
				}
			}
			if ev["holder.tier"] != want {
				if bad++; bad <= 5 {
					t.Errorf("%s: line %d (%v, switch at %v): holder.tier %v, want %v", a.Rule, line, ts, w, ev["holder.tier"], want)
				}
			}
		})
	}
	t.Logf("switch at watermark %v: %d alerts, %d events read before the switch and after its watermark in them, %d wrong", w, len(got), held, bad)
	if held == 0 {
		t.Fatal("no alert holds an event read before the switch after its watermark: the test checks nothing")
	}
}

// TestSwitchHeldLookupFailsClosed: a lookup that fails closed on an
// event held at a switch sends it to the dead letters, as it does any
// event: no rule sees it (the rules kept neither), and its dead letter
// has its line, the reason, and for data the event as decoded (its raw
// line is not kept: offset -1). The source down during the restore and
// up again after, the alerts are those of a backtest in which those
// events were dead letters too.
func TestSwitchHeldLookupFailsClosed(t *testing.T) {
	input := deployInput(900)
	v2src := heldV1 + strings.Replace(heldLookup, "  }\n}", "  }\n  on failure closed\n}", 1) + heldTiered
	v2 := loadRules(t, v2src)
	if v2.Lookups[0].Closed != true {
		t.Fatal("the lookup does not fail closed")
	}
	lines := strings.SplitAfter(input, "\n")
	half := lines[:len(lines)/2]
	events := filepath.Join(t.TempDir(), "events.jsonl")
	appendFile(t, events, half)
	d := newStreamDirs(t)
	f := follow(t, heldEngine(t, heldV1), d.config(events))
	waitMonitor(t, f.m, int64(len(half)))
	waitHeldWatermark(t, f.m, half)
	w := f.stop().Stats.Watermark
	src := heldSource(t, v2)
	src.SetFail(errors.New("connection refused"))
	f = follow(t, heldEngine(t, v2src, WithLookups(map[string]LookupSource{"holder": src}, LookupOptions{})), d.config(events))
	waitMonitor(t, f.m, int64(len(half)))
	src.SetFail(nil)
	appendFile(t, events, lines[len(half):])
	waitMonitor(t, f.m, int64(len(lines)-1))
	f.stop()

	// The events held at the switch: read before it, after its watermark.
	held := map[int64]bool{}
	cut := slices.Clone(lines)
	for i, l := range half {
		if ev, err := v2.DecodeEvent([]byte(l)); err == nil && ev.Time > w {
			held[int64(i+1)] = true
			cut[i] = "held at the switch\n"
		}
	}
	if len(held) == 0 {
		t.Fatal("no event held at the switch: the test checks nothing")
	}
	for _, l := range committedLines(t, d.dead) {
		var dl struct {
			File   string `json:"file"`
			Line   int64  `json:"line"`
			Offset int64  `json:"offset"`
			Reason string `json:"reason"`
			Data   string `json:"data"`
		}
		if err := json.Unmarshal([]byte(l), &dl); err != nil {
			t.Fatal(err)
		}
		if !held[dl.Line] {
			continue
		}
		delete(held, dl.Line)
		if dl.File != "events.jsonl" || dl.Offset != -1 || !strings.HasPrefix(dl.Reason, "lookup holder: ") || !strings.Contains(dl.Data, fmt.Sprintf(`{"line":%d,"ts":`, dl.Line)) {
			t.Errorf("the dead letter of held line %d: %s", dl.Line, l)
		}
	}
	if len(held) > 0 {
		t.Errorf("%d events held at the switch are not in the dead letters", len(held))
	}
	got := committedLines(t, d.alerts)
	want := heldBacktest(t, v2src, strings.Join(cut, ""))
	for _, rule := range []string{"keep", "tiered"} {
		wantM, gotM := heldMatches(t, rule, want, nil), heldMatches(t, rule, got, nil)
		if rule == "tiered" { // it starts at the switch
			wantM = heldMatches(t, rule, want, func(a heldAlert) bool { return a.first(t) > w })
		}
		if !slices.Equal(wantM, gotM) {
			t.Errorf("the matches of %s are not those of a backtest without the held events:\n%s", rule, multisetDiff(wantM, gotM))
		}
	}
}

// TestSwitchHeldAfterDeletedFile: a followed directory's first file,
// deleted while closed, is let go; a restart then numbered the files in
// name order again, so the other file took the deleted one's index, and
// an event of each, both held in the buffers across the restarts, had
// one Seq (a.jsonl's line 3 and b.jsonl's line 3, partition 0). A third
// restart adding a lookup took them for copies of one event: c1's event
// got c2's record (gold, where c1 is silver), and the log counted 3
// events held instead of 4. Files now keep their indexes across restarts
// (sourceMeta.Indexes): b.jsonl stays partition 1.
func TestSwitchHeldAfterDeletedFile(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	line := func(card, typ, ts string) string {
		return fmt.Sprintf(`{"ts":"2026-01-01T%sZ","card":%q,"type":%q,"amount":1,"country":"US"}`+"\n", ts, card, typ)
	}
	// a.jsonl's events, ahead of b.jsonl's, wait in the buffers.
	appendFile(t, a, []string{line("c0", "login", "10:20:00"), line("c0", "login", "10:20:00"), line("c1", "auth", "10:20:00")})
	appendFile(t, b, []string{line("c9", "login", "10:00:00")})
	d := newStreamDirs(t)
	cfg := d.config(dir)
	cfg.CloseInactive = 30 * time.Millisecond
	f := follow(t, heldEngine(t, heldV1), cfg)
	waitSnapshot(t, f.m, "a.jsonl read and closed", func(s MonitorSnapshot) bool {
		_, open := s.PartitionWatermarks["a.jsonl"]
		return s.Progress.Records == 4 && s.Partitions == 2 && !open
	})
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	waitSnapshot(t, f.m, "a.jsonl gone", func(s MonitorSnapshot) bool { return s.Partitions == 1 })
	f.stop()
	f = follow(t, heldEngine(t, heldV1), cfg)
	waitMonitor(t, f.m, 4)
	appendFile(t, b, []string{line("c9", "login", "10:00:10"), line("c2", "auth", "10:20:00")})
	waitMonitor(t, f.m, 6)
	f.stop()
	f = follow(t, heldEngine(t, heldV2), cfg)
	waitMonitor(t, f.m, 6)
	appendFile(t, b, []string{line("c1", "capture", "10:20:30"), line("c2", "capture", "10:20:30"), line("zz", "login", "11:30:00")})
	waitMonitor(t, f.m, 9)
	f.stop()
	if want := "the 4 events held at checkpoint"; !slices.ContainsFunc(f.lines(), func(l string) bool { return strings.HasPrefix(l, want) }) {
		t.Errorf("the log does not say %q:\n%s", want, strings.Join(f.lines(), "\n"))
	}
	tiered := 0
	for _, l := range committedLines(t, d.alerts) {
		a := parseHeldAlert(t, l)
		if a.Rule != "tiered" {
			continue
		}
		tiered++
		ev := a.Matched["a"][0]
		if want := heldTiers[ev["card"].(string)]; ev["holder.tier"] != want {
			t.Errorf("card %v: tier %v, want %v: %s", ev["card"], ev["holder.tier"], want, l)
		}
		if ev["card"] == "c2" && ev["partition"] != 1.0 {
			t.Errorf("b.jsonl's event shown as of partition %v, want 1 (as before the restarts): %s", ev["partition"], l)
		}
	}
	if tiered != 2 {
		t.Errorf("%d alerts of tiered, want 2 (c1, c2)", tiered)
	}
}

// TestRestartAggregatesRemoved: a restart whose rules file declares no
// aggregates (heldV1), from a checkpoint whose aggregates (heldV1 with
// recent and busy) held events, routes those events to the rules at its
// start, and from then on runs as a job that never had aggregates: no
// aggregator stage, no aggregator state in any checkpoint it takes; a
// restart from its first checkpoint (the events then in the rules'
// buffers) goes on alike. Each subtask's alerts of heldV1's rules, late
// events and dead letters are those of the same legs run with heldV1
// throughout, ids included, each key's alerts in the same order (but for
// what the grown layout shows, the version and the field recent, and the
// order of alerts of several keys at one watermark, which follows the
// keys' ranks: a job with aggregates ranks keys by their events'
// release, before the restart too). Before, an aggregator of none
// stayed: it held every later event until the watermark, and wrote its
// state into every checkpoint.
func TestRestartAggregatesRemoved(t *testing.T) {
	// Padded, so that the reader's batches (256 KiB) hold some 60
	// records, not 1,024: a leg stops within a few batches of its
	// checkpoint.
	pad := `,"pad":"` + strings.Repeat("x", 4000) + `"}` + "\n"
	input := strings.ReplaceAll(deployInput(900), "}\n", pad)
	events := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(events, []byte(input), 0o644); err != nil {
		t.Fatal(err)
	}
	v1 := heldV1 + heldRecent + heldBusy
	// The legs: the first's rules, stopped after checkpoint 1 (300 of
	// about 1,100 records; the aggregates hold 30 minutes of events, some
	// 300), then heldV1 stopped after its first checkpoint (20 records
	// on), then heldV1 to the end. They return the checkpoint each leg
	// restored, and the second leg's log.
	const bound = 30 * time.Minute
	legs := func(first string) (streamDirs, map[int64]jobMeta, [3]int64, []string) {
		d := newStreamDirs(t)
		var restored [3]int64
		var from int64
		var logs []string
		for i, src := range []string{first, heldV1, heldV1} {
			cfg := d.config(events)
			cfg.CheckpointInterval, cfg.Keep = time.Hour, 1000
			cfg.CheckpointRecords = 20
			if i == 0 {
				cfg.CheckpointRecords = 300
			}
			if i < 2 {
				stopAt := from + 1
				cfg.hooks.afterCommit = func(id int64) bool { return id >= stopAt }
			}
			if i == 1 {
				cfg.Logf = func(format string, args ...any) { logs = append(logs, fmt.Sprintf(format, args...)) }
			}
			res, err := heldEngine(t, src, WithOutOfOrderness(bound)).Stream(context.Background(), cfg)
			switch {
			case err != nil:
				t.Fatalf("leg %d: %v", i, err)
			case res.Restored != from || res.Finished != (i == 2):
				t.Fatalf("leg %d: restored %d, finished %v; want checkpoint %d, finished at the last leg", i, res.Restored, res.Finished, from)
			}
			restored[i] = from
			from = res.Stats.LastCheckpoint
		}
		return d, checkpointMetas(t, d.state), restored, logs
	}
	d, metas, restored, logs := legs(v1)
	ref, _, _, _ := legs(heldV1)

	held := heldAggregates(t, metas[restored[1]].Source.Aggregates)
	if len(held) == 0 {
		t.Fatalf("checkpoint %d: the aggregates hold no event: the test checks nothing", restored[1])
	}
	if want := fmt.Sprintf("the %d events held at checkpoint %d by velocity aggregates the rules no longer declare went to the rules", len(held), restored[1]); !slices.Contains(logs, want) {
		t.Errorf("the second leg's log does not say %q:\n%s", want, strings.Join(logs, "\n"))
	}
	after := 0
	for _, id := range slices.Sorted(maps.Keys(metas)) {
		if id <= restored[1] {
			continue
		}
		after++
		if src := metas[id].Source; src.Aggregates != nil || src.AggregatesOf != "" || src.PartAggregates != nil {
			t.Errorf("checkpoint %d, after the restart without aggregates, carries aggregator state (%d bytes, %d events held; of %q; partitions' %v)",
				id, len(src.Aggregates), len(heldAggregates(t, src.Aggregates)), src.AggregatesOf, src.PartAggregates)
		}
	}
	if after < 3 || restored[2] <= restored[1] {
		t.Fatalf("%d checkpoints after the restart, the third leg restored %d: the test checks little", after, restored[2])
	}
	t.Logf("%d events held at checkpoint %d; %d checkpoints after", len(held), restored[1], after)

	got, want := subtaskParts(t, d.alerts, "alerts"), subtaskParts(t, ref.alerts, "alerts")
	if len(want) != 2 {
		t.Fatalf("the alerts of %d subtasks, want 2", len(want))
	}
	for sub := range want {
		g, w := byKey(t, withoutAggregates(t, got[sub])), byKey(t, withoutAggregates(t, want[sub]))
		if len(w) == 0 {
			t.Fatalf("subtask %d: no alert: the test checks nothing", sub)
		}
		for key := range w {
			if !slices.Equal(g[key], w[key]) {
				t.Errorf("subtask %d, key %s: the alerts of heldV1's rules are not those of a job without aggregates, in order (%d, want %d):\n%s", sub, key, len(g[key]), len(w[key]), multisetDiff(w[key], g[key]))
			}
		}
		for key := range g {
			if w[key] == nil {
				t.Errorf("subtask %d, key %s: %d alerts, a job without aggregates none", sub, key, len(g[key]))
			}
		}
	}
	for _, kind := range []string{"late", "dead"} {
		dir, refDir := d.late, ref.late
		if kind == "dead" {
			dir, refDir = d.dead, ref.dead
		}
		if got, want := subtaskParts(t, dir, kind), subtaskParts(t, refDir, kind); !maps.EqualFunc(got, want, slices.Equal) {
			t.Errorf("the %s outputs are not those of a job without aggregates:\n%v\nwant\n%v", kind, got, want)
		}
	}
}

// byKey returns alert lines by their key, in order.
func byKey(t *testing.T, lines []string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, l := range lines {
		var a struct {
			Key json.RawMessage `json:"key"`
		}
		if err := json.Unmarshal([]byte(l), &a); err != nil {
			t.Fatal(err)
		}
		out[string(a.Key)] = append(out[string(a.Key)], l)
	}
	return out
}

// subtaskParts returns the lines of the committed part files of prefix
// in dir by subtask, each in checkpoint order (a subtask's outputs in the
// order it wrote them, wherever the checkpoints fell).
func subtaskParts(t *testing.T, dir, prefix string) map[int64][]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	type part struct{ sub, chk int64 }
	var parts []part
	for _, e := range entries {
		m := partFile.FindStringSubmatch(e.Name())
		if m == nil || m[1] != prefix {
			continue
		}
		sub, _ := strconv.ParseInt(m[2], 10, 64)
		chk, _ := strconv.ParseInt(m[3], 10, 64)
		parts = append(parts, part{sub, chk})
	}
	slices.SortFunc(parts, func(a, b part) int { return cmp.Or(cmp.Compare(a.sub, b.sub), cmp.Compare(a.chk, b.chk)) })
	out := map[int64][]string{}
	for _, p := range parts {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%s-%d-%d.jsonl", prefix, p.sub, p.chk)))
		if err != nil {
			t.Fatal(err)
		}
		out[p.sub] = append(out[p.sub], jsonLines(b)...)
	}
	return out
}

// withoutAggregates is alert lines of heldV1 after a job that ran
// aggregates, as a job that never had them gives them: without busy's,
// the version (v1's before the restart) and the field recent, which the
// grown layout (heldV1 after v1) shows.
func withoutAggregates(t *testing.T, lines []string) []string {
	t.Helper()
	return rewriteJSONLines(t, lines, func(a map[string]any) bool {
		if a["rule"] == "busy" {
			return false
		}
		delete(a, "ruleset_version")
		for _, evs := range a["matched"].(map[string]any) {
			for _, ev := range evs.([]any) {
				delete(ev.(map[string]any), "recent")
			}
		}
		return true
	})
}

// rewriteJSONLines is lines, each a JSON object, changed by edit and
// marshalled again (keys sorted); a line edit returns false for is left out.
func rewriteJSONLines(t *testing.T, lines []string, edit func(map[string]any) bool) []string {
	t.Helper()
	var out []string
	for _, l := range lines {
		var a map[string]any
		if err := json.Unmarshal([]byte(l), &a); err != nil {
			t.Fatal(err)
		}
		if !edit(a) {
			continue
		}
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	return out
}

// checkpointMetas returns the job metadata of every complete checkpoint
// of the state directory dir, by id.
func checkpointMetas(t *testing.T, dir string) map[int64]jobMeta {
	t.Helper()
	cd, err := state.OpenCheckpointDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer cd.Close()
	ids, err := cd.Complete()
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]jobMeta{}
	for _, id := range ids {
		chk, err := cd.Open(id)
		if err != nil {
			t.Fatal(err)
		}
		out[int64(id)] = chkJobMeta(t, chk)
	}
	return out
}

// heldAggregates returns the events an aggregator state holds (none for
// no state).
func heldAggregates(t *testing.T, st []byte) []*event.Event {
	t.Helper()
	if st == nil {
		return nil
	}
	a, err := runtime.NewAggregator(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.RestoreMatching(st); err != nil {
		t.Fatal(err)
	}
	var out []*event.Event
	a.EachHeld(func(ev *event.Event) bool { out = append(out, ev); return true })
	return out
}
