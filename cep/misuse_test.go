package cep

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cepheus-cep/cepheus/event"
)

// TestMisuse: what a hurried program gets wrong in the API (a nil option,
// the zero value of a type that a constructor makes, a nil reader or
// context, a source run twice) is an error that says so, never a panic
// (some of them crashed the process from a goroutine of Stream) nor a run
// of nothing that looks like a run of the input.
func TestMisuse(t *testing.T) {
	rs := loadRules(t, engineRules)
	e, err := New(WithRuleset(rs))
	if err != nil {
		t.Fatal(err)
	}
	events := `{"ts":"2026-01-01T10:00:00Z","card":"c1","type":"auth","amount":5,"country":"US"}` + "\n"
	source := func() *EventSource {
		src, err := NewEventSource(strings.NewReader(events), "events")
		if err != nil {
			t.Fatal(err)
		}
		return src
	}
	stream := StreamConfig{Events: filepath.Join(t.TempDir(), "none.jsonl"), StateDir: t.TempDir(), Alerts: io.Discard}
	var nilCtx context.Context
	cases := []struct {
		name string
		call func() error
		want string
	}{
		{"New with a nil option", func() error {
			_, err := New(WithRuleset(rs), nil)
			return err
		}, "option 1 of New is nil"},
		{"New with the zero DeadLetterWriter", func() error {
			_, err := New(WithRuleset(rs), WithDeadLetters(&DeadLetterWriter{}))
			return err
		}, "not made by NewDeadLetterWriter"},
		{"Run of the zero Engine", func() error {
			_, err := new(Engine).Run(context.Background(), source())
			return err
		}, "not made by New"},
		{"Stream of the zero Engine", func() error {
			_, err := new(Engine).Stream(context.Background(), stream)
			return err
		}, "not made by New"},
		{"Run with a nil context", func() error {
			_, err := e.Run(nilCtx, source())
			return err
		}, "nil Context"},
		{"Stream with a nil context", func() error {
			_, err := e.Stream(nilCtx, stream)
			return err
		}, "nil Context"},
		{"Run of the zero EventSource", func() error {
			_, err := e.Run(context.Background(), &EventSource{})
			return err
		}, "no source"},
		{"NewEventSource of a nil reader", func() error {
			_, err := NewEventSource(nil, "events")
			return err
		}, "events: nil reader"},
		{"Stream with the zero StreamMonitor", func() error {
			path := filepath.Join(t.TempDir(), "events.jsonl")
			if err := os.WriteFile(path, []byte(events), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := e.Stream(context.Background(), StreamConfig{Events: path, StateDir: t.TempDir(), Alerts: io.Discard, Monitor: &StreamMonitor{}})
			return err
		}, "the Monitor was not made by NewStreamMonitor"},
		{"New with the zero Labels", func() error {
			_, err := New(WithRuleset(rs), WithObservers(&Labels{}))
			return err
		}, "observer 0 (*cep.Labels) reads a field with no name"},
		{"Run of a source read before", func() error {
			src := source()
			if _, err := e.Run(context.Background(), src); err != nil {
				return nil // not the error looked for
			}
			_, err := e.Run(context.Background(), src)
			return err
		}, "source events was read by an earlier run"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v, want an error saying %q", err, c.want)
			}
		})
	}
	// The zero values' other methods do nothing.
	var src EventSource
	if err := src.Close(); err != nil || src.Name() != "" {
		t.Errorf("the zero EventSource: Close %v, Name %q", err, src.Name())
	}
	if read, total := src.Progress(); read != 0 || total != -1 {
		t.Errorf("the zero EventSource's progress: %d of %d, want 0 of -1", read, total)
	}
	var d DeadLetterWriter
	if err := d.Flush(); err != nil {
		t.Error(err)
	}
	if err := d.Close(); err != nil {
		t.Error(err)
	}
}

// failingStart is an event observer whose Start fails.
type failingStart struct{}

func (failingStart) OnAlert(*Alert)            {}
func (failingStart) Fields() []string          { return nil }
func (failingStart) Start(*event.Schema) error { return errors.New("no database") }
func (failingStart) OnEvent(*event.Event)      {}

// TestRunFailedStartKeepsSource: a run that fails before it reads (an
// observer's Start) leaves its source to another run; it was marked read,
// so the run after said "read by an earlier run".
func TestRunFailedStartKeepsSource(t *testing.T) {
	rs := loadRules(t, engineRules)
	bad, err := New(WithRuleset(rs), WithObservers(failingStart{}))
	if err != nil {
		t.Fatal(err)
	}
	src, err := NewEventSource(strings.NewReader(`{"ts":"2026-01-01T10:00:00Z","card":"c1","type":"auth","amount":5,"country":"US"}`+"\n"), "events")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Run(context.Background(), src); err == nil || !strings.Contains(err.Error(), "no database") {
		t.Fatalf("Run with an observer whose Start fails: %v", err)
	}
	good, err := New(WithRuleset(rs))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := good.Run(context.Background(), src)
	if err != nil || sum.Records != 1 {
		t.Fatalf("Run of the source after a run that failed at its start: %v, %+v; want its 1 record", err, sum)
	}
}
