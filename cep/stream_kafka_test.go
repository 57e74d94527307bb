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
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/enrich"
	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/rules"
	"github.com/cepheus-cep/cepheus/runtime/kafka"
)

// kafkaBrokers returns the brokers of CEPHEUS_KAFKA_BROKERS. Unset, the
// test fails under CI (make test starts a broker) and skips elsewhere.
func kafkaBrokers(t *testing.T) []string {
	t.Helper()
	s := os.Getenv("CEPHEUS_KAFKA_BROKERS")
	if s == "" {
		if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
			t.Fatal("CEPHEUS_KAFKA_BROKERS is not set and CI is: the Kafka tests need a broker (make test starts one)")
		}
		t.Skip("no Kafka broker: make test starts one; or scripts/kafka.sh start and set CEPHEUS_KAFKA_BROKERS")
	}
	return strings.Split(s, ",")
}

// TestStreamKafkaInput produces an ordered input keyed by card into a
// topic of three partitions, runs the rules over it bounded, stopping at
// a checkpoint, and resumes with another parallelism from the offsets the
// checkpoint holds: the alerts committed are the backtest's of the input
// (the card rule sees one partition; the country rule all three).
func TestStreamKafkaInput(t *testing.T) {
	brokers := kafkaBrokers(t)
	var input strings.Builder
	x := uint64(11)
	next := func(m uint64) uint64 {
		x = x*6364136223846793005 + 1442695040888963407
		return (x >> 33) % m
	}
	base := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	types := []string{"auth", "auth", "capture"}
	countries := []string{"US", "FR", "DE"}
	for i := range 900 {
		fmt.Fprintf(&input, `{"ts":%q,"card":"c%d","type":%q,"amount":%d,"country":%q}`+"\n",
			base.Add(time.Duration(i)*7*time.Second).Format(time.RFC3339), next(6), types[next(3)], next(600), countries[next(3)])
	}
	input.WriteString("not json\n") // a dead letter, with its topic, partition and offset
	want, err := runEngine(t, input.String())
	if err != nil {
		t.Fatal(err)
	}
	if want.sum.Alerts < 20 || want.sum.Late != 0 {
		t.Fatalf("the input should give alerts and no late event: %+v", want.sum)
	}
	topic := fmt.Sprintf("stream-kafka-input-%d", time.Now().UnixNano())
	produceTopic(t, brokers, topic, 3, input.String())
	d := newStreamDirs(t)
	config := func(p int) StreamConfig {
		c := d.config("")
		// Small batches, so that a stop asked at a checkpoint comes in the
		// middle of the input.
		c.Kafka = &KafkaInput{Brokers: brokers, Topic: topic, Bounded: true, Start: kafka.FromEarliest, batchRecords: 20}
		c.CheckpointRecords, c.Parallelism = 100, p
		return c
	}
	cfg := config(1)
	cfg.hooks.afterCommit = func(id int64) bool { return id == 4 }
	res, err := streamEngine(t, engineRules).Stream(context.Background(), cfg)
	if err != nil || res.Finished || res.Records >= 800 {
		t.Fatalf("first run: %v, finished %v, %d records (want a stop at checkpoint 4, mid-input)", err, res != nil && res.Finished, res.Records)
	}
	res, err = streamEngine(t, engineRules).Stream(context.Background(), config(2))
	if err != nil || !res.Finished || res.Restored == 0 {
		t.Fatalf("second run: %v, finished %v, restored %d", err, res != nil && res.Finished, res.Restored)
	}
	if res.Records != 901 || res.Dead != 1 || res.Late != 0 {
		t.Errorf("%d records, %d dead, %d late; want 901, 1, 0", res.Records, res.Dead, res.Late)
	}
	ids := func(lines []string) []string {
		var out []string
		for _, l := range lines {
			if i := strings.Index(l, `"alert_id":"`); i >= 0 {
				out = append(out, l[i+12:i+12+32])
			}
		}
		slices.Sort(out)
		return out
	}
	if got, w := ids(committedLines(t, d.alerts)), ids(sortedLines(want.alerts)); !slices.Equal(got, w) {
		t.Errorf("%d alerts committed, the backtest has %d (or they differ)", len(got), len(w))
	}
	dead := committedLines(t, d.dead)
	if len(dead) != 1 || !strings.Contains(dead[0], `"file":"`+topic+"-") || !strings.Contains(dead[0], `"offset":`) {
		t.Errorf("dead letters %q: want one naming the topic's partition and the offset", dead)
	}
	// A bounded run on the finished state reads nothing.
	res, err = streamEngine(t, engineRules).Stream(context.Background(), config(3))
	if err != nil || !res.AlreadyFinished {
		t.Errorf("third run: %v, already finished %v", err, res != nil && res.AlreadyFinished)
	}
}

// TestStreamKafkaTransactional runs the card rules over a topic with the
// alerts and dead letters in topics (one transaction per checkpoint),
// with changelog records cut into many chunks (a tiny record limit),
// stops at a checkpoint, deletes the state directory and resumes with
// another parallelism: the restore comes from the changelog alone, and
// the committed alerts equal an uninterrupted run's with file outputs.
func TestStreamKafkaTransactional(t *testing.T) {
	brokers := kafkaBrokers(t)
	old := maxChangelogRecord
	maxChangelogRecord = 120
	t.Cleanup(func() { maxChangelogRecord = old })
	input := engineInput(700)
	topic := fmt.Sprintf("stream-kafka-txn-%d", time.Now().UnixNano())
	produceTopic(t, brokers, topic, 3, input)
	// The reference: an uninterrupted run over the topic with file outputs
	// (the input is out of order, so the partitions' order matters).
	d := newStreamDirs(t)
	ref := d.config("")
	ref.Kafka = &KafkaInput{Brokers: brokers, Topic: topic, Bounded: true, batchRecords: 20}
	res, err := streamEngine(t, backtestRules).Stream(context.Background(), ref)
	if err != nil || !res.Finished || res.Alerts < 10 {
		t.Fatalf("the run over the topic with file outputs: %v, %+v", err, res)
	}
	want := alertIDsOf(committedLines(t, d.alerts))
	state := filepath.Join(t.TempDir(), "state")
	config := func(p int) StreamConfig {
		return StreamConfig{
			Kafka: &KafkaInput{Brokers: brokers, Topic: topic, Bounded: true, batchRecords: 20,
				AlertsTopic: topic + "-alerts", DeadTopic: topic + "-dead", Group: topic},
			StateDir: state, CheckpointInterval: 10 * time.Second, CheckpointRecords: 100, Parallelism: p,
		}
	}
	cfg := config(1)
	cfg.hooks.afterCommit = func(id int64) bool { return id == 3 }
	res, err = streamEngine(t, backtestRules).Stream(context.Background(), cfg)
	if err != nil || res.Finished {
		t.Fatalf("first run: %v, finished %v (want a stop at checkpoint 3)", err, res != nil && res.Finished)
	}
	if err := os.RemoveAll(state); err != nil {
		t.Fatal(err)
	}
	res, err = streamEngine(t, backtestRules).Stream(context.Background(), config(2))
	if err != nil || !res.Finished || res.Restored < 3 {
		t.Fatalf("second run: %v, %+v (want it finished, restored from checkpoint 3 or later, from the changelog)", err, res)
	}
	var got []string
	read := func(topic string) []string {
		return topicValues(t, brokers, topic)
	}
	got = alertIDsOf(read(topic + "-alerts"))
	if !slices.Equal(got, want) {
		t.Errorf("%d alerts in the topic (%d distinct), %d over the file (or they differ)", len(got), len(slices.Compact(slices.Clone(got))), len(want))
	}
	if dead := read(topic + "-dead"); len(dead) != strings.Count(input, "not json") {
		t.Errorf("%d dead letters in the topic, want %d", len(dead), strings.Count(input, "not json"))
	}
	// A rule keyed by another field than the record key (country) is
	// repartitioned: stopped at a checkpoint and resumed, the job commits
	// the alerts of a run with file outputs (over events in order: the
	// repartition partitions' watermarks hold the job's back, so fewer
	// events would be late than in the run with file outputs).
	topic = fmt.Sprintf("stream-kafka-rep-%d", time.Now().UnixNano())
	produceTopic(t, brokers, topic, 3, inOrderInput(700))
	d2 := newStreamDirs(t)
	ref2 := d2.config("")
	ref2.Kafka = &KafkaInput{Brokers: brokers, Topic: topic, Bounded: true, batchRecords: 20}
	if res, err := streamEngine(t, engineRules).Stream(context.Background(), ref2); err != nil || !res.Finished {
		t.Fatalf("the run of the country rules with file outputs: %v, %+v", err, res)
	}
	want2 := alertIDsOf(committedLines(t, d2.alerts))
	if n := strings.Count(strings.Join(committedLines(t, d2.alerts), "\n"), `"rule":"two_big_in_country"`); n == 0 {
		t.Fatalf("the run with file outputs has no alert of two_big_in_country: nothing to tell")
	}
	state2 := filepath.Join(t.TempDir(), "state")
	config2 := func(p int) StreamConfig {
		return StreamConfig{
			Kafka: &KafkaInput{Brokers: brokers, Topic: topic, Bounded: true, batchRecords: 20,
				AlertsTopic: topic + "-rep-alerts", Group: topic + "-rep"},
			StateDir: state2, CheckpointInterval: 10 * time.Second, CheckpointRecords: 100, Parallelism: p,
		}
	}
	cfg2 := config2(2)
	cfg2.hooks.afterCommit = func(id int64) bool { return id == 3 }
	cfg2.Monitor = NewStreamMonitor()
	if res, err := streamEngine(t, engineRules).Stream(context.Background(), cfg2); err != nil || res.Finished {
		t.Fatalf("repartitioned, first run: %v, finished %v (want a stop at checkpoint 3)", err, res != nil && res.Finished)
	}
	// The monitor saw the transactions and each partition's lag, the
	// repartition topic's too.
	if sn := cfg2.Monitor.Snapshot(); sn.KafkaCommits < 3 || sn.KafkaLag[topic+"-0"] <= 0 || sn.KafkaLag[topic+"-rep-repartition-country-0"] < 0 || len(sn.KafkaLag) != 6 {
		t.Errorf("the monitor: %d commits, lag %v; want 3 or more, and a lag for the 3 input and 3 repartition partitions, input partition 0 behind", sn.KafkaCommits, sn.KafkaLag)
	}
	if res, err := streamEngine(t, engineRules).Stream(context.Background(), config2(1)); err != nil || !res.Finished {
		t.Fatalf("repartitioned, second run: %v, %+v", err, res)
	}
	if got := alertIDsOf(read(topic + "-rep-alerts")); !slices.Equal(got, want2) {
		t.Errorf("repartitioned: %d alerts in the topic (%d distinct), %d with file outputs (or they differ)", len(got), len(slices.Compact(slices.Clone(got))), len(want2))
		for _, l := range read(topic + "-rep-alerts") {
			if !slices.Contains(want2, alertIDsOf([]string{l})[0]) {
				t.Logf("not with file outputs: %.300s", l)
			}
		}
	}
}

