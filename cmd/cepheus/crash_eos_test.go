//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/cepheus-cep/cepheus/runtime/kafka"
)

// cardKeyedRules writes the rules of rulesets/cards.cep keyed by card_id
// alone (the Kafka mode's rules: keyed by the input's record key) into
// dir, without the file's tests, and returns the file.
func cardKeyedRules(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile("../../rulesets/cards.cep")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	var out []string
	n := 0
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(l, "test ") {
			break
		}
		if !strings.HasPrefix(l, "rule ") {
			out = append(out, l)
			continue
		}
		j := i
		for j < len(lines) && lines[j] != "}" {
			j++
		}
		block := lines[i : j+1]
		keep := false
		for _, bl := range block {
			keep = keep || strings.TrimSpace(bl) == "key card_id"
		}
		for !keep && len(out) > 0 && strings.HasPrefix(out[len(out)-1], "#") {
			out = out[:len(out)-1] // the dropped rule's comment
		}
		if keep {
			out = append(out, block...)
			n++
		}
		i = j
	}
	if n < 4 {
		t.Fatalf("cards.cep has %d rules keyed by card_id alone, want at least 4", n)
	}
	path := filepath.Join(dir, "cards_by_card.cep")
	if err := os.WriteFile(path, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// eosInput generates at least 200,000 card events (about perDay) with a
// malformed line after every 25,000th and returns the file and the
// number of those.
func eosInput(t *testing.T, bin, dir string, perDay int) (string, int) {
	t.Helper()
	raw := filepath.Join(dir, "gen.jsonl")
	cmd := exec.Command(bin, "gen", "-seed", "7",
		"-history-days", "1", "-history-events-per-day", "4000", "-days", "1", "-events-per-day", strconv.Itoa(perDay),
		"-customers", "5000", "-merchants", "500", "-fraud-rate", "20",
		"-scenarios", "card_testing,impossible_travel,large_then_foreign,velocity_burst", "-o", raw)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cepheus gen: %v\n%s", err, out)
	}
	b, err := os.ReadFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	n, dead := 0, 0
	for l := range bytes.Lines(b) {
		out.Write(l)
		if n++; n%25000 == 0 {
			fmt.Fprintf(&out, "not json %d\n", n)
			dead++
		}
	}
	if n < 200000 {
		t.Fatalf("cepheus gen wrote %d events, want at least 200,000", n)
	}
	events := filepath.Join(dir, "events.jsonl")
	if err := os.WriteFile(events, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return events, dead
}

// consumeTopic reads topic read_committed with cepheus consume.
func consumeTopic(t *testing.T, bin, brokers, topic string) [][]byte {
	t.Helper()
	cmd := exec.Command(bin, "consume", "-brokers", brokers, "-topic", topic, "-idle", "2s")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("cepheus consume %s: %v\n%s", topic, err, stderr.String())
	}
	var lines [][]byte
	for l := range bytes.Lines(out) {
		lines = append(lines, bytes.TrimSuffix(l, []byte("\n")))
	}
	return lines
}

// alertIDSet is the alert ids of JSON lines, as a multiset.
func alertIDSet(t *testing.T, lines [][]byte) multiset {
	t.Helper()
	m := multiset{}
	for _, l := range lines {
		var a struct {
			ID string `json:"alert_id"`
		}
		if err := json.Unmarshal(l, &a); err != nil || a.ID == "" {
			t.Fatalf("not an alert: %q (%v)", l, err)
		}
		m[a.ID]++
	}
	return m
}

// eosJob is the input of an exactly-once test: the card_id rules, the
// events of eosInput produced into a 6-partition topic keyed by card_id,
// the malformed lines among them, and the backtest's alert ids.
type eosJob struct {
	rules, events, topic string
	dead                 int
	want                 multiset
}

// newEOSJob makes an eosJob of about 200,000 events in dir on brokers;
// the topic's name starts with name.
func newEOSJob(t *testing.T, bin, dir, brokers, name string) eosJob {
	t.Helper()
	return newEOSJobOf(t, bin, dir, brokers, name, 200000, "")
}

// newEOSJobOf is newEOSJob with about perDay events and the rules of
// file rules ("": the cards rules keyed by card_id alone).
func newEOSJobOf(t *testing.T, bin, dir, brokers, name string, perDay int, rules string) eosJob {
	t.Helper()
	j := eosJob{rules: rules}
	if rules == "" {
		j.rules = cardKeyedRules(t, dir)
	}
	j.events, j.dead = eosInput(t, bin, dir, perDay)
	bt := filepath.Join(dir, "backtest.jsonl")
	if out, err := exec.Command(bin, "backtest", "-q", "-rules", j.rules, "-events", j.events, "-alerts", bt).CombinedOutput(); err != nil {
		t.Fatalf("cepheus backtest: %v\n%s", err, out)
	}
	b, err := os.ReadFile(bt)
	if err != nil {
		t.Fatal(err)
	}
	var lines [][]byte
	for l := range bytes.Lines(b) {
		lines = append(lines, bytes.TrimSuffix(l, []byte("\n")))
	}
	if j.want = alertIDSet(t, lines); sum(j.want) < 50 {
		t.Fatalf("the backtest has %d alerts: too few to tell", sum(j.want))
	}
	j.topic = fmt.Sprintf("%s-%d", name, time.Now().UnixNano())
	if e := runChild(t, bin, []string{"produce", "-brokers", brokers, "-topic", j.topic, "-partitions", "6",
		"-key", "card_id", "-events", j.events}, "", 0); e.killed || e.code != 0 {
		t.Fatalf("cepheus produce: %s\n%s", e.describe(), e.tail())
	}
	return j
}

