package cep

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/event"
)

// The versions of TestSwitchTimeFieldDecoded: tfBase declares the fields
// the rules read, tfSeen also seen, a time no rule of tfBase reads;
// tfSince is a rule that reads it (in both its stages), tfSinceChanged
// that rule without it.
var (
	tfBase = `ruleset held

event time ts

schema {
  ts: time
  card: string
  type: string
  amount: float
  country: string
}
`
	tfSeen         = strings.Replace(tfBase, "  country: string\n", "  country: string\n  seen: time\n", 1)
	tfSinceChanged = `
rule since {
  key card
  pattern {
    begin a where type == "auth" && amount > 100
    followedBy b where type == "capture" && ts > a.ts + 900000
    within 30m
  }
}
`
	tfSince = `
rule since {
  key card
  pattern {
    begin a where type == "auth" && seen < ts - 3600000
    followedBy b where type == "capture" && ts > a.ts + 900000 && seen > a.seen
    within 30m
  }
}
`
)

// TestSwitchTimeFieldDecoded: a field a version declared with type time
// stays in the job's layout (docs/operations.md, "Schema growth"); the
// events decoded after a switch still read it as a time wherever a
// version the job runs declares it, and no event is refused for it where
// none does. Before, the decoder took it for a plain int (its slot's
// kind) in every version that did not declare it: every event that wrote
// it as an RFC 3339 string was a dead letter, after a restart or a
// deploy with a file that dropped it (the draining rules of the version
// before, which read it, saw none of the later events either), and after
// the deploy of a shadow that added it (the active version lost its
// whole input).
func TestSwitchTimeFieldDecoded(t *testing.T) {
	input := idInput(600)
	dead := int64(strings.Count(input, "not json\n"))
	t.Run("restart without it", func(t *testing.T) {
		v1, v2 := tfSeen+deployKeep, tfBase+deployKeep
		got, _, res := runTimeFieldSwitch(t, v1, v2, switchRestart, false, input)
		if res.Stats.Dead != dead {
			t.Errorf("%d dead letters, want %d (the input's lines that are not JSON)", res.Stats.Dead, dead)
		}
		// keep is kept: its matches are the backtest's, each alert with
		// the id of its version's backtest (v1's before the switch hash
		// seen, v2's do not).
		want := matchesWithoutIDs(heldMatches(t, "keep", heldBacktest(t, v2, input), nil))
		if got := matchesWithoutIDs(heldMatches(t, "keep", got, nil)); !slices.Equal(want, got) {
			t.Errorf("the matches of keep are not the backtest's:\n%s", multisetDiff(want, got))
		}
		checkVersionIDs(t, got, input, v1, v2)
	})
	t.Run("deploy without it, the rule that read it draining", func(t *testing.T) {
		v1, v2 := tfSeen+deployKeep+tfSince, tfBase+deployKeep+tfSinceChanged
		got, w, res := runTimeFieldSwitch(t, v1, v2, switchDeploy, false, input)
		if res.Stats.Dead != dead {
			t.Errorf("%d dead letters, want %d (the input's lines that are not JSON)", res.Stats.Dead, dead)
		}
		before := func(a heldAlert) bool { return a.first(t) <= w }
		ver1 := loadRules(t, v1).Hash
		var drained []string
		for _, l := range got {
			if _, _, v := idMatch(t, l); v == ver1 {
				drained = append(drained, l)
			}
		}
		// A match of since spans 15 to 30 minutes, more than the events
		// held (10): some of those that begin before the switch end with
		// an event read after it.
		late := 0
		for _, l := range heldBacktest(t, v1, input) {
			if a := parseHeldAlert(t, l); a.Rule == "since" && before(a) {
				a.events(t, func(_ map[string]any, _ event.Time, line int64) {
					if line > int64(res.before) {
						late++
					}
				})
			}
		}
		want := heldMatches(t, "since", heldBacktest(t, v1, input), before)
		if late == 0 {
			t.Fatalf("no match of since that begins before the switch (%d) takes an event read after it: the test checks little", len(want))
		}
		if got := heldMatches(t, "since", drained, nil); !slices.Equal(want, got) {
			t.Errorf("the matches of the draining rule since are not the backtest's that begin at or before the switch:\n%s", multisetDiff(want, got))
		}
	})
	t.Run("shadow with it", func(t *testing.T) {
		v1, v2 := tfBase+deployKeep, tfSeen+deployKeep+tfSince
		got, w, res := runTimeFieldSwitch(t, v1, v2, switchDeploy, true, input)
		if res.Stats.Dead != dead {
			t.Errorf("%d dead letters, want %d (the input's lines that are not JSON)", res.Stats.Dead, dead)
		}
		if want, got := heldMatches(t, "keep", heldBacktest(t, v1, input), nil), heldMatches(t, "keep", got, nil); !slices.Equal(want, got) {
			t.Errorf("the matches of the active keep are not the backtest's:\n%s", multisetDiff(want, got))
		}
		// The shadow's matches of events read after the switch (those
		// read before lack seen: docs/decisions.md, "Events held at a
		// switch").
		after := func(a heldAlert) bool {
			all := a.first(t) > w
			a.events(t, func(_ map[string]any, _ event.Time, line int64) { all = all && line > int64(res.before) })
			return all
		}
		want := heldMatches(t, "since", heldBacktest(t, v2, input), after)
		if len(want) == 0 {
			t.Fatal("a backtest of the shadow raises no match of since after the switch: the test checks nothing")
		}
		if got := heldMatches(t, "since", res.shadow, after); !slices.Equal(want, got) {
			t.Errorf("the shadow's matches of since are not the backtest's after the switch:\n%s", multisetDiff(want, got))
		}
	})
}

