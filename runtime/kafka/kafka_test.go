package kafka

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// forEachCluster runs f against kfake, franz-go's in-process cluster, and
// against the real broker of CEPHEUS_KAFKA_BROKERS (see realBrokers), in
// parallel with the other tests that call it.
func forEachCluster(t *testing.T, f func(t *testing.T, brokers []string)) {
	t.Parallel()
	t.Run("kfake", func(t *testing.T) {
		t.Parallel()
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		f(t, c.ListenAddrs())
	})
	t.Run("kafka", func(t *testing.T) {
		t.Parallel()
		f(t, realBrokers(t))
	})
}

// realBrokers returns the brokers of CEPHEUS_KAFKA_BROKERS (comma-separated
// host:port). When it is unset the test fails under CI (make test starts a
// broker and sets it, and a test whose service is missing must fail there,
// not skip) and skips elsewhere, saying how to get a broker.
func realBrokers(t *testing.T) []string {
	t.Helper()
	s := os.Getenv("CEPHEUS_KAFKA_BROKERS")
	if s == "" {
		if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
			t.Fatal("CEPHEUS_KAFKA_BROKERS is not set and CI is: the Kafka tests need a broker (make test starts one with scripts/kafka.sh)")
		}
		t.Skip("no Kafka broker: make test starts one; or run scripts/kafka.sh start (make kafka-up) and set CEPHEUS_KAFKA_BROKERS to the address it prints")
	}
	return strings.Split(s, ",")
}

var topicSeq atomic.Int64

// topicName returns a topic name no other test or run uses: tests share
// the real broker, and topics are never deleted.
func topicName(t *testing.T) string {
	name := regexp.MustCompile(`[^a-zA-Z0-9._-]+`).ReplaceAllString(t.Name(), "-")
	return fmt.Sprintf("%s-%d-%d", name, time.Now().UnixNano(), topicSeq.Add(1))
}

// testContext returns a context that ends with the test or after a minute.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// readAll returns every record of topic, read uncommitted, control records
// left out; it stops once it has n.
func readAll(t *testing.T, brokers []string, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := testContext(t)
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("read %s: %v after %d of %d records", topic, err, len(out), n)
		}
		out = append(out, fs.Records()...)
	}
	return out
}
