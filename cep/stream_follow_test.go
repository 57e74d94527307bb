package cep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/runtime"
)

// streamEngine is an engine of engineRules as runEngine builds it.
func streamEngine(t *testing.T, rules string) *Engine {
	t.Helper()
	e, err := New(WithRuleset(loadRules(t, rules)), WithOutOfOrderness(10*time.Second), WithWatermarkEvery(3))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// streamDirs is the directories of one streaming job.
type streamDirs struct{ state, alerts, late, dead string }

func newStreamDirs(t *testing.T) streamDirs {
	d := t.TempDir()
	return streamDirs{
		state: filepath.Join(d, "state"), alerts: filepath.Join(d, "alerts"),
		late: filepath.Join(d, "late"), dead: filepath.Join(d, "dead"),
	}
}

func (d streamDirs) config(events string) StreamConfig {
	return StreamConfig{
		Events: events, StateDir: d.state, AlertsDir: d.alerts, LateDir: d.late, DeadDir: d.dead,
		CheckpointInterval: 10 * time.Millisecond, Parallelism: 2,
	}
}

// committedLines returns the lines of the committed part files (*.jsonl)
// of dir, sorted.
func committedLines(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, strings.SplitAfter(string(b), "\n")...)
	}
	lines = slices.DeleteFunc(lines, func(l string) bool { return l == "" })
	slices.Sort(lines)
	return lines
}

// sortedLines returns the lines of s, sorted.
func sortedLines(s string) []string {
	lines := slices.DeleteFunc(strings.SplitAfter(s, "\n"), func(l string) bool { return l == "" })
	slices.Sort(lines)
	return lines
}

// deadKeys returns the line and reason of each dead letter, sorted.
func deadKeys(t *testing.T, lines []string) []string {
	t.Helper()
	var out []string
	for _, l := range lines {
		var d struct {
			Line   int64  `json:"line"`
			Reason string `json:"reason"`
		}
		if err := json.Unmarshal([]byte(l), &d); err != nil {
			t.Fatalf("dead letter %q: %v", l, err)
		}
		b, _ := json.Marshal(d)
		out = append(out, string(b))
	}
	slices.Sort(out)
	return out
}

// checkLikeBacktest checks that the committed outputs in d are those of a
// backtest of input: the same alert and late lines, and dead letters of
// the same lines for the same reasons.
func checkLikeBacktest(t *testing.T, d streamDirs, input string) {
	t.Helper()
	whole, err := runEngine(t, input)
	if err != nil {
		t.Fatal(err)
	}
	if whole.sum.Alerts == 0 || whole.sum.Late == 0 || whole.sum.Dead == 0 {
		t.Fatalf("the input should give alerts, late events and dead letters: %+v", whole.sum)
	}
	if got, want := committedLines(t, d.alerts), sortedLines(whole.alerts); !slices.Equal(got, want) {
		t.Errorf("%d alerts committed, the backtest has %d (or they differ)", len(got), len(want))
	}
	if got, want := committedLines(t, d.late), sortedLines(whole.late); !slices.Equal(got, want) {
		t.Errorf("%d late events committed, the backtest has %d (or they differ)", len(got), len(want))
	}
	if got := int64(len(committedLines(t, d.dead))); got != whole.sum.Dead {
		t.Errorf("%d dead letters committed, the backtest has %d", got, whole.sum.Dead)
	}
}