// eosStep is one start of cepheus run in an exactly-once chain: killed at
// a failpoint or after a time, or (neither) run to its end.
type eosStep struct {
	local       string // -local-checkpoint-interval; "" the default
	parallelism int
	backend     string
	failpoint   string
	killAfter   time.Duration
	wipeState   bool // delete the state directory before the start
	// ageLocal dates the local copies 48 h back before the start, older
	// than the changelog may keep its deletions (delete.retention.ms).
	ageLocal bool
}

// TestExactlyOnceKafka is the exactly-once test of the Kafka mode: 200,000
// generated events (and a few malformed lines) in a six-partition topic
// keyed by card_id, the cards rules keyed by card_id, and cepheus run with
// the alerts, dead letters and late events in topics (one transaction per
// checkpoint) SIGKILLed at named failpoints (before the commit, between
// the commit and the next one, during the restore, amid a snapshot) and
// at random moments, restarted with other parallelism and backends, and
// in a second chain restarted without its local state (restored from the
// changelog alone). At the end, a read_committed consumer's alert ids
// equal cepheus backtest's over the same events, as a multiset, and every
// dead letter is there once. A third chain runs -delivery at-least-once:
// there the ids and the dead letters must all be there, repeats allowed.
func TestExactlyOnceKafka(t *testing.T) {
	brokers := kafkaBrokers(t)
	bin := buildCepheus(t)
	dir := t.TempDir()
	job := newEOSJob(t, bin, dir, brokers, "eos")
	rules, topic, dead, want := job.rules, job.topic, job.dead, job.want
	const mem, peb = "memory", "pebble"
	r := crashRand(crashSeed(t), 9)
	random := func() time.Duration {
		return 150*time.Millisecond + time.Duration(r.Int64N(int64(600*time.Millisecond)))
	}
	// Each step takes a checkpoint every 5,000 records besides every 200
	// ms (-checkpoint-records): a step killed at its Nth commit has read
	// at most about N*5,000 of the 200,000 events however fast the host,
	// so the job outlasts the failpoint steps whose restores are checked
	// below (CI's faster host once finished it at the third step).
	//
	// The restores each chain must have made at least once: from a local
	// copy and the changelog's changes since, from the changelog alone.
	const fromTail, fromChangelog = "from the local copy of checkpoint", "from changelog topic"
	const tooOld = "after which a deletion may be gone from it: not used"
	chains := []struct {
		name        string
		atLeastOnce bool
		steps       []eosStep
		restores    []string
	}{
		{"failpoints", false, []eosStep{
			{parallelism: 2, backend: mem, failpoint: "kafka.before-commit@2"},
			// Local copies at the first checkpoint only, killed after the
			// third commit: the next start has an older local copy, which
			// is too old once dated back: the changelog alone is read.
			{parallelism: 2, backend: peb, failpoint: "kafka.after-commit@3", local: "1h"},
			{parallelism: 2, backend: mem, failpoint: "kafka.before-commit@2", ageLocal: true},
			{parallelism: 1, backend: peb, failpoint: "kafka.after-commit@2"},
			{parallelism: 2, backend: mem, failpoint: "kafka.restore"},
			{parallelism: 2, backend: peb, failpoint: "kafka.flushed@2", local: "300ms"},
			{parallelism: 3, backend: peb, failpoint: "snapshot.mid@2", local: "0s"},
			{parallelism: 2, backend: mem, failpoint: "barrier.after@3", local: "300ms"},
			{parallelism: 1, backend: mem, failpoint: "kafka.before-fence"},
			{parallelism: 2, backend: peb, failpoint: "checkpoint.complete@2", local: "0s"},
			{parallelism: 2, backend: mem, killAfter: random(), local: "300ms"},
			{parallelism: 1, backend: peb, killAfter: random()},
			{parallelism: 2, backend: mem, killAfter: random(), local: "0s"},
			{parallelism: 3, backend: peb, killAfter: random(), local: "200ms"},
			{parallelism: 2, backend: mem},
			{parallelism: 1, backend: mem, wipeState: true}, // finished: the changelog says so
		}, []string{fromTail, tooOld}},
		{"changelog-only", false, []eosStep{
			{parallelism: 2, backend: mem, killAfter: random()},
			{parallelism: 2, backend: peb, wipeState: true, failpoint: "kafka.before-commit@3"},
			{parallelism: 1, backend: mem, wipeState: true, killAfter: random()},
			{parallelism: 3, backend: mem, wipeState: true},
		}, []string{fromChangelog}},
		{"at-least-once", true, []eosStep{
			{parallelism: 2, backend: mem, failpoint: "kafka.before-commit@3"},
			{parallelism: 1, backend: peb, killAfter: random()},
			{parallelism: 2, backend: mem},
		}, nil},
	}
	kills := 0
	for _, ch := range chains {
		t.Run(ch.name, func(t *testing.T) {
			alerts, deadTopic, late := topic+"-"+ch.name+"-alerts", topic+"-"+ch.name+"-dead", topic+"-"+ch.name+"-late"
			group := topic + "-" + ch.name
			state := filepath.Join(dir, ch.name+"-state")
			finished := false
			restored := map[string]bool{}
			for i, st := range ch.steps {
				if st.wipeState {
					if err := os.RemoveAll(state); err != nil {
						t.Fatal(err)
					}
				}
				if st.ageLocal {
					markers, _ := filepath.Glob(filepath.Join(state, "chk-*", "_COMPLETE"))
					if len(markers) == 0 {
						t.Fatalf("step %d: no local copy to date back", i+1)
					}
					old := time.Now().Add(-48 * time.Hour)
					for _, m := range markers {
						if err := os.Chtimes(m, old, old); err != nil {
							t.Fatal(err)
						}
					}
				}
				args := []string{"run", "-rules", rules, "-brokers", brokers, "-input-topic", topic, "-bounded",
					"-alerts-topic", alerts, "-dead-letter-topic", deadTopic, "-late-topic", late, "-group", group,
					"-state", state, "-checkpoint-interval", "200ms", "-checkpoint-records", "5000", "-progress", "1h",
					"-parallelism", strconv.Itoa(st.parallelism), "-state-backend", st.backend}
				if ch.atLeastOnce {
					args = append(args, "-delivery", "at-least-once")
				}
				if st.local != "" {
					args = append(args, "-local-checkpoint-interval", st.local)
				}
				e := runChild(t, bin, args, st.failpoint, st.killAfter)
				for _, r := range ch.restores {
					restored[r] = restored[r] || strings.Contains(e.stderr, r)
				}
				if st.ageLocal && (strings.Contains(e.stderr, fromTail) || !strings.Contains(e.stderr, tooOld)) {
					t.Errorf("step %d restored from local copies dated 48 h back, or did not say they are too old:\n%s", i+1, e.tail())
				}
				t.Logf("step %d (-parallelism %d -state-backend %s %s%v wipe=%v): %s", i+1, st.parallelism, st.backend, st.failpoint, st.killAfter, st.wipeState, e.describe())
				switch {
				case e.killed:
					kills++
					if finished {
						t.Fatalf("step %d: killed after the job finished", i+1)
					}
				case e.code != 0:
					t.Fatalf("step %d: %s\n%s", i+1, e.describe(), e.tail())
				case finished && !strings.Contains(e.stderr, "nothing to do"):
					t.Fatalf("step %d: a run after the job finished did not exit at once:\n%s", i+1, e.tail())
				default:
					finished = true
				}
			}
			if !finished {
				t.Fatal("no step ran the job to its end")
			}
			for _, r := range ch.restores {
				if !restored[r] {
					t.Errorf("no restore said %q", r)
				}
			}
			got := alertIDSet(t, consumeTopic(t, bin, brokers, alerts))
			if ch.atLeastOnce {
				// Every alert at least once, and nothing else: the
				// distinct ids are the backtest's.
				if d := got.exceeds(want); d != "" {
					t.Errorf("the alerts topic lacks alerts of the backtest: %s", d)
				}
				for id := range got {
					if want[id] == 0 {
						t.Errorf("alert %s is not the backtest's", id)
					}
				}
				t.Logf("at least once: %d alerts for the backtest's %d", sum(got), sum(want))
			} else if d := want.diff(got); d != "" {
				t.Errorf("the alerts topic (read_committed) differs from the backtest: %s\n%s", d, alertPlaces(t, brokers, alerts, group, topic, want, got))
			}
			dl := consumeTopic(t, bin, brokers, deadTopic)
			seen := map[string]bool{}
			for _, l := range dl {
				var d struct {
					File string `json:"file"`
					Line int64  `json:"line"`
				}
				if err := json.Unmarshal(l, &d); err != nil || d.File == "" {
					t.Fatalf("not a dead letter: %q (%v)", l, err)
				}
				k := fmt.Sprintf("%s:%d", d.File, d.Line)
				if seen[k] && !ch.atLeastOnce {
					t.Errorf("dead letter %s twice", k)
				}
				seen[k] = true
			}
			if len(seen) != dead || !ch.atLeastOnce && len(dl) != dead {
				t.Errorf("%d dead letters in the topic (%d distinct), want %d", len(dl), len(seen), dead)
			}
		})
	}
	t.Logf("%d kills", kills)
	if !t.Failed() && kills < 10 {
		t.Errorf("%d kills, want at least 10", kills)
	}
}

