package cep

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
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
	"github.com/cepheus-cep/cepheus/rules"
	"github.com/cepheus-cep/cepheus/runtime/state"
)

// deployV1 and deployV2 are two versions of a ruleset: keep is the same
// in both, change changes its threshold, gone is removed, fresh is added,
// and v2's schema adds a field.
const deployHeader = `
event time ts

schema {
  ts: time
  card: string
  type: string
  amount: float
  country: string
%s}
`

const deployKeep = `
rule keep {
  key card
  pattern {
    begin big where type == "auth" && amount > 300
    followedBy foreign where country != big.country
    within 10m
  }
}
`

// deployFreshCountry is a rule of deployV2 keyed by a field no rule of
// deployV1 is: in Kafka mode that needs a repartition topic the job has
// not, so deployV2Kafka goes without it.
const deployFreshCountry = `
rule fresh_country {
  key country
  pattern {
    begin a where type == "capture" && amount > 450
    followedBy b where type == "capture" && amount > 450
    within 5m
  }
}
`

var (
	deployV1 = "ruleset deploy\n" + deployHeaderV1 + deployKeep + `
rule change {
  key card
  pattern {
    begin a where type == "auth" && amount > 500
    followedBy b where type == "capture"
    within 10m
  }
}

rule gone {
  key card
  pattern {
    begin a where type == "capture" && amount > 500
    followedBy b where type == "capture" && amount > 500
    within 5m
  }
}
`
	deployV2 = "ruleset deploy\n" + deployHeaderV2 + deployKeep + `
rule change {
  key card
  pattern {
    begin a where type == "auth" && amount > 450
    followedBy b where type == "capture"
    within 10m
  }
}

rule fresh {
  key card
  pattern {
    begin a where type == "auth" && amount < 60
    followedBy b where type == "auth" && amount < 60
    within 5m
  }
}

` + deployFreshCountry + ``
	deployV2Kafka  = strings.Replace(deployV2, deployFreshCountry, "", 1)
	deployHeaderV1 = fmt.Sprintf(deployHeader, "")
	deployHeaderV2 = fmt.Sprintf(deployHeader, "  merchant: string\n")
)

// deployAlert is what the deploy test compares of an alert.
type deployAlert struct {
	rule, key, lines, version string
	first, detected           event.Time
}

func (a deployAlert) String() string {
	return fmt.Sprintf("%s %s lines %s first %d detected %d version %.8s", a.rule, a.key, a.lines, a.first, a.detected, a.version)
}

// parseDeployAlerts parses alert lines.
func parseDeployAlerts(t *testing.T, lines []string) []deployAlert {
	t.Helper()
	var out []deployAlert
	for _, l := range lines {
		var a struct {
			Rule     string                      `json:"rule"`
			Version  string                      `json:"ruleset_version"`
			Key      map[string]any              `json:"key"`
			Detected time.Time                   `json:"detected_at"`
			Matched  map[string][]map[string]any `json:"matched"`
		}
		if err := json.Unmarshal([]byte(l), &a); err != nil {
			t.Fatalf("alert %q: %v", l, err)
		}
		first := event.MaxTime
		var ls []string
		for _, stage := range slices.Sorted(func(yield func(string) bool) {
			for s := range a.Matched {
				if !yield(s) {
					return
				}
			}
		}) {
			for _, ev := range a.Matched[stage] {
				ts, err := time.Parse(time.RFC3339Nano, ev["ts"].(string))
				if err != nil {
					t.Fatal(err)
				}
				first = min(first, event.Time(ts.UnixMilli()))
				// Not the line: a Kafka record's is its offset.
				ls = append(ls, fmt.Sprintf("%s:%s/%v/%v", stage, ev["ts"], ev["type"], ev["amount"]))
			}
		}
		out = append(out, deployAlert{
			rule: a.Rule, key: fmt.Sprint(a.Key), lines: strings.Join(ls, ","), version: a.Version,
			first: first, detected: event.Time(a.Detected.UnixMilli()),
		})
	}
	return out
}

// backtestAlerts are the alerts of a backtest of src over input.
func backtestAlerts(t *testing.T, src, input string) []deployAlert {
	t.Helper()
	es, err := NewEventSource(strings.NewReader(input), "input")
	if err != nil {
		t.Fatal(err)
	}
	var alerts bytes.Buffer
	e, err := New(WithRuleset(loadRules(t, src)), WithOutOfOrderness(10*time.Second), WithWatermarkEvery(3), WithAlerts(&alerts))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Run(context.Background(), es); err != nil {
		t.Fatal(err)
	}
	return parseDeployAlerts(t, sortedLines(alerts.String()))
}

// TestStreamDeploy deploys a new version into a running job that follows
// a growing file, under load, then restarts it with the first version's
// engine (the same rules file): the alerts committed are exactly those
// the switch defines. An unchanged rule's matches are all raised, those
// that span the switch too, with the old version before the switch and
// the new one after; a changed rule's matches that begin at or before
// the switch's watermark are its old version's (drained), the later ones
// the new version's; a removed rule stops at the switch; an added one
// starts there. The restart resumes with the deployed version. Both
// state backends.
func TestStreamDeploy(t *testing.T) {
	for _, b := range []Backend{BackendMemory, BackendPebble} {
		t.Run(string(b), func(t *testing.T) { testStreamDeploy(t, b) })
	}
}

