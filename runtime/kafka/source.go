package kafka

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// StartFrom says where [NewSource] starts a partition that has no explicit
// offset in [SourceConfig.Offsets].
type StartFrom int

const (
	// FromEarliest starts at the partition's log start offset (the default).
	FromEarliest StartFrom = iota
	// FromLatest starts at the partition's end when the source starts: its
	// last stable offset under read_committed, its high watermark
	// otherwise. Only records written later are read.
	FromLatest
	// FromCommitted starts at the offset [SourceConfig.Group] has committed
	// for the partition, and at the earliest offset when it has none.
	FromCommitted
	// FromTime starts at the first record whose timestamp is at or after
	// [SourceConfig.StartTime], and at the partition's end when none is.
	FromTime
)

func (s StartFrom) String() string {
	switch s {
	case FromEarliest:
		return "earliest"
	case FromLatest:
		return "latest"
	case FromCommitted:
		return "committed"
	case FromTime:
		return "time"
	}
	return fmt.Sprintf("StartFrom(%d)", int(s))
}

// Defaults of a [SourceConfig] field left zero.
const (
	DefaultBatchRecords  = 1024
	DefaultBatchBytes    = 1 << 20
	DefaultBuffer        = 4
	DefaultFetchMaxBytes = 16 << 20
)

// ErrBadOffset is returned (wrapped, with the partition and the offsets) by
// [NewSource] for an explicit start offset outside the partition's log:
// before its log start offset (the records were deleted) or past its high
// watermark. Use errors.Is(err, ErrBadOffset).
var ErrBadOffset = errors.New("kafka: start offset outside the partition's log")

// OutOfRange reports whether err is a read of offsets a partition's log
// does not hold: ErrBadOffset from [NewSource], or a fetch that the broker
// answered OFFSET_OUT_OF_RANGE (a [Source]'s error once the records at
// its position were deleted under it, by DeleteRecords or retention).
func OutOfRange(err error) bool {
	return errors.Is(err, ErrBadOffset) || errors.Is(err, kerr.OffsetOutOfRange)
}

// SourceConfig configures [NewSource]. Brokers and Topic are required; the
// other fields may stay zero.
type SourceConfig struct {
	// Brokers are the seed brokers, host:port each; Security how the
	// connections are secured.
	Brokers  []string
	Security Security
	// Topic is the topic read: every partition it has when the source
	// starts (partitions added later are not read). It must exist (else
	// ErrNoTopic).
	Topic string
	// Partitions, when set, are the only partitions read (a member's
	// share of a consumer group's topic); each must exist. Default: all.
	Partitions []int32
	// Ends, with Bounded, fixes where a partition ends (a job of several
	// instances ends where its first instance listed the ends), instead
	// of the end listed at the start; an end beyond that is an error.
	Ends map[int32]int64
	// Offsets are explicit start offsets by partition, the next offsets of
	// a checkpoint ([Batch].Next): such a partition starts there, whatever
	// Start says. An offset outside the partition's log is ErrBadOffset; a
	// partition the topic does not have is an error.
	Offsets map[int32]int64
	// Start says where the partitions without an entry in Offsets start.
	// Default: FromEarliest.
	Start StartFrom
	// StartTime is the time of FromTime (millisecond precision). It must
	// be set with FromTime and only then.
	StartTime time.Time
	// Group is a consumer group whose committed offsets FromCommitted
	// reads. It is required by FromCommitted and only read then: the
	// source does not join the group (it assigns itself every partition)
	// and commits nothing.
	Group string
	// EndTime, with Bounded, ends each partition before its first record
	// whose timestamp is at or after it (millisecond precision), or at
	// its end when that comes first: a time range [StartTime, EndTime).
	EndTime time.Time
	// Bounded stops each partition at its end when the source starts (its
	// last stable offset under read_committed, its high watermark
	// otherwise), as Flink's bounded Kafka source does: the partition's
	// last batch has Done, and once every partition is done the channel is
	// closed. Unbounded (the default), the source reads until Close.
	Bounded bool
	// ReadUncommitted reads the records of aborted and open transactions
	// too. The default, false, is read_committed: only committed records
	// are delivered, and a partition's end is its last stable offset.
	ReadUncommitted bool
	// BatchRecords and BatchBytes bound a [Batch]: at most BatchRecords
	// records and, unless it holds a single record, at most BatchBytes
	// bytes of keys and values. Defaults (0): 1024 records, 1 MiB.
	BatchRecords, BatchBytes int
	// Buffer is the capacity, in batches, of the channel of
	// [Source.Batches]. Default (0): 4.
	Buffer int
	// Stalled, when set on an unbounded read_committed source, is called
	// (from a goroutine of its own) with the partitions whose last stable
	// offset has stood still below the high watermark for StallAfter: a
	// transaction open that long holds every read_committed reader of the
	// partition at that offset, as one left open by a producer that died
	// does until its transaction timeout. A partition is given again, Ended,
	// when the offset moves on. One call per look at the offsets.
	Stalled func(held []Held)
	// StallAfter is how long the last stable offset must stand still for
	// Stalled (default 15s); it is looked at every third of that.
	StallAfter time.Duration
	// FetchMaxBytes is what one fetch from one broker may return, and so
	// (franz-go buffers at most one fetch per broker) about what the
	// client holds per broker while the consumer is slow. One record
	// batch larger than it is still fetched. Default (0): 16 MiB.
	FetchMaxBytes int
}