// TestStreamFollow follows a file as it grows, with a line whose newline
// comes later, stops the run by cancelling it, then lets a bounded run
// on the same state finish the file: together they commit exactly what a
// backtest of the whole file gives.
func TestStreamFollow(t *testing.T) {
	input := engineInput(400)
	lines := strings.SplitAfter(input, "\n")
	half := len(lines) / 2
	d := newStreamDirs(t)
	events := filepath.Join(t.TempDir(), "events.jsonl")
	first := strings.Join(lines[:half], "")
	partial := lines[half][:len(lines[half])/2]
	if err := os.WriteFile(events, []byte(first+partial), 0o644); err != nil {
		t.Fatal(err)
	}
	want := int64(strings.Count(first, "\n"))
	f := startFollowing(t, d, events, want)
	// The partial line is held back, never decoded, while it lacks its
	// newline.
	time.Sleep(50 * time.Millisecond)
	if got := f.records.Load(); got != want {
		t.Fatalf("%d records read, want %d: the partial line was read", got, want)
	}
	res := f.stop(t)
	if res.Finished || res.Stats.LastCheckpoint == 0 {
		t.Fatalf("cancelled run: finished %v, last checkpoint %d", res.Finished, res.Stats.LastCheckpoint)
	}
	out, err := os.OpenFile(events, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := out.WriteString(strings.TrimPrefix(strings.Join(lines[half:], ""), partial)); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	cfg := d.config(events)
	cfg.Parallelism = 3
	res2, err := streamEngine(t, engineRules).Stream(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res2.Restored != res.Stats.LastCheckpoint || !res2.Finished {
		t.Fatalf("second run restored %d (want %d), finished %v", res2.Restored, res.Stats.LastCheckpoint, res2.Finished)
	}
	checkLikeBacktest(t, d, input)
}

// TestStreamOutputRecreated: an output directory removed and made again
// under the same path (a volume not mounted, a link moved) is not the
// directory the checkpoint's run wrote to: a restore that finds a part
// file of its checkpoint neither pending nor committed there is refused,
// not taken as consumed (the pending file of the real directory, left
// there by a crash after the checkpoint completed, would never be
// committed); with the real directory back, it commits it.
func TestStreamOutputRecreated(t *testing.T) {
	input := engineInput(300)
	d := newStreamDirs(t)
	events := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(events, []byte(input), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := d.config(events)
	cfg.CheckpointInterval, cfg.Parallelism = time.Hour, 1 // the final checkpoint alone
	if _, err := streamEngine(t, engineRules).Stream(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	// A crash after the final checkpoint completed, before its part file
	// was renamed: pending again.
	parts, err := filepath.Glob(filepath.Join(d.alerts, "alerts-*.jsonl"))
	if err != nil || len(parts) == 0 {
		t.Fatalf("committed part files %v (%v), want some", parts, err)
	}
	for _, p := range parts {
		pending := "." + strings.TrimSuffix(filepath.Base(p), ".jsonl") + ".pending"
		if err := os.Rename(p, filepath.Join(d.alerts, pending)); err != nil {
			t.Fatal(err)
		}
	}
	real := d.alerts + ".real"
	if err := os.Rename(d.alerts, real); err != nil {
		t.Fatal(err)
	}
	_, err = streamEngine(t, engineRules).Stream(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "is missing from "+d.alerts) {
		t.Fatalf("a restore into a directory made again at the same path: %v, want the part file missing", err)
	}
	if err := os.RemoveAll(d.alerts); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(real, d.alerts); err != nil {
		t.Fatal(err)
	}
	if _, err := streamEngine(t, engineRules).Stream(context.Background(), cfg); err != nil {
		t.Fatalf("a restore with the real directory back: %v", err)
	}
	checkLikeBacktest(t, d, input)
}

// TestStreamStdin reads standard input; a second run on the finished
// state reads nothing and writes nothing.
func TestStreamStdin(t *testing.T) {
	input := engineInput(300)
	d := newStreamDirs(t)
	cfg := d.config("-")
	cfg.Stdin = strings.NewReader(input)
	res, err := streamEngine(t, engineRules).Stream(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Finished || res.AlreadyFinished {
		t.Fatalf("finished %v, already finished %v", res.Finished, res.AlreadyFinished)
	}
	checkLikeBacktest(t, d, input)
	before := committedLines(t, d.alerts)
	cfg.Stdin = strings.NewReader(input)
	res, err = streamEngine(t, engineRules).Stream(context.Background(), cfg)
	if err != nil || !res.AlreadyFinished {
		t.Fatalf("second run: %v, already finished %v", err, res != nil && res.AlreadyFinished)
	}
	if after := committedLines(t, d.alerts); !slices.Equal(before, after) {
		t.Errorf("the second run wrote alerts: %d lines, then %d", len(before), len(after))
	}
}

// TestStreamRefusedRestores: a corrupt checkpoint is refused with
// ErrRestore and a message that says why, and so is one of another kind
// of input; one of other rules is not (the rules given are deployed at
// the restore; here the run had finished).
func TestStreamRefusedRestores(t *testing.T) {
	input := engineInput(200)
	events := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(events, []byte(input), 0o644); err != nil {
		t.Fatal(err)
	}
	d := newStreamDirs(t)
	if _, err := streamEngine(t, engineRules).Stream(context.Background(), d.config(events)); err != nil {
		t.Fatal(err)
	}
	res, err := streamEngine(t, backtestRules).Stream(context.Background(), d.config(events))
	if err != nil || !res.AlreadyFinished {
		t.Errorf("other rules: %v, want the finished run's result", err)
	}
	// Another kind of input: standard input over a run of files (a state
	// directory given to the wrong run), not "nothing to do".
	stdin := d.config("-")
	stdin.Stdin = strings.NewReader(input)
	_, err = streamEngine(t, engineRules).Stream(context.Background(), stdin)
	if want := "holds the state of a run over files, and this run reads stdin"; !errors.Is(err, ErrRestore) || !strings.Contains(err.Error(), want) {
		t.Errorf("the state of a run over files given to one over stdin: %v; want ErrRestore saying %q", err, want)
	}
	metas, err := filepath.Glob(filepath.Join(d.state, "chk-*", "meta", "job"))
	if err != nil || len(metas) == 0 {
		t.Fatalf("no job metadata in %s: %v", d.state, err)
	}
	for _, m := range metas {
		b, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/2] ^= 0x20
		if err := os.WriteFile(m, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err = streamEngine(t, engineRules).Stream(context.Background(), d.config(events))
	if !errors.Is(err, ErrRestore) || !strings.Contains(err.Error(), "checkpoint") {
		t.Errorf("corrupt checkpoint: %v, want ErrRestore", err)
	}
}

// TestStreamOutputLeftOut runs a job with late events and dead letters
// to directories, then without those outputs, then with them again, each
// run resuming from the one before (the third refused the directories'
// own part files, as if ahead of the checkpoint it restored). The
// directories then hold the backtest's late events and dead letters but
// those of the second run, once: the first run's part files as they were
// and the third run's after the second run's checkpoints.
func TestStreamOutputLeftOut(t *testing.T) {
	input := engineInput(3000)
	events := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(events, []byte(input), 0o644); err != nil {
		t.Fatal(err)
	}
	whole, err := runEngine(t, input)
	if err != nil {
		t.Fatal(err)
	}
	d := newStreamDirs(t)
	// run streams the input, checkpointing every 100 records, and stops
	// after checkpoint stopAt (0: at the end of the input), once the batch
	// it reads is routed (1024 records).
	run := func(what string, outputs bool, stopAt int64) *StreamResult {
		t.Helper()
		cfg := d.config(events)
		cfg.CheckpointInterval, cfg.CheckpointRecords = time.Hour, 100
		if !outputs {
			cfg.LateDir, cfg.DeadDir = "", ""
		}
		if stopAt > 0 {
			cfg.hooks.afterCommit = func(id int64) bool { return id == stopAt }
		}
		res, err := streamEngine(t, engineRules).Stream(context.Background(), cfg)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return res
	}
	first := run("first run, with the outputs", true, 3)
	firstLate, firstDead := partFiles(t, d.late), partFiles(t, d.dead)
	second := run("second run, without them", false, first.Stats.LastCheckpoint+1)
	third := run("third run, with them again", true, 0)
	if second.Restored != first.Stats.LastCheckpoint || third.Restored != second.Stats.LastCheckpoint ||
		second.Finished || !third.Finished {
		t.Fatalf("the runs restored %d, %d (want %d, %d), finished %v, %v (want false, true)",
			second.Restored, third.Restored, first.Stats.LastCheckpoint, second.Stats.LastCheckpoint, second.Finished, third.Finished)
	}
	// Each run has late events and dead letters of its own.
	late := []int64{first.Stats.Late, second.Stats.Late, third.Stats.Late}
	dead := []int64{first.Stats.Dead, second.Stats.Dead, third.Stats.Dead}
	if late[0] == 0 || late[1] == late[0] || late[2] == late[1] || late[2] != whole.sum.Late ||
		dead[0] == 0 || dead[1] == dead[0] || dead[2] == dead[1] || dead[2] != whole.sum.Dead {
		t.Fatalf("late events %v and dead letters %v by the end of each run; the backtest has %d and %d, and each run should add some",
			late, dead, whole.sum.Late, whole.sum.Dead)
	}
	gap := second.Stats.LastCheckpoint
	lateLines := checkLeftOut(t, d.late, firstLate, gap, whole.sum.Late-(late[1]-late[0]))
	checkLeftOut(t, d.dead, firstDead, gap, whole.sum.Dead-(dead[1]-dead[0]))
	backtest := sortedLines(whole.late)
	for _, l := range lateLines {
		if _, found := slices.BinarySearch(backtest, l); !found {
			t.Errorf("late event %q is not one of the backtest's", l)
		}
	}
}

// partFiles returns the content of each committed part file of dir, by
// name.
func partFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = string(b)
	}
	return out
}

// checkLeftOut checks the committed part files of dir after a run that
// left the output out, up to checkpoint gap, and one with it again: the
// files of the run before (before) are there as they were, the others
// are of checkpoints after gap, and they hold n lines, none twice. It
// returns the lines, sorted.
func checkLeftOut(t *testing.T, dir string, before map[string]string, gap int64, n int64) []string {
	t.Helper()
	after := partFiles(t, dir)
	for name, b := range before {
		if after[name] != b {
			t.Errorf("%s: part file %s of the first run changed or went", dir, name)
		}
	}
	for name := range after {
		m := partFile.FindStringSubmatch(name)
		if m == nil {
			t.Errorf("%s: %s is not a committed part file", dir, name)
			continue
		}
		if c, _ := strconv.ParseInt(m[3], 10, 64); before[name] == "" && c <= gap {
			t.Errorf("%s: %s is of checkpoint %d, one of the run without the output (up to %d)", dir, name, c, gap)
		}
	}
	lines := committedLines(t, dir)
	if int64(len(lines)) != n || len(slices.Compact(slices.Clone(lines))) != len(lines) {
		t.Errorf("%s: %d lines (%d distinct), want %d, none twice", dir, len(lines), len(slices.Compact(slices.Clone(lines))), n)
	}
	return lines
}

// TestStreamDirectorySideBySide splits an ordered input into two files
// that cover the same period, line by line in turn: read side by side
// (each record from the file whose watermark is lowest), the directory
// gives the backtest's alerts of the whole input, also when a run stops
// at a checkpoint and the next resumes with another parallelism. (Read
// one file after the other, the second file's events would be late.)
func TestStreamDirectorySideBySide(t *testing.T) {
	var whole strings.Builder
	files := [2]strings.Builder{}
	x := uint64(7)
	next := func(m uint64) uint64 {
		x = x*6364136223846793005 + 1442695040888963407
		return (x >> 33) % m
	}
	base := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	types := []string{"auth", "auth", "capture"}
	countries := []string{"US", "FR", "DE"}
	for i := range 800 {
		line := fmt.Sprintf(`{"ts":%q,"card":"c%d","type":%q,"amount":%d,"country":%q}`+"\n",
			base.Add(time.Duration(i)*7*time.Second).Format(time.RFC3339), next(6), types[next(3)], next(600), countries[next(3)])
		whole.WriteString(line)
		files[i%2].WriteString(line)
	}
	want, err := runEngine(t, whole.String())
	if err != nil {
		t.Fatal(err)
	}
	if want.sum.Alerts < 20 || want.sum.Late != 0 {
		t.Fatalf("the input should give alerts and no late event: %+v", want.sum)
	}
	dir := t.TempDir()
	for i := range files {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("part-%d.jsonl", i)), []byte(files[i].String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d := newStreamDirs(t)
	cfg := d.config(dir)
	cfg.CheckpointRecords = 100
	cfg.hooks.afterCommit = func(id int64) bool { return id == 3 }
	res, err := streamEngine(t, engineRules).Stream(context.Background(), cfg)
	if err != nil || res.Finished {
		t.Fatalf("first run: %v, finished %v (want a stop at checkpoint 3)", err, res != nil && res.Finished)
	}
	cfg = d.config(dir)
	cfg.CheckpointRecords, cfg.Parallelism = 100, 3
	res, err = streamEngine(t, engineRules).Stream(context.Background(), cfg)
	if err != nil || !res.Finished || res.Restored == 0 {
		t.Fatalf("second run: %v, finished %v, restored %d", err, res != nil && res.Finished, res.Restored)
	}
	if res.Late != 0 {
		t.Errorf("%d late events, want none", res.Late)
	}
	normalize := func(lines []string) []string {
		out := make([]string, len(lines))
		for i, l := range lines {
			var a struct {
				ID string `json:"alert_id"`
			}
			if err := json.Unmarshal([]byte(l), &a); err != nil {
				t.Fatal(err)
			}
			out[i] = a.ID
		}
		slices.Sort(out)
		return out
	}
	if got, w := normalize(committedLines(t, d.alerts)), normalize(sortedLines(want.alerts)); !slices.Equal(got, w) {
		t.Errorf("%d alerts committed, the backtest of the whole input has %d (or they differ)", len(got), len(w))
	}
}

// TestStreamEventsChecked: a missing events path, and a directory with
// no file to read when not followed (read to its end at once, the run
// would be marked finished), fail before any state is made; followed, an
// empty directory is waited on.
func TestStreamEventsChecked(t *testing.T) {
	e := streamEngine(t, engineRules)
	empty := t.TempDir()
	for _, c := range []struct{ events, want string }{
		{filepath.Join(empty, "nope.jsonl"), "no such file or directory"},
		{empty, "has no file to read"},
	} {
		d := newStreamDirs(t)
		_, err := e.Stream(context.Background(), d.config(c.events))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Stream = %v, want an error saying %q", c.events, err, c.want)
		}
		if _, err := os.Stat(d.state); !os.IsNotExist(err) {
			t.Errorf("%s: the state directory was made (%v)", c.events, err)
		}
	}
	d := newStreamDirs(t)
	cfg := d.config(empty)
	cfg.Follow, cfg.PollInterval = true, time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := e.Stream(ctx, cfg); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("followed empty directory: Stream = %v, want it to wait until the context ends", err)
	}
}

// TestMonitorCommitted: StreamMonitor.Committed follows a checkpoint once
// every subtask has committed its outputs, not once the checkpoint is
// durable (MonitorSnapshot LastCheckpoint), a moment before; a job
// restored from a checkpoint starts with that one's outputs committed.
func TestMonitorCommitted(t *testing.T) {
	input := deployInput(60)
	events := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(events, []byte(input), 0o644); err != nil {
		t.Fatal(err)
	}
	d := newStreamDirs(t)
	var hold atomic.Bool
	run := func(steps func(m *StreamMonitor)) {
		t.Helper()
		cfg := d.config(events)
		cfg.CheckpointInterval = time.Hour
		cfg.hooks.beforeSinkCommit = func(int, int64) {
			for hold.Load() {
				time.Sleep(time.Millisecond)
			}
		}
		f := follow(t, streamEngine(t, deployV1), cfg)
		waitMonitor(t, f.m, int64(strings.Count(input, "\n")))
		steps(f.m)
		f.stop()
	}
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("after 20 s: %s", what)
			}
		}
	}
	var last int64
	run(func(m *StreamMonitor) {
		before := m.Snapshot().Progress.LastCheckpoint
		hold.Store(true)
		m.RequestCheckpoint()
		waitUntil("no checkpoint", func() bool { return m.Snapshot().Progress.LastCheckpoint > before })
		id := m.Snapshot().Progress.LastCheckpoint
		time.Sleep(20 * time.Millisecond)
		if c := m.Committed(); c >= id {
			t.Errorf("Committed is %d while the subtasks have not committed checkpoint %d's outputs", c, id)
		}
		hold.Store(false)
		waitUntil(fmt.Sprintf("checkpoint %d's outputs not committed", id), func() bool { return m.Committed() >= id })
		last = id
	})
	run(func(m *StreamMonitor) {
		restored := m.Snapshot().Progress.LastCheckpoint
		if restored <= last {
			t.Fatalf("restored checkpoint %d, want one after %d (the stop's)", restored, last)
		}
		if c := m.Committed(); c != restored {
			t.Errorf("Committed of a restored job before its first checkpoint: %d, want the restored %d", c, restored)
		}
	})
}