func testStreamDeploy(t *testing.T, backend Backend) {
	input := deployInput(900)
	lines := strings.SplitAfter(input, "\n")
	half := len(lines) / 2
	events := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(events, []byte(strings.Join(lines[:half], "")), 0o644); err != nil {
		t.Fatal(err)
	}
	v1, v2 := loadRules(t, deployV1), loadRules(t, deployV2)
	d := newStreamDirs(t)
	m := NewStreamMonitor()
	cfg := d.config(events)
	cfg.Follow, cfg.PollInterval, cfg.Monitor = true, 2*time.Millisecond, m
	cfg.Logf, cfg.Backend = t.Logf, backend
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := streamEngine(t, deployV1).Stream(ctx, cfg)
		done <- err
	}()
	waitRecords := func(n int64) { t.Helper(); waitMonitor(t, m, n) }
	waitRecords(int64(strings.Count(strings.Join(lines[:half], ""), "\n")))

	// A ruleset that does not compile changes nothing.
	_, err := m.Deploy(ctx, Deploy{Name: "bad.cep", Source: []byte("ruleset bad\nrule x {\n  pattern {\n    begin a where amount >\n  }\n}\n")})
	var verr *ValidationError
	if !errors.As(err, &verr) || len(verr.Problems) == 0 || verr.Problems[0].Pos.Line == 0 {
		t.Fatalf("bad ruleset: %v, want a ValidationError with positions", err)
	}
	if vs := m.Versions(); len(vs) != 1 || vs[0].Version != v1.Hash {
		t.Fatalf("versions after the refused deploy: %+v", vs)
	}

	// Under load: the second half is written while the deploy switches.
	go func() {
		f, err := os.OpenFile(events, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			panic(err)
		}
		defer f.Close()
		for _, l := range lines[half:] {
			if _, err := f.WriteString(l); err != nil {
				panic(err)
			}
			time.Sleep(50 * time.Microsecond)
		}
	}()
	res, err := m.Deploy(ctx, Deploy{Name: "v2.cep", Source: []byte(deployV2), Origin: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("switched at checkpoint %d, watermark %v, in %v", res.Checkpoint, res.Watermark, res.Took)
	if res.Version != v2.Hash || res.Previous != v1.Hash || res.Checkpoint == 0 || res.Watermark <= event.MinTime ||
		!slices.Equal(res.Kept, []string{"keep"}) || !slices.Equal(res.Changed, []string{"change"}) ||
		!slices.Equal(res.Added, []string{"fresh", "fresh_country"}) || !slices.Equal(res.Removed, []string{"gone"}) {
		t.Fatalf("deploy result %+v", res)
	}
	if vs := m.Versions(); len(vs) != 2 || vs[0].Version != v2.Hash || vs[0].State != VersionActive || vs[0].Origin != "test" ||
		vs[1].Version != v1.Hash || vs[1].State != VersionPrevious {
		t.Fatalf("versions after the deploy: %+v", vs)
	}
	if again, err := m.Deploy(ctx, Deploy{Source: []byte(deployV2)}); err != nil || !again.Unchanged {
		t.Fatalf("the same version again: %+v, %v", again, err)
	}
	waitRecords(int64(strings.Count(input, "\n")))
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Stream after cancel: %v", err)
	}

	// A restart with the first version's file resumes with the second and
	// finishes the input.
	cfg = d.config(events)
	cfg.Backend = backend
	fin, err := streamEngine(t, deployV1).Stream(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if fin.RulesetVersion != v2.Hash || !fin.Finished {
		t.Fatalf("restart: version %.12s (want %.12s), finished %v", fin.RulesetVersion, v2.Hash, fin.Finished)
	}

	checkDeployAlerts(t, deployV2, input, res.Watermark, committedLines(t, d.alerts))
}

// TestStreamDeployUnboundLookup: a deploy whose version declares a
// lookup the engine has no source for runs it with the defaults, and says
// so in the log; a lookup that is bound is not named, and its counters go
// on, also across a version without it.
func TestStreamDeployUnboundLookup(t *testing.T) {
	const holder = `
lookup holder {
  key card
  fields {
    tier: string default "?"
  }
}
`
	const other = `
lookup other {
  key card
  fields {
    score: int default 0
  }
}
`
	v1src := deployV1 + holder
	v2src := deployV1 + holder + other
	v1, v2 := loadRules(t, v1src), loadRules(t, v2src)
	spec, err := lookupSpec(v1, "holder")
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(WithRuleset(v1), WithOutOfOrderness(10*time.Second), WithWatermarkEvery(3),
		WithLookups(map[string]LookupSource{"holder": enrich.NewMemSource(spec, nil)}, LookupOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	events := filepath.Join(t.TempDir(), "events.jsonl")
	lines := strings.SplitAfter(deployInput(200), "\n")
	appendFile(t, events, lines[:len(lines)/2])
	f := follow(t, e, newStreamDirs(t).config(events))
	waitMonitor(t, f.m, int64(len(lines)/2))
	// holder's keys looked up: its counters go on across the deploy,
	// which serves the lookups anew (another set of lookups).
	keys := func() uint64 {
		for _, l := range f.m.Snapshot().Lookups {
			if l.Name == "holder" {
				return l.Hits + l.Misses
			}
		}
		t.Fatal("no counters of lookup holder")
		return 0
	}
	before := keys()
	res, err := f.m.Deploy(context.Background(), Deploy{Source: []byte(v2src)})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Unbound, []string{"other"}) {
		t.Errorf("the deploy's unbound lookups: %v, want [other]", res.Unbound)
	}
	if now := keys(); now < before {
		t.Errorf("lookup holder's keys went from %d to %d at the deploy", before, now)
	}
	appendFile(t, events, lines[len(lines)/2:])
	waitMonitor(t, f.m, int64(strings.Count(strings.Join(lines, ""), "\n")))
	if now := keys(); now <= before {
		t.Errorf("lookup holder's keys: %d after the deploy and more events, %d before", now, before)
	}
	// A version without holder, then one with it again: its counters go
	// on from where they were, not from zero.
	before = keys()
	if _, err := f.m.Deploy(context.Background(), Deploy{Source: []byte(deployV1 + other)}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.Deploy(context.Background(), Deploy{Source: []byte(v2src)}); err != nil {
		t.Fatal(err)
	}
	if now := keys(); now < before {
		t.Errorf("lookup holder's keys went from %d to %d across a version without it", before, now)
	}
	f.stop()
	logs := f.lines()
	want := fmt.Sprintf("warning: lookup other of version %.12s is not bound (the process was started without -lookup other=...): every event gets its defaults; to bind it, restart with this version's file as the rules file and -lookup other=...", v2.Hash)
	if !slices.Contains(logs, want) {
		t.Errorf("the log has no line %q:\n%s", want, strings.Join(logs, "\n"))
	}
	for _, l := range logs {
		if strings.Contains(l, "lookup holder") {
			t.Errorf("the bound lookup is named: %q", l)
		}
	}
}

// TestStreamDeployAtStop: a deploy that meets the end of the run (the
// process stopping) is answered at once, never left waiting for a job
// that is gone: before the switch, to deploy again; after its checkpoint,
// that the version runs from the next start.
func TestStreamDeployAtStop(t *testing.T) {
	input := deployInput(300)
	for i, delay := range []time.Duration{0, 2 * time.Millisecond, 10 * time.Millisecond, 30 * time.Millisecond, 60 * time.Millisecond, 100 * time.Millisecond} {
		events := filepath.Join(t.TempDir(), "events.jsonl")
		if err := os.WriteFile(events, []byte(input), 0o644); err != nil {
			t.Fatal(err)
		}
		f := follow(t, streamEngine(t, deployV1), newStreamDirs(t).config(events))
		m := f.m
		waitMonitor(t, m, int64(strings.Count(input, "\n")))
		type answer struct {
			res *DeployResult
			err error
		}
		answered := make(chan answer, 1)
		go func() {
			dctx, dcancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer dcancel()
			res, err := m.Deploy(dctx, Deploy{Source: []byte(deployV2)})
			answered <- answer{res, err}
		}()
		time.Sleep(delay)
		if _, err := f.end(); err != nil && !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		select {
		case a := <-answered:
			if a.err != nil && (errors.Is(a.err, context.DeadlineExceeded) || !errors.Is(a.err, ErrNoJob) && !strings.Contains(a.err.Error(), "deploy again") && !strings.Contains(a.err.Error(), "runs from the next start")) {
				t.Errorf("%d: a deploy %v before the stop: %v", i, delay, a.err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%d: a deploy %v before the stop is not answered 5 s after the run ended", i, delay)
			<-answered
		}
	}
}

// TestStreamSwitchKeepsRunCounters: the counters of a run (a Stream call)
// go on across its switches: the checkpoints it took, the records it
// read, the checkpoint it resumed from, and its first event, logged once
// by a resumed run.
func TestStreamSwitchKeepsRunCounters(t *testing.T) {
	input := deployInput(400)
	lines := strings.SplitAfter(input, "\n")
	q := len(lines) / 4
	chunks := [][]string{lines[:q], lines[q : 2*q], lines[2*q : 3*q], lines[3*q:]}
	events := filepath.Join(t.TempDir(), "events.jsonl")
	appendLines := func(ls []string) { t.Helper(); appendFile(t, events, ls) }
	fileRecords := func() int64 {
		t.Helper()
		b, err := os.ReadFile(events)
		if err != nil {
			t.Fatal(err)
		}
		return int64(strings.Count(string(b), "\n"))
	}
	d := newStreamDirs(t)
	// run appends before to the file, streams it until its records are
	// read, deploys src, appends after, waits for it and stops.
	run := func(before []string, src string, after []string) (*StreamResult, []string) {
		t.Helper()
		appendLines(before)
		f := follow(t, streamEngine(t, deployV1), d.config(events))
		waitMonitor(t, f.m, fileRecords())
		if _, err := f.m.Deploy(context.Background(), Deploy{Source: []byte(src)}); err != nil {
			t.Fatal(err)
		}
		appendLines(after)
		waitMonitor(t, f.m, fileRecords())
		return f.stop(), f.lines()
	}
	firstEvents := func(logs []string) int {
		n := 0
		for _, l := range logs {
			if strings.HasPrefix(l, "first event ") {
				n++
			}
		}
		return n
	}
	// A fresh run that switches: every checkpoint of the state directory
	// is its own, every record its own read, and it logs no first event.
	res, logs := run(chunks[0], deployV2, chunks[1])
	st := res.Stats
	if res.Restored != 0 || st.Checkpoints+st.Aborted != st.LastCheckpoint || st.RunRecords != st.Records || st.FirstEvent <= 0 {
		t.Errorf("a fresh run that switched: resumed from %d, %d checkpoints taken (%d aborted), last %d, %d records read of %d, first event after %v; want 0, every checkpoint, every record, a first event",
			res.Restored, st.Checkpoints, st.Aborted, st.LastCheckpoint, st.RunRecords, st.Records, st.FirstEvent)
	}
	if n := firstEvents(logs); n != 0 {
		t.Errorf("a fresh run logged its first event %d times, want 0 (a resumed run does):\n%s", n, strings.Join(logs, "\n"))
	}
	// A resumed run that reads, switches back and reads on: it resumed
	// from the checkpoint the first run stopped at, took every checkpoint
	// after it, read the records appended since, and logs its first event
	// once.
	res2, logs := run(chunks[2], deployV1, chunks[3])
	st2 := res2.Stats
	read := int64(strings.Count(strings.Join(chunks[2], "")+strings.Join(chunks[3], ""), "\n"))
	if res2.Restored != st.LastCheckpoint || st2.Checkpoints+st2.Aborted != st2.LastCheckpoint-st.LastCheckpoint || st2.RunRecords != read {
		t.Errorf("a resumed run that switched: resumed from %d (want %d), %d checkpoints taken (%d aborted), last %d, %d records read (want %d)",
			res2.Restored, st.LastCheckpoint, st2.Checkpoints, st2.Aborted, st2.LastCheckpoint, st2.RunRecords, read)
	}
	if n := firstEvents(logs); n != 1 {
		t.Errorf("a resumed run logged its first event %d times, want once:\n%s", n, strings.Join(logs, "\n"))
	}
}

// TestStreamRuleCountersMonotonic: the per-rule counters a monitor
// publishes (cepheus_rule_alerts_total and the others of a rule) never go
// down in one process, whatever the switches do to the rules' states: a
// deploy that keeps a rule, changes one (which drains, then is let go),
// removes one; a rollback that adds the removed one back; a deploy that
// drops a changed rule at once. A rule that leaves the active version
// keeps its last figures (MonitorSnapshot.Former). The run's summary
// (StreamResult.Rules) has at its end the figures the monitor has: it had
// the last job's alone, its rules compiled again by the last switch (no
// condition error of before it), without a removed rule's or a former
// severity's.
func TestStreamRuleCountersMonotonic(t *testing.T) {
	// errs's condition fails on an event of even amount (an integer %
	// by zero): it counts condition errors. v2 changes its severity.
	errs := `
rule errs {
  severity %s
  key card
  pattern {
    begin a where type == "auth" && len(country) %% (int(amount) %% 2) == 1
    followedBy b where type == "capture"
    within 5m
  }
}
`
	v1 := deployV1 + fmt.Sprintf(errs, "medium")
	v2 := deployV2 + fmt.Sprintf(errs, "high")
	// v3 changes keep's severity.
	v3 := strings.Replace(v2, "rule keep {\n", "rule keep {\n  severity high\n", 1)
	// s2 is a second shadow version: v1 without gone.
	s2 := strings.Replace(v1, "rule gone {", "rule gone_for_good {", 1)
	input := deployInput(900)
	lines := strings.SplitAfter(input, "\n")
	q := len(lines) / 6
	var chunks [][]string
	for i := range 5 {
		chunks = append(chunks, lines[i*q:(i+1)*q])
	}
	chunks = append(chunks, lines[5*q:])
	events := filepath.Join(t.TempDir(), "events.jsonl")
	appendLines := func(ls []string) { t.Helper(); appendFile(t, events, ls) }
	read := int64(0)
	d := newStreamDirs(t)
	m := NewStreamMonitor()
	cfg := d.config(events)
	cfg.Follow, cfg.PollInterval, cfg.Monitor = true, 2*time.Millisecond, m
	cfg.ShadowDir = filepath.Join(t.TempDir(), "shadow")
	var logMu sync.Mutex
	letGo := 0 // the switches that let draining rules go
	var switches []string
	cfg.Logf = func(format string, args ...any) {
		t.Logf(format, args...)
		logMu.Lock()
		defer logMu.Unlock()
		if strings.HasPrefix(format, "the draining rules of earlier versions have passed their windows") {
			letGo++
		}
		if strings.HasPrefix(format, "switched to ruleset") {
			switches = append(switches, fmt.Sprintf(format, args...))
		}
	}
	appendLines(chunks[0])
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	var res *StreamResult
	go func() {
		var err error
		res, err = streamEngine(t, v1).Stream(ctx, cfg)
		done <- err
	}()

	// A poller sees every figure the exporter could scrape: none goes
	// down between two snapshots, and no rule once counted vanishes.
	type figures struct{ alerts, condErrs, dropped int64 }
	counts := func(s MonitorSnapshot) map[string]figures {
		out := map[string]figures{}
		for _, rs := range [][]RuleCount{s.Rules, s.Former} {
			for _, r := range rs {
				out[r.Rule+"/"+r.Severity] = figures{r.Alerts, r.ConditionErrors, r.Dropped}
			}
		}
		// The shadow's: alerts, the active rule's and the overlap.
		for _, r := range s.ShadowTotals {
			out["shadow "+r.Rule] = figures{r.Shadow, r.Active, r.Overlap}
		}
		return out
	}
	var pollMu sync.Mutex
	var downs []string
	last := map[string]figures{}
	var lastAlerts int64
	check := func(when string) {
		pollMu.Lock()
		defer pollMu.Unlock()
		s := m.Snapshot()
		now := counts(s)
		for k, was := range last {
			is, ok := now[k]
			switch {
			case !ok:
				downs = append(downs, fmt.Sprintf("%s: rule %s gone (was %+v)", when, k, was))
			case is.alerts < was.alerts || is.condErrs < was.condErrs || is.dropped < was.dropped:
				downs = append(downs, fmt.Sprintf("%s: rule %s went down: %+v -> %+v", when, k, was, is))
			}
		}
		if s.Progress.Alerts < lastAlerts {
			downs = append(downs, fmt.Sprintf("%s: alerts went down: %d -> %d", when, lastAlerts, s.Progress.Alerts))
		}
		for k, f := range now {
			last[k] = f
		}
		lastAlerts = s.Progress.Alerts
	}
	pollDone := make(chan struct{})
	stopPoll := make(chan struct{})
	go func() {
		defer close(pollDone)
		for {
			select {
			case <-stopPoll:
				return
			case <-time.After(time.Millisecond):
				check("poll")
			}
		}
	}()
	// step reads what was appended, checks, and returns the rules' alerts.
	step := func(name string) map[string]figures {
		t.Helper()
		waitMonitor(t, m, read)
		check(name)
		pollMu.Lock()
		defer pollMu.Unlock()
		t.Logf("%s: %v", name, last)
		return maps.Clone(last)
	}
	add := func(ls []string) {
		t.Helper()
		appendLines(ls)
		read += int64(strings.Count(strings.Join(ls, ""), "\n"))
	}
	// waitLetGo waits until n switches have let draining rules go.
	waitLetGo := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(2 * time.Millisecond) {
			logMu.Lock()
			got := letGo
			logMu.Unlock()
			if got >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d switches let draining rules go, want %d", got, n)
			}
		}
	}
	deploy := func(name string, d func() (*DeployResult, error)) {
		t.Helper()
		res, err := d()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Logf("%s: kept %v, changed %v, added %v, removed %v", name, res.Kept, res.Changed, res.Added, res.Removed)
		step(name)
	}

	read = int64(strings.Count(strings.Join(chunks[0], ""), "\n"))
	first := step("v1")
	for _, r := range []string{"keep/medium", "change/medium", "gone/medium"} {
		if first[r].alerts == 0 {
			t.Fatalf("rule %s has no alerts before the first deploy: the test needs some", r)
		}
	}
	if first["errs/medium"].condErrs == 0 {
		t.Fatal("rule errs has no condition errors before the first deploy: the test needs some")
	}
	// keep kept, change changed (draining), gone removed, fresh added.
	v1Hash := m.Snapshot().RulesetVersion
	deploy("deploy v2", func() (*DeployResult, error) { return m.Deploy(ctx, Deploy{Source: []byte(v2)}) })
	// The monitor names the draining rules (cepheus status) until they
	// are let go.
	var draining []string
	for _, r := range m.Snapshot().Draining {
		draining = append(draining, fmt.Sprintf("%s %s until>0=%v", r.Rule, r.Version, r.Until > 0))
	}
	if want := []string{"change " + v1Hash + " until>0=true", "errs " + v1Hash + " until>0=true"}; !slices.Equal(draining, want) {
		t.Errorf("draining after the deploy of v2: %q, want %q", draining, want)
	}
	add(chunks[1])
	waitLetGo(1)
	waitSnapshot(t, m, "no rule draining", func(sn MonitorSnapshot) bool { return len(sn.Draining) == 0 })
	step("v2, change let go")
	// change changed back, gone added back, fresh removed.
	deploy("rollback", func() (*DeployResult, error) { return m.Rollback(ctx, SwitchOptions{}) })
	add(chunks[2])
	waitLetGo(2)
	step("v1 again, change let go")
	// change dropped at once, gone removed again, fresh added back.
	deploy("deploy v2, drop changed", func() (*DeployResult, error) {
		return m.Deploy(ctx, Deploy{Source: []byte(v2), DropChanged: true})
	})
	add(chunks[3])
	step("v2 again")
	// The log says which changed rules drain and which were dropped.
	logMu.Lock()
	if n := len(switches); n != 3 || strings.Contains(switches[0], "dropped") || !strings.Contains(switches[2], "changed, their partial matches dropped, [change errs]") {
		t.Errorf("the switches' log lines: %q; want the third (-drop-changed) to say change's partial matches were dropped, the first not", switches)
	}
	logMu.Unlock()
	// A shadow version, then a deploy that changes an active rule the
	// shadow is compared with, then another shadow version.
	deploy("shadow v1", func() (*DeployResult, error) { return m.Deploy(ctx, Deploy{Source: []byte(v1), Shadow: true}) })
	add(chunks[4])
	step("shadow v1 read")
	// keep is the same rule in both versions, change is not: the shadow
	// row of keep says so (its state began empty at the deploy).
	same := map[string]bool{}
	for _, r := range m.Snapshot().Shadow {
		same[r.Rule] = r.Unchanged
	}
	if !same["keep"] || same["change"] || same["gone"] {
		t.Errorf("the shadow rows' Unchanged: %v; want keep's alone (gone has no active twin)", same)
	}
	deploy("deploy v3", func() (*DeployResult, error) { return m.Deploy(ctx, Deploy{Source: []byte(v3)}) })
	add(chunks[5])
	step("v3")
	deploy("shadow s2", func() (*DeployResult, error) { return m.Deploy(ctx, Deploy{Source: []byte(s2), Shadow: true}) })

	close(stopPoll)
	<-pollDone
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Stream after cancel: %v", err)
	}
	if len(downs) > 0 {
		t.Errorf("%d counters went down or vanished in one process:\n%s", len(downs), strings.Join(downs, "\n"))
	}
	checkSummaryOfMonitor(t, res, m.Snapshot())
	// What the summary lost: errs/medium's condition errors (counted
	// before the first switch, which changed its severity), gone's alerts
	// (removed), keep/medium's (v3 changed its severity).
	for _, r := range res.Rules {
		switch r.Rule + "/" + r.Severity {
		case "errs/medium":
			if !r.Former || r.ConditionErrors == 0 {
				t.Errorf("errs/medium in the summary: %+v; want former, its condition errors", r)
			}
		case "gone/medium", "keep/medium":
			if !r.Former || r.Alerts == 0 {
				t.Errorf("%s/%s in the summary: %+v; want former, its alerts", r.Rule, r.Severity, r)
			}
		}
	}

	// A restart (another process: a new monitor) counts the alerts of
	// the rule states let go before it as the first process did: gone's,
	// keep/medium's and the drained change's (checkpointed as retired
	// counters). The expression errors count from 0 in a new process
	// (the rules are compiled again), the shadow's from its deploy.
	m2 := NewStreamMonitor()
	cfg.Monitor = m2
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	var res2 *StreamResult
	go func() {
		var err error
		res2, err = streamEngine(t, v1).Stream(ctx2, cfg)
		done <- err
	}()
	waitMonitor(t, m2, read)
	restarted := counts(m2.Snapshot())
	for k, was := range last {
		if strings.HasPrefix(k, "shadow ") {
			continue
		}
		if is := restarted[k]; is.alerts != was.alerts {
			t.Errorf("rule %s after a restart: %d alerts, the first process ended with %d", k, is.alerts, was.alerts)
		}
	}
	cancel2()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the restarted Stream after cancel: %v", err)
	}
	checkSummaryOfMonitor(t, res2, m2.Snapshot())
}

// checkSummaryOfMonitor checks that the rules of a run's summary are those
// the monitor of its process has at its end (cepheus status, the
// metrics): the active version's in ruleset order, then the former ones,
// with the same figures.
func checkSummaryOfMonitor(t *testing.T, res *StreamResult, sn MonitorSnapshot) {
	t.Helper()
	if res == nil {
		t.Fatal("no result of the run")
	}
	var want, got []string
	for _, rs := range []struct {
		former bool
		rules  []RuleCount
	}{{false, sn.Rules}, {true, sn.Former}} {
		for _, r := range rs.rules {
			want = append(want, fmt.Sprintf("%s/%s/%s former=%v alerts=%d timed_out=%d condition_errors=%d emit_errors=%d dropped=%d no_key=%d",
				r.Rule, r.Severity, r.TimeoutSeverity, rs.former, r.Alerts, r.TimedOut, r.ConditionErrors, r.EmitErrors, r.Dropped, r.NoKey))
		}
	}
	var alerts int64
	for _, r := range res.Rules {
		got = append(got, fmt.Sprintf("%s/%s/%s former=%v alerts=%d timed_out=%d condition_errors=%d emit_errors=%d dropped=%d no_key=%d",
			r.Rule, r.Severity, r.TimeoutSeverity, r.Former, r.Alerts, r.TimedOut, r.ConditionErrors, r.EmitErrors, r.Dropped+r.Overflow, r.NoKey))
		alerts += r.Alerts
	}
	if !slices.Equal(got, want) {
		t.Errorf("the run's summary of its rules:\n%s\nthe monitor's at the end:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if alerts != res.Alerts {
		t.Errorf("the summary's rules have %d alerts, the run %d", alerts, res.Alerts)
	}
}

// checkDeployAlerts checks the alerts of a run over input that switched
// from deployV1 to deployV2 at watermark w: every match of keep, those
// detected after w with the new version; change's that begin at or
// before w of the old version, the later ones of the new; gone's
// detected up to w; fresh's that begin after w.
func checkDeployAlerts(t *testing.T, v2src, input string, w event.Time, lines []string) {
	t.Helper()
	v1, v2 := loadRules(t, deployV1), loadRules(t, v2src)
	var want []deployAlert
	for _, a := range backtestAlerts(t, deployV1, input) {
		switch {
		case a.rule == "keep":
			if a.detected > w {
				a.version = v2.Hash
			}
			want = append(want, a)
		case a.rule == "change" && a.first <= w, a.rule == "gone" && a.detected <= w:
			want = append(want, a)
		}
	}
	for _, a := range backtestAlerts(t, v2src, input) {
		if (a.rule == "change" || a.rule == "fresh" || a.rule == "fresh_country") && a.first > w {
			want = append(want, a)
		}
	}
	got := parseDeployAlerts(t, lines)
	count := func(as []deployAlert, pred func(deployAlert) bool) int {
		n := 0
		for _, a := range as {
			if pred(a) {
				n++
			}
		}
		return n
	}
	// The test means something only if every kind of match is there.
	for what, pred := range map[string]func(deployAlert) bool{
		"keep before":          func(a deployAlert) bool { return a.rule == "keep" && a.detected <= w },
		"keep across":          func(a deployAlert) bool { return a.rule == "keep" && a.first <= w && a.detected > w },
		"keep after":           func(a deployAlert) bool { return a.rule == "keep" && a.first > w },
		"change drained after": func(a deployAlert) bool { return a.rule == "change" && a.version == v1.Hash && a.detected > w },
		"change new":           func(a deployAlert) bool { return a.rule == "change" && a.version == v2.Hash },
		"gone":                 func(a deployAlert) bool { return a.rule == "gone" },
		"fresh":                func(a deployAlert) bool { return a.rule == "fresh" },
		// A rule of new key fields: its operator is new at the switch.
		"fresh_country": func(a deployAlert) bool { return a.rule == "fresh_country" },
	} {
		if what == "fresh_country" && v2.Rule(what) == nil {
			continue
		}
		if count(want, pred) == 0 {
			t.Errorf("the input has no %s alerts: the test checks nothing of them", what)
		}
	}
	key := func(a deployAlert) string { return a.String() }
	gotKeys, wantKeys := sortedBy(got, key), sortedBy(want, key)
	if !slices.Equal(gotKeys, wantKeys) {
		t.Errorf("alerts differ (%d committed, %d expected):\n%s", len(got), len(want), multisetDiff(wantKeys, gotKeys))
	}
}

// waitMonitor waits up to 60 s until m's job is ready and has read n
// records.
func waitMonitor(t *testing.T, m *StreamMonitor, n int64) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); m.Snapshot().Progress.Records < n || !m.Ready(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("read %d records of %d", m.Snapshot().Progress.Records, n)
		}
	}
}

