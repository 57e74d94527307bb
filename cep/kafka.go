package cep

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/event/jsonev"
	"github.com/cepheus-cep/cepheus/runtime"
	"github.com/cepheus-cep/cepheus/runtime/kafka"
)

// KafkaProduceConfig configures [KafkaProduce]: the brokers, the topic (and
// its partition count when it is created), the key field and the time
// field. It is [kafka.ProduceConfig], whose fields document their defaults.
type KafkaProduceConfig = kafka.ProduceConfig

// KafkaProduceResult says what [KafkaProduce] wrote; see
// [kafka.ProduceResult].
type KafkaProduceResult = kafka.ProduceResult

// KafkaConsumeConfig configures [KafkaConsume]: the brokers, the topic, the
// idle time after which it returns and the isolation level. It is
// [kafka.ConsumeConfig].
type KafkaConsumeConfig = kafka.ConsumeConfig

// KafkaConsumeResult says what [KafkaConsume] read; see
// [kafka.ConsumeResult].
type KafkaConsumeResult = kafka.ConsumeResult

// ErrKafkaNoTopic is returned (wrapped) by [KafkaConsume] for a topic that
// does not exist, and ErrKafkaPartitionCount by [KafkaProduce] for a topic
// that exists with another partition count than asked for. Use errors.Is.
var (
	ErrKafkaNoTopic        = kafka.ErrNoTopic
	ErrKafkaPartitionCount = kafka.ErrPartitionCount
)

// KafkaProduce writes the JSON lines of r to a Kafka topic, one record per
// line, creating the topic when it is missing (with unlimited retention);
// see [kafka.Produce].
func KafkaProduce(ctx context.Context, c KafkaProduceConfig, r io.Reader) (KafkaProduceResult, error) {
	return kafka.Produce(ctx, c, r)
}

// KafkaConsume writes the values of a Kafka topic to w as lines, from the
// beginning, read committed unless told otherwise, and returns once the
// topic has been read to its end and stayed idle; see [kafka.Consume].
func KafkaConsume(ctx context.Context, c KafkaConsumeConfig, w io.Writer) (KafkaConsumeResult, error) {
	return kafka.Consume(ctx, c, w)
}

