package cep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/event"
)

// alertIDs returns the alert_id of each alert line.
func alertIDs(t *testing.T, lines []string) []string {
	t.Helper()
	ids := make([]string, len(lines))
	for i, l := range lines {
		var a struct {
			ID string `json:"alert_id"`
		}
		if err := json.Unmarshal([]byte(l), &a); err != nil || a.ID == "" {
			t.Fatalf("alert line %q: %v", l, err)
		}
		ids[i] = a.ID
	}
	return ids
}

// sameMultiset reports whether a and b hold the same strings, as often.
func sameMultiset(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// onAlertRecorder is an OnAlert that records the ids it was called with
// (each call takes 0.1 ms) and fails when two calls overlap, or at call number failAt (from 1;
// 0: never).
type onAlertRecorder struct {
	ids     []string
	busy    atomic.Bool
	overlap bool
	failAt  int
	calls   int
}

var errOnAlert = errors.New("the downstream system is away")

func (r *onAlertRecorder) call(a *Alert) error {
	if !r.busy.CompareAndSwap(false, true) {
		r.overlap = true
		return errors.New("two calls at once")
	}
	defer r.busy.Store(false)
	time.Sleep(100 * time.Microsecond) // a call long enough for another to overlap it
	r.calls++
	if r.calls == r.failAt {
		return errOnAlert
	}
	if a.ID == "" || a.Rule == "" || len(a.Matched) == 0 {
		return errors.New("an alert without its id, rule or events")
	}
	r.ids = append(r.ids, a.ID)
	return nil
}

// TestStreamOnAlert: OnAlert sees every alert the alerts directory gets,
// one call at a time across subtasks; a call that fails stops the run
// with its error, and the run resumed from the state directory calls
// again for the alerts after its latest checkpoint, so that no alert is
// skipped (at least once), while the directory still gets each exactly
// once. Without AlertsDir and Alerts, OnAlert alone is the output.
func TestStreamOnAlert(t *testing.T) {
	log := genCardLog(newStreamRand(streamSeed(t), "onalert"), logConfig{records: 6000})
	lines := make([]string, len(log))
	for i, r := range log {
		lines[i] = r.line
	}
	events := filepath.Join(t.TempDir(), "events.jsonl")
	writeLogFile(t, events, lines, false)
	e := newStreamEngine(t, loadCardsRuleset(t), 16)

	// Uninterrupted, with the directory.
	d := newOutDirs(t)
	c := d.config(events)
	c.Parallelism = 2
	whole := &onAlertRecorder{}
	c.OnAlert = whole.call
	if _, err := e.Stream(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	want := alertIDs(t, committedParts(t, d.alerts, "alerts"))
	if len(want) < 10 {
		t.Fatalf("only %d alerts: the log should raise more", len(want))
	}
	if whole.overlap {
		t.Error("two calls of OnAlert overlapped")
	}
	if !sameMultiset(want, whole.ids) {
		t.Errorf("OnAlert against the alerts directory:\n%s", multisetDiff(want, whole.ids))
	}

	// A call fails halfway: the run stops with its error; resumed, every
	// alert is called for at least once, none that the run never raised.
	d = newOutDirs(t)
	c = d.config(events)
	c.Parallelism = 2
	c.CheckpointRecords = 500
	first := &onAlertRecorder{failAt: len(want) / 2}
	c.OnAlert = first.call
	_, err := e.Stream(context.Background(), c)
	if !errors.Is(err, errOnAlert) || !strings.Contains(err.Error(), "OnAlert") {
		t.Fatalf("Stream with a failing OnAlert: %v, want its error, named", err)
	}
	if first.calls != first.failAt {
		t.Errorf("OnAlert called %d times; its call %d failed, and none should follow (the run stops at it)", first.calls, first.failAt)
	}
	second := &onAlertRecorder{}
	c.OnAlert = second.call
	res, err := e.Stream(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if res.Restored == 0 {
		t.Error("the resumed run restored no checkpoint: it did not test a resume")
	}
	seen := map[string]int{}
	for _, id := range append(first.ids, second.ids...) {
		seen[id]++
	}
	again := 0
	for _, id := range want {
		switch n := seen[id]; {
		case n == 0:
			t.Errorf("alert %s: never called for", id)
		case n > 1:
			again++
		}
		delete(seen, id)
	}
	if len(seen) > 0 {
		t.Errorf("OnAlert called for %d alerts the run does not raise", len(seen))
	}
	t.Logf("first run %d calls, second %d, again %d of %d, restored %d", len(first.ids), len(second.ids), again, len(want), res.Restored)
	if again > len(want)/2+10 {
		t.Errorf("%d of %d alerts called for again: more than the resume should repeat", again, len(want))
	}
	if got := alertIDs(t, committedParts(t, d.alerts, "alerts")); !sameMultiset(want, got) {
		t.Errorf("the alerts directory of the failed and resumed runs:\n%s", multisetDiff(want, got))
	}

	// OnAlert alone.
	d = newOutDirs(t)
	c = StreamConfig{Events: events, StateDir: d.state, CheckpointInterval: streamInterval, Parallelism: 2}
	if _, err := e.Stream(context.Background(), c); err == nil || !strings.Contains(err.Error(), "no alerts output") {
		t.Fatalf("Stream without an alerts output: %v", err)
	}
	alone := &onAlertRecorder{}
	c.OnAlert = alone.call
	if _, err := e.Stream(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if !sameMultiset(want, alone.ids) {
		t.Errorf("OnAlert as the only output:\n%s", multisetDiff(want, alone.ids))
	}
}

// TestStreamOnLateOnDeadLetter: OnLate and OnDeadLetter see every late
// event and dead letter the run counts and its directories get, one call
// at a time with OnAlert's; without the directories they alone are the
// outputs; a call that fails stops the run with its error, named.
func TestStreamOnLateOnDeadLetter(t *testing.T) {
	input := engineInput(3000)
	events := filepath.Join(t.TempDir(), "events.jsonl")
	appendFile(t, events, strings.SplitAfter(strings.TrimSuffix(input, "\n"), "\n"))
	e := streamEngine(t, engineRules)
	card, _ := e.Schema().Slot("card")
	var mu sync.Mutex
	busy := false
	var lates, deads []string
	enter := func() {
		mu.Lock()
		if busy {
			t.Error("two calls overlapped")
		}
		busy = true
		mu.Unlock()
	}
	leave := func() { mu.Lock(); busy = false; mu.Unlock() }
	d := newStreamDirs(t)
	c := d.config(events)
	c.OnAlert = func(*Alert) error { enter(); defer leave(); return nil }
	c.OnLate = func(ev *event.Event) error {
		enter()
		defer leave()
		s, _ := ev.Field(card).AsString()
		lates = append(lates, fmt.Sprintf("%d %s", ev.Line(), s))
		return nil
	}
	c.OnDeadLetter = func(dl DeadLetter) error {
		enter()
		defer leave()
		deads = append(deads, fmt.Sprintf("%s:%d %s %q", dl.File, dl.Line, dl.Reason, dl.Data))
		return nil
	}
	res, err := e.Stream(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if res.Late == 0 || res.Dead == 0 {
		t.Fatalf("%d late events, %d dead letters: the input should give both", res.Late, res.Dead)
	}
	if int64(len(lates)) != res.Late || len(lates) != len(committedLines(t, d.late)) {
		t.Errorf("OnLate called %d times; the run counted %d late events, its directory has %d", len(lates), res.Late, len(committedLines(t, d.late)))
	}
	if int64(len(deads)) != res.Dead || len(deads) != len(committedLines(t, d.dead)) {
		t.Errorf("OnDeadLetter called %d times; the run counted %d dead letters, its directory has %d", len(deads), res.Dead, len(committedLines(t, d.dead)))
	}
	if want := `events.jsonl:2 column 1: want a JSON object`; !strings.HasPrefix(deads[0], want) || !strings.HasSuffix(deads[0], `"not json"`) {
		t.Errorf("the first dead letter: %s, want it to start %q and hold the line", deads[0], want)
	}
	for _, l := range lates {
		if !strings.Contains(l, " c") {
			t.Errorf("a late event without its card: %s", l)
		}
	}

	// Without the directories, and a dead letter's call failing.
	errAway := errors.New("the dead-letter queue is away")
	calls := 0
	d = newStreamDirs(t)
	c = d.config(events)
	c.LateDir, c.DeadDir = "", ""
	c.OnDeadLetter = func(DeadLetter) error {
		if calls++; calls == 3 {
			return errAway
		}
		return nil
	}
	if _, err := e.Stream(context.Background(), c); !errors.Is(err, errAway) || !strings.Contains(err.Error(), "OnDeadLetter") {
		t.Errorf("Stream with a failing OnDeadLetter: %v, want its error, named", err)
	}
	if calls != 3 {
		t.Errorf("OnDeadLetter called %d times; its call 3 failed, and none should follow", calls)
	}
	// Without the directories, OnLate alone gets the late events.
	lateCalls := 0
	d = newStreamDirs(t)
	c = d.config(events)
	c.LateDir, c.DeadDir = "", ""
	c.OnLate = func(*event.Event) error { lateCalls++; return nil }
	res, err = e.Stream(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if int64(lateCalls) != res.Late || res.Late == 0 {
		t.Errorf("OnLate without LateDir called %d times; the run counted %d late events", lateCalls, res.Late)
	}
}
