package cep

import (
	"context"
	"errors"
	"fmt"
	"io"
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

// failingWriter fails every Write after its first n.
type failingWriter struct{ n int }

var errWriter = errors.New("the alert service is down")

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.n == 0 {
		return 0, errWriter
	}
	w.n--
	return len(p), nil
}

// TestOutputWriteError: a run whose alerts or late events writer fails
// stops with an error that names that output and wraps the writer's; it
// said "cep: " and the writer's error alone, so a program with several
// writers could not tell which had failed.
func TestOutputWriteError(t *testing.T) {
	var in strings.Builder
	base := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	for i := range 20000 {
		// Every tenth event is a minute behind: late.
		at := base.Add(time.Duration(i) * time.Second)
		if i%10 == 9 {
			at = at.Add(-time.Minute)
		}
		fmt.Fprintf(&in, `{"ts":%q,"card":"c%d","type":"auth","amount":%d,"country":"US"}`+"\n", at.Format(time.RFC3339), i%7, 100+i%900)
	}
	rs := loadRules(t, engineRules)
	for _, c := range []struct {
		opt  func(io.Writer) Option
		want string
	}{{WithAlerts, "alerts output"}, {WithLate, "late events output"}} {
		e, err := New(WithRuleset(rs), c.opt(&failingWriter{n: 1}))
		if err != nil {
			t.Fatal(err)
		}
		src, err := NewEventSource(strings.NewReader(in.String()), "events")
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.Run(context.Background(), src)
		if !errors.Is(err, errWriter) || !strings.Contains(err.Error(), c.want+": "+errWriter.Error()) {
			t.Errorf("%v, want the writer's error after %q", err, c.want)
		}
	}
}