// KafkaInput is the input of [Engine.Stream] from a Kafka topic
// (StreamConfig.Kafka): every partition of Topic is a partition of the
// job, its position the offset to resume at. The records' values are the
// events (JSON); event time is the ruleset's time field, not the record
// time. Bounded stops at the end offsets seen at the start, with a final
// watermark and a final checkpoint, as a file does; else the run goes on
// until it is stopped, as a followed file does. Start says where a
// partition without a checkpoint starts (default: the earliest offset).
// Without AlertsTopic, the alerts, late events and dead letters go to the
// outputs of StreamConfig (its directories exactly once); with it, to
// topics, in one transaction per checkpoint (below).
type KafkaInput struct {
	Brokers []string
	// Security is how every connection to the brokers is secured (TLS,
	// SASL); the zero value is plaintext.
	Security KafkaSecurity
	Topic    string
	Bounded  bool
	Start    KafkaStart
	// StartTime is the time of KafkaFromTime; StartGroup the group of
	// KafkaFromCommitted without an alerts topic (with one, Group).
	StartTime  time.Time
	StartGroup string
	// EndTime, with Bounded, ends each partition before its first record
	// whose timestamp is at or after it.
	EndTime time.Time

	// AlertsTopic, when set, makes the job transactional (docs/kafka.md,
	// "Exactly once"): every checkpoint is one Kafka transaction holding
	// the alerts (to AlertsTopic, keyed by the rule key), the late events
	// (LateTopic) and dead letters (DeadTopic) when set, the changed
	// state (ChangelogTopic, default Group-changelog: compacted,
	// partitioned as the input) and the input offsets, committed to Group
	// (required). The state directories are then a local copy: a restart
	// resumes from the checkpoint the group's offsets name, from its local
	// copy or from the changelog. The outputs of StreamConfig must be
	// empty. ShadowTopic receives the alerts of a shadow version
	// ([Deploy].Shadow), in the same transactions.
	AlertsTopic, LateTopic, DeadTopic, ChangelogTopic string
	ShadowTopic                                       string
	// RulesTopic, with AlertsTopic, is the group's rules topic
	// (compacted, one partition, created if need be): a deploy to any
	// instance goes into it, and every instance follows it and deploys
	// what it says at its next checkpoint; a restart deploys its newest
	// versions.
	RulesTopic string
	Group      string
	// InstanceID names the instance (default "0"): its transactional id
	// is cepheus-Group-InstanceID, so that a restarted instance fences
	// the one it replaces at once.
	InstanceID string
	// TxnTimeout is the transaction timeout (default: the checkpoint
	// interval plus the checkpoint timeout plus 30s; at least the
	// interval plus the timeout, at most the broker's
	// transaction.max.timeout.ms, 15 minutes by default).
	TxnTimeout time.Duration
	// LocalInterval is the least time between two local copies of the
	// checkpoints under StateDir (default 10s): the others are in Kafka
	// only, and a restart restores the latest local copy and the
	// changelog's changes since. Negative: every checkpoint has its local
	// copy.
	LocalInterval time.Duration
	// AtLeastOnce writes the alerts, late events and dead letters as
	// soon as they are emitted, outside the transactions (an idempotent
	// producer flushed before each checkpoint's transaction commits): a
	// read_uncommitted or read_committed consumer sees them at once, and
	// after a crash the events since the last committed checkpoint are
	// processed again, so some alerts may come twice, with the same
	// alert id. The state and the offsets stay transactional.
	AtLeastOnce bool
	// RecordKey is the event field the input's records are keyed by
	// (default: the key field of the keyed rules, which must all be keyed
	// by that one field).
	RecordKey string
	// TrustRecordKeys skips the check of the records' keys. Without it, a
	// transactional job with rules keyed by RecordKey sends an input
	// record whose key is not that field's value to the dead letters, and
	// stops when 10 of 100 in a row are so (docs/kafka.md, "Record
	// keys"): those rules' state would be split over the partitions, and
	// their alerts wrong. Set it when the records are
	// partitioned by that field but keyed by another encoding of it.
	TrustRecordKeys bool

	// SessionTimeout is how long the group waits for a silent instance
	// (crashed, paused, cut off) before its partitions move to the others
	// (default 10s); a restart within it gets the same partitions back.
	SessionTimeout time.Duration

	batchRecords int // the source's batches (tests; default its own)
	// beforeRepRead is called by groupDone between the listing of the
	// group's offsets of a repartition topic and the reading of its
	// records past them (tests: its owner commits and purges meanwhile).
	beforeRepRead func(topic string)
	// Set by the group runner for each job: the partitions it reads (nil:
	// all), where a bounded one ends, those of them the group committed
	// as final (their offsets stay final), and the membership its
	// transactions commit under.
	partitions []int32
	ends       map[int32]int64
	final      map[int32]bool
	member     *kafka.Member
}

// KafkaStart says where a partition without a checkpoint starts
// ([kafka.StartFrom]).
type KafkaStart = kafka.StartFrom

// The starts of [KafkaInput].
const (
	KafkaFromEarliest = kafka.FromEarliest
	KafkaFromLatest   = kafka.FromLatest
	// KafkaFromCommitted starts at the offsets Group (of a job without
	// an alerts topic: StartGroup) has committed, the earliest where it
	// has none.
	KafkaFromCommitted = kafka.FromCommitted
	// KafkaFromTime starts at the first record at or after StartTime.
	KafkaFromTime = kafka.FromTime
)

// kafkaReader is a Kafka source seen as the coordinator's batch source:
// each Kafka batch becomes a runtime.Batch of partition "TOPIC-P" whose
// records' Line is their offset + 1 and whose End position holds the next
// offset.
type kafkaReader struct {
	src   *kafka.Source
	out   chan runtime.Batch
	topic string
	done  chan struct{}
	// aligned (a bounded input): the batches go to a queue per partition
	// and a channel per partition (chans, by partition), so that the
	// coordinator takes each next record from the partition whose
	// watermark is lowest, as for a directory; a partition whose queue
	// holds queueHigh batches is paused until it is down to queueLow.
	aligned bool
	queues  map[int32]*partQueue
	chans   []chan runtime.Batch // by position in partitions()
	stop    chan struct{}
	wg      sync.WaitGroup
	// base is added to the partition numbers to make the source indexes
	// (a repartition topic's); shared: out is shared with other readers,
	// and not closed by this one.
	base   int
	shared bool
	// keys: the records keep their keys (runtime.Record.Key).
	keys bool
	// starts are the partitions' start offsets (aligned reading): a
	// batch's Read is its End's offsets past them.
	starts map[int32]int64
}

