package cep

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/enrich"
	"github.com/cepheus-cep/cepheus/event"
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
	most := event.MinTime
	for _, l := range half {
		var ev struct {
			Ts time.Time `json:"ts"`
		}
		if json.Unmarshal([]byte(l), &ev) == nil {
			most = max(most, event.Time(ev.Ts.UnixMilli()))
		}
	}
	want := most - event.Time(heldBound.Milliseconds()) - 1
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
			isHeld = isHeld || line <= int64(before)
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
	if !slices.Equal(want, tiered) {
		t.Errorf("the alerts of tiered are not the backtest's after the switch:\n%s", multisetDiff(want, tiered))
	}
}

// heldRecent counts a card's events over heldBound; heldBusy reads it.
// heldSpent sums a card's amounts; heldSpender reads it and shows
// recent.
var (
	heldRecent = `
aggregate recent {
  key card
  count
  window 10m
}
`
	heldBusy = `
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

// heldMatches returns the alerts of rule among lines as rule, key and
// matched lines.
func heldMatches(t *testing.T, rule string, lines []string) []string {
	t.Helper()
	var out []string
	for _, l := range lines {
		var a struct {
			heldAlert
			Key map[string]any `json:"key"`
		}
		if err := json.Unmarshal([]byte(l), &a); err != nil {
			t.Fatal(err)
		}
		if a.Rule != rule {
			continue
		}
		var ls []int64
		a.events(t, func(_ map[string]any, _ event.Time, line int64) { ls = append(ls, line) })
		slices.Sort(ls)
		out = append(out, fmt.Sprint(a.Rule, a.Key, ls))
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

// TestRestartHeldAggregates: a restart whose rules file adds a velocity
// aggregate, and a rule that reads it, while events wait for the
// watermark: in the rules' buffers (the job before had no aggregates),
// or in the aggregates' stage (it had others). The new aggregate's
// windows start empty at the restore and count the events held, so the
// events after the checkpoint's watermark, those read before the restart
// too, carry its value as a backtest of those events alone gives it (before
// the fix, the held ones carried null); an aggregate both files declare
// keeps its windows, its values those of the uninterrupted run (before,
// every window started empty).
func TestRestartHeldAggregates(t *testing.T) {
	input := deployInput(900)
	for _, tc := range []struct {
		name   string
		v1, v2 string
		// kept: the aggregate recent is in both versions (its values are
		// the whole input's); rules: the rules compared.
		kept    bool
		rules   []string
		workers int
	}{
		{name: "new aggregates", v1: heldV1, v2: heldV1 + heldRecent + heldBusy, rules: []string{"busy"}, workers: 1},
		{name: "more aggregates", v1: heldV1 + heldRecent + heldBusy, v2: heldV1 + heldRecent + heldBusy + heldSpent + heldSpender, kept: true, rules: []string{"busy", "spender"}, workers: 1},
		{name: "more aggregates, 2 workers", v1: heldV1 + heldRecent + heldBusy, v2: heldV1 + heldRecent + heldBusy + heldSpent + heldSpender, kept: true, rules: []string{"busy", "spender"}, workers: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, w, before := runHeldSwitch(t, tc.v1, tc.v2, switchRestart, input, tc.workers)
			v2 := loadRules(t, tc.v2)
			after := heldAggValues(t, v2, input, func(ts event.Time) bool { return ts > w })
			whole := heldAggValues(t, v2, input, func(event.Time) bool { return true })
			var want []string
			for _, rule := range tc.rules {
				ref := heldBacktest(t, tc.v2, afterOnly(t, v2, input, w))
				if rule == "busy" && tc.kept {
					ref = heldBacktest(t, tc.v2, input) // recent's windows go on
				}
				want = append(want, heldMatches(t, rule, ref)...)
			}
			var gotMatches []string
			held, bad := 0, 0
			for _, rule := range tc.rules {
				gotMatches = append(gotMatches, heldMatches(t, rule, got)...)
			}
			for _, l := range got {
				a := parseHeldAlert(t, l)
				a.events(t, func(ev map[string]any, ts event.Time, line int64) {
					if ts <= w {
						return // taken before the switch: shown as it was
					}
					if line <= int64(before) {
						held++
					}
					for _, agg := range v2.Aggregates {
						want := after[line][agg.Name]
						if agg.Name == "recent" && tc.kept {
							want = whole[line][agg.Name]
						}
						if ev[agg.Name] != want {
							bad++
							t.Errorf("%s: line %d (%v): %s is %v, want %v", a.Rule, line, ts, agg.Name, ev[agg.Name], want)
						}
					}
				})
			}
			t.Logf("switch at watermark %v: %d alerts; %d events read before the switch in their matches; %d wrong aggregates", w, len(got), held, bad)
			if held == 0 {
				t.Fatal("no alert holds an event read before the switch: the test checks nothing")
			}
			slices.Sort(want)
			slices.Sort(gotMatches)
			if !slices.Equal(want, gotMatches) {
				t.Errorf("the matches of %v are not the backtest's:\n%s", tc.rules, multisetDiff(want, gotMatches))
			}
		})
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
			want := heldMatches(t, "keep", heldBacktest(t, heldV2Kept, input))
			if gotKeep := heldMatches(t, "keep", got); !slices.Equal(want, gotKeep) {
				t.Errorf("the matches of keep are not the backtest's:\n%s", multisetDiff(want, gotKeep))
			}
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
						if line <= int64(before) {
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
		})
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
		wantM, gotM := heldMatches(t, rule, want), heldMatches(t, rule, got)
		if rule == "tiered" { // it starts at the switch
			wantM = heldMatches(t, rule, slices.DeleteFunc(slices.Clone(want), func(l string) bool { return parseHeldAlert(t, l).first(t) <= w }))
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