// Validate reports every problem of c, joined.
func (c SourceConfig) Validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("kafka: no brokers given"))
	}
	if c.Topic == "" {
		errs = append(errs, errors.New("kafka: no topic given"))
	}
	switch c.Start {
	case FromEarliest, FromLatest:
	case FromCommitted:
		if c.Group == "" {
			errs = append(errs, errors.New("kafka: start from committed offsets needs a group"))
		}
	case FromTime:
		if c.StartTime.IsZero() {
			errs = append(errs, errors.New("kafka: start from a time needs a start time"))
		}
	default:
		errs = append(errs, fmt.Errorf("kafka: unknown start %v", c.Start))
	}
	if c.Start != FromTime && !c.StartTime.IsZero() {
		errs = append(errs, fmt.Errorf("kafka: a start time is given with start %v", c.Start))
	}
	if !c.EndTime.IsZero() && !c.Bounded {
		errs = append(errs, errors.New("kafka: an end time needs a bounded source"))
	}
	// ListOffsets takes a time of -1 for the end of a partition and -2 for
	// its start, and refuses other negative ones (UNSUPPORTED_VERSION): a
	// time in the last 2 ms of 1969 read the wrong range without a word.
	for _, t := range []struct {
		what string
		at   time.Time
	}{{"start", c.StartTime}, {"end", c.EndTime}} {
		if !t.at.IsZero() && t.at.UnixMilli() < 0 {
			errs = append(errs, fmt.Errorf("kafka: %s time %s is before 1970-01-01T00:00:00Z, where record timestamps begin", t.what, t.at.UTC().Format(time.RFC3339Nano)))
		}
	}
	if c.Ends != nil && !c.Bounded {
		errs = append(errs, errors.New("kafka: end offsets need a bounded source"))
	}
	for p, o := range c.Offsets {
		if p < 0 || o < 0 {
			errs = append(errs, fmt.Errorf("kafka: start offset %d of partition %d is negative", o, p))
		}
	}
	if c.BatchRecords < 0 || c.BatchBytes < 0 || c.Buffer < 0 || c.FetchMaxBytes < 0 {
		errs = append(errs, errors.New("kafka: negative batch, buffer or fetch size"))
	}
	return errors.Join(errs...)
}

func (c SourceConfig) withDefaults() SourceConfig {
	if c.BatchRecords == 0 {
		c.BatchRecords = DefaultBatchRecords
	}
	if c.BatchBytes == 0 {
		c.BatchBytes = DefaultBatchBytes
	}
	if c.Buffer == 0 {
		c.Buffer = DefaultBuffer
	}
	if c.FetchMaxBytes == 0 {
		c.FetchMaxBytes = DefaultFetchMaxBytes
	}
	if c.StallAfter <= 0 {
		c.StallAfter = DefaultStallAfter
	}
	return c
}

