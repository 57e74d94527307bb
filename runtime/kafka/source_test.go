package kafka

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// sourceBase is the timestamp of the first record of sourceRecords.
var sourceBase = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// sourceRecords returns n records for a topic of partitions partitions:
// record i goes to partition i%(partitions-1), so the last partition stays
// empty; it has key "k<i>" (every 7th a null key, every 11th an empty
// one), value "v<i>" and the timestamp sourceBase + i ms.
func sourceRecords(n, partitions int) []*kgo.Record {
	out := make([]*kgo.Record, n)
	for i := range out {
		r := &kgo.Record{
			Partition: int32(i % (partitions - 1)),
			Key:       fmt.Appendf(nil, "k%d", i),
			Value:     fmt.Appendf(nil, "v%d", i),
			Timestamp: sourceBase.Add(time.Duration(i) * time.Millisecond),
		}
		switch {
		case i%7 == 0:
			r.Key = nil
		case i%11 == 0:
			r.Key = []byte{}
		}
		out[i] = r
	}
	return out
}

// newTopic creates topic with partitions partitions and returns a client
// that writes to it, to the partition each record names.
func newTopic(t *testing.T, brokers []string, topic string, partitions int, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), metadataMinAge}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	if _, _, err := ensureTopic(testContext(t), kadm.NewClient(cl), topic, partitions); err != nil {
		t.Fatal(err)
	}
	return cl
}