// TestExactlyOnceKafkaBrokerFailure runs the exactly-once job against a
// 3-node cluster of its own (scripts/kafka.sh start -n 3: every topic
// replicated three times, writes acknowledged by two) and kills one
// broker with SIGKILL, bringing it back two seconds later: just before
// the run starts (an instance started during a broker failure waits for
// it, docs/kafka.md) and half a second into it (mid-run). The run goes on
// through the leader changes and finishes, and a read_committed
// consumer's alert ids equal the backtest's. (Neither case fails at
// c12740e on this machine: franz-go's own retries outlast a two-second
// absence. The start's listings failed at once there when a restart took
// longer, in a CI run of the 28th session: TestPartitionCountNoAnswer and
// TestFirstCallMisconfigured cover their retries.)
func TestExactlyOnceKafkaBrokerFailure(t *testing.T) {
	kafkaBrokers(t) // the same skip or failure as the other Kafka tests
	t.Parallel()
	brokers, kdir := startOwnKafka(t, "-n", "3")
	bin := buildCepheus(t)
	pids, err := os.ReadFile(filepath.Join(kdir, "pids"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(pids)), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d brokers recorded, want 3", len(lines))
	}
	node2 := func() int {
		t.Helper()
		// The pid file is rewritten by restart-node.
		pids, err := os.ReadFile(filepath.Join(kdir, "pids"))
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.Fields(strings.Split(strings.TrimSpace(string(pids)), "\n")[1])[0])
		if err != nil {
			t.Fatal(err)
		}
		return pid
	}
	for _, tc := range []struct {
		name  string
		delay time.Duration // from the run's start to the kill; negative: before it
	}{{"eos-failover-start", -1}, {"eos-failover", 500 * time.Millisecond}} {
		dir := filepath.Join(t.TempDir(), tc.name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		job := newEOSJob(t, bin, dir, brokers, tc.name)
		rules, topic, want := job.rules, job.topic, job.want
		pid := node2()
		killed := make(chan error, 1)
		restarted := make(chan error, 1)
		go func() {
			time.Sleep(max(tc.delay, 0))
			err := syscall.Kill(pid, syscall.SIGKILL)
			killed <- err
			if err != nil {
				restarted <- err
				return
			}
			time.Sleep(2 * time.Second)
			out, err := exec.Command("../../scripts/kafka.sh", "restart-node", "2", "-dir", kdir).CombinedOutput()
			if err != nil {
				err = fmt.Errorf("%v\n%s", err, out)
			}
			restarted <- err
		}()
		if tc.delay < 0 {
			if err := <-killed; err != nil {
				t.Fatalf("killing broker 2: %v", err)
			}
		}
		alerts := topic + "-alerts"
		e := runChild(t, bin, []string{"run", "-rules", rules, "-brokers", brokers, "-input-topic", topic, "-bounded",
			"-alerts-topic", alerts, "-group", topic, "-state", filepath.Join(dir, "state"), "-checkpoint-interval", "200ms",
			"-parallelism", "2", "-progress", "1s"}, "", 0)
		if err := <-restarted; err != nil {
			t.Fatalf("%s: killing and restarting broker 2: %v", tc.name, err)
		}
		if e.killed || e.code != 0 {
			t.Fatalf("%s: cepheus run through a broker failure: %s\n%s", tc.name, e.describe(), e.tail())
		}
		t.Logf("%s: run through the broker failure: %s", tc.name, e.describe())
		got := alertIDSet(t, consumeTopic(t, bin, brokers, alerts))
		if d := want.diff(got); d != "" {
			t.Errorf("%s: the alerts topic (read_committed) differs from the backtest: %s\n%s", tc.name, d, alertPlaces(t, brokers, alerts, topic, topic, want, got))
		}
	}
}

