//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// crashRecords is the checkpoint cadence of the failpoint scenarios: a
// checkpoint every so many records (-checkpoint-records), so that a run
// over their input of about 44,000 lines takes about ten, at the same
// records in every run and on any machine (a hit @N is always there). The
// random scenarios checkpoint by time instead, every crashInterval.
const (
	crashRecords  = 4000
	crashInterval = 50 * time.Millisecond
)

// crashFinalInterval is longer than any run: the only checkpoint is the
// final one, which the final/ scenarios kill.
const crashFinalInterval = time.Hour

// crashScenario is a chain of runs over one state directory: the steps,
// each killed (by its failpoint, or by the test after a random delay
// unless it finished before), then the final run, which must exit 0.
type crashScenario struct {
	name  string
	dir   bool // the input is the directory of partitions, not the file
	kafka bool // the input is the file produced into a Kafka topic
	// consume: after each kill, a consumer takes every committed part
	// file away (crashDirs.consume), those of the checkpoint the next
	// run restores among them.
	consume bool
	steps   []crashConfig
	final   crashConfig
}

// crashAt is a run of parallelism p on backend b killed at failpoint.
func crashAt(p int, b, failpoint string) crashConfig {
	return crashConfig{parallelism: p, backend: b, interval: crashFinalInterval, records: crashRecords, failpoint: failpoint}
}

// crashDone is a run of parallelism p on backend b that must finish.
func crashDone(p int, b string) crashConfig {
	return crashConfig{parallelism: p, backend: b, interval: crashFinalInterval, records: crashRecords}
}

