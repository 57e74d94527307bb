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
	t.Helper()
	r := &rulesTopicInstance{t: t, m: NewStreamMonitor(), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	cfg := StreamConfig{
		Kafka: &KafkaInput{Brokers: brokers, Topic: topic, AlertsTopic: topic + "-alerts",
			Group: topic, InstanceID: inst, RulesTopic: topic + "-rules", SessionTimeout: 2 * time.Second},
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
// checkpoint, its input holding a backlog past the point: the restarted
// instance switches at the group's point, as every instance that reads
// the record before its watermark gets there. Before, its first batch
// carried its watermark past the point before it looked at the topic, and
// it switched where it was, its partitions cut at another watermark than
// the group's.
func TestStreamKafkaRulesTopicRestart(t *testing.T) {
	brokers := kafkaBrokers(t)
	lines := strings.SplitAfter(deployInput(600), "\n")
	half := len(lines) / 2
	topic := fmt.Sprintf("stream-kafka-rules-restart-%d", time.Now().UnixNano())
	produceTopic(t, brokers, topic, 3, strings.Join(lines[:half], ""))
	dir := filepath.Join(t.TempDir(), "state")
	a := startRulesTopicInstance(t, brokers, topic, "a", dir)
	first := lastEventTime(t, lines[:half])
	waitFor(t, 60*time.Second, "the instance past the first half's events", func() bool {
		return a.m.Ready() && a.m.Snapshot().Progress.Watermark >= first-event.Time(time.Minute/time.Millisecond)
	})
	a.stop()
	// The group's switch point: a minute into the second half, which the
	// instance has not read.
	point := lastEventTime(t, lines[:half+10])
	if point <= first {
		t.Fatalf("switch point %v is not after the first half (%v)", point, first)
	}
	v2 := loadRules(t, deployV2Kafka)
	rec, err := json.Marshal(rulesEntry{Name: "v2.cep", Source: deployV2Kafka, Origin: "grpc", At: time.Now().UTC(), Watermark: point})
	if err != nil {
		t.Fatal(err)
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
	if got := a.logged(fmt.Sprintf("(watermark %v, the group's switch point)", point)); len(got) != 1 {
		t.Errorf("the log says of the switch %q, want it at the group's switch point %v", a.logged("switched to"), point)
	}
}
