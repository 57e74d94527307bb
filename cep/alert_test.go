package cep

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// cloneObserver keeps a clone of every alert, and its encoding then.
type cloneObserver struct {
	enc    *AlertEncoder
	clones []*Alert
	lines  []string
}

func (o *cloneObserver) OnAlert(a *Alert) {
	o.clones = append(o.clones, a.Clone())
	o.lines = append(o.lines, string(o.enc.AppendAlert(nil, a)))
}

// TestAlertClone: a clone of an alert kept by an observer is, after the
// run, the alert it was during the call, though the engine reuses the
// alert and its slices for the next one: its key, matched events and
// emitted values. An observer had no way to keep an alert but to copy
// each slice of it (a copy of the struct changed with the next alert).
func TestAlertClone(t *testing.T) {
	rs := loadRules(t, `ruleset clone
event time ts
rule two_big {
  key card
  pattern {
    begin a where amount > 100
    followedBy b where amount > 100
    within 10m
  }
  emit {
    total: a.amount + b.amount
  }
}
`)
	var in strings.Builder
	base := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	for i := range 8 {
		fmt.Fprintf(&in, `{"ts":%q,"card":"c%d","amount":%d}`+"\n", base.Add(time.Duration(i)*time.Minute).Format(time.RFC3339), i%2, 150+i)
	}
	obs := &cloneObserver{}
	e, err := New(WithRuleset(rs), WithObservers(obs))
	if err != nil {
		t.Fatal(err)
	}
	obs.enc = e.AlertEncoder()
	src, err := NewEventSource(strings.NewReader(in.String()), "events")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := e.Run(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Alerts < 2 || len(obs.clones) != int(sum.Alerts) {
		t.Fatalf("%d alerts, %d clones; want 2 or more, one each", sum.Alerts, len(obs.clones))
	}
	keys := map[string]bool{}
	for i, c := range obs.clones {
		if got := string(obs.enc.AppendAlert(nil, c)); got != obs.lines[i] {
			t.Errorf("alert %d, kept as a clone, is now\n%s\nwas\n%s", i, got, obs.lines[i])
		}
		keys[c.Key[0].String()] = true
	}
	if len(keys) != 2 {
		t.Errorf("the clones' keys %v, want the two cards", keys)
	}
}
