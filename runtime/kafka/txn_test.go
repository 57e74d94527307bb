package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTxnCommitAndFence commits records and a group's offsets in one
// transaction, then leaves a second transaction open, as a killed
// instance does: a new Txn of the same transactional id fences it and its
// records never become visible, while the committed ones and the offsets
// (with their metadata) stay.
func TestTxnCommitAndFence(t *testing.T) {
	brokers := realBrokers(t)
	t.Parallel()
	ctx := testContext(t)
	in, out, cl := topicName(t)+"-in", topicName(t)+"-out", topicName(t)+"-cl"
	group, id := topicName(t)+"-g", topicName(t)+"-txn"
	if _, err := EnsureTopics(ctx, Conn{Brokers: brokers}, []TopicSpec{{Name: in, Partitions: 2}, {Name: out, Partitions: 3}, {Name: cl, Partitions: 2, Compact: true}}); err != nil {
		t.Fatal(err)
	}
	c := TxnConfig{Brokers: brokers, TransactionalID: id, Group: group, Timeout: 30 * time.Second, Manual: []string{cl}}
	a, err := NewTxn(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		a.Produce(ctx, out, fmt.Appendf(nil, "k%d", i), fmt.Appendf(nil, "committed-%d", i))
	}
	a.ProduceTo(ctx, cl, 1, []byte("state"), []byte("v1"))
	if err := a.Commit(ctx, in, Offsets{0: 42, 1: 7}, "chk=1"); err != nil {
		t.Fatal(err)
	}
	// The second transaction is left open: no commit, no abort.
	for i := range 5 {
		a.Produce(ctx, out, fmt.Appendf(nil, "k%d", i), fmt.Appendf(nil, "open-%d", i))
	}
	if err := a.cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := NewTxn(ctx, c) // fences a; the broker aborts a's open transaction
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	got, err := GroupOffsets(ctx, Conn{Brokers: brokers}, group, in)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != (Committed{42, "chk=1"}) || got[1] != (Committed{7, "chk=1"}) {
		t.Fatalf("group offsets = %v, want 0:42 and 1:7 with metadata chk=1", got)
	}
	values := readValues(t, brokers, out)
	if len(values) != 10 {
		t.Fatalf("read_committed: %d records %v, want the 10 committed ones", len(values), values)
	}
	for _, v := range values {
		if len(v) < 9 || v[:9] != "committed" {
			t.Fatalf("record %q of the fenced transaction is visible", v)
		}
	}
	var state []string
	if err := ReadTopic(ctx, Conn{Brokers: brokers}, cl, func(p int32, k, v []byte) error {
		state = append(state, fmt.Sprintf("%d/%s=%s", p, k, v))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(state) != 1 || state[0] != "1/state=v1" {
		t.Fatalf("changelog = %v, want [1/state=v1]", state)
	}
	// The fenced producer cannot commit, and is told it was fenced.
	if err := a.Commit(ctx, in, Offsets{0: 50}, "chk=2"); !errors.Is(err, ErrTxn) || !errors.Is(err, ErrFenced) || errors.Is(err, ErrEpochOver) || errors.Is(err, ErrTimedOut) {
		t.Fatalf("commit of the fenced producer: %v, want ErrTxn and ErrFenced", err)
	}
	a.Close()
	got, err = GroupOffsets(ctx, Conn{Brokers: brokers}, group, in)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Offset != 42 {
		t.Fatalf("the fenced commit moved the offset to %d", got[0].Offset)
	}
	// Each record says which producer, and which epoch of it, wrote it:
	// a's committed records one epoch, b's a later one of the same id.
	b.Produce(ctx, out, []byte("k"), []byte("second"))
	if err := b.Commit(ctx, in, Offsets{0: 50}, "chk=2"); err != nil {
		t.Fatal(err)
	}
	epochs := map[string]int16{}
	ids := map[int64]bool{}
	if _, err := ReadRecords(ctx, Conn{Brokers: brokers}, out, nil, nil, func(_ int32, r SourceRecord) error {
		ids[r.ProducerID] = true
		epochs[string(r.Value[:6])] = r.ProducerEpoch
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || ids[-1] || len(epochs) != 2 || epochs["second"] <= epochs["commit"] {
		t.Fatalf("the records' producers %v and epochs %v: want one producer id, b's epoch after a's", ids, epochs)
	}
}

// TestGroupOffsetsNone: a group that never committed has no offsets.
func TestGroupOffsetsNone(t *testing.T) {
	brokers := realBrokers(t)
	t.Parallel()
	got, err := GroupOffsets(testContext(t), Conn{Brokers: brokers}, topicName(t), "input")
	if err != nil || len(got) != 0 {
		t.Fatalf("GroupOffsets of a new group = %v, %v; want none", got, err)
	}
}

// TestFirstCommitSeen: the offsets of a group's first commit are seen by
// a reader right after the commit returns. The broker writes the commit's
// markers after EndTxn answers, and until then the group did not exist
// for a reader (no offsets, where a group that exists answers
// UnstableOffsetCommit and is waited for): about one new group in fifty
// read so, and a job started right after a bounded job's final commit
// took the group for one that never committed.
func TestFirstCommitSeen(t *testing.T) {
	brokers := realBrokers(t)
	t.Parallel()
	ctx := testContext(t)
	in := topicName(t)
	if _, err := EnsureTopics(ctx, Conn{Brokers: brokers}, []TopicSpec{{Name: in, Partitions: 1}}); err != nil {
		t.Fatal(err)
	}
	missed := 0
	for i := range 150 {
		group := fmt.Sprintf("%s-g%d", in, i)
		txn, err := NewTxn(ctx, TxnConfig{Brokers: brokers, TransactionalID: group + "-txn", Group: group})
		if err != nil {
			t.Fatal(err)
		}
		txn.Produce(ctx, in, nil, []byte("x"))
		err = txn.Commit(ctx, in, Offsets{0: 5}, "chk=1")
		txn.Close()
		if err != nil {
			t.Fatal(err)
		}
		got, err := GroupOffsets(ctx, Conn{Brokers: brokers}, group, in)
		if err != nil {
			t.Fatal(err)
		}
		if got[0] != (Committed{5, "chk=1"}) {
			missed++
		}
	}
	if missed > 0 {
		t.Fatalf("%d of 150 new groups read right after their first commit: no offsets, want 0:5 with metadata chk=1", missed)
	}
}

func TestKeyPartition(t *testing.T) {
	// murmur2 as the Java client computes it: "card-1" and the partition
	// counts of the project's topics.
	for _, n := range []int{1, 6} {
		p := KeyPartition([]byte("card-1"), n)
		if p < 0 || int(p) >= n {
			t.Fatalf("KeyPartition(card-1, %d) = %d", n, p)
		}
		if q := KeyPartition([]byte("card-1"), n); q != p {
			t.Fatalf("KeyPartition is not stable: %d then %d", p, q)
		}
	}
}

// fakeBrokers listens on a loopback port until the test ends and returns
// its address as the brokers: every connection is held and never answered
// (hold), or closed at once (what a TLS listener does to a plaintext
// client).
func fakeBrokers(t *testing.T, hold bool) []string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		var held []net.Conn // accepted and never answered
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if hold {
				held = append(held, c)
			} else {
				c.Close()
			}
		}
	}()
	return []string{ln.Addr().String()}
}

// startCalls are the calls with which a command or a job's start reaches
// brokers, by name, each on topic "t".
func startCalls(brokers []string) map[string]func(ctx context.Context) error {
	c := Conn{Brokers: brokers}
	return map[string]func(ctx context.Context) error{
		"PartitionCount": func(ctx context.Context) error {
			_, err := PartitionCount(ctx, c, "t")
			return err
		},
		// The produce and consume commands: the client alone gave an i/o
		// timeout after 40 and 60 s.
		"Produce": func(ctx context.Context) error {
			_, err := Produce(ctx, ProduceConfig{Brokers: brokers, Topic: "t"}, strings.NewReader("{}\n"))
			return err
		},
		"Consume": func(ctx context.Context) error {
			_, err := Consume(ctx, ConsumeConfig{Brokers: brokers, Topic: "t", Idle: time.Second}, io.Discard)
			return err
		},
		// A job's start: the input's and the changelog's offsets, the
		// changelog's retention, its topics. A broker away answered
		// these with "unable to dial" at once, failing the start.
		"ReadPartitions": func(ctx context.Context) error {
			_, err := ReadPartitions(ctx, c, "t", []int32{0}, nil, func(int32, []byte, []byte) error { return nil })
			return err
		},
		"StartOffsets": func(ctx context.Context) error { _, err := StartOffsets(ctx, c, "t"); return err },
		"DeleteRetention": func(ctx context.Context) error {
			_, err := DeleteRetention(ctx, c, "t")
			return err
		},
		"EnsureTopics": func(ctx context.Context) error {
			_, err := EnsureTopics(ctx, c, []TopicSpec{{Name: "t"}})
			return err
		},
	}
}

// timed calls f with a context of a minute and returns how long it took
// and its error.
func timed(f func(ctx context.Context) error) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	begin := time.Now()
	err := f(ctx)
	return time.Since(begin), err
}