// timeFieldRun is what runTimeFieldSwitch returns of the job after the
// switch: its stats, the shadow's alerts, and the number of lines of the
// input read before the switch.
type timeFieldRun struct {
	*StreamResult
	shadow []string
	before int
}

// runTimeFieldSwitch runs a job of v1 over the first half of input
// (followed), moves it to v2 as sw says (switchRestart or switchDeploy;
// shadow: v2 deployed as the shadow), then reads the rest, and returns
// the committed alerts, the switch's watermark and the last job's result.
func runTimeFieldSwitch(t *testing.T, v1, v2 string, sw heldSwitch, shadow bool, input string) ([]string, event.Time, timeFieldRun) {
	t.Helper()
	lines := strings.SplitAfter(input, "\n")
	half := lines[:len(lines)/2]
	events := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(events, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d := newStreamDirs(t)
	shadowDir := filepath.Join(t.TempDir(), "shadow")
	config := func() StreamConfig {
		c := d.config(events)
		c.ShadowDir = shadowDir
		return c
	}
	f := follow(t, heldEngine(t, v1), config())
	appendFile(t, events, half)
	waitMonitor(t, f.m, int64(len(half)))
	waitHeldWatermark(t, f.m, half)
	var w event.Time
	switch sw {
	case switchRestart:
		w = f.stop().Stats.Watermark
		f = follow(t, heldEngine(t, v2), config())
	case switchDeploy:
		res, err := f.m.Deploy(context.Background(), Deploy{Name: "v2.cep", Source: []byte(v2), Shadow: shadow})
		if err != nil {
			t.Fatal(err)
		}
		w = res.Watermark
	default:
		t.Fatalf("switch %v", sw)
	}
	appendFile(t, events, lines[len(half):])
	waitMonitor(t, f.m, int64(strings.Count(input, "\n")))
	res := f.stop()
	return committedLines(t, d.alerts), w, timeFieldRun{StreamResult: res, shadow: committedLines(t, shadowDir), before: len(half)}
}

// matchesWithoutIDs is heldMatches' matches without their alert ids,
// sorted.
func matchesWithoutIDs(matches []string) []string {
	out := make([]string, len(matches))
	for i, m := range matches {
		rule, rest, _ := strings.Cut(m, " ")
		_, rest, _ = strings.Cut(rest, " ")
		out[i] = rule + " " + rest
	}
	slices.Sort(out)
	return out
}

// checkVersionIDs checks that each alert of got has the id a backtest of
// its version (one of srcs) over input gives its match.
func checkVersionIDs(t *testing.T, got []string, input string, srcs ...string) {
	t.Helper()
	want := map[string]map[string]string{} // by version: match -> id
	for _, src := range srcs {
		ids := map[string]string{}
		for _, l := range heldBacktest(t, src, input) {
			m, id, _ := idMatch(t, l)
			ids[m] = id
		}
		want[loadRules(t, src).Hash] = ids
	}
	for _, l := range got {
		m, id, version := idMatch(t, l)
		if wid, ok := want[version][m]; !ok || wid != id {
			t.Errorf("alert %s of version %.12s: id %s, a backtest of its version gives %q", m, version, id, wid)
		}
	}
}

// idMatch returns what identifies the match of an alert line (its rule,
// its being timed out or not, its key, the lines of its events by stage),
// its id and its version.
func idMatch(t *testing.T, line string) (match, id, version string) {
	t.Helper()
	var a struct {
		ID       string                      `json:"alert_id"`
		Rule     string                      `json:"rule"`
		Version  string                      `json:"ruleset_version"`
		Key      map[string]any              `json:"key"`
		TimedOut bool                        `json:"timed_out"`
		Detected time.Time                   `json:"detected_at"`
		Matched  map[string][]map[string]any `json:"matched"`
	}
	if err := json.Unmarshal([]byte(line), &a); err != nil {
		t.Fatal(err)
	}
	stages := slices.Sorted(func(yield func(string) bool) {
		for s := range a.Matched {
			if !yield(s) {
				return
			}
		}
	})
	var b strings.Builder
	fmt.Fprintf(&b, "%s timedout=%v key=%v at=%v", a.Rule, a.TimedOut, a.Key, event.Time(a.Detected.UnixMilli()))
	for _, s := range stages {
		fmt.Fprintf(&b, " %s:", s)
		for _, ev := range a.Matched[s] {
			fmt.Fprintf(&b, "%v,", ev["line"])
		}
	}
	return b.String(), a.ID, a.Version
}