// followed is a job of the tests that streams a followed input in the
// background, with a monitor and a log of its own.
// TestMonitorRequestInFlight: a checkpoint asked for while one is in
// flight is one after it (the one in flight may have begun before the
// records the caller has in mind): RequestCheckpoint returns the id in
// flight, and the next checkpoint is taken for the request.
func TestMonitorRequestInFlight(t *testing.T) {
	input := deployInput(60)
	events := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(events, []byte(input), 0o644); err != nil {
		t.Fatal(err)
	}
	d := newStreamDirs(t)
	cfg := d.config(events)
	cfg.CheckpointInterval = time.Hour
	var holdNext atomic.Bool
	begun, release := make(chan int64, 1), make(chan struct{})
	cfg.hooks.afterBarrier = func(id int64) {
		if holdNext.CompareAndSwap(true, false) {
			begun <- id
			<-release // the coordinator waits: checkpoint id stays in flight
		}
	}
	f := follow(t, streamEngine(t, deployV1), cfg)
	waitMonitor(t, f.m, int64(strings.Count(input, "\n")))
	holdNext.Store(true)
	first := f.m.RequestCheckpoint()
	var id int64
	select {
	case id = <-begun:
	case <-time.After(20 * time.Second):
		t.Fatal("no checkpoint began after 20 s")
	}
	if id <= first {
		t.Fatalf("checkpoint %d began for a request that returned %d", id, first)
	}
	after := f.m.RequestCheckpoint()
	close(release)
	if after != id {
		t.Errorf("a request while checkpoint %d is in flight returned %d, want %d", id, after, id)
	}
	for deadline := time.Now().Add(20 * time.Second); f.m.Snapshot().Progress.LastCheckpoint <= id; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 20 s: last checkpoint %d, want one after %d, the request's", f.m.Snapshot().Progress.LastCheckpoint, id)
		}
	}
	f.stop()
}

type followed struct {
	t      *testing.T
	m      *StreamMonitor
	cancel context.CancelFunc
	done   chan followedEnd
	ended  chan struct{} // closed once Stream returned
	mu     sync.Mutex
	logs   []string
}

type followedEnd struct {
	res *StreamResult
	err error
}

// follow starts e streaming cfg's input, followed and polled every 2 ms,
// into f.m and f.lines.
func follow(t *testing.T, e *Engine, cfg StreamConfig) *followed {
	f := &followed{t: t, m: NewStreamMonitor(), done: make(chan followedEnd, 1), ended: make(chan struct{})}
	cfg.Follow, cfg.PollInterval, cfg.Monitor = true, 2*time.Millisecond, f.m
	cfg.Logf = func(format string, args ...any) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.logs = append(f.logs, fmt.Sprintf(format, args...))
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	// At the end of a test that failed while the job ran, the job is
	// stopped and waited for before the test's directories are removed
	// (else the removal races its last checkpoint and leaves them).
	t.Cleanup(func() {
		cancel()
		select {
		case <-f.ended:
		case <-time.After(time.Minute):
			t.Errorf("the followed job did not end within a minute of its cancellation")
		}
	})
	go func() {
		defer close(f.ended)
		res, err := e.Stream(ctx, cfg)
		f.done <- followedEnd{res, err}
	}()
	return f
}

// end cancels the job and returns what Stream returned.
func (f *followed) end() (*StreamResult, error) {
	f.cancel()
	end := <-f.done
	return end.res, end.err
}

// stop is end, failing the test unless the job ended by the
// cancellation.
func (f *followed) stop() *StreamResult {
	f.t.Helper()
	res, err := f.end()
	if !errors.Is(err, context.Canceled) {
		f.t.Fatalf("Stream, cancelled: %v", err)
	}
	return res
}

// lines returns the lines the job logged so far.
func (f *followed) lines() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.logs)
}

// TestStreamStateInUse: a second Stream given the state directory of a
// running one fails at once, saying the directory is in use by another
// run, and the first goes on undisturbed to its final checkpoint.
func TestStreamStateInUse(t *testing.T) {
	input := engineInput(200)
	d := newStreamDirs(t)
	events := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(events, []byte(input), 0o644); err != nil {
		t.Fatal(err)
	}
	want := int64(strings.Count(input, "\n"))
	f := startFollowing(t, d, events, want)
	second := d.config(events)
	second.Follow, second.PollInterval = true, 2*time.Millisecond
	_, err := streamEngine(t, engineRules).Stream(context.Background(), second)
	if err == nil || !strings.Contains(err.Error(), "is in use by another run") {
		t.Fatalf("a second Stream on the state directory: %v, want it in use", err)
	}
	res := f.stop(t)
	if res.Stats.LastCheckpoint == 0 || res.Records != want {
		t.Fatalf("the first run: checkpoint %d, %d records; want a checkpoint and %d records", res.Stats.LastCheckpoint, res.Records, want)
	}
}

// following is a Stream of engineRules following a file, run by
// startFollowing.
type following struct {
	records atomic.Int64 // read so far, as the progress reports them
	cancel  context.CancelFunc
	done    chan error
	res     *StreamResult
}

// startFollowing starts a Stream following events with the dirs of d,
// and returns once it has read want records (failing t after 20 s).
func startFollowing(t *testing.T, d streamDirs, events string, want int64) *following {
	t.Helper()
	f := &following{done: make(chan error, 1)}
	cfg := d.config(events)
	cfg.Follow, cfg.PollInterval = true, 2*time.Millisecond
	cfg.ProgressInterval = time.Millisecond
	cfg.Progress = func(p StreamProgress) { f.records.Store(p.Records) }
	var ctx context.Context
	ctx, f.cancel = context.WithCancel(context.Background())
	t.Cleanup(f.cancel)
	go func() {
		var err error
		f.res, err = streamEngine(t, engineRules).Stream(ctx, cfg)
		f.done <- err
	}()
	for deadline := time.Now().Add(20 * time.Second); f.records.Load() < want; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("followed %d records of %d", f.records.Load(), want)
		}
	}
	return f
}

// stop cancels the Stream, which must end with the context's error, and
// returns its result.
func (f *following) stop(t *testing.T) *StreamResult {
	t.Helper()
	f.cancel()
	if err := <-f.done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Stream after cancel: %v, want context.Canceled", err)
	}
	return f.res
}