// TestKafkaZombieFenced: an instance paused with SIGSTOP while a second
// one with the same group and instance id (its own state directory, so
// restored from the changelog) takes over cannot commit once it resumes:
// it stops with an error that says it was fenced, and the alerts are the
// backtest's, once each.
func TestKafkaZombieFenced(t *testing.T) {
	brokers := kafkaBrokers(t)
	t.Parallel()
	bin := buildCepheus(t)
	dir := t.TempDir()
	job := newEOSJob(t, bin, dir, brokers, "zombie")
	rules, topic, want := job.rules, job.topic, job.want
	alerts := topic + "-alerts"
	args := func(state string) []string {
		return []string{"run", "-rules", rules, "-brokers", brokers, "-input-topic", topic, "-bounded",
			"-alerts-topic", alerts, "-group", topic, "-instance-id", "a", "-state", filepath.Join(dir, state),
			"-checkpoint-interval", "200ms", "-progress", "1h"}
	}
	// Paused once it has committed its first checkpoint: waited for, not
	// slept (800 ms, when a whole run of the job takes about 2 s on a
	// 2-vCPU machine: a host two or three times as fast could finish it
	// before the pause).
	zombie := startCommitted(t, bin, args("zombie"))
	if err := syscall.Kill(zombie.pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	e := runChild(t, bin, args("successor"), "", 0)
	if e.killed || e.code != 0 {
		t.Fatalf("the successor: %s\n%s", e.describe(), e.tail())
	}
	t.Logf("the successor: %s", e.describe())
	if err := syscall.Kill(zombie.pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-zombie.done:
		z := zombie.exit()
		if z.killed || z.code != 1 || !strings.Contains(z.stderr, "fenced") || !strings.Contains(z.stderr, "(another process started with -group "+topic+" -instance-id a: each instance of a group needs its own -instance-id;") {
			t.Fatalf("the resumed zombie: %s, want exit 1 saying it was fenced, and by what\n%s", z.describe(), z.stderr)
		}
		t.Logf("the resumed zombie: %s", strings.TrimSpace(z.stderr[strings.LastIndex(strings.TrimSpace(z.stderr), "\n")+1:]))
	case <-time.After(90 * time.Second):
		t.Fatalf("the resumed zombie still runs after 90s\n%s", zombie.out.String())
	}
	got := alertIDSet(t, consumeTopic(t, bin, brokers, alerts))
	if d := want.diff(got); d != "" {
		t.Errorf("the alerts topic (read_committed) differs from the backtest: %s\n%s", d, alertPlaces(t, brokers, alerts, topic, topic, want, got))
	}
}

// TestKafkaPausedPastTxnTimeout: an instance paused (SIGSTOP: a long GC,
// a VM frozen) for longer than its transaction timeout, with no other
// instance started meanwhile, finds on its resumption that the broker
// aborted its open transaction; that is not a fence (no newer producer
// took its transactional id), so it says so and restarts the job from its
// last committed checkpoint instead of stopping as fenced (it did before
// 2026-12-06), and the alerts topic holds the backtest's alerts, once each.
func TestKafkaPausedPastTxnTimeout(t *testing.T) {
	brokers := kafkaBrokers(t)
	t.Parallel()
	bin := buildCepheus(t)
	dir := t.TempDir()
	job := newEOSJob(t, bin, dir, brokers, "eos-paused")
	alerts := job.topic + "-alerts"
	args := []string{"run", "-rules", job.rules, "-brokers", brokers, "-input-topic", job.topic, "-bounded",
		"-alerts-topic", alerts, "-group", job.topic, "-state", filepath.Join(dir, "state"),
		"-checkpoint-interval", "200ms", "-checkpoint-timeout", "1s", "-transaction-timeout", "2s", "-progress", "20ms"}
	// It pauses itself (a failpoint's stop-when) just before the barrier
	// of a checkpoint, none in flight: its open transaction holds the
	// alerts since the last commit, and the checkpoint's timeout starts
	// only after the resumption. Paused by the test at a random moment,
	// a checkpoint in flight then timed out at the resumption, before
	// its commit could learn of the broker's abort (a CI failure: the
	// restart said "a checkpoint timed out"). Paused at this point by a
	// failpoint that signalled the process, not the thread that hits it,
	// 3 runs in 6 still failed so here: another thread took the signal
	// while this one began the checkpoint (8 in 8 pass since).
	pause := filepath.Join(dir, "pause")
	c := startCommitted(t, bin, args, "CEPHEUS_FAILPOINT=barrier.before/stop-when="+pause)
	// Paused once it has read 10,000 records more since its first
	// commit (about 25 alerts in its open transaction): counted, not
	// slept (300 ms, when the whole job takes about 2 s on a 2-vCPU
	// machine: a host two or three times as fast could finish it before
	// the pause).
	first := lastRecords(c.out.String())
	for deadline := time.Now().Add(30 * time.Second); lastRecords(c.out.String()) < first+10000; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not 10,000 records more read 30 s after the first commit:\n%s", c.out.String())
		}
	}
	if err := os.WriteFile(pause, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); processState(t, c.pid) != "T"; time.Sleep(5 * time.Millisecond) {
		select {
		case <-c.done:
			t.Fatalf("the run ended before it paused at its next barrier:\n%s", c.out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run has not paused at its next barrier within 30 s:\n%s", c.out.String())
		}
	}
	t.Logf("paused at %d records read (%d by the last progress line before the first commit)", lastRecords(c.out.String()), first)
	// The broker aborts a transaction at most its timeout (2 s) and its
	// check's interval (1 s: scripts/kafka/server.properties) after it
	// began.
	time.Sleep(6 * time.Second)
	if err := syscall.Kill(c.pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("still running 2 minutes after its resumption:\n%s", c.out.String())
	}
	e := c.exit()
	if e.killed || e.code != 0 {
		t.Fatalf("the paused run: %s, want exit 0\n%s", e.describe(), e.stderr)
	}
	for l := range strings.Lines(e.stderr) {
		if strings.Contains(l, "restarting from") {
			t.Logf("%s: %s", e.describe(), strings.TrimSpace(l))
		}
	}
	if !strings.Contains(e.stderr, "aborted the transaction at its timeout") || !strings.Contains(e.stderr, "restarting from the last committed checkpoint") || strings.Contains(e.stderr, "fenced") {
		t.Errorf("the paused run does not say that the broker aborted its transaction at its timeout and that it restarted from its last checkpoint, or says it was fenced:\n%s", e.stderr)
	}
	got := alertIDSet(t, consumeTopic(t, bin, brokers, alerts))
	if d := job.want.diff(got); d != "" {
		t.Errorf("the alerts topic (read_committed) differs from the backtest: %s\n%s\nthe run:\n%s", d, alertPlaces(t, brokers, alerts, job.topic, job.topic, job.want, got), e.stderr)
	}
}

