package kafka

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestConsumeReadCommitted: by default Consume shows committed records
// only, and returns although a transaction is still open (it reads up to
// the last stable offset); read uncommitted shows every record.
func TestConsumeReadCommitted(t *testing.T) {
	forEachCluster(t, func(t *testing.T, brokers []string) {
		ctx := testContext(t)
		topic := topicName(t)
		if _, err := Produce(ctx, ProduceConfig{Brokers: brokers, Topic: topic, Partitions: 2},
			strings.NewReader("plain 1\nplain 2\n")); err != nil {
			t.Fatal(err)
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic), kgo.TransactionalID(topic),
			kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		// begin opens a transaction and writes values into it.
		begin := func(values ...string) {
			t.Helper()
			if err := cl.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			for i, v := range values {
				// Both partitions, so each has a marker to read past.
				r := &kgo.Record{Value: []byte(v), Partition: int32(i % 2)}
				if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			if err := cl.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
		end := func(how kgo.TransactionEndTry) {
			t.Helper()
			if err := cl.EndTransaction(ctx, how); err != nil {
				t.Fatal(err)
			}
		}
		begin("committed 1", "committed 2", "committed 3")
		end(kgo.TryCommit)
		begin("aborted 1", "aborted 2")
		end(kgo.TryAbort)
		begin("open 1", "open 2")

		consume := func(uncommitted bool, want ...string) {
			t.Helper()
			var out bytes.Buffer
			began := time.Now()
			if _, err := Consume(ctx, ConsumeConfig{Brokers: brokers, Topic: topic, Idle: 500 * time.Millisecond, ReadUncommitted: uncommitted}, &out); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(began); d > 20*time.Second {
				t.Errorf("Consume took %v with an idle of 500ms", d)
			}
			sameLines(t, out.String(), want)
		}
		consume(false, "plain 1", "plain 2", "committed 1", "committed 2", "committed 3")
		consume(true, "plain 1", "plain 2", "committed 1", "committed 2", "committed 3", "aborted 1", "aborted 2", "open 1", "open 2")
		end(kgo.TryCommit)
		consume(false, "plain 1", "plain 2", "committed 1", "committed 2", "committed 3", "open 1", "open 2")
	})
}

// TestConsumeWaits: records that come within the idle time are read.
func TestConsumeWaits(t *testing.T) {
	forEachCluster(t, func(t *testing.T, brokers []string) {
		ctx := testContext(t)
		topic := topicName(t)
		if _, err := Produce(ctx, ProduceConfig{Brokers: brokers, Topic: topic}, strings.NewReader("early\n")); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			time.Sleep(300 * time.Millisecond)
			_, err := Produce(ctx, ProduceConfig{Brokers: brokers, Topic: topic}, strings.NewReader("late\n"))
			done <- err
		}()
		var out bytes.Buffer
		if _, err := Consume(ctx, ConsumeConfig{Brokers: brokers, Topic: topic, Idle: 2 * time.Second}, &out); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		sameLines(t, out.String(), []string{"early", "late"})
	})
}

func TestConsumeNoTopic(t *testing.T) {
	forEachCluster(t, func(t *testing.T, brokers []string) {
		_, err := Consume(testContext(t), ConsumeConfig{Brokers: brokers, Topic: topicName(t)}, &bytes.Buffer{})
		if !errors.Is(err, ErrNoTopic) {
			t.Errorf("Consume of a missing topic: %v, want ErrNoTopic", err)
		}
	})
}

// TestNoTopicWording: every call that meets a missing topic says so in
// the same words, naming the topic once.
func TestNoTopicWording(t *testing.T) {
	forEachCluster(t, func(t *testing.T, brokers []string) {
		ctx := testContext(t)
		topic := topicName(t)
		want := "topic " + topic + ": kafka: no such topic"
		_, errCount := PartitionCount(ctx, Conn{Brokers: brokers}, topic)
		_, errEnd := EndOffsets(ctx, Conn{Brokers: brokers}, topic)
		for name, err := range map[string]error{"PartitionCount": errCount, "EndOffsets": errEnd} {
			if !errors.Is(err, ErrNoTopic) || err.Error() != want {
				t.Errorf("%s of a missing topic: %v, want %q", name, err, want)
			}
		}
	})
}

func TestConsumeCancel(t *testing.T) {
	forEachCluster(t, func(t *testing.T, brokers []string) {
		ctx := testContext(t)
		topic := topicName(t)
		if _, err := Produce(ctx, ProduceConfig{Brokers: brokers, Topic: topic}, strings.NewReader("a\n")); err != nil {
			t.Fatal(err)
		}
		// Cancelled once the record is written (a fixed deadline was a
		// race with a slow machine: under -race the record sometimes came
		// after it).
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		out := &cancelOnWrite{cancel: cancel}
		res, err := Consume(cctx, ConsumeConfig{Brokers: brokers, Topic: topic, Idle: time.Minute}, out)
		if !errors.Is(err, context.Canceled) || res.Records != 1 || out.String() != "a\n" {
			t.Errorf("Consume cancelled: %+v, %v, %q; want the record and the context's error", res, err, out.String())
		}
	})
}

// cancelOnWrite keeps what is written and cancels a context once written
// to.
type cancelOnWrite struct {
	bytes.Buffer
	cancel context.CancelFunc
}

func (w *cancelOnWrite) Write(p []byte) (int, error) {
	defer w.cancel()
	return w.Buffer.Write(p)
}

func TestConsumeConfigValidate(t *testing.T) {
	err := ConsumeConfig{Idle: -time.Second}.Validate()
	for _, want := range []string{"no brokers given", "no topic given", "idle -1s is negative"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to say %q", err, want)
		}
	}
}
