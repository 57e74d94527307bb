package kafka

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultIdle is the [ConsumeConfig.Idle] of a zero config.
const DefaultIdle = 5 * time.Second

// ConsumeConfig configures [Consume]. Brokers and Topic are required; the
// other fields may stay zero.
type ConsumeConfig struct {
	// Brokers are the seed brokers, host:port each; Security how the
	// connections are secured.
	Brokers  []string
	Security Security
	// Topic is the topic read, from the start of every partition. It must
	// exist (else ErrNoTopic).
	Topic string
	// Idle is how long the topic must stay quiet, once everything in it has
	// been read, for Consume to return. 0 means DefaultIdle (5 s).
	Idle time.Duration
	// ReadUncommitted reads the records of aborted and still open
	// transactions too (isolation level read_uncommitted). The default,
	// false, reads committed records only (read_committed): a record of a
	// transaction is shown once the transaction commits, never when it
	// aborts.
	ReadUncommitted bool
}

// Validate reports every problem of c, joined.
func (c ConsumeConfig) Validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("kafka: no brokers given"))
	}
	if c.Topic == "" {
		errs = append(errs, errors.New("kafka: no topic given"))
	}
	if c.Idle < 0 {
		errs = append(errs, fmt.Errorf("kafka: idle %v is negative", c.Idle))
	}
	return errors.Join(errs...)
}

// ConsumeResult says what [Consume] read.
type ConsumeResult struct {
	// Records is the number of records written to the output.
	Records int64
	// Bytes is the size of their values.
	Bytes int64
	// Partitions is the topic's partition count when Consume started.
	Partitions int
}

// recheck is how often Consume asks for the end offsets while it waits to
// catch up, once the topic has been quiet for Idle.
const recheck = 250 * time.Millisecond

// Consume reads c.Topic from the beginning of every partition, without a
// consumer group (no offsets are committed), and writes each record's value
// to w followed by "\n", as it is: a topic of JSON lines comes out as JSON
// lines. Records of one partition keep their order; partitions interleave.
// w is written through a buffer that is flushed after each batch of
// records, so a reader sees them as they come.
//
// It returns nil once it has read every partition up to its end (the last
// stable offset under read_committed, the high watermark otherwise) and no
// record has come for c.Idle: a topic written to without a pause of Idle
// is read until ctx is cancelled. Cancelling ctx returns ctx.Err() with
// what was read so far.
func Consume(ctx context.Context, c ConsumeConfig, w io.Writer) (ConsumeResult, error) {
	var res ConsumeResult
	if err := c.Validate(); err != nil {
		return res, err
	}
	idle := c.Idle
	if idle == 0 {
		idle = DefaultIdle
	}
	isolation := kgo.ReadCommitted()
	if c.ReadUncommitted {
		isolation = kgo.ReadUncommitted()
	}
	cl, err := (Conn{c.Brokers, c.Security}).newClient(
		kgo.ConsumeTopics(c.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(isolation),
		// Transaction markers take offsets too: seeing them is how the
		// position reaches the last stable offset after a commit. They
		// are not written out.
		kgo.KeepControlRecords(),
		metadataMinAge,
	)
	if err != nil {
		return res, err // newClient says kafka:
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	// Brokers that do not answer fail the command after retryAtStart's
	// bound, saying so (the client alone gave an i/o timeout after a
	// minute).
	err = retryAtStart(ctx, func(ctx context.Context) error {
		var err error
		res.Partitions, err = partitionCount(ctx, adm, c.Topic)
		return err
	})
	if err != nil {
		return res, err
	}

	next := map[int32]int64{} // per partition, the offset after the last record seen
	bw := bufio.NewWriterSize(w, 1<<16)
	last := time.Now() // of the last record written, or of the start
	for {
		wait := idle - time.Since(last)
		if wait <= 0 {
			done, err := caughtUp(ctx, adm, c.Topic, !c.ReadUncommitted, next)
			if err != nil {
				return res, err
			}
			if done {
				return res, nil
			}
			wait = min(idle, recheck)
		}
		pctx, cancel := context.WithTimeout(ctx, wait)
		fetches := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		var ferr error
		fetches.EachError(func(topic string, p int32, err error) {
			if ferr == nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				ferr = fmt.Errorf("kafka: read %s partition %d: %w", topic, p, err)
			}
		})
		if ferr != nil {
			return res, ferr
		}
		wrote := false
		for it := fetches.RecordIter(); !it.Done(); {
			rec := it.Next()
			next[rec.Partition] = rec.Offset + 1
			if rec.Attrs.IsControl() {
				continue
			}
			bw.Write(rec.Value)
			bw.WriteByte('\n')
			res.Records++
			res.Bytes += int64(len(rec.Value))
			wrote = true
		}
		if wrote {
			last = time.Now()
			if err := bw.Flush(); err != nil {
				return res, err
			}
		}
	}
}

// caughtUp reports whether next has reached the end of every partition of
// topic: its last stable offset when committed, else its high watermark. A
// partition nothing was read from counts from its start offset.
func caughtUp(ctx context.Context, adm *kadm.Client, topic string, committed bool, next map[int32]int64) (bool, error) {
	list := adm.ListEndOffsets
	if committed {
		list = adm.ListCommittedOffsets
	}
	ends, err := listOffsets(ctx, adm, list, topic)
	if err != nil {
		return false, fmt.Errorf("kafka: end offsets of %s: %w", topic, err)
	}
	starts, err := listOffsets(ctx, adm, adm.ListStartOffsets, topic)
	if err != nil {
		return false, fmt.Errorf("kafka: start offsets of %s: %w", topic, err)
	}
	done := true
	ends.Each(func(o kadm.ListedOffset) {
		pos := next[o.Partition]
		if s, ok := starts.Lookup(topic, o.Partition); ok {
			pos = max(pos, s.Offset)
		}
		done = done && pos >= o.Offset
	})
	return done, nil
}