// The bounds of a partition's queue (aligned reading), in batches.
const (
	queueHigh = 4
	queueLow  = 2
)

// partQueue is the batches of one partition the coordinator has not
// taken yet (aligned reading).
type partQueue struct {
	mu     sync.Mutex
	cond   *sync.Cond
	bs     []runtime.Batch
	closed bool
	paused bool
}

func newPartQueue() *partQueue {
	q := &partQueue{}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// push appends b to the queue; when it reaches queueHigh batches, push
// calls pause. The call is made under the queue's lock, as is pop's
// resume: called after the lock is released, a pause could reach the
// source after the resume of a pop that emptied the queue in between,
// leaving the partition paused with nothing queued to resume it.
func (q *partQueue) push(b runtime.Batch, pause func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.bs = append(q.bs, b)
	if !q.paused && len(q.bs) >= queueHigh {
		q.paused = true
		pause()
	}
	q.cond.Signal()
}

// pop takes the next batch, waiting for one; ok is false once the queue is
// closed and empty. When a paused queue is down to queueLow batches, pop
// calls resume (under the lock, see push).
func (q *partQueue) pop(resume func()) (b runtime.Batch, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.bs) == 0 && !q.closed {
		q.cond.Wait()
	}
	if len(q.bs) == 0 {
		return runtime.Batch{}, false
	}
	b = q.bs[0]
	q.bs = q.bs[1:]
	if q.paused && len(q.bs) <= queueLow {
		q.paused = false
		resume()
	}
	return b, true
}

// close ends the queue: pop returns what is left, then ok false.
func (q *partQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.cond.Signal()
}

// partitionName is the name of Kafka partition p of topic in positions
// and dead letters.
func partitionName(topic string, p int32) string { return topic + "-" + strconv.Itoa(int(p)) }

// partitionOf is the partition of topic that partitionName named name;
// ok is false for a name of no partition of topic.
func partitionOf(topic, name string) (p int32, ok bool) {
	s, ok := strings.CutPrefix(name, topic+"-")
	n, err := strconv.ParseInt(s, 10, 32)
	return int32(n), ok && err == nil && n >= 0
}

// newKafkaReader returns the reader of in's topic, from resume (the
// partitions' positions; none: in.Start); keys: its records keep their
// keys; logf, when set, is told of partitions held behind an open
// transaction (stallLog).
func newKafkaReader(ctx context.Context, in *KafkaInput, resume []runtime.Position, keys bool, logf func(string, ...any)) (*kafkaReader, error) {
	offsets := map[int32]int64{}
	for _, pos := range resume {
		p, ok := partitionOf(in.Topic, pos.File)
		if !ok || pos.Offset < 0 {
			return nil, fmt.Errorf("%w: position %s is not one of topic %s", runtime.ErrBadPosition, pos, in.Topic)
		}
		offsets[p] = pos.Offset
	}
	src, err := kafka.NewSource(ctx, kafka.SourceConfig{
		Brokers: in.Brokers, Security: in.Security, Topic: in.Topic, Offsets: offsets, Start: in.Start, Bounded: in.Bounded,
		StartTime: in.StartTime, Group: in.startGroup(), EndTime: in.EndTime,
		BatchRecords: in.batchRecords, Partitions: in.partitions, Ends: in.ends,
		Stalled: stallLog(logf, "input topic", in.Topic),
	})
	if err != nil {
		return nil, err
	}
	r := &kafkaReader{src: src, out: make(chan runtime.Batch, 4), topic: in.Topic, done: make(chan struct{}),
		aligned: in.Bounded, stop: make(chan struct{}), keys: keys}
	if r.aligned {
		r.starts = src.Partitions()
		r.queues = map[int32]*partQueue{}
		for _, p := range r.partitions() {
			q := newPartQueue()
			ch := make(chan runtime.Batch, 1)
			r.queues[int32(p.Index)] = q
			r.chans = append(r.chans, ch)
			r.wg.Add(1)
			go r.forward(int32(p.Index), q, ch)
		}
	}
	go r.pump()
	return r, nil
}