// withTransientFor sets transientFor to d until the test ends.
func withTransientFor(t *testing.T, d time.Duration) {
	saved := transientFor
	transientFor = d
	t.Cleanup(func() { transientFor = saved })
}

// TestPartitionCountNoAnswer: brokers that accept connections and never
// answer fail PartitionCount (and every other call a command or a job's
// start makes) once transientFor has passed, saying so, rather than keep
// it waiting (it waited for the context).
func TestPartitionCountNoAnswer(t *testing.T) {
	withTransientFor(t, 2*time.Second)
	for what, f := range startCalls(fakeBrokers(t, true)) {
		if took, err := timed(f); err == nil || !strings.Contains(err.Error(), "no answer from the brokers within 2s") || took > 15*time.Second {
			t.Errorf("%s against brokers that never answer: %v after %v; want no answer within 2s, at once then", what, err, took.Round(time.Millisecond))
		}
	}
}

// TestFirstCallMisconfigured: a listener that closes every connection at
// once (what a TLS listener does to a plaintext client, or a SASL one to a
// client without SASL) fails the calls that open a command or a job
// after misconfiguredFor (2 s; a broker dying closes one connection so,
// TestFirstCallBrokerDying), naming franz-go's first-read EOF: it is a
// setting's fault, not brokers away to wait transientFor for (a source's
// opening waited 45 s for it once its listings were retried).
//
// The wait for brokers away (transientFor) is 50 s here and the bound 30 s:
// a call that took the closes for brokers away would take 50 s at least,
// while one that knows them takes misconfiguredFor and franz-go's retries
// after it, which a loaded machine stretches (a CI run with the other
// packages beside it: 13.5 s, past the 10 s bound this test had).
func TestFirstCallMisconfigured(t *testing.T) {
	withTransientFor(t, 50*time.Second)
	calls := startCalls(fakeBrokers(t, false))
	for _, what := range []string{"PartitionCount", "ReadPartitions", "EnsureTopics"} {
		if took, err := timed(calls[what]); !errors.As(err, new(*kgo.ErrFirstReadEOF)) || took > 30*time.Second {
			t.Errorf("%s against a listener that closes every connection: %v after %v; want franz-go's first-read EOF well before the 50 s wait for brokers away", what, err, took.Round(time.Millisecond))
		}
	}
}

