//go:build linux

package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/runtime/kafka"
)

// TestKafkaTxnLeftOpen leaves a transaction of a job's producer open in
// its alerts partition, as the brokers would if they appended records of
// a stopped run that no marker then ended (the suspect of the breach of
// TestKafkaStopBrokersFrozen, docs/kafka.md): one fake alert written as
// that producer's (its id and epoch, transactional, a sequence the
// partition takes) to a broker that does not check a transaction's
// partitions with its coordinator (transaction version 1, partition
// verification off: the one way to make such a record here). The next
// run's first transaction then holds it too (a leader counts a producer's
// records since its last marker into its current transaction, whatever
// their epoch): the check before its commit must abort it, the run
// restart from its checkpoint, and the alerts topic hold the backtest's
// alerts once each, not the fake one. Without the check, the fake alert
// is committed.
func TestKafkaTxnLeftOpen(t *testing.T) {
	kafkaBrokers(t)
	t.Parallel()
	brokers, _ := startOwnKafkaEnv(t, []string{
		"KAFKA_EXTRA_PROPERTIES=transaction.partition.verification.enable=false",
		"KAFKA_FORMAT_ARGS=--feature transaction.version=1",
	})
	bin := buildCepheus(t)
	dir := t.TempDir()
	job := newEOSJob(t, bin, dir, brokers, "txn-left-open")
	alerts := job.topic + "-alerts"
	args := []string{"run", "-rules", job.rules, "-brokers", brokers, "-input-topic", job.topic, "-bounded",
		"-alerts-topic", alerts, "-group", job.topic, "-state", filepath.Join(dir, "state"),
		"-checkpoint-interval", "200ms", "-progress", "1h"}
	// A first run stopped after its first commit: its final checkpoint
	// commits, no transaction is left open at its coordinator.
	c := startCommitted(t, bin, args)
	e := c.terminate(t, time.Minute)
	if e.code != 0 {
		t.Fatalf("the first run, stopped: %s\n%s", e.describe(), e.stderr)
	}
	fake := fmt.Sprintf("%032x", time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	off, err := kafka.WriteLeftOpen(ctx, kafka.Conn{Brokers: []string{brokers}}, "cepheus-"+job.topic+"-0", alerts, 0,
		[]byte("card_left_open"), fmt.Appendf(nil, `{"alert_id":%q,"rule":"left_open"}`, fake))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a fake alert left open in %s-0 at offset %d", alerts, off)
	e = runChild(t, bin, args, "", 0)
	if e.killed || e.code != 0 {
		t.Fatalf("the run after: %s\n%s", e.describe(), e.stderr)
	}
	if !strings.Contains(e.stderr, "holds records of producer") || !strings.Contains(e.stderr, "restarting from the last committed checkpoint") {
		t.Errorf("the run after did not say it aborted a transaction over the one left open and restarted:\n%s", e.stderr)
	}
	got := alertIDSet(t, consumeTopic(t, bin, brokers, alerts))
	if got[fake] != 0 {
		t.Errorf("the alert of the transaction left open was committed (%d times) by the run after it", got[fake])
	}
	if d := job.want.diff(got); d != "" {
		t.Errorf("the alerts topic (read_committed) differs from the backtest: %s\nthe run after:\n%s", d, e.stderr)
	}
}