// forward hands the batches of partition p's queue to its channel,
// resuming the partition once its queue is short again.
func (r *kafkaReader) forward(p int32, q *partQueue, ch chan<- runtime.Batch) {
	defer r.wg.Done()
	defer close(ch)
	resume := func() { r.src.Resume(p) }
	for {
		b, ok := q.pop(resume)
		if !ok {
			return
		}
		select {
		case ch <- b:
		case <-r.stop:
			return
		}
	}
}

// pump converts the source's batches.
func (r *kafkaReader) pump() {
	defer close(r.done)
	if !r.shared {
		defer close(r.out)
	}
	for kb := range r.src.Batches() {
		name := partitionName(r.topic, kb.Partition)
		b := runtime.Batch{
			Partition: runtime.Partition{Index: r.base + int(kb.Partition), Name: name, Path: name},
			End:       runtime.Position{File: name, Offset: kb.Next, Line: kb.Next},
			Opened:    kb.Opened, CaughtUp: kb.CaughtUp, Done: kb.Done, Backlog: max(0, kb.End-kb.Next),
		}
		if r.aligned {
			b.Read = max(0, kb.Next-r.starts[kb.Partition])
		}
		for _, rec := range kb.Records {
			rr := runtime.Record{Line: rec.Offset + 1, Offset: rec.Offset, Data: rec.Value}
			if r.keys {
				rr.Key = rec.Key
			}
			b.Records = append(b.Records, rr)
		}
		if !r.aligned {
			select {
			case r.out <- b:
			case <-r.stop:
				return
			}
			continue
		}
		r.queues[kb.Partition].push(b, func() { r.src.Pause(kb.Partition) })
	}
	for _, q := range r.queues {
		q.close()
	}
}

// partitions lists the topic's partitions, in index order.
func (r *kafkaReader) partitions() []runtime.Partition {
	var ps []runtime.Partition
	for p := range r.src.Partitions() {
		name := partitionName(r.topic, p)
		ps = append(ps, runtime.Partition{Index: int(p), Name: name, Path: name})
	}
	slices.SortFunc(ps, func(a, b runtime.Partition) int { return a.Index - b.Index })
	return ps
}

func (r *kafkaReader) Batches() <-chan runtime.Batch { return r.out }
func (r *kafkaReader) Err() error                    { return r.src.Err() }

func (r *kafkaReader) Close() error {
	close(r.stop)
	err := r.src.Close()
	// The pump may be blocked on a full channel: drain it.
	for range r.out {
	}
	<-r.done
	r.wg.Wait()
	return err
}

// startGroup is the group whose committed offsets KafkaFromCommitted
// reads.
func (k *KafkaInput) startGroup() string {
	if k.Start != KafkaFromCommitted {
		return ""
	}
	if k.StartGroup != "" {
		return k.StartGroup
	}
	return k.Group
}

// TopicReplay names a time range of a topic to backtest
// ([OpenTopicEventSource]): the records whose timestamps lie in [From,
// To) (zero: the topic's start, its end).
type TopicReplay struct {
	Brokers  []string
	Security KafkaSecurity
	Topic    string
	From, To time.Time
	// TimeField is the events' time field (the ruleset's event time):
	// the partitions are merged in its order.
	TimeField string
	// TimeUnit is the unit of the times written as numbers, the run's
	// ([InputPolicy]): the merge reads the times as the run will.
	TimeUnit TimeUnit
}

