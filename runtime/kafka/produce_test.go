package kafka

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// testLine is a line of testLines and what Produce should make of it.
type testLine struct {
	text string
	key  []byte    // nil: a null key
	ts   time.Time // zero: none; the record gets the time of the last line with one, or of the first
}

// testLines returns n lines keyed by card_id over 40 cards and timed by ts:
// every 10th has no card_id, every 25th a null one, every 15th an empty
// one, every 20th no ts, every 33rd an epoch-millisecond ts, and the 7th is
// not JSON at all.
func testLines(n int) []testLine {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	out := make([]testLine, n)
	for i := range out {
		ts := base.Add(time.Duration(i) * 1500 * time.Millisecond)
		l := testLine{key: fmt.Appendf(nil, "card_%d", i%40), ts: ts}
		card := fmt.Sprintf(`"card_id":"card_%d",`, i%40)
		switch {
		case i%10 == 0:
			card, l.key = "", nil
		case i%25 == 0:
			card, l.key = `"card_id":null,`, nil
		case i%15 == 0:
			card, l.key = `"card_id":"",`, []byte{}
		}
		tsField := fmt.Sprintf(`"ts":%q,`, ts.Format("2006-01-02T15:04:05.000Z07:00"))
		switch {
		case i%20 == 0:
			tsField, l.ts = "", time.Time{}
		case i%33 == 0:
			tsField = fmt.Sprintf(`"ts":%d,`, ts.UnixMilli())
		}
		l.text = fmt.Sprintf(`{%s%s"seq":%d,"amount":%d.25}`, tsField, card, i, i%500)
		if i == 7 {
			l = testLine{text: fmt.Sprintf("not json %d", i)}
		}
		out[i] = l
	}
	return out
}

// TestProduceKeysAndTimes produces testLines into a 6-partition topic keyed
// by card_id, reads the records back and checks each key, timestamp and
// partition, then consumes the topic: the same lines come out.
func TestProduceKeysAndTimes(t *testing.T) {
	forEachCluster(t, func(t *testing.T, brokers []string) {
		ctx := testContext(t)
		topic := topicName(t)
		lines := testLines(3000)
		var in strings.Builder
		byValue := map[string]testLine{}
		var want ProduceResult
		// The timestamp of a line without a time: the last one's before
		// it, or, before the first, the first's (line 0 has none).
		stamps := make([]time.Time, len(lines))
		var last time.Time
		for i, l := range lines {
			if !l.ts.IsZero() {
				last = l.ts
				for j := i; j >= 0 && stamps[j].IsZero(); j-- {
					stamps[j] = last
				}
			}
			stamps[i] = last
		}
		for i, l := range lines {
			in.WriteString(l.text)
			if i%100 == 0 {
				in.WriteString("\r") // a CRLF line end
			}
			in.WriteString("\n")
			if l.ts.IsZero() {
				want.Untimed++
			}
			l.ts = stamps[i]
			byValue[l.text] = l
			if l.key == nil {
				want.NullKeys++
			}
		}
		in.WriteString("\n  \n") // blank lines are skipped
		in.WriteString(`{"card_id":"last","ts":1}`)
		byValue[`{"card_id":"last","ts":1}`] = testLine{text: `{"card_id":"last","ts":1}`, key: []byte("last"), ts: time.UnixMilli(1)}
		want.Records, want.NotJSON, want.Blank, want.Created, want.Partitions = int64(len(lines))+1, 1, 2, true, 6
		want.Implausible = 1 // the last line's 1 ms, of 1970: counted, written so

		res, err := Produce(ctx, ProduceConfig{Brokers: brokers, Topic: topic, Partitions: 6, KeyField: "card_id", TimeField: "ts"},
			strings.NewReader(in.String()))
		if err != nil {
			t.Fatal(err)
		}
		want.Bytes = res.Bytes
		if res != want {
			t.Errorf("Produce = %+v\nwant %+v", res, want)
		}

		partitionOf := map[string]int32{}
		used := map[int32]bool{}
		recs := readAll(t, brokers, topic, int(want.Records))
		for _, r := range recs {
			l, ok := byValue[string(r.Value)]
			if !ok {
				t.Fatalf("record %q is no line produced", r.Value)
			}
			delete(byValue, string(r.Value))
			if (r.Key == nil) != (l.key == nil) || !bytes.Equal(r.Key, l.key) {
				t.Errorf("record %s: key %q (null %v), want %q (null %v)", r.Value, r.Key, r.Key == nil, l.key, l.key == nil)
			}
			if !r.Timestamp.Equal(l.ts) {
				t.Errorf("record %s: timestamp %v, want %v", r.Value, r.Timestamp, l.ts)
			}
			used[r.Partition] = true
			if r.Key == nil {
				continue
			}
			if p, seen := partitionOf[string(r.Key)]; seen && p != r.Partition {
				t.Errorf("key %q in partitions %d and %d", r.Key, p, r.Partition)
			}
			partitionOf[string(r.Key)] = r.Partition
		}
		if len(byValue) > 0 {
			t.Errorf("%d lines were not read back", len(byValue))
		}
		if len(used) != 6 {
			t.Errorf("records in %d partitions, want all 6", len(used))
		}

		var out bytes.Buffer
		cres, err := Consume(ctx, ConsumeConfig{Brokers: brokers, Topic: topic, Idle: time.Second}, &out)
		if err != nil {
			t.Fatal(err)
		}
		var wantLines []string
		for _, l := range lines {
			wantLines = append(wantLines, l.text)
		}
		wantLines = append(wantLines, `{"card_id":"last","ts":1}`)
		sameLines(t, out.String(), wantLines)
		if cres.Records != want.Records || cres.Bytes != res.Bytes || cres.Partitions != 6 {
			t.Errorf("Consume = %+v; want %d records, %d bytes, 6 partitions", cres, want.Records, res.Bytes)
		}
	})
}

