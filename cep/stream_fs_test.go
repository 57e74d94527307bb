package cep

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/enrich"
	"github.com/cepheus-cep/cepheus/event"
)

// gateSource is a lookup source that, once blocked, holds every Fetch
// until its context ends, saying when the first one began.
type gateSource struct {
	LookupSource
	block   atomic.Bool
	entered chan struct{}
	once    sync.Once
}

func (g *gateSource) Fetch(ctx context.Context, keys []string) ([][]event.Value, error) {
	if g.block.Load() {
		g.once.Do(func() { close(g.entered) })
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return g.LookupSource.Fetch(ctx, keys)
}

// TestStreamSinkErrorWhileLookingUp: a subtask whose sink fails (its
// output directory removed under it) while the coordinator waits for a
// lookup's source ends the run with the sink's error, naming the file and
// the cause. The coordinator's lookup, ended by the job's stop, said
// "context canceled" instead, and nothing else.
func TestStreamSinkErrorWhileLookingUp(t *testing.T) {
	rs, err := CompileRuleset("lk.cep", []byte(lookupRules))
	if err != nil {
		t.Fatal(err)
	}
	holderSpec, _ := lookupSpec(rs, "holder")
	strictSpec, _ := lookupSpec(rs, "strict")
	holder := &gateSource{
		LookupSource: enrich.NewMemSource(holderSpec, map[string][]event.Value{"k1": {event.String("FR"), event.Int(500)}}),
		entered:      make(chan struct{}),
	}
	strict := enrich.NewMemSource(strictSpec, nil)
	e, err := New(WithRuleset(rs), WithOutOfOrderness(time.Second), WithWatermarkEvery(1),
		WithLookups(map[string]LookupSource{"holder": holder, "strict": strict}, LookupOptions{Batch: 4, CacheSize: -1, Timeout: time.Minute}))
	if err != nil {
		t.Fatal(err)
	}
	events := filepath.Join(t.TempDir(), "events.jsonl")
	write := func(from, n int) int64 {
		t.Helper()
		f, err := os.OpenFile(events, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for i := from; i < from+n; i++ {
			fmt.Fprintf(f, `{"ts": %d, "card": "k%d", "amount": 600}`+"\n", 1000*(i+1), i%7)
		}
		return int64(from + n)
	}
	d := newStreamDirs(t)
	cfg := d.config(events)
	cfg.Parallelism, cfg.CheckpointInterval = 1, time.Hour
	var armed atomic.Bool
	inHook := make(chan struct{})
	cfg.hooks.beforeSinkCommit = func(int, int64) {
		if !armed.CompareAndSwap(true, false) {
			return
		}
		close(inHook)
		// The coordinator waits for the lookup: the output directory
		// goes, and with it the part file this commit renames.
		<-holder.entered
		if err := os.RemoveAll(d.alerts); err != nil {
			t.Error(err)
		}
	}
	read := write(0, 40)
	f := follow(t, e, cfg)
	waitMonitor(t, f.m, read)
	waitSnapshot(t, f.m, "alerts", func(s MonitorSnapshot) bool { return s.Progress.Alerts > 0 })
	armed.Store(true)
	f.m.RequestCheckpoint()
	select {
	case <-inHook:
	case <-time.After(time.Minute):
		t.Fatal("no commit after a minute")
	}
	holder.block.Store(true)
	write(int(read), 8)
	select {
	case end := <-f.done:
		err = end.err
	case <-time.After(time.Minute):
		t.Fatal("the job did not end within a minute of its sink's failure")
	}
	want := "file sink: part file of checkpoint "
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), d.alerts) {
		t.Errorf("Stream = %v, want the sink's error (%q..., naming %s)", err, want, d.alerts)
	}
}