// produceAll writes recs and waits for every acknowledgement.
func produceAll(t *testing.T, cl *kgo.Client, recs []*kgo.Record) {
	t.Helper()
	if err := cl.ProduceSync(testContext(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// startSource starts a source and closes it with the test.
func startSource(t *testing.T, c SourceConfig) *Source {
	t.Helper()
	s, err := NewSource(testContext(t), c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// drain reads a bounded source until its channel closes, checks what every
// source must do (opened batches first, in partition order, each with the
// partition's start; per partition, records in increasing offsets, each
// batch's Next past its records, Next never going back, nothing after
// Done, Done exactly once, batch bounds), and returns the batches by
// partition.
func drain(t *testing.T, s *Source) map[int32][]Batch {
	t.Helper()
	byPart := map[int32][]Batch{}
	starts := s.Partitions()
	parts := slices.Sorted(func(yield func(int32) bool) {
		for p := range starts {
			if !yield(p) {
				return
			}
		}
	})
	timeout := time.After(time.Minute)
	n := 0
	for {
		var b Batch
		var ok bool
		select {
		case b, ok = <-s.Batches():
		case <-timeout:
			t.Fatalf("no end after a minute; batches so far: %d", n)
		}
		if !ok {
			break
		}
		if n < len(parts) {
			if !b.Opened || b.Partition != parts[n] || b.Next != starts[b.Partition] || len(b.Records) > 0 {
				t.Fatalf("batch %d = %+v, want the opened batch of partition %d at %d", n, b, parts[n], starts[parts[n]])
			}
		} else if b.Opened {
			t.Fatalf("batch %d of partition %d is opened again", n, b.Partition)
		}
		n++
		prev := byPart[b.Partition]
		if len(prev) > 0 {
			last := prev[len(prev)-1]
			if last.Done {
				t.Fatalf("partition %d: a batch after Done: %+v", b.Partition, b)
			}
			if b.Next < last.Next || (len(b.Records) > 0 && b.Records[0].Offset < last.Next) {
				t.Fatalf("partition %d: batch at %d after Next %d", b.Partition, b.Next, last.Next)
			}
		}
		if len(b.Records) > s.cfg.BatchRecords {
			t.Errorf("partition %d: a batch of %d records, more than %d", b.Partition, len(b.Records), s.cfg.BatchRecords)
		}
		for i, r := range b.Records {
			if i > 0 && r.Offset <= b.Records[i-1].Offset {
				t.Fatalf("partition %d: offset %d after %d", b.Partition, r.Offset, b.Records[i-1].Offset)
			}
		}
		if k := len(b.Records); k > 0 && b.Next <= b.Records[k-1].Offset {
			t.Fatalf("partition %d: Next %d, last record at %d", b.Partition, b.Next, b.Records[k-1].Offset)
		}
		if b.Done && !b.CaughtUp {
			t.Errorf("partition %d: Done without CaughtUp", b.Partition)
		}
		byPart[b.Partition] = append(prev, b)
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if s.cfg.Bounded {
		for _, p := range parts {
			bs := byPart[p]
			if len(bs) == 0 || !bs[len(bs)-1].Done {
				t.Errorf("partition %d: no Done batch", p)
			}
		}
	}
	return byPart
}

// records returns the records of bs and the Next of the last batch.
func records(bs []Batch) ([]SourceRecord, int64) {
	var out []SourceRecord
	for _, b := range bs {
		out = append(out, b.Records...)
	}
	if len(bs) == 0 {
		return nil, -1
	}
	return out, bs[len(bs)-1].Next
}

// TestSourceBounded reads 3,000 records of 5 partitions of a 6-partition
// topic (the last one empty) in small batches: every record once, in
// offset order, with its key (null and empty keys kept apart), value and
// timestamp; each partition done at its end, and records written after
// the start are not read.
func TestSourceBounded(t *testing.T) {
	forEachCluster(t, func(t *testing.T, brokers []string) {
		topic := topicName(t)
		const parts, n = 6, 3000
		cl := newTopic(t, brokers, topic, parts)
		recs := sourceRecords(n, parts)
		produceAll(t, cl, recs)

		s := startSource(t, SourceConfig{Brokers: brokers, Topic: topic, Bounded: true, BatchRecords: 100, BatchBytes: 1000, Buffer: 2})
		// Written after the start, past the bounded end.
		produceAll(t, cl, sourceRecords(parts*2, parts))
		byPart := drain(t, s)

		want := map[int32][]*kgo.Record{}
		for _, r := range recs {
			want[r.Partition] = append(want[r.Partition], r)
		}
		for p := range int32(parts) {
			got, next := records(byPart[p])
			if len(got) != len(want[p]) || next != int64(len(want[p])) {
				t.Errorf("partition %d: %d records, next %d; want %d records, next %d", p, len(got), next, len(want[p]), len(want[p]))
				continue
			}
			for i, r := range got {
				w := want[p][i]
				if r.Offset != int64(i) || string(r.Value) != string(w.Value) || string(r.Key) != string(w.Key) ||
					(r.Key == nil) != (w.Key == nil) || !r.Time.Equal(w.Timestamp) {
					t.Errorf("partition %d record %d: %d %q %q %v; want %d %q %q %v", p, i,
						r.Offset, r.Key, r.Value, r.Time, i, w.Key, w.Value, w.Timestamp)
				}
			}
		}
		if bs := byPart[parts-1]; len(bs) != 1 || !bs[0].Opened || !bs[0].Done || bs[0].Next != 0 {
			t.Errorf("the empty partition: %+v, want one opened and done batch at 0", bs)
		}
	})
}

// TestSourceStart: explicit offsets (a checkpoint's) win over Start and
// give exactly the rest of their partition; the other partitions start
// latest, at a committed offset of the group (earliest without one), or at
// a time; explicit offsets outside the log are refused.
func TestSourceStart(t *testing.T) {
	forEachCluster(t, func(t *testing.T, brokers []string) {
		ctx := testContext(t)
		topic := topicName(t)
		const parts, n = 4, 300 // 100 records in partitions 0-2
		cl := newTopic(t, brokers, topic, parts)
		recs := sourceRecords(n, parts)
		produceAll(t, cl, recs)

		// check reads c bounded and compares the values read per partition
		// with recs from the offsets in from (absent: nothing).
		check := func(name string, c SourceConfig, from map[int32]int64) {
			t.Helper()
			c.Brokers, c.Topic, c.Bounded, c.BatchRecords = brokers, topic, true, 16
			s := startSource(t, c)
			byPart := drain(t, s)
			for p := range int32(parts) {
				var want []string
				if o, ok := from[p]; ok {
					for _, r := range recs {
						if r.Partition == p && r.Offset >= o {
							want = append(want, string(r.Value))
						}
					}
				}
				got, next := records(byPart[p])
				var values []string
				for _, r := range got {
					values = append(values, string(r.Value))
				}
				wantNext := int64(0)
				if p < parts-1 {
					wantNext = n / (parts - 1)
				}
				if !slices.Equal(values, want) || next != wantNext {
					t.Errorf("%s: partition %d: %d values from %v, next %d; want %d from %v, next %d", name, p,
						len(values), first(values), next, len(want), first(want), wantNext)
				}
			}
		}
		check("explicit, else latest", SourceConfig{Offsets: map[int32]int64{0: 17, 1: 0, 2: 100}, Start: FromLatest},
			map[int32]int64{0: 17, 1: 0})

		group := topic + "-group"
		offs := make(kadm.Offsets)
		offs.Add(kadm.Offset{Topic: topic, Partition: 1, At: 42, LeaderEpoch: -1})
		offs.Add(kadm.Offset{Topic: topic, Partition: 2, At: 99, LeaderEpoch: -1})
		if err := kadm.NewClient(cl).CommitAllOffsets(ctx, group, offs); err != nil {
			t.Fatal(err)
		}
		check("committed", SourceConfig{Start: FromCommitted, Group: group, Offsets: map[int32]int64{2: 3}},
			map[int32]int64{0: 0, 1: 42, 2: 3, 3: 0})

		// Record i has time base+i ms and is at offset i/3 of partition i%3:
		// from base+150ms, partition 0 starts at 50 (record 150), 1 at 50
		// (record 151), 2 at 50 (record 152).
		check("time", SourceConfig{Start: FromTime, StartTime: sourceBase.Add(150 * time.Millisecond)},
			map[int32]int64{0: 50, 1: 50, 2: 50, 3: 0})
		check("time after the last record", SourceConfig{Start: FromTime, StartTime: sourceBase.Add(time.Hour)}, nil)

		for _, o := range []int64{-1, 101} {
			_, err := NewSource(ctx, SourceConfig{Brokers: brokers, Topic: topic, Offsets: map[int32]int64{0: o}})
			if o < 0 && err == nil || o > 0 && !errors.Is(err, ErrBadOffset) {
				t.Errorf("offset %d: %v, want an error (ErrBadOffset for a positive one)", o, err)
			}
		}
		if _, err := NewSource(ctx, SourceConfig{Brokers: brokers, Topic: topic, Offsets: map[int32]int64{9: 0}}); err == nil {
			t.Error("an offset of partition 9 of a 4-partition topic: no error")
		}
		if _, err := NewSource(ctx, SourceConfig{Brokers: brokers, Topic: topic + "-missing"}); !errors.Is(err, ErrNoTopic) {
			t.Errorf("a missing topic: %v, want ErrNoTopic", err)
		}
	})
}

func first(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return s[0]
}

// TestSourceReadCommitted: read_committed delivers plain and committed
// records, never aborted ones; Next passes the transaction markers, so a
// done partition's Next is its end; a bounded read stops at the last
// stable offset, before an open transaction, and does not wait for it;
// read_uncommitted shows everything.
func TestSourceReadCommitted(t *testing.T) {
	forEachCluster(t, func(t *testing.T, brokers []string) {
		ctx := testContext(t)
		topic := topicName(t)
		plain := newTopic(t, brokers, topic, 2)
		txn := newTopic(t, brokers, topic, 2, kgo.TransactionalID(topic))
		value := func(p int32, v string) *kgo.Record { return &kgo.Record{Partition: p, Value: []byte(v)} }
		produceAll(t, plain, []*kgo.Record{value(0, "plain 0"), value(1, "plain 1")})
		// inTxn writes values in a transaction and ends it as how says;
		// open leaves it open.
		inTxn := func(how kgo.TransactionEndTry, open bool, values ...string) {
			t.Helper()
			if err := txn.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			for i, v := range values {
				produceAll(t, txn, []*kgo.Record{value(int32(i%2), v)})
			}
			if open {
				return
			}
			if err := txn.EndTransaction(ctx, how); err != nil {
				t.Fatal(err)
			}
		}
		inTxn(kgo.TryCommit, false, "c1 0", "c1 1", "c1 0b")
		inTxn(kgo.TryAbort, false, "a 0", "a 1", "a 0b", "a 1b")
		inTxn(kgo.TryCommit, false, "c2 0", "c2 1")
		inTxn(kgo.TryAbort, false, "a2 0", "a2 1")
		lsos := waitStable(t, plain, topic)
		// read returns the values per partition and the Next of each
		// partition's last batch.
		read := func(uncommitted bool) (map[int32][]string, map[int32]int64) {
			t.Helper()
			s := startSource(t, SourceConfig{Brokers: brokers, Topic: topic, Bounded: true, ReadUncommitted: uncommitted})
			values, nexts := map[int32][]string{}, map[int32]int64{}
			for p, bs := range drain(t, s) {
				got, next := records(bs)
				for _, r := range got {
					values[p] = append(values[p], string(r.Value))
				}
				nexts[p] = next
			}
			return values, nexts
		}
		values, nexts := read(false)
		want := map[int32][]string{0: {"plain 0", "c1 0", "c1 0b", "c2 0"}, 1: {"plain 1", "c1 1", "c2 1"}}
		for p := range int32(2) {
			lso, _ := lsos.Lookup(topic, p)
			if !slices.Equal(values[p], want[p]) || nexts[p] != lso.Offset {
				t.Errorf("read_committed partition %d: %q, next %d; want %q, next %d (the end)", p, values[p], nexts[p], want[p], lso.Offset)
			}
		}

		inTxn(kgo.TryCommit, true, "open 0", "open 1")
		began := time.Now()
		values, nexts = read(false)
		for p := range int32(2) {
			lso, _ := lsos.Lookup(topic, p)
			if !slices.Equal(values[p], want[p]) || nexts[p] != lso.Offset {
				t.Errorf("read_committed with an open transaction, partition %d: %q, next %d; want %q, next %d", p, values[p], nexts[p], want[p], lso.Offset)
			}
		}
		if d := time.Since(began); d > 15*time.Second {
			t.Errorf("a bounded read before an open transaction took %v", d)
		}
		values, _ = read(true)
		if len(values[0]) != 8 || len(values[1]) != 7 || values[0][7] != "open 0" {
			t.Errorf("read_uncommitted: %q, want every record, the open ones last", values)
		}
		if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
		waitStable(t, plain, topic)
		values, _ = read(false)
		if !slices.Equal(values[0], append(want[0], "open 0")) || !slices.Equal(values[1], append(want[1], "open 1")) {
			t.Errorf("read_committed after the commit: %q", values)
		}
	})
}

// TestSourceStalled: an unbounded read_committed source reports a
// partition held behind a transaction left open for StallAfter, once, and
// again when the transaction ends; the other partition, never held, is
// not reported.
func TestSourceStalled(t *testing.T) {
	forEachCluster(t, func(t *testing.T, brokers []string) {
		ctx := testContext(t)
		topic := topicName(t)
		plain := newTopic(t, brokers, topic, 2)
		txn := newTopic(t, brokers, topic, 2, kgo.TransactionalID(topic))
		produceAll(t, plain, []*kgo.Record{{Partition: 0, Value: []byte("plain 0")}, {Partition: 1, Value: []byte("plain 1")}})
		type report struct {
			p      int32
			offset int64
			ended  bool
		}
		reports := make(chan report, 16)
		s := startSource(t, SourceConfig{Brokers: brokers, Topic: topic, StallAfter: 300 * time.Millisecond,
			Stalled: func(held []Held) {
				for _, h := range held {
					if h.For < 300*time.Millisecond {
						t.Errorf("partition %d reported after %v, before StallAfter", h.Partition, h.For)
					}
					reports <- report{h.Partition, h.Offset, h.Ended}
				}
			}})
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		produceAll(t, txn, []*kgo.Record{{Partition: 0, Value: []byte("open 0")}})
		select {
		case r := <-reports:
			if r != (report{0, 1, false}) {
				t.Errorf("first report %+v, want partition 0 held at offset 1", r)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("a transaction open for 20s was not reported")
		}
		if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-reports:
			if r != (report{0, 1, true}) {
				t.Errorf("second report %+v, want partition 0's end of the hold", r)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the end of the transaction was not reported")
		}
		// Nothing more: partition 1 was never held, partition 0 is
		// reported once per hold.
		time.Sleep(time.Second)
		s.Close()
		close(reports)
		for r := range reports {
			t.Errorf("report %+v after the transaction ended", r)
		}
	})
}

// waitStable waits until no transaction is open in topic (the markers of
// a transaction are written after EndTransaction returns, and until then
// the last stable offset stays before it) and returns the last stable
// offsets, then the high watermarks.
func waitStable(t *testing.T, cl *kgo.Client, topic string) kadm.ListedOffsets {
	t.Helper()
	ctx := testContext(t)
	adm := kadm.NewClient(cl)
	for {
		lsos, err := adm.ListCommittedOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		hwms, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		stable := true
		lsos.Each(func(o kadm.ListedOffset) {
			h, _ := hwms.Lookup(topic, o.Partition)
			stable = stable && o.Offset == h.Offset
		})
		if stable {
			return lsos
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: a transaction stays open", topic)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestSourceCaughtUp: unbounded, each partition's batches say CaughtUp
// once its end is reached (an empty partition in its opened batch), a
// record written later comes and the partition is caught up again, and
// Close stops the source with its channel closed.
func TestSourceCaughtUp(t *testing.T) {
	forEachCluster(t, func(t *testing.T, brokers []string) {
		topic := topicName(t)
		const parts, n = 3, 100 // partitions 0 and 1 hold 50 records each
		cl := newTopic(t, brokers, topic, parts)
		produceAll(t, cl, sourceRecords(n, parts))
		s := startSource(t, SourceConfig{Brokers: brokers, Topic: topic, BatchRecords: 8})

		last := map[int32]Batch{}
		records := map[int32]int{}
		// until reads batches until every partition's last one is caught
		// up at want.
		until := func(want map[int32]int64) {
			t.Helper()
			timeout := time.After(30 * time.Second)
			for {
				done := true
				for p, w := range want {
					b, ok := last[p]
					done = done && ok && b.CaughtUp && b.Next == w
				}
				if done {
					return
				}
				select {
				case b, ok := <-s.Batches():
					if !ok {
						t.Fatalf("channel closed: %v", s.Err())
					}
					if b.Done {
						t.Fatalf("Done unbounded: %+v", b)
					}
					if b.CaughtUp && b.Next < want[b.Partition] {
						t.Fatalf("partition %d caught up at %d, before its end %d", b.Partition, b.Next, want[b.Partition])
					}
					if b.Partition == 2 && b.Opened && !b.CaughtUp {
						t.Errorf("the empty partition's opened batch is not caught up")
					}
					last[b.Partition] = b
					records[b.Partition] += len(b.Records)
				case <-timeout:
					t.Fatalf("not caught up at %v after 30s; last batches %+v", want, last)
				}
			}
		}
		until(map[int32]int64{0: 50, 1: 50, 2: 0})
		produceAll(t, cl, []*kgo.Record{{Partition: 2, Value: []byte("late")}})
		until(map[int32]int64{0: 50, 1: 50, 2: 1})
		if records[0] != 50 || records[1] != 50 || records[2] != 1 {
			t.Errorf("records per partition: %v, want 50, 50, 1", records)
		}
		began := time.Now()
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if d := time.Since(began); d > 5*time.Second {
			t.Errorf("Close took %v", d)
		}
		for range s.Batches() {
		}
	})
}

// TestSourcePause: a paused partition delivers nothing, also what was
// fetched for it meanwhile, while the others go on; resumed, it delivers
// its records.
func TestSourcePause(t *testing.T) {
	forEachCluster(t, func(t *testing.T, brokers []string) {
		topic := topicName(t)
		cl := newTopic(t, brokers, topic, 2)
		s := startSource(t, SourceConfig{Brokers: brokers, Topic: topic})
		next := func() Batch {
			t.Helper()
			select {
			case b, ok := <-s.Batches():
				if !ok {
					t.Fatalf("closed: %v", s.Err())
				}
				return b
			case <-time.After(30 * time.Second):
				t.Fatal("no batch after 30s")
			}
			return Batch{}
		}
		next()
		next() // the opened batches
		s.Pause(1)
		produceAll(t, cl, []*kgo.Record{{Partition: 1, Value: []byte("paused")}, {Partition: 0, Value: []byte("flowing")}})
		if b := next(); b.Partition != 0 || len(b.Records) != 1 || string(b.Records[0].Value) != "flowing" {
			t.Fatalf("got %+v, want the record of partition 0", b)
		}
		select {
		case b := <-s.Batches():
			t.Fatalf("a batch while partition 1 is paused: %+v", b)
		case <-time.After(500 * time.Millisecond):
		}
		s.Resume(1)
		if b := next(); b.Partition != 1 || len(b.Records) != 1 || string(b.Records[0].Value) != "paused" || b.Next != 1 || !b.CaughtUp {
			t.Fatalf("got %+v, want the record of partition 1, caught up", b)
		}
	})
}

// TestSourceBackpressure: while the consumer does not read, the source
// stops polling: the records it has taken from the client stay within the
// channel and one poll, the client's buffer within about one fetch, and
// nothing more is taken; once the consumer reads on, every record comes.
func TestSourceBackpressure(t *testing.T) {
	forEachCluster(t, func(t *testing.T, brokers []string) {
		topic := topicName(t)
		const parts, n = 3, 30000
		// Uncompressed, so that the client's fetch bound counts these bytes.
		cl := newTopic(t, brokers, topic, parts, kgo.ProducerBatchMaxBytes(16<<10), kgo.ProducerBatchCompression(kgo.NoCompression()))
		recs := sourceRecords(n, parts)
		for _, r := range recs {
			r.Value = fmt.Appendf(r.Value, " %0100d", 0) // about 100 bytes
		}
		produceAll(t, cl, recs)
		const batch, buffer, fetch = 100, 2, 64 << 10
		s := startSource(t, SourceConfig{Brokers: brokers, Topic: topic, Bounded: true,
			BatchRecords: batch, Buffer: buffer, FetchMaxBytes: fetch})
		got := 0
		read := func(k int) { // k batches
			t.Helper()
			for range k {
				b, ok := <-s.Batches()
				if !ok {
					t.Fatalf("closed early: %v", s.Err())
				}
				got += len(b.Records)
			}
		}
		read(parts + 5)
		// The source fills its buffer again, then stalls: once its count
		// stood still for 200 ms, it must stay so.
		polled := s.polled.Load()
		for deadline := time.Now().Add(10 * time.Second); ; polled = s.polled.Load() {
			time.Sleep(200 * time.Millisecond)
			if s.polled.Load() == polled {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the source still takes records from the client 10 s after its reader stopped: %d", s.polled.Load())
			}
		}
		time.Sleep(500 * time.Millisecond)
		held := s.polled.Load() - int64(got)
		buffered := s.cl.BufferedFetchRecords()
		t.Logf("stalled: %d records taken from the client, %d read, %d held by the source, %d buffered in the client", s.polled.Load(), got, held, buffered)
		if s.polled.Load() != polled {
			t.Errorf("the source took %d records from the client while stalled", s.polled.Load()-polled)
		}
		if held > (buffer+1)*batch {
			t.Errorf("the source holds %d records, more than (buffer+1)*batch = %d", held, (buffer+1)*batch)
		}
		// One fetch of 64 KiB (a broker stops there, or after one record
		// batch of at most 16 KiB past it), of records of about 130 bytes:
		// under 1,000.
		if buffered > 1000 {
			t.Errorf("the client buffers %d records, more than a fetch holds", buffered)
		}
		for b := range s.Batches() {
			got += len(b.Records)
		}
		if err := s.Err(); err != nil || got != n {
			t.Errorf("read %d records of %d, error %v", got, n, err)
		}
	})
}

// TestSourceRecordsDeleted: records deleted under a reading source (a
// repartition partition purged by its owner) stop it with an error that
// OutOfRange tells, after the records read before; a source started before
// the log's new start is refused with one too (ErrBadOffset). A missing
// topic is no such error.
func TestSourceRecordsDeleted(t *testing.T) {
	forEachCluster(t, func(t *testing.T, brokers []string) {
		ctx := testContext(t)
		topic := topicName(t)
		const n, cut = 3000, 2500
		// Batches of about 130 records, fetched one at a time (a fetch of
		// 4 KiB returns one record batch), so that most of the partition
		// is still to fetch when its records are deleted.
		cl := newTopic(t, brokers, topic, 2, kgo.ProducerBatchMaxBytes(16<<10), kgo.ProducerBatchCompression(kgo.NoCompression()))
		recs := sourceRecords(n, 2) // all in partition 0
		for _, r := range recs {
			r.Value = fmt.Appendf(r.Value, " %0100d", 0)
		}
		produceAll(t, cl, recs)
		s := startSource(t, SourceConfig{Brokers: brokers, Topic: topic, Bounded: true, Partitions: []int32{0},
			BatchRecords: 50, Buffer: 1, FetchMaxBytes: 4 << 10})
		b, ok := <-s.Batches()
		if !ok || !b.Opened {
			t.Fatalf("first batch %+v (open %v), want the opened one: %v", b, ok, s.Err())
		}
		next := int64(0)
		if b, ok = <-s.Batches(); !ok || len(b.Records) == 0 {
			t.Fatalf("no records: %v", s.Err())
		}
		next = b.Next
		var del kadm.Offsets
		del.Add(kadm.Offset{Topic: topic, Partition: 0, At: cut, LeaderEpoch: -1})
		resp, err := kadm.NewClient(cl).DeleteRecords(ctx, del)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatal(err)
		}
		for b := range s.Batches() {
			if len(b.Records) > 0 && b.Records[0].Offset != next {
				t.Fatalf("a batch from offset %d after Next %d", b.Records[0].Offset, next)
			}
			next = b.Next
		}
		if err := s.Err(); !OutOfRange(err) || next >= cut {
			t.Errorf("deleted under the source: it read to %d of %d, error %v; want it stopped before %d by an error OutOfRange tells", next, n, err, cut)
		}
		_, err = NewSource(ctx, SourceConfig{Brokers: brokers, Topic: topic, Offsets: map[int32]int64{0: next}})
		if !errors.Is(err, ErrBadOffset) || !OutOfRange(err) {
			t.Errorf("a source started at %d, before the log start %d: %v, want ErrBadOffset, OutOfRange", next, cut, err)
		}
		if _, err := NewSource(ctx, SourceConfig{Brokers: brokers, Topic: topic + "-missing"}); err == nil || OutOfRange(err) {
			t.Errorf("a missing topic: %v, want an error OutOfRange does not tell", err)
		}
	})
}

func TestSourceConfigValidate(t *testing.T) {
	err := SourceConfig{Start: FromCommitted, StartTime: time.Now(), Offsets: map[int32]int64{0: -1}, Buffer: -1}.Validate()
	for _, want := range []string{"no brokers given", "no topic given", "needs a group", "start time is given",
		"start offset -1 of partition 0 is negative", "negative batch"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to say %q", err, want)
		}
	}
	if err := (SourceConfig{Brokers: []string{"b"}, Topic: "t", Start: FromTime}).Validate(); err == nil || !strings.Contains(err.Error(), "needs a start time") {
		t.Errorf("FromTime without a time: %v", err)
	}
	// A time before 1970: ListOffsets reads -1 ms as the end of a partition
	// and -2 ms as its start (backtest -from 1969-12-31T23:59:59.999Z read
	// nothing and said no record was stamped after it; -to at that time read
	// everything), and refuses earlier ones with UNSUPPORTED_VERSION.
	for _, ms := range []int64{-1, -2, -3600000} {
		at := time.UnixMilli(ms)
		err := SourceConfig{Brokers: []string{"b"}, Topic: "t", Start: FromTime, StartTime: at, EndTime: at, Bounded: true}.Validate()
		for _, want := range []string{"start time " + at.UTC().Format(time.RFC3339Nano) + " is before 1970", "end time " + at.UTC().Format(time.RFC3339Nano) + " is before 1970"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("times %d ms: Validate() = %v, want it to say %q", ms, err, want)
			}
		}
	}
	if err := (SourceConfig{Brokers: []string{"b"}, Topic: "t", Start: FromTime, StartTime: time.UnixMilli(0), EndTime: time.UnixMilli(1), Bounded: true}).Validate(); err != nil {
		t.Errorf("the epoch and after: %v", err)
	}
}