// SourceRecord is one record of a [Batch].
type SourceRecord struct {
	// Offset is the record's offset in its partition.
	Offset int64
	// Time is the record's timestamp (CreateTime or LogAppendTime, as the
	// topic says), in milliseconds.
	Time time.Time
	// Key and Value are the record's. A null key or value is nil, an
	// empty one is empty and not nil. They belong to the batch: the
	// consumer may keep them.
	Key, Value []byte
	// ProducerID and ProducerEpoch are those of the producer that wrote
	// the record (-1 for a producer that is neither idempotent nor
	// transactional): which run of a transactional job wrote it.
	ProducerID    int64
	ProducerEpoch int16
}

// Batch is what a [Source] delivers: consecutive records of one partition,
// in offset order. The batches of one partition arrive in order; those of
// different partitions interleave.
type Batch struct {
	// Partition is the partition the records are of.
	Partition int32
	// Records are the records, in offset order. A batch may have none: the
	// first of a partition, and one that only moves Next past transaction
	// markers or aborted records, or changes a flag.
	Records []SourceRecord
	// Next is the offset to resume the partition at after this batch: a
	// checkpoint taken after this batch, and before the partition's next,
	// stores Next ([SourceConfig.Offsets]). It is past the last record,
	// and past the transaction markers and aborted records read with it;
	// in the first batch it is the partition's start offset.
	Next int64
	// Opened marks the first batch of a partition, sent before any of its
	// records (it has none), so that the consumer knows every partition
	// and its start before the first record comes. The opened batches of
	// all partitions come first, in partition order.
	Opened bool
	// CaughtUp says that Next has reached the partition's end as last
	// seen: its last stable offset under read_committed, its high
	// watermark otherwise, as of the listing at the start (for an opened
	// batch) or of the fetch that brought the records. A partition is
	// idle only while its last batch says CaughtUp; a later batch with
	// records may say it again, or not.
	CaughtUp bool
	// Done marks the last batch of a partition in bounded mode: Next has
	// reached the partition's end when the source started. Done implies
	// CaughtUp.
	Done bool
	// End is the partition's end as the fetch (or, for an opened batch,
	// the listing) saw it: its last stable offset under read_committed,
	// its high watermark otherwise. End - Next is the consumer's lag.
	End int64

	bytes int // of keys and values
}

// Source reads the partitions of one topic with franz-go and delivers
// their records in [Batch] values over one bounded channel, so that the
// consumer (the engine's coordinator) can select on its timers while no
// record comes. It assigns itself every partition of the topic, without
// joining a consumer group, starts each where [SourceConfig] says, and
// reads read_committed unless told otherwise.
//
// The channel is the backpressure: when the consumer is slow, the
// source's goroutine blocks on it and stops polling, so the records held
// are at most Buffer batches in the channel, plus one poll of BatchRecords
// records, plus what franz-go buffers: one fetch per broker, at most
// FetchMaxBytes (or one larger record batch) each.
//
// Errors (a fetch error, such as OffsetOutOfRange when a partition's
// records were deleted under it) stop the source and close the channel;
// Err returns the first. In bounded mode the channel is closed once every
// partition is done; unbounded, the source reads until Close or the
// cancellation of its context.
//
// Offsets are learned from records, transaction markers included: a
// partition whose log ends with records removed by compaction is never
// seen to reach its end. An input topic must not be compacted.
//
// Batches, Pause, Resume, Err and Close may be called from any goroutine.
type Source struct {
	cfg    SourceConfig
	cl     *kgo.Client
	ctx    context.Context
	cancel context.CancelFunc
	out    chan Batch
	done   chan struct{} // closed when the goroutine has ended, after out
	// watched is closed when watchStalls has returned (nil: no watcher).
	watched chan struct{}

	parts  []int32         // the topic's partitions, in order
	starts map[int32]int64 // the start offset of each partition
	ends   map[int32]int64 // the end of each partition at the start

	polled atomic.Int64 // records taken from the client, for tests

	mu        sync.Mutex // guards err and doneParts
	err       error
	doneParts map[int32]bool // partitions done in bounded mode
}