// crashScenarios are the chains of TestCrashRecovery: every failpoint of
// internal/failpoint, some at a later hit (@N), kills during the recovery
// of the sinks (which needs the pending files of a run killed before),
// kills at the steps of the final checkpoint, and chains of kills at
// random moments with a random parallelism and backend at each start
// (drawn from seed; run is an uninterrupted run's time). Parallelism (1,
// 2, 3) and backend vary across the kill points, and change on many
// restarts.
//
// A hit after the first (@N) is asked of a fresh run only, which takes
// enough checkpoints for it; a restart that resumes late in the input
// may take only its final one, so later steps of a chain ask for the
// first hit.
func crashScenarios(seed uint64, run time.Duration) []crashScenario {
	const mem, peb = "memory", "pebble"
	one := func(point string, p int, b string, final crashConfig) crashScenario {
		return crashScenario{name: point, steps: []crashConfig{crashAt(p, b, point)}, final: final}
	}
	sc := []crashScenario{
		one("barrier.before", 1, mem, crashDone(1, mem)),
		one("barrier.after@2", 2, peb, crashDone(3, peb)),
		one("snapshot.mid", 3, mem, crashDone(3, mem)),
		one("snapshot.mid@2", 2, peb, crashDone(1, mem)),
		one("checkpoint.written", 1, peb, crashDone(1, peb)),
		one("checkpoint.synced", 2, mem, crashDone(3, mem)),
		one("checkpoint.renamed", 3, peb, crashDone(1, peb)),
		one("checkpoint.parent-synced", 1, mem, crashDone(2, mem)),
		one("checkpoint.marker-renamed", 2, peb, crashDone(2, peb)),
		one("checkpoint.complete", 3, mem, crashDone(2, peb)),
		one("checkpoint.complete@2", 1, peb, crashDone(1, peb)),
		one("commit.before-sinks", 2, mem, crashDone(2, mem)),
		one("sink.precommit.synced", 1, mem, crashDone(1, mem)),
		one("sink.precommit.synced@3", 3, peb, crashDone(3, peb)),
		one("sink.precommit.renamed", 2, mem, crashDone(3, peb)),
		one("sink.commit.renamed", 2, peb, crashDone(2, peb)),
		one("sink.commit.renamed@2", 3, mem, crashDone(1, mem)),
		// A checkpoint complete, its sinks not committed: the restart
		// renames the pending files, and dies doing it.
		{name: "recover/sink.recover.renamed", steps: []crashConfig{
			crashAt(2, mem, "commit.before-sinks@2"), crashAt(2, mem, "sink.recover.renamed"),
		}, final: crashDone(3, mem)},
		// The same with fewer subtasks at the restart, which recovers the
		// sinks of the subtasks it no longer has too.
		{name: "recover/sink.recover.renamed@3", steps: []crashConfig{
			crashAt(3, peb, "commit.before-sinks@3"), crashAt(1, peb, "sink.recover.renamed@3"),
		}, final: crashDone(2, peb)},
		// A checkpoint not complete, with pending files: the restart
		// deletes them, and dies doing it.
		{name: "recover/sink.recover.deleted", steps: []crashConfig{
			crashAt(2, mem, "sink.precommit.renamed@2"), crashAt(2, mem, "sink.recover.deleted"),
		}, final: crashDone(1, mem)},
		// The same after a complete checkpoint (about seven part files a
		// checkpoint at parallelism 3).
		{name: "recover/sink.recover.deleted@2", steps: []crashConfig{
			crashAt(3, mem, "sink.precommit.renamed@10"), crashAt(3, peb, "sink.recover.deleted@2"),
		}, final: crashDone(3, peb)},
		// Kill after kill, each run resuming from the one before.
		{name: "repeated", steps: []crashConfig{
			crashAt(2, mem, "barrier.after@2"), crashAt(2, mem, "barrier.after"), crashAt(3, peb, "snapshot.mid"),
			crashAt(1, peb, "checkpoint.complete"), crashAt(2, mem, "sink.commit.renamed"),
		}, final: crashDone(2, mem)},
		// A consumer takes the committed part files after each kill, the
		// restored checkpoint's among them: the restart goes on (it
		// refused, their names missing), and nothing is written twice.
		{name: "consumed/sink.commit.renamed@2", consume: true, steps: []crashConfig{
			crashAt(2, mem, "sink.commit.renamed@2"), crashAt(3, peb, "checkpoint.complete"), crashAt(1, mem, "sink.commit.renamed"),
		}, final: crashDone(2, peb)},
		// The directory of partitions, one of them gzip-compressed (a
		// restore decompresses it again up to its position).
		{name: "partitions/checkpoint.complete@2", dir: true, steps: []crashConfig{
			crashAt(2, peb, "checkpoint.complete@2"), crashAt(3, mem, "sink.recover.deleted"),
		}, final: crashDone(1, mem)},
	}
	// The final checkpoint (the run's only one) at its steps.
	for _, f := range []struct {
		point string
		p     int
		b     string
	}{
		{"barrier.after", 1, peb},
		{"checkpoint.renamed", 2, peb},
		{"checkpoint.marker-renamed", 1, mem},
		{"commit.before-sinks", 2, mem},
		{"sink.commit.renamed@2", 3, peb},
	} {
		c := crashAt(f.p, f.b, f.point)
		c.records = 0
		final := crashDone(f.p%3+1, f.b)
		final.records = 0
		sc = append(sc, crashScenario{name: "final/" + f.point, steps: []crashConfig{c}, final: final})
	}
	// Kills at random moments: a quarter of them in the first 60ms (the
	// start, the restore, the sinks' recovery), the others in the next
	// half of an uninterrupted run's time (a restart has less to do).
	r := crashRand(seed, 1)
	config := func() crashConfig {
		c := crashDone(1+r.IntN(3), []string{mem, peb}[r.IntN(2)])
		c.interval, c.records = crashInterval, 0
		return c
	}
	for i := range 5 {
		s := crashScenario{name: fmt.Sprintf("random/%d", i+1), dir: i == 4, final: config()}
		if s.dir {
			s.name = "partitions/random"
		}
		for range 6 {
			c := config()
			if r.IntN(4) == 0 {
				c.killAfter = time.Duration(2+r.IntN(58)) * time.Millisecond
			} else {
				c.killAfter = 60*time.Millisecond + time.Duration(r.Int64N(int64(max(run/2, 50*time.Millisecond))))
			}
			s.steps = append(s.steps, c)
		}
		sc = append(sc, s)
	}
	return sc
}

// crashSuite is what the scenarios of one TestCrashRecovery share.
type crashSuite struct {
	bin, rules string
	seed       uint64
	file, dir  *crashReference
	kafka      *crashReference // the Kafka scenarios' input (TestCrashRecoveryKafka)
	kills      []string        // every kill point of the suite
	ran        int             // scenarios run
}

// crashReference is an input and the outputs every chain of runs over it
// must commit: those of an uninterrupted run (want), which took run, and
// for the file those of cepheus backtest too.
type crashReference struct {
	events   string   // the file or directory
	topic    string   // or the Kafka topic (read with -input-topic -bounded)
	files    []string // the names of its partitions
	want     crashOutputs
	backtest *crashOutputs
	run      time.Duration
}