// TestFirstCallBrokerDying: a start's call whose first connection the
// broker closes at once, as a broker killed as the call reached it does,
// and whose next connections it serves, succeeds: such a close was taken
// for a setting's fault at once (is SASL missing?), and a job started as
// a broker of its cluster died failed (TestExactlyOnceKafkaBrokerFailure
// in CI). A listener that closes every connection is still refused
// (TestFirstCallMisconfigured).
func TestFirstCallBrokerDying(t *testing.T) {
	brokers := realBrokers(t)
	t.Parallel()
	ctx := testContext(t)
	topic := topicName(t)
	if _, err := EnsureTopics(ctx, Conn{Brokers: brokers}, []TopicSpec{{Name: topic, Partitions: 2}}); err != nil {
		t.Fatal(err)
	}
	for _, what := range []string{"PartitionCount", "EnsureTopics"} {
		proxy := closingProxy(t, brokers[0], 1)
		var err error
		switch what {
		case "PartitionCount":
			var n int
			if n, err = PartitionCount(ctx, Conn{Brokers: []string{proxy}}, topic); err == nil && n != 2 {
				t.Errorf("PartitionCount through the proxy: %d, want 2", n)
			}
		case "EnsureTopics":
			_, err = EnsureTopics(ctx, Conn{Brokers: []string{proxy}}, []TopicSpec{{Name: topic + "-" + what, Partitions: 1}})
		}
		if err != nil {
			t.Errorf("%s, its first connection closed at once, the next served: %v", what, err)
		}
	}
}