// NewSource lists the partitions of c.Topic, resolves their start offsets
// (and, for Bounded, their ends) and starts reading them. It returns an
// error for a bad config, a missing topic (ErrNoTopic), an explicit offset
// outside its partition (ErrBadOffset) or brokers that do not answer. The
// source stops when ctx is done or at Close, which the caller must call in
// any case.
func NewSource(ctx context.Context, c SourceConfig) (*Source, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c = c.withDefaults()
	isolation := kgo.ReadCommitted()
	if c.ReadUncommitted {
		isolation = kgo.ReadUncommitted()
	}
	// The client is made with nothing to consume: partitions are added
	// once their offsets are known, so that a failing start fetches
	// nothing.
	cl, err := (Conn{c.Brokers, c.Security}).newClient(
		kgo.FetchIsolationLevel(isolation),
		// Transaction markers take offsets too: seeing them is how Next
		// passes a commit or an abort and reaches the end.
		kgo.KeepControlRecords(),
		// A start offset out of range is the caller's error, never a
		// silent jump to another position.
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.FetchMaxBytes(int32(min(c.FetchMaxBytes, 1<<30))),
		kgo.FetchMaxPartitionBytes(int32(min(c.FetchMaxBytes, 1<<30))),
		// A resumed partition waits for the fetch in flight, which waits
		// this long when no record comes (franz-go's default is 5 s).
		kgo.FetchMaxWait(time.Second),
		metadataMinAge,
		offsetFetchRetry,
	)
	if err != nil {
		return nil, err // newClient says kafka:
	}
	s := &Source{cfg: c, cl: cl, doneParts: map[int32]bool{}}
	if err := s.resolve(ctx); err != nil {
		cl.Close()
		return nil, err
	}
	assign := map[int32]kgo.Offset{}
	for _, p := range s.parts {
		assign[p] = kgo.NewOffset().At(s.starts[p])
	}
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{c.Topic: assign})

	s.ctx, s.cancel = context.WithCancel(ctx)
	s.out = make(chan Batch, c.Buffer)
	s.done = make(chan struct{})
	go s.run()
	if c.Stalled != nil && !c.Bounded && !c.ReadUncommitted {
		s.watched = make(chan struct{})
		go s.watchStalls()
	}
	return s, nil
}

// Held is a partition of [SourceConfig.Stalled]: its readers have waited
// For at Offset behind an open transaction, or (Ended) waited that long
// before it ended.
type Held struct {
	Partition int32
	Offset    int64
	For       time.Duration
	Ended     bool
}

// DefaultStallAfter is the default of [SourceConfig.StallAfter].
const DefaultStallAfter = 15 * time.Second

// watchStalls calls cfg.Stalled for the partitions of s whose last stable
// offset stands still below the high watermark for cfg.StallAfter, and
// again when it moves on, until s is closed. A round whose offsets cannot
// be listed is skipped: the reading itself reports brokers away.
func (s *Source) watchStalls() {
	defer close(s.watched)
	c := s.cfg
	adm := kadm.NewClient(s.cl)
	type stall struct {
		lso      int64
		since    time.Time
		reported bool
	}
	stalls := map[int32]*stall{}
	tick := time.NewTicker(max(c.StallAfter/3, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-tick.C:
		}
		stable, err := adm.ListCommittedOffsets(s.ctx, c.Topic)
		if err != nil || stable.Error() != nil {
			continue
		}
		high, err := adm.ListEndOffsets(s.ctx, c.Topic)
		if err != nil || high.Error() != nil {
			continue
		}
		now := time.Now()
		var held []Held
		for _, p := range s.parts {
			lso, ok1 := stable.Lookup(c.Topic, p)
			hwm, ok2 := high.Lookup(c.Topic, p)
			if !ok1 || !ok2 {
				continue
			}
			st := stalls[p]
			if st != nil && st.lso == lso.Offset && lso.Offset < hwm.Offset {
				if !st.reported && now.Sub(st.since) >= c.StallAfter {
					st.reported = true
					held = append(held, Held{Partition: p, Offset: lso.Offset, For: now.Sub(st.since)})
				}
				continue
			}
			if st != nil && st.reported {
				held = append(held, Held{Partition: p, Offset: st.lso, For: now.Sub(st.since), Ended: true})
			}
			if lso.Offset < hwm.Offset {
				stalls[p] = &stall{lso: lso.Offset, since: now}
			} else {
				delete(stalls, p)
			}
		}
		if len(held) > 0 {
			c.Stalled(held)
		}
	}
}