// OpenTopicEventSource reads a time range of a topic as an [EventSource]
// for [Engine.Run]: the partitions (read_committed, side by side, each
// paused while far ahead) merged into one stream, each next record the
// head whose event time is lowest (a record without one first; ties by
// partition), so a backtest over a topic sees about the order of the file
// it was produced from. The records are numbered in that order (their
// "line"); a dead letter's line is that number. As for
// [OpenDirEventSource], a run that reads the source after ctx is done or
// Close fails.
func OpenTopicEventSource(ctx context.Context, c TopicReplay) (*EventSource, error) {
	in := &KafkaInput{Brokers: c.Brokers, Security: c.Security, Topic: c.Topic, Bounded: true, EndTime: c.To}
	if !c.From.IsZero() {
		in.Start, in.StartTime = KafkaFromTime, c.From
	}
	opened := ctx
	ctx, cancel := context.WithCancel(ctx)
	kr, err := newKafkaReader(ctx, in, nil, false, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	chans := make([]<-chan runtime.Batch, len(kr.chans))
	for i, ch := range kr.chans {
		chans[i] = ch
	}
	src, err := mergedEventSource(opened, "topic "+c.Topic, chans, c.TimeField, c.TimeUnit, kr, cancel)
	if err != nil {
		return nil, err
	}
	ends := kr.src.Ends()
	for p, start := range kr.starts {
		src.merged.size += max(0, ends[p]-start)
	}
	return src, nil
}

// mergedEventSource returns an [EventSource] named name over the
// partitions whose batches chans deliver (aligned: a channel each, closed
// after the partition's Done batch), merged by mergePartitions in the order
// of their event times (timeField, numbers in unit). r is their
// reader (its Err after the end, its Close at the source's), cancel the
// reader's context's, opened the context the source was opened with.
//
// A reader stopped before the end of every partition (opened done, or the
// source closed) is an error of the source, not its end: a run over it
// would take the rest of the input for absent and release every pending
// match at the final watermark.
func mergedEventSource(opened context.Context, name string, chans []<-chan runtime.Batch, timeField string, unit TimeUnit, r interface {
	Err() error
	Close() error
}, cancel context.CancelFunc) (*EventSource, error) {
	timeOf, err := recordTimes(timeField, unit)
	if err != nil {
		cancel()
		r.Close()
		return nil, err
	}
	m := &mergedSource{out: make(chan []runtime.Record, 4), quit: make(chan struct{}), opened: opened, name: name}
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := mergePartitions(chans, timeOf, m.out, m.quit, &m.read)
		if rerr := r.Err(); rerr != nil && (err == nil || errors.Is(err, errMergeStopped)) {
			err = rerr
		}
		if errors.Is(err, errMergeStopped) {
			if cerr := opened.Err(); cerr != nil {
				err = stoppedBeforeEnd(name, cerr)
			} else {
				err = fmt.Errorf("%s: closed", name)
			}
		}
		m.err = err // read by Next once out is closed
		close(m.out)
	}()
	// Once: a Close may come more than once, and a kafkaReader's second
	// Close panicked (a closed channel closed again).
	var once sync.Once
	var stopErr error
	stop := func() error {
		once.Do(func() {
			close(m.quit)
			cancel()
			stopErr = r.Close()
			<-done
		})
		return stopErr
	}
	return &EventSource{merged: m, name: name, stop: stop}, nil
}

// mergedSource is the [runtime.Source] of partitions merged by event time:
// the records mergePartitions hands on, numbered in the merged order
// (Line; Offset counts their bytes as if they were one file's lines), each
// with its partition's name and its line and offset there (Record.File),
// so that a dead letter finds its line. A record's Reason (a line too
// long) is kept. A record that is blank (an empty Kafka value) is counted
// in the numbering and skipped, as a file's blank line is.
type mergedSource struct {
	out  chan []runtime.Record
	quit chan struct{}
	err  error // the merge's, set before out is closed
	// opened is the context the source was opened with, name its name:
	// once opened is done, Next fails, also where the merge had handed
	// on every batch before (a small input read ahead whole).
	opened context.Context
	name   string

	// read is the bytes of the partitions' files read, as far as the merge
	// has taken their records; size, when positive, their size on disk
	// (set by OpenDirEventSource).
	read atomic.Int64
	size int64

	recs      []runtime.Record
	line, off int64
}

// Progress implements [runtime.ProgressSource]: the bytes of the files
// read and their size, or, when their size is unknown (a topic), the
// bytes of the records taken.
func (m *mergedSource) Progress() (read, total int64) {
	if m.size > 0 {
		return min(m.read.Load(), m.size), m.size
	}
	return m.off, -1
}