// TestStreamOutputInUse: a second Stream given an output directory of a
// running one (with a state directory of its own) fails at once, saying
// which output is in use by another run, and the first goes on
// undisturbed: every alert it counted is committed, once. The second's
// sinks recovered the directory as theirs before: they deleted the
// first's open and pending part files, and two runs started together
// wrote and renamed each other's, one failing and the other ending well
// with alerts lost.
func TestStreamOutputInUse(t *testing.T) {
	input := engineInput(200)
	d := newStreamDirs(t)
	events := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(events, []byte(input), 0o644); err != nil {
		t.Fatal(err)
	}
	want := int64(strings.Count(input, "\n"))
	f := startFollowing(t, d, events, want)
	for _, c := range []struct {
		output string
		share  func(own, first *streamDirs)
	}{
		{"alerts output", func(own, first *streamDirs) { own.alerts = first.alerts }},
		{"dead-letter output", func(own, first *streamDirs) { own.dead = first.dead }},
		{"late events output", func(own, first *streamDirs) { own.late = first.alerts }}, // another output's directory
	} {
		own := newStreamDirs(t)
		c.share(&own, &d)
		second := own.config(events)
		_, err := streamEngine(t, engineRules).Stream(context.Background(), second)
		if err == nil || !strings.Contains(err.Error(), c.output+": runtime: output directory ") || !strings.Contains(err.Error(), "is in use by another run") {
			t.Errorf("a second Stream sharing the first's %s: %v, want it in use", c.output, err)
		}
		// The state directory it made for the attempt is gone (it
		// stayed, empty but for the lock, before 2026-12-07).
		if _, err := os.Stat(own.state); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a second Stream sharing the first's %s left its state directory behind (%v)", c.output, err)
		}
	}
	res := f.stop(t)
	if res.Records != want || res.Alerts == 0 {
		t.Fatalf("the first run: %d records, %d alerts; want %d records and alerts", res.Records, res.Alerts, want)
	}
	if got := committedLines(t, d.alerts); int64(len(got)) != res.Alerts || len(slices.Compact(got)) != len(got) {
		t.Errorf("the first run counted %d alerts; its output holds %d lines, %d distinct", res.Alerts, len(got), len(slices.Compact(slices.Clone(got))))
	}
}