// resolve lists the topic's partitions and sets s.parts, s.starts and
// s.ends.
func (s *Source) resolve(ctx context.Context) error {
	c := s.cfg
	adm := kadm.NewClient(s.cl)
	// Every request is retried while brokers are away (killed, restarting,
	// their partitions' leadership not yet moved: listings sent to one
	// answered "unable to dial", which failed a job's start at once, a CI
	// run of TestExactlyOnceKafkaBrokerFailure). The first is often a
	// command's first call to the brokers: a setting's fault (TLS against
	// a plaintext listener) is said at once (retryAtStart).
	err := retryAtStart(ctx, func(ctx context.Context) error {
		_, err := partitionCount(ctx, adm, c.Topic)
		return err
	})
	if err != nil {
		return err
	}
	list := func(what string, f func(context.Context, ...string) (kadm.ListedOffsets, error)) (kadm.ListedOffsets, error) {
		l, err := listOffsets(ctx, adm, f, c.Topic)
		if err != nil {
			return nil, fmt.Errorf("kafka: %s offsets of %s: %w", what, c.Topic, err)
		}
		return l, nil
	}
	logStarts, err := list("start", adm.ListStartOffsets)
	if err != nil {
		return err
	}
	hwms, err := list("end", adm.ListEndOffsets)
	if err != nil {
		return err
	}
	ends := hwms
	if !c.ReadUncommitted {
		if ends, err = list("last stable", adm.ListCommittedOffsets); err != nil {
			return err
		}
	}
	var committed kadm.OffsetResponses
	if c.Start == FromCommitted && len(c.Offsets) < len(logStarts[c.Topic]) {
		// The fetch waits for pending transactional commits to resolve
		// (KIP-447): an offset in an open transaction is not committed.
		committed, err = fetchOffsets(ctx, adm, c.Group, true, nil, func(r kadm.OffsetResponses) error { return r.Error() })
		if err != nil {
			return fmt.Errorf("kafka: committed offsets of group %s: %w", c.Group, err)
		}
	}
	var atTime kadm.ListedOffsets
	if c.Start == FromTime {
		f := func(ctx context.Context, topics ...string) (kadm.ListedOffsets, error) {
			return adm.ListOffsetsAfterMilli(ctx, c.StartTime.UnixMilli(), topics...)
		}
		if atTime, err = list("time", f); err != nil {
			return err
		}
	}

	var untilTime kadm.ListedOffsets
	if !c.EndTime.IsZero() {
		f := func(ctx context.Context, topics ...string) (kadm.ListedOffsets, error) {
			return adm.ListOffsetsAfterMilli(ctx, c.EndTime.UnixMilli(), topics...)
		}
		if untilTime, err = list("end time", f); err != nil {
			return err
		}
	}

	s.starts, s.ends = map[int32]int64{}, map[int32]int64{}
	for _, p := range c.Partitions {
		if _, ok := logStarts.Lookup(c.Topic, p); !ok {
			return fmt.Errorf("kafka: topic %s has no partition %d", c.Topic, p)
		}
	}
	for p, lo := range logStarts[c.Topic] {
		if c.Partitions != nil && !slices.Contains(c.Partitions, p) {
			continue
		}
		s.parts = append(s.parts, p)
		hwm, _ := hwms.Lookup(c.Topic, p)
		end, _ := ends.Lookup(c.Topic, p)
		if o, ok := untilTime.Lookup(c.Topic, p); ok && o.Offset >= 0 {
			end.Offset = min(end.Offset, o.Offset)
		}
		if e, ok := c.Ends[p]; ok {
			if e > hwm.Offset {
				return fmt.Errorf("partition %d of %s: end offset %d beyond the log's end %d: %w", p, c.Topic, e, hwm.Offset, ErrBadOffset)
			}
			end.Offset = e
		}
		s.ends[p] = end.Offset
		start := lo.Offset
		if o, ok := c.Offsets[p]; ok {
			if o < lo.Offset || o > hwm.Offset {
				return fmt.Errorf("partition %d of %s: offset %d, log from %d to %d: %w", p, c.Topic, o, lo.Offset, hwm.Offset, ErrBadOffset)
			}
			start = o
		} else {
			switch c.Start {
			case FromLatest:
				start = end.Offset
			case FromCommitted:
				if o, ok := committed.Lookup(c.Topic, p); ok && o.At >= 0 {
					start = max(o.At, lo.Offset)
				}
			case FromTime:
				// No record at or after the time gives the high
				// watermark: under read_committed, the end is before it.
				if o, ok := atTime.Lookup(c.Topic, p); ok && o.Offset >= 0 {
					start = min(o.Offset, end.Offset)
				}
			}
		}
		s.starts[p] = start
	}
	slices.Sort(s.parts)
	for p := range c.Offsets {
		if _, ok := s.starts[p]; !ok {
			return fmt.Errorf("kafka: start offset of partition %d: topic %s has partitions %v", p, c.Topic, s.parts)
		}
	}
	return nil
}