// Next implements [runtime.Source].
func (m *mergedSource) Next() (runtime.Record, error) {
	for {
		for len(m.recs) == 0 {
			if cerr := m.opened.Err(); cerr != nil {
				return runtime.Record{}, stoppedBeforeEnd(m.name, cerr)
			}
			recs, ok := <-m.out
			if !ok {
				if m.err != nil {
					return runtime.Record{}, m.err
				}
				return runtime.Record{}, io.EOF
			}
			m.recs = recs
		}
		rec := m.recs[0]
		m.recs = m.recs[1:]
		m.line++
		rec.FileLine, rec.FileOffset = rec.Line, rec.Offset
		rec.Line, rec.Offset = m.line, m.off
		m.off += int64(len(rec.Data)) + 1
		if rec.Reason == "" && blank(rec.Data) {
			continue
		}
		return rec, nil
	}
}

// stoppedBeforeEnd is the error of a merged source read after the
// context it was opened with is done (cerr, its error).
func stoppedBeforeEnd(name string, cerr error) error {
	return fmt.Errorf("%s: stopped before its end, as the context it was opened with is done: %w", name, cerr)
}

// blank reports whether b holds only JSON whitespace.
func blank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return false
		}
	}
	return true
}

// errMergeStopped is the error of mergePartitions when quit was closed, or
// a partition's channel was closed before its Done batch (its reader
// stopped, or failed: see its Err).
var errMergeStopped = errors.New("cep: merge of partitions stopped")

// recordTimes returns what reads the event time of a record for the merge
// of partitions: the time the run's decoder gives it (field timeField, an
// RFC 3339 string or a number in unit), so that the merge takes the records
// in the order of the times the run sees; ok is false for a record without
// one (no JSON object, the field missing or no time). Before, the merge read
// every number as milliseconds and refused fractions: epoch seconds with a
// fraction (-time-unit s) came first whatever their time, and the files of
// a directory or the partitions of a topic were read one after the other.
// Not safe for concurrent use.
func recordTimes(timeField string, unit TimeUnit) (func([]byte) (event.Time, bool), error) {
	schema, err := event.NewSchema()
	if err != nil {
		return nil, err
	}
	dc := jsonev.Config{Schema: schema, TimeField: timeField, Open: true}
	InputPolicy{TimeUnit: unit}.decoder(&dc)
	dec, err := jsonev.NewDecoder(dc)
	if err != nil {
		return nil, err
	}
	return func(data []byte) (event.Time, bool) {
		ev, err := dec.Decode(data)
		if err != nil {
			return 0, false
		}
		return ev.Time, true
	}, nil
}

// mergePartitions sends the records of the partitions whose batches chans
// deliver to out, in slices, the lowest event time first (timeOf's), each with its
// partition's name in File (its Line and Offset its own), until the
// partitions end (nil) or quit is closed (errMergeStopped). read counts
// the bytes of their files read, as the batches taken say
// ([runtime.Batch.Read]).
func mergePartitions(chans []<-chan runtime.Batch, timeOf func([]byte) (event.Time, bool), out chan<- []runtime.Record, quit <-chan struct{}, read *atomic.Int64) error {
	type head struct {
		b    runtime.Batch
		i    int
		t    int64 // the event time of b.Records[i], ms; MinInt64 without one
		read int64 // the largest Read of the partition's batches taken
		done bool
	}
	heads := make([]head, len(chans))
	stopped := false // a channel closed before its partition's Done batch
	// fill makes heads[p] hold a record, or marks the partition done.
	fill := func(p int) {
		h := &heads[p]
		for !h.done && h.i >= len(h.b.Records) {
			if h.b.Done {
				h.done = true
				return
			}
			b, ok := <-chans[p]
			if !ok {
				h.done, stopped = true, true
				return
			}
			h.b, h.i = b, 0
			if b.Read > h.read {
				read.Add(b.Read - h.read)
				h.read = b.Read
			}
		}
		if !h.done {
			h.t = math.MinInt64
			if t, ok := timeOf(h.b.Records[h.i].Data); ok {
				h.t = int64(t)
			}
		}
	}
	for p := range heads {
		fill(p)
		if stopped {
			return errMergeStopped
		}
	}
	const size = 256
	batch := make([]runtime.Record, 0, size)
	send := func() bool {
		select {
		case out <- batch:
			batch = make([]runtime.Record, 0, size)
			return true
		case <-quit:
			return false
		}
	}
	for {
		best := -1
		for p := range heads {
			if !heads[p].done && (best < 0 || heads[p].t < heads[best].t) {
				best = p
			}
		}
		if best < 0 {
			if len(batch) > 0 && !send() {
				return errMergeStopped
			}
			return nil
		}
		h := &heads[best]
		// The record's Data belongs to its batch, which is ours: no copy.
		rec := h.b.Records[h.i]
		rec.File = h.b.Partition.Name
		batch = append(batch, rec)
		if len(batch) == size && !send() {
			return errMergeStopped
		}
		h.i++
		fill(best)
		if stopped {
			// What came before the stop is handed on first.
			if len(batch) > 0 {
				send()
			}
			return errMergeStopped
		}
	}
}