// TestCrashRecovery runs cepheus run as a child process over generated
// events (with malformed lines and late events injected), kills it with
// SIGKILL at every failpoint and at random moments, and restarts it on the
// same state directory until a run exits 0, changing the parallelism and
// the state backend on many restarts. Then the committed alerts, late
// events and dead letters must be those of an uninterrupted run and of
// cepheus backtest, as multisets: nothing lost, nothing written twice.
// After each kill, what is committed must be part of them; after the
// final run, nothing uncommitted is left and a rerun changes nothing.
// Two scenarios read the events as a directory of three partitions, and
// compare with an uninterrupted run over that directory.
//
// CEPHEUS_CRASH_SEED (default 1) seeds every random choice; the seed is
// logged when the test fails.
func TestCrashRecovery(t *testing.T) {
	seed := crashSeed(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s=%d go test ./cmd/cepheus -run 'TestCrashRecovery' reproduces this run", crashSeedEnv, seed)
		}
	})
	begin := time.Now()
	s := &crashSuite{bin: buildCepheus(t), rules: "../../rulesets/cards.cep", seed: seed}
	dir := t.TempDir()
	events, inj := crashInput(t, s.bin, dir, seed)
	s.file = &crashReference{events: events, files: []string{filepath.Base(events)}}
	backtest := s.backtest(t, dir, events, inj)
	s.file.backtest = &backtest
	s.uninterrupted(t, s.file, filepath.Join(dir, "uninterrupted"))
	if diff := backtest.diff(s.file.want); diff != "" {
		t.Errorf("an uninterrupted cepheus run differs from cepheus backtest:%s", diff)
	}
	parts, names := crashPartitions(t, events, dir)
	s.dir = &crashReference{events: parts, files: names}
	s.uninterrupted(t, s.dir, filepath.Join(dir, "uninterrupted-partitions"))
	if t.Failed() {
		t.FailNow()
	}
	scenarios := crashScenarios(seed, s.file.run)
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) { s.chain(t, sc) })
	}
	t.Logf("%d scenarios, %d kill points in %v (seed %d): %s", s.ran, len(s.kills),
		time.Since(begin).Round(time.Millisecond), seed, strings.Join(s.kills, ", "))
	if s.ran == len(scenarios) && len(s.kills) < 20 {
		t.Errorf("%d kill points across the suite, want at least 20", len(s.kills))
	}
}

// backtest runs cepheus backtest over events and returns its outputs,
// checking that the input holds what the scenarios need: exactly the
// injected dead letters and late events, and alerts.
func (s *crashSuite) backtest(t *testing.T, dir, events string, inj crashInjected) crashOutputs {
	t.Helper()
	path := func(name string) string { return filepath.Join(dir, "backtest-"+name+".jsonl") }
	e := runChild(t, s.bin, []string{"backtest", "-q", "-rules", s.rules, "-events", events,
		"-alerts", path("alerts"), "-late", path("late"), "-dead-letter", path("dead")}, "", 0)
	if e.killed || e.code != 0 {
		t.Fatalf("cepheus backtest: %s\n%s", e.describe(), e.tail())
	}
	o := backtestOutputs(t, path("alerts"), path("late"), path("dead"))
	lineField := regexp.MustCompile(`^\{"(?:ruleset":"[^"]*","line|line)":([0-9]+),`)
	for _, k := range []struct {
		what, path string
		want       []int64
	}{
		{"dead letters", path("dead"), inj.dead},
		{"late events", path("late"), inj.late},
	} {
		var got []int64
		jsonLines(t, k.path, func(where string, l []byte) {
			m := lineField.FindSubmatch(l)
			if m == nil {
				t.Fatalf("%s: no line number: %s", where, shorten(string(l)))
			}
			n, _ := strconv.ParseInt(string(m[1]), 10, 64)
			got = append(got, n)
		})
		slices.Sort(got)
		if !slices.Equal(got, k.want) {
			t.Errorf("the backtest's %s are at lines %v, want the %d injected at %v", k.what, got, len(k.want), k.want)
		}
	}
	if n := sum(o.alerts); n < 100 {
		t.Errorf("the backtest found %d alerts, want at least 100", n)
	}
	t.Logf("input %s: backtest %s", events, o)
	return o
}

// uninterrupted runs ref's input without a kill into root, and keeps its
// outputs and time in ref. The run must take several checkpoints.
func (s *crashSuite) uninterrupted(t *testing.T, ref *crashReference, root string) {
	t.Helper()
	d := newCrashDirs(root)
	c := crashDone(2, "memory")
	e := runChild(t, s.bin, s.runArgs(ref, d, c), "", 0)
	if e.killed || e.code != 0 {
		t.Fatalf("uninterrupted cepheus run %v over %s: %s\n%s", c, ref.events, e.describe(), e.tail())
	}
	ref.run = e.elapsed
	var others []string
	ref.want, others = d.committed(t, ref.files)
	if len(others) > 0 {
		t.Errorf("uninterrupted run over %s: uncommitted files left: %v", ref.events, others)
	}
	// The dead-letter part files are named after their checkpoints; with
	// a dead letter every 300 lines or so, most checkpoints have some.
	last := 0
	entries, err := os.ReadDir(d.dead)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(e.Name(), "dead-0-"), ".jsonl")); err == nil {
			last = max(last, n)
		}
	}
	if last < 4 {
		t.Errorf("uninterrupted run over %s: dead letters committed up to checkpoint %d, want at least 4 checkpoints in a run",
			ref.events, last)
	}
	t.Logf("uninterrupted run %v over %s: %s, %v, %d checkpoints", c, ref.events, ref.want, e.elapsed.Round(time.Millisecond), last)
}

