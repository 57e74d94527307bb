package cep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/runtime/kafka"
)

// rulesTopicInstance runs one instance of a group that follows a rules
// topic over the topic of deployInput's lines, and records its log.
type rulesTopicInstance struct {
	t      *testing.T
	m      *StreamMonitor
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	log    []string
}

// startRulesTopicInstance starts instance inst of group topic, running
// deployV1, with its state in dir.
func startRulesTopicInstance(t *testing.T, brokers []string, topic, inst, dir string) *rulesTopicInstance {
	return startGroupInstance(t, brokers, topic, topic, inst, dir)
}

// startGroupInstance starts instance inst of group over topic, which
// follows rules topic topic-rules.
func startGroupInstance(t *testing.T, brokers []string, topic, group, inst, dir string) *rulesTopicInstance {
	t.Helper()
	r := &rulesTopicInstance{t: t, m: NewStreamMonitor(), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	cfg := StreamConfig{
		Kafka: &KafkaInput{Brokers: brokers, Topic: topic, AlertsTopic: topic + "-alerts", ShadowTopic: topic + "-shadow",
			Group: group, InstanceID: inst, RulesTopic: topic + "-rules", SessionTimeout: 2 * time.Second},
		StateDir: dir, CheckpointInterval: 100 * time.Millisecond, Parallelism: 1, Monitor: r.m,
		Logf: func(format string, args ...any) {
			r.mu.Lock()
			r.log = append(r.log, fmt.Sprintf(format, args...))
			r.mu.Unlock()
			t.Logf(format, args...)
		},
	}
	go func() {
		defer close(r.done)
		if _, err := streamEngine(t, deployV1).Stream(ctx, cfg); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("instance %s: %v", inst, err)
		}
	}()
	t.Cleanup(r.stop)
	return r
}

// stop stops the instance and waits for its end.
func (r *rulesTopicInstance) stop() {
	r.cancel()
	<-r.done
}

// logged returns the log lines that hold s.
func (r *rulesTopicInstance) logged(s string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, l := range r.log {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// waitFor waits up to d for cond.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
	}
}