// TestKafkaStopBrokersFrozen: an instance stopped by SIGTERM while its
// only broker is frozen (SIGSTOP: its connections hang, as with a network
// cut) ends soon after its checkpoint timeout (and the 10 s its producer's
// close gives an abort), without the final checkpoint it cannot commit and
// saying so, instead of waiting for the broker; run again once the broker
// is back, it resumes from its last committed checkpoint and the alerts
// topic holds the backtest's alerts, once each.
func TestKafkaStopBrokersFrozen(t *testing.T) {
	kafkaBrokers(t) // the same skip or failure as the other Kafka tests
	t.Parallel()
	fb := startFreezableKafka(t)
	bin := buildCepheus(t)
	dir := t.TempDir()
	job := newEOSJob(t, bin, dir, fb.brokers, "eos-frozen")
	args := fb.runArgs(job, dir)
	// Frozen once the run has committed a checkpoint or two, mid-input:
	// the run sleeps 200 ms at the barrier of a checkpoint taken every
	// 10,000 records (or 200 ms), so it reads at most 50,000 records a
	// second and the 200,000 take it 4 s at least, however fast the host
	// (without the sleeps about 2 s here: a host several times faster
	// could have finished before the freeze).
	c := startCommitted(t, bin, append(args, "-checkpoint-records", "10000"), fb.env(), "CEPHEUS_FAILPOINT=barrier.before/sleep=200ms")
	time.Sleep(500 * time.Millisecond)
	fb.freeze(t)
	time.Sleep(300 * time.Millisecond) // the run meets the frozen broker
	fb.stopFrozen(t, c)
	// Run again with the broker back: to the end of the input.
	fb.rerun(t, bin, args, job)
}