// waitSnapshot polls m until cond holds of its snapshot and returns that
// snapshot, failing t after 60 s with what did not happen.
func waitSnapshot(t *testing.T, m *StreamMonitor, what string, cond func(MonitorSnapshot) bool) MonitorSnapshot {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(time.Millisecond) {
		if sn := m.Snapshot(); cond(sn) {
			return sn
		}
		if time.Now().After(deadline) {
			sn := m.Snapshot()
			t.Fatalf("after 60 s, not %s: %d partitions, watermarks %v, %d Kafka commits, %+v", what, sn.Partitions, sn.PartitionWatermarks, sn.KafkaCommits, sn.Progress.StreamStats)
		}
	}
}

// sortedBy returns f of each element, sorted.
func sortedBy[T any](xs []T, f func(T) string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	slices.Sort(out)
	return out
}

// deployInput is n seeded events over a few cards and countries, 7 s
// apart (and those of cards za and zb), at most 5 s out of order: none is
// late for the 10 s bound (nor is the last, an hour on), so the outputs
// do not depend on when the watermarks go out (a followed file's go out on the coordinator's timer,
// a backtest's every 3 events).
func deployInput(n int) string {
	var b strings.Builder
	x := uint64(7)
	next := func(m uint64) uint64 {
		x = x*6364136223846793005 + 1442695040888963407
		return (x >> 33) % m
	}
	base := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	types := []string{"auth", "auth", "capture"}
	countries := []string{"US", "FR", "DE"}
	for i := range n {
		ts := base.Add(time.Duration(i)*7*time.Second - time.Duration(next(6))*time.Second)
		fmt.Fprintf(&b, `{"ts":%q,"card":"c%d","type":%q,"amount":%d,"country":%q}`+"\n",
			ts.Format(time.RFC3339), next(6), types[next(3)], next(600), countries[next(3)])
		if i%97 == 0 {
			b.WriteString("not json\n") // a dead letter
		}
		// Cards za and zb: an auth, then a capture from another country
		// 10 events later, every 18 events, zb 9 events after za: at any
		// switch point a match of keep and one of change of one of them
		// has begun and not ended.
		for card, at := range map[string]int{"za": 0, "zb": 9} {
			switch {
			case i%18 == at:
				fmt.Fprintf(&b, `{"ts":%q,"card":%q,"type":"auth","amount":590,"country":"US"}`+"\n", ts.Format(time.RFC3339), card)
			case i%18 == (at+10)%18 && i > 18:
				fmt.Fprintf(&b, `{"ts":%q,"card":%q,"type":"capture","amount":10,"country":"FR"}`+"\n", ts.Format(time.RFC3339), card)
			}
		}
	}
	// An event an hour on: its watermark releases every match, so a live
	// run need not end for the alerts to be those of a backtest.
	fmt.Fprintf(&b, `{"ts":%q,"card":"zz","type":"login","amount":0,"country":"US"}`+"\n",
		base.Add(time.Duration(n)*7*time.Second+time.Hour).Format(time.RFC3339))
	return b.String()
}

// TestStreamKafkaDeploy is TestStreamDeploy for a transactional Kafka
// job: the deploy switches while the second half of the input is being
// produced, then a bounded restart finishes the topic with the deployed
// version; the alerts topic holds exactly the alerts the switch defines.
func TestStreamKafkaDeploy(t *testing.T) {
	brokers := kafkaBrokers(t)
	input := deployInput(900)
	lines := strings.SplitAfter(input, "\n")
	half := len(lines) / 2
	topic := fmt.Sprintf("stream-kafka-deploy-%d", time.Now().UnixNano())
	produceTopic(t, brokers, topic, 3, strings.Join(lines[:half], ""))
	state := filepath.Join(t.TempDir(), "state")
	config := func(bounded bool) StreamConfig {
		return StreamConfig{
			Kafka:    &KafkaInput{Brokers: brokers, Topic: topic, Bounded: bounded, AlertsTopic: topic + "-alerts", Group: topic},
			StateDir: state, CheckpointInterval: 100 * time.Millisecond, Parallelism: 2, Logf: t.Logf,
			// A partition at its end stops holding the watermark back:
			// the last event's releases every match. Not sooner than
			// the producer of the second half may pause under load (a
			// partition idle while its next records are still to come
			// would make them late: a CI flake at 300 ms).
			IdleTimeout: 2 * time.Second,
		}
	}
	m := NewStreamMonitor()
	cfg := config(false)
	cfg.Monitor = m
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := streamEngine(t, deployV1).Stream(ctx, cfg)
		done <- err
	}()
	waitRecords := func(n int64) { t.Helper(); waitMonitor(t, m, n) }
	waitRecords(int64(strings.Count(strings.Join(lines[:half], ""), "\n")))
	produced := make(chan struct{})
	// (The input's last event, an hour on, releases every match.)
	go func() {
		defer close(produced)
		rest := lines[half:]
		for len(rest) > 0 {
			n := min(len(rest), 40)
			produceTopic(t, brokers, topic, 3, strings.Join(rest[:n], ""))
			rest = rest[n:]
		}
	}()
	// A version with a rule keyed by another field (country) would need a
	// repartition topic the job has not: refused, the job goes on.
	if _, err := m.Deploy(ctx, Deploy{Source: []byte(deployV2)}); err == nil || !strings.Contains(err.Error(), "must repartition by the key fields the job does") {
		t.Fatalf("a deploy needing a new repartition topic: %v", err)
	}
	if got := m.Snapshot().RulesetVersion; got != loadRules(t, deployV1).Hash {
		t.Fatalf("after the refused deploy: version %.12s", got)
	}
	res, err := m.Deploy(ctx, Deploy{Name: "v2.cep", Source: []byte(deployV2Kafka)})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("switched at checkpoint %d, watermark %v, in %v", res.Checkpoint, res.Watermark, res.Took)
	<-produced
	waitRecords(int64(strings.Count(input, "\n")))
	end := event.Time(time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC).Add(900*7*time.Second + 30*time.Minute).UnixMilli())
	for deadline := time.Now().Add(30 * time.Second); m.Snapshot().Progress.Watermark < end; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("watermark %v after 30 s, want %v", m.Snapshot().Progress.Watermark, end)
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Stream after cancel: %v", err)
	}
	// A bounded restart with the first version's rules resumes with the
	// second and finishes the topic (what the stop left unread, if
	// anything, then its final checkpoint).
	m2 := NewStreamMonitor()
	cfg = config(true)
	cfg.Monitor = m2
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	var res2 *StreamResult
	go func() {
		var err error
		res2, err = streamEngine(t, deployV1).Stream(ctx2, cfg)
		done <- err
	}()
	for deadline := time.Now().Add(60 * time.Second); !m2.Ready(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the restarted job is not ready after 60 s")
		}
	}
	if v2, got := loadRules(t, deployV2Kafka), m2.Snapshot().RulesetVersion; got != v2.Hash {
		t.Errorf("restart: version %.12s, want %.12s", got, v2.Hash)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the bounded restart: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the bounded restart has not finished the topic after 60 s")
	}
	if !res2.Finished {
		t.Errorf("the bounded restart ended without reading its input to the end: %+v", res2)
	}
	checkDeployAlerts(t, deployV2Kafka, input, res.Watermark, topicValues(t, brokers, topic+"-alerts"))
}