// writeRulesRecord writes value under key into the rules topic, as a
// publishing instance (or an operator's tool) would.
func writeRulesRecord(t *testing.T, brokers []string, topic, key string, value []byte) {
	t.Helper()
	prod, err := kafka.NewProducer(kafka.Conn{Brokers: brokers})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	ctx := context.Background()
	prod.Produce(ctx, topic, []byte(key), value)
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestStreamKafkaRulesTopicRestart restarts an instance after a version
// went into the rules topic with a switch point ahead of the instance's
// checkpoint, or at its watermark (the job before held there and ended
// before its switch, as at a rebalance), or after a tombstone of the
// shadow key (a promote's; the instance running no shadow, or one that
// the tombstone drops), its input holding a backlog past the point: the restarted instance switches at the group's point, as
// every instance that reads the record before its watermark gets there.
// Before, its first batch carried its watermark past the point before it
// looked at the topic, and it switched where it was, its partitions cut at
// another watermark than the group's (a trial: an instance killed right
// after a deploy, one whose job a rebalance ended while it held, and one
// whose next record was the tombstone of a promote before, running a
// shadow or not).
func TestStreamKafkaRulesTopicRestart(t *testing.T) {
	brokers := kafkaBrokers(t)
	for _, at := range []string{"ahead", "at the checkpoint", "after a tombstone", "after a tombstone of its shadow"} {
		t.Run(strings.ReplaceAll(at, " ", "_"), func(t *testing.T) {
			lines := strings.SplitAfter(deployInput(600), "\n")
			half := len(lines) / 2
			topic := fmt.Sprintf("stream-kafka-rules-restart-%d", time.Now().UnixNano())
			produceTopic(t, brokers, topic, 3, strings.Join(lines[:half], ""))
			v3src := strings.Replace(deployV2Kafka, "amount > 450", "amount > 400", 1)
			if at == "after a tombstone of its shadow" {
				// The instance runs a shadow (switched to at once: the
				// record names no point) when it stops.
				if _, err := kafka.EnsureTopics(context.Background(), kafka.Conn{Brokers: brokers}, []kafka.TopicSpec{{Name: topic + "-rules", Partitions: 1, Compact: true}}); err != nil {
					t.Fatal(err)
				}
				sh, err := json.Marshal(map[string]string{"name": "v3.cep", "source": v3src, "origin": "by hand"})
				if err != nil {
					t.Fatal(err)
				}
				writeRulesRecord(t, brokers, topic+"-rules", rulesShadow, sh)
			}
			dir := filepath.Join(t.TempDir(), "state")
			a := startRulesTopicInstance(t, brokers, topic, "a", dir)
			first := lastEventTime(t, lines[:half])
			waitFor(t, 60*time.Second, "the instance past the first half's events", func() bool {
				return a.m.Ready() && a.m.Snapshot().Progress.Watermark >= first-event.Time(time.Minute/time.Millisecond)
			})
			if at == "after a tombstone of its shadow" {
				v3 := loadRules(t, v3src)
				waitFor(t, 30*time.Second, "the instance runs v3 as the shadow", func() bool { _, sh := versions(a.m); return sh == v3.Hash })
			}
			a.stop()
			// The group's switch point: a minute into the second half,
			// which the instance has not read, or the watermark of its
			// final checkpoint.
			point := lastEventTime(t, lines[:half+10])
			if at == "at the checkpoint" {
				point = a.m.Snapshot().Progress.Watermark
			} else if point <= first {
				t.Fatalf("switch point %v is not after the first half (%v)", point, first)
			}
			v2 := loadRules(t, deployV2Kafka)
			rec, err := json.Marshal(rulesEntry{Name: "v2.cep", Source: deployV2Kafka, Origin: "grpc", At: time.Now().UTC(), Watermark: point})
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(at, "after a tombstone") {
				// A promote's end of the shadow key, before the version:
				// the job runs no shadow (or one it drops at once), and
				// holds for the version all the same.
				writeRulesRecord(t, brokers, topic+"-rules", rulesShadow, nil)
			}
			writeRulesRecord(t, brokers, topic+"-rules", rulesActive, rec)
			produceTopic(t, brokers, topic, 3, strings.Join(lines[half:], ""))
			since := time.Now()
			a = startRulesTopicInstance(t, brokers, topic, "a", dir)
			var res *DeployResult
			waitFor(t, 60*time.Second, "the restarted instance switched to v2", func() bool {
				res = a.m.switchOf(v2.Hash, false, since)
				return res != nil
			})
			if res.Watermark != point {
				t.Errorf("the restarted instance switched at watermark %v, want the group's switch point %v (log: %q)", res.Watermark, point, a.logged("switched to"))
			}
			// The switch's line (a shadow dropped on the way, held at
			// the point, says the same of its own).
			if got := a.logged(fmt.Sprintf("switched to ruleset deploy version %.12s at checkpoint", v2.Hash)); len(got) != 1 || !strings.Contains(got[0], fmt.Sprintf("(watermark %v, the group's switch point)", point)) {
				t.Errorf("the log says of the switch %q, want it at the group's switch point %v", a.logged("switched to"), point)
			}
		})
	}
}

// TestStreamKafkaRulesTopicBadRecord writes records into the rules topic
// by hand: a version without a switch point, then one that does not
// compile under the same key with a point far ahead. An instance started
// afterwards deploys the first at once (its missing point was 1970, where
// an instance without a watermark held its own, 10 s when its watermark
// did not move meanwhile), and the second neither
// hides it (the newest record of the key was the one that does not
// compile, so the instance stayed on its own rules while the group ran the
// topic's) nor holds the watermark: an instance held it for 10 s at the
// point of a version it then found did not compile.
func TestStreamKafkaRulesTopicBadRecord(t *testing.T) {
	brokers := kafkaBrokers(t)
	lines := strings.SplitAfter(deployInput(600), "\n")
	half := len(lines) / 2
	topic := fmt.Sprintf("stream-kafka-rules-bad-%d", time.Now().UnixNano())
	produceTopic(t, brokers, topic, 3, strings.Join(lines[:half], ""))
	if _, err := kafka.EnsureTopics(context.Background(), kafka.Conn{Brokers: brokers}, []kafka.TopicSpec{{Name: topic + "-rules", Partitions: 1, Compact: true}}); err != nil {
		t.Fatal(err)
	}
	v2 := loadRules(t, deployV2Kafka)
	good, err := json.Marshal(map[string]string{"name": "v2.cep", "source": deployV2Kafka, "origin": "by hand"})
	if err != nil {
		t.Fatal(err)
	}
	writeRulesRecord(t, brokers, topic+"-rules", rulesActive, good)
	// bad is a version that does not compile, its switch point a day
	// after the input's events.
	bad := func() []byte {
		point := lastEventTime(t, lines) + event.Time(24*time.Hour/time.Millisecond)
		b, err := json.Marshal(map[string]any{"name": "bad.cep", "source": "ruleset bad\n\nrule r {\n  key card\n", "watermark": point})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	writeRulesRecord(t, brokers, topic+"-rules", rulesActive, bad())
	a := startRulesTopicInstance(t, brokers, topic, "a", filepath.Join(t.TempDir(), "state"))
	var res *DeployResult
	waitFor(t, 30*time.Second, "the instance runs the topic's newest version that compiles", func() bool {
		res = a.m.switchOf(v2.Hash, false, time.Time{})
		return res != nil
	})
	if res.Watermark == 0 {
		t.Errorf("a version without a switch point switched at watermark %v, a point its record does not name", res.Watermark)
	}
	waitFor(t, 30*time.Second, "the instance read the first half", func() bool { return a.m.Ready() && a.m.Snapshot().Progress.Records >= int64(half) })
	// While it runs: another such record, then the second half. The
	// instance says at once that it does not compile, and its watermark
	// goes on.
	writeRulesRecord(t, brokers, topic+"-rules", rulesActive, bad())
	waitFor(t, 5*time.Second, "the instance said that the version at offset 2 does not compile", func() bool {
		return len(a.logged("the active version at offset 2 does not compile")) == 1
	})
	produceTopic(t, brokers, topic, 3, strings.Join(lines[half:], ""))
	// The input's last line, an hour on, is in one partition only: the
	// job's watermark goes by the others'.
	last := lastEventTime(t, lines[half:len(lines)-2])
	waitFor(t, 5*time.Second, "the watermark near the end of the second half", func() bool {
		return a.m.Snapshot().Progress.Watermark >= last-event.Time(2*time.Minute/time.Millisecond)
	})
	if got := a.logged("does not compile"); len(got) != 2 || !strings.Contains(got[0], "offset 1") {
		t.Errorf("the log says of the versions that do not compile %q, want offsets 1 and 2 once each", got)
	}
	// As warnings: serve logs them at level WARN (engineLogf).
	for _, l := range a.logged("does not compile") {
		if !strings.HasPrefix(l, "warning: rules topic ") {
			t.Errorf("not a warning: %q", l)
		}
	}
	if held := a.logged("has not reached the group's switch point"); len(held) > 0 {
		t.Errorf("the instance held its watermark: %q", held)
	}
	if act := a.m.Versions()[0].Version; act != v2.Hash {
		t.Errorf("the active version is %.12s, want v2 %.12s", act, v2.Hash)
	}
}

// versions returns the active and the shadow version m runs.
func versions(m *StreamMonitor) (active, shadow string) {
	for _, v := range m.Versions() {
		switch v.State {
		case VersionActive:
			active = v.Version
		case VersionShadow:
			shadow = v.Version
		}
	}
	return active, shadow
}

// TestStreamKafkaRulesTopicPromoted: a promote through the rules topic
// ends the shadow key with a tombstone, so that a new group that reads the
// topic from its start runs no shadow (it ran the promoted version as the
// shadow beside the version deployed after the promote, the shadow
// record being its key's newest); and an instance that runs a shadow when
// it reads such a tombstone drops it.
func TestStreamKafkaRulesTopicPromoted(t *testing.T) {
	brokers := kafkaBrokers(t)
	old := rulesLead
	rulesLead = 0 // the input is read: each call switches at once
	t.Cleanup(func() { rulesLead = old })
	lines := strings.SplitAfter(deployInput(300), "\n")
	topic := fmt.Sprintf("stream-kafka-rules-promoted-%d", time.Now().UnixNano())
	produceTopic(t, brokers, topic, 3, strings.Join(lines, ""))
	v2 := loadRules(t, deployV2Kafka)
	v3src := strings.Replace(deployV2Kafka, "amount > 450", "amount > 400", 1)
	v3 := loadRules(t, v3src)
	a := startGroupInstance(t, brokers, topic, topic+"-g1", "a", filepath.Join(t.TempDir(), "a"))
	waitFor(t, 60*time.Second, "instance a ready", a.m.Ready)
	ctx := context.Background()
	if _, err := a.m.Deploy(ctx, Deploy{Source: []byte(v3src), Shadow: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.m.Promote(ctx, SwitchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.m.Deploy(ctx, Deploy{Source: []byte(deployV2Kafka)}); err != nil {
		t.Fatal(err)
	}
	if act, sh := versions(a.m); act != v2.Hash || sh != "" {
		t.Fatalf("instance a runs %.12s, shadow %.12s; want v2 %.12s and no shadow", act, sh, v2.Hash)
	}
	// A new group over the same rules topic.
	b := startGroupInstance(t, brokers, topic, topic+"-g2", "b", filepath.Join(t.TempDir(), "b"))
	waitFor(t, 60*time.Second, "instance b runs v2", func() bool { act, _ := versions(b.m); return act == v2.Hash && b.m.Ready() })
	if _, sh := versions(b.m); sh != "" {
		t.Errorf("instance b of a new group runs shadow %.12s (v3 %.12s, promoted before v2): the group it follows runs none", sh, v3.Hash)
	}
	// A shadow, then a tombstone of the shadow key, by hand: both
	// instances run the shadow, then drop it.
	rec, err := json.Marshal(map[string]string{"name": "v3.cep", "source": v3src})
	if err != nil {
		t.Fatal(err)
	}
	writeRulesRecord(t, brokers, topic+"-rules", rulesShadow, rec)
	for _, in := range []*rulesTopicInstance{a, b} {
		waitFor(t, 30*time.Second, "both instances run v3 as the shadow", func() bool { _, sh := versions(in.m); return sh == v3.Hash && in.m.Ready() })
	}
	writeRulesRecord(t, brokers, topic+"-rules", rulesShadow, nil)
	for _, in := range []*rulesTopicInstance{a, b} {
		waitFor(t, 30*time.Second, "both instances dropped the shadow", func() bool { act, sh := versions(in.m); return sh == "" && act == v2.Hash && in.m.Ready() })
		// The job logs a switch before its monitor shows it.
		if got := in.logged(fmt.Sprintf("dropped shadow version %.12s at checkpoint", v3.Hash)); len(got) != 1 {
			t.Errorf("the log says of the dropped shadow %q, want it once", got)
		}
	}
}

// TestRulesSwitchPoint: a record's switch point is rulesLead past the
// publisher's watermark, at most MaxTime: within the lead of MaxTime
// (-time-unit ms takes any number) it wrapped to 292 million years
// before, a point every instance is past; without a watermark, or after
// the end, it is MinTime (switch at once).
func TestRulesSwitchPoint(t *testing.T) {
	lead := event.Time(rulesLead.Milliseconds())
	for _, c := range []struct{ w, want event.Time }{
		{event.MinTime, event.MinTime},
		{event.MaxTime, event.MinTime},
		{1_000, 1_000 + lead},
		{event.MaxTime - lead, event.MaxTime},
		{event.MaxTime - 1, event.MaxTime},
		{event.MinTime + 1, event.MinTime + 1 + lead},
	} {
		if got := rulesSwitchPoint(c.w); got != c.want {
			t.Errorf("rulesSwitchPoint(%v) = %v, want %v", c.w, got, c.want)
		}
	}
}

// TestStreamKafkaRulesTopicConcurrentCalls plays two calls sent to two
// instances at once, as two shells did in a trial: each instance checks
// its own active version and writes into the rules topic, the second
// before it has read the first's record. A deploy of v2, then a rollback
// written against v1 (the publisher had not seen v2): the rollback is
// passed over, the group runs v2 (it went back to v1, past v2, and v2's
// deploy was lost). A deploy whose record a newer one follows before the
// instance switched to it is answered at once that another version took
// its place (it waited for a switch that never came, until its
// deadline, and was told that whether the job switched was not known).
func TestStreamKafkaRulesTopicConcurrentCalls(t *testing.T) {
	brokers := kafkaBrokers(t)
	old := rulesLead
	rulesLead = time.Hour // a point the read input never reaches: a record waits rulesHoldMax
	t.Cleanup(func() { rulesLead = old })
	lines := strings.SplitAfter(deployInput(300), "\n")
	topic := fmt.Sprintf("stream-kafka-rules-concurrent-%d", time.Now().UnixNano())
	produceTopic(t, brokers, topic, 3, strings.Join(lines, ""))
	v1, v2 := loadRules(t, deployV1), loadRules(t, deployV2Kafka)
	v3src := strings.Replace(deployV2Kafka, "amount > 450", "amount > 400", 1)
	v3 := loadRules(t, v3src)
	a := startRulesTopicInstance(t, brokers, topic, "a", filepath.Join(t.TempDir(), "a"))
	waitFor(t, 60*time.Second, "instance a ready", a.m.Ready)
	record := func(name, src, origin, from string) []byte {
		b, err := json.Marshal(rulesEntry{Name: name, Source: src, Origin: origin, At: time.Now().UTC(), Watermark: event.MinTime, From: from})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// The two records in one flush, as two publishers a moment apart.
	prod, err := kafka.NewProducer(kafka.Conn{Brokers: brokers})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	prod.Produce(ctx, topic+"-rules", []byte(rulesActive), record("v2.cep", deployV2Kafka, "grpc", ""))
	prod.Produce(ctx, topic+"-rules", []byte(rulesActive), record("version "+v1.Hash[:12], deployV1, "rollback", v1.Hash))
	err = prod.Flush(ctx)
	prod.Close()
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "instance a runs v2", func() bool { act, _ := versions(a.m); return act == v2.Hash && a.m.Ready() })
	time.Sleep(2 * rulesPoll) // the rollback's record read too
	if act, _ := versions(a.m); act != v2.Hash {
		t.Fatalf("instance a runs %.12s, want v2 %.12s: the rollback written against v1 after v2's deploy went back past v2", act, v2.Hash)
	}
	refused := "is not deployed: cep: the version the call names is not the active one: version " + v2.Hash[:12]
	waitFor(t, 30*time.Second, "the log says the rollback is not deployed", func() bool { return len(a.logged(refused)) > 0 })
	if got := a.logged(refused); len(got) != 1 {
		t.Errorf("the log says of the rollback %q, want once that v2 is active", a.logged("rules topic"))
	}

	// A call's deploy of v3, and another version's record right after
	// it: the instance holds for v3's point (an hour ahead) when the
	// record after it comes.
	type answer struct {
		res *DeployResult
		err error
	}
	done := make(chan answer, 1)
	cctx, cancel := context.WithTimeout(ctx, 40*time.Second)
	defer cancel()
	go func() {
		res, err := a.m.Deploy(cctx, Deploy{Name: "v3.cep", Source: []byte(v3src)})
		done <- answer{res, err}
	}()
	waitFor(t, 20*time.Second, "v3's record in the rules topic", func() bool {
		_, e, ok := a.rulesTopicNewest(t, brokers, topic+"-rules")
		return ok && strings.Contains(e.Source, "amount > 400")
	})
	writeRulesRecord(t, brokers, topic+"-rules", rulesActive, record("v1.cep", deployV1, "grpc", ""))
	start := time.Now()
	select {
	case r := <-done:
		if !errors.Is(r.err, ErrSuperseded) || !strings.Contains(r.err.Error(), v1.Hash[:12]) {
			t.Errorf("the deploy of v3 answered %v, %v; want that v1 took its place", r.res, r.err)
		}
	case <-time.After(25 * time.Second):
		t.Fatalf("the deploy of v3, whose record another followed, has not answered after %v", time.Since(start))
	}
	waitFor(t, 30*time.Second, "instance a runs v1", func() bool { act, _ := versions(a.m); return act == v1.Hash && a.m.Ready() })
	if got := a.m.switchOf(v3.Hash, false, start.Add(-time.Minute)); got != nil {
		t.Errorf("instance a switched to v3: %+v", got)
	}
}

// rulesTopicNewest reads rules topic topic to its end: its newest record
// of the active key.
func (r *rulesTopicInstance) rulesTopicNewest(t *testing.T, brokers []string, topic string) (int64, rulesEntry, bool) {
	t.Helper()
	var e rulesEntry
	ok := false
	_, err := kafka.ReadRecords(context.Background(), kafka.Conn{Brokers: brokers}, topic, nil, nil, func(_ int32, rec kafka.SourceRecord) error {
		if string(rec.Key) == rulesActive && rec.Value != nil {
			if d, err := decodeRulesEntry(rec.Value); err == nil {
				e, ok = d, true
				e.Offset = rec.Offset
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return e.Offset, e, ok
}

// TestStreamKafkaRulesTopicCallWhilePending: a call taken while the rules
// topic holds a version the instance has not switched to yet (its switch
// point ahead of the watermark) is ABORTED (ErrSwitching), as one during
// a switch, before it is checked against the active version, which that
// record is about to replace: a deploy of the active version answered
// "unchanged" and was then undone by the switch, a call whose From named
// the pending version was refused (ErrNotActive). A rollback from v2, the
// active version, is refused so too (50b73ca), and once v3 is active,
// refused as not from the active one.
func TestStreamKafkaRulesTopicCallWhilePending(t *testing.T) {
	brokers := kafkaBrokers(t)
	lines := strings.SplitAfter(deployInput(300), "\n")
	topic := fmt.Sprintf("stream-kafka-rules-pending-%d", time.Now().UnixNano())
	produceTopic(t, brokers, topic, 3, strings.Join(lines, ""))
	v1, v2 := loadRules(t, deployV1), loadRules(t, deployV2Kafka)
	v3src := strings.Replace(deployV2Kafka, "amount > 450", "amount > 400", 1)
	v3 := loadRules(t, v3src)
	a := startRulesTopicInstance(t, brokers, topic, "a", filepath.Join(t.TempDir(), "state"))
	waitFor(t, 60*time.Second, "instance a ready", func() bool { return a.m.Ready() && a.m.Snapshot().Progress.Records == int64(len(lines)-1) })
	// v2 by hand, without a switch point: it switches at once.
	rec, err := json.Marshal(map[string]string{"name": "v2.cep", "source": deployV2Kafka})
	if err != nil {
		t.Fatal(err)
	}
	writeRulesRecord(t, brokers, topic+"-rules", rulesActive, rec)
	waitFor(t, 30*time.Second, "instance a runs v2", func() bool { act, _ := versions(a.m); return act == v2.Hash && a.m.Ready() })
	// v3 through a call: its switch point is rulesLead past the
	// watermark, which the read input never reaches: the instance holds
	// for rulesHoldMax, v3 pending in the topic meanwhile.
	ctx := context.Background()
	type answer struct {
		res *DeployResult
		err error
	}
	deployed := make(chan answer, 1)
	go func() {
		res, err := a.m.Deploy(ctx, Deploy{Source: []byte(v3src)})
		deployed <- answer{res, err}
	}()
	conn := kafka.Conn{Brokers: brokers}
	waitFor(t, 10*time.Second, "v3 published", func() bool {
		ends, err := kafka.EndOffsets(ctx, conn, topic+"-rules")
		return err == nil && ends[0] == 2
	})
	from := SwitchOptions{From: v2.Hash[:12]}
	if res, err := a.m.Rollback(ctx, from); !errors.Is(err, ErrSwitching) {
		t.Errorf("a rollback from v2 while v3 is pending: %+v, %v; want %v", res, err, ErrSwitching)
	}
	if res, err := a.m.Deploy(ctx, Deploy{Source: []byte(deployV1)}); !errors.Is(err, ErrSwitching) {
		t.Errorf("a deploy of v1 while v3 is pending: %+v, %v; want %v", res, err, ErrSwitching)
	}
	if res, err := a.m.Rollback(ctx, SwitchOptions{From: v3.Hash[:12]}); !errors.Is(err, ErrSwitching) {
		t.Errorf("a rollback from v3 while v3 is pending: %+v, %v; want %v", res, err, ErrSwitching)
	}
	// v2 is active, but not for long: "unchanged" would be false once
	// v3 switches.
	if res, err := a.m.Deploy(ctx, Deploy{Source: []byte(deployV2Kafka)}); !errors.Is(err, ErrSwitching) {
		t.Errorf("a deploy of v2, active, while v3 is pending: %+v, %v; want %v", res, err, ErrSwitching)
	}
	select {
	case d := <-deployed:
		if d.err != nil || d.res.Version != v3.Hash {
			t.Fatalf("the deploy of v3: %+v, %v; want v3 %.12s", d.res, d.err, v3.Hash)
		}
	case <-time.After(rulesHoldMax + 20*time.Second):
		t.Fatalf("the deploy of v3 has not switched in %v", rulesHoldMax+20*time.Second)
	}
	if res, err := a.m.Rollback(ctx, from); !errors.Is(err, ErrNotActive) {
		t.Errorf("the rollback from v2 sent again over v3: %+v, %v; want %v", res, err, ErrNotActive)
	}
	if act, _ := versions(a.m); act != v3.Hash {
		t.Errorf("active %.12s, want v3 %.12s (v1 %.12s)", act, v3.Hash, v1.Hash)
	}
}
