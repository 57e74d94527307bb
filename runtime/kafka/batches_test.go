package kafka

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestBatches lists a partition holding a committed transaction, an
// aborted one and one left open: their records with the producer id and
// epoch, and the markers, as the brokers keep them.
func TestBatches(t *testing.T) {
	brokers := realBrokers(t)
	t.Parallel()
	ctx := testContext(t)
	topic, group := topicName(t), topicName(t)+"-g"
	if _, err := EnsureTopics(ctx, Conn{Brokers: brokers}, []TopicSpec{{Name: topic, Partitions: 1}}); err != nil {
		t.Fatal(err)
	}
	c := TxnConfig{Brokers: brokers, TransactionalID: topicName(t) + "-txn", Group: group, Timeout: 30 * time.Second, Manual: []string{topic}}
	tx, err := NewTxn(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	produce := func(n int) {
		for i := range n {
			tx.ProduceTo(ctx, topic, 0, nil, fmt.Appendf(nil, "v%d", i))
			if err := tx.cl.Flush(ctx); err != nil { // one batch each
				t.Fatal(err)
			}
		}
	}
	produce(2)
	if err := tx.CommitTopics(ctx, nil, ""); err != nil {
		t.Fatal(err)
	}
	committed, _, err := tx.cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	produce(1)
	if err := tx.Abort(ctx, errors.New("on purpose")); !errors.Is(err, ErrTxn) {
		t.Fatalf("Abort: %v, want ErrTxn", err)
	}
	tx.Close()
	open, err := NewTxn(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	tx = open
	produce(1)

	got, err := LogBatches(ctx, Conn{Brokers: brokers}, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		first, last int64
		marker      string
	}{{0, 0, ""}, {1, 1, ""}, {2, 2, "commit"}, {3, 3, ""}, {4, 4, "abort"}, {5, 5, ""}}
	if len(got) != len(want) {
		t.Fatalf("%d batches %v, want %d", len(got), got, len(want))
	}
	for i, w := range want {
		b := got[i]
		if b.First != w.first || b.Last != w.last || b.Marker != w.marker || !b.Transactional || b.ProducerID != committed {
			t.Errorf("batch %d = %v (transactional %v), want offsets %d-%d, marker %q, transactional, of producer %d", i, b, b.Transactional, w.first, w.last, w.marker, committed)
		}
		if w.marker == "" && b.Records != 1 {
			t.Errorf("batch %d holds %d records, want 1", i, b.Records)
		}
	}
	// Each transaction's records are of one epoch, and a later
	// transaction's of a later one (a new producer, or a new epoch per
	// transaction under transaction version 2).
	if got[0].ProducerEpoch != got[1].ProducerEpoch || got[3].ProducerEpoch <= got[1].ProducerEpoch || got[5].ProducerEpoch <= got[3].ProducerEpoch {
		t.Errorf("epochs of the transactions' records: %v", got)
	}
	// The open transaction, as its coordinator and its partition hold it.
	d := DescribeTxn(ctx, Conn{Brokers: brokers}, c.TransactionalID, topic)
	for _, w := range []string{
		fmt.Sprintf("Ongoing, producer %d epoch %d, partitions [%s-0]", committed, got[5].ProducerEpoch, topic),
		fmt.Sprintf("%s-0 holds a transaction open from offset 5, producer %d epoch %d", topic, committed, got[5].ProducerEpoch),
	} {
		if !strings.Contains(d, w) {
			t.Errorf("DescribeTxn = %q, want it to say %q", d, w)
		}
	}
	if err := open.CommitTopics(ctx, nil, ""); err != nil {
		t.Fatal(err)
	}
	// The commit's marker is written after the commit answers.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		d := DescribeTxn(ctx, Conn{Brokers: brokers}, c.TransactionalID, topic)
		if strings.Contains(d, "no partition of ["+topic+"] holds a transaction open") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("DescribeTxn 10 s after the commit = %q, want no transaction open", d)
		}
	}
	if _, err := LogBatches(ctx, Conn{Brokers: brokers}, topic, 3); err == nil {
		t.Error("Batches of a partition the topic lacks: no error")
	}
}

// TestWriteLeftOpenRefused checks that a broker verifying a transaction's
// partitions with its coordinator (the default) refuses WriteLeftOpen's
// record, and that nothing is left in the partition (cmd/cepheus
// TestKafkaTxnLeftOpen writes one to a broker that does not verify).
func TestWriteLeftOpenRefused(t *testing.T) {
	brokers := realBrokers(t)
	t.Parallel()
	ctx := testContext(t)
	topic := topicName(t)
	if _, err := EnsureTopics(ctx, Conn{Brokers: brokers}, []TopicSpec{{Name: topic, Partitions: 1}}); err != nil {
		t.Fatal(err)
	}
	c := TxnConfig{Brokers: brokers, TransactionalID: topicName(t) + "-txn", Group: topicName(t) + "-g", Timeout: 30 * time.Second, Manual: []string{topic}}
	tx, err := NewTxn(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	tx.ProduceTo(ctx, topic, 0, nil, []byte("committed"))
	if err := tx.CommitTopics(ctx, nil, ""); err != nil {
		t.Fatal(err)
	}
	tx.Close()
	if off, err := WriteLeftOpen(ctx, Conn{Brokers: brokers}, c.TransactionalID, topic, 0, nil, []byte("left")); err == nil {
		t.Fatalf("WriteLeftOpen to a verifying broker: written at offset %d, want it refused", off)
	}
	d := DescribeTxn(ctx, Conn{Brokers: brokers}, c.TransactionalID, topic)
	if !strings.Contains(d, "no partition of ["+topic+"] holds a transaction open") {
		t.Fatalf("after the refused write: %s", d)
	}
}

// TestEnsureTopicsAnyCount: a topic of AnyCount is made with Partitions,
// and one that exists is taken whatever its count; without AnyCount
// another count is ErrPartitionCount.
func TestEnsureTopicsAnyCount(t *testing.T) {
	brokers := realBrokers(t)
	t.Parallel()
	ctx := testContext(t)
	topic := topicName(t)
	conn := Conn{Brokers: brokers}
	if n, err := EnsureTopics(ctx, conn, []TopicSpec{{Name: topic, Partitions: 3, AnyCount: true}}); err != nil || n[0] != 3 {
		t.Fatalf("made with 3 partitions: %v, %v", n, err)
	}
	if n, err := EnsureTopics(ctx, conn, []TopicSpec{{Name: topic, Partitions: 5, AnyCount: true}}); err != nil || n[0] != 3 {
		t.Errorf("an existing topic of 3 partitions, asked with 5 and any count: %v, %v; want it taken, 3", n, err)
	}
	if _, err := EnsureTopics(ctx, conn, []TopicSpec{{Name: topic, Partitions: 5}}); !errors.Is(err, ErrPartitionCount) {
		t.Errorf("an existing topic of 3 partitions, asked with 5: %v, want ErrPartitionCount", err)
	}
}