// TestProduceUntimedStart produces a file whose first untimedHeld + 1 lines
// have no time, then a line with one, into one partition: the first lines
// are not held for ever (they get the append time), and the records keep
// the lines' order.
func TestProduceUntimedStart(t *testing.T) {
	forEachCluster(t, func(t *testing.T, brokers []string) {
		ctx := testContext(t)
		topic := topicName(t)
		var in strings.Builder
		for i := range untimedHeld + 1 {
			fmt.Fprintf(&in, "{\"seq\":%d}\n", i)
		}
		in.WriteString(`{"seq":-1,"ts":"2026-01-01T00:00:00Z"}`)
		before := time.Now()
		res, err := Produce(ctx, ProduceConfig{Brokers: brokers, Topic: topic, Partitions: 1, TimeField: "ts"}, strings.NewReader(in.String()))
		after := time.Now()
		if err != nil {
			t.Fatal(err)
		}
		if res.Records != untimedHeld+2 || res.Untimed != untimedHeld+1 || res.AppendTimed != untimedHeld+1 {
			t.Errorf("Produce = %+v; want %d records, %d untimed, all with the append time", res, untimedHeld+2, untimedHeld+1)
		}
		recs := readAll(t, brokers, topic, untimedHeld+2)
		for i, r := range recs {
			if i == untimedHeld+1 {
				if want := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC); !r.Timestamp.Equal(want) || string(r.Value) != `{"seq":-1,"ts":"2026-01-01T00:00:00Z"}` {
					t.Errorf("last record %s at %v, want the timed line at %v", r.Value, r.Timestamp, want)
				}
				continue
			}
			if want := fmt.Sprintf(`{"seq":%d}`, i); string(r.Value) != want {
				t.Fatalf("record %d is %s, want %s", i, r.Value, want)
			}
			if r.Timestamp.Before(before.Truncate(time.Millisecond)) || r.Timestamp.After(after) {
				t.Errorf("record %s: timestamp %v, want the append time (%v .. %v)", r.Value, r.Timestamp, before, after)
			}
		}
	})
}

// sameLines fails unless the lines of out are want, as a multiset.
func sameLines(t *testing.T, out string, want []string) {
	t.Helper()
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if out == "" {
		got = nil
	}
	want = slices.Clone(want)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("consumed %d lines, want %d:\n%s", len(got), len(want), firstDiff(got, want))
	}
}

// firstDiff describes where two sorted lists part.
func firstDiff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("at %d: got %q, want %q", i, got[i], want[i])
		}
	}
	return fmt.Sprintf("got %d, want %d lines in all", len(got), len(want))
}