// Batches returns the channel the batches come on. It is closed when the
// source stops: every partition done in bounded mode, an error, Close, or
// the cancellation of the source's context.
func (s *Source) Batches() <-chan Batch { return s.out }

// Partitions returns the start offset of each of the topic's partitions
// (the Next of their opened batches).
func (s *Source) Partitions() map[int32]int64 { return maps.Clone(s.starts) }

// Ends returns the end offset of each of the topic's partitions: where a
// bounded source stops (the end when it started, or the end of its
// EndTime or Ends).
func (s *Source) Ends() map[int32]int64 { return maps.Clone(s.ends) }

// Pause stops fetching the given partitions until Resume. What the source
// has already taken from the client still comes (at most Buffer batches
// and one poll); what the client has buffered is held back, not dropped.
// A resumed partition's records may take up to a second to come: the next
// fetch from its broker waits for the one in flight.
func (s *Source) Pause(partitions ...int32) {
	s.cl.PauseFetchPartitions(map[string][]int32{s.cfg.Topic: partitions})
}

// Resume resumes fetching partitions that Pause paused. A partition done in
// bounded mode stays paused.
func (s *Source) Resume(partitions ...int32) {
	// Under the lock, as finish's pause: a partition found not done here
	// could otherwise be resumed after finish paused it.
	s.mu.Lock()
	defer s.mu.Unlock()
	var resume []int32
	for _, p := range partitions {
		if !s.doneParts[p] {
			resume = append(resume, p)
		}
	}
	s.cl.ResumeFetchPartitions(map[string][]int32{s.cfg.Topic: resume})
}

// Err returns the error that stopped the source, or nil. It is final once
// the channel of Batches is closed.
func (s *Source) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close stops the source, waits until its goroutine has ended and closes
// the client. It returns Err. Close may be called more than once.
func (s *Source) Close() error {
	s.cancel()
	<-s.done
	if s.watched != nil {
		<-s.watched
	}
	s.cl.Close()
	return s.Err()
}

func (s *Source) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
}

// run is the source's goroutine: it sends the opened batches, then polls
// and sends until the end, an error or the cancellation.
func (s *Source) run() {
	defer close(s.done)
	defer close(s.out)
	if err := s.loop(); err != nil && s.ctx.Err() == nil {
		s.fail(err)
	}
	s.cancel()
}

// partState is what the run goroutine knows of one partition.
type partState struct {
	next     int64 // the offset after the last record (or marker) seen
	sentNext int64 // Next of the last batch sent
	caughtUp bool  // CaughtUp of the last batch sent
	done     bool
}

