//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCrashRecoveryKafka is TestCrashRecovery over a Kafka topic: the
// crash input (generated events with malformed lines and late events)
// produced into six partitions keyed by card_id and read with
// -input-topic -bounded. cepheus run is killed at failpoints and at
// random moments and restarted, with other parallelism and backends,
// until it finishes: the committed alerts, late events and dead letters
// equal an uninterrupted run's over the topic (nothing lost, nothing
// twice), and its alert ids equal cepheus backtest's over the file.
func TestCrashRecoveryKafka(t *testing.T) {
	brokers := os.Getenv("CEPHEUS_KAFKA_BROKERS")
	if brokers == "" {
		if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
			t.Fatal("CEPHEUS_KAFKA_BROKERS is not set and CI is: make test starts a broker for this test")
		}
		t.Skip("no Kafka broker: make test starts one; or scripts/kafka.sh start and set CEPHEUS_KAFKA_BROKERS")
	}
	seed := crashSeed(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s=%d go test ./cmd/cepheus -run 'TestCrashRecoveryKafka' reproduces this run", crashSeedEnv, seed)
		}
	})
	s := &crashSuite{bin: buildCepheus(t), rules: "../../rulesets/cards.cep", seed: seed}
	dir := t.TempDir()
	events, inj := crashInput(t, s.bin, dir, seed)
	backtest := s.backtest(t, dir, events, inj)
	topic := fmt.Sprintf("crash-%d-%d", seed, time.Now().UnixNano())
	e := runChild(t, s.bin, []string{"produce", "-brokers", brokers, "-topic", topic, "-partitions", "6",
		"-key", "card_id", "-events", events}, "", 0)
	if e.killed || e.code != 0 {
		t.Fatalf("cepheus produce: %s\n%s", e.describe(), e.tail())
	}
	var parts []string
	for p := range 6 {
		parts = append(parts, fmt.Sprintf("%s-%d", topic, p))
	}
	s.kafka = &crashReference{topic: topic, files: parts}
	s.uninterrupted(t, s.kafka, filepath.Join(dir, "uninterrupted"))
	if got, want := s.kafka.want.alertIDs, backtest.alertIDs; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("an uninterrupted run over the topic has %d alert ids, the backtest over the file %d (or they differ)",
			sum(got), sum(want))
	}
	if t.Failed() {
		t.FailNow()
	}
	const mem, peb = "memory", "pebble"
	r := crashRand(seed, 2)
	scenarios := []crashScenario{
		{name: "kafka/barrier.after@2", kafka: true, steps: []crashConfig{crashAt(2, mem, "barrier.after@2")}, final: crashDone(3, peb)},
		{name: "kafka/snapshot.mid", kafka: true, steps: []crashConfig{crashAt(3, peb, "snapshot.mid")}, final: crashDone(1, mem)},
		{name: "kafka/checkpoint.complete@2", kafka: true, steps: []crashConfig{crashAt(1, mem, "checkpoint.complete@2")}, final: crashDone(2, mem)},
		{name: "kafka/barrier.before@3", kafka: true, steps: []crashConfig{crashAt(3, mem, "barrier.before@3")}, final: crashDone(2, peb)},
		{name: "kafka/checkpoint.renamed@2", kafka: true, steps: []crashConfig{crashAt(2, peb, "checkpoint.renamed@2")}, final: crashDone(3, mem)},
		{name: "kafka/sink.precommit.renamed@2", kafka: true, steps: []crashConfig{
			crashAt(1, mem, "sink.precommit.renamed@2"), crashAt(2, mem, "sink.recover.deleted"),
		}, final: crashDone(1, peb)},
		{name: "kafka/commit.before-sinks@3", kafka: true, steps: []crashConfig{
			crashAt(2, peb, "commit.before-sinks@3"), crashAt(1, peb, "sink.recover.renamed"),
		}, final: crashDone(2, peb)},
	}
	// Kills at random moments, early in each start (a restart has less
	// to read than the one before).
	for i := range 3 {
		random := crashScenario{name: fmt.Sprintf("kafka/random/%d", i+1), kafka: true, final: crashDone(2, mem)}
		for range 4 {
			c := crashDone(1+r.IntN(3), []string{mem, peb}[r.IntN(2)])
			c.interval, c.records = crashInterval, 0
			c.killAfter = 20*time.Millisecond + time.Duration(r.Int64N(int64(max(s.kafka.run/3, 30*time.Millisecond))))
			random.steps = append(random.steps, c)
		}
		scenarios = append(scenarios, random)
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) { s.chain(t, sc) })
	}
	t.Logf("%d scenarios, %d kill points (seed %d): %s", s.ran, len(s.kills), seed, strings.Join(s.kills, ", "))
	if s.ran == len(scenarios) && len(s.kills) < 10 {
		t.Errorf("%d kill points, want at least 10", len(s.kills))
	}
}