// closingProxy listens on a loopback port, closes the first n connections
// at once and forwards the others to broker.
func closingProxy(t *testing.T, broker string, n int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for i := 0; ; i++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if i < n {
				c.Close()
				continue
			}
			b, err := net.Dial("tcp", broker)
			if err != nil {
				c.Close()
				continue
			}
			go func() { io.Copy(b, c); b.Close() }()
			go func() { io.Copy(c, b); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

// TestEnsureTopicsPurged: a topic whose records are deleted once read
// (the repartition topics) is made with segments of 50 MiB or 10 minutes,
// so that the deletion frees the brokers' disk: with the default
// segments (1 GiB, 7 days) nothing would be freed before a gigabyte of a
// partition had been read. The other topics keep the broker's segments.
func TestEnsureTopicsPurged(t *testing.T) {
	brokers := realBrokers(t)
	t.Parallel()
	ctx := testContext(t)
	purged, plain, compacted := topicName(t)+"-rep", topicName(t)+"-out", topicName(t)+"-changelog"
	if _, err := EnsureTopics(ctx, Conn{Brokers: brokers}, []TopicSpec{{Name: purged, Partitions: 2, Purged: true}, {Name: plain}, {Name: compacted, Compact: true}}); err != nil {
		t.Fatal(err)
	}
	cl, err := Conn{Brokers: brokers}.newClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rcs, err := kadm.NewClient(cl).DescribeTopicConfigs(ctx, purged, plain, compacted)
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]map[string]string{} // topic -> the configs set on it
	for _, rc := range rcs {
		if rc.Err != nil {
			t.Fatalf("%s: %v", rc.Name, rc.Err)
		}
		set[rc.Name] = map[string]string{}
		for _, c := range rc.Configs {
			if c.Value != nil && c.Source == kmsg.ConfigSourceDynamicTopicConfig {
				set[rc.Name][c.Key] = *c.Value
			}
		}
	}
	want := map[string]string{"retention.ms": "-1", "segment.bytes": "52428800", "segment.ms": "600000"}
	for k, v := range want {
		if got := set[purged][k]; got != v {
			t.Errorf("%s of the purged topic = %q, want %q", k, got, v)
		}
	}
	want = map[string]string{"retention.ms": "-1", "cleanup.policy": "compact", "segment.bytes": "67108864", "segment.ms": "3600000"}
	for k, v := range want {
		if got := set[compacted][k]; got != v {
			t.Errorf("%s of the compacted topic = %q, want %q", k, got, v)
		}
	}
	for _, k := range []string{"segment.bytes", "segment.ms"} {
		if v, ok := set[plain][k]; ok {
			t.Errorf("%s of a topic that is not purged = %q, want the broker's", k, v)
		}
	}
}

// TestDeleteRetention reads a compacted topic's delete.retention.ms (the
// brokers' default, 24 h, then a value of its own), and fails for a topic
// that does not exist.
func TestDeleteRetention(t *testing.T) {
	brokers := realBrokers(t)
	t.Parallel()
	ctx := testContext(t)
	c := Conn{Brokers: brokers}
	topic := topicName(t) + "-changelog"
	if _, err := EnsureTopics(ctx, c, []TopicSpec{{Name: topic, Partitions: 1, Compact: true}}); err != nil {
		t.Fatal(err)
	}
	if d, err := DeleteRetention(ctx, c, topic); err != nil || d != 24*time.Hour {
		t.Errorf("DeleteRetention of a new compacted topic: %v, %v; want the brokers' default 24h", d, err)
	}
	cl, err := c.newClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	set := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "delete.retention.ms", Value: new("3600000")}}
	if rs, err := kadm.NewClient(cl).AlterTopicConfigs(ctx, set, topic); err != nil || rs[0].Err != nil {
		t.Fatalf("altering delete.retention.ms: %v %v", err, rs)
	}
	// The broker that answers may learn of the change a moment after the
	// controller took it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		d, err := DeleteRetention(ctx, c, topic)
		if err == nil && d == time.Hour {
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("DeleteRetention after setting 1h: %v, %v (for 10 s)", d, err)
		}
	}
	// A topic that does not exist is said at once, not retried as one
	// being made would be (45 s).
	none := topic + "-none"
	for what, f := range map[string]func() error{
		"DeleteRetention": func() error { _, err := DeleteRetention(ctx, c, none); return err },
		"StartOffsets":    func() error { _, err := StartOffsets(ctx, c, none); return err },
		"EndOffsets":      func() error { _, err := EndOffsets(ctx, c, none); return err },
	} {
		begin := time.Now()
		if err := f(); !errors.Is(err, ErrNoTopic) || time.Since(begin) > 10*time.Second {
			t.Errorf("%s of a topic that does not exist: %v after %v; want ErrNoTopic at once", what, err, time.Since(begin).Round(time.Millisecond))
		}
	}
}

