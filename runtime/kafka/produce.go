package kafka

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ProduceConfig configures [Produce]. Brokers and Topic are required; the
// other fields may stay zero.
type ProduceConfig struct {
	// Brokers are the seed brokers, host:port each; the client finds the
	// rest of the cluster from them. Security is how the connections are
	// secured.
	Brokers  []string
	Security Security
	// Topic is the topic written. It is created when missing, with
	// Partitions partitions, the broker's default replication factor and
	// retention.ms=-1.
	Topic string
	// Partitions is the partition count of a topic Produce creates; 0 (the
	// default) takes the broker's num.partitions. When the topic exists, a
	// Partitions other than 0 must be its count, else Produce writes
	// nothing and returns ErrPartitionCount.
	Partitions int
	// KeyField names the top-level field of each line whose value is the
	// record key: a string's characters, or the JSON text of a number, a
	// boolean, an object or an array (an empty string is an empty key, not
	// a null one). A line without the field, with null there, or that is
	// not a JSON object gets a null key. "" (the default): every record has
	// a null key.
	KeyField string
	// TimeField names a top-level field holding each record's timestamp:
	// an RFC 3339 string, or an integral number of epoch milliseconds. ""
	// (the default): the timestamp is the time the record is appended (the
	// client's clock when Produce hands it over; Kafka's CreateTime). A
	// line whose field is missing or holds anything else gets the
	// timestamp of the last line before it that had one, or, before the
	// first such line, of the first (when one comes within untimedHeld
	// lines; else the append time): an append time among times of the
	// past would end every time range of its partition ([SourceConfig]
	// EndTime) at that record.
	TimeField string
	// TimeUnit is the unit of a time written as a number in TimeField:
	// time.Millisecond (the default, 0: an integral number) or
	// time.Second (which may have a fraction; finer than a millisecond is
	// truncated), as the engine's -time-unit ms and s read them.
	TimeUnit time.Duration
	// Compression is the codec of the record batches: "snappy" (the
	// default, ""), "lz4", "zstd", "gzip" or "none". A reader pays for
	// decompressing: "none" costs a consumer the least CPU, the broker
	// the most bytes.
	Compression string
}

// compressionCodecs are the codecs of ProduceConfig.Compression.
var compressionCodecs = map[string]kgo.CompressionCodec{
	"": kgo.SnappyCompression(), "snappy": kgo.SnappyCompression(), "lz4": kgo.Lz4Compression(),
	"zstd": kgo.ZstdCompression(), "gzip": kgo.GzipCompression(), "none": kgo.NoCompression(),
}

// Validate reports every problem of c, joined.
func (c ProduceConfig) Validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("kafka: no brokers given"))
	}
	if c.Topic == "" {
		errs = append(errs, errors.New("kafka: no topic given"))
	}
	if c.Partitions < 0 {
		errs = append(errs, fmt.Errorf("kafka: partitions %d is negative", c.Partitions))
	}
	if _, ok := compressionCodecs[c.Compression]; !ok {
		errs = append(errs, fmt.Errorf("kafka: compression %q: want snappy, lz4, zstd, gzip or none", c.Compression))
	}
	switch c.TimeUnit {
	case 0, time.Millisecond, time.Second:
	default:
		errs = append(errs, fmt.Errorf("kafka: time unit %v: want a millisecond or a second", c.TimeUnit))
	}
	return errors.Join(errs...)
}

// ProduceResult says what [Produce] did.
type ProduceResult struct {
	// Records is the number of records written: acknowledged by the
	// brokers (acks=all, idempotent).
	Records int64
	// Bytes is the size of their values.
	Bytes int64
	// NullKeys counts the records written with a null key although
	// KeyField was set.
	NullKeys int64
	// Untimed counts the records without a usable time although TimeField
	// was set (timestamped as [ProduceConfig] TimeField says); AppendTimed
	// those of them that got the append time (no line had a time yet).
	Untimed, AppendTimed int64
	// Implausible counts the records whose time, written as a number, is
	// before 2000 or from 2100 on: most often a number in another unit
	// than TimeUnit (epoch seconds read as milliseconds land in January
	// 1970). They are written with that time (a broker refuses one ahead
	// of its clock: see Produce).
	Implausible int64
	// NotJSON counts the lines written that are not JSON objects (when
	// KeyField or TimeField is set; otherwise lines are not read).
	NotJSON int64
	// Blank counts the empty or blank lines, which are not written.
	Blank int64
	// Created reports whether Produce created the topic.
	Created bool
	// Partitions is the topic's partition count.
	Partitions int
}