func (s *Source) loop() error {
	c := s.cfg
	state := map[int32]*partState{}
	left := 0 // partitions not done
	for _, p := range s.parts {
		st := &partState{next: s.starts[p], sentNext: s.starts[p]}
		state[p] = st
		b := Batch{Partition: p, Next: st.next, End: s.ends[p], Opened: true, CaughtUp: st.next >= s.ends[p]}
		st.caughtUp = b.CaughtUp
		if c.Bounded && b.CaughtUp {
			b.Done, st.done = true, true
			s.markDone(p)
		} else {
			left++
		}
		if !s.send(b) {
			return nil
		}
	}
	var out []Batch
	for !c.Bounded || left > 0 {
		fs := s.cl.PollRecords(s.ctx, c.BatchRecords)
		if s.ctx.Err() != nil {
			return nil
		}
		var ferr error
		fs.EachError(func(topic string, p int32, err error) {
			if ferr == nil {
				ferr = fmt.Errorf("kafka: read %s partition %d: %w", topic, p, err)
			}
		})
		if ferr != nil {
			return ferr
		}
		out = out[:0]
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			st := state[fp.Partition]
			s.polled.Add(int64(len(fp.Records)))
			if st == nil || st.done || len(fp.Records) == 0 {
				return
			}
			out = s.split(out, fp.FetchPartition, st)
			if st.done {
				left--
				s.finish(fp.Partition)
			}
		})
		for _, b := range out {
			if !s.send(b) {
				return nil
			}
		}
	}
	return nil
}

// split appends to out the batches of the records of fp, a fetch of the
// partition whose state is st, and updates st.
func (s *Source) split(out []Batch, fp kgo.FetchPartition, st *partState) []Batch {
	c := s.cfg
	end := fp.HighWatermark
	if !c.ReadUncommitted {
		end = fp.LastStableOffset
	}
	bend := s.ends[fp.Partition]
	remaining := 0 // bytes of the records from the current one on
	for _, r := range fp.Records {
		remaining += len(r.Key) + len(r.Value)
	}
	var arena []byte
	b := Batch{Partition: fp.Partition}
	for _, r := range fp.Records {
		size := len(r.Key) + len(r.Value)
		if c.Bounded && r.Offset >= bend {
			// Past the end: what lies between Next and the end was
			// aborted records, whose marker is past the end too.
			st.next = max(st.next, bend)
			break
		}
		remaining -= size
		if r.Offset < st.next {
			continue // seen already; franz-go does not resend, but be safe
		}
		st.next = r.Offset + 1
		if r.Attrs.IsControl() {
			continue
		}
		if len(b.Records) > 0 && (len(b.Records) >= c.BatchRecords || b.bytes+size > c.BatchBytes) {
			b.Next, b.End = st.next-1, end // r is not in b; r.Offset is the next
			out = append(out, b)
			st.sentNext = b.Next
			st.caughtUp = false
			b = Batch{Partition: fp.Partition}
			arena = nil
		}
		if arena == nil {
			arena = make([]byte, 0, min(remaining+size, c.BatchBytes))
		}
		var key, value []byte
		key, arena = own(arena, r.Key)
		value, arena = own(arena, r.Value)
		b.Records = append(b.Records, SourceRecord{Offset: r.Offset, Time: r.Timestamp, Key: key, Value: value,
			ProducerID: r.ProducerID, ProducerEpoch: r.ProducerEpoch})
		b.bytes += size
	}
	b.Next, b.End = st.next, end
	b.CaughtUp = st.next >= end
	if c.Bounded && st.next >= bend {
		b.Done, b.CaughtUp, st.done = true, true, true
	}
	if len(b.Records) > 0 || b.Done || b.Next != st.sentNext || b.CaughtUp != st.caughtUp {
		out = append(out, b)
		st.sentNext, st.caughtUp = b.Next, b.CaughtUp
	}
	return out
}

// own returns a copy of b in arena (nil for a nil b) and the arena.
func own(arena, b []byte) ([]byte, []byte) {
	if b == nil {
		return nil, arena
	}
	n := len(arena)
	arena = append(arena, b...)
	return arena[n:len(arena):len(arena)], arena
}

func (s *Source) markDone(p int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.doneParts[p] = true
}

// finish marks partition p done and pauses its fetching, under the lock
// that Resume holds (franz-go's pause and resume do not block).
func (s *Source) finish(p int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.doneParts[p] = true
	s.cl.PauseFetchPartitions(map[string][]int32{s.cfg.Topic: {p}})
}

// send sends b, or returns false when the source stops first.
func (s *Source) send(b Batch) bool {
	select {
	case s.out <- b:
		return true
	case <-s.ctx.Done():
		return false
	}
}