func (s *crashSuite) runArgs(ref *crashReference, d crashDirs, c crashConfig) []string {
	input := []string{"-events", ref.events}
	if ref.topic != "" {
		input = []string{"-input-topic", ref.topic, "-bounded"}
	}
	return append([]string{"run", "-rules", s.rules}, append(input, "-state", d.state,
		"-alerts", d.alerts, "-late", d.late, "-dead-letter", d.dead,
		"-checkpoint-interval", c.interval.String(), "-checkpoint-records", strconv.Itoa(c.records),
		"-parallelism", strconv.Itoa(c.parallelism), "-state-backend", c.backend)...)
}

// chain runs a scenario in a fresh state directory and checks its
// outputs.
func (s *crashSuite) chain(t *testing.T, sc crashScenario) {
	s.ran++
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s=%d go test ./cmd/cepheus -run 'TestCrashRecovery/%s$' reproduces this scenario",
				crashSeedEnv, s.seed, regexp.QuoteMeta(sc.name))
		}
	})
	ref := s.file
	switch {
	case sc.dir:
		ref = s.dir
	case sc.kafka:
		ref = s.kafka
	}
	d := newCrashDirs(t.TempDir())
	taken := false // a restart said a consumer took a restored part file
	for i, c := range sc.steps {
		e := runChild(t, s.bin, s.runArgs(ref, d, c), c.failpoint, c.killAfter)
		taken = taken || strings.Contains(e.stderr, "taken by a consumer after its commit")
		t.Logf("start %d: %v: %s", i+1, c, e.describe())
		switch {
		case e.killed && c.failpoint != "":
			s.kills = append(s.kills, c.failpoint)
		case e.killed:
			s.kills = append(s.kills, fmt.Sprintf("random %v", c.killAfter.Round(time.Millisecond)))
		case c.failpoint != "":
			t.Fatalf("start %d (%v): never reached the failpoint: %s\n%s", i+1, c, e.describe(), e.tail())
		case e.code != 0:
			t.Fatalf("start %d (%v): %s\n%s", i+1, c, e.describe(), e.tail())
		}
		// Whatever moment the process died, a reader sees whole lines,
		// each of them once and each of them wanted.
		got, _ := d.committed(t, ref.files)
		if x := ref.want.exceeds(got); x != "" {
			t.Errorf("after start %d (%v), the committed outputs hold more than an uninterrupted run's:%s", i+1, c, x)
		}
		if !e.killed {
			t.Logf("the run finished before its kill: the chain ends here")
			break
		}
		if sc.consume {
			d.consume(t)
		}
	}
	e := runChild(t, s.bin, s.runArgs(ref, d, sc.final), "", 0)
	t.Logf("final start: %v: %s", sc.final, e.describe())
	if taken = taken || strings.Contains(e.stderr, "taken by a consumer after its commit"); sc.consume && !taken {
		t.Errorf("no restart said that a consumer took a part file of the checkpoint it restored")
	}
	if e.killed || e.code != 0 {
		t.Fatalf("final start (%v): %s, want exit 0\n%s", sc.final, e.describe(), e.tail())
	}
	got, others := d.committed(t, ref.files)
	if len(others) > 0 {
		t.Errorf("after the final run, files never committed are left: %v", others)
	}
	if diff := ref.want.diff(got); diff != "" {
		t.Errorf("the committed outputs (%s) differ from an uninterrupted run's (%s):%s", got, ref.want, diff)
	}
	if ref.backtest != nil {
		if diff := ref.backtest.diff(got); diff != "" {
			t.Errorf("the committed outputs (%s) differ from cepheus backtest's (%s):%s", got, ref.backtest, diff)
		}
	}
	// A rerun on the finished state exits 0 and touches no output.
	before := d.fingerprint(t)
	again := crashDone(sc.final.parallelism%3+1, sc.final.backend)
	e = runChild(t, s.bin, s.runArgs(ref, d, again), "", 0)
	if e.killed || e.code != 0 {
		t.Fatalf("rerun on the finished state (%v): %s, want exit 0\n%s", again, e.describe(), e.tail())
	}
	if after := d.fingerprint(t); after != before {
		t.Errorf("the rerun on the finished state changed the outputs:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}