// The plausible window of a numeric time (ProduceResult.Implausible), as
// the engine's check of numeric times has it.
var (
	plausibleFrom = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	plausibleTo   = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
)

// lastRecordTime is the last time a record's timestamp can be written as:
// franz-go sends Record.Timestamp as UnixNano()/1e6, which wraps after it
// (a time of 3000 was written as one of 1830).
var lastRecordTime = time.Unix(0, math.MaxInt64).UTC().Truncate(time.Millisecond)

// untimedHeld is how many lines without a usable time at the start of a
// file Produce holds to give them the time of the first line with one.
const untimedHeld = 1000

// Produce writes each line of r (JSON lines; a final line without a line
// end counts too) as one record of c.Topic, in order: its value is the line
// without its line end ("\n" or "\r\n"), its key and timestamp come from
// the fields c names. Blank lines are skipped. Lines are not checked
// otherwise: a line that is not JSON is written as it is, with a null key
// and the time [ProduceConfig] TimeField gives a line without one, for the
// reader to judge.
//
// Records of one partition keep the order of their lines. Produce returns
// once every record is acknowledged, or at the first record that fails, a
// time after 2262-04-11T23:47:16.854Z included (the error names its line;
// records after it may have been written; a batch refused for a
// timestamp, the lines refused and the time among them farthest from the
// clock). A broker that does not answer fails it after about 30 s.
// Cancelling ctx stops it; the result then counts what was acknowledged.
func Produce(ctx context.Context, c ProduceConfig, r io.Reader) (ProduceResult, error) {
	var res ProduceResult
	if err := c.Validate(); err != nil {
		return res, err
	}
	cl, err := (Conn{c.Brokers, c.Security}).newClient(kgo.DefaultProduceTopic(c.Topic),
		kgo.ProducerBatchCompression(compressionCodecs[c.Compression]))
	if err != nil {
		return res, err // newClient says kafka:
	}
	defer cl.Close()
	// Brokers that do not answer fail the command after retryAtStart's
	// bound, saying so; creating the topic is idempotent, so retried.
	adm := kadm.NewClient(cl)
	err = retryAtStart(ctx, func(ctx context.Context) error {
		var err error
		res.Created, res.Partitions, err = ensureTopic(ctx, adm, c.Topic, c.Partitions)
		return err
	})
	if err != nil {
		return res, err
	}

	var (
		records, size atomic.Int64
		mu            sync.Mutex
		firstErr      error // of the record with the lowest line number that failed
		firstLine     int64
		failed        atomic.Bool
	)
	fail := func(line int64, err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil || line < firstLine {
			firstErr, firstLine = err, line
		}
		failed.Store(true)
	}
	// A broker refuses a whole batch for one record's timestamp
	// (INVALID_TIMESTAMP), without saying which: the lowest line of the
	// batch is most often a good one. The error gives the lines refused
	// and the time farthest from the clock among them, the likely one.
	var (
		badTime        error // the first refusal's
		badFrom, badTo int64 // the lines refused
		farLine        int64
		farTime        time.Time
		farDist        time.Duration
	)
	refused := func(line int64, t time.Time, err error) {
		d := time.Since(t).Abs()
		mu.Lock()
		defer mu.Unlock()
		if badTime == nil {
			badTime, badFrom, badTo = err, line, line
		}
		badFrom, badTo = min(badFrom, line), max(badTo, line)
		if farLine == 0 || d > farDist || d == farDist && line < farLine {
			farLine, farTime, farDist = line, t, d
		}
		failed.Store(true)
	}
	send := func(rec *kgo.Record, n int64) {
		cl.Produce(ctx, rec, func(rec *kgo.Record, err error) {
			if errors.Is(err, kerr.InvalidTimestamp) {
				refused(n, rec.Timestamp, err)
				return
			}
			if err != nil {
				fail(n, fmt.Errorf("line %d: %w", n, err))
				return
			}
			records.Add(1)
			size.Add(int64(len(rec.Value)))
		})
	}
	// Lines without a usable time before the first line with one are held
	// (at most untimedHeld of them) to get its time; lastTime is the time
	// of the last line that had one.
	type heldRecord struct {
		rec  *kgo.Record
		line int64
	}
	var (
		held     []heldRecord
		heldOver bool // untimedHeld lines came without a time: no more are held
		lastTime time.Time
	)
	release := func(t time.Time) {
		if t.IsZero() {
			res.AppendTimed += int64(len(held))
		}
		for _, h := range held {
			h.rec.Timestamp = t // zero: the append time
			send(h.rec, h.line)
		}
		held = nil
	}
	parse := c.KeyField != "" || c.TimeField != ""
	br := bufio.NewReaderSize(r, 1<<16)
	var line int64
	for !failed.Load() {
		b, rerr := br.ReadBytes('\n')
		if rerr != nil && rerr != io.EOF {
			fail(line+1, fmt.Errorf("read line %d: %w", line+1, rerr))
			break
		}
		if len(b) > 0 {
			line++
			b = bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r"))
			if len(bytes.TrimSpace(b)) == 0 {
				res.Blank++
			} else {
				rec := &kgo.Record{Value: b}
				if parse {
					kv, tv, err := topFields(b, c.KeyField, c.TimeField)
					if err != nil {
						res.NotJSON++
					}
					rec.Key = keyOf(kv)
					if c.KeyField != "" && rec.Key == nil {
						res.NullKeys++
					}
					if c.TimeField != "" {
						if t, ok := timeOf(tv, c.TimeUnit); ok && t.After(lastRecordTime) {
							fail(line, fmt.Errorf("line %d: %s %s is %s, after %s, the last time a record's timestamp can be written as (the Kafka client counts it in int64 nanoseconds; later times wrap to ones before 1970)",
								line, c.TimeField, tv, t.UTC().Format(time.RFC3339Nano), lastRecordTime.Format(time.RFC3339Nano)))
							continue
						} else if ok {
							if len(tv) > 0 && tv[0] != '"' && (t.Before(plausibleFrom) || !t.Before(plausibleTo)) {
								res.Implausible++
							}
							rec.Timestamp, lastTime = t, t
							release(t)
						} else {
							res.Untimed++
							rec.Timestamp = lastTime
						}
					}
				}
				switch {
				case c.TimeField == "" || !rec.Timestamp.IsZero():
					send(rec, line)
				case heldOver:
					res.AppendTimed++
					send(rec, line)
				case len(held) < untimedHeld:
					held = append(held, heldRecord{rec, line})
				default:
					// No time in the first lines: the field is likely
					// misnamed; the append time, not a growing heap.
					heldOver = true
					release(time.Time{})
					res.AppendTimed++
					send(rec, line)
				}
			}
		}
		if rerr == io.EOF {
			break
		}
	}
	if !failed.Load() {
		release(time.Time{})
	}
	ferr := cl.Flush(ctx)
	res.Records, res.Bytes = records.Load(), size.Load()
	mu.Lock()
	defer mu.Unlock()
	switch {
	case firstErr != nil && ctx.Err() == nil:
		return res, fmt.Errorf("kafka: produce to %s: %w", c.Topic, firstErr)
	case badTime != nil && ctx.Err() == nil:
		lines := fmt.Sprintf("line %d", badFrom)
		if badTo > badFrom {
			lines = fmt.Sprintf("lines %d to %d", badFrom, badTo)
		}
		return res, fmt.Errorf("kafka: produce to %s: %s refused for a timestamp: a broker takes none more than the topic's "+
			"message.timestamp.after.max.ms ahead of its clock (an hour by default since Kafka 4.0) or its "+
			"message.timestamp.before.max.ms behind; the farthest from the clock is line %d's, %s: %w",
			c.Topic, lines, farLine, farTime.UTC().Format(time.RFC3339Nano), badTime)
	case ctx.Err() != nil:
		return res, ctx.Err()
	case ferr != nil:
		return res, fmt.Errorf("kafka: produce to %s: %w", c.Topic, ferr)
	}
	return res, nil
}