// TestGroupOffsetsPendingTxn: offsets a transaction holds are waited for
// by GroupOffsets, and by a Source started from the group's offsets,
// until the transaction ends, however long it lasts (up to the broker's
// longest transaction); CommittedOffsets answers at once with the offsets
// of before. Both failed after transientFor, 45 s, with "no answer from
// the brokers" (franz-go retried the unstable answer until the wait for
// brokers away ran out): an instance of a group whose neighbour was
// paused or killed amid its commit stopped.
func TestGroupOffsetsPendingTxn(t *testing.T) {
	brokers := realBrokers(t)
	ctx := testContext(t)
	in := topicName(t)
	conn := Conn{Brokers: brokers}
	txn, tc := heldTxn(t, brokers, in, 0, 5, 6)
	group := tc.Group
	// Shorter than the transaction stays open; set once the transaction
	// is open, not before: on a broker just started, the first producer
	// id and commit take longer than a second (the coordinators load).
	withTransientFor(t, time.Second)
	if got, err := CommittedOffsets(ctx, conn, group, in); err != nil || got[0] != (Committed{5, "chk=1"}) {
		t.Fatalf("CommittedOffsets while a transaction holds 6: %v, %v; want 0:5 chk=1 at once", got, err)
	}
	ended := make(chan error, 1)
	go func() {
		time.Sleep(3 * transientFor)
		ended <- txn.cl.EndTransaction(ctx, kgo.TryCommit)
	}()
	started := make(chan error, 1)
	go func() {
		src, err := NewSource(ctx, SourceConfig{Brokers: brokers, Topic: in, Start: FromCommitted, Group: group, Bounded: true})
		if err == nil {
			if from := src.Partitions()[0]; from != 6 {
				err = fmt.Errorf("it starts partition 0 at %d", from)
			}
			src.Close()
		}
		started <- err
	}()
	saved := heldAfter
	heldAfter = time.Second
	t.Cleanup(func() { heldAfter = saved })
	type told struct {
		waited time.Duration
		ended  bool
	}
	var tells []told
	got, err := GroupOffsetsHeld(ctx, conn, group, in, func(waited time.Duration, ended bool) { tells = append(tells, told{waited, ended}) })
	if err != nil || got[0] != (Committed{6, "chk=2"}) {
		t.Fatalf("GroupOffsets while a transaction holds 6 for 3 s: %v, %v; want 0:6 chk=2 once it commits", got, err)
	}
	// Held for 3 s from the open transaction, of which franz-go's own
	// retries take the first second or so: told once at 1 s or more,
	// then of the end.
	if len(tells) != 2 || tells[0].ended || tells[0].waited < time.Second || !tells[1].ended || tells[1].waited < tells[0].waited {
		t.Fatalf("held was told %+v; want one wait of at least 1s, then its end", tells)
	}
	if err := <-started; err != nil {
		t.Fatalf("a source from the group's offsets while a transaction holds 6 for 3 s: %v; want it to start at 6 once it commits", err)
	}
	if err := <-ended; err != nil {
		t.Fatal(err)
	}
}

// TestGroupOffsetsHeldCancelled: a wait for offsets a transaction holds
// that ends with its context, the transaction still open, is not told
// ended (the log said the transaction had ended).
func TestGroupOffsetsHeldCancelled(t *testing.T) {
	brokers := realBrokers(t)
	ctx := testContext(t)
	in := topicName(t)
	conn := Conn{Brokers: brokers}
	_, tc := heldTxn(t, brokers, in, time.Minute, 5, 6)
	saved := heldAfter
	heldAfter = 100 * time.Millisecond
	t.Cleanup(func() { heldAfter = saved })
	var tells []bool
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	got, err := GroupOffsetsHeld(wctx, conn, tc.Group, in, func(_ time.Duration, ended bool) { tells = append(tells, ended) })
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("GroupOffsetsHeld while a transaction holds 6 past its context: %v, %v; want the context's error", got, err)
	}
	if len(tells) == 0 || slices.Contains(tells, true) {
		t.Fatalf("held was told ended %v; want at least one wait, none ended (the transaction is still open)", tells)
	}
}