// TestKafkaFrozenAmidCommit freezes the only broker at a chosen step of a
// checkpoint's commit, the run paused there (a failpoint's stop-when)
// until the broker is frozen and then let go: what it sends next waits
// in the frozen broker's sockets. The run is stopped (SIGTERM) and cut
// short after its checkpoint timeout; the broker, thawed, reads what the
// gone run left, and the run again to the end must give each alert once:
// whether the commit then lands (the transaction's end sent) or not.
func TestKafkaFrozenAmidCommit(t *testing.T) {
	kafkaBrokers(t)
	t.Parallel()
	for _, point := range []string{
		"kafka.flushed",       // the end of the transaction (commit) goes to the frozen broker
		"kafka.before-commit", // the flush, the offsets and the end
	} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			fb := startFreezableKafka(t)
			bin := buildCepheus(t)
			dir := t.TempDir()
			job := newEOSJob(t, bin, dir, fb.brokers, "eos-amid")
			args := fb.runArgs(job, dir)
			pause := filepath.Join(dir, "pause")
			c := startChild(t, bin, args, point+"/stop-when="+pause, fb.env())
			t.Cleanup(func() {
				select {
				case <-c.done:
				default:
					_ = syscall.Kill(c.pid, syscall.SIGCONT)
					_ = syscall.Kill(-c.pid, syscall.SIGKILL)
					<-c.done
				}
			})
			for deadline := time.Now().Add(30 * time.Second); !strings.Contains(c.out.String(), "first transaction committed"); time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("no checkpoint after 30 s:\n%s", c.out.String())
				}
			}
			if err := os.WriteFile(pause, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(30 * time.Second); processState(t, c.pid) != "T"; time.Sleep(5 * time.Millisecond) {
				select {
				case <-c.done:
					t.Fatalf("the run ended before it paused at %s:\n%s", point, c.out.String())
				default:
				}
				if time.Now().After(deadline) {
					t.Fatalf("the run has not paused at %s within 30 s:\n%s", point, c.out.String())
				}
			}
			fb.freeze(t)
			if err := syscall.Kill(c.pid, syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			time.Sleep(300 * time.Millisecond) // what it sends waits in the broker's sockets
			fb.stopFrozen(t, c)
			fb.rerun(t, bin, args, job)
		})
	}
}

// freezableKafka is a broker of a test's own that it freezes (SIGSTOP)
// and thaws, logging the transactions' steps (DEBUG), which a failure
// prints: an exactly-once breach seen twice in CI and never here is not
// explained yet (docs/kafka.md, "Broker failure").
type freezableKafka struct {
	brokers, dir string
	pid          int
	frozen       bool
	first        string // the stopped run's standard error
	// clientLog is the runs' Kafka clients' log (kafka.ClientLogEnv),
	// each line with the time and the run's process id.
	clientLog string
}

// env is the runs' environment: their clients' log.
func (fb *freezableKafka) env() string { return kafka.ClientLogEnv + "=" + fb.clientLog }

func startFreezableKafka(t *testing.T) *freezableKafka {
	t.Helper()
	base, err := os.ReadFile("../../scripts/kafka/log4j2.properties")
	if err != nil {
		t.Fatal(err)
	}
	log4j := filepath.Join(t.TempDir(), "log4j2.properties")
	debug := "\n# " + t.Name() + ": the transactions' steps\n"
	for i, l := range txnLoggers {
		debug += fmt.Sprintf("logger.txn%d.name = %s\nlogger.txn%d.level = debug\n", i, l, i)
	}
	if err := os.WriteFile(log4j, append(base, debug...), 0o644); err != nil {
		t.Fatal(err)
	}
	fb := &freezableKafka{clientLog: filepath.Join(t.TempDir(), "clients.log")}
	fb.brokers, fb.dir = startOwnKafkaEnv(t, []string{"KAFKA_LOG4J=" + log4j})
	pids, err := os.ReadFile(filepath.Join(fb.dir, "pids"))
	if err != nil {
		t.Fatal(err)
	}
	if fb.pid, err = strconv.Atoi(strings.Fields(strings.TrimSpace(string(pids)))[0]); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fb.thaw(t) })
	return fb
}