// TestStreamQuietCheckpoints: a followed job with nothing new to read
// takes no checkpoint at its interval (each is skipped and counted), but
// one asked for, and the next after new input; nothing is lost: the run
// finished on the same state equals the backtest.
func TestStreamQuietCheckpoints(t *testing.T) {
	input := engineInput(300)
	lines := strings.SplitAfter(input, "\n")
	first := strings.Join(lines[:len(lines)/2], "")
	d := newStreamDirs(t)
	events := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(events, []byte(first), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := d.config(events)
	cfg.CheckpointInterval = 5 * time.Millisecond
	f := follow(t, streamEngine(t, engineRules), cfg)
	waitMonitor(t, f.m, int64(strings.Count(first, "\n")))
	waitFor := func(what string, cond func(StreamProgress) bool) StreamProgress {
		t.Helper()
		return waitSnapshot(t, f.m, what, func(sn MonitorSnapshot) bool { return cond(sn.Progress) }).Progress
	}
	quiet := waitFor("a checkpoint skipped", func(p StreamProgress) bool { return p.Skipped > 0 })
	quietAt := time.Now()
	// Forty more intervals with nothing to read: no checkpoint.
	later := waitFor("skipping going on", func(p StreamProgress) bool { return p.Skipped >= quiet.Skipped+40 })
	// The state is durable as of the latest skipped checkpoint (nothing
	// changed since the last one), not of the last one taken.
	if at := f.m.Snapshot().DurableAt; !at.After(quietAt) {
		t.Errorf("the state durable at %v, before the %d checkpoints skipped since %v", at, later.Skipped-quiet.Skipped, quietAt)
	}
	if later.LastCheckpoint != quiet.LastCheckpoint || later.Checkpoints != quiet.Checkpoints {
		t.Fatalf("checkpoints %d (last %d) became %d (last %d) with nothing to read", quiet.Checkpoints, quiet.LastCheckpoint, later.Checkpoints, later.LastCheckpoint)
	}
	if sn := f.m.Snapshot(); sn.CheckpointsSkipped < later.Skipped {
		t.Errorf("the monitor counts %d checkpoints skipped, the job %d", sn.CheckpointsSkipped, later.Skipped)
	}
	if !slices.ContainsFunc(f.lines(), func(l string) bool {
		return strings.HasPrefix(l, fmt.Sprintf("nothing new since checkpoint %d: ", quiet.LastCheckpoint))
	}) {
		t.Errorf("the log does not say that checkpoints wait: %q", f.lines())
	}
	// One asked for is taken.
	f.m.RequestCheckpoint()
	asked := waitFor("the checkpoint asked for taken", func(p StreamProgress) bool { return p.LastCheckpoint > later.LastCheckpoint })
	// New input: a checkpoint follows it.
	out, err := os.OpenFile(events, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := out.WriteString(strings.Join(lines[len(lines)/2:], "")); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	all := int64(strings.Count(input, "\n"))
	read := waitFor("the appended lines read", func(p StreamProgress) bool { return p.Records == all })
	waitFor("a checkpoint after new input", func(p StreamProgress) bool {
		return p.LastCheckpoint > max(asked.LastCheckpoint, read.LastCheckpoint)
	})
	f.stop()
	res, err := streamEngine(t, engineRules).Stream(context.Background(), d.config(events))
	if err != nil || !res.Finished {
		t.Fatalf("the run to the end: %v (finished %v)", err, res != nil && res.Finished)
	}
	checkLikeBacktest(t, d, input)
}

// TestStreamQuietProcessingTime: in processing time a timer fires on the
// wall clock, with no record read and no watermark forwarded; the alert it
// writes is committed at the next checkpoint, not up to quietEvery later
// (the checkpoints of a quiet input were skipped, so an absence rule's
// alert waited 10 minutes for its commit, and the progress did not count
// it). Checkpoints are skipped again once it is.
func TestStreamQuietProcessingTime(t *testing.T) {
	const src = `ruleset pt

event time ts

schema {
  ts: time
  type: string
  card: string
}

rule not_captured {
  severity low
  key card
  pattern {
    begin auth where type == "auth"
    notFollowedBy capture where type == "capture"
    within 300ms
  }
}
`
	e, err := New(WithRuleset(loadRules(t, src)))
	if err != nil {
		t.Fatal(err)
	}
	d := newStreamDirs(t)
	events := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(events, []byte(`{"ts":"2026-01-01T10:00:00Z","type":"auth","card":"k1"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := d.config(events)
	cfg.Time = ProcessingTime
	f := follow(t, e, cfg)
	waitMonitor(t, f.m, 1)
	deadline := time.Now().Add(10 * time.Second)
	for len(committedLines(t, d.alerts)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the timer's alert not committed after 10 s (%+v)", f.m.Snapshot().Progress.StreamStats)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for deadline := time.Now().Add(10 * time.Second); f.m.Snapshot().Progress.Alerts != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the progress counts %d alerts, 1 committed", f.m.Snapshot().Progress.Alerts)
		}
	}
	// Quiet again: forty intervals without a checkpoint.
	committed := f.m.Snapshot().Progress
	deadline = time.Now().Add(10 * time.Second)
	for p := committed; p.Skipped < committed.Skipped+40; p = f.m.Snapshot().Progress {
		if p.LastCheckpoint > committed.LastCheckpoint+2 {
			t.Fatalf("checkpoints go on after the alert's commit: %d, then %d", committed.LastCheckpoint, p.LastCheckpoint)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint skipped after the alert's commit (%+v)", p.StreamStats)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The log says so, and that a window's alert still commits (it read
	// "checkpoints wait for input", as if nothing more would commit).
	if !slices.ContainsFunc(f.lines(), func(l string) bool {
		return strings.Contains(l, ": while nothing is read, checkpoints wait for input, or an alert of a window that ends on the wall clock (one at least every 10m0s)")
	}) {
		t.Errorf("the log does not say what checkpoints wait for in processing time: %q", f.lines())
	}
	f.stop()
	if got := committedLines(t, d.alerts); len(got) != 1 {
		t.Errorf("%d alerts committed, want 1: %q", len(got), got)
	}
}

// TestStreamProcessingTimeUntrustedTimes: in processing time a record
// without its time field, and one whose time is far ahead of the rest,
// are events like the others: the clock stamps them, and no watermark
// moves on their times. They went to the dead letters ("missing time
// field", "more than 24h0m0s ahead of the stream ... would make the rest
// late", untrue in processing time) (the processing-time trial).
func TestStreamProcessingTimeUntrustedTimes(t *testing.T) {
	const src = `ruleset pt

event time ts

schema {
  ts: time
  type: string
  card: string
}

rule captured {
  severity low
  key card
  pattern {
    begin auth where type == "auth"
    followedBy capture where type == "capture"
    within 1m
  }
}
`
	e, err := New(WithRuleset(loadRules(t, src)), WithInputPolicy(InputPolicy{MaxAhead: 24 * time.Hour, CheckNumericTimes: true}))
	if err != nil {
		t.Fatal(err)
	}
	d := newStreamDirs(t)
	events := filepath.Join(t.TempDir(), "events.jsonl")
	lines := `{"type":"auth","card":"k1"}
{"ts":"2026-01-01T10:00:00Z","type":"auth","card":"k2"}
{"ts":null,"type":"capture","card":"k1"}
{"ts":"2031-01-01T10:00:00Z","type":"capture","card":"k2"}
`
	if err := os.WriteFile(events, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := d.config(events)
	cfg.Time = ProcessingTime
	res, err := e.Stream(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Stats.Dead != 0 || res.Stats.Decoded != 4 {
		t.Errorf("%d records decoded, %d dead letters (%q); want 4 and none", res.Stats.Decoded, res.Stats.Dead, committedLines(t, d.dead))
	}
	if got := committedLines(t, d.alerts); len(got) != 2 {
		t.Errorf("%d alerts, want 2 (k1, k2): %q", len(got), got)
	}
}

// TestStreamFollowCloseInactive: a followed directory's files closed for
// inactivity leave the monitor's partition watermarks (one metric series
// a file, for ever, in a directory of rotated files) and do not hold the
// watermark back once idle, nor the wall-clock advance; a closed file that grows is read on, once,
// and is listed again while open; a restart from a checkpoint holding
// closed files' positions reads each on from there.
func TestStreamFollowCloseInactive(t *testing.T) {
	dir := t.TempDir()
	line := func(minute int) string {
		return fmt.Sprintf(`{"ts":"2026-01-01T10:%02d:00Z","card":"c1","type":"auth","amount":1,"country":"US"}`+"\n", minute)
	}
	const n = 20
	for i := range n {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("old-%02d.jsonl", i)), []byte(line(0)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	live := filepath.Join(dir, "live.jsonl")
	appendLine := func(path, line string) {
		t.Helper()
		f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(line); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	appendLine(live, line(0))
	d := newStreamDirs(t)
	cfg := d.config(dir)
	cfg.CloseInactive, cfg.IdleTimeout, cfg.WallClockAdvance = 20*time.Millisecond, 20*time.Millisecond, true
	allClosed := func(records int64) func(s MonitorSnapshot) bool {
		return func(s MonitorSnapshot) bool {
			return s.Progress.Records == records && s.Partitions == n+1 && len(s.PartitionWatermarks) == 0
		}
	}
	f := follow(t, streamEngine(t, engineRules), cfg)
	waitSnapshot(t, f.m, "all read and closed", allClosed(n+1))
	// Closed, the files are idle followed partitions: the wall-clock
	// advance moves the watermark past the largest one they reached
	// (10:00 less the bound).
	reached := time.Date(2026, 1, 1, 9, 59, 50, 0, time.UTC)
	waitSnapshot(t, f.m, "the watermark advanced by the wall clock", func(s MonitorSnapshot) bool {
		return s.Progress.Watermark > event.Time(reached.Add(100*time.Millisecond).UnixMilli())
	})

	// live.jsonl grows while its lines keep coming (more often than it
	// would close): it is opened again, listed, and the closed idle files
	// do not hold the watermark back.
	at := time.Date(2026, 1, 1, 10, 10, 0, 0, time.UTC)
	added := int64(0)
	waitSnapshot(t, f.m, "live.jsonl open again and the watermark within a second of 10:10 less the bound", func(s MonitorSnapshot) bool {
		if _, ok := s.PartitionWatermarks["live.jsonl"]; ok && s.Progress.Watermark >= event.Time(at.Add(-11*time.Second).UnixMilli()) {
			return true
		}
		appendLine(live, line(10))
		added++
		time.Sleep(2 * time.Millisecond)
		return false
	})
	waitSnapshot(t, f.m, "all read and closed again", allClosed(n+1+added))
	res := f.stop()
	if res.Records != n+1+added {
		t.Fatalf("%d records read, want %d: a line of a closed file read twice or not at all", res.Records, n+1+added)
	}

	// Resumed: each file from its position; the one that grew meanwhile
	// gives its new line only.
	appendLine(filepath.Join(dir, "old-05.jsonl"), line(11))
	f2 := follow(t, streamEngine(t, engineRules), cfg)
	waitSnapshot(t, f2.m, "all read and closed after the restart", allClosed(n+2+added))
	if res := f2.stop(); res.Restored == 0 {
		t.Fatal("the second run did not restore a checkpoint")
	}
}

// TestStreamFollowRestartClosedIdle: after a restart, the files of a
// followed directory that start closed (at their checkpoint's end, not
// modified for -close-inactive) are idle at once when -close-inactive is
// at least -idle-timeout: the live file's new records move the watermark
// past the old files' times within the test, instead of after a whole
// idle timeout (an hour here) with the old files holding it back.
func TestStreamFollowRestartClosedIdle(t *testing.T) {
	dir := t.TempDir()
	line := minuteLine
	const n = 5
	old, live := oldAndLive(t, dir, n)
	d := newStreamDirs(t)
	cfg := d.config(dir)
	cfg.CloseInactive, cfg.IdleTimeout = time.Hour, time.Hour
	f := follow(t, streamEngine(t, engineRules), cfg)
	waitSnapshot(t, f.m, "every file read", func(s MonitorSnapshot) bool { return s.Progress.Records == n+1 })
	f.stop()

	// The old files were last written two hours ago: they start closed.
	ago := time.Now().Add(-2 * time.Hour)
	for _, p := range old {
		if err := os.Chtimes(p, ago, ago); err != nil {
			t.Fatal(err)
		}
	}
	f2 := follow(t, streamEngine(t, engineRules), cfg)
	waitSnapshot(t, f2.m, "the old files closed, live.jsonl open", func(s MonitorSnapshot) bool {
		_, ok := s.PartitionWatermarks["live.jsonl"]
		return s.Partitions == n+1 && len(s.PartitionWatermarks) == 1 && ok
	})
	appendFile(t, live, []string{line(10)})
	// 10:10 less the 10 s bound (and a millisecond).
	want := event.Time(time.Date(2026, 1, 1, 10, 9, 49, 999e6, time.UTC).UnixMilli())
	waitSnapshot(t, f2.m, "the watermark at live.jsonl's 10:10 less the bound", func(s MonitorSnapshot) bool {
		return s.Progress.Watermark >= want
	})
	if res := f2.stop(); res.Restored == 0 {
		t.Fatal("the second run did not restore a checkpoint")
	}
}

// TestStreamFollowBacklogIdle: a followed directory's files that were
// last written long ago (finished daily files a run starts over, or
// catches up on after an outage) are idle once read to their ends when
// that was -close-inactive or more ago (and that is -idle-timeout or
// more), as files that start closed at a resume are: the watermark moves to the newest
// file's times within the test, instead of after a whole idle timeout (an
// hour here) with the oldest file holding it back and every newer event
// waiting in memory. A file written to lately still holds it back.
func TestStreamFollowBacklogIdle(t *testing.T) {
	dir := t.TempDir()
	line := minuteLine
	write := func(name string, minutes ...int) string {
		var b strings.Builder
		for _, m := range minutes {
			b.WriteString(line(m))
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	day1 := write("day-1.jsonl", 0, 1, 2)
	day2 := write("day-2.jsonl", 20, 21, 22)
	ago := time.Now().Add(-3 * time.Hour) // more than -close-inactive
	for _, p := range []string{day1, day2} {
		if err := os.Chtimes(p, ago, ago); err != nil {
			t.Fatal(err)
		}
	}
	d := newStreamDirs(t)
	cfg := d.config(dir)
	cfg.IdleTimeout, cfg.CloseInactive = time.Hour, 2*time.Hour
	f := follow(t, streamEngine(t, engineRules), cfg)
	// 10:22 less the 10 s bound (and a millisecond).
	at22 := event.Time(time.Date(2026, 1, 1, 10, 21, 49, 999e6, time.UTC).UnixMilli())
	sn := waitSnapshot(t, f.m, "both files idle: the watermark at day-2's 10:22", func(s MonitorSnapshot) bool {
		return s.Progress.Records == 6 && s.Progress.Watermark >= at22
	})
	// Read to their ends: no backlog (cepheus_input_unread_bytes).
	if want := map[string]int64{"day-1.jsonl": 0, "day-2.jsonl": 0}; !maps.Equal(sn.FileUnread, want) {
		t.Errorf("files' unread bytes %v, want %v", sn.FileUnread, want)
	}
	// A file written now holds the watermark back at its own time.
	write("live.jsonl", 30)
	waitSnapshot(t, f.m, "live.jsonl read", func(s MonitorSnapshot) bool { return s.Progress.Records == 7 })
	appendFile(t, day2, []string{line(40)})
	waitSnapshot(t, f.m, "day-2's 10:40 read", func(s MonitorSnapshot) bool { return s.Progress.Records == 8 })
	time.Sleep(300 * time.Millisecond) // ticks of the coordinator
	at30 := event.Time(time.Date(2026, 1, 1, 10, 29, 49, 999e6, time.UTC).UnixMilli())
	if wm := f.m.Snapshot().Progress.Watermark; wm != at30 {
		t.Errorf("watermark %v with live.jsonl written now at 10:30 and day-2 at 10:40, want %v (live.jsonl's: a file written lately holds it back)", wm, at30)
	}
	f.stop()
}

// TestStreamFollowIdleAcrossSwitch: a partition idle before a deploy is
// idle after it. A switch starts a new job, whose partitions each held
// the watermark back again for a whole -idle-timeout (the alerts of a
// live file waited that long after every deploy, with the lag gauge at
// the quiet file's age).
func TestStreamFollowIdleAcrossSwitch(t *testing.T) {
	dir := t.TempDir()
	line := minuteLine
	_, live := oldAndLive(t, dir, 1)
	d := newStreamDirs(t)
	cfg := d.config(dir)
	const idle = 2 * time.Second
	cfg.IdleTimeout, cfg.CloseInactive = idle, time.Hour
	f := follow(t, streamEngine(t, engineRules), cfg)
	waitSnapshot(t, f.m, "both files read", func(s MonitorSnapshot) bool { return s.Progress.Records == 2 })
	// 10:10 and 10:20 less the 10 s bound (and a millisecond).
	at10 := event.Time(time.Date(2026, 1, 1, 10, 9, 49, 999e6, time.UTC).UnixMilli())
	at20 := event.Time(time.Date(2026, 1, 1, 10, 19, 49, 999e6, time.UTC).UnixMilli())
	appendFile(t, live, []string{line(10)})
	sn := waitSnapshot(t, f.m, "old-0 idle: the watermark at live.jsonl's 10:10", func(s MonitorSnapshot) bool { return s.Progress.Watermark >= at10 })
	// The monitor says which partitions are idle (cepheus_partition_idle):
	// old-0 (live.jsonl too, once quiet for as long).
	if !slices.ContainsFunc(slices.Collect(maps.Keys(sn.IdlePartitions)), func(n string) bool { return strings.HasPrefix(filepath.Base(n), "old-0") }) {
		t.Errorf("idle partitions %v of %v, want old-0's among them", sn.IdlePartitions, sn.PartitionWatermarks)
	}
	v2 := strings.Replace(engineRules, "amount > 400", "amount > 401", 1)
	if _, err := f.m.Deploy(context.Background(), Deploy{Name: "v2.cep", Source: []byte(v2)}); err != nil {
		t.Fatal(err)
	}
	appendFile(t, live, []string{line(20)})
	start := time.Now()
	waitSnapshot(t, f.m, "the watermark at live.jsonl's 10:20", func(s MonitorSnapshot) bool { return s.Progress.Watermark >= at20 })
	if took := time.Since(start); took >= idle/2 {
		t.Errorf("the watermark took %v after the deploy to follow live.jsonl: old-0, idle before the switch, held it back after it", took)
	}
	f.stop()
}

// TestStreamFollowIdleNotCarriedToRestore: a switch whose checkpoint is
// not complete in time does not happen, and the job after it restores the
// latest complete checkpoint, as a restart does: it reads again what came
// after it, and its partitions start active, as a restart's. Carried from
// the job before, the idleness of a partition quiet since then made it
// idle at the new job's first tick, before its records came again: the
// other partition's records carried the watermark past them, and records
// that were on time in the first reading were late in the second.
func TestStreamFollowIdleNotCarriedToRestore(t *testing.T) {
	dir := t.TempDir()
	line := minuteLine
	old, live := oldAndLive(t, dir, 1)
	d := newStreamDirs(t)
	cfg := d.config(dir)
	cfg.IdleTimeout, cfg.CloseInactive = time.Second, time.Hour
	cfg.CheckpointInterval, cfg.CheckpointTimeout = time.Hour, 300*time.Millisecond
	var slow, released atomic.Bool
	cfg.hooks.atBarrier = func(sub int, id int64) {
		if sub == 0 && slow.Load() {
			time.Sleep(time.Second)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var readers atomic.Int32
	cfg.hooks.reader = func(r batchSource) batchSource {
		if readers.Add(1) == 1 {
			return r
		}
		// The job after the switch that did not happen: old-0's records
		// come after live's, within the idle timeout of its start.
		return holdPartition(ctx, r, filepath.Base(old[0]), func(b runtime.Batch) bool {
			if b.Partition.Name != "live.jsonl" || len(b.Records) == 0 || !strings.Contains(string(b.Records[len(b.Records)-1].Data), "10:20") {
				return false
			}
			time.Sleep(300 * time.Millisecond) // ticks of the coordinator
			released.Store(true)
			return true
		})
	}
	f := follow(t, streamEngine(t, engineRules), cfg)
	waitSnapshot(t, f.m, "both files read", func(s MonitorSnapshot) bool { return s.Progress.Records == 2 })
	appendFile(t, old[0], []string{line(5)})
	waitSnapshot(t, f.m, "old-0's 10:05 read", func(s MonitorSnapshot) bool { return s.Progress.Records == 3 })
	time.Sleep(cfg.IdleTimeout + 200*time.Millisecond) // old-0 quiet for the idle timeout
	appendFile(t, live, []string{line(10), line(20)})
	at20 := event.Time(time.Date(2026, 1, 1, 10, 19, 49, 999e6, time.UTC).UnixMilli())
	waitSnapshot(t, f.m, "old-0 idle: the watermark at live.jsonl's 10:20", func(s MonitorSnapshot) bool { return s.Progress.Watermark >= at20 })
	if late := f.m.Snapshot().Progress.Late; late != 0 {
		t.Fatalf("%d late records in the first reading, want none", late)
	}
	v2 := strings.Replace(engineRules, "amount > 400", "amount > 401", 1)
	slow.Store(true)
	_, err := f.m.Deploy(ctx, Deploy{Name: "v2.cep", Source: []byte(v2)})
	slow.Store(false)
	if err == nil || !strings.Contains(err.Error(), "the switch did not happen") {
		t.Fatalf("a deploy whose switch's checkpoint is not complete in time: %v; want the switch did not happen", err)
	}
	waitSnapshot(t, f.m, "the records read again", func(s MonitorSnapshot) bool {
		return released.Load() && s.Ready && s.Progress.Records == 5 && s.Progress.Queued == 0 && s.Progress.Watermark >= at20
	})
	time.Sleep(200 * time.Millisecond)
	if late := f.m.Snapshot().Progress.Late; late != 0 {
		t.Errorf("%d late records after the switch that did not happen, want none (old-0's were on time in the first reading, and a restart reads them so)", late)
	}
	f.stop()
}

// TestStreamFollowDeletedClosed: a followed directory's file deleted
// while closed for inactivity ends its partition: it no longer holds the
// watermark back (never idle here), leaves the partitions, and leaves the
// checkpoints; a file closed at the checkpoint and deleted before the
// restart is let go with a line in the log, where a restart refused any
// file of the checkpoint that was gone (a directory whose old files are
// deleted could never be restarted).
func TestStreamFollowDeletedClosed(t *testing.T) {
	dir := t.TempDir()
	line := minuteLine
	old, live := oldAndLive(t, dir, 3)
	d := newStreamDirs(t)
	cfg := d.config(dir)
	cfg.CloseInactive = 20 * time.Millisecond // and never idle
	// 10:00 and 10:10 less the 10 s bound (and a millisecond).
	held := event.Time(time.Date(2026, 1, 1, 9, 59, 49, 999e6, time.UTC).UnixMilli())
	freed := event.Time(time.Date(2026, 1, 1, 10, 9, 49, 999e6, time.UTC).UnixMilli())
	f := follow(t, streamEngine(t, engineRules), cfg)
	waitSnapshot(t, f.m, "every file read and closed", func(s MonitorSnapshot) bool {
		return s.Progress.Records == 4 && s.Partitions == 4 && len(s.PartitionWatermarks) == 0
	})
	// live.jsonl's 10:10 once every partition is known (the first records
	// may come before the other files' partitions are).
	appendFile(t, live, []string{line(10)})
	waitSnapshot(t, f.m, "live.jsonl's 10:10 read, and closed again", func(s MonitorSnapshot) bool {
		return s.Progress.Records == 5 && len(s.PartitionWatermarks) == 0
	})
	if wm := f.m.Snapshot().Progress.Watermark; wm != held {
		t.Fatalf("watermark %v, want %v: the closed old files hold it back", wm, held)
	}
	for _, p := range old[:2] {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	waitSnapshot(t, f.m, "old-0 and old-1 gone", func(s MonitorSnapshot) bool { return s.Partitions == 2 })
	if wm := f.m.Snapshot().Progress.Watermark; wm != held {
		t.Fatalf("watermark %v, want %v: old-2 holds it back", wm, held)
	}
	res := f.stop()
	if res.Records != 5 {
		t.Fatalf("%d records read, want 5", res.Records)
	}
	for _, name := range []string{"old-0.jsonl", "old-1.jsonl"} {
		want := name + ", closed for inactivity, was deleted: its partition ends"
		if !slices.Contains(f.lines(), want) {
			t.Errorf("the log does not say %q:\n%s", want, strings.Join(f.lines(), "\n"))
		}
	}

	// old-2, closed at the checkpoint, is deleted while no job runs: the
	// restart lets it go, and the watermark is live.jsonl's alone.
	if err := os.Remove(old[2]); err != nil {
		t.Fatal(err)
	}
	f2 := follow(t, streamEngine(t, engineRules), cfg)
	waitSnapshot(t, f2.m, "live.jsonl alone, the watermark at its 10:10", func(s MonitorSnapshot) bool {
		return s.Partitions == 1 && s.Progress.Watermark == freed
	})
	res = f2.stop()
	if res.Restored == 0 || res.Records != 5 {
		t.Fatalf("the restart: checkpoint %d restored, %d records read in all; want a checkpoint and 5 (none read again)", res.Restored, res.Records)
	}
	want := "old-2.jsonl, closed for inactivity at the checkpoint (read to line 1), was deleted since: its partition ends"
	if !slices.Contains(f2.lines(), want) {
		t.Errorf("the restart's log does not say %q:\n%s", want, strings.Join(f2.lines(), "\n"))
	}
	for _, name := range []string{"old-0.jsonl", "old-1.jsonl"} {
		if slices.ContainsFunc(f2.lines(), func(l string) bool { return strings.Contains(l, name) }) {
			t.Errorf("the restart names %s, which left the checkpoints before:\n%s", name, strings.Join(f2.lines(), "\n"))
		}
	}
}

// minuteLine is an event line of card c1 at 10:minute on 2026-01-01.
func minuteLine(minute int) string {
	return fmt.Sprintf(`{"ts":"2026-01-01T10:%02d:00Z","card":"c1","type":"auth","amount":1,"country":"US"}`+"\n", minute)
}

// oldAndLive writes n files old-I.jsonl and a file live.jsonl into dir,
// each with one event at 10:00 (minuteLine), and returns their paths.
func oldAndLive(t *testing.T, dir string, n int) (old []string, live string) {
	t.Helper()
	for i := range n {
		old = append(old, filepath.Join(dir, fmt.Sprintf("old-%d.jsonl", i)))
		if err := os.WriteFile(old[i], []byte(minuteLine(0)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	live = filepath.Join(dir, "live.jsonl")
	if err := os.WriteFile(live, []byte(minuteLine(0)), 0o644); err != nil {
		t.Fatal(err)
	}
	return old, live
}

// TestStreamFollowDeletedOpen: a followed directory's file that was not
// closed for inactivity at the checkpoint, deleted before the restart, is
// still refused (it may not have been read to its end), with an error that
// says why it is not let go as a closed one is (it said only "a.jsonl, of
// position a.jsonl@67:1, is not an input of DIR").
func TestStreamFollowDeletedOpen(t *testing.T) {
	dir := t.TempDir()
	old, _ := oldAndLive(t, dir, 1)
	d := newStreamDirs(t)
	cfg := d.config(dir)
	cfg.CloseInactive = time.Hour
	f := follow(t, streamEngine(t, engineRules), cfg)
	waitMonitor(t, f.m, 2)
	f.stop()
	if err := os.Remove(old[0]); err != nil {
		t.Fatal(err)
	}
	cfg.Follow, cfg.PollInterval = true, 2*time.Millisecond
	_, err := streamEngine(t, engineRules).Stream(context.Background(), cfg)
	if !errors.Is(err, ErrRestore) || !errors.Is(err, runtime.ErrBadPosition) || !strings.Contains(err.Error(), "old-0.jsonl, read to line 1 at checkpoint ") ||
		!strings.Contains(err.Error(), "was not closed for inactivity then") {
		t.Fatalf("a restart without an open file of the checkpoint: %v", err)
	}
}

// TestStreamFollowRecreatedWhileStopped: a followed file closed at the
// checkpoint, deleted and created again under its name while no run went
// on (or after a kill -9 that lost the checkpoint of its deletion), was
// read on from the old file's position: the new file's first line,
// as long as the old one, was lost. Its last bytes read are in the
// checkpoint (sourceMeta.ClosedTails): the restart lets the old file go
// and reads the new one from its start as a new partition; a file grown
// meanwhile is read on from its position.
func TestStreamFollowRecreatedWhileStopped(t *testing.T) {
	dir := t.TempDir()
	old, _ := oldAndLive(t, dir, 2)
	d := newStreamDirs(t)
	cfg := d.config(dir)
	cfg.CloseInactive = 20 * time.Millisecond
	f := follow(t, streamEngine(t, engineRules), cfg)
	waitSnapshot(t, f.m, "every file read and closed", func(s MonitorSnapshot) bool {
		return s.Progress.Records == 3 && s.Partitions == 3 && len(s.PartitionWatermarks) == 0
	})
	f.stop()
	appendFile(t, old[0], []string{minuteLine(2)}) // grown
	if err := os.Remove(old[1]); err != nil {
		t.Fatal(err)
	}
	// Created again: its first line as long as the old one's.
	appendFile(t, old[1], []string{minuteLine(1), minuteLine(3)})
	f = follow(t, streamEngine(t, engineRules), cfg)
	waitMonitor(t, f.m, 6)
	res := f.stop()
	if res.Records != 6 {
		t.Errorf("%d records in all, want 6: 3, old-0.jsonl's new line, old-1.jsonl's 2 lines", res.Records)
	}
	want := "old-1.jsonl, closed for inactivity at the checkpoint (read to line 1), is another file since (deleted and created again, or truncated): its partition ends, and the file is read from its start as a new one"
	if !slices.Contains(f.lines(), want) {
		t.Errorf("the restart's log does not say %q:\n%s", want, strings.Join(f.lines(), "\n"))
	}
	if slices.ContainsFunc(f.lines(), func(l string) bool { return strings.HasPrefix(l, "old-0.jsonl") }) {
		t.Errorf("old-0.jsonl, grown, is let go:\n%s", strings.Join(f.lines(), "\n"))
	}
}

// heldReader passes on the batches of its reader but those of the
// partition named held, which it holds until release says so of a batch
// passed on (then sends them, in their order): the reordering the
// scheduling of the files' goroutines may give.
type heldReader struct {
	batchSource
	out chan runtime.Batch
}

func (h *heldReader) Batches() <-chan runtime.Batch { return h.out }

func holdPartition(ctx context.Context, r batchSource, held string, release func(runtime.Batch) bool) batchSource {
	h := &heldReader{batchSource: r, out: make(chan runtime.Batch)}
	go func() {
		defer close(h.out)
		var waiting []runtime.Batch
		released := false
		send := func(b runtime.Batch) bool {
			select {
			case h.out <- b:
				return true
			case <-ctx.Done():
				return false
			}
		}
		for b := range r.Batches() {
			if !released && b.Partition.Name == held {
				waiting = append(waiting, b)
				continue
			}
			if !send(b) {
				return
			}
			if !released && release(b) {
				released = true
				for _, w := range waiting {
					if !send(w) {
						return
					}
				}
				waiting = nil
			}
		}
		for _, w := range waiting {
			if !send(w) {
				return
			}
		}
	}()
	return h
}

// TestStreamFollowDirectoryStart: the files of a followed directory at
// the start all hold the watermark back from the first batch, whichever
// file's goroutine sends first. Here every batch of the later file,
// b.jsonl, comes before the first of a.jsonl (its Opened batch
// included): the events of a.jsonl are not late (they all were: the
// watermark went by b.jsonl's alone until a.jsonl's Opened batch came).
func TestStreamFollowDirectoryStart(t *testing.T) {
	const na, nb = 300, 3000 // b.jsonl: several batches (1024 records)
	base := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	var files [2]strings.Builder
	for i := range na + nb {
		line := fmt.Sprintf(`{"ts":%q,"card":"c%d","type":"auth","amount":%d,"country":"US"}`+"\n",
			base.Add(time.Duration(i)*7*time.Second).Format(time.RFC3339), i%5, 100+i%500)
		files[min(i/na, 1)].WriteString(line)
	}
	dir := t.TempDir()
	for i, name := range []string{"a.jsonl", "b.jsonl"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(files[i].String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d := newStreamDirs(t)
	cfg := d.config(dir)
	cfg.Follow, cfg.PollInterval = true, 2*time.Millisecond
	var records atomic.Int64
	cfg.ProgressInterval = time.Millisecond
	cfg.Progress = func(p StreamProgress) { records.Store(p.Records) }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var fromB int
	cfg.hooks.reader = func(r batchSource) batchSource {
		return holdPartition(ctx, r, "a.jsonl", func(b runtime.Batch) bool {
			if b.Partition.Name == "b.jsonl" {
				fromB += len(b.Records)
			}
			return fromB == nb
		})
	}
	done := make(chan error, 1)
	var res *StreamResult
	go func() {
		var err error
		res, err = streamEngine(t, engineRules).Stream(ctx, cfg)
		done <- err
	}()
	for deadline := time.Now().Add(20 * time.Second); records.Load() < na+nb; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("followed %d records of %d", records.Load(), na+nb)
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Stream after cancel: %v, want context.Canceled", err)
	}
	if res.Records != na+nb || res.Late != 0 {
		t.Errorf("%d records, %d late; want %d records, none late (a.jsonl's events held the watermark from the start)", res.Records, res.Late, na+nb)
	}
}

// TestStreamStopForwardsWatermark: a followed job stopped right after it
// read its last record, before a tick forwarded the watermark those
// records allow, commits at its final checkpoint every alert the events
// read release: those of a backtest of the input, whose last event, an
// hour on, releases them all. Before, the stop's watermark was that of
// the last tick or cadence, and the alerts of the last records waited
// for the next run (the flaky failure of TestSwitchIDsRandomSchemas).
func TestStreamStopForwardsWatermark(t *testing.T) {
	input := deployInput(300)
	total := strings.Count(input, "\n")
	events := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(events, []byte(input), 0o644); err != nil {
		t.Fatal(err)
	}
	d := newStreamDirs(t)
	cfg := d.config(events)
	// Ticks every 50 ms and no barrier between records: the stop comes
	// right after the batch of the last record (a tick between them is
	// possible, and rare).
	cfg.Follow, cfg.PollInterval, cfg.CheckpointInterval = true, 2*time.Millisecond, time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	read := 0
	cfg.hooks.reader = func(r batchSource) batchSource {
		return holdPartition(ctx, r, "", func(b runtime.Batch) bool {
			if read += len(b.Records); read == total {
				cancel() // the loop has the batch: it stops after it
				return true
			}
			return false
		})
	}
	res, err := heldEngine(t, heldV1).Stream(ctx, cfg)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Stream, cancelled: %v", err)
	}
	if res.Records != int64(total) {
		t.Fatalf("read %d records of %d", res.Records, total)
	}
	want := heldBacktest(t, heldV1, input)
	got := committedLines(t, d.alerts)
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("stopped at watermark %v: %d alerts committed, a backtest gives %d", res.Stats.Watermark, len(got), len(want))
	}
}

// TestStreamDurableAt: the time the state is durable at
// (MonitorSnapshot.DurableAt) is that of a complete checkpoint's barrier,
// not of its end: what the job read after the barrier is not in it. A
// checkpoint that begins and then fails does not move it: it moved at
// the start of each checkpoint, so a job whose checkpoints all failed
// (their timeout, here) looked durable as of the latest attempt.
func TestStreamDurableAt(t *testing.T) {
	input := engineInput(50)
	d := newStreamDirs(t)
	events := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(events, []byte(input), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := d.config(events)
	// No checkpoint but those asked for (none skipped, which would move
	// it rightly: nothing read since the latest).
	cfg.CheckpointInterval, cfg.CheckpointTimeout = time.Hour, 500*time.Millisecond
	var stall atomic.Int64    // how long subtask 0 sleeps at a barrier
	var sleeping atomic.Int32 // it sleeps now
	cfg.hooks.atBarrier = func(sub int, id int64) {
		if sub == 0 {
			sleeping.Add(1)
			time.Sleep(time.Duration(stall.Load()))
			sleeping.Add(-1)
		}
	}
	f := follow(t, streamEngine(t, engineRules), cfg)
	waitMonitor(t, f.m, int64(strings.Count(input, "\n")))

	const slow = 300 * time.Millisecond
	stall.Store(int64(slow))
	before := f.m.Snapshot().Progress.Checkpoints
	asked := time.Now()
	f.m.RequestCheckpoint()
	sn := waitSnapshot(t, f.m, "the slow checkpoint complete", func(s MonitorSnapshot) bool { return s.Progress.Checkpoints > before })
	if done := time.Now(); sn.DurableAt.Before(asked) || sn.DurableAt.After(done.Add(-slow+50*time.Millisecond)) {
		t.Errorf("a checkpoint asked for at %v, complete by %v after a %v stall: durable at %v, want its barrier's time (before the stall)",
			asked.Format(time.StampMilli), done.Format(time.StampMilli), slow, sn.DurableAt.Format(time.StampMilli))
	}

	stall.Store(int64(2 * cfg.CheckpointTimeout))
	failed := sn.CheckpointFailures
	for i := range int64(2) {
		f.m.RequestCheckpoint()
		waitSnapshot(t, f.m, "a checkpoint timed out", func(s MonitorSnapshot) bool { return s.CheckpointFailures > failed+i })
	}
	if s := f.m.Snapshot(); !s.DurableAt.Equal(sn.DurableAt) || s.Progress.Checkpoints != sn.Progress.Checkpoints {
		t.Errorf("after %d checkpoints that failed: durable at %v (%d complete), want %v, the latest complete's",
			s.CheckpointFailures-failed, s.DurableAt.Format(time.StampMilli), s.Progress.Checkpoints, sn.DurableAt.Format(time.StampMilli))
	}
	// The stop's final checkpoint waits for no sleep.
	stall.Store(0)
	for sleeping.Load() > 0 {
		time.Sleep(time.Millisecond)
	}
	f.stop()
}

// TestStreamFinishedPartitionsIdle: the partitions of a bounded input
// read to their ends no longer hold the watermark back, and the monitor
// says so (cepheus_partition_idle 1; it said 0, "holds it back").
func TestStreamFinishedPartitionsIdle(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a.jsonl", "b.jsonl"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(engineInput(50)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d := newStreamDirs(t)
	cfg := d.config(dir)
	cfg.Monitor = NewStreamMonitor()
	if _, err := streamEngine(t, engineRules).Stream(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	sn := cfg.Monitor.Snapshot()
	if len(sn.PartitionWatermarks) != 2 || len(sn.IdlePartitions) != 2 {
		t.Errorf("at the end: partitions %v, of which idle or finished %v; want both finished", sn.PartitionWatermarks, sn.IdlePartitions)
	}
}

// TestStreamStopCutShortWithoutKafka: a file run whose stop outlasts the
// checkpoint timeout (a subtask busy in a step: here slow at its barrier)
// says what it waits for; it said "Kafka unreachable?" of a run without
// Kafka (the state trial: a rule whose one event's step wrote matches for
// minutes), then went on.
func TestStreamStopCutShortWithoutKafka(t *testing.T) {
	input := engineInput(200)
	d := newStreamDirs(t)
	events := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(events, []byte(input), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := d.config(events)
	cfg.CheckpointTimeout = 100 * time.Millisecond
	slow := slowAtBarrier(&cfg)
	f := follow(t, streamEngine(t, engineRules), cfg)
	waitMonitor(t, f.m, int64(strings.Count(input, "\n")))
	slow.Store(true)
	f.end()
	var said string
	for _, l := range f.lines() {
		if strings.HasPrefix(l, "stopped, and still not ended") {
			said = l
		}
	}
	if !strings.Contains(said, "still not ended 100ms later (the checkpoint timeout): ") || strings.Contains(said, "Kafka") ||
		!strings.Contains(said, "an event's step, which a stop does not cut short") {
		t.Errorf("the stop cut short said %q; want the step it waits for, and no word of Kafka", said)
	}
}

// busyConfig is the configuration of a stream of 60,000 events, far
// more than the queues to the subtasks hold: a subtask asleep in a step
// soon holds the coordinator in its send.
func busyConfig(t *testing.T) StreamConfig {
	events := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(events, []byte(engineInput(60000)), 0o644); err != nil {
		t.Fatal(err)
	}
	return newStreamDirs(t).config(events)
}

// TestStreamProgressWhileSubtaskBusy: while a subtask is behind in a
// long step (here asleep at its first barrier) and the coordinator waits
// to hand it more, the progress is still reported at its interval once
// the wait passed stuckSend: the coordinator waited in its send, and a
// run whose rule took minutes over one key printed no line at all (the
// state trial).
func TestStreamProgressWhileSubtaskBusy(t *testing.T) {
	cfg := busyConfig(t)
	cfg.ProgressInterval = 50 * time.Millisecond
	var mu sync.Mutex
	var slept [2]time.Time // the busy subtask's sleep: its start and end
	var reports []time.Time
	cfg.hooks.atBarrier = func(sub int, id int64) {
		if sub == 0 && id == 1 {
			mu.Lock()
			slept[0] = time.Now()
			mu.Unlock()
			time.Sleep(2 * time.Second)
			mu.Lock()
			slept[1] = time.Now()
			mu.Unlock()
		}
	}
	cfg.Progress = func(StreamProgress) {
		mu.Lock()
		reports = append(reports, time.Now())
		mu.Unlock()
	}
	res, err := streamEngine(t, engineRules).Stream(context.Background(), cfg)
	if err != nil || !res.Finished {
		t.Fatalf("Stream: %v, %v", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	during := 0
	for _, at := range reports {
		if at.After(slept[0].Add(stuckSend+200*time.Millisecond)) && at.Before(slept[1]) {
			during++
		}
	}
	if slept[1].IsZero() || during < 3 {
		t.Errorf("%d progress reports while a subtask was busy for two seconds (every 50ms asked) once the coordinator had waited %v, want 3 or more", during, stuckSend)
	}
}

// TestStreamMonitorWhileSubtaskBusy: while a subtask is behind in a long
// step (asleep at its first barrier) and the coordinator waits to hand it
// more, the monitor's figures (what /metrics serves at each scrape) are
// still published at the coordinator's ticks: they stood still for as
// long as the coordinator waited, though the progress line went on.
func TestStreamMonitorWhileSubtaskBusy(t *testing.T) {
	cfg := busyConfig(t)
	cfg.Monitor = NewStreamMonitor()
	busy := make(chan struct{})
	cfg.hooks.atBarrier = func(sub int, id int64) {
		if sub == 0 && id == 1 {
			close(busy)
			time.Sleep(2 * time.Second)
		}
	}
	type scrape struct {
		at      time.Time
		elapsed time.Duration // changes only when the job publishes
	}
	scrapes := make(chan []scrape, 1)
	stop := make(chan struct{})
	go func() {
		var got []scrape
		defer func() { scrapes <- got }()
		select {
		case <-busy:
		case <-stop:
			return
		}
		for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			got = append(got, scrape{time.Now(), cfg.Monitor.Snapshot().Progress.Elapsed})
		}
	}()
	res, err := streamEngine(t, engineRules).Stream(context.Background(), cfg)
	close(stop)
	got := <-scrapes
	if err != nil || !res.Finished {
		t.Fatalf("Stream: %v, %v", res, err)
	}
	if len(got) == 0 {
		t.Fatal("no subtask was busy at its first barrier")
	}
	// From half a second into the sleep (the coordinator waits by then:
	// the queues hold far fewer than the input's events) to its end.
	from := got[0].at.Add(500 * time.Millisecond)
	published := map[time.Duration]bool{}
	for _, s := range got {
		if s.at.After(from) {
			published[s.elapsed] = true
		}
	}
	if len(published) < 5 {
		t.Errorf("%d distinct figures published in the last 1.5s of a subtask's 2s step (the ticks are every %v), want 5 or more", len(published), tickEvery)
	}
}

// TestStreamFollowReplacedWhileStopped: a followed file renamed away
// while no run went on, and another created under its name (a rotation),
// is refused at the restart, though the byte before the checkpoint's
// position in it is a newline: the end of the last line read (the
// checkpoint's mark) is not there. Read on from the old position, its
// first lines were skipped without a word. Put back, the file read
// resumes. The same for a file of a followed directory.
func TestStreamFollowReplacedWhileStopped(t *testing.T) {
	for _, inDir := range []bool{false, true} {
		t.Run(map[bool]string{false: "file", true: "directory"}[inDir], func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "events.jsonl")
			appendFile(t, path, []string{minuteLine(0), minuteLine(1)})
			d := newStreamDirs(t)
			cfg := d.config(path)
			if inDir {
				cfg = d.config(dir)
			}
			f := follow(t, streamEngine(t, engineRules), cfg)
			waitMonitor(t, f.m, 2)
			f.stop()
			if err := os.Rename(path, filepath.Join(t.TempDir(), "events.jsonl.1")); err != nil {
				t.Fatal(err)
			}
			// Another card's lines, as long as the old ones.
			other := func(minute int) string { return strings.Replace(minuteLine(minute), `"c1"`, `"c9"`, 1) }
			appendFile(t, path, []string{other(2), other(3), other(4)})
			f = follow(t, streamEngine(t, engineRules), cfg)
			select {
			case <-f.ended:
			case <-time.After(30 * time.Second):
				t.Fatalf("the restart over another file runs on (%d records read):\n%s", f.m.Snapshot().Progress.Records, strings.Join(f.lines(), "\n"))
			}
			_, err := f.end()
			if !errors.Is(err, runtime.ErrBadPosition) || !strings.Contains(err.Error(), "events.jsonl holds other bytes before position events.jsonl@") ||
				!strings.Contains(err.Error(), "another file has taken its name") {
				t.Fatalf("the restart over another file: %v, want ErrBadPosition saying another file has taken its name", err)
			}
			// The file read, put back and grown: read on from its position.
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			appendFile(t, path, []string{minuteLine(0), minuteLine(1), minuteLine(2)})
			f = follow(t, streamEngine(t, engineRules), cfg)
			waitMonitor(t, f.m, 3)
			if res := f.stop(); res.Records != 3 {
				t.Errorf("the file put back: %d records in all, want 3 (the first run's 2, its new line)", res.Records)
			}
		})
	}
}

// TestStreamStdinResumeChangedRules: a run over standard input, stopped
// and resumed with a changed rule, ends once its input does: the changed
// rule's earlier version drains, and once its window has passed it stays
// (a switch's job would read the input again from its checkpoint, which
// standard input cannot: the run failed there with "stdin is shorter than
// position"); a deploy to such a run is refused, saying why.
func TestStreamStdinResumeChangedRules(t *testing.T) {
	input := engineInput(2000)
	lines := strings.SplitAfter(input, "\n")
	d := newStreamDirs(t)
	stopStdinMidway(t, d, input)
	changed := strings.Replace(engineRules, "within 5m", "within 6m", 1)
	var logged strings.Builder
	var mu sync.Mutex
	cfg := d.config("-")
	cfg.Stdin = strings.NewReader(input)
	cfg.Logf = func(format string, args ...any) {
		mu.Lock()
		fmt.Fprintf(&logged, format+"\n", args...)
		mu.Unlock()
	}
	res, err := streamEngine(t, changed).Stream(context.Background(), cfg)
	if err != nil || !res.Finished {
		t.Fatalf("resumed with a changed rule: %v (finished %v)\n%s", err, res != nil && res.Finished, logged.String())
	}
	if !strings.Contains(logged.String(), "deploying them at the restore") {
		t.Errorf("the resumed run does not say it deployed the changed rules:\n%s", logged.String())
	}

	// A deploy to a run over standard input is refused, saying why.
	m := NewStreamMonitor()
	live := newStreamDirs(t).config("-")
	live.Stdin, live.Monitor = &slowLines{lines: lines}, m
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := streamEngine(t, engineRules).Stream(ctx, live)
		done <- err
	}()
	waitMonitor(t, m, 100)
	_, err = m.Deploy(ctx, Deploy{Source: []byte(changed)})
	if err == nil || !strings.Contains(err.Error(), "the run reads standard input, which a switch cannot read again from its checkpoint") {
		t.Errorf("a deploy to a run over stdin: %v, want it refused saying why", err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("the run over stdin after the refused deploy: %v", err)
	}
}

// TestStreamStdinResumeOtherStream: a run over standard input resumed
// with another stream piped in (of the same lines' lengths: the position
// falls at a line's start of it) is refused, saying so, instead of
// skipping the new stream's first lines without a word; given its own
// stream again, it resumes and ends as a backtest of it.
func TestStreamStdinResumeOtherStream(t *testing.T) {
	input := engineInput(2000)
	d := newStreamDirs(t)
	stopStdinMidway(t, d, input)
	other := strings.NewReplacer(`"card":"c`, `"card":"k`, "not json", "NOT JSON").Replace(input)
	cfg := d.config("-")
	cfg.Stdin = strings.NewReader(other)
	_, err := streamEngine(t, engineRules).Stream(context.Background(), cfg)
	if want := "stdin holds other bytes before position stdin@"; !errors.Is(err, runtime.ErrBadPosition) || !strings.Contains(err.Error(), want) {
		t.Fatalf("resumed with another stream: %v; want runtime.ErrBadPosition saying %q", err, want)
	}
	cfg.Stdin = strings.NewReader(input)
	if res, err := streamEngine(t, engineRules).Stream(context.Background(), cfg); err != nil || !res.Finished {
		t.Fatalf("resumed with its own stream: %v", err)
	}
	checkLikeBacktest(t, d, input)
}

// stopStdinMidway runs engineRules over input piped in slowly, into d,
// and cancels the run midway, after two checkpoints at least.
func stopStdinMidway(t *testing.T, d streamDirs, input string) {
	t.Helper()
	cfg := d.config("-")
	cfg.Stdin = &slowLines{lines: strings.SplitAfter(input, "\n")} // a line a millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg.ProgressInterval = time.Millisecond
	cfg.Progress = func(p StreamProgress) {
		if p.Checkpoints >= 2 && p.Records >= 800 {
			cancel()
		}
	}
	if res, err := streamEngine(t, engineRules).Stream(ctx, cfg); !errors.Is(err, context.Canceled) || res == nil || res.Finished {
		t.Fatalf("the first run: %v, want it cancelled midway", err)
	}
}

// slowLines reads its lines one at a time, a millisecond apart.
type slowLines struct{ lines []string }

func (r *slowLines) Read(p []byte) (int, error) {
	if len(r.lines) == 0 {
		return 0, io.EOF
	}
	time.Sleep(time.Millisecond)
	n := copy(p, r.lines[0])
	if r.lines[0] = r.lines[0][n:]; r.lines[0] == "" {
		r.lines = r.lines[1:]
	}
	return n, nil
}

// TestStreamFollowUnended: a followed run stopped while a file's last
// line has no line end yet says so (StreamResult.Unended): of a directory,
// the file that has one, with its bytes; not a file whose lines all end.
func TestStreamFollowUnended(t *testing.T) {
	lines := strings.SplitAfter(strings.TrimSuffix(engineInput(200), "\n"), "\n")
	dir := t.TempDir()
	appendFile(t, filepath.Join(dir, "a.jsonl"), lines[:100])
	partial := `{"ts":"2026-01-01T10:30:00Z","card":"c1"`
	appendFile(t, filepath.Join(dir, "b.jsonl"), append(slices.Clone(lines[100:len(lines)-1]), lines[len(lines)-1]+"\n", partial))
	f := follow(t, streamEngine(t, engineRules), newStreamDirs(t).config(dir))
	waitMonitor(t, f.m, int64(len(lines)))
	res := f.stop()
	if want := []UnendedFile{{File: "b.jsonl", Bytes: int64(len(partial))}}; !slices.Equal(res.Unended, want) {
		t.Errorf("unended files at the stop: %+v, want %+v", res.Unended, want)
	}
	// Once the line is ended, a run reads it and names no file.
	appendFile(t, filepath.Join(dir, "b.jsonl"), []string{`,"type":"auth","amount":1,"country":"US"}` + "\n"})
	f = follow(t, streamEngine(t, engineRules), newStreamDirs(t).config(dir))
	waitMonitor(t, f.m, int64(len(lines)+1))
	if res := f.stop(); len(res.Unended) != 0 {
		t.Errorf("unended files once every line ended: %+v", res.Unended)
	}
}

// TestStreamRefusesRunOutputs: an engine built with Run's outputs is
// refused by Stream, saying so (it ran without them: an embedding
// program's observer was never called), before anything is made.
func TestStreamRefusesRunOutputs(t *testing.T) {
	rs := loadRules(t, engineRules)
	var sink strings.Builder
	for what, opt := range map[string]Option{
		"WithAlerts":      WithAlerts(&sink),
		"WithLate":        WithLate(&sink),
		"WithDeadLetters": WithDeadLetters(NewDeadLetterWriter(&sink)),
		"WithObservers":   WithObservers(idObserver{ids: new([]string)}),
	} {
		e, err := New(WithRuleset(rs), opt)
		if err != nil {
			t.Fatal(err)
		}
		d := newStreamDirs(t)
		cfg := d.config("-")
		cfg.Stdin = strings.NewReader(engineInput(10))
		_, err = e.Stream(context.Background(), cfg)
		if err == nil || !strings.Contains(err.Error(), "which Stream does not use") {
			t.Errorf("%s: %v, want Stream to refuse it", what, err)
		}
		if _, serr := os.Stat(d.state); !errors.Is(serr, os.ErrNotExist) {
			t.Errorf("%s: the refused Stream made %s: %v", what, d.state, serr)
		}
	}
}

// TestStreamAbsentResumed: a field that rules read and that no event of
// a run had is reported by a run from a fresh state (Absent); a run that
// resumed is not told so of a field the events before its checkpoint had
// (its decoder never saw them: the review found the warning of a resumed
// run false). A field some events give as a number and others as a
// string is reported by both (Mixed).
func TestStreamAbsentResumed(t *testing.T) {
	const src = `ruleset a
event time ts
rule r {
  key card
  pattern {
    begin a where reason == "fraud" || n == 1 || missing == 1
  }
}
`
	var b strings.Builder
	for i := range 5000 {
		switch {
		case i == 0:
			fmt.Fprintf(&b, `{"ts":%d,"card":"c%d","reason":"fraud","n":1}`+"\n", 1000*i, i%7)
		case i%2 == 0:
			fmt.Fprintf(&b, `{"ts":%d,"card":"c%d","n":"1"}`+"\n", 1000*i, i%7)
		default:
			fmt.Fprintf(&b, `{"ts":%d,"card":"c%d","n":2}`+"\n", 1000*i, i%7)
		}
	}
	events := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(events, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	d := newStreamDirs(t)
	cfg := d.config(events)
	cfg.CheckpointRecords = 10
	cfg.hooks.afterCommit = func(int64) bool { return true }
	res, err := streamEngine(t, src).Stream(context.Background(), cfg)
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if res.Finished || res.Records >= 5000 {
		t.Fatalf("the first run read %d records, finished %v: want it stopped early", res.Records, res.Finished)
	}
	fresh := []AbsentField{{Field: "missing", Rules: []string{"r"}}}
	if len(res.Absent) != 1 || res.Absent[0].Field != fresh[0].Field || !slices.Equal(res.Absent[0].Rules, fresh[0].Rules) || len(res.Mixed) != 1 || res.Mixed[0].Field != "n" {
		t.Errorf("the fresh run: absent %+v, mixed %+v; want missing absent, n mixed", res.Absent, res.Mixed)
	}
	cfg.hooks.afterCommit = nil
	res, err = streamEngine(t, src).Stream(context.Background(), cfg)
	if err != nil || !res.Finished || res.Restored == 0 {
		t.Fatalf("the resumed run: %v, finished %v, restored %d", err, res.Finished, res.Restored)
	}
	if len(res.Absent) != 0 || len(res.Mixed) != 1 || res.Mixed[0].Field != "n" || res.Mixed[0].Strings == 0 || res.Mixed[0].Numbers == 0 {
		t.Errorf("the resumed run: absent %+v, mixed %+v; want none absent (reason came before its checkpoint), n mixed", res.Absent, res.Mixed)
	}
}