// TestProduceTopicCreation: Produce creates a missing topic once, with
// retention.ms=-1, also when two Produce calls race to create it; later
// calls use it, and a call asking for another partition count writes
// nothing.
func TestProduceTopicCreation(t *testing.T) {
	forEachCluster(t, func(t *testing.T, brokers []string) {
		ctx := testContext(t)
		topic := topicName(t)
		cfg := ProduceConfig{Brokers: brokers, Topic: topic, Partitions: 6, KeyField: "k"}
		var wg sync.WaitGroup
		results := make([]ProduceResult, 2)
		errs := make([]error, 2)
		for i := range results {
			wg.Go(func() {
				results[i], errs[i] = Produce(ctx, cfg, strings.NewReader(fmt.Sprintf(`{"k":"a","n":%d}`+"\n", i)))
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		if results[0].Created == results[1].Created || results[0].Records != 1 || results[1].Records != 1 {
			t.Errorf("two racing Produce calls: %+v; want one to create the topic, both to write", results)
		}
		res, err := Produce(ctx, ProduceConfig{Brokers: brokers, Topic: topic}, strings.NewReader(`{"k":"b"}`))
		if err != nil || res.Created || res.Partitions != 6 || res.Records != 1 {
			t.Errorf("Produce to the existing topic without -partitions: %+v, %v", res, err)
		}
		cfg.Partitions = 3
		res, err = Produce(ctx, cfg, strings.NewReader(`{"k":"c"}`))
		if !errors.Is(err, ErrPartitionCount) || res.Records != 0 || !strings.Contains(err.Error(), "has 6 partitions, not 3") {
			t.Errorf("Produce with another partition count: %+v, %v; want ErrPartitionCount and nothing written", res, err)
		}

		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		rcs, err := kadm.NewClient(cl).DescribeTopicConfigs(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On(topic, nil)
		if err != nil {
			t.Fatal(err)
		}
		retention := "(not set)"
		for _, c := range rc.Configs {
			if c.Key == "retention.ms" && c.Value != nil {
				retention = *c.Value
			}
		}
		if retention != "-1" {
			t.Errorf("retention.ms of the created topic = %s, want -1", retention)
		}

		var out bytes.Buffer
		if _, err := Consume(ctx, ConsumeConfig{Brokers: brokers, Topic: topic, Idle: 500 * time.Millisecond}, &out); err != nil {
			t.Fatal(err)
		}
		sameLines(t, out.String(), []string{`{"k":"a","n":0}`, `{"k":"a","n":1}`, `{"k":"b"}`})
	})
}

// TestProduceRefusedTimestamp: a broker refuses a record stamped more than
// its message.timestamp.after.max.ms ahead of its clock (an hour, Kafka 4's
// default, set here) with the whole batch it came in, without saying which
// record. The error gives the lines refused and the time farthest from the
// clock among them, line 401's; it named only the batch's first line, whose
// time is good ("line 1: INVALID_TIMESTAMP" of a file whose line 401 was of
// 2100).
func TestProduceRefusedTimestamp(t *testing.T) {
	brokers := realBrokers(t)
	t.Parallel()
	ctx := testContext(t)
	topic := topicName(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	hour := "3600000"
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, -1, map[string]*string{"message.timestamp.after.max.ms": &hour}, topic); err != nil {
		t.Fatal(err)
	}
	var in strings.Builder
	for i := range 800 {
		ts := fmt.Sprintf("2026-01-01T00:%02d:%02dZ", i/60%60, i%60)
		if i == 400 {
			ts = "2100-01-01T00:00:00Z"
		}
		fmt.Fprintf(&in, "{\"ts\":%q,\"n\":%d}\n", ts, i)
	}
	_, err = Produce(ctx, ProduceConfig{Brokers: brokers, Topic: topic, Partitions: 1, TimeField: "ts", Compression: "none"}, strings.NewReader(in.String()))
	want := "refused for a timestamp: a broker takes none more than the topic's message.timestamp.after.max.ms ahead of its clock (an hour by default since Kafka 4.0) or its message.timestamp.before.max.ms behind; the farthest from the clock is line 401's, 2100-01-01T00:00:00Z: INVALID_TIMESTAMP"
	if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, kerr.InvalidTimestamp) {
		t.Fatalf("Produce with a line of 2100: %v; want an INVALID_TIMESTAMP error saying %q", err, want)
	}
}

// TestProduceAfter2262: a time after 2262-04-11T23:47:16.854Z, which
// franz-go's int64 nanoseconds cannot hold, fails at its line, saying why;
// it was written as a time before 1970 (3000-01-01 as 1830-11-23, epoch
// milliseconds under time.Second as 1853), and counted only as implausible.
func TestProduceAfter2262(t *testing.T) {
	forEachCluster(t, func(t *testing.T, brokers []string) {
		ctx := testContext(t)
		for _, c := range []struct {
			unit time.Duration
			ts   string
			want string
		}{
			{0, `"3000-01-01T00:00:00Z"`, `line 2: ts "3000-01-01T00:00:00Z" is 3000-01-01T00:00:00Z, after 2262-04-11T23:47:16.854Z, the last time a record's timestamp can be written as`},
			{time.Second, `1767225600500`, `line 2: ts 1767225600500 is 57971-02-25T00:08:20Z, after 2262-04-11T23:47:16.854Z`},
			{0, `"2262-04-11T23:47:16.855Z"`, `line 2: ts "2262-04-11T23:47:16.855Z" is 2262-04-11T23:47:16.855Z, after`},
		} {
			in := `{"ts":"2026-01-01T00:00:00Z"}` + "\n" + `{"ts":` + c.ts + "}\n"
			_, err := Produce(ctx, ProduceConfig{Brokers: brokers, Topic: topicName(t), Partitions: 1, TimeField: "ts", TimeUnit: c.unit}, strings.NewReader(in))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Produce of a time %s: %v, want an error saying %q", c.ts, err, c.want)
			}
		}
	})
}

func TestProduceConfigValidate(t *testing.T) {
	err := ProduceConfig{Partitions: -1}.Validate()
	for _, want := range []string{"no brokers given", "no topic given", "partitions -1 is negative"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to say %q", err, want)
		}
	}
	if err := (ProduceConfig{Brokers: []string{"b:1"}, Topic: "t"}).Validate(); err != nil {
		t.Errorf("Validate of a good config: %v", err)
	}
}