// TestStreamOutputNotADirectory: an output directory that is a file, or a
// path through a file, fails the run before it makes anything: neither
// the state directory nor the other outputs. The state directory was
// made first, and the outputs before the failing one.
func TestStreamOutputNotADirectory(t *testing.T) {
	events := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(events, []byte(engineInput(10)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		output string
		set    func(d *streamDirs, file string)
		want   string
	}{
		{"alerts output", func(d *streamDirs, file string) { d.alerts = file }, " is not a directory"},
		{"dead-letter output", func(d *streamDirs, file string) { d.dead = filepath.Join(file, "dead") }, ": not a directory"},
		{"late events output", func(d *streamDirs, file string) { d.late = file }, " is not a directory"},
	} {
		d := newStreamDirs(t)
		file := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(file, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		c.set(&d, file)
		_, err := streamEngine(t, engineRules).Stream(context.Background(), d.config(events))
		if err == nil || !strings.Contains(err.Error(), c.output+": runtime: output directory") || !strings.HasSuffix(err.Error(), c.want) {
			t.Errorf("%s through a file: %v, want it refused (...%s)", c.output, err, c.want)
		}
		for _, dir := range []string{d.state, d.alerts, d.late, d.dead} {
			if st, err := os.Stat(dir); err == nil && st.IsDir() {
				t.Errorf("%s through a file: the run made %s before it failed", c.output, dir)
			}
		}
	}
}

// TestStreamCorruptCheckpoint: a restore from a damaged checkpoint fails,
// saying what to do (the checkpoint is never skipped); done so (its
// directory and its part files moved away), the run resumes from the
// checkpoint before and its output holds the alerts of an undisturbed
// run, each once. It said "corrupt checkpoint: ..." alone.
func TestStreamCorruptCheckpoint(t *testing.T) {
	input := engineInput(400)
	events := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(events, []byte(input), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(d streamDirs) error {
		t.Helper()
		cfg := d.config(events)
		cfg.CheckpointInterval, cfg.CheckpointRecords = time.Hour, 100
		_, err := streamEngine(t, engineRules).Stream(context.Background(), cfg)
		return err
	}
	ref := newStreamDirs(t)
	if err := run(ref); err != nil {
		t.Fatal(err)
	}
	want := committedLines(t, ref.alerts)
	if len(want) == 0 {
		t.Fatal("no alerts")
	}
	d := newStreamDirs(t)
	if err := run(d); err != nil {
		t.Fatal(err)
	}
	chks, _ := filepath.Glob(filepath.Join(d.state, "chk-*"))
	if len(chks) < 2 {
		t.Fatalf("checkpoints %v, want 2 at least", chks)
	}
	newest := 0
	for _, c := range chks {
		var n int
		if _, err := fmt.Sscanf(filepath.Base(c), "chk-%d", &n); err == nil {
			newest = max(newest, n)
		}
	}
	chk := filepath.Join(d.state, fmt.Sprintf("chk-%d", newest))
	if err := os.WriteFile(filepath.Join(chk, "meta", "job"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := run(d)
	hint := fmt.Sprintf("to resume from the one before, move its directory chk-%d out of the state directory and the part files of checkpoint %d out of the output directories", newest, newest)
	if err == nil || !strings.Contains(err.Error(), "corrupt checkpoint") || !strings.Contains(err.Error(), hint) {
		t.Fatalf("a restore of a damaged checkpoint: %v, want it refused, saying what to do", err)
	}
	// What the error says to do.
	if err := os.Rename(chk, filepath.Join(t.TempDir(), "moved")); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{d.alerts, d.late, d.dead} {
		parts, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("*-%d.jsonl", newest)))
		for _, p := range parts {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := run(d); err != nil {
		t.Fatalf("the run resumed from checkpoint %d: %v", newest-1, err)
	}
	if got := committedLines(t, d.alerts); !slices.Equal(got, want) {
		t.Errorf("after the damaged checkpoint: %d alert lines, want the %d of an undisturbed run", len(got), len(want))
	}
}

// TestStreamOutputsShareADirectory: the outputs of one run may share a
// directory (their part files have different prefixes), named alike or
// by another path (a symlink): the run locks it once. Named by another
// path, the second lock was refused, the directory "in use by another
// run", the run's own.
func TestStreamOutputsShareADirectory(t *testing.T) {
	input := engineInput(200)
	events := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(events, []byte(input), 0o644); err != nil {
		t.Fatal(err)
	}
	d := newStreamDirs(t)
	if err := os.Mkdir(d.alerts, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "alerts-link")
	if err := os.Symlink(d.alerts, link); err != nil {
		t.Fatal(err)
	}
	cfg := d.config(events)
	cfg.LateDir, cfg.DeadDir = link, d.alerts+string(filepath.Separator)
	res, err := streamEngine(t, engineRules).Stream(context.Background(), cfg)
	if err != nil || !res.Finished || res.Alerts == 0 || res.Dead == 0 {
		t.Fatalf("Stream with its outputs in one directory (%s, %s, %s): %v, %+v", cfg.AlertsDir, cfg.LateDir, cfg.DeadDir, err, res)
	}
	// Each output's lines are in the directory, under its own prefix.
	for _, o := range []struct {
		prefix string
		want   int64
	}{{"alerts", res.Alerts}, {"late", res.Late}, {"dead", res.Dead}} {
		files, err := filepath.Glob(filepath.Join(d.alerts, o.prefix+"-*"))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			n += bytes.Count(b, []byte("\n"))
		}
		if int64(n) != o.want {
			t.Errorf("%d lines in the %s part files of the shared directory (%d files), want the run's %d", n, o.prefix, len(files), o.want)
		}
	}
}