// TestStreamShadow deploys deployV2 as the shadow of a job running
// deployV1 that follows a growing file, then promotes it, events flowing
// throughout. The main output is exactly that of a deploy of deployV2 at
// the promote (the shadow changed nothing of it); the shadow output holds
// exactly deployV2's matches that begin after the shadow's switch and
// were emitted before the promote; the monitor compares the two per
// rule.
func TestStreamShadow(t *testing.T) {
	input := deployInput(1500)
	lines := strings.SplitAfter(input, "\n")
	third := len(lines) / 3
	events := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(events, []byte(strings.Join(lines[:third], "")), 0o644); err != nil {
		t.Fatal(err)
	}
	v1, v2 := loadRules(t, deployV1), loadRules(t, deployV2)
	d := newStreamDirs(t)
	shadowDir := filepath.Join(t.TempDir(), "shadow")
	m := NewStreamMonitor()
	cfg := d.config(events)
	var logMu sync.Mutex
	var logs []string
	// logged reports whether a line of the log starts with prefix.
	logged := func(prefix string) bool {
		logMu.Lock()
		defer logMu.Unlock()
		return slices.ContainsFunc(logs, func(l string) bool { return strings.HasPrefix(l, prefix) })
	}
	cfg.Follow, cfg.PollInterval, cfg.Monitor = true, 2*time.Millisecond, m
	cfg.Logf = func(format string, args ...any) {
		t.Logf(format, args...)
		logMu.Lock()
		defer logMu.Unlock()
		logs = append(logs, fmt.Sprintf(format, args...))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := streamEngine(t, deployV1).Stream(ctx, cfg)
		done <- err
	}()
	waitRecords := func(n int) {
		t.Helper()
		waitMonitor(t, m, int64(strings.Count(strings.Join(lines[:n], ""), "\n")))
	}
	// write appends lines[from:to] a line at a time, in the background.
	write := func(from, to int) chan struct{} {
		written := make(chan struct{})
		go func() {
			defer close(written)
			f, err := os.OpenFile(events, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				panic(err)
			}
			defer f.Close()
			for _, l := range lines[from:to] {
				if _, err := f.WriteString(l); err != nil {
					panic(err)
				}
				time.Sleep(50 * time.Microsecond)
			}
		}()
		return written
	}
	waitRecords(third)
	// No shadow output: refused.
	if _, err := m.Deploy(ctx, Deploy{Source: []byte(deployV2), Shadow: true}); !errors.Is(err, ErrNoShadowOutput) {
		t.Fatalf("a shadow deploy without a shadow output: %v, want ErrNoShadowOutput", err)
	}
	if _, err := m.Promote(ctx, SwitchOptions{}); !errors.Is(err, ErrNoShadow) {
		t.Fatalf("a promote without a shadow: %v, want ErrNoShadow", err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	cfg.ShadowDir = shadowDir
	go func() {
		_, err := streamEngine(t, deployV1).Stream(ctx, cfg)
		done <- err
	}()
	waitRecords(third)

	written := write(third, 2*third)
	sh, err := m.Deploy(ctx, Deploy{Source: []byte(deployV2), Shadow: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("shadow from checkpoint %d, watermark %v", sh.Checkpoint, sh.Watermark)
	if !sh.Shadow || sh.Version != v2.Hash || len(sh.Added) != 4 {
		t.Fatalf("shadow deploy: %+v", sh)
	}
	if want := fmt.Sprintf("switched to ruleset deploy version %.12s as the shadow at checkpoint %d ", v2.Hash, sh.Checkpoint); !logged(want) {
		t.Errorf("the log of the shadow deploy has no line %q...", want)
	}
	if vs := m.Versions(); len(vs) != 2 || vs[0].Version != v1.Hash || vs[0].State != VersionActive || vs[1].Version != v2.Hash || vs[1].State != VersionShadow {
		t.Fatalf("versions with a shadow: %+v", vs)
	}
	<-written
	waitRecords(2 * third)
	sn := m.Snapshot()
	written = write(2*third, len(lines))
	pr, err := m.Promote(ctx, SwitchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("promoted at checkpoint %d, watermark %v", pr.Checkpoint, pr.Watermark)
	if pr.Version != v2.Hash || pr.Previous != v1.Hash || !slices.Equal(pr.Changed, []string{"change"}) {
		t.Fatalf("promote: %+v", pr)
	}
	if want := fmt.Sprintf("switched to ruleset deploy version %.12s at checkpoint %d ", v2.Hash, pr.Checkpoint); !logged(want) {
		t.Errorf("the log of the promote has no line %q...", want)
	}
	// A switch is no restart: it says "switched to", not "resuming".
	for _, id := range []int64{sh.Checkpoint, pr.Checkpoint} {
		if l := fmt.Sprintf("resuming from checkpoint %d ", id); logged(l) {
			t.Errorf("the log of a switch at checkpoint %d says %q...", id, l)
		}
	}
	if vs := m.Versions(); len(vs) != 2 || vs[0].Version != v2.Hash || vs[0].Origin != "promote" || vs[1].Version != v1.Hash || vs[1].State != VersionPrevious {
		t.Fatalf("versions after the promote: %+v", vs)
	}
	<-written
	waitRecords(len(lines))
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	// The restarts so far ran the version given (v1): no word of another.
	startedWith := fmt.Sprintf("the rules given (deploy version %.12s) are those the job was started with; it runs version ", v1.Hash)
	if logged(startedWith) {
		t.Errorf("a restart running the rules given logs %q...", startedWith)
	}
	logf := cfg.Logf
	cfg = d.config(events)
	cfg.ShadowDir, cfg.Logf = shadowDir, logf
	if fin, err := streamEngine(t, deployV1).Stream(context.Background(), cfg); err != nil || fin.RulesetVersion != v2.Hash {
		t.Fatalf("restart: %v, %+v", err, fin)
	}
	// A restart with the file the job started with goes on with the
	// version promoted since, and says so.
	if want := startedWith + fmt.Sprintf("%.12s, made active since (a deploy, rollback or promote), and goes on with it", v2.Hash); !logged(want) {
		t.Errorf("the log of a restart with the first rules after a promote has no line %q...", want)
	}

	// The main output: a deploy of v2 at the promote.
	checkDeployAlerts(t, deployV2, input, pr.Watermark, committedLines(t, d.alerts))
	// The shadow output: v2's matches from the shadow's switch to the
	// promote.
	w1, w2 := sh.Watermark, pr.Watermark
	var want []string
	for _, a := range backtestAlerts(t, deployV2, input) {
		if a.first > w1 && a.detected <= w2 {
			want = append(want, a.String())
		}
	}
	got := sortedBy(parseDeployAlerts(t, committedLines(t, shadowDir)), deployAlert.String)
	slices.Sort(want)
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("shadow alerts (%d, %d expected):\n%s", len(got), len(want), multisetDiff(want, got))
	}
	// The comparison as the monitor had it before the promote (whatever
	// had been emitted then): each count within what the backtests give.
	if sn.ShadowVersion != v2.Hash || len(sn.Shadow) != 4 {
		t.Fatalf("the monitor's shadow: %q, %+v", sn.ShadowVersion, sn.Shadow)
	}
	for _, c := range sn.Shadow {
		if c.Shadow == 0 || c.Overlap > c.Shadow || c.Overlap > c.Active {
			t.Errorf("shadow comparison of %s: %+v", c.Rule, c)
		}
		switch c.Rule {
		case "keep":
			if c.Overlap != c.Shadow {
				t.Errorf("keep is the same in both versions: every shadow match is an active one's too: %+v", c)
			}
		case "fresh", "fresh_country":
			if c.Active != 0 || c.Overlap != 0 {
				t.Errorf("fresh has no active rule: %+v", c)
			}
		case "change":
			if c.Overlap == 0 || c.Overlap == c.Shadow {
				t.Errorf("change's threshold changed: some shadow matches are the active rule's, not all: %+v", c)
			}
		}
	}
}

// TestStreamShadowTwinChanged: a deploy of another active version that
// changes the rule a shadow rule is compared with starts that rule's
// comparison again on both sides. The active rule's count started again
// (a new rule state), the shadow's alerts and the overlap did not:
// only-active (active - overlap) went negative (the trial's `ab 0 1 1 -1
// 0` in cepheus status).
func TestStreamShadowTwinChanged(t *testing.T) {
	lines := strings.SplitAfter(deployInput(900), "\n")
	quarter, half := len(lines)/4, len(lines)/2
	events := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(events, []byte(strings.Join(lines[:quarter], "")), 0o644); err != nil {
		t.Fatal(err)
	}
	d := newStreamDirs(t)
	m := NewStreamMonitor()
	cfg := d.config(events)
	cfg.Follow, cfg.PollInterval, cfg.Monitor, cfg.ShadowDir = true, 2*time.Millisecond, m, filepath.Join(t.TempDir(), "shadow")
	appendLines := func(from, to int) {
		t.Helper()
		f, err := os.OpenFile(events, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(strings.Join(lines[from:to], "")); err != nil {
			t.Fatal(err)
		}
		waitMonitor(t, m, int64(strings.Count(strings.Join(lines[:to], ""), "\n")))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := streamEngine(t, deployV1).Stream(ctx, cfg)
		done <- err
	}()
	waitMonitor(t, m, int64(strings.Count(strings.Join(lines[:quarter], ""), "\n")))
	if _, err := m.Deploy(ctx, Deploy{Source: []byte(deployV2), Shadow: true}); err != nil {
		t.Fatal(err)
	}
	appendLines(quarter, half)
	keep := func() ShadowCount {
		for _, c := range m.Snapshot().Shadow {
			if c.Rule == "keep" {
				return c
			}
		}
		t.Fatal("no comparison of keep")
		return ShadowCount{}
	}
	// The same rule on both sides: every shadow match is the active
	// rule's too (which also has those begun before the shadow's switch).
	for deadline := time.Now().Add(10 * time.Second); keep().Shadow == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no shadow alert of keep in the first half: %+v", keep())
		}
	}
	if c := keep(); c.Overlap != c.Shadow || c.Active < c.Shadow {
		t.Fatalf("keep before the active deploy: %+v, want shadow = overlap <= active", c)
	}
	// The active version changes keep (the shadow does not).
	v3 := strings.Replace(deployV1, "amount > 300", "amount > 299", 1)
	if r, err := m.Deploy(ctx, Deploy{Source: []byte(v3)}); err != nil || !slices.Equal(r.Changed, []string{"keep"}) {
		t.Fatalf("the active deploy changing keep: %+v, %v", r, err)
	}
	if c := keep(); c.Active != 0 || c.Shadow != 0 || c.Overlap != 0 {
		t.Errorf("keep right after its active rule changed (no event since): %+v, want its comparison from 0", c)
	}
	appendLines(half, len(lines))
	for deadline := time.Now().Add(10 * time.Second); keep().Shadow == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no shadow alert of keep in the second half: %+v", keep())
		}
	}
	if c := keep(); c.Overlap > c.Active || c.Overlap > c.Shadow || c.Overlap == 0 {
		t.Errorf("keep after the second half: %+v, want an overlap within both counts", c)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}

// lastEventTime is the latest "ts" of the JSON lines of deployInput
// among lines (the dead letters have none).
func lastEventTime(t *testing.T, lines []string) event.Time {
	t.Helper()
	last := event.MinTime
	for _, l := range lines {
		var ev struct{ TS time.Time }
		if json.Unmarshal([]byte(l), &ev) == nil && !ev.TS.IsZero() {
			last = max(last, event.Time(ev.TS.UnixMilli()))
		}
	}
	if last == event.MinTime {
		t.Fatal("no event time in the lines")
	}
	return last
}

// TestStreamKafkaRulesTopic runs two instances of a group that follow one
// rules topic, events flowing: a deploy sent to the first goes into the
// topic and both switch to it (the second without being asked) at one
// watermark, the group's switch point; a shadow deploy sent to the second
// too, whose alerts go to the shadow topic and never the
// alerts topic; a third instance started afterwards with the first
// version's rules runs the topic's versions from its start.
func TestStreamKafkaRulesTopic(t *testing.T) {
	brokers := kafkaBrokers(t)
	// The test's events come far faster than real time (7 s of event
	// time each, 10 every 300 ms): a lead of 20 minutes of event time
	// (about five seconds here) lets every instance read the record
	// (polled every 500 ms) before its watermark gets there, a busy
	// machine too (at 10 every 100 ms, two seconds, instances lagging
	// on a loaded machine sometimes read it too late and switched where
	// they were); each quarter of the input spans 35 minutes (9 s).
	old := rulesLead
	rulesLead = 20 * time.Minute
	t.Cleanup(func() { rulesLead = old })
	lines := strings.SplitAfter(deployInput(1200), "\n")
	topic := fmt.Sprintf("stream-kafka-rules-%d", time.Now().UnixNano())
	produceTopic(t, brokers, topic, 4, strings.Join(lines[:len(lines)/2], ""))
	v2 := loadRules(t, deployV2Kafka)
	config := func(inst string) StreamConfig {
		return StreamConfig{
			Kafka: &KafkaInput{Brokers: brokers, Topic: topic, AlertsTopic: topic + "-alerts", ShadowTopic: topic + "-shadow",
				Group: topic, InstanceID: inst, RulesTopic: topic + "-rules", SessionTimeout: 2 * time.Second},
			StateDir: filepath.Join(t.TempDir(), "state-"+inst), CheckpointInterval: 100 * time.Millisecond, Parallelism: 1, Logf: t.Logf,
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	start := func(inst string) *StreamMonitor {
		m := NewStreamMonitor()
		cfg := config(inst)
		cfg.Monitor = m
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := streamEngine(t, deployV1).Stream(ctx, cfg); err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("instance %s: %v", inst, err)
			}
		}()
		return m
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("after 60 s: %s", what)
			}
		}
	}
	// produce writes lines[from:to] into the topic, 10 every 300 ms, in
	// the background: the deploys switch while events flow.
	produce := func(from, to int) chan struct{} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := from; i < to; i += 10 {
				produceTopic(t, brokers, topic, 4, strings.Join(lines[i:min(i+10, to)], ""))
				time.Sleep(300 * time.Millisecond)
			}
		}()
		return done
	}
	// sameSwitch checks that instances a and b switched to version (the
	// shadow when shadow) at one watermark, the group's switch point.
	sameSwitch := func(a, b *StreamMonitor, version string, shadow bool, since time.Time) {
		t.Helper()
		var ra, rb *DeployResult
		waitFor("both instances switched", func() bool {
			ra, rb = a.switchOf(version, shadow, since), b.switchOf(version, shadow, since)
			return ra != nil && rb != nil
		})
		if ra.Watermark != rb.Watermark || ra.Watermark <= event.MinTime {
			t.Errorf("the instances switched to %.12s at watermarks %v and %v, want one point", version, ra.Watermark, rb.Watermark)
		}
	}
	a, b := start("a"), start("b")
	waitFor("both instances ready", func() bool { return a.Ready() && b.Ready() })
	q := len(lines) / 4
	flowing := produce(2*q, 3*q)
	// Deploy once both instances have read the events produced before they
	// started: with a's watermark still in that backlog, the switch point
	// (its watermark plus the lead) fell inside it, and b, reading it
	// faster, was past the point when it read the rules record and
	// switched where it was (seen once under make test).
	backlog := lastEventTime(t, lines[:2*q])
	waitFor("both instances past the events produced first", func() bool {
		const margin = event.Time(2 * time.Minute / time.Millisecond)
		return a.Snapshot().Progress.Watermark >= backlog-margin && b.Snapshot().Progress.Watermark >= backlog-margin
	})
	since := time.Now()
	res, err := a.Deploy(ctx, Deploy{Source: []byte(deployV2Kafka)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Version != v2.Hash || res.Checkpoint == 0 {
		t.Fatalf("deploy through the rules topic: %+v", res)
	}
	waitFor("instance b runs v2", func() bool { act, _ := versions(b); return act == v2.Hash && b.Ready() })
	sameSwitch(a, b, v2.Hash, false, since)
	<-flowing
	v3src := strings.Replace(deployV2Kafka, "amount > 450", "amount > 400", 1)
	v3 := loadRules(t, v3src)
	flowing = produce(3*q, len(lines))
	since = time.Now()
	if _, err := b.Deploy(ctx, Deploy{Source: []byte(v3src), Shadow: true}); err != nil {
		t.Fatal(err)
	}
	waitFor("both run v3 as the shadow", func() bool {
		aa, as := versions(a)
		ba, bs := versions(b)
		return aa == v2.Hash && as == v3.Hash && ba == v2.Hash && bs == v3.Hash
	})
	sameSwitch(a, b, v3.Hash, true, since)
	<-flowing
	var shadowed []deployAlert
	waitFor("alerts in the shadow topic", func() bool {
		shadowed = parseDeployAlerts(t, topicValues(t, brokers, topic+"-shadow"))
		return len(shadowed) > 0
	})
	for _, a := range shadowed {
		if a.version != v3.Hash {
			t.Fatalf("the shadow topic has an alert of version %.12s: %v", a.version, a)
		}
	}
	c := start("c")
	waitFor("instance c runs the topic's versions", func() bool {
		act, sh := versions(c)
		return act == v2.Hash && sh == v3.Hash && c.Ready()
	})
	cancel()
	wg.Wait()
	for _, a := range parseDeployAlerts(t, topicValues(t, brokers, topic+"-alerts")) {
		if a.version == v3.Hash {
			t.Fatalf("an alert of the shadow version in the alerts topic: %v", a)
		}
	}
}

// TestStreamSwitchCheckpoint stops a job right after a switch's
// checkpoint, before the job of the new version runs (as a crash there
// would), then starts it again with the first version's engine: it
// restores that checkpoint and runs the deployed version. With files, and
// in Kafka mode when a broker is there.
func TestStreamSwitchCheckpoint(t *testing.T) {
	input := deployInput(300)
	check := func(t *testing.T, v2src string, cfg StreamConfig) {
		v2 := loadRules(t, v2src)
		cfg.hooks.stopAtSwitch = true
		cfg.Monitor = NewStreamMonitor()
		done := make(chan error, 1)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			_, err := streamEngine(t, deployV1).Stream(ctx, cfg)
			done <- err
		}()
		for deadline := time.Now().Add(60 * time.Second); !cfg.Monitor.Ready(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("not ready after 60 s")
			}
		}
		if _, err := cfg.Monitor.Deploy(ctx, Deploy{Source: []byte(v2src)}); err == nil || !strings.Contains(err.Error(), "stopped at the switch") {
			t.Fatalf("the deploy with the hook: %v", err)
		}
		if err := <-done; err != nil {
			t.Fatalf("the run stopped at the switch: %v", err)
		}
		cfg.hooks.stopAtSwitch = false
		cfg.Monitor = NewStreamMonitor()
		ctx2, cancel2 := context.WithCancel(context.Background())
		defer cancel2()
		go func() {
			_, err := streamEngine(t, deployV1).Stream(ctx2, cfg)
			done <- err
		}()
		for deadline := time.Now().Add(60 * time.Second); !cfg.Monitor.Ready(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the restart is not ready after 60 s")
			}
		}
		if got := cfg.Monitor.Snapshot().RulesetVersion; got != v2.Hash {
			t.Errorf("after the restart: version %.12s, want the deployed %.12s", got, v2.Hash)
		}
		cancel2()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
	}
	t.Run("files", func(t *testing.T) {
		events := filepath.Join(t.TempDir(), "events.jsonl")
		if err := os.WriteFile(events, []byte(input), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := newStreamDirs(t).config(events)
		cfg.Follow = true
		check(t, deployV2, cfg)
	})
	t.Run("kafka", func(t *testing.T) {
		brokers := kafkaBrokers(t)
		topic := fmt.Sprintf("stream-switch-%d", time.Now().UnixNano())
		produceTopic(t, brokers, topic, 2, input)
		check(t, deployV2Kafka, StreamConfig{
			Kafka:    &KafkaInput{Brokers: brokers, Topic: topic, AlertsTopic: topic + "-alerts", Group: topic},
			StateDir: filepath.Join(t.TempDir(), "state"), CheckpointInterval: 100 * time.Millisecond, Parallelism: 2,
		})
	})
}