// TestTxnFencedOrTimedOut: a producer whose transaction the broker
// aborted at its timeout (a process paused for longer) is told so, not
// that it was fenced, and whether its next write is a record or the
// offsets; a producer whose id a newer one took is told it was fenced,
// the same two ways.
func TestTxnFencedOrTimedOut(t *testing.T) {
	brokers := realBrokers(t)
	t.Parallel()
	ctx := testContext(t)
	conn := Conn{Brokers: brokers}
	for _, c := range []struct {
		name           string
		newer, records bool
		want           error
	}{
		{"timed out, records", false, true, ErrTimedOut},
		{"timed out, offsets", false, false, ErrTimedOut},
		{"fenced, records", true, true, ErrFenced},
		{"fenced, offsets", true, false, ErrFenced},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := topicName(t)
			txn, tc := heldTxn(t, brokers, in, 2*time.Second, 1, 2)
			if c.newer {
				newer, err := NewTxn(ctx, tc)
				if err != nil {
					t.Fatal(err)
				}
				defer newer.Close()
			}
			// Stable offsets wait for the transaction's end: the
			// broker's abort at its timeout, or the newer producer's.
			got, err := GroupOffsets(ctx, conn, tc.Group, in)
			if err != nil || got[0] != (Committed{1, "chk=1"}) {
				t.Fatalf("offsets once the transaction is aborted: %v, %v; want 0:1 chk=1", got, err)
			}
			if c.records {
				txn.Produce(ctx, in, nil, []byte("z"))
			}
			err = txn.Commit(ctx, in, Offsets{0: 3}, "chk=3")
			if !errors.Is(err, ErrTxn) || !errors.Is(err, c.want) {
				t.Fatalf("the next commit: %v; want ErrTxn and %v", err, c.want)
			}
			if fenced := errors.Is(err, ErrFenced); fenced != c.newer {
				t.Fatalf("the next commit: %v: fenced %v, want %v", err, fenced, c.newer)
			}
			if got, err := GroupOffsets(ctx, conn, tc.Group, in); err != nil || got[0] != (Committed{1, "chk=1"}) {
				t.Fatalf("offsets after the refused commit: %v, %v; want 0:1 chk=1", got, err)
			}
		})
	}
}

