package cep

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/runtime/kafka"
	"github.com/cepheus-cep/cepheus/runtime/state"
)

// The tests of this file are those of held_test.go for a job reading a
// Kafka topic: a restart with another rules file, the events held at the
// restored checkpoint settled as in a job reading files.

// kafkaHeldRun is a Kafka job of one rules file stopped after a
// checkpoint, restarted with another and run to the topic's end.
type kafkaHeldRun struct {
	// alerts are the alert lines committed over both runs, each matched
	// event's place in the topic (its partition and offset) replaced by
	// its line in the input, as a job reading the input's file shows it.
	alerts []string
	// restored is the checkpoint the restart restored, w its watermark;
	// read, the input lines the job before had read by then.
	restored int64
	w        event.Time
	read     map[int64]bool
	// wRep is the watermark of the repartitioned rules at the
	// checkpoint (of a transactional job with a repartition topic).
	wRep  event.Time
	lines []string // the input's
	logs  []string // the restarted job's
}

// kafkaPlace is where a matched event of an alert was read: its line
// (the offset + 1 of a Kafka record) and its partition (0 left out).
var kafkaPlace = regexp.MustCompile(`"line":([0-9]+)(,"partition":([0-9]+))?`)

// runKafkaHeld produces input into a topic of 3 partitions keyed by
// card, runs a job of v1 over it until its third checkpoint, then one of
// v2 (which deploys it at the restore) to the topic's end, both bounded,
// their aggregators on workers workers. txn: a transactional job (a
// group, its alerts in a topic, an aggregator per partition), restarted
// from the changelog alone; else with its outputs in files (one
// aggregator), restarted from its state directory.
func runKafkaHeld(t *testing.T, v1, v2 string, txn bool, input string, workers int) kafkaHeldRun {
	t.Helper()
	brokers := kafkaBrokers(t)
	topic := fmt.Sprintf("held-kafka-%d", time.Now().UnixNano())
	produceTopic(t, brokers, topic, 3, input)
	run := kafkaHeldRun{read: map[int64]bool{}, lines: strings.Split(input, "\n")}
	// Each record's input line, by partition and line (offset + 1).
	lineOf := map[string]int64{}
	for i, l := range run.lines {
		lineOf[l] = int64(i + 1)
	}
	place := map[[2]int64]int64{}
	if _, err := kafka.ReadRecords(context.Background(), kafka.Conn{Brokers: brokers}, topic, nil, nil, func(p int32, r kafka.SourceRecord) error {
		n, ok := lineOf[string(r.Value)]
		if !ok {
			return fmt.Errorf("partition %d offset %d: %q is no line of the input", p, r.Offset, r.Value)
		}
		place[[2]int64{int64(p), r.Offset + 1}] = n
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	d := newStreamDirs(t)
	var mu sync.Mutex
	var logs []string
	config := func() StreamConfig {
		c := d.config("")
		c.Kafka = &KafkaInput{Brokers: brokers, Topic: topic, Bounded: true, batchRecords: 20}
		if txn {
			c.AlertsDir, c.LateDir, c.DeadDir = "", "", ""
			c.Kafka.AlertsTopic, c.Kafka.Group = topic+"-alerts", topic
			c.Kafka.LocalInterval = time.Nanosecond // every checkpoint copied: its metadata read below
		}
		c.CheckpointRecords, c.AggregateWorkers = 100, workers
		c.Logf = func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			logs = append(logs, fmt.Sprintf(format, args...))
		}
		return c
	}
	cfg := config()
	cfg.hooks.afterCommit = func(id int64) bool { return id == 3 }
	if res, err := heldEngine(t, v1).Stream(context.Background(), cfg); err != nil || res.Finished {
		t.Fatalf("the job of the first file: %v, finished %v (want a stop at checkpoint 3)", err, res != nil && res.Finished)
	}
	var m *jobMeta
	run.restored, m = latestMeta(t, d.state)
	run.w, run.wRep = event.Time(m.Source.Forwarded), event.MaxTime
	for _, ups := range m.Source.Repartition {
		wm, _ := repWatermark(ups) // (as the job before forwarded it)
		run.wRep = min(run.wRep, wm)
	}
	for _, pos := range m.Source.Positions {
		p, ok := partitionOf(topic, pos.File)
		if !ok {
			continue // a repartition topic's
		}
		for off := range pos.Offset {
			run.read[place[[2]int64{int64(p), off + 1}]] = true
		}
	}
	if txn {
		if err := os.RemoveAll(d.state); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	logs = nil
	mu.Unlock()
	if res, err := heldEngine(t, v2).Stream(context.Background(), config()); err != nil || !res.Finished || res.Restored != run.restored {
		t.Fatalf("the job of the second file: %v, %+v (want it finished, restored from checkpoint %d)", err, res, run.restored)
	}
	run.logs = logs
	t.Logf("the restarted job's log:\n%s", strings.Join(logs, "\n"))
	lines := committedLines(t, d.alerts)
	if txn {
		lines = topicValues(t, brokers, topic+"-alerts")
	}
	for _, l := range lines {
		l = kafkaPlace.ReplaceAllStringFunc(l, func(s string) string {
			m := kafkaPlace.FindStringSubmatch(s)
			line, _ := strconv.ParseInt(m[1], 10, 64)
			p, _ := strconv.ParseInt(m[3], 10, 64)
			n, ok := place[[2]int64{p, line}]
			if !ok {
				t.Fatalf("an alert's event of partition %d offset %d is not in the topic: %s", p, line-1, l)
			}
			return fmt.Sprintf(`"line":%d`, n)
		})
		run.alerts = append(run.alerts, strings.TrimSpace(l))
	}
	return run
}

// latestMeta returns the id and the job metadata of the latest
// checkpoint of dir.
func latestMeta(t *testing.T, dir string) (int64, *jobMeta) {
	t.Helper()
	cd, err := state.OpenCheckpointDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer cd.Close()
	chk, err := cd.Latest()
	if err != nil {
		t.Fatal(err)
	}
	m := chkJobMeta(t, chk)
	return int64(chk.ID), &m
}

// chkJobMeta returns the job metadata of checkpoint chk.
func chkJobMeta(t *testing.T, chk *state.Checkpoint) jobMeta {
	t.Helper()
	b, err := chk.Meta("job")
	if err != nil {
		t.Fatal(err)
	}
	var m jobMeta
	if err := unmarshalMeta(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// isRead reports whether the job before the restart read line.
func (r kafkaHeldRun) isRead(line int64) bool { return r.read[line] }

// wOf is the watermark the rules keyed by key had at the checkpoint: w
// for those keyed by card, the record key, wRep for the others (of a
// transactional job: repartitioned).
func (r kafkaHeldRun) wOf(key []string) event.Time {
	if r.wRep == event.MaxTime || slices.Equal(key, []string{"card"}) {
		return r.w
	}
	return r.wRep
}

// TestKafkaRestartHeld is TestSwitchHeldLookups and
// TestRestartHeldAggregates for a job reading a Kafka topic of 3
// partitions, restarted with another rules file while events wait for
// the watermark: with file outputs (one aggregator, as over files), and
// transactional (an aggregator per partition, of the input or of a
// repartition topic; restored from the changelog alone). The alerts are
// the same as those of a job reading the input's file, as
// docs/decisions.md, "Events held at a switch", says: the events held
// get the new lookup's records and the new aggregates' values (before
// the fix, a transactional job's events held in the rules' buffers kept
// null for the aggregates of a partition that had none: a warning
// counted them).
func TestKafkaRestartHeld(t *testing.T) {
	kafkaBrokers(t)
	input := deployInput(900)
	for _, mode := range []struct {
		name string
		txn  bool
	}{{"files", false}, {"transactional", true}} {
		t.Run(mode.name+"/new lookup", func(t *testing.T) {
			r := runKafkaHeld(t, heldV1, heldV2, mode.txn, input, 1)
			checkHeldLookups(t, heldV2, input, r.alerts, r.w, r.isRead)
			checkHeldTiers(t, r.alerts, r.w, r.isRead)
			want := heldMatches(t, "keep", heldBacktest(t, heldV2, input), nil)
			if got := heldMatches(t, "keep", r.alerts, nil); !slices.Equal(want, got) {
				t.Errorf("the matches of keep are not the backtest's:\n%s", multisetDiff(want, got))
			}
			r.checkNoWarning(t)
			r.checkLog(t, "the %d events held at checkpoint %d were looked up by holder", r.heldAfter(t, heldV1))
		})
		for _, tc := range heldAggCases {
			t.Run(mode.name+"/"+tc.name, func(t *testing.T) {
				r := runKafkaHeld(t, tc.v1, tc.v2, mode.txn, input, tc.workers)
				checkHeldAggregates(t, tc, input, r.alerts, r.w, r.wOf, r.isRead)
				r.checkNoWarning(t)
				if loadRules(t, tc.v1).Aggregates == nil {
					// Every event read after the watermark waited in the
					// rules' buffers; in a transactional job, those of the
					// repartitioned rules once their repartition topic
					// handed them back: fewer, how many not known here.
					n := r.heldAfter(t, tc.v1)
					if mode.txn && slices.ContainsFunc(loadRules(t, tc.v2).Rules, func(rule *Rule) bool { return !slices.Equal(rule.KeyFields, []string{"card"}) }) {
						n = -1
					}
					r.checkLog(t, "the %d events the rules' buffers held at checkpoint %d went to the velocity aggregates' stage", n)
				}
			})
		}
	}
}

// heldAfter is the number of events of the lines the job before the
// restart read (v1's) that are after the watermark of its checkpoint:
// those it held.
func (r kafkaHeldRun) heldAfter(t *testing.T, v1 string) int {
	t.Helper()
	rs := loadRules(t, v1)
	n := 0
	for line := range r.read {
		if ev, err := rs.DecodeEvent([]byte(r.lines[line-1])); err == nil && ev.Time > r.w {
			n++
		}
	}
	return n
}

// checkNoWarning fails t if the restarted job logged a warning.
func (r kafkaHeldRun) checkNoWarning(t *testing.T) {
	t.Helper()
	for _, l := range r.logs {
		if strings.HasPrefix(l, "warning") {
			t.Errorf("the restarted job warns: %s", l)
		}
	}
}

// checkLog checks that the restarted job logged format (its first verb
// a count, its second the checkpoint restored) with count n (any count
// above 0 when n is -1).
func (r kafkaHeldRun) checkLog(t *testing.T, format string, n int) {
	t.Helper()
	re := regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(format), "%d", "([0-9]+)"))
	found := false
	for _, l := range r.logs {
		m := re.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		found = true
		got, _ := strconv.Atoi(m[1])
		if m[2] != strconv.FormatInt(r.restored, 10) || n >= 0 && got != n || n < 0 && got <= 0 {
			t.Errorf("the restarted job logged %q, want %d events (any above 0 for -1) at checkpoint %d", l, n, r.restored)
		}
	}
	if !found {
		t.Errorf("the restarted job did not log %q", format)
	}
}