// KafkaSecurity is how connections to the brokers are secured: TLS (a CA
// file, an optional client certificate) and SASL (PLAIN, SCRAM-SHA-256,
// SCRAM-SHA-512) ([kafka.Security]).
type KafkaSecurity = kafka.Security

// KafkaLoginFailed reports whether err is, or wraps, a broker's refusal
// of a SASL login ([kafka.LoginFailed]).
func KafkaLoginFailed(err error) bool { return kafka.LoginFailed(err) }

// stallLog is the [kafka.SourceConfig] Stalled callback of a reader of
// topic (what says which kind) that logs to logf a partition held behind
// an open transaction, and the end of the hold; nil without logf. A run
// that stops reading with no word of why looks hung: this says why, and
// how long it may last.
func stallLog(logf func(string, ...any), what, topic string) func([]kafka.Held) {
	if logf == nil {
		return nil
	}
	return func(held []kafka.Held) {
		var waiting, ended []kafka.Held
		for _, h := range held {
			if h.Ended {
				ended = append(ended, h)
			} else {
				waiting = append(waiting, h)
			}
		}
		if len(waiting) > 0 {
			logf("warning: %s %s %s: reading has waited %v behind a transaction still open: "+
				"a producer that stopped in the middle of a transaction (an instance of the group killed, and not restarted?) holds back "+
				"every reader of the partition until Kafka aborts the transaction, at most its transaction timeout after it began "+
				"(-transaction-timeout)", what, topic, heldPartitions(waiting), waiting[0].For.Round(time.Second))
		}
		if len(ended) > 0 {
			logf("%s %s %s: the transaction that held reading has ended, after %v or more", what, topic, heldPartitions(ended), ended[0].For.Round(time.Second))
		}
	}
}

// offsetsHeldLog is the [kafka.GroupOffsetsHeld] callback that logs to
// logf a wait for group's committed offsets of topic, held by an open
// transaction, and its end: an instance that takes partitions over from
// one stopped amid a commit restores nothing until that transaction
// ends, which may take the other's transaction timeout.
func offsetsHeldLog(logf func(string, ...any), group, topic string) func(time.Duration, bool) {
	return func(waited time.Duration, ended bool) {
		if ended {
			logf("group %s: the transaction that held its committed offsets of topic %s has ended, after %v or more", group, topic, waited.Round(time.Second))
			return
		}
		logf("warning: group %s: its committed offsets of topic %s have waited %v behind a transaction still open: "+
			"an instance of the group that stopped amid a commit (killed, paused or cut off after its offsets, before the transaction's end) "+
			"holds them until Kafka aborts the transaction, when that instance starts again or at most its transaction timeout after it began "+
			"(-transaction-timeout); the partitions are restored once it ends", group, topic, waited.Round(time.Second))
	}
}

// heldPartitions names the partitions of held: "partition 3 at offset
// 120" for one, "partitions 0, 1 and 3" for more.
func heldPartitions(held []kafka.Held) string {
	if len(held) == 1 {
		return fmt.Sprintf("partition %d at offset %d", held[0].Partition, held[0].Offset)
	}
	var b strings.Builder
	b.WriteString("partitions ")
	for i, h := range held {
		switch {
		case i == len(held)-1:
			b.WriteString(" and ")
		case i > 0:
			b.WriteString(", ")
		}
		fmt.Fprint(&b, h.Partition)
	}
	return b.String()
}

// conn is how k reaches its cluster.
func (k *KafkaInput) conn() kafka.Conn { return kafka.Conn{Brokers: k.Brokers, Security: k.Security} }