// inOrderInput is engineInput's events in time order (none late).
func inOrderInput(n int) string {
	var b strings.Builder
	for i, l := range strings.Split(strings.TrimSpace(engineInput(n)), "\n") {
		if !strings.HasPrefix(l, "{") {
			continue
		}
		ts := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC).Add(time.Duration(i) * 7 * time.Second)
		l = l[:strings.Index(l, `"ts":"`)+6] + ts.Format(time.RFC3339) + l[strings.Index(l, `","card"`):]
		b.WriteString(l + "\n")
	}
	return b.String()
}

// alertIDsOf returns the sorted alert ids of alert lines.
func alertIDsOf(lines []string) []string {
	var out []string
	for _, l := range lines {
		if i := strings.Index(l, `"alert_id":"`); i >= 0 {
			out = append(out, l[i+12:i+12+32])
		}
	}
	slices.Sort(out)
	return out
}

// TestStreamKafkaIdleCaughtUp runs an unbounded topic of two partitions
// whose events all sit in one (one card): the empty partition is caught
// up to its end, so after the idle timeout it stops holding the watermark
// back and the alerts come, as they would from the full partition alone.
// (That a quiet partition behind its end is not idle is
// runtime.TestPartitionWatermarksIdleWhenCaughtUp.)
func TestStreamKafkaIdleCaughtUp(t *testing.T) {
	brokers := kafkaBrokers(t)
	var input strings.Builder
	base := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	for i := range 200 {
		country, amount := "US", 50
		if i%10 == 0 {
			amount = 500
		} else if i%10 == 1 {
			country = "FR"
		}
		fmt.Fprintf(&input, `{"ts":%q,"card":"c1","type":"auth","amount":%d,"country":%q}`+"\n",
			base.Add(time.Duration(i)*time.Second).Format(time.RFC3339), amount, country)
	}
	topic := fmt.Sprintf("stream-kafka-idle-%d", time.Now().UnixNano())
	produceTopic(t, brokers, topic, 2, input.String())
	d := newStreamDirs(t)
	cfg := d.config("")
	cfg.Kafka = &KafkaInput{Brokers: brokers, Topic: topic}
	cfg.IdleTimeout = 200 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	committed := make(chan bool, 1)
	go func() {
		// Stop once the alerts of the input are committed (a checkpoint's
		// sinks commit after it: a quiet job takes no checkpoint after).
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if len(committedLines(t, d.alerts)) >= 19 {
				committed <- true
				cancel()
				return
			}
		}
		committed <- false
		cancel()
	}()
	res, err := streamEngine(t, backtestRules).Stream(ctx, cfg)
	if !<-committed {
		t.Fatalf("no alerts after 30s: the empty partition holds the watermark back (%v)", err)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("the job, cancelled: %v", err)
	}
	// big_then_foreign matches at seconds 1, 11, ..., 191; the watermark
	// (the last event, 199 s, minus the 10 s bound) releases 19.
	if n := len(committedLines(t, d.alerts)); n < 19 || res == nil {
		t.Fatalf("%d alerts committed (%v), want the 19 big_then_foreign ones the watermark releases at least", n, err)
	}
}

// TestStreamKafkaQuiet: a transactional job over an unbounded topic
// (repartitioned: the country rule) commits no transaction while nothing
// new comes, however many intervals pass, and commits again once records
// come.
func TestStreamKafkaQuiet(t *testing.T) {
	brokers := kafkaBrokers(t)
	input := strings.SplitAfter(inOrderInput(200), "\n")
	first, rest := strings.Join(input[:100], ""), strings.Join(input[100:], "")
	topic := fmt.Sprintf("stream-kafka-quiet-%d", time.Now().UnixNano())
	produceTopic(t, brokers, topic, 2, first)
	cfg := StreamConfig{
		Kafka:    &KafkaInput{Brokers: brokers, Topic: topic, AlertsTopic: topic + "-alerts", Group: topic},
		StateDir: filepath.Join(t.TempDir(), "state"), CheckpointInterval: 20 * time.Millisecond, Parallelism: 2,
		Monitor: NewStreamMonitor(),
	}
	var logMu sync.Mutex
	var logs []string
	cfg.Logf = func(format string, args ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		logs = append(logs, fmt.Sprintf(format, args...))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := streamEngine(t, engineRules).Stream(ctx, cfg)
		done <- err
	}()
	waitFor := func(what string, cond func(MonitorSnapshot) bool) MonitorSnapshot {
		t.Helper()
		return waitSnapshot(t, cfg.Monitor, what, func(sn MonitorSnapshot) bool {
			select {
			case err := <-done:
				t.Fatalf("the job ended: %v", err)
			default:
			}
			return cond(sn)
		})
	}
	n := int64(strings.Count(first, "\n"))
	quiet := waitFor("all read and a checkpoint skipped", func(sn MonitorSnapshot) bool {
		return sn.Progress.Records == n && sn.Progress.Skipped > 0 && sn.KafkaCommits > 0
	})
	// The job settles: its own repartition records, and the positions past
	// its transactions' markers, come back through the repartition
	// partitions after their commit, and are checkpointed in turn. Then ten
	// intervals in a row are skipped.
	for deadline := time.Now().Add(60 * time.Second); ; {
		next := waitFor("skipping going on", func(sn MonitorSnapshot) bool { return sn.Progress.Skipped >= quiet.Progress.Skipped+10 })
		if next.KafkaCommits == quiet.KafkaCommits {
			quiet = next
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s with nothing new the job still commits: %d commits", next.KafkaCommits)
		}
		quiet = next
	}
	later := waitFor("skipping going on", func(sn MonitorSnapshot) bool { return sn.Progress.Skipped >= quiet.Progress.Skipped+25 })
	if later.KafkaCommits != quiet.KafkaCommits {
		t.Fatalf("%d transactions committed in %d intervals with nothing new", later.KafkaCommits-quiet.KafkaCommits, later.Progress.Skipped-quiet.Progress.Skipped)
	}
	// Caught up, the log says that checkpoints wait (a Kafka job says it
	// only once its partitions are caught up).
	logMu.Lock()
	said := slices.ContainsFunc(logs, func(l string) bool { return strings.HasPrefix(l, "nothing new since checkpoint ") })
	logMu.Unlock()
	if !said {
		t.Errorf("the log of a job caught up and quiet does not say that checkpoints wait: %q", logs)
	}
	produceTopic(t, brokers, topic, 2, rest)
	all := int64(len(input) - 1)
	read := waitFor("the new records read", func(sn MonitorSnapshot) bool { return sn.Progress.Records == all })
	waitFor("a transaction after the new records", func(sn MonitorSnapshot) bool { return sn.KafkaCommits > max(read.KafkaCommits, later.KafkaCommits) })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the job, cancelled: %v", err)
	}
}