func (fb *freezableKafka) freeze(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(fb.pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	fb.frozen = true
}

func (fb *freezableKafka) thaw(t *testing.T) {
	if fb.frozen {
		if err := syscall.Kill(fb.pid, syscall.SIGCONT); err != nil {
			t.Errorf("SIGCONT to the broker: %v", err)
		}
		fb.frozen = false
	}
}

// runArgs are the exactly-once run of job: bounded, a checkpoint every
// 200 ms, cut short 3 s after a stop.
func (fb *freezableKafka) runArgs(job eosJob, dir string) []string {
	return []string{"run", "-rules", job.rules, "-brokers", fb.brokers, "-input-topic", job.topic, "-bounded",
		"-alerts-topic", job.topic + "-alerts", "-group", job.topic, "-state", filepath.Join(dir, "state"),
		"-checkpoint-interval", "200ms", "-checkpoint-timeout", "3s", "-progress", "1h"}
}

// stopFrozen stops run c with SIGTERM, the broker frozen: it must exit
// 0 saying it was cut short at its checkpoint timeout. Then the broker
// is thawed.
func (fb *freezableKafka) stopFrozen(t *testing.T, c *child) {
	t.Helper()
	stopped := time.Now()
	if err := syscall.Kill(c.pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("still running 30 s after SIGTERM (checkpoint timeout 3s) with the broker frozen:\n%s", c.out.String())
	}
	e := c.exit()
	fb.first = e.stderr
	t.Logf("stopped with the broker frozen: %s, %v after SIGTERM", e.describe(), time.Since(stopped).Round(time.Millisecond))
	fb.thaw(t)
	if log, err := os.ReadFile(fb.clientLog); err != nil || !strings.Contains(string(log), "ending transaction") {
		t.Errorf("the stopped run's Kafka clients logged no transaction's end into %s (%v): %.2000s", fb.clientLog, err, log)
	}
	if e.killed {
		t.Fatalf("the stopped run was killed:\n%s", e.stderr)
	}
	if e.code != 0 || !strings.Contains(e.stderr, "still not ended 3s later") {
		t.Errorf("the stopped run: %s, want exit 0 saying it was cut short after the checkpoint timeout\n%s", e.describe(), e.stderr)
	}
}

// resumedRE matches the line of a job resuming from a committed
// checkpoint (its local copy or the changelog).
var resumedRE = regexp.MustCompile(`resuming (from checkpoint [0-9]+ |partitions \[[0-9 ]+\] from the changelog)`)

// rerun runs the job again, the broker back, to the end of its input: it
// must resume from the stopped run's last committed checkpoint, and the
// alerts topic (read_committed) hold the backtest's alerts, each once.
func (fb *freezableKafka) rerun(t *testing.T, bin string, args []string, job eosJob) {
	t.Helper()
	// The transaction as the thawed broker holds it, and what its
	// partitions hold open, as the run starts (not waited for: the run
	// meets the broker as it comes back).
	conn := kafka.Conn{Brokers: []string{fb.brokers}}
	txnID, outputs := "cepheus-"+job.topic+"-0", []string{job.topic + "-alerts", job.topic + "-changelog"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	before := kafka.DescribeTxn(ctx, conn, txnID, outputs...)
	e := runChild(t, bin, args, "", 0, fb.env())
	if e.killed || e.code != 0 {
		t.Fatalf("the run after the broker came back: %s\n%s", e.describe(), e.stderr)
	}
	for l := range strings.Lines(fb.first) {
		if strings.Contains(l, "stopped at checkpoint") {
			t.Logf("the stopped run: %s", strings.TrimSpace(l))
		}
	}
	for l := range strings.Lines(e.stderr) {
		if strings.Contains(l, "restor") || strings.Contains(l, "resum") || strings.Contains(l, "left open") {
			t.Logf("the run after: %s", strings.TrimSpace(l))
		}
	}
	// The stopped run had committed (startCommitted): the run after
	// resumes from that, not from the start.
	if !resumedRE.MatchString(e.stderr) {
		t.Errorf("the run after the broker came back does not say it resumed from a committed checkpoint:\n%s", e.stderr)
	}
	alerts := job.topic + "-alerts"
	got := alertIDSet(t, consumeTopic(t, bin, fb.brokers, alerts))
	if d := job.want.diff(got); d != "" {
		t.Errorf("the alerts topic (read_committed) differs from the backtest: %s\n%s\nthe run stopped with the broker frozen:\n%s\nthe run after it:\n%s\nthe broker's log of the transactions:\n%s\nthe runs' Kafka clients' log of the producers:\n%s\nas the run after it started: %s\nafter it: %s", d, alertPlaces(t, fb.brokers, alerts, job.topic, job.topic, job.want, got), fb.first, e.stderr, txnLog(filepath.Join(fb.dir, "logs", "node1.log"), txnID), producerLog(fb.clientLog), before, kafka.DescribeTxn(ctx, conn, txnID, outputs...))
	}
}

// txnLoggers are the broker's loggers of transactions: the coordinator,
// the partitions' registration, and the group's transactional offsets.
var txnLoggers = []string{
	"kafka.coordinator.transaction",
	"org.apache.kafka.coordinator.transaction",
	"org.apache.kafka.server.transaction.AddPartitionsToTxnManager",
	"org.apache.kafka.coordinator.group.OffsetMetadataManager",
}

// txnLog returns the lines of a broker's log that txnLoggers wrote, that
// name the transactional id id, or that tell of an error (a produce's
// out-of-order sequence, say).
func txnLog(file, id string) string {
	return logLines(file, 400, 600, func(l string) bool {
		return strings.Contains(l, id) || strings.Contains(l, "] DEBUG ") || strings.Contains(l, "] ERROR ") ||
			strings.HasPrefix(l, "org.apache.kafka.common.errors.")
	})
}

// producerLog returns the lines of a clients' log (kafka.ClientLogEnv)
// of the producers and transactions.
func producerLog(file string) string {
	return logLines(file, 300, 400, func(l string) bool {
		return strings.Contains(l, "transaction") || strings.Contains(l, "producer") || strings.Contains(l, "epoch") || strings.Contains(l, "sequence")
	})
}

// logLines returns the lines of file that keep takes, at most n of them,
// each cut at width characters and indented, for a failure's message.
func logLines(file string, n, width int, keep func(string) bool) string {
	data, err := os.ReadFile(file)
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	kept := 0
	for l := range strings.Lines(string(data)) {
		if !keep(l) {
			continue
		}
		if kept++; kept <= n {
			b.WriteString("  " + strings.TrimRight(l[:min(len(l), width)], "\n") + "\n")
		}
	}
	if kept > n {
		fmt.Fprintf(&b, "  ... %d more lines\n", kept-n)
	}
	return b.String()
}

// startCommitted starts cepheus with args (a Kafka run), killed at the
// test's end if still running, and returns once it has committed its
// first transaction; env is added to its environment.
func startCommitted(t *testing.T, bin string, args []string, env ...string) *child {
	t.Helper()
	c := startChild(t, bin, args, "", env...)
	t.Cleanup(func() {
		select {
		case <-c.done:
		default:
			_ = syscall.Kill(-c.pid, syscall.SIGKILL)
			<-c.done
		}
	})
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(c.out.String(), "first transaction committed"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint after 30 s:\n%s", c.out.String())
		}
	}
	return c
}

// alertPlaces describes where the alerts of topic that got has beyond
// want sit (up to 10 of them): each copy's partition and offset, and the
// transaction it came in, told by the offsets (a transaction's commit
// marker takes an offset, so the records of one transaction are those
// between two gaps); then the group's committed offsets of the input. For
// a failure's message: which transactions of which run hold the copies.
func alertPlaces(t *testing.T, brokers, topic, group, input string, want, got multiset) string {
	t.Helper()
	var extra []string
	for id, n := range got {
		if n > want[id] {
			extra = append(extra, id)
		}
	}
	slices.Sort(extra)
	extra = extra[:min(len(extra), 10)]
	type place struct {
		p        int32
		off      int64
		txn      int   // of the partition, from 1
		from, to int64 // the transaction's offsets
		pid      int64 // the producer that wrote it, and its epoch
		epoch    int16
	}
	places := map[string][]place{}
	txns := map[int32][][2]int64{} // by partition: each transaction's first and last offset
	conn := kafka.Conn{Brokers: strings.Split(brokers, ",")}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	type rec struct {
		p     int32
		off   int64
		id    string
		pid   int64
		epoch int16
	}
	var recs []rec
	_, err := kafka.ReadRecords(ctx, conn, topic, nil, nil, func(p int32, r kafka.SourceRecord) error {
		var a struct {
			ID string `json:"alert_id"`
		}
		_ = json.Unmarshal(r.Value, &a)
		if ts := txns[p]; len(ts) == 0 || r.Offset > ts[len(ts)-1][1]+1 {
			txns[p] = append(ts, [2]int64{r.Offset, r.Offset})
		} else {
			ts[len(ts)-1][1] = r.Offset
		}
		recs = append(recs, rec{p, r.Offset, a.ID, r.ProducerID, r.ProducerEpoch})
		return nil
	})
	if err != nil {
		return fmt.Sprintf("(reading %s again: %v)", topic, err)
	}
	for _, r := range recs {
		if !slices.Contains(extra, r.id) {
			continue
		}
		for i, tx := range txns[r.p] {
			if r.off >= tx[0] && r.off <= tx[1] {
				places[r.id] = append(places[r.id], place{r.p, r.off, i + 1, tx[0], tx[1], r.pid, r.epoch})
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "where the copies are (transactions told by the offsets' gaps; the producer id and epoch that wrote each):")
	for _, id := range extra {
		fmt.Fprintf(&b, "\n  %.12s:", id)
		for _, pl := range places[id] {
			fmt.Fprintf(&b, " p%d@%d (transaction %d of %d, offsets %d-%d, producer %d epoch %d)", pl.p, pl.off, pl.txn, len(txns[pl.p]), pl.from, pl.to, pl.pid, pl.epoch)
		}
	}
	committed, err := kafka.GroupOffsets(ctx, conn, group, input)
	fmt.Fprintf(&b, "\ngroup %s's offsets of %s (err %v):", group, input, err)
	for _, p := range slices.Sorted(maps.Keys(committed)) {
		fmt.Fprintf(&b, " p%d=%d %q", p, committed[p].Offset, committed[p].Metadata)
	}
	// The batches as the brokers keep them, markers and aborted records
	// included: of each partition holding a copy, and of the group's
	// offsets partition those of the producers that wrote a copy.
	pids := map[int64]bool{}
	parts := map[int32]bool{}
	for _, ps := range places {
		for _, pl := range ps {
			pids[pl.pid], parts[pl.p] = true, true
		}
	}
	for _, p := range slices.Sorted(maps.Keys(parts)) {
		bs, err := kafka.LogBatches(ctx, conn, topic, p)
		fmt.Fprintf(&b, "\nthe batches of %s-%d (err %v):%s", topic, p, err, describeBatches(bs, nil))
	}
	if n, err := kafka.PartitionCount(ctx, conn, "__consumer_offsets"); err == nil {
		p := offsetsPartition(group, n)
		bs, err := kafka.LogBatches(ctx, conn, "__consumer_offsets", p)
		fmt.Fprintf(&b, "\nthe batches of producers %v in __consumer_offsets-%d (group %s's; err %v):%s", slices.Sorted(maps.Keys(pids)), p, group, err, describeBatches(bs, pids))
	}
	return b.String()
}

// describeBatches lists batches (of producers pids, all when nil) a line
// each, consecutive batches of records of one producer epoch on one line.
func describeBatches(bs []kafka.LogBatch, pids map[int64]bool) string {
	var b strings.Builder
	lines := 0
	for i := 0; i < len(bs); {
		f := bs[i]
		if pids != nil && !pids[f.ProducerID] {
			i++
			continue
		}
		j, n := i+1, f.Records
		for f.Marker == "" && j < len(bs) && bs[j].Marker == "" && bs[j].ProducerID == f.ProducerID && bs[j].ProducerEpoch == f.ProducerEpoch && bs[j].Transactional == f.Transactional {
			n += bs[j].Records
			j++
		}
		if lines++; lines <= 80 {
			l := f
			l.Last, l.Records = bs[j-1].Last, n
			fmt.Fprintf(&b, "\n  %v", l)
			if j-i > 1 {
				fmt.Fprintf(&b, " (%d batches)", j-i)
			}
		}
		i = j
	}
	if lines > 80 {
		fmt.Fprintf(&b, "\n  ... %d more lines", lines-80)
	}
	return b.String()
}

// offsetsPartition is the partition of __consumer_offsets (of n) that
// holds group's offsets: the absolute value of Java's String.hashCode of
// its name (0 for the lowest int) modulo n, as Kafka's Utils.abs.
func offsetsPartition(group string, n int) int32 {
	var h int32
	for _, c := range utf16.Encode([]rune(group)) {
		h = 31*h + int32(c)
	}
	switch {
	case h == math.MinInt32:
		h = 0
	case h < 0:
		h = -h
	}
	return int32(int(h) % n)
}

// TestOffsetsPartition checks offsetsPartition against Java's (the
// values printed by String.hashCode and Kafka's Utils.abs on Java 17).
func TestOffsetsPartition(t *testing.T) {
	for group, want := range map[string]int32{
		"hello":                          22,
		"polygenelubricants":             0, // its hash is the lowest int
		"eos-frozen-1796599733793160180": 33,
		"zzzzzzzzzz":                     36,
		"ünïcödé-group":                  15,
	} {
		if got := offsetsPartition(group, 50); got != want {
			t.Errorf("offsetsPartition(%q, 50) = %d, want %d", group, got, want)
		}
	}
}