// heldTxn makes topic in (one partition) and a Txn of transactional id
// in-txn for group in-g with the transaction timeout given (0: the
// default), closed at the test's end; the Txn commits offset committed of
// the partition with metadata chk=1 (and 10 records), then leaves the
// next transaction open holding offset held (chk=2), as one whose
// producer stopped between its offsets and its end.
func heldTxn(t *testing.T, brokers []string, in string, timeout time.Duration, committed, held int64) (*Txn, TxnConfig) {
	t.Helper()
	ctx := testContext(t)
	if _, err := EnsureTopics(ctx, Conn{Brokers: brokers}, []TopicSpec{{Name: in, Partitions: 1}}); err != nil {
		t.Fatal(err)
	}
	tc := TxnConfig{Brokers: brokers, TransactionalID: in + "-txn", Group: in + "-g", Timeout: timeout}
	txn, err := NewTxn(ctx, tc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(txn.Close)
	for range 10 {
		txn.Produce(ctx, in, nil, []byte("x"))
	}
	if err := txn.Commit(ctx, in, Offsets{0: committed}, "chk=1"); err != nil {
		t.Fatal(err)
	}
	txn.Produce(ctx, in, nil, []byte("y"))
	if err := txn.cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := txn.commitOffsets(ctx, map[string]Offsets{in: {0: held}}, func(string, int32) string { return "chk=2" }); err != nil {
		t.Fatal(err)
	}
	return txn, tc
}

// TestTxnFencedAmidTakeover: a newer producer of the same transactional
// id fences an open transaction by its first InitProducerId (the
// coordinator aborts the transaction at a new epoch and answers
// CONCURRENT_TRANSACTIONS), and takes the id by its retry, after its
// backoff. The fenced producer's next commit, refused
// INVALID_PRODUCER_EPOCH, asks for its next epoch between the two and is
// granted it, as after a transaction timeout: it is told it was fenced,
// not that its transaction timed out (its job would restart and fence
// the newer producer). It was told ErrTimedOut.
func TestTxnFencedAmidTakeover(t *testing.T) {
	brokers := realBrokers(t)
	t.Parallel()
	ctx := testContext(t)
	conn := Conn{Brokers: brokers}
	in := topicName(t)
	txn, tc := heldTxn(t, brokers, in, time.Minute, 1, 2)
	// The newer producer, by hand: franz-go's would retry at once.
	newer, err := conn.newClient()
	if err != nil {
		t.Fatal(err)
	}
	defer newer.Close()
	initNewer := func() error {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = &tc.TransactionalID
		req.TransactionTimeoutMillis = int32(time.Minute.Milliseconds())
		req.ProducerID, req.ProducerEpoch = -1, -1
		resp, err := req.RequestWith(ctx, newer)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	}
	if err := initNewer(); !errors.Is(err, kerr.ConcurrentTransactions) {
		t.Fatalf("the newer producer's first InitProducerId: %v, want CONCURRENT_TRANSACTIONS (the open transaction aborted)", err)
	}
	if got, err := GroupOffsets(ctx, conn, tc.Group, in); err != nil || got[0] != (Committed{1, "chk=1"}) {
		t.Fatalf("offsets once the transaction is aborted: %v, %v; want 0:1 chk=1", got, err)
	}
	// The newer producer retries 300 ms after the commit begins (the
	// grant takes a few milliseconds; the check waits 2 s).
	took := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		for {
			err := initNewer()
			if !errors.Is(err, kerr.ConcurrentTransactions) {
				took <- err
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	txn.Produce(ctx, in, nil, []byte("z"))
	err = txn.Commit(ctx, in, Offsets{0: 3}, "chk=3")
	if terr := <-took; terr != nil {
		t.Fatalf("the newer producer's retry: %v", terr)
	}
	if !errors.Is(err, ErrTxn) || !errors.Is(err, ErrFenced) || errors.Is(err, ErrTimedOut) {
		t.Fatalf("the commit of the producer a newer one fenced: %v; want ErrTxn and ErrFenced, not ErrTimedOut", err)
	}
}

// TestTxnLeftOpen checks the commit's check for an earlier transaction
// left open: a commit describes the producers of the partitions it
// wrote, and the brokers' answer for this producer starts its
// transaction at the first record it wrote (so a commit goes on); an
// answer that starts it earlier (records of an earlier transaction no
// marker ended, which the commit's marker would commit too) aborts the
// transaction, nothing of it readable; an answer that cannot be had lets
// the commit go on, said once.
func TestTxnLeftOpen(t *testing.T) {
	brokers := realBrokers(t)
	t.Parallel()
	ctx := testContext(t)
	out, group := topicName(t), topicName(t)+"-g"
	if _, err := EnsureTopics(ctx, Conn{Brokers: brokers}, []TopicSpec{{Name: out, Partitions: 2}}); err != nil {
		t.Fatal(err)
	}
	var said []string
	c := TxnConfig{Brokers: brokers, TransactionalID: topicName(t) + "-txn", Group: group, Timeout: 30 * time.Second, Manual: []string{out},
		Logf: func(format string, args ...any) { said = append(said, fmt.Sprintf(format, args...)) }}
	tx, err := NewTxn(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	real := tx.describe
	var starts []string // each partition's transaction start for this producer, as the brokers said
	tx.describe = func(ctx context.Context, s kadm.TopicsSet) (kadm.DescribedProducersTopics, error) {
		d, err := real(ctx, s)
		pid, _, _ := tx.cl.ProducerID(ctx)
		d.EachProducer(func(p kadm.DescribedProducer) {
			if p.ProducerID == pid {
				starts = append(starts, fmt.Sprintf("%s-%d@%d", p.Topic, p.Partition, p.CurrentTxnStartOffset))
			}
		})
		return d, err
	}
	for i := range 3 {
		tx.ProduceTo(ctx, out, 0, nil, fmt.Appendf(nil, "a%d", i))
	}
	tx.ProduceTo(ctx, out, 1, nil, []byte("b"))
	if err := tx.CommitTopics(ctx, nil, ""); err != nil {
		t.Fatal(err)
	}
	slices.Sort(starts)
	if want := []string{out + "-0@0", out + "-1@0"}; !slices.Equal(starts, want) {
		t.Fatalf("the first commit's check saw transactions starting at %v, want %v", starts, want)
	}
	// The second transaction: partition 0's first record at offset 4
	// (3 records and the first commit's marker before it); the brokers'
	// answer altered to start this producer's transaction at offset 2.
	starts = nil
	tx.describe = func(ctx context.Context, s kadm.TopicsSet) (kadm.DescribedProducersTopics, error) {
		d, err := real(ctx, s)
		for _, dt := range d {
			dp := dt.Partitions[0]
			for id, ap := range dp.ActiveProducers {
				ap.CurrentTxnStartOffset = 2
				dp.ActiveProducers[id] = ap
			}
		}
		return d, err
	}
	tx.ProduceTo(ctx, out, 0, nil, []byte("left"))
	err = tx.CommitTopics(ctx, nil, "")
	if !errors.Is(err, ErrTxnLeftOpen) || !errors.Is(err, ErrTxn) || !strings.Contains(err.Error(), out+"-0 holds records of producer") || !strings.Contains(err.Error(), "open from offset 2, before this transaction's first there at 4") {
		t.Fatalf("commit over a partition holding an earlier transaction open: %v, want ErrTxnLeftOpen naming %s-0, offsets 2 and 4", err, out)
	}
	values := readValues(t, brokers, out)
	slices.Sort(values)
	if want := []string{"a0", "a1", "a2", "b"}; !slices.Equal(values, want) {
		t.Fatalf("read_committed after the abort: %v, want the first transaction's %v", values, want)
	}
	// The producers cannot be described: the commit goes on, said once.
	tx2, err := NewTxn(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	defer tx2.Close()
	tx2.describe = func(context.Context, kadm.TopicsSet) (kadm.DescribedProducersTopics, error) {
		return nil, errors.New("no answer")
	}
	for range 2 {
		tx2.ProduceTo(ctx, out, 1, nil, []byte("c"))
		if err := tx2.CommitTopics(ctx, nil, ""); err != nil {
			t.Fatalf("commit without the producers described: %v", err)
		}
	}
	if len(said) != 1 || !strings.Contains(said[0], "no answer") || !strings.Contains(said[0], "without the check") {
		t.Fatalf("said %q, want one warning naming the error", said)
	}
}

// readValues returns the values of topic's records (read_committed).
func readValues(t *testing.T, brokers []string, topic string) []string {
	t.Helper()
	var values []string
	if err := ReadTopic(testContext(t), Conn{Brokers: brokers}, topic, func(_ int32, _, v []byte) error {
		values = append(values, string(v))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return values
}

// BenchmarkTxnCommit is a transaction of 6 records, one in each
// partition of a topic, and its commit with the group's offsets of 6
// partitions (as a job's checkpoint commits its input's), against the broker of
// CEPHEUS_KAFKA_BROKERS: "checked" with the check for a transaction left
// open (one DescribeProducers to the partitions' leaders before the
// commit), "unchecked" with that check answered at once by an error (the
// commit goes on unchecked, as when the brokers do not answer): their
// difference is the check's cost. A job commits one such transaction a
// checkpoint.
func BenchmarkTxnCommit(b *testing.B) {
	s := os.Getenv("CEPHEUS_KAFKA_BROKERS")
	if s == "" {
		b.Skip("no Kafka broker: set CEPHEUS_KAFKA_BROKERS (make kafka-up)")
	}
	brokers := strings.Split(s, ",")
	for _, mode := range []string{"checked", "unchecked"} {
		b.Run(mode, func(b *testing.B) {
			ctx := b.Context()
			out := fmt.Sprintf("bench-txn-commit-%s-%d", mode, time.Now().UnixNano())
			if _, err := EnsureTopics(ctx, Conn{Brokers: brokers}, []TopicSpec{{Name: out, Partitions: 6}}); err != nil {
				b.Fatal(err)
			}
			tx, err := NewTxn(ctx, TxnConfig{Brokers: brokers, TransactionalID: out + "-txn", Group: out + "-g",
				Timeout: 30 * time.Second, Manual: []string{out}})
			if err != nil {
				b.Fatal(err)
			}
			defer tx.Close()
			if mode == "unchecked" {
				tx.unchecked = true // nothing to say
				tx.describe = func(context.Context, kadm.TopicsSet) (kadm.DescribedProducersTopics, error) {
					return nil, errors.New("not asked")
				}
			}
			b.ReportAllocs()
			next := Offsets{}
			for b.Loop() {
				for p := range int32(6) {
					tx.ProduceTo(ctx, out, p, nil, []byte("alert"))
					next[p]++
				}
				if err := tx.CommitTopics(ctx, map[string]Offsets{out: next}, "m"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