// TestStreamKafkaFencedRestart: a checkpoint whose transaction aborts
// (injected at checkpoint 2) makes Stream start the job again from the
// last committed checkpoint, rolling back what it derived from the input
// since; a job fenced by a newer producer of its transactional id (a
// zombie's successor) stops with ErrFenced and is not restarted, and the
// next run goes on from the last committed checkpoint. Both times the
// alerts committed equal an uninterrupted run's: nothing of an aborted
// transaction is visible, nothing is lost.
func TestStreamKafkaFencedRestart(t *testing.T) {
	brokers := kafkaBrokers(t)
	input := engineInput(700)
	topic := fmt.Sprintf("stream-kafka-fenced-%d", time.Now().UnixNano())
	produceTopic(t, brokers, topic, 3, input)
	d := newStreamDirs(t)
	ref := d.config("")
	ref.Kafka = &KafkaInput{Brokers: brokers, Topic: topic, Bounded: true, batchRecords: 20}
	if res, err := streamEngine(t, backtestRules).Stream(context.Background(), ref); err != nil || !res.Finished {
		t.Fatalf("the reference run: %v", err)
	}
	want := alertIDsOf(committedLines(t, d.alerts))
	config := func(name string, logs *[]string) StreamConfig {
		return StreamConfig{
			Kafka: &KafkaInput{Brokers: brokers, Topic: topic, Bounded: true, batchRecords: 20,
				AlertsTopic: topic + "-" + name + "-alerts", Group: topic + "-" + name},
			StateDir: filepath.Join(t.TempDir(), "state"), CheckpointInterval: 10 * time.Second, CheckpointRecords: 100, Parallelism: 2,
			Logf: func(format string, args ...any) { *logs = append(*logs, fmt.Sprintf(format, args...)) },
		}
	}
	committed := func(name string) []string {
		return alertIDsOf(topicValues(t, brokers, topic+"-"+name+"-alerts"))
	}

	t.Run("aborted", func(t *testing.T) {
		var logs []string
		cfg := config("aborted", &logs)
		failed := false
		cfg.hooks.failCommit = func(id int64) error {
			if id == 2 && !failed {
				failed = true
				return errors.New("injected")
			}
			return nil
		}
		res, err := streamEngine(t, backtestRules).Stream(context.Background(), cfg)
		if err != nil || !res.Finished || !failed {
			t.Fatalf("the run: %v, injected %v (logs %q)", err, failed, logs)
		}
		restarted := false
		for _, l := range logs {
			restarted = restarted || strings.Contains(l, "restarting from the last committed checkpoint")
		}
		if !restarted {
			t.Fatalf("no restart after the aborted transaction: logs %q", logs)
		}
		if got := committed("aborted"); !slices.Equal(got, want) {
			t.Errorf("%d alerts committed, the reference has %d (or they differ)", len(got), len(want))
		}
	})

	t.Run("fenced", func(t *testing.T) {
		var logs []string
		cfg := config("fenced", &logs)
		fenced := false
		cfg.hooks.afterCommit = func(id int64) bool {
			if id == 2 && !fenced {
				fenced = true
				z, err := kafka.NewTxn(context.Background(), kafka.TxnConfig{Brokers: brokers, TransactionalID: "cepheus-" + topic + "-fenced-0", Group: topic + "-fenced"})
				if err != nil {
					t.Error(err)
					return false
				}
				z.Close()
			}
			return false
		}
		res, err := streamEngine(t, backtestRules).Stream(context.Background(), cfg)
		if !errors.Is(err, ErrFenced) || !errors.Is(err, ErrTransaction) || res == nil || res.Finished {
			t.Fatalf("the fenced run: %v, want ErrFenced and no restart (logs %q)", err, logs)
		}
		for _, l := range logs {
			if strings.Contains(l, "restarting") {
				t.Fatalf("a fenced job restarted: %q", l)
			}
		}
		cfg.hooks.afterCommit = nil
		res, err = streamEngine(t, backtestRules).Stream(context.Background(), cfg)
		if err != nil || !res.Finished || res.Restored < 2 {
			t.Fatalf("the next run: %v, %+v (want it to resume from checkpoint 2 or later)", err, res)
		}
		if got := committed("fenced"); !slices.Equal(got, want) {
			t.Errorf("%d alerts committed, the reference has %d (or they differ)", len(got), len(want))
		}
	})
}

// TestStreamKafkaForeignChangelog: a fresh start (the group has no
// offsets) on a changelog that holds committed state of another job is
// refused: that state would come back in a later restore.
func TestStreamKafkaForeignChangelog(t *testing.T) {
	brokers := kafkaBrokers(t)
	input := engineInput(100)
	topic := fmt.Sprintf("stream-kafka-foreign-%d", time.Now().UnixNano())
	produceTopic(t, brokers, topic, 2, input)
	config := func(group string) StreamConfig {
		return StreamConfig{
			Kafka: &KafkaInput{Brokers: brokers, Topic: topic, Bounded: true, AlertsTopic: topic + "-alerts",
				Group: group, ChangelogTopic: topic + "-changelog"},
			StateDir: filepath.Join(t.TempDir(), "state"), Parallelism: 1,
		}
	}
	if res, err := streamEngine(t, backtestRules).Stream(context.Background(), config(topic+"-a")); err != nil || !res.Finished {
		t.Fatalf("the first job: %v", err)
	}
	_, err := streamEngine(t, backtestRules).Stream(context.Background(), config(topic+"-b"))
	if err == nil || !strings.Contains(err.Error(), "holds committed state") {
		t.Fatalf("a second group on the first one's changelog: %v, want a refusal", err)
	}
}

// produceTopic writes the JSON lines of input into topic (created with
// partitions partitions), keyed by the field card.
func produceTopic(t *testing.T, brokers []string, topic string, partitions int, input string) {
	t.Helper()
	if _, err := KafkaProduce(context.Background(), KafkaProduceConfig{
		Brokers: brokers, Topic: topic, Partitions: partitions, KeyField: "card",
	}, strings.NewReader(input)); err != nil {
		t.Fatal(err)
	}
}

