package cep

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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
