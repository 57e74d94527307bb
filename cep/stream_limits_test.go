package cep

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// limitRules: every a is a partial match until a b, so one key holds as
// many as it has seen a's.
const limitRules = `ruleset limits
event time ts
schema {
  ts: time
  k: string
  kind: string
}
rule a_then_b {
  key k
  pattern {
    begin a where kind == "a"
    followedByAny more oneOrMore where kind == "a"
    followedBy b where kind == "b"
    within 1h
  }
}
`

// TestStreamMonitorDropped: the monitor's Dropped of a rule (the metric
// cepheus_rule_dropped_total) counts, as docs/operations.md says, both
// the partial matches dropped at MaxPartialMatches and the events over
// MaxBufferedEvents, the same figures as the run's summary. It counted
// only the events: a run that dropped thousands of partial matches
// showed 0.
func TestStreamMonitorDropped(t *testing.T) {
	var in strings.Builder
	for i := range 60 {
		kind := "a"
		if i%20 == 19 {
			kind = "b"
		}
		// Key k has an event every second; key burst has 30 of one
		// time, more than its buffer takes.
		fmt.Fprintf(&in, `{"ts":%d,"k":"k","kind":"%s"}`+"\n", 1767225600000+int64(i)*1000, kind)
		if i < 30 {
			fmt.Fprintf(&in, `{"ts":%d,"k":"burst","kind":"a"}`+"\n", 1767225600000)
		}
	}
	events := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(events, []byte(in.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := New(WithRuleset(loadRules(t, limitRules)), WithOutOfOrderness(10*time.Second), WithLimits(4, 20))
	if err != nil {
		t.Fatal(err)
	}
	m := NewStreamMonitor()
	cfg := newStreamDirs(t).config(events)
	cfg.Monitor = m
	sum, err := e.Stream(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	rs := sum.Rules[0]
	if rs.Dropped == 0 || rs.Overflow == 0 {
		t.Fatalf("summary: %d partial matches dropped, %d events over the buffer limit: the input should exceed both limits", rs.Dropped, rs.Overflow)
	}
	rules := m.Snapshot().Rules
	if len(rules) != 1 {
		t.Fatalf("monitor rules %+v, want a_then_b's", rules)
	}
	if got, want := rules[0].Dropped, rs.Dropped+rs.Overflow; got != want {
		t.Errorf("monitor: a_then_b dropped %d, want %d (%d partial matches and %d events, as the summary)", got, want, rs.Dropped, rs.Overflow)
	}
}

// TestDroppedKeysNamed: a summary names the keys at which a rule dropped
// partial matches at its limit, most first, with their counts (each
// key's, as a run over that key's events alone drops), at most 3, in a
// backtest (Engine.Run) and in a stream. It named none: a user could not
// find the hot key. Past 8 keys that drop the counts may be lower bounds
// (Space-Saving), but the keys with the most are found.
func TestDroppedKeysNamed(t *testing.T) {
	// Key kN has N a's before its b, one a a second.
	input := func(ns ...int) string {
		var b strings.Builder
		for i := range slices.Max(ns) + 1 {
			for _, n := range ns {
				kind := "a"
				switch {
				case i == n:
					kind = "b"
				case i > n:
					continue
				}
				fmt.Fprintf(&b, `{"ts":%d,"k":"k%d","kind":"%s"}`+"\n", 1767225600000+int64(i)*1000, n, kind)
			}
		}
		return b.String()
	}
	opts := func() []Option {
		return []Option{WithRuleset(loadRules(t, limitRules)), WithOutOfOrderness(time.Second), WithLimits(4, 0)}
	}
	// alone is the keys that drop, with their drops alone, most first.
	alone := func(ns ...int) []KeyCount {
		var out []KeyCount
		for _, n := range ns {
			sum, _ := runBacktest(t, input(n), opts()...)
			if d := sum.Rules[0].Dropped; d > 0 {
				out = append(out, KeyCount{Key: fmt.Sprintf("k=%q", fmt.Sprint("k", n)), Count: d, Exact: true})
			}
		}
		slices.SortStableFunc(out, func(a, b KeyCount) int { return cmp.Compare(b.Count, a.Count) })
		return out
	}
	check := func(t *testing.T, what string, got, alone []KeyCount, dropped int64) {
		t.Helper()
		if len(got) != min(len(alone), 3) {
			t.Fatalf("%s: dropped at %v, want the 3 of most of %v", what, got, alone)
		}
		var sum int64
		for i, g := range got {
			w := alone[i]
			if g.Key != w.Key || g.Count > w.Count || (g.Exact && g.Count != w.Count) {
				t.Errorf("%s: dropped at %v, want %v (a count exact or a lower bound)", what, got, alone[:len(got)])
			}
			sum += g.Count
		}
		if sum > dropped {
			t.Errorf("%s: %v count more than the %d dropped", what, got, dropped)
		}
	}
	for _, tc := range []struct {
		ns    []int
		exact bool // fewer than 9 keys drop
	}{
		{[]int{3, 9, 30}, true},
		{[]int{6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 40, 35, 30}, false},
	} {
		t.Run(fmt.Sprint(tc.ns), func(t *testing.T) {
			a := alone(tc.ns...)
			if len(a) < 2 || (len(a) > 8) == tc.exact {
				t.Fatalf("keys that drop alone: %v: the input should make several drop (more than 8: %v)", a, !tc.exact)
			}
			sum, _ := runBacktest(t, input(tc.ns...), opts()...)
			r := sum.Rules[0]
			check(t, "backtest", r.DroppedKeys, a, r.Dropped)
			if tc.exact && !slices.Equal(r.DroppedKeys, a[:min(len(a), 3)]) {
				t.Errorf("backtest: dropped at %v, want %v", r.DroppedKeys, a)
			}
			events := filepath.Join(t.TempDir(), "events.jsonl")
			if err := os.WriteFile(events, []byte(input(tc.ns...)), 0o644); err != nil {
				t.Fatal(err)
			}
			e, err := New(opts()...)
			if err != nil {
				t.Fatal(err)
			}
			res, err := e.Stream(context.Background(), newStreamDirs(t).config(events))
			if err != nil {
				t.Fatal(err)
			}
			r = res.Rules[0]
			check(t, "stream", r.DroppedKeys, a, r.Dropped)
			if tc.exact && !slices.Equal(r.DroppedKeys, a[:min(len(a), 3)]) {
				t.Errorf("stream: dropped at %v, want %v", r.DroppedKeys, a)
			}
		})
	}
}