// collected gathers the rules of the alerts a host emits.
type collected struct{ rules []string }

func (c *collected) Collect(x emitted) error {
	if x.alert != nil {
		c.rules = append(c.rules, x.alert.Rule)
	}
	return nil
}

// TestMigrationSeedsNewKeys: a version that adds a rule of key fields no
// operator had gets a new operator at the switch, and that operator takes
// the events the others buffer (after the switch's watermark): a match of
// the new rule over events read before the switch is raised.
func TestMigrationSeedsNewKeys(t *testing.T) {
	e1 := streamEngine(t, deployV1)
	e1.plan = e1.ownPlan(time.Now())
	h1, err := e1.newHost(EventTime)
	if err != nil {
		t.Fatal(err)
	}
	h1.needAlerts = true
	var out collected
	for i, l := range []string{
		`{"ts":"2026-01-01T10:00:00Z","card":"c1","type":"capture","amount":500,"country":"FR"}`,
		`{"ts":"2026-01-01T10:01:00Z","card":"c2","type":"capture","amount":520,"country":"FR"}`,
	} {
		ev, err := e1.cfg.ruleset.DecodeEvent([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		ev.Seq = uint64(i + 1)
		if err := h1.ProcessElement(ev, ev.Time, &out); err != nil {
			t.Fatal(err)
		}
	}
	mem := state.NewMem()
	if err := h1.Snapshot(mem); err != nil {
		t.Fatal(err)
	}
	e2 := deployV2Before(t, e1)
	h2, err := e2.newHost(EventTime)
	if err != nil {
		t.Fatal(err)
	}
	h2.needAlerts = true
	if err := h2.restoreParts([]state.Reader{mem}, state.AllKeyGroups, func(int) bool { return true }, []*Engine{e1}); err != nil {
		t.Fatal(err)
	}
	if err := h2.ProcessWatermark(event.MaxTime, &out); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out.rules, []string{"fresh_country"}) {
		t.Errorf("alerts after the switch: %v, want fresh_country's over the buffered events", out.rules)
	}
}

// deployV2Before returns the engine of a deploy of deployV2 into e1 before
// its first watermark: fresh_country, of key fields e1 has no operator
// of, among the added rules.
func deployV2Before(t *testing.T, e1 *Engine) *Engine {
	t.Helper()
	layout, err := event.NewSchema(e1.plan.Layout...)
	if err != nil {
		t.Fatal(err)
	}
	rs2, err := rules.LoadLayout("v2.cep", []byte(deployV2), layout)
	if err != nil {
		t.Fatal(err)
	}
	q, res := e1.planDeploy(rs2, false, event.MinTime, "test", time.Now())
	if !slices.Contains(res.Added, "fresh_country") {
		t.Fatalf("deploy: %+v", res)
	}
	e2, err := e1.derive(q)
	if err != nil {
		t.Fatal(err)
	}
	return e2
}

// TestMigrationSeedsNewKeysAcrossSubtasks: at parallelism 2 the events
// buffered before a switch sit in the subtask owning their old key (the
// card), but the new operator's key (the country) may be owned by the
// other subtask: each new operator takes, from every subtask's buffers,
// the events of its own key groups. Two captures of one country on cards
// owned by different subtasks make one fresh_country match, raised once,
// by the subtask that owns the country (before the fix, each subtask
// seeded its own card's event and neither matched: TestStreamDeploy lost
// such an alert now and then, depending on where the switch fell).
func TestMigrationSeedsNewKeysAcrossSubtasks(t *testing.T) {
	const n = 2
	subOf := func(k string) int {
		for i := range n {
			if groupRange(i, n).Contains(state.GroupOf(event.Key(k), keyGroups)) {
				return i
			}
		}
		t.Fatalf("key %q in no subtask's range", k)
		return -1
	}
	// Two cards owned by different subtasks.
	cards := map[int]string{}
	for i := 0; len(cards) < n; i++ {
		c := fmt.Sprintf("c%d", i)
		if _, ok := cards[subOf(c)]; !ok {
			cards[subOf(c)] = c
		}
	}
	e1 := streamEngine(t, deployV1)
	e1.plan = e1.ownPlan(time.Now())
	var parts []state.Reader
	for sub := range n {
		h1, err := e1.newHost(EventTime)
		if err != nil {
			t.Fatal(err)
		}
		h1.needAlerts = true
		l := fmt.Sprintf(`{"ts":"2026-01-01T10:0%d:00Z","card":%q,"type":"capture","amount":%d,"country":"FR"}`, sub, cards[sub], 500+10*sub)
		ev, err := e1.cfg.ruleset.DecodeEvent([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		ev.Seq = uint64(sub + 1)
		var out collected
		if err := h1.ProcessElement(ev, ev.Time, &out); err != nil {
			t.Fatal(err)
		}
		mem := state.NewMem()
		if err := h1.Snapshot(mem); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, mem)
	}
	e2 := deployV2Before(t, e1)
	got := map[int][]string{}
	for sub := range n {
		h2, err := e2.newHost(EventTime)
		if err != nil {
			t.Fatal(err)
		}
		h2.needAlerts = true
		prevs := []*Engine{e1, e1}
		if err := h2.restoreParts(parts, groupRange(sub, n), func(p int) bool { return p == sub }, prevs); err != nil {
			t.Fatal(err)
		}
		var out collected
		if err := h2.ProcessWatermark(event.MaxTime, &out); err != nil {
			t.Fatal(err)
		}
		got[sub] = out.rules
	}
	want := map[int][]string{subOf("FR"): {"fresh_country"}}
	for sub := range n {
		if !slices.Equal(got[sub], want[sub]) {
			t.Errorf("subtask %d after the switch: alerts %v, want %v (FR is subtask %d's)", sub, got[sub], want[sub], subOf("FR"))
		}
	}
}

// TestStreamDeployGuardHolding deploys into a job whose far-ahead check
// holds the first events of a fresh run (fewer read than it needs to
// judge them): the switch judges them and takes its checkpoint, and the
// job goes on with the new version (before, it ended without one).
func TestStreamDeployGuardHolding(t *testing.T) {
	events := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(events, []byte(strings.Join(strings.SplitAfter(deployInput(3), "\n")[:3], "")), 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := New(WithRuleset(loadRules(t, deployV1)), WithOutOfOrderness(10*time.Second), WithInputPolicy(InputPolicy{MaxAhead: time.Hour}))
	if err != nil {
		t.Fatal(err)
	}
	cfg := newStreamDirs(t).config(events)
	cfg.Follow, cfg.Monitor = true, NewStreamMonitor()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := e.Stream(ctx, cfg)
		done <- err
	}()
	for deadline := time.Now().Add(20 * time.Second); cfg.Monitor.Snapshot().Progress.Records < 3 || !cfg.Monitor.Ready(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("3 records not read after 20 s")
		}
	}
	res, err := cfg.Monitor.Deploy(ctx, Deploy{Source: []byte(deployV2)})
	if err != nil {
		t.Fatal(err)
	}
	if v2 := loadRules(t, deployV2); res.Version != v2.Hash || cfg.Monitor.Snapshot().RulesetVersion != v2.Hash {
		t.Fatalf("deploy: %+v", res)
	}
	select {
	case err := <-done:
		t.Fatalf("the job ended after the switch: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}

// TestPlanKeepsRecentSources: a plan lists the recent versions but keeps
// the sources of the newest sourcesKept previous ones only (the plan is
// in every checkpoint), and of those its rules need.
func TestPlanKeepsRecentSources(t *testing.T) {
	e := streamEngine(t, deployV1)
	e.plan = e.ownPlan(time.Now())
	for i := range 6 {
		src := strings.Replace(deployV1, "amount > 500", fmt.Sprintf("amount > %d", 501+i), 1)
		rs, err := rules.LoadLayout("v.cep", []byte(src), e.schema)
		if err != nil {
			t.Fatal(err)
		}
		q, _ := e.planDeploy(rs, false, event.Time(time.Hour.Milliseconds()*int64(i+1)), "test", time.Now())
		if e, err = e.derive(q); err != nil {
			t.Fatalf("deploy %d: %v", i, err)
		}
	}
	vs := e.plan.Versions
	if len(vs) != 7 {
		t.Fatalf("%d versions listed, want 7", len(vs))
	}
	for i, v := range vs {
		// The active one keeps its source, so does the one just before
		// it (its change rule drains), and the newest sourcesKept
		// previous ones after that.
		if want := i <= sourcesKept+1; (v.Source != "") != want {
			t.Errorf("version %d (%.12s): source kept %v, want %v", i, v.Version, v.Source != "", want)
		}
	}
}

// TestPlanShadowVersions: the versions a plan lists through deploys and
// shadow deploys, and the rollback's target (the newest previous one).
// A shadow that never was active is no previous version: replaced, it
// goes, so a rollback returns to the version active before (it made the
// replaced shadow active). The list is the active version, the shadow,
// then the previous ones newest first, after a deploy too. A version
// that was active before and becomes the shadow stays a previous version
// (its own entry), as the shadow and once replaced. A restore without a
// shadow output drops the shadow and its entry (it became a previous
// version). A plan of an older release, its shadow listed after a
// previous version, lists the shadow second.
func TestPlanShadowVersions(t *testing.T) {
	base := streamEngine(t, deployV1)
	e := base
	e.plan = e.ownPlan(time.Now())
	// Versions a, b, c and d: deployV1 with another threshold each.
	var vs [4]*Ruleset
	names := map[string]string{}
	for i := range vs {
		src := strings.Replace(deployV1, "amount > 500", fmt.Sprintf("amount > %d", 500+i), 1)
		rs, err := rules.LoadLayout("v.cep", []byte(src), e.schema)
		if err != nil {
			t.Fatal(err)
		}
		vs[i], names[rs.Hash] = rs, string(rune('a'+i))
	}
	a, b, c, d := vs[0], vs[1], vs[2], vs[3]
	w := event.Time(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	// switchTo runs rs, as the shadow or the active version, an hour on.
	switchTo := func(rs *Ruleset, shadow bool) {
		t.Helper()
		w += event.Time(time.Hour.Milliseconds())
		var q *plan
		if shadow {
			q, _ = e.planShadow(rs, w, "test", time.Now())
		} else {
			q, _ = e.planDeploy(rs, false, w, "test", time.Now())
		}
		var err error
		if e, err = base.derive(q); err != nil {
			t.Fatal(err)
		}
	}
	// check compares the monitor's list of p ("name:state ...") and its
	// rollback target with want and target.
	check := func(step string, p *plan, want, target string) {
		t.Helper()
		m := NewStreamMonitor()
		m.plan = p
		var got []string
		for _, v := range m.Versions() {
			got = append(got, names[v.Version]+":"+string(v.State))
		}
		if strings.Join(got, " ") != want {
			t.Errorf("%s: versions %q, want %q", step, strings.Join(got, " "), want)
		}
		if v, _ := m.version(VersionPrevious); names[v.Version] != target {
			t.Errorf("%s: the rollback's target is %q, want %q", step, names[v.Version], target)
		}
	}
	switchTo(b, false)
	check("b deployed", e.plan, "b:active a:previous", "a")
	switchTo(c, true)
	check("c the shadow", e.plan, "b:active c:shadow a:previous", "a")
	switchTo(d, true)
	check("d the shadow, replacing c", e.plan, "b:active d:shadow a:previous", "a")
	switchTo(a, false)
	check("a deployed again", e.plan, "a:active d:shadow b:previous", "b")
	switchTo(b, true)
	check("b, active before, the shadow", e.plan, "a:active b:shadow b:previous", "b")
	switchTo(c, true)
	check("c the shadow, replacing b", e.plan, "a:active c:shadow b:previous", "b")

	// A restore without a shadow output.
	j := &job{base: base, taken: a, meta: &jobMeta{Plan: e.plan}, cfg: StreamConfig{Logf: t.Logf}}
	if err := j.choosePlan(); err != nil {
		t.Fatal(err)
	}
	check("restored without a shadow output", j.e.plan, "a:active b:previous", "b")

	// A plan of an older release: a deploy left the shadow where it was,
	// after the version it replaced.
	old := *e.plan
	old.Versions = []planVersion{e.plan.Versions[0], e.plan.Versions[2], e.plan.Versions[1]}
	check("an older release's plan", &old, "a:active c:shadow b:previous", "b")
	if _, err := base.derive(&old); err != nil {
		t.Fatalf("an older release's plan: %v", err)
	}
}

// TestStreamRulesSourceKept: a restart given the content its rules
// source holds keeps the version deployed after that content was taken
// (a watcher's deploy, Origin rules-dir, or one that found it active
// already), and deploys content the source took while the process was
// down.
func TestStreamRulesSourceKept(t *testing.T) {
	deployV3 := strings.Replace(deployV2, "amount > 450", "amount > 400", 1)
	v1, v2, v3 := loadRules(t, deployV1), loadRules(t, deployV2), loadRules(t, deployV3)
	input := deployInput(60)
	events := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(events, []byte(input), 0o644); err != nil {
		t.Fatal(err)
	}
	// run streams with the process's rules src, runs steps, stops and
	// returns the active version at the start and at the end.
	run := func(d streamDirs, src string, steps func(ctx context.Context, m *StreamMonitor)) (first, last string) {
		t.Helper()
		f := follow(t, streamEngine(t, src), d.config(events))
		waitMonitor(t, f.m, int64(strings.Count(input, "\n")))
		first = f.m.Snapshot().RulesetVersion
		steps(context.Background(), f.m)
		f.stop()
		return first, f.m.Snapshot().RulesetVersion
	}
	deploy := func(ctx context.Context, m *StreamMonitor, src, origin string) {
		t.Helper()
		if _, err := m.Deploy(ctx, Deploy{Source: []byte(src), Origin: origin}); err != nil {
			t.Fatalf("deploy from %s: %v", origin, err)
		}
	}
	rollback := func(ctx context.Context, m *StreamMonitor) {
		t.Helper()
		if _, err := m.Rollback(ctx, SwitchOptions{}); err != nil {
			t.Fatalf("rollback: %v", err)
		}
	}
	// The source takes v2 (a switch), the API rolls back to v1: a restart
	// given v2 keeps v1.
	d := newStreamDirs(t)
	if _, last := run(d, deployV1, func(ctx context.Context, m *StreamMonitor) {
		deploy(ctx, m, deployV2, OriginRulesDir)
		rollback(ctx, m)
	}); last != v1.Hash {
		t.Fatalf("active after the rollback: %.12s, want v1 %.12s", last, v1.Hash)
	}
	if first, _ := run(d, deployV2, func(context.Context, *StreamMonitor) {}); first != v1.Hash {
		t.Errorf("a restart given v2 (the source's) after a rollback to v1 runs %.12s, want v1 %.12s", first, v1.Hash)
	}
	// The API deploys v2, the source takes v2 (active already), the API
	// rolls back to v1: a restart given v2 keeps v1.
	d = newStreamDirs(t)
	run(d, deployV1, func(ctx context.Context, m *StreamMonitor) {
		deploy(ctx, m, deployV2, "api")
		if r, err := m.Deploy(ctx, Deploy{Source: []byte(deployV2), Origin: OriginRulesDir}); err != nil || !r.Unchanged {
			t.Fatalf("deploy of the active version: %+v, %v; want unchanged", r, err)
		}
		rollback(ctx, m)
	})
	if first, _ := run(d, deployV2, func(context.Context, *StreamMonitor) {}); first != v1.Hash {
		t.Errorf("a restart given v2 (the source's, found active) after a rollback to v1 runs %.12s, want v1 %.12s", first, v1.Hash)
	}
	// The source took v3 while the process was down: the restart deploys it.
	if first, _ := run(d, deployV3, func(context.Context, *StreamMonitor) {}); first != v3.Hash {
		t.Errorf("a restart given v3, new, runs %.12s, want v3 %.12s", first, v3.Hash)
	}
	// Deploys from elsewhere do not move the source: a restart given v1
	// after the API deployed v2 keeps v2.
	d = newStreamDirs(t)
	run(d, deployV1, func(ctx context.Context, m *StreamMonitor) { deploy(ctx, m, deployV2, "api") })
	if first, _ := run(d, deployV1, func(context.Context, *StreamMonitor) {}); first != v2.Hash {
		t.Errorf("a restart given v1 after an API deploy of v2 runs %.12s, want v2 %.12s", first, v2.Hash)
	}
}

// TestStreamDeployEventTime: a deploy that changes the events' time
// field is refused, naming both fields; the job keeps its version.
func TestStreamDeployEventTime(t *testing.T) {
	other := strings.Replace(strings.Replace(deployV2, "event time ts\n", "event time at\n", 1), "  ts: time\n", "  ts: time\n  at: time\n", 1)
	if _, err := rules.Load("other.cep", []byte(other)); err != nil {
		t.Fatal(err)
	}
	input := deployInput(60)
	events := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(events, []byte(input), 0o644); err != nil {
		t.Fatal(err)
	}
	d := newStreamDirs(t)
	f := follow(t, streamEngine(t, deployV1), d.config(events))
	m := f.m
	waitMonitor(t, m, int64(strings.Count(input, "\n")))
	before := m.Snapshot().RulesetVersion
	_, err := m.Deploy(context.Background(), Deploy{Source: []byte(other)})
	if err == nil || !strings.Contains(err.Error(), "event time") || !strings.Contains(err.Error(), "ts") || !strings.Contains(err.Error(), " at") {
		t.Errorf("a deploy changing the event time field from ts to at: %v; want it refused, naming both", err)
	}
	if now := m.Snapshot().RulesetVersion; now != before {
		t.Errorf("the active version went from %.12s to %.12s", before, now)
	}
	f.stop()
	// A restart given it is refused the same way.
	_, err = streamEngine(t, other).Stream(context.Background(), d.config(events))
	if !errors.Is(err, ErrRestore) || !strings.Contains(err.Error(), "event time is field at, the job's is ts") {
		t.Errorf("a restart given a version of another event time field: %v; want ErrRestore naming both", err)
	}
}

// TestStreamKafkaRulesSourceKept is TestStreamRulesSourceKept's first
// case in Kafka mode with a rules topic: the rules source's deploy goes
// through the topic, and so does the rollback after it; a restart given
// the source's content keeps the rollback.
func TestStreamKafkaRulesSourceKept(t *testing.T) {
	brokers := kafkaBrokers(t)
	old := rulesLead
	rulesLead = 0 // the switch point is the watermark: no events are needed after a deploy
	t.Cleanup(func() { rulesLead = old })
	topic := fmt.Sprintf("stream-kafka-rules-source-%d", time.Now().UnixNano())
	input := deployInput(100)
	produceTopic(t, brokers, topic, 2, input)
	v1, v2 := loadRules(t, deployV1), loadRules(t, deployV2Kafka)
	stateDir := t.TempDir()
	run := func(src string, steps func(ctx context.Context, m *StreamMonitor)) (first, last string) {
		t.Helper()
		m := NewStreamMonitor()
		cfg := StreamConfig{
			Kafka: &KafkaInput{Brokers: brokers, Topic: topic, AlertsTopic: topic + "-alerts", Group: topic,
				InstanceID: "a", RulesTopic: topic + "-rules", SessionTimeout: 2 * time.Second},
			StateDir: stateDir, CheckpointInterval: 100 * time.Millisecond, Parallelism: 1, Logf: t.Logf, Monitor: m,
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := streamEngine(t, src).Stream(ctx, cfg)
			done <- err
		}()
		waitMonitor(t, m, int64(strings.Count(input, "\n")))
		first = m.Snapshot().RulesetVersion
		steps(ctx, m)
		last = m.Snapshot().RulesetVersion
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("Stream: %v", err)
		}
		return first, last
	}
	if _, last := run(deployV1, func(ctx context.Context, m *StreamMonitor) {
		if r, err := m.Deploy(ctx, Deploy{Source: []byte(deployV2Kafka), Origin: OriginRulesDir}); err != nil || r.Version != v2.Hash {
			t.Fatalf("deploy from the rules source: %+v, %v; want v2 %.12s", r, err, v2.Hash)
		}
		if _, err := m.Rollback(ctx, SwitchOptions{}); err != nil {
			t.Fatalf("rollback: %v", err)
		}
	}); last != v1.Hash {
		t.Fatalf("active after the rollback: %.12s, want v1 %.12s", last, v1.Hash)
	}
	if first, _ := run(deployV2Kafka, func(context.Context, *StreamMonitor) {}); first != v1.Hash {
		t.Errorf("a restart given v2 (the source's) after a rollback to v1 runs %.12s, want v1 %.12s", first, v1.Hash)
	}
}

// appendFile appends lines to the file at path, made if need be.
func appendFile(t *testing.T, path string, lines []string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(strings.Join(lines, "")); err != nil {
		t.Fatal(err)
	}
}

// TestStreamDeployBetweenJobs: a deploy that comes while the run is
// between two jobs (a switch's, here held there) waits for the next job
// and is deployed by it, not refused as if no job ran.
func TestStreamDeployBetweenJobs(t *testing.T) {
	deployV3 := strings.Replace(deployV2, "amount > 450", "amount > 400", 1)
	v2, v3 := loadRules(t, deployV2), loadRules(t, deployV3)
	input := deployInput(60)
	events := filepath.Join(t.TempDir(), "events.jsonl")
	appendFile(t, events, []string{input})
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	cfg := newStreamDirs(t).config(events)
	cfg.hooks.betweenJobs = func() {
		once.Do(func() {
			close(entered)
			<-release
		})
	}
	f := follow(t, streamEngine(t, deployV1), cfg)
	waitMonitor(t, f.m, int64(strings.Count(input, "\n")))
	type answer struct {
		res *DeployResult
		err error
	}
	deploy := func(src string) chan answer {
		a := make(chan answer, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := f.m.Deploy(ctx, Deploy{Source: []byte(src)})
			a <- answer{res, err}
		}()
		return a
	}
	first := deploy(deployV2)
	<-entered
	if f.m.Ready() {
		t.Fatal("the monitor is ready between two jobs")
	}
	second := deploy(deployV3)
	time.Sleep(200 * time.Millisecond) // four looks at the run
	close(release)
	for _, c := range []struct {
		a    chan answer
		want *Ruleset
	}{{first, v2}, {second, v3}} {
		if a := <-c.a; a.err != nil || a.res.Version != c.want.Hash {
			t.Errorf("deploy of %.12s: %+v, %v; want it deployed", c.want.Hash, a.res, a.err)
		}
	}
	if v := f.m.Snapshot().RulesetVersion; v != v3.Hash {
		t.Errorf("active version %.12s, want %.12s", v, v3.Hash)
	}
	f.stop()
}

// TestStreamRollbackPromoteBetweenJobs: a rollback, or a promote, that
// comes while another deploy switches (held between its two jobs: two
// pipelines at once) deploys the version of the plan the next job runs:
// the rollback returns to the version the deploy replaced, the promote
// makes active the shadow the deploy put there. They took the version of
// the plan at the call: the rollback went back past the deploy to the
// version before (v2, v3 deployed, then a rollback during v3's switch
// ended on v1, its answer "was v3"), and the promote made active the
// shadow the deploy had replaced. Each answer is true of what is active
// after it, and the versions listed follow the switches. A call naming
// the version it switches from (From) is refused when another is active
// as the job takes it: neither a deploy in between nor a call sent twice
// toggles back.
func TestStreamRollbackPromoteBetweenJobs(t *testing.T) {
	deployV3 := strings.Replace(deployV2, "amount > 450", "amount > 400", 1)
	v1, v2, v3 := loadRules(t, deployV1), loadRules(t, deployV2), loadRules(t, deployV3)
	input := deployInput(60)
	events := filepath.Join(t.TempDir(), "events.jsonl")
	appendFile(t, events, []string{input})
	var hold atomic.Bool
	entered, release := make(chan struct{}, 1), make(chan struct{})
	cfg := newStreamDirs(t).config(events)
	cfg.ShadowDir = filepath.Join(t.TempDir(), "shadow")
	cfg.hooks.betweenJobs = func() {
		if hold.CompareAndSwap(true, false) {
			entered <- struct{}{}
			<-release
		}
	}
	f := follow(t, streamEngine(t, deployV1), cfg)
	waitMonitor(t, f.m, int64(strings.Count(input, "\n")))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type answer struct {
		res *DeployResult
		err error
	}
	async := func(call func() (*DeployResult, error)) chan answer {
		a := make(chan answer, 1)
		go func() {
			res, err := call()
			a <- answer{res, err}
		}()
		return a
	}
	// during runs first, held between its two jobs, and then second,
	// sent while it is held; it returns second's answer.
	during := func(first, second func() (*DeployResult, error)) answer {
		t.Helper()
		hold.Store(true)
		a1 := async(first)
		<-entered
		a2 := async(second)
		time.Sleep(200 * time.Millisecond) // the second waits for the next job
		release <- struct{}{}
		if a := <-a1; a.err != nil {
			t.Fatalf("the first call: %v", a.err)
		}
		return <-a2
	}
	deploy := func(src string, shadow bool) func() (*DeployResult, error) {
		return func() (*DeployResult, error) {
			return f.m.Deploy(ctx, Deploy{Source: []byte(src), Shadow: shadow})
		}
	}
	names := map[string]string{v1.Hash: "v1", v2.Hash: "v2", v3.Hash: "v3"}
	listed := func() string {
		var out []string
		for _, v := range f.m.Versions() {
			out = append(out, names[v.Version]+":"+string(v.State))
		}
		return strings.Join(out, " ")
	}
	if _, err := deploy(deployV2, false)(); err != nil {
		t.Fatal(err)
	}
	a := during(deploy(deployV3, false), func() (*DeployResult, error) { return f.m.Rollback(ctx, SwitchOptions{}) })
	if a.err != nil || a.res.Version != v2.Hash || a.res.Previous != v3.Hash {
		t.Errorf("a rollback during the switch to v3: %+v, %v; want v2 deployed, was v3", a.res, a.err)
	}
	if got, want := listed(), "v2:active v3:previous v1:previous"; got != want {
		t.Errorf("the versions after it: %s; want %s", got, want)
	}
	// v1 as the shadow, then v3 as the shadow while a promote comes.
	if _, err := deploy(deployV1, true)(); err != nil {
		t.Fatal(err)
	}
	a = during(deploy(deployV3, true), func() (*DeployResult, error) { return f.m.Promote(ctx, SwitchOptions{}) })
	if a.err != nil || a.res.Version != v3.Hash || a.res.Previous != v2.Hash {
		t.Errorf("a promote during the shadow deploy of v3: %+v, %v; want v3 active, was v2", a.res, a.err)
	}
	if got, want := listed(), "v3:active v2:previous v1:previous"; got != want {
		t.Errorf("the versions after it: %s; want %s", got, want)
	}
	if v := f.m.Snapshot().RulesetVersion; v != v3.Hash {
		t.Errorf("active version %.12s, want v3 %.12s", v, v3.Hash)
	}
	// A rollback from v3 (active at its call) while v1's deploy switches
	// is refused when the job takes it: v1 stays active, not v3 again.
	from := func(v *Ruleset) SwitchOptions { return SwitchOptions{From: v.Hash[:12]} }
	a = during(deploy(deployV1, false), func() (*DeployResult, error) { return f.m.Rollback(ctx, from(v3)) })
	if !errors.Is(a.err, ErrNotActive) || a.res != nil {
		t.Errorf("a rollback from v3 during the switch to v1: %+v, %v; want %v", a.res, a.err, ErrNotActive)
	}
	if got, want := listed(), "v1:active v3:previous v2:previous"; got != want {
		t.Errorf("the versions after it: %s; want %s", got, want)
	}
	// A rollback from v1 goes back to v3; the same call again (its answer
	// lost, say) is refused instead of returning to v1.
	for i, want := range []error{nil, ErrNotActive} {
		res, err := f.m.Rollback(ctx, from(v1))
		if !errors.Is(err, want) || (err == nil) != (res != nil && res.Version == v3.Hash) {
			t.Errorf("rollback %d from v1: %+v, %v; want %v", i+1, res, err, want)
		}
		if got, want := listed(), "v3:active v1:previous v2:previous"; got != want {
			t.Errorf("the versions after rollback %d: %s; want %s", i+1, got, want)
		}
	}
	if _, err := f.m.Deploy(ctx, Deploy{Source: []byte(deployV2), From: v1.Hash}); !errors.Is(err, ErrNotActive) {
		t.Errorf("a deploy from v1 over v3: %v; want %v", err, ErrNotActive)
	}
	for _, bad := range []string{"v3", "14fdb", v3.Hash[:11] + "g", v3.Hash + "0"} {
		if _, err := f.m.Rollback(ctx, SwitchOptions{From: bad}); !errors.Is(err, ErrBadFrom) {
			t.Errorf("a rollback from %q: %v; want %v", bad, err, ErrBadFrom)
		}
	}
	if v := f.m.Snapshot().RulesetVersion; v != v3.Hash {
		t.Errorf("active version %.12s, want v3 %.12s", v, v3.Hash)
	}
	// A hash in upper case names the same version (it was refused).
	if res, err := f.m.Deploy(ctx, Deploy{Source: []byte(deployV1), From: strings.ToUpper(v3.Hash[:12])}); err != nil || res.Version != v1.Hash {
		t.Errorf("a deploy of v1 from v3 in upper case: %+v, %v; want v1 deployed", res, err)
	}
	f.stop()
}

// slowAtBarrier makes subtask 0 of cfg's job take a second at each
// barrier while the flag it returns is set (a slow subtask).
func slowAtBarrier(cfg *StreamConfig) *atomic.Bool {
	var slow atomic.Bool
	cfg.hooks.atBarrier = func(sub int, id int64) {
		if sub == 0 && slow.Load() {
			time.Sleep(time.Second)
		}
	}
	return &slow
}

// TestStreamSwitchCheckpointTimeout: a switch whose checkpoint is not
// complete within the checkpoint timeout (a slow subtask) does not
// happen: the deploy is answered "deploy again", and the job goes on with
// its version from its latest complete checkpoint, as it goes on after any
// checkpoint it aborts; the run failed, and cepheus serve exited 1. A
// deploy after it switches, and the committed alerts are exactly those of
// that one switch.
func TestStreamSwitchCheckpointTimeout(t *testing.T) {
	input := deployInput(600)
	lines := strings.SplitAfter(input, "\n")
	half := len(lines) / 2
	n := int64(half)
	events := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(events, []byte(strings.Join(lines[:half], "")), 0o644); err != nil {
		t.Fatal(err)
	}
	v1, v2 := loadRules(t, deployV1), loadRules(t, deployV2)
	d := newStreamDirs(t)
	cfg := d.config(events)
	cfg.CheckpointTimeout = 300 * time.Millisecond
	slow := slowAtBarrier(&cfg)
	e := streamEngine(t, deployV1)
	f := follow(t, e, cfg)
	m := f.m
	waitMonitor(t, m, n)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	slow.Store(true)
	_, err := m.Deploy(ctx, Deploy{Source: []byte(deployV2)})
	slow.Store(false)
	if err == nil || !strings.Contains(err.Error(), "the switch did not happen: checkpoint ") || !strings.Contains(err.Error(), "deploy again") {
		t.Fatalf("a deploy whose switch's checkpoint is not complete in time: %v; want the switch did not happen ...: deploy again", err)
	}
	select {
	case end := <-f.done:
		t.Fatalf("the run ended after the switch that did not happen: %v", end.err)
	default:
	}
	waitMonitor(t, m, n)
	if v := m.Snapshot().RulesetVersion; v != v1.Hash {
		t.Errorf("the version after the switch that did not happen: %.12s, want %.12s", v, v1.Hash)
	}
	// The job restored from a checkpoint whose watermark may be older
	// than the first half allows (taken before the tick that forwarded
	// it): it forwards that one at its first tick. A deploy before then
	// switched at the older watermark, before every alert the test checks
	// (a CI failure: "the input has no keep before alerts").
	waitWatermarkOf(t, m, lines[:half], e.cfg.outOfOrderness)
	res, err := m.Deploy(ctx, Deploy{Source: []byte(deployV2)})
	if err != nil || res.Version != v2.Hash {
		t.Fatalf("the deploy again: %+v, %v", res, err)
	}
	appendFile(t, events, lines[half:])
	waitMonitor(t, m, int64(strings.Count(input, "\n")))
	f.stop()
	fin, err := streamEngine(t, deployV1).Stream(context.Background(), d.config(events))
	if err != nil || fin.RulesetVersion != v2.Hash || !fin.Finished {
		t.Fatalf("the restart to the end: %+v, %v", fin, err)
	}
	checkDeployAlerts(t, deployV2, input, res.Watermark, committedLines(t, d.alerts))
}

// TestStreamSwitchCountsInputOnce: the events a rule skips for lacking
// its key are counted once per event while a changed rule drains, though
// both its versions are offered them. (Before the switch every rule is
// keyed by card, so an event without one is a dead letter; deployV2's
// fresh_country is keyed by country.)
func TestStreamSwitchCountsInputOnce(t *testing.T) {
	input := deployInput(400)
	lines := strings.SplitAfter(strings.TrimSuffix(input, "\n"), "\n")
	lines[len(lines)-1] += "\n"
	half := len(lines) / 2
	before := lines[:half]
	// After the switch, events without a card at the times of the first
	// lines: within change's 10 minutes of it, while its old version
	// drains.
	after, keyless := withKeyless(lines[half:])
	if keyless < 3 {
		t.Fatalf("%d events without a card, want 3 at least", keyless)
	}
	events := filepath.Join(t.TempDir(), "events.jsonl")
	appendFile(t, events, before)
	f := follow(t, streamEngine(t, deployV1), newStreamDirs(t).config(events))
	waitMonitor(t, f.m, int64(len(before)))
	res, err := f.m.Deploy(context.Background(), Deploy{Source: []byte(deployV2)})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Changed, []string{"change"}) {
		t.Fatalf("the deploy changed %v, want [change]", res.Changed)
	}
	appendFile(t, events, after)
	waitMonitor(t, f.m, int64(len(before)+len(after)))
	fin := f.stop()
	type figure struct {
		rule  string
		noKey int64
	}
	var got []figure
	for _, r := range fin.Rules {
		got = append(got, figure{r.Rule, r.NoKey})
	}
	sn := f.m.Snapshot()
	for _, r := range append(sn.Rules, sn.Former...) {
		got = append(got, figure{r.Rule, r.NoKey})
	}
	if len(got) != 2*5 {
		t.Fatalf("the figures of %d rules in the summary and the monitor, want 5 in each: %v", len(got), got)
	}
	for _, r := range got {
		want := int64(keyless)
		switch r.rule {
		case "gone":
			want = 0 // removed at the switch
		case "fresh_country":
			want = 0 // keyed by country, which they have
		}
		if r.noKey != want {
			t.Errorf("rule %s: %d events without its key, want %d (summary and monitor: %v)", r.rule, r.noKey, want, got)
		}
	}
}

// TestStreamWaitReady: WaitReady waits for a run started in a goroutine
// to be ready, and a deploy after it switches (a deploy before the run has
// begun returns ErrNoJob); a run that ends before it was ready (its state
// directory finished) ends the wait with ErrNoJob.
func TestStreamWaitReady(t *testing.T) {
	events := filepath.Join(t.TempDir(), "events.jsonl")
	appendFile(t, events, strings.SplitAfter(strings.TrimSuffix(deployInput(100), "\n"), "\n"))
	m := NewStreamMonitor()
	cfg := newStreamDirs(t).config(events)
	cfg.Follow, cfg.PollInterval, cfg.Monitor = true, 2*time.Millisecond, m
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	e := streamEngine(t, deployV1)
	go func() {
		_, err := e.Stream(ctx, cfg)
		done <- err
	}()
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	if err := m.WaitReady(wctx); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	if !m.Ready() {
		t.Fatal("WaitReady returned, the monitor is not ready")
	}
	if _, err := m.Deploy(ctx, Deploy{Source: []byte(deployV2)}); err != nil {
		t.Fatalf("a deploy after WaitReady: %v", err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Stream after cancel: %v", err)
	}
	// No run: WaitReady waits for ctx, and a deploy has no job.
	idle := NewStreamMonitor()
	short, scancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer scancel()
	if err := idle.WaitReady(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitReady without a run: %v, want the deadline's error", err)
	}
	if _, err := idle.Deploy(context.Background(), Deploy{Source: []byte(deployV2)}); !errors.Is(err, ErrNoJob) {
		t.Errorf("a deploy without a run: %v, want ErrNoJob", err)
	}
	// A run over a finished state directory returns before it is ready.
	bounded := newStreamDirs(t).config(events)
	if _, err := e.Stream(context.Background(), bounded); err != nil {
		t.Fatal(err)
	}
	m2 := NewStreamMonitor()
	bounded.Monitor = m2
	waited := make(chan error, 1)
	r0, e0 := m2.marks() // (WaitReady's first step, before the run)
	go func() { waited <- m2.waitReady(context.Background(), r0, e0) }()
	if res, err := e.Stream(context.Background(), bounded); err != nil || !res.AlreadyFinished {
		t.Fatalf("a run over a finished state: %v", err)
	}
	select {
	case err := <-waited:
		if !errors.Is(err, ErrNoJob) {
			t.Errorf("WaitReady over a run that ended before it was ready: %v, want ErrNoJob", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("WaitReady still waits a minute after the run ended before it was ready")
	}
}

// TestStreamRemovedDrainsCountOnce: a rule changed twice and then removed
// has two old versions draining together, no active one: the events
// without its key are counted once each, by the newest.
func TestStreamRemovedDrainsCountOnce(t *testing.T) {
	input := deployInput(400)
	lines := strings.SplitAfter(strings.TrimSuffix(input, "\n"), "\n")
	lines[len(lines)-1] += "\n"
	half := len(lines) / 2
	after, keyless := withKeyless(lines[half:])
	events := filepath.Join(t.TempDir(), "events.jsonl")
	appendFile(t, events, lines[:half])
	f := follow(t, streamEngine(t, deployV1), newStreamDirs(t).config(events))
	waitMonitor(t, f.m, int64(half))
	changeRule := "rule change {\n  key card\n  pattern {\n    begin a where type == \"auth\" && amount > 450\n"
	if !strings.Contains(deployV2, changeRule) {
		t.Fatal("deployV2's change rule is not as this test expects")
	}
	v3 := strings.Replace(deployV2, "amount > 450", "amount > 400", 1)
	i := strings.Index(deployV2, changeRule)
	end := i + strings.Index(deployV2[i:], "\n}\n") + 3
	v4 := deployV2[:i] + deployV2[end:]
	for n, src := range []string{deployV2, v3, v4} {
		if _, err := f.m.Deploy(context.Background(), Deploy{Source: []byte(src)}); err != nil {
			t.Fatalf("deploy %d: %v", n+2, err)
		}
	}
	if sn := f.m.Snapshot(); len(sn.Draining) != 2 {
		t.Fatalf("draining after the deploys: %+v, want change's two old versions", sn.Draining)
	}
	appendFile(t, events, after)
	waitMonitor(t, f.m, int64(half+len(after)))
	fin := f.stop()
	found := false
	for _, r := range fin.Rules {
		if r.Rule == "change" {
			found = true
			if r.NoKey != int64(keyless) {
				t.Errorf("removed rule change, two old versions draining: %d events without its key, want %d", r.NoKey, keyless)
			}
		}
	}
	if !found {
		t.Errorf("no figures of rule change in the summary: %+v", fin.Rules)
	}
}

// withKeyless returns lines with an event without a card (keyed by
// country alone) after each of the first five that are events, at its
// time, and how many it added.
func withKeyless(lines []string) ([]string, int) {
	var out []string
	for i, l := range lines {
		out = append(out, l)
		var ev struct{ Ts string }
		if i < 5 && json.Unmarshal([]byte(l), &ev) == nil && ev.Ts != "" {
			out = append(out, fmt.Sprintf(`{"ts":%q,"type":"auth","amount":600,"country":"US"}`+"\n", ev.Ts))
		}
	}
	return out, len(out) - len(lines)
}

// TestStreamKafkaVersionsTakeover: two instances of a group without a
// rules topic each deploy on their own; with a on the second version and
// b still on the first, b stops and a takes its partitions over: each
// partition's state is read with the rules of the checkpoint that wrote
// it, and a goes on, moving it to its version (the Kafka trial's group,
// whose every instance failed "encoded for another pattern", for good,
// on the keys of the other version's partitions). Its alerts are each
// once in the alerts topic.
func TestStreamKafkaVersionsTakeover(t *testing.T) {
	brokers := kafkaBrokers(t)
	lines := strings.SplitAfter(deployInput(900), "\n")
	half := len(lines) / 2
	topic := fmt.Sprintf("stream-kafka-takeover-%d", time.Now().UnixNano())
	produceTopic(t, brokers, topic, 4, strings.Join(lines[:half], ""))
	config := func(inst string) StreamConfig {
		return StreamConfig{
			Kafka: &KafkaInput{Brokers: brokers, Topic: topic, AlertsTopic: topic + "-alerts", Group: topic,
				InstanceID: inst, SessionTimeout: 2 * time.Second},
			StateDir: filepath.Join(t.TempDir(), "state-"+inst), CheckpointInterval: 100 * time.Millisecond, Parallelism: 1, Logf: t.Logf,
		}
	}
	type instance struct {
		m      *StreamMonitor
		cancel context.CancelFunc
		done   chan error
	}
	start := func(inst string) *instance {
		i := &instance{m: NewStreamMonitor(), done: make(chan error, 1)}
		cfg := config(inst)
		cfg.Monitor = i.m
		var ctx context.Context
		ctx, i.cancel = context.WithCancel(context.Background())
		t.Cleanup(i.cancel)
		go func() {
			_, err := streamEngine(t, deployV1).Stream(ctx, cfg)
			i.done <- err
		}()
		return i
	}
	a, b := start("a"), start("b")
	records := func() int64 { return a.m.Snapshot().Progress.Records + b.m.Snapshot().Progress.Records }
	waitFor(t, 60*time.Second, "both instances ready, each with partitions, the first half read", func() bool {
		return a.m.Ready() && b.m.Ready() && a.m.Snapshot().Partitions > 0 && b.m.Snapshot().Partitions > 0 && records() >= int64(half)
	})
	// The rule change of another pattern (a state of v1's cannot be read
	// with v2's rules, nor one of v2's with v1's).
	v2src := strings.Replace(deployV2Kafka, `begin a where type == "auth" && amount > 450`, `begin a times 2 where type == "auth" && amount > 450`, 1)
	v2 := loadRules(t, v2src)
	res, err := a.m.Deploy(context.Background(), Deploy{Source: []byte(v2src)})
	if err != nil {
		t.Fatal(err)
	}
	if act, _ := versions(b.m); act == v2.Hash {
		t.Fatal("b switched too: no rules topic, each instance deploys on its own")
	}
	// Both checkpoint after the switch, with records: a's partitions
	// under v2, b's under v1.
	q := half + (len(lines)-half)/2
	// Then, on 80 cards, a large auth: partial matches of the rule
	// change, whose pattern v2 changes (times 2), under each version.
	var extra strings.Builder
	at := time.UnixMilli(int64(lastEventTime(t, lines[:q]))).UTC()
	for i := range 80 {
		fmt.Fprintf(&extra, `{"ts":%q,"card":"x%d","type":"auth","amount":600,"country":"FR"}`+"\n", at.Format(time.RFC3339Nano), i)
	}
	produceTopic(t, brokers, topic, 4, strings.Join(lines[half:q], "")+extra.String())
	waitFor(t, 60*time.Second, "the third quarter read", func() bool { return records() >= int64(q+80) })
	after := b.m.Snapshot().Progress.LastCheckpoint
	waitFor(t, 60*time.Second, "checkpoints of both after the switch", func() bool {
		return a.m.Snapshot().Progress.LastCheckpoint > res.Checkpoint && b.m.Snapshot().Progress.LastCheckpoint > after
	})
	b.cancel()
	if err := <-b.done; !errors.Is(err, context.Canceled) {
		t.Fatalf("b's stop: %v", err)
	}
	waitFor(t, 60*time.Second, "a reading every partition", func() bool {
		select {
		case err := <-a.done:
			t.Fatalf("a ended: %v", err)
		default:
		}
		return a.m.Ready() && a.m.Snapshot().Partitions == 4
	})
	produceTopic(t, brokers, topic, 4, strings.Join(lines[q:], ""))
	total := int64(len(lines) - 1 + 80)
	waitFor(t, 60*time.Second, "a reading the whole topic", func() bool {
		select {
		case err := <-a.done:
			t.Fatalf("a ended: %v", err)
		default:
		}
		return a.m.Snapshot().Progress.Records >= total-b.m.Snapshot().Progress.Records
	})
	if act, _ := versions(a.m); act != v2.Hash {
		t.Errorf("a runs %.12s, want v2 %.12s", act, v2.Hash)
	}
	a.cancel()
	if err := <-a.done; !errors.Is(err, context.Canceled) {
		t.Fatalf("a's stop: %v", err)
	}
	ids := map[string]int{}
	for _, v := range topicValues(t, brokers, topic+"-alerts") {
		var al struct {
			ID string `json:"alert_id"`
		}
		if err := json.Unmarshal([]byte(v), &al); err != nil || al.ID == "" {
			t.Fatalf("alert %s: %v", v, err)
		}
		if ids[al.ID]++; ids[al.ID] == 2 {
			t.Errorf("alert %s twice", al.ID)
		}
	}
	if len(ids) == 0 {
		t.Error("no alert in the alerts topic")
	}
}