// topicValues returns the values of topic's committed records.
func topicValues(t *testing.T, brokers []string, topic string) []string {
	t.Helper()
	var lines []string
	if err := kafka.ReadTopic(context.Background(), kafka.Conn{Brokers: brokers}, topic, func(_ int32, _, v []byte) error {
		lines = append(lines, string(v))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return lines
}

// TestStreamKafkaRepartitionedLookups: a rule keyed by another field than
// the record key reads a lookup; its events reach it through the
// repartition topic as their input records with what the lookup gave
// them at the input: the transactional job's alerts are those of a run
// with file outputs, line for line (the matched events carry the
// lookup's fields).
func TestStreamKafkaRepartitionedLookups(t *testing.T) {
	brokers := kafkaBrokers(t)
	rules := backtestRules + `
lookup holder {
  key card
  fields {
    tier: string default "none"
  }
}

rule gold_twice_in_country {
  severity low
  key country
  pattern {
    begin a where amount > 300 && holder.tier == "gold"
    followedBy b where amount > 300 && holder.tier == "gold"
    within 5m
  }
}
`
	rs, err := CompileRuleset("lk.cep", []byte(rules))
	if err != nil {
		t.Fatal(err)
	}
	spec, err := lookupSpec(rs, "holder")
	if err != nil {
		t.Fatal(err)
	}
	src := enrich.NewMemSource(spec, map[string][]event.Value{
		"c0": {event.String("gold")}, "c1": {event.String("gold")}, "c2": {event.String("silver")}, "c3": {event.String("gold")},
	})
	engine := func() *Engine {
		e, err := New(WithRuleset(rs), WithOutOfOrderness(10*time.Second), WithWatermarkEvery(3),
			WithLookups(map[string]LookupSource{"holder": src}, LookupOptions{}))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	topic := fmt.Sprintf("stream-kafka-replk-%d", time.Now().UnixNano())
	produceTopic(t, brokers, topic, 3, inOrderInput(700))
	d := newStreamDirs(t)
	ref := d.config("")
	ref.Kafka = &KafkaInput{Brokers: brokers, Topic: topic, Bounded: true, batchRecords: 20}
	if res, err := engine().Stream(context.Background(), ref); err != nil || !res.Finished {
		t.Fatalf("the run with file outputs: %v, %+v", err, res)
	}
	want := committedLines(t, d.alerts)
	for i := range want {
		want[i] = strings.TrimRight(want[i], "\n")
	}
	if n := strings.Count(strings.Join(want, "\n"), `"rule":"gold_twice_in_country"`); n == 0 {
		t.Fatalf("the run with file outputs has no alert of gold_twice_in_country: nothing to tell")
	}
	slices.Sort(want)
	cfg := StreamConfig{
		Kafka: &KafkaInput{Brokers: brokers, Topic: topic, Bounded: true, batchRecords: 20,
			AlertsTopic: topic + "-alerts", Group: topic + "-g"},
		StateDir: filepath.Join(t.TempDir(), "state"), CheckpointInterval: 10 * time.Second, CheckpointRecords: 100, Parallelism: 2,
	}
	if res, err := engine().Stream(context.Background(), cfg); err != nil || !res.Finished {
		t.Fatalf("the transactional run: %v, %+v", err, res)
	}
	got := topicValues(t, brokers, topic+"-alerts")
	for i := range got {
		got[i] = strings.TrimRight(got[i], "\n")
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("%d alerts in the topic, %d with file outputs, or they differ", len(got), len(want))
		for _, l := range got {
			if !slices.Contains(want, l) {
				t.Logf("not with file outputs: %s", l)
				id := alertIDsOf([]string{l})[0]
				for _, w := range want {
					if strings.Contains(w, id) {
						t.Logf("with file outputs:     %s", w)
					}
				}
				break
			}
		}
	}
}

// TestStreamKafkaRepartitionPurged: the records of the repartition
// topics that the group's committed offsets are past are deleted, so
// that a long-running job's repartition topics (retention unlimited) do
// not keep a copy of every event it read: after a bounded run each
// repartition partition starts where the group's offsets are, at its end.
func TestStreamKafkaRepartitionPurged(t *testing.T) {
	brokers := kafkaBrokers(t)
	rs, err := CompileRuleset("rp.cep", []byte(backtestRules+`
rule big_twice_in_country {
  severity low
  key country
  pattern {
    begin a where amount > 300
    followedBy b where amount > 300
    within 5m
  }
}
`))
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(WithRuleset(rs), WithOutOfOrderness(10*time.Second), WithWatermarkEvery(3))
	if err != nil {
		t.Fatal(err)
	}
	topic := fmt.Sprintf("stream-kafka-purge-%d", time.Now().UnixNano())
	produceTopic(t, brokers, topic, 3, inOrderInput(700))
	group := topic + "-g"
	cfg := StreamConfig{
		Kafka: &KafkaInput{Brokers: brokers, Topic: topic, Bounded: true, batchRecords: 20,
			AlertsTopic: topic + "-alerts", Group: group},
		StateDir: filepath.Join(t.TempDir(), "state"), CheckpointInterval: 10 * time.Second, CheckpointRecords: 100, Parallelism: 2,
	}
	if res, err := e.Stream(context.Background(), cfg); err != nil || !res.Finished {
		t.Fatalf("the transactional run: %v, %+v", err, res)
	}
	rep := repartitionTopic(group, []string{"country"})
	conn := kafka.Conn{Brokers: brokers}
	ends, err := kafka.EndOffsets(context.Background(), conn, rep)
	if err != nil {
		t.Fatal(err)
	}
	starts, err := kafka.StartOffsets(context.Background(), conn, rep)
	if err != nil {
		t.Fatal(err)
	}
	written := int64(0)
	for p, end := range ends {
		written += end
		if starts[p] != end {
			t.Errorf("partition %d of %s starts at offset %d, its end and the group's offset are %d: the records read are not deleted", p, rep, starts[p], end)
		}
	}
	if written == 0 {
		t.Fatalf("nothing was written to %s: nothing to tell", rep)
	}
}

// changingSource is a lookup source of one string field whose answers
// change: the n-th fetch of key K answers "K#n", or fails when fails(K,
// n). It counts each key's fetches.
type changingSource struct {
	fails   func(key string, n int) bool
	mu      sync.Mutex
	fetched map[string]int
}

func (s *changingSource) Fetch(_ context.Context, keys []string) ([][]event.Value, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([][]event.Value, len(keys))
	var err error
	for i, k := range keys {
		s.fetched[k]++
		n := s.fetched[k]
		if s.fails(k, n) {
			err = fmt.Errorf("key %s: fetch %d fails", k, n)
		}
		out[i] = []event.Value{event.String(fmt.Sprintf("%s#%d", k, n))}
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// newChangingSource returns a changingSource failing as fails says.
func newChangingSource(fails func(key string, n int) bool) *changingSource {
	return &changingSource{fails: fails, fetched: map[string]int{}}
}

func (s *changingSource) Close() error   { return nil }
func (s *changingSource) String() string { return "changing" }

// enrichedOnceRules is a ruleset of a lookup keyed by the events' id
// (failing open or closed: policy) and rules of three key
// specifications: card (the record key), country, card and country.
func enrichedOnceRules(t *testing.T, policy string) *rules.Ruleset {
	t.Helper()
	rs, err := CompileRuleset("rl.cep", []byte(`
ruleset rl
event time ts

lookup profile {
  key id
  fields {
    tag: string default "none"
  }
  on failure `+policy+`
}

rule card_pair {
  severity low
  key card
  pattern {
    begin a where amount > 300
    followedBy b where amount > 300
    within 5m
  }
}

rule country_pair {
  severity low
  key country
  pattern {
    begin a where amount > 400
    followedBy b where amount > 400
    within 5m
  }
}

rule card_country_pair {
  severity low
  key card, country
  pattern {
    begin a where amount > 200
    followedBy b where amount > 200
    within 10m
  }
}
`))
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// enrichedOnceEngine is an engine of rs whose lookup is src, looked up an
// event at a time, without a cache.
func enrichedOnceEngine(t *testing.T, rs *rules.Ruleset, src LookupSource) *Engine {
	t.Helper()
	e, err := New(WithRuleset(rs), WithOutOfOrderness(10*time.Second), WithWatermarkEvery(3),
		WithLookups(map[string]LookupSource{"profile": src}, LookupOptions{Batch: 1, CacheSize: -1}))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// inputRecord is where an input record is: partition and offset, and its
// value.
type inputRecord struct {
	p      int32
	offset int64
	data   string
}

// produceIDEvents produces n events in time order, each with an id
// (e0, e1, ...), into a new topic of three partitions keyed by card, and
// returns the topic and where each record is, by id (the producer is not
// transactional: offsets follow the records).
func produceIDEvents(t *testing.T, brokers []string, name string, n int) (string, map[string]inputRecord) {
	t.Helper()
	var input strings.Builder
	base := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	x := uint64(7)
	next := func(m uint64) uint64 {
		x = x*6364136223846793005 + 1442695040888963407
		return (x >> 33) % m
	}
	countries := []string{"US", "FR", "DE"}
	for i := range n {
		fmt.Fprintf(&input, `{"ts":%q,"id":"e%d","card":"c%d","amount":%d,"country":%q}`+"\n",
			base.Add(time.Duration(i)*7*time.Second).Format(time.RFC3339), i, next(6), next(600), countries[next(3)])
	}
	topic := fmt.Sprintf("%s-%d", name, time.Now().UnixNano())
	produceTopic(t, brokers, topic, 3, input.String())
	records := map[string]inputRecord{}
	offsets := map[int32]int64{}
	if err := kafka.ReadTopic(context.Background(), kafka.Conn{Brokers: brokers}, topic, func(p int32, _, v []byte) error {
		var r struct{ ID string }
		if err := json.Unmarshal(v, &r); err != nil {
			return err
		}
		records[r.ID] = inputRecord{p, offsets[p], string(v)}
		offsets[p]++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return topic, records
}

// checkInputDeadLetters checks that each dead letter names its input
// record (the partition of topic, offset and line) and holds its JSON,
// and returns the ids of their events.
func checkInputDeadLetters(t *testing.T, dead []string, topic string, records map[string]inputRecord) []string {
	t.Helper()
	var ids []string
	for _, l := range dead {
		var dl struct {
			File         string
			Line, Offset int64
			Data         string
		}
		if err := json.Unmarshal([]byte(l), &dl); err != nil {
			t.Fatalf("dead letter %q: %v", l, err)
		}
		var r struct{ ID string }
		if err := json.Unmarshal([]byte(dl.Data), &r); err != nil {
			t.Errorf("a dead letter's data is not its input record: %q", l)
			continue
		}
		ids = append(ids, r.ID)
		rec := records[r.ID]
		if dl.File != partitionName(topic, rec.p) || dl.Offset != rec.offset || dl.Line != rec.offset+1 || dl.Data != rec.data {
			t.Errorf("dead letter %s, want file %s, offset %d, line %d and data %s", strings.TrimSpace(l), partitionName(topic, rec.p), rec.offset, rec.offset+1, rec.data)
		}
	}
	slices.Sort(ids)
	return ids
}

// trimmedSorted returns lines without their line ends, sorted.
func trimmedSorted(lines []string) []string {
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], "\n")
	}
	slices.Sort(lines)
	return lines
}

// idFailing says which events' lookups fail, by id: one in five.
func idFailing(id string) bool {
	i, _ := strconv.Atoi(strings.TrimPrefix(id, "e"))
	return i%5 == 0
}

// TestStreamKafkaRepartitionedEnrichedOnce: with rules of three key
// specifications (card, the record key; country; card and country, both
// repartitioned), each event is looked up once, at its input, and its
// repartitioned copies carry what the lookup gave it. The source answers
// each fetch of a key differently and fails the first fetch of some keys
// (every later one too, failing closed): each key is fetched once; an
// event shows the same value in every alert that holds it, whatever its
// rule's key; failing closed, each failed event is dead-lettered once, as
// its input record (partition, offset, JSON). The transactional job's
// alerts and dead letters are those of a run with file outputs (no
// repartitioning), line for line.
func TestStreamKafkaRepartitionedEnrichedOnce(t *testing.T) {
	brokers := kafkaBrokers(t)
	const n = 600
	topic, records := produceIDEvents(t, brokers, "stream-kafka-enrich1", n)
	for _, policy := range []string{"open", "closed"} {
		t.Run(policy, func(t *testing.T) {
			closed := policy == "closed"
			rs := enrichedOnceRules(t, policy)
			// The first fetch of a failing key fails; failing closed, every
			// later fetch too (a second lookup would dead-letter the event
			// again), failing open it answers anew (another value).
			fails := func(key string, n int) bool { return n == 1 && idFailing(key) || closed && n > 1 }
			d := newStreamDirs(t)
			ref := d.config("")
			ref.Kafka = &KafkaInput{Brokers: brokers, Topic: topic, Bounded: true, batchRecords: 20}
			if res, err := enrichedOnceEngine(t, rs, newChangingSource(fails)).Stream(context.Background(), ref); err != nil || !res.Finished {
				t.Fatalf("the run with file outputs: %v, %+v", err, res)
			}
			wantAlerts, wantDead := trimmedSorted(committedLines(t, d.alerts)), trimmedSorted(committedLines(t, d.dead))
			src := newChangingSource(fails)
			cfg := StreamConfig{
				Kafka: &KafkaInput{Brokers: brokers, Topic: topic, Bounded: true, batchRecords: 20,
					AlertsTopic: topic + "-" + policy + "-alerts", DeadTopic: topic + "-" + policy + "-dead", Group: topic + "-" + policy},
				StateDir: filepath.Join(t.TempDir(), "state"), CheckpointInterval: 10 * time.Second, CheckpointRecords: 100, Parallelism: 2,
			}
			res, err := enrichedOnceEngine(t, rs, src).Stream(context.Background(), cfg)
			if err != nil || !res.Finished {
				t.Fatalf("the transactional run: %v, %+v", err, res)
			}
			// Each event's key looked up once.
			if len(src.fetched) != n {
				t.Errorf("%d keys looked up, want the %d events'", len(src.fetched), n)
			}
			again := 0
			for _, c := range src.fetched {
				if c != 1 {
					again++
				}
			}
			if again > 0 {
				t.Errorf("%d keys looked up more than once (looked up again where repartitioned)", again)
			}
			// An event shows the value of its one lookup in every alert.
			alerts := trimmedSorted(topicValues(t, brokers, cfg.Kafka.AlertsTopic))
			tags := map[string]string{}
			rulesSeen := map[string]bool{}
			for _, l := range alerts {
				var a struct {
					Rule    string
					Matched map[string][]map[string]any
				}
				if err := json.Unmarshal([]byte(l), &a); err != nil {
					t.Fatalf("alert %q: %v", l, err)
				}
				rulesSeen[a.Rule] = true
				for _, evs := range a.Matched {
					for _, ev := range evs {
						id, tag := ev["id"].(string), ev["profile.tag"].(string)
						want := id + "#1"
						if idFailing(id) {
							want = "none"
						}
						if tag != want {
							t.Errorf("event %s has tag %q in an alert of %s, want %q (its lookup's)", id, tag, a.Rule, want)
						}
						if prev, ok := tags[id]; ok && prev != tag {
							t.Errorf("event %s has tag %q in an alert of %s, %q in another", id, tag, a.Rule, prev)
						}
						tags[id] = tag
					}
				}
			}
			if len(rulesSeen) != 3 {
				t.Errorf("alerts of %d rules, want all 3", len(rulesSeen))
			}
			if !slices.Equal(alerts, wantAlerts) {
				t.Errorf("%d alerts in the topic, %d with file outputs, or they differ", len(alerts), len(wantAlerts))
			}
			// Failing closed, each failed event dead-lettered once, as its
			// input record.
			dead := trimmedSorted(topicValues(t, brokers, cfg.Kafka.DeadTopic))
			ids := checkInputDeadLetters(t, dead, topic, records)
			var wantIDs []string
			if closed {
				for id := range records {
					if idFailing(id) {
						wantIDs = append(wantIDs, id)
					}
				}
			}
			slices.Sort(wantIDs)
			if !slices.Equal(ids, wantIDs) {
				t.Errorf("%d dead letters (%d distinct events), want %d, each once", len(ids), len(slices.Compact(slices.Clone(ids))), len(wantIDs))
			}
			if !slices.Equal(dead, wantDead) {
				t.Errorf("%d dead letters in the topic, %d with file outputs, or they differ", len(dead), len(wantDead))
			}
		})
	}
}

// TestStreamKafkaRepartitionedEarlierRecords: repartition records written
// as a build before the lookups' values were carried wrote them (a test
// hook) are looked up again where they are read, and those whose lookup
// fails closed there go to the dead letters as their input records
// (partition, offset, JSON), not as the repartition records. (In the first
// run no lookup fails at the input: each key's first fetch answers, a
// failing key's later ones fail.) Resumed from a checkpoint by this
// build, over the earlier records and its own, the job finishes.
func TestStreamKafkaRepartitionedEarlierRecords(t *testing.T) {
	brokers := kafkaBrokers(t)
	topic, records := produceIDEvents(t, brokers, "stream-kafka-enrich0", 600)
	rs := enrichedOnceRules(t, "closed")
	src := newChangingSource(func(key string, n int) bool { return n > 1 && idFailing(key) })
	cfg := StreamConfig{
		Kafka: &KafkaInput{Brokers: brokers, Topic: topic, Bounded: true, batchRecords: 20,
			AlertsTopic: topic + "-alerts", DeadTopic: topic + "-dead", Group: topic},
		StateDir: filepath.Join(t.TempDir(), "state"), CheckpointInterval: 10 * time.Second, CheckpointRecords: 100, Parallelism: 2,
	}
	first := cfg
	first.hooks.repWithoutLookups = true
	// The first run stops at checkpoint 3 or later, once a dead letter
	// is committed: one counted by the time of a commit is in the next
	// (one checkpoint in flight at most). It stopped at checkpoint 3,
	// and under CI's load the repartition records had not been read
	// again by then: no dead letter yet.
	first.Monitor = NewStreamMonitor()
	var deadSeen int64
	first.hooks.afterCommit = func(id int64) bool {
		stop := id >= 3 && deadSeen > 0
		deadSeen = first.Monitor.Snapshot().Progress.Dead
		return stop
	}
	if res, err := enrichedOnceEngine(t, rs, src).Stream(context.Background(), first); err != nil || res.Finished {
		t.Fatalf("the first run: %v, finished %v (want a stop once a dead letter is committed)", err, res != nil && res.Finished)
	}
	dead := topicValues(t, brokers, cfg.Kafka.DeadTopic)
	if len(dead) == 0 {
		t.Fatal("no dead letters: the earlier build's records were not looked up where read")
	}
	for _, id := range checkInputDeadLetters(t, dead, topic, records) {
		if !idFailing(id) {
			t.Errorf("event %s dead-lettered: its lookup never fails", id)
		}
	}
	if res, err := enrichedOnceEngine(t, rs, src).Stream(context.Background(), cfg); err != nil || !res.Finished {
		t.Fatalf("the second run: %v, %+v", err, res)
	}
}

// TestStreamKafkaAggregates runs the velocity ruleset (its thresholds
// lowered) over events in time order produced into a topic of three
// partitions keyed by card_id, as a transactional job with card_id as the
// record key: the card aggregates run on the input partitions, the
// merchant one on the repartition topic of merchant_id. Stopped at a
// checkpoint, its state directory deleted and resumed with another
// parallelism and 2 aggregate workers (every aggregator restored from
// the changelog into a salting one), the job
// commits the alerts of Engine.Run over the events, each once, aggregate
// values included (but for where the events were read).
func TestStreamKafkaAggregates(t *testing.T) {
	brokers := kafkaBrokers(t)
	old := maxChangelogRecord
	maxChangelogRecord = 300 // the aggregators' states in chunks
	t.Cleanup(func() { maxChangelogRecord = old })
	src, err := os.ReadFile(filepath.Join("..", "rulesets", "velocity.cep"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)
	for _, r := range [][2]string{
		{"merchant_cards == 30", "merchant_cards == 8"}, {"merchant_cards > 30", "merchant_cards > 8"},
		{"card_hour_spend > 10000 && card_hour_spend - amount <= 10000", "card_hour_spend > 3000 && card_hour_spend - amount <= 3000"},
	} {
		text = strings.Replace(text, r[0], r[1], 1)
	}
	rs, err := CompileRuleset("velocity.cep", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	var input strings.Builder
	x := uint64(7)
	next := func(m uint64) uint64 {
		x = x*6364136223846793005 + 1442695040888963407
		return (x >> 33) % m
	}
	base := time.Date(2026, 1, 1, 22, 0, 0, 0, time.UTC)
	countries := []string{"FR", "DE", "IT"}
	for i := range 1500 {
		device := ""
		if next(3) == 0 {
			device = "d1"
		}
		fmt.Fprintf(&input, `{"ts":%q,"type":"auth","card_id":"c%d","merchant_id":"m%d","amount":%d,"device_id":%q,"merchant_country":%q}`+"\n",
			base.Add(time.Duration(i)*3*time.Second).Format(time.RFC3339), next(40), next(8), next(400), device, countries[next(3)])
	}
	_, lines, _, _ := batchRun(t, rs, 16, strings.Split(strings.TrimSpace(input.String()), "\n"))
	where := regexp.MustCompile(`"line":[0-9]+(,"partition":[0-9]+)?,`)
	norm := func(lines []string) []string {
		var out []string
		for _, l := range lines {
			if l = strings.TrimSpace(l); l != "" {
				out = append(out, where.ReplaceAllString(l, ""))
			}
		}
		slices.Sort(out)
		return out
	}
	want := norm(lines)
	for _, r := range []string{"merchant_card_burst", "card_spend_spree", "card_country_hopping"} {
		if n := strings.Count(strings.Join(want, "\n"), `"rule":"`+r+`"`); n == 0 {
			t.Fatalf("Engine.Run gives no alert of %s: nothing to tell", r)
		}
	}
	topic := fmt.Sprintf("stream-kafka-agg-%d", time.Now().UnixNano())
	if _, err := KafkaProduce(context.Background(), KafkaProduceConfig{
		Brokers: brokers, Topic: topic, Partitions: 3, KeyField: "card_id",
	}, strings.NewReader(input.String())); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "state")
	config := func(p int) StreamConfig {
		return StreamConfig{
			Kafka: &KafkaInput{Brokers: brokers, Topic: topic, Bounded: true, batchRecords: 20, RecordKey: "card_id",
				AlertsTopic: topic + "-alerts", Group: topic},
			StateDir: state, CheckpointInterval: 10 * time.Second, CheckpointRecords: 200, Parallelism: p,
		}
	}
	engine := func() *Engine {
		e, err := New(WithRuleset(rs), WithOutOfOrderness(streamBound), WithWatermarkEvery(16))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	cfg := config(2)
	cfg.hooks.afterCommit = func(id int64) bool { return id == 3 }
	if res, err := engine().Stream(context.Background(), cfg); err != nil || res.Finished {
		t.Fatalf("first run: %v, finished %v (want a stop at checkpoint 3)", err, res != nil && res.Finished)
	}
	if err := os.RemoveAll(state); err != nil {
		t.Fatal(err)
	}
	cfg = config(3)
	cfg.AggregateWorkers = 2 // the restored partitions' aggregators salting
	defer func(least int) { aggHotMin = least }(aggHotMin)
	aggHotMin = 2 // small releases salt keys too
	res, err := engine().Stream(context.Background(), cfg)
	if err != nil || !res.Finished || res.Restored < 3 {
		t.Fatalf("second run: %v, %+v (want it finished, restored from checkpoint 3 or later, from the changelog)", err, res)
	}
	got := norm(topicValues(t, brokers, topic+"-alerts"))
	if !slices.Equal(got, want) {
		t.Errorf("%d alerts in the topic, %d of Engine.Run (or they differ)", len(got), len(want))
		for _, l := range got {
			if _, ok := slices.BinarySearch(want, l); !ok {
				t.Logf("not of Engine.Run: %.500s", l)
				break
			}
		}
		for _, l := range want {
			if _, ok := slices.BinarySearch(got, l); !ok {
				t.Logf("only of Engine.Run: %.500s", l)
				break
			}
		}
	}
}

// TestStreamKafkaRecordKeys: a transactional job whose rule is keyed by
// card, over a topic keyed by country, stops at its first record with a
// RecordKeyError naming the record, both values and the field the topic
// looks keyed by, and commits nothing; TrustRecordKeys runs it to its
// end. recordKeyIs: numbers by value, an empty key as none, any key for
// a null field.
func TestStreamKafkaRecordKeys(t *testing.T) {
	for _, c := range []struct {
		key  string
		nil  bool
		v    event.Value
		want bool
	}{
		{"c1", false, event.String("c1"), true},
		{"c1", false, event.String("c2"), false},
		{"", true, event.String("c1"), false},
		{"", true, event.String(""), true},
		{"", false, event.String(""), true},
		{"12", false, event.Int(12), true},
		{"12.0", false, event.Int(12), true},
		{"1.2e1", false, event.Float(12), true},
		{"13", false, event.Int(12), false},
		{"9007199254740993", false, event.Int(9007199254740993), true},
		{"9007199254740992", false, event.Int(9007199254740993), false},
		{"true", false, event.Bool(true), true},
		{"1", false, event.Bool(true), false},
		{"anything", false, event.Null, true},
	} {
		key := []byte(c.key)
		if c.nil {
			key = nil
		}
		if got := recordKeyIs(key, c.v); got != c.want {
			t.Errorf("recordKeyIs(%q (nil %v), %v) = %v, want %v", c.key, c.nil, c.v, got, c.want)
		}
	}

	brokers := kafkaBrokers(t)
	topic := fmt.Sprintf("stream-kafka-keys-%d", time.Now().UnixNano())
	input := inOrderInput(300)
	if _, err := KafkaProduce(context.Background(), KafkaProduceConfig{
		Brokers: brokers, Topic: topic, Partitions: 3, KeyField: "country",
	}, strings.NewReader(input)); err != nil {
		t.Fatal(err)
	}
	config := func(group string, trust bool) StreamConfig {
		return StreamConfig{
			Kafka: &KafkaInput{Brokers: brokers, Topic: topic, Bounded: true, batchRecords: 20,
				AlertsTopic: group + "-alerts", Group: group, TrustRecordKeys: trust},
			StateDir: filepath.Join(t.TempDir(), "state"), CheckpointInterval: 10 * time.Second, CheckpointRecords: 100,
		}
	}
	_, err := streamEngine(t, backtestRules).Stream(context.Background(), config(topic+"-a", false))
	var ke *RecordKeyError
	if !errors.As(err, &ke) {
		t.Fatalf("over a topic keyed by country: %v, want a RecordKeyError", err)
	}
	if ke.Field != "card" || ke.KeyedBy != "country" || ke.Offset != 0 || !strings.HasPrefix(ke.Partition, topic+"-") ||
		!slices.Contains([]string{"US", "FR", "DE"}, string(ke.Key)) {
		t.Errorf("the error: %+v", ke)
	}
	for _, want := range []string{"offset 0", "its card is", "keyed by country", "the record has key"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q does not say %q", err, want)
		}
	}
	t.Logf("the error: %v", err)
	if got := topicValues(t, brokers, topic+"-a-alerts"); len(got) != 0 {
		t.Errorf("%d alerts committed before the error, want none", len(got))
	}
	res, err := streamEngine(t, backtestRules).Stream(context.Background(), config(topic+"-b", true))
	if err != nil || !res.Finished {
		t.Fatalf("trusting the keys: %v, %+v", err, res)
	}

	// A stray record (one keyed by another field amid a topic keyed by
	// card) goes to the dead letters with the reason, and the job goes
	// on: it stopped the job, at every restart. Its alerts are those of
	// the topic without it.
	keyed := topic + "-by-card"
	produceTopic(t, brokers, keyed, 3, input)
	lines := strings.SplitAfter(input, "\n")
	if _, err := KafkaProduce(context.Background(), KafkaProduceConfig{
		Brokers: brokers, Topic: keyed, Partitions: 3, KeyField: "country",
	}, strings.NewReader(lines[0])); err != nil {
		t.Fatal(err)
	}
	stray := config(keyed+"-c", false)
	stray.Kafka.Topic, stray.Kafka.DeadTopic = keyed, keyed+"-c-dead"
	if res, err = streamEngine(t, backtestRules).Stream(context.Background(), stray); err != nil || !res.Finished || res.Dead != 1 {
		t.Fatalf("a topic keyed by card with one stray record: %v, %d dead letters, want it finished with 1", err, res.Dead)
	}
	dead := topicValues(t, brokers, keyed+"-c-dead")
	if len(dead) != 1 || !strings.Contains(dead[0], `the record has key \"`) || !strings.Contains(dead[0], "but its card is") {
		t.Errorf("the dead letters: %q, want the stray record's, saying why", dead)
	}
	clean := topic + "-clean"
	produceTopic(t, brokers, clean, 3, input)
	ref := config(clean+"-d", false)
	ref.Kafka.Topic = clean
	if _, err := streamEngine(t, backtestRules).Stream(context.Background(), ref); err != nil {
		t.Fatal(err)
	}
	if got, want := alertIDsOf(topicValues(t, brokers, keyed+"-c-alerts")), alertIDsOf(topicValues(t, brokers, clean+"-d-alerts")); !slices.Equal(got, want) || len(want) == 0 {
		t.Errorf("the alerts with the stray record: %d, without it: %d; want the same, some", len(got), len(want))
	}
}

// TestStreamKafkaGroupNoTopic runs a transactional job over a topic that
// does not exist: bounded or not, it fails at once with ErrNoTopic, as a
// job with file outputs does, instead of waiting (unbounded: for ever, as
// a member of a group with nothing to read; bounded: 45 s of retries).
func TestStreamKafkaGroupNoTopic(t *testing.T) {
	brokers := kafkaBrokers(t)
	topic := fmt.Sprintf("stream-kafka-no-topic-%d", time.Now().UnixNano())
	for _, bounded := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		begin := time.Now()
		_, err := streamEngine(t, backtestRules).Stream(ctx, StreamConfig{
			Kafka:    &KafkaInput{Brokers: brokers, Topic: topic, Bounded: bounded, AlertsTopic: topic + "-alerts", Group: topic + "-g"},
			StateDir: filepath.Join(t.TempDir(), "state"),
		})
		cancel()
		if !errors.Is(err, kafka.ErrNoTopic) || !strings.Contains(err.Error(), topic) {
			t.Errorf("bounded %v: %v after %v, want ErrNoTopic naming %s", bounded, err, time.Since(begin).Round(time.Millisecond), topic)
		}
		if d := time.Since(begin); d > 5*time.Second {
			t.Errorf("bounded %v: failed after %v, want at once", bounded, d.Round(time.Millisecond))
		}
	}
}

// TestStreamKafkaAggregatesRemoved: a transactional job of velocity.cep
// (the card aggregates on the input partitions, the merchant one on the
// repartition topic of merchant_id) and two rules that read no
// aggregate, stopped at a checkpoint while its partitions' aggregators
// hold events, restarts from the changelog (its state directory deleted)
// with the two rules alone: the events the aggregators held go to the
// rules at the start (the log counts them), no partition has an
// aggregator, and no checkpoint after carries aggregator state; a restart
// from one of them, from the changelog again (where the aggregator states
// of the first run's checkpoints still are), takes none. The alerts topic
// holds those of Engine.Run of the two rules, each once, ids included
// (but for the version, and the aggregates' fields the first run's
// layout shows). Before, every partition that held events kept an
// aggregator of none, its state in every checkpoint and in the changelog.
func TestStreamKafkaAggregatesRemoved(t *testing.T) {
	brokers := kafkaBrokers(t)
	src, err := os.ReadFile(filepath.Join("..", "rulesets", "velocity.cep"))
	if err != nil {
		t.Fatal(err)
	}
	plain := `
rule card_pair {
  key card_id
  pattern {
    begin a where type == "auth" && amount > 300
    followedBy b where type == "auth" && amount > 300
    within 3m
  }
}

rule merchant_pair {
  key merchant_id
  pattern {
    begin a where amount > 350
    followedBy b where amount > 350
    within 1m
  }
}
`
	header, _, ok := strings.Cut(string(src), "# A merchant's distinct cards")
	if !ok {
		t.Fatal("velocity.cep: no aggregate where the test cuts it")
	}
	v1, err := CompileRuleset("velocity.cep", append(src, plain...))
	if err != nil {
		t.Fatal(err)
	}
	v2, err := CompileRuleset("velocity.cep", []byte(header+plain))
	if err != nil {
		t.Fatal(err)
	}
	if len(v1.Aggregates) != 3 || len(v2.Aggregates) != 0 {
		t.Fatalf("%d and %d aggregates, want 3 and none", len(v1.Aggregates), len(v2.Aggregates))
	}
	var input strings.Builder
	x := uint64(11)
	next := func(m uint64) uint64 {
		x = x*6364136223846793005 + 1442695040888963407
		return (x >> 33) % m
	}
	base := time.Date(2026, 1, 1, 22, 0, 0, 0, time.UTC)
	for i := range 1500 {
		fmt.Fprintf(&input, `{"ts":%q,"type":"auth","card_id":"c%d","merchant_id":"m%d","amount":%d,"merchant_country":"FR"}`+"\n",
			base.Add(time.Duration(i)*3*time.Second).Format(time.RFC3339), next(40), next(8), next(400))
	}
	// The aggregators hold two minutes of events (some 40).
	const bound = 2 * time.Minute
	_, lines, _, _ := batchRun(t, v2, 16, strings.Split(strings.TrimSpace(input.String()), "\n"), WithOutOfOrderness(bound))
	// An alert as a job of v2 alone gives it, wherever its events were
	// read.
	norm := func(lines []string) []string {
		var out []string
		for _, l := range lines {
			var a map[string]any
			if err := json.Unmarshal([]byte(l), &a); err != nil {
				t.Fatal(err)
			}
			if a["rule"] != "card_pair" && a["rule"] != "merchant_pair" {
				continue
			}
			delete(a, "ruleset_version")
			for _, evs := range a["matched"].(map[string]any) {
				for _, ev := range evs.([]any) {
					for _, f := range []string{"line", "partition", "merchant_cards", "card_hour_spend", "card_countries_today"} {
						delete(ev.(map[string]any), f)
					}
				}
			}
			b, err := json.Marshal(a)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, string(b))
		}
		slices.Sort(out)
		return out
	}
	want := norm(lines)
	for _, r := range []string{"card_pair", "merchant_pair"} {
		if n := strings.Count(strings.Join(want, "\n"), `"rule":"`+r+`"`); n == 0 {
			t.Fatalf("Engine.Run gives no alert of %s: nothing to tell", r)
		}
	}
	topic := fmt.Sprintf("stream-kafka-agg-removed-%d", time.Now().UnixNano())
	if _, err := KafkaProduce(context.Background(), KafkaProduceConfig{
		Brokers: brokers, Topic: topic, Partitions: 3, KeyField: "card_id",
	}, strings.NewReader(input.String())); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "state")
	run := func(rs *Ruleset, stopAfter int64) (*StreamResult, []string) {
		t.Helper()
		var logs []string
		cfg := StreamConfig{
			Kafka: &KafkaInput{Brokers: brokers, Topic: topic, Bounded: true, batchRecords: 20, RecordKey: "card_id",
				AlertsTopic: topic + "-alerts", Group: topic},
			StateDir: state, CheckpointInterval: 10 * time.Second, CheckpointRecords: 200, Parallelism: 2, Keep: 1000,
			Logf: func(format string, args ...any) { logs = append(logs, fmt.Sprintf(format, args...)) },
		}
		first := int64(-1)
		cfg.hooks.afterCommit = func(id int64) bool {
			if first < 0 {
				first = id
			}
			return stopAfter > 0 && id >= first+stopAfter-1
		}
		e, err := New(WithRuleset(rs), WithOutOfOrderness(bound), WithWatermarkEvery(16))
		if err != nil {
			t.Fatal(err)
		}
		res, err := e.Stream(context.Background(), cfg)
		if err != nil || res.Finished != (stopAfter == 0) {
			t.Fatalf("Stream: %v, finished %v (want a stop after %d checkpoints, 0: finished)", err, res != nil && res.Finished, stopAfter)
		}
		return res, logs
	}
	// aggState: whether a checkpoint of the state directory after id
	// (from the changelog: each run starts without one) carries
	// aggregator state.
	aggState := func(after int64) []string {
		var out []string
		for id, m := range checkpointMetas(t, state) {
			if id > after && (m.Source.PartAggregates != nil || m.Source.Aggregates != nil || m.Source.AggregatesOf != "") {
				out = append(out, fmt.Sprintf("checkpoint %d: partitions %v, %d bytes, of %q", id, slices.Sorted(maps.Keys(m.Source.PartAggregates)), len(m.Source.Aggregates), m.Source.AggregatesOf))
			}
		}
		return out
	}
	first, _ := run(v1, 3)
	if got := aggState(0); len(got) == 0 {
		t.Fatal("the first run's checkpoints carry no aggregator state: the test checks nothing")
	}
	for i, stop := range []int64{3, 0} {
		if err := os.RemoveAll(state); err != nil {
			t.Fatal(err)
		}
		res, logs := run(v2, stop)
		if res.Restored < first.Stats.LastCheckpoint || res.Restored == 0 {
			t.Fatalf("run %d: restored %d, want the changelog's %d or later", i+2, res.Restored, first.Stats.LastCheckpoint)
		}
		said := false
		for _, l := range logs {
			if strings.Contains(l, " by velocity aggregates the rules no longer declare went to the rules") {
				said = true
				t.Logf("run %d: %s", i+2, l)
			}
		}
		if said != (i == 0) {
			t.Errorf("run %d (restored %d): the log says events held by the aggregates went to the rules: %v, want %v:\n%s", i+2, res.Restored, said, i == 0, strings.Join(logs, "\n"))
		}
		if got := aggState(res.Restored); len(got) > 0 {
			t.Errorf("run %d: checkpoints after the restore of %d carry aggregator state:\n%s", i+2, res.Restored, strings.Join(got, "\n"))
		}
		first = res
	}
	if got := norm(topicValues(t, brokers, topic+"-alerts")); !slices.Equal(got, want) {
		t.Errorf("the alerts of the rules without aggregates are not those of Engine.Run (%d, want %d):\n%s", len(got), len(want), multisetDiff(want, got))
	}
}

// TestTopicEventSourceProgress: a replay of a topic's time range says how
// far it is: the offsets taken of the range's, from none to all (a
// backtest of a topic printed no percentage).
func TestTopicEventSourceProgress(t *testing.T) {
	brokers := kafkaBrokers(t)
	topic := fmt.Sprintf("topic-progress-%d", time.Now().UnixNano())
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var b strings.Builder
	for i := range 200 {
		fmt.Fprintf(&b, `{"ts":%q,"card":"c%d","amount":%d}`+"\n", t0.Add(time.Duration(i)*time.Second).Format(time.RFC3339), i%7, i)
	}
	ctx := context.Background()
	if _, err := KafkaProduce(ctx, KafkaProduceConfig{Brokers: brokers, Topic: topic, Partitions: 2, KeyField: "card", TimeField: "ts"}, strings.NewReader(b.String())); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		from, to time.Time
		want     int64
	}{
		{"the whole topic", time.Time{}, time.Time{}, 200},
		{"from 50s to 150s", t0.Add(50 * time.Second), t0.Add(150 * time.Second), 100},
	} {
		src, err := OpenTopicEventSource(ctx, TopicReplay{Brokers: brokers, Topic: topic, From: c.from, To: c.to, TimeField: "ts"})
		if err != nil {
			t.Fatal(err)
		}
		// The merge takes batches ahead of the records handed on: before
		// the first, read may be anything up to the total (it was taken
		// for 0, which held only while the first fetch was slower than
		// this call).
		if read, total := src.Progress(); read < 0 || read > total || total != c.want {
			t.Errorf("%s: progress before the first record %d of %d, want up to %d of %d", c.name, read, total, c.want, c.want)
		}
		n := int64(0)
		for {
			_, err := src.source().Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			n++
			if read, total := src.Progress(); read < n || read > total {
				t.Fatalf("%s: progress after %d records %d of %d", c.name, n, read, total)
			}
		}
		if read, total := src.Progress(); n != c.want || read != total {
			t.Errorf("%s: %d records read, progress at the end %d of %d; want %d, all of them", c.name, n, read, total, c.want)
		}
		src.Close()
	}
}

// TestTopicEventSourceCloseTwice: an EventSource may be closed more than
// once, a topic's too (its second Close panicked, closing a closed
// channel), and a run after the Close fails saying it is closed.
func TestTopicEventSourceCloseTwice(t *testing.T) {
	brokers := kafkaBrokers(t)
	topic := fmt.Sprintf("topic-close-%d", time.Now().UnixNano())
	ctx := context.Background()
	if _, err := KafkaProduce(ctx, KafkaProduceConfig{Brokers: brokers, Topic: topic, Partitions: 2, KeyField: "card", TimeField: "ts"},
		strings.NewReader(`{"ts":"2026-03-01T00:00:00Z","card":"c1","amount":1}`+"\n")); err != nil {
		t.Fatal(err)
	}
	src, err := OpenTopicEventSource(ctx, TopicReplay{Brokers: brokers, Topic: topic, TimeField: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := src.Close(); err != nil {
			t.Errorf("Close %d: %v", i+1, err)
		}
	}
	e, err := New(WithRuleset(loadRules(t, engineRules)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Run(ctx, src); err == nil || !strings.Contains(err.Error(), "topic "+topic+": closed") {
		t.Errorf("a run over the closed source: %v, want an error saying it is closed", err)
	}
}

// TestStreamKafkaGroupOfAnotherTopic: a run given a group whose changelog
// holds the state of a run over another topic is refused naming the
// group, its checkpoint and the fix (another group, or that topic), even
// with a new state directory, which it does not leave behind. It said
// that the new state directory held that state, and to give the run a
// state directory of its own, which it had.
func TestStreamKafkaGroupOfAnotherTopic(t *testing.T) {
	brokers := kafkaBrokers(t)
	t.Parallel()
	stamp := time.Now().UnixNano()
	first, second := fmt.Sprintf("group-topic-a-%d", stamp), fmt.Sprintf("group-topic-b-%d", stamp)
	for _, topic := range []string{first, second} {
		if _, err := KafkaProduce(context.Background(), KafkaProduceConfig{
			Brokers: brokers, Topic: topic, Partitions: 2, KeyField: "card",
		}, strings.NewReader(inOrderInput(40))); err != nil {
			t.Fatal(err)
		}
	}
	group := first + "-g"
	// A rule keyed by country, repartitioned: the group's repartition
	// topic holds its offsets, so its state is restored whatever the
	// input topic (the trial's cards ruleset); without one the run is
	// refused earlier, the group having committed nothing on the topic.
	rules := backtestRules + `
rule by_country {
  key country
  pattern {
    begin a where amount > 100
    followedBy b where amount > 100
    within 10m
  }
}
`
	config := func(topic, state string) StreamConfig {
		return StreamConfig{
			Kafka:    &KafkaInput{Brokers: brokers, Topic: topic, Bounded: true, AlertsTopic: group + "-alerts", Group: group},
			StateDir: state, CheckpointInterval: 10 * time.Second,
		}
	}
	if _, err := streamEngine(t, rules).Stream(context.Background(), config(first, filepath.Join(t.TempDir(), "state"))); err != nil {
		t.Fatalf("the run over %s: %v", first, err)
	}
	// The alerts topic the run made has the input's partitions (it had
	// the broker's default, one here).
	if n, err := kafka.PartitionCount(context.Background(), kafka.Conn{Brokers: brokers}, group+"-alerts"); err != nil || n != 2 {
		t.Errorf("the alerts topic made by the run: %d partitions (%v), want the input's 2", n, err)
	}
	fresh := filepath.Join(t.TempDir(), "fresh")
	_, err := streamEngine(t, rules).Stream(context.Background(), config(second, fresh))
	want := regexp.MustCompile(`group ` + group + ` holds the state of a run over topic ` + first + ` \(in changelog topic ` + group + `-changelog\), and this run reads topic ` + second + `: give the run a group of its own \(-group\), or read topic ` + first + `$`)
	if !errors.Is(err, ErrRestore) || !want.MatchString(err.Error()) {
		t.Errorf("a run over %s with group %s: %v\nwant an ErrRestore matching %s", second, group, err, want)
	}
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Errorf("the refused run left its new state directory %s behind (stat: %v)", fresh, err)
	}
}
