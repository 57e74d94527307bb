package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cepheus-cep/cepheus/internal/failpoint"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DefaultTxnTimeout is the transaction timeout of a [Txn] whose config
// leaves it zero.
const DefaultTxnTimeout = 60 * time.Second

// TxnConfig configures [NewTxn]. Brokers, TransactionalID and Group are
// required.
type TxnConfig struct {
	Brokers  []string
	Security Security
	// TransactionalID is the producer's transactional id: stable across
	// restarts of one instance, so that a restarted instance fences the
	// one it replaces and aborts its open transaction at once.
	TransactionalID string
	// Group is the consumer group the input offsets are committed to,
	// inside each transaction. Member, when set, is this instance's
	// membership of it: the commits name its member id and generation, so
	// that the group refuses them once the partitions moved (a zombie's);
	// without, the group has no members (generation -1).
	Group  string
	Member *Member
	// Timeout is the transaction timeout (default DefaultTxnTimeout): the
	// broker aborts a transaction open for longer. It must not exceed the
	// broker's transaction.max.timeout.ms.
	Timeout time.Duration
	// Manual are the topics whose records name their partition
	// ([Txn.ProduceTo]); the others are partitioned by key (murmur2, as
	// the Java client does; a null key: sticky).
	Manual []string
	// MaxRecordBytes is the largest record the producer sends (default
	// 1 MiB, the broker's default message.max.bytes).
	MaxRecordBytes int
	// Logf, when set, is told once when the check of a commit's partitions
	// for an earlier transaction left open cannot be made ([ErrTxnLeftOpen]).
	Logf func(format string, args ...any)
}

// Txn is a transactional producer whose every transaction carries records
// and a consumer group's offsets: one transaction per checkpoint. It is
// created with a transaction open (NewTxn fences an earlier producer of
// the same transactional id first); Commit ends the open one and begins
// the next. Produce and ProduceTo may be called from several goroutines,
// between two Commits; Commit from one.
type Txn struct {
	cl     *kgo.Client
	adm    *kadm.Client
	id     string
	group  string
	mu     sync.Mutex
	err    error // the first failed produce of the open transaction
	promis func(*kgo.Record, error)
	member *Member
	// topicIDs are the ids of the topics whose offsets were committed.
	topicIDs map[string][16]byte
	// next are the offsets after the last record acknowledged, by
	// partition, of the manual topics (the changelog): where a reader
	// of what the committed transactions wrote goes on.
	next map[string]map[int32]int64
	// seen is set once a commit of offsets is seen by readers of the
	// group's offsets (awaitGroup).
	seen bool
	// first is the offset of the open transaction's first record
	// acknowledged in each partition, by topic (checkLeftOpen).
	first map[string]map[int32]int64
	// describe lists the producers of partitions (DescribeProducers; a
	// variable for tests), logf tells of a check not made, once
	// (unchecked).
	describe  func(ctx context.Context, s kadm.TopicsSet) (kadm.DescribedProducersTopics, error)
	logf      func(format string, args ...any)
	unchecked bool
}

// ErrTxnLeftOpen marks a transaction aborted instead of committed because
// a partition it wrote holds, before its first record there, records of
// an earlier transaction of the same producer id that no marker ended: a
// partition leader counts a producer's records from its first one after
// its last marker into its current transaction, whatever their epoch, so
// the commit's marker would commit them too. A transaction can be left so
// only by the brokers (a stopped run's requests that a broker frozen
// meanwhile appended once back, say); the abort's marker ends them with
// it. Errors that wrap it also wrap ErrTxn.
var ErrTxnLeftOpen = errors.New("kafka: a partition holds records of an earlier transaction of this producer left open, which the commit would commit too")

// ErrFenced marks a transaction failed because a newer producer of the
// same transactional id fenced this one: another instance took over, and
// this one must stop (retrying would fence that one in turn). Errors that
// wrap it also wrap ErrTxn.
var ErrFenced = errors.New("kafka: fenced by a newer producer of the same transactional id (another instance took over)")

// ErrEpochOver marks a transaction failed because the brokers ended its
// producer's epoch, with nothing telling why: a newer producer of the
// same transactional id fenced it (as [ErrFenced]), or the brokers
// aborted the transaction at its timeout, the process having been paused
// or cut off for longer than that, and then no instance took over (both
// bump the epoch; a write after either is refused the same way). Errors
// that wrap it also wrap ErrFenced: the instance stops, since retrying
// would fence a successor if there is one.
var ErrEpochOver error = epochOver{}

// epochOver is ErrEpochOver's type: it is ErrFenced too.
type epochOver struct{}

func (epochOver) Error() string {
	return "kafka: the brokers ended this producer's epoch: a newer producer of the same transactional id fenced it (another instance took over), or they aborted its transaction at the transaction timeout (this process was paused or cut off for longer than that) and nothing took over: then starting it again resumes from its last committed checkpoint"
}

func (epochOver) Is(target error) bool { return target == ErrFenced }

// ErrTimedOut marks a transaction that the brokers aborted at its
// timeout, no newer producer having taken its transactional id since
// (the producer's next epoch was granted, KIP-588, and the id was still
// at that epoch 2 s later): the process was
// paused or cut off for longer than the timeout. It is not a fence: the
// producer's successor in this process (a new [Txn]) may go on. Errors
// that wrap it also wrap ErrTxn.
var ErrTimedOut = errors.New("kafka: the brokers aborted the transaction at its timeout (this process was paused or cut off for longer than the transaction timeout); no other producer took its transactional id")

// ErrTxn marks a failure of a transaction: it was aborted, or its outcome
// is unknown; whatever it carried must be produced again from the last
// committed transaction. Use errors.Is(err, ErrTxn).
var ErrTxn = errors.New("kafka: transaction failed")

// NewTxn connects, fences any earlier producer of c.TransactionalID (the
// broker aborts its open transaction) and begins a transaction.
func NewTxn(ctx context.Context, c TxnConfig) (*Txn, error) {
	switch {
	case len(c.Brokers) == 0:
		return nil, errors.New("kafka: transactions: no brokers")
	case c.TransactionalID == "":
		return nil, errors.New("kafka: transactions: no transactional id")
	case c.Group == "":
		return nil, errors.New("kafka: transactions: no group")
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTxnTimeout
	}
	if c.MaxRecordBytes == 0 {
		c.MaxRecordBytes = 1 << 20
	}
	newClient := func() (*kgo.Client, error) {
		return (Conn{c.Brokers, c.Security}).newClient(
			kgo.TransactionalID(c.TransactionalID),
			kgo.TransactionTimeout(c.Timeout),
			kgo.RecordPartitioner(partitioner{manual: c.Manual}),
			kgo.ProducerBatchMaxBytes(int32(c.MaxRecordBytes)),
			kgo.MaxBufferedRecords(1<<16),
			kgo.ProducerLinger(0),
		)
	}
	// The producer id, now: InitProducerId bumps the epoch, fencing the
	// producer this one replaces, and aborts its open transaction, so
	// that the group's offsets are stable before they are read. A broker
	// that is down (the transaction coordinator moving to another) is
	// waited for, with a new client each try.
	var cl *kgo.Client
	err := retryTransient(ctx, func(ctx context.Context) error {
		var err error
		if cl, err = newClient(); err != nil {
			return err
		}
		if _, _, err = cl.ProducerID(ctx); err != nil {
			cl.Close()
			return fmt.Errorf("producer id of %s: %w", c.TransactionalID, err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("kafka: transactions: %w", err)
	}
	t := &Txn{cl: cl, adm: kadm.NewClient(cl), id: c.TransactionalID, group: c.Group, member: c.Member, next: map[string]map[int32]int64{}, logf: c.Logf}
	for _, m := range c.Manual {
		t.next[m] = map[int32]int64{}
	}
	t.promis = t.onProduced
	t.describe = t.adm.DescribeProducers
	t.first = map[string]map[int32]int64{}
	if err := cl.BeginTransaction(); err != nil {
		cl.Close()
		return nil, fmt.Errorf("kafka: transactions: %w", err)
	}
	return t, nil
}

// partitioner partitions the records of its manual topics by their
// Partition field, the others by key.
type partitioner struct{ manual []string }

func (p partitioner) ForTopic(topic string) kgo.TopicPartitioner {
	for _, m := range p.manual {
		if m == topic {
			return kgo.ManualPartitioner().ForTopic(topic)
		}
	}
	return kgo.StickyKeyPartitioner(nil).ForTopic(topic)
}

// KeyPartition is the partition among n that a record of key k goes to:
// murmur2, as the Java client and [Txn.Produce] partition keyed records.
// Each call makes a partitioner: a loop uses a [KeyPartitioner].
func KeyPartition(k []byte, n int) int32 { return NewKeyPartitioner()(k, n) }

// KeyPartitioner returns KeyPartition's partition of a key; it is for
// one goroutine.
type KeyPartitioner func(k []byte, n int) int32

// NewKeyPartitioner returns a KeyPartitioner (making one seeds a random
// source: keep it).
func NewKeyPartitioner() KeyPartitioner {
	tp := kgo.StickyKeyPartitioner(nil).ForTopic("")
	var r kgo.Record
	return func(k []byte, n int) int32 {
		if k == nil {
			k = []byte{} // a null key would be sticky, not hashed
		}
		r.Key = k
		return int32(tp.Partition(&r, n))
	}
}

func (t *Txn) onProduced(r *kgo.Record, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		if t.err == nil {
			t.err = fmt.Errorf("produce to %s: %w", r.Topic, err)
		}
		return
	}
	if m := t.next[r.Topic]; m != nil && r.Offset+1 > m[r.Partition] {
		m[r.Partition] = r.Offset + 1
	}
	f := t.first[r.Topic]
	if f == nil {
		f = map[int32]int64{}
		t.first[r.Topic] = f
	}
	if o, ok := f[r.Partition]; !ok || r.Offset < o {
		f[r.Partition] = r.Offset
	}
}

// Next returns, for a manual topic, the offset after the last record of
// each partition the producer wrote and the broker acknowledged (after a
// Commit: the committed transactions' records), on top of from: where a
// reader of the records written after them starts.
func (t *Txn) Next(topic string, from map[int32]int64) map[int32]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := maps.Clone(from)
	if out == nil {
		out = map[int32]int64{}
	}
	for p, o := range t.next[topic] {
		out[p] = max(out[p], o)
	}
	return out
}

// Produce adds a record to the open transaction, partitioned by key. The
// record is sent in the background: its failure fails the Commit. Key and
// value must not be modified afterwards.
func (t *Txn) Produce(ctx context.Context, topic string, key, value []byte) {
	t.cl.Produce(ctx, &kgo.Record{Topic: topic, Key: key, Value: value}, t.promis)
}

// ProduceTo adds a record to the open transaction, to partition p of a
// topic of TxnConfig.Manual; a nil value is a tombstone.
func (t *Txn) ProduceTo(ctx context.Context, topic string, p int32, key, value []byte) {
	t.cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Key: key, Value: value}, t.promis)
}

// Offsets are the next offsets to read of one topic's partitions.
type Offsets map[int32]int64

// Commit ends the open transaction: it waits for every record produced
// into it, adds the offsets of topic, each with metadata, to the group's
// offsets, commits, and begins the next transaction. An error wraps
// ErrTxn: the transaction was aborted or its outcome is unknown, and the
// Txn is of no further use (close it; a new one fences and aborts).
func (t *Txn) Commit(ctx context.Context, topic string, offsets Offsets, metadata string) error {
	return t.CommitTopics(ctx, map[string]Offsets{topic: offsets}, metadata)
}

// CommitTopics is Commit with the offsets of several topics (a job's
// input and the repartition topics it reads).
func (t *Txn) CommitTopics(ctx context.Context, offsets map[string]Offsets, metadata string) error {
	return t.CommitTopicsWith(ctx, offsets, func(string, int32) string { return metadata })
}

// CommitTopicsWith is CommitTopics with the metadata of each offset
// given by metadata (a partition may keep a mark the others lack).
func (t *Txn) CommitTopicsWith(ctx context.Context, offsets map[string]Offsets, metadata func(topic string, p int32) string) error {
	if err := t.cl.Flush(ctx); err != nil {
		return t.fail(ctx, fmt.Errorf("flush: %w", err))
	}
	t.mu.Lock()
	err := t.err
	t.mu.Unlock()
	if err != nil {
		return t.fail(ctx, err)
	}
	some := map[string]Offsets{}
	for topic, o := range offsets {
		if len(o) > 0 {
			some[topic] = o
		}
	}
	// The check needs every record acknowledged (the flush), not the
	// offsets: it asks the partitions' leaders while the group's
	// coordinator takes the offsets, its round trip hidden by theirs.
	checked := make(chan error, 1)
	go func() { checked <- t.checkLeftOpen(ctx) }()
	if len(some) > 0 {
		err = t.commitOffsets(ctx, some, metadata)
	}
	if err := errors.Join(err, <-checked); err != nil {
		return t.fail(ctx, err)
	}
	// Everything is in the transaction, the offsets too: only the commit
	// is left.
	failpoint.Hit("kafka.flushed")
	if err := t.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return t.fail(ctx, fmt.Errorf("commit: %w", err))
	}
	t.mu.Lock()
	t.first = map[string]map[int32]int64{}
	t.mu.Unlock()
	if err := t.cl.BeginTransaction(); err != nil {
		return fmt.Errorf("%w: begin: %w", ErrTxn, err)
	}
	if len(some) > 0 && t.member == nil && !t.seen {
		t.awaitGroup(ctx)
	}
	return nil
}

// checkLeftOpen returns an error wrapping ErrTxnLeftOpen when a partition
// the open transaction wrote holds a transaction of this producer open
// from before the transaction's first record there (every record is
// acknowledged: the flush is done). When the brokers cannot say (an error,
// no permission to describe the producers of a topic), the commit goes
// on unchecked, as before the check, and Logf is told the first time.
func (t *Txn) checkLeftOpen(ctx context.Context) error {
	t.mu.Lock()
	set := kadm.TopicsSet{}
	first := map[string]map[int32]int64{}
	for topic, ps := range t.first {
		first[topic] = maps.Clone(ps)
		for p := range ps {
			set.Add(topic, p)
		}
	}
	t.mu.Unlock()
	if len(set) == 0 {
		return nil
	}
	pid, _, err := t.cl.ProducerID(ctx)
	if err != nil {
		return fmt.Errorf("producer id: %w", err)
	}
	described, err := t.describe(ctx, set)
	if err == nil {
		described.EachPartition(func(p kadm.DescribedProducersPartition) {
			if p.Err != nil {
				err = errors.Join(err, fmt.Errorf("%s-%d: %w", p.Topic, p.Partition, p.Err))
			}
		})
	}
	if err != nil {
		if !t.unchecked && t.logf != nil {
			t.logf("warning: the brokers did not describe the producers of a transaction's partitions (%v): it commits without the check for an earlier transaction left open, as will any other they do not describe (said once; a principal needs READ on the output topics for it)", err)
		}
		t.unchecked = true
		return nil
	}
	var left error
	for _, d := range described.SortedProducers() {
		f, ok := first[d.Topic][d.Partition]
		if !ok || d.ProducerID != pid || d.CurrentTxnStartOffset < 0 || d.CurrentTxnStartOffset >= f {
			continue
		}
		left = errors.Join(left, fmt.Errorf("%s-%d holds records of producer %d open from offset %d, before this transaction's first there at %d", d.Topic, d.Partition, pid, d.CurrentTxnStartOffset, f))
	}
	if left != nil {
		return fmt.Errorf("%w: %w", ErrTxnLeftOpen, left)
	}
	return nil
}

// awaitGroup waits, at most groupWait, until readers of the group's
// offsets see the commit that just ended. The broker writes a
// transaction's commit markers after EndTxn answers; until the marker of
// the group's first offsets is written, the group does not exist for
// them (GroupOffsets answers no offsets, not UnstableOffsetCommit as for
// a group that exists), and a reader right after the commit (a job
// started next, refusing a group whose bounded job finished) took the
// group for one that never committed. Once the group exists, a commit
// still pending is waited for by GroupOffsets (RequireStable), so one
// wait per Txn is enough; a group with members exists already.
func (t *Txn) awaitGroup(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, groupWait)
	defer cancel()
	for {
		resp, err := t.adm.FetchOffsets(kadm.RequireStable(ctx), t.group)
		switch {
		case errors.Is(err, kerr.UnstableOffsetCommit):
			t.seen = true // the group exists
			return
		case err == nil:
			for _, ps := range resp {
				for _, o := range ps {
					if o.Err != nil || o.At >= 0 {
						t.seen = true
						return
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return // committed all the same; readers see it later
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// groupWait bounds awaitGroup: the markers take milliseconds.
const groupWait = 10 * time.Second

// commitOffsets sends the group's offsets of topic within the open
// transaction (TxnOffsetCommit; the group has no members: generation -1).
// Under transaction version 2 (Kafka 4) the request itself adds the
// offsets to the transaction; before, AddOffsetsToTxn does.
func (t *Txn) commitOffsets(ctx context.Context, offsets map[string]Offsets, metadata func(string, int32) string) error {
	pid, epoch, err := t.cl.ProducerID(ctx)
	if err != nil {
		return fmt.Errorf("producer id: %w", err)
	}
	if !t.supports(ctx, kmsg.TxnOffsetCommit, 5) {
		add := kmsg.NewPtrAddOffsetsToTxnRequest()
		add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = t.id, pid, epoch, t.group
		resp, err := add.RequestWith(ctx, t.cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err != nil {
			return fmt.Errorf("add offsets to the transaction: %w", err)
		}
	}
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = t.id, t.group, pid, epoch
	req.Generation, req.MemberID = -1, ""
	if t.member == nil {
		return t.sendOffsets(ctx, req, offsets, metadata)
	}
	req.MemberID, req.Generation = t.member.Metadata()
	req.InstanceID = &t.member.cfg.InstanceID
	for {
		err := t.sendOffsets(ctx, req, offsets, metadata)
		if !errors.Is(err, ErrGroupMoved) {
			return err
		}
		// The group moved to a newer generation: amid a rebalance the
		// member learns it a moment later. Unless it lost its partitions
		// (cut off: its work must not commit), every partition it owned
		// under the old one is its own or no one's under the new one
		// (the cooperative protocol), so the offsets commit under it.
		id, gen, ok := t.member.newerThan(ctx, req.Generation, t.member.cfg.SessionTimeout)
		if !ok {
			return err
		}
		req = kmsg.NewPtrTxnOffsetCommitRequest() // sendOffsets fills it anew
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = t.id, t.group, pid, epoch
		req.MemberID, req.Generation, req.InstanceID = id, gen, &t.member.cfg.InstanceID
	}
}

// commitOffsetsAs is commitOffsets naming a member and generation of the
// caller's choice (tests: a zombie's commit).
func (t *Txn) commitOffsetsAs(ctx context.Context, topic string, offsets Offsets, metadata, memberID string, generation int32, instance string) error {
	pid, epoch, err := t.cl.ProducerID(ctx)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = t.id, t.group, pid, epoch
	req.Generation, req.MemberID, req.InstanceID = generation, memberID, &instance
	return t.sendOffsets(ctx, req, map[string]Offsets{topic: offsets}, func(string, int32) string { return metadata })
}

// sendOffsets fills req with the offsets of each topic and sends it.
func (t *Txn) sendOffsets(ctx context.Context, req *kmsg.TxnOffsetCommitRequest, offsets map[string]Offsets, metadata func(string, int32) string) error {
	if t.topicIDs == nil {
		t.topicIDs = map[string][16]byte{}
	}
	for _, topic := range slices.Sorted(maps.Keys(offsets)) {
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = topic
		// Version 6 (Kafka 4.4) names the topic by its id.
		if _, ok := t.topicIDs[topic]; !ok {
			details, err := t.adm.ListTopics(ctx, topic)
			if err != nil {
				return fmt.Errorf("metadata of %s: %w", topic, err)
			}
			d, ok := details[topic]
			switch {
			case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
				return noTopic(topic)
			case d.Err != nil:
				return fmt.Errorf("kafka: metadata of topic %s: %w", topic, d.Err)
			}
			t.topicIDs[topic] = d.ID
		}
		rt.TopicID = t.topicIDs[topic]
		for p, o := range offsets[topic] {
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = p, o, -1
			m := metadata(topic, p)
			rp.Metadata = &m
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, t.cl)
	if err != nil {
		return fmt.Errorf("commit offsets: %w", err)
	}
	for _, rt := range resp.Topics {
		if rt.Topic == "" {
			// Version 6 names the topic by its id.
			for name, id := range t.topicIDs {
				if id == rt.TopicID {
					rt.Topic = name
				}
			}
		}
		for _, rp := range rt.Partitions {
			err := kerr.ErrorForCode(rp.ErrorCode)
			switch {
			case err == nil:
			case errors.Is(err, kerr.FencedInstanceID):
				return fmt.Errorf("commit the offset of %s-%d: %w: %w", rt.Topic, rp.Partition, ErrFenced, err)
			case errors.Is(err, kerr.IllegalGeneration), errors.Is(err, kerr.UnknownMemberID), errors.Is(err, kerr.RebalanceInProgress):
				return fmt.Errorf("commit the offset of %s-%d: %w: %w", rt.Topic, rp.Partition, ErrGroupMoved, err)
			default:
				return fmt.Errorf("commit the offset of %s-%d: %w", rt.Topic, rp.Partition, err)
			}
		}
	}
	return nil
}

// ErrGroupMoved marks a transaction whose offsets the group refused
// because its generation moved on: the member's partitions were
// reassigned while it was paused or cut off for longer than its session
// timeout (it was a zombie), or a rebalance's new generation did not
// reach the member within its session timeout. (Amid a rebalance the
// offsets commit under the new generation once the member learns it.) Errors that wrap it
// also wrap ErrTxn; the member learns its new partitions from its
// changes.
var ErrGroupMoved = errors.New("kafka: the group refused the offsets of an older generation (its partitions moved)")

// supports reports whether the brokers answer request key at version v or
// later.
func (t *Txn) supports(ctx context.Context, key kmsg.Key, v int16) bool {
	vs, err := t.adm.ApiVersions(ctx)
	if err != nil {
		return false
	}
	for _, b := range vs {
		if b.Err != nil {
			continue
		}
		if _, max, ok := b.KeyVersions(int16(key)); ok && max >= v {
			return true
		}
		return false
	}
	return false
}

// fail aborts the open transaction after err; the returned error wraps
// ErrTxn, and, when the brokers ended the producer's epoch, ErrFenced,
// ErrTimedOut, or (nothing telling which) ErrEpochOver.
// PRODUCER_FENCED (the transaction coordinator's answer to an older
// epoch when a newer producer holds the id) and FENCED_INSTANCE_ID are
// fences; INVALID_PRODUCER_EPOCH alone (a partition leader's answer to
// any older epoch, the group coordinator's too) is also what a write
// meets after the brokers aborted the transaction at its timeout, which
// the coordinator tells apart: it grants the old epoch's abort and the
// next epoch only when no newer producer took the id, and the id stays
// the producer's when a newer one has not just begun to take it
// (heldBy).
func (t *Txn) fail(ctx context.Context, err error) error {
	fenced := errors.Is(err, kerr.ProducerFenced) || errors.Is(err, ErrFenced)
	over := errors.Is(err, kerr.InvalidProducerEpoch)
	_ = t.cl.AbortBufferedRecords(ctx)
	if aerr := t.cl.EndTransaction(ctx, kgo.TryAbort); aerr != nil {
		fenced = fenced || errors.Is(aerr, kerr.ProducerFenced)
		over = over || errors.Is(aerr, kerr.InvalidProducerEpoch)
		err = fmt.Errorf("%w (and the abort: %v)", err, aerr)
	}
	if over && !fenced {
		// The producer's next epoch, asked for with its current id and
		// epoch (KIP-588: franz-go's client asks so after such an
		// error, or the abort above was granted at the old epoch), is
		// refused PRODUCER_FENCED if a newer producer holds the id.
		switch id, epoch, perr := t.cl.ProducerID(ctx); {
		case perr == nil:
			switch held, told := t.heldBy(ctx, id, epoch); {
			case held:
				return fmt.Errorf("%w: %w: transactional id %s: %w", ErrTxn, ErrTimedOut, t.id, err)
			case told:
				fenced = true
			}
		case errors.Is(perr, kerr.ProducerFenced):
			fenced = true
		}
	}
	switch {
	case fenced:
		return fmt.Errorf("%w: %w: transactional id %s: %w", ErrTxn, ErrFenced, t.id, err)
	case over:
		return fmt.Errorf("%w: %w: transactional id %s: %w", ErrTxn, ErrEpochOver, t.id, err)
	}
	return fmt.Errorf("%w: %w", ErrTxn, err)
}

// takeoverSettle is how long heldBy waits before it looks (a variable
// for tests).
var takeoverSettle = 2 * time.Second

// heldBy reports whether the transactional id is still held by producer
// id at epoch, the epoch the coordinator granted it after
// INVALID_PRODUCER_EPOCH, once a newer producer's retry would have come
// (told false: nothing tells). The grant does not tell a transaction
// aborted at its timeout from one aborted by a newer producer's first
// InitProducerId: the coordinator fences the old epoch the same way, and
// answers the newer producer CONCURRENT_TRANSACTIONS; its retry, after
// its backoff (franz-go's 20 ms, at most 1 s; the Java client's
// retry.backoff.ms, 100 ms, at most 1 s), takes the id. Told ErrTimedOut
// then, this producer's job would restart and fence the newer one, which
// could meet the same and fence it back, in turn.
func (t *Txn) heldBy(ctx context.Context, id int64, epoch int16) (held, told bool) {
	select {
	case <-ctx.Done():
		return false, false
	case <-time.After(takeoverSettle):
	}
	ds, err := t.adm.DescribeTransactions(ctx, t.id)
	if err != nil {
		return false, false
	}
	d, ok := ds[t.id]
	if !ok || d.Err != nil {
		return false, false
	}
	return d.ProducerID == id && d.ProducerEpoch == epoch, true
}

// DeleteBefore deletes the records of topics' partitions before the
// offsets (DeleteRecords: each partition's log start offset moves up to
// its offset; the broker frees a segment once all of it is before it).
// It is for the topics only the group reads (the repartition topics):
// give it offsets the group has committed. It does not touch the open
// transaction. An error names the first partition refused (an ACL
// without DELETE on the topic, an offset past its end).
func (t *Txn) DeleteBefore(ctx context.Context, offsets map[string]Offsets) error {
	var del kadm.Offsets
	for topic, ps := range offsets {
		for p, o := range ps {
			del.Add(kadm.Offset{Topic: topic, Partition: p, At: o, LeaderEpoch: -1})
		}
	}
	resp, err := t.adm.DeleteRecords(ctx, del)
	if err != nil {
		return fmt.Errorf("kafka: delete records: %w", err)
	}
	for _, r := range resp.Sorted() {
		if r.Err != nil {
			return fmt.Errorf("kafka: delete records of %s-%d before offset %d: %w", r.Topic, r.Partition, offsets[r.Topic][r.Partition], r.Err)
		}
	}
	return nil
}

// Abort aborts the open transaction on purpose (a test's injected
// failure); the returned error wraps ErrTxn and err.
func (t *Txn) Abort(ctx context.Context, err error) error { return t.fail(ctx, err) }

// Close aborts the open transaction, if any, and disconnects.
func (t *Txn) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = t.cl.AbortBufferedRecords(ctx)
	_ = t.cl.EndTransaction(ctx, kgo.TryAbort)
	t.cl.Close()
}

// Committed is one partition's committed offset of a group.
type Committed struct {
	Offset   int64
	Metadata string
}

// GroupOffsets returns the offsets group has committed for topic's
// partitions (none: an empty map). Offsets a transaction still holds
// are waited for (the fetch asks for stable offsets).
func GroupOffsets(ctx context.Context, c Conn, group, topic string) (map[int32]Committed, error) {
	return groupOffsets(ctx, c, group, topic, true, nil)
}

// GroupOffsetsHeld is GroupOffsets telling held of a wait for a
// transaction: once offsets have been held for 5 s, again every 30 s,
// and once more (ended) when the transaction has ended; a wait that ends
// otherwise (ctx, an error) is told by the error returned, not to held.
func GroupOffsetsHeld(ctx context.Context, c Conn, group, topic string, held func(waited time.Duration, ended bool)) (map[int32]Committed, error) {
	return groupOffsets(ctx, c, group, topic, true, held)
}

// heldAfter and heldEvery are when GroupOffsetsHeld tells of a wait
// (variables for tests).
var (
	heldAfter = 5 * time.Second
	heldEvery = 30 * time.Second
)

// CommittedOffsets returns the offsets group has committed for topic's
// partitions, as GroupOffsets does, but at once: offsets a transaction
// still holds are left out (the partition keeps its offset of before),
// where GroupOffsets waits for the transaction to end. It answers whether
// the group has committed something; what it will commit next is
// GroupOffsets's question.
func CommittedOffsets(ctx context.Context, c Conn, group, topic string) (map[int32]Committed, error) {
	return groupOffsets(ctx, c, group, topic, false, nil)
}

// unstableRetry is how long franz-go retries an offset fetch answered
// UnstableOffsetCommit before it hands the answer back to fetchOffsets,
// which waits for the transaction (its own retries took 30 s, and the
// transient retries around them took the wait for brokers that do not
// answer: "no answer from the brokers within 45s").
const unstableRetry = time.Second

// offsetFetchRetry is the option of the clients of fetchOffsets.
var offsetFetchRetry = kgo.RetryTimeoutFn(func(key int16) time.Duration {
	if key == kmsg.OffsetFetch.Int16() {
		return unstableRetry
	}
	return 30 * time.Second // franz-go's default
})

func groupOffsets(ctx context.Context, c Conn, group, topic string, stable bool, held func(time.Duration, bool)) (map[int32]Committed, error) {
	cl, err := c.newClient(offsetFetchRetry)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	resp, err := fetchOffsets(ctx, kadm.NewClient(cl), group, stable, held, func(resp kadm.OffsetResponses) error {
		for p, o := range resp[topic] {
			if o.Err != nil {
				return fmt.Errorf("%s-%d: %w", topic, p, o.Err)
			}
		}
		return nil
	})
	if errors.Is(err, kerr.GroupIDNotFound) {
		return map[int32]Committed{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("kafka: offsets of group %s: %w", group, err)
	}
	out := map[int32]Committed{}
	for p, o := range resp[topic] {
		if o.At >= 0 {
			out[p] = Committed{Offset: o.At, Metadata: o.Metadata}
		}
	}
	return out, nil
}

// fetchOffsets fetches the offsets group committed through adm, a client
// made with offsetFetchRetry, retrying while brokers are away; check
// returns the error of an answer. With stable, a partition whose offset
// a transaction still holds answers UnstableOffsetCommit, which is waited
// out until that transaction ends: its producer's successor aborts it, or
// its timeout does (at most the broker's transaction.max.timeout.ms, 15
// minutes by default). held, when not nil, is told of that wait (as
// GroupOffsetsHeld says).
func fetchOffsets(ctx context.Context, adm *kadm.Client, group string, stable bool, held func(time.Duration, bool), check func(kadm.OffsetResponses) error) (kadm.OffsetResponses, error) {
	unstable := func(err error) bool { return errors.Is(err, kerr.UnstableOffsetCommit) }
	until := time.Now().Add(16 * time.Minute)
	var since time.Time      // of the first answer UnstableOffsetCommit
	told := time.Duration(0) // the wait last told of
	for {
		if waited := time.Since(since); held != nil && !since.IsZero() && waited >= heldAfter && (told == 0 || waited-told >= heldEvery) {
			held(waited, false)
			told = waited
		}
		var resp kadm.OffsetResponses
		err := retryUnless(ctx, func(ctx context.Context) error {
			fctx := ctx
			if stable {
				fctx = kadm.RequireStable(ctx)
			}
			var err error
			if resp, err = adm.FetchOffsets(fctx, group); err == nil {
				err = check(resp)
			}
			return err
		}, unstable)
		if !unstable(err) || time.Now().After(until) {
			if told > 0 && err == nil {
				// The transaction ended. A wait ended otherwise (the
				// context, an error, the limit) is the error's to tell.
				held(time.Since(since), true)
			}
			return resp, err
		}
		if since.IsZero() {
			since = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("held by a transaction that has not ended: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// EndOffsets returns the last stable offset of each partition of topic
// (the end a read_committed reader reaches now).
func EndOffsets(ctx context.Context, c Conn, topic string) (map[int32]int64, error) {
	cl, err := c.newClient()
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	l, err := listOffsets(ctx, adm, adm.ListCommittedOffsets, topic)
	switch {
	case errors.Is(err, ErrNoTopic):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("kafka: end offsets of %s: %w", topic, err)
	}
	return offsetsOf(l, topic)
}

// listOffsets calls list (one of adm's ListStartOffsets, ListEndOffsets,
// ListCommittedOffsets) for topic through retryTransient: a partition
// whose leader is away answers "unable to dial" until its leadership has
// moved. A topic that does not exist is said at once (ErrNoTopic).
func listOffsets(ctx context.Context, adm *kadm.Client, list func(context.Context, ...string) (kadm.ListedOffsets, error), topic string) (kadm.ListedOffsets, error) {
	var l kadm.ListedOffsets
	err := retryTransient(ctx, func(ctx context.Context) error {
		var err error
		if l, err = list(ctx, topic); err == nil {
			err = l.Error()
		}
		return noTopicAtOnce(ctx, adm, topic, err)
	})
	return l, err
}

// noTopicAtOnce returns err, or, when err says that topic or a partition
// of it is unknown (retriable: a topic being made) and topic does not
// exist, ErrNoTopic (which retryTransient does not retry).
func noTopicAtOnce(ctx context.Context, adm *kadm.Client, topic string, err error) error {
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		if _, cerr := partitionCount(ctx, adm, topic); errors.Is(cerr, ErrNoTopic) {
			return cerr
		}
	}
	return err
}

// offsetsOf returns topic's listed offsets by partition; none is
// ErrNoTopic.
func offsetsOf(l kadm.ListedOffsets, topic string) (map[int32]int64, error) {
	out := map[int32]int64{}
	for p, o := range l[topic] {
		out[p] = o.Offset
	}
	if len(out) == 0 {
		return nil, noTopic(topic)
	}
	return out, nil
}

// DeleteRetention returns how long the brokers keep the tombstones of
// compacted topic once its cleaner has passed them (its
// delete.retention.ms): a reader that resumes at an offset read longer ago
// than that may miss a deletion.
func DeleteRetention(ctx context.Context, c Conn, topic string) (time.Duration, error) {
	cl, err := c.newClient()
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var rc kadm.ResourceConfig
	err = retryTransient(ctx, func(ctx context.Context) error {
		rcs, err := adm.DescribeTopicConfigs(ctx, topic)
		if err != nil {
			return err
		}
		if rc, err = rcs.On(topic, nil); err == nil {
			err = rc.Err
		}
		return noTopicAtOnce(ctx, adm, topic, err)
	})
	if err != nil {
		return 0, fmt.Errorf("kafka: configs of %s: %w", topic, err)
	}
	for _, cfg := range rc.Configs {
		if cfg.Key == "delete.retention.ms" && cfg.Value != nil {
			ms, err := strconv.ParseInt(*cfg.Value, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("kafka: %s: delete.retention.ms %q: %w", topic, *cfg.Value, err)
			}
			return time.Duration(ms) * time.Millisecond, nil
		}
	}
	return 0, fmt.Errorf("kafka: %s: no delete.retention.ms among its configs", topic)
}

// StartOffsets returns the log start offset of each partition of topic:
// the first offset a reader can still read (records before it were
// deleted by retention or DeleteRecords, [Txn.DeleteBefore]).
func StartOffsets(ctx context.Context, c Conn, topic string) (map[int32]int64, error) {
	cl, err := c.newClient()
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	l, err := listOffsets(ctx, adm, adm.ListStartOffsets, topic)
	if err != nil {
		return nil, fmt.Errorf("kafka: start offsets of %s: %w", topic, err)
	}
	return offsetsOf(l, topic)
}

// EnsureTopics creates the topics that are missing (see ensureTopic), the
// compacted ones with cleanup.policy=compact, and returns every topic's
// partition count.
func EnsureTopics(ctx context.Context, c Conn, topics []TopicSpec) ([]int, error) {
	cl, err := c.newClient()
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	out := make([]int, len(topics))
	for i, s := range topics {
		cfg := topicConfigs
		switch {
		case s.Compact:
			cfg = compactedConfigs
		case s.Purged:
			cfg = purgedConfigs
		}
		var n int
		err := retryAtStart(ctx, func(ctx context.Context) error {
			var err error
			_, n, err = ensureTopicWith(ctx, adm, s.Name, s.Partitions, cfg)
			if s.AnyCount && errors.Is(err, ErrPartitionCount) {
				return nil
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		out[i] = n
	}
	return out, nil
}

// TopicSpec is a topic [EnsureTopics] makes sure of: 0 partitions is the
// broker's default (or whatever the topic has).
type TopicSpec struct {
	Name       string
	Partitions int
	Compact    bool
	// Purged is a topic whose records are deleted once read
	// ([Txn.DeleteBefore]): it is made with purgedConfigs' small
	// segments, since a broker frees only whole segments.
	Purged bool
	// AnyCount: Partitions is the count of a topic made here; one that
	// exists is used whatever its count (an output; the others must have
	// Partitions when it is not 0).
	AnyCount bool
}

// compactedConfigs are the configs of a [TopicSpec.Compact] topic (the
// changelog): compacted, with segments of at most 64 MiB or an hour, since
// the cleaner compacts only segments no longer written: with the broker's
// 1 GiB segments a changelog grew past a gigabyte a partition before any
// compaction (soak: 1.2 GB for 80 MB of state after 40 minutes), and a
// restore from it alone read all of it. Tombstones then go sooner too
// (delete.retention.ms after the cleaner passed them): a restore does not
// use a local copy older than that allows ([DeleteRetention]).
var compactedConfigs = map[string]*string{"retention.ms": new("-1"), "cleanup.policy": new("compact"), "segment.bytes": new("67108864"), "segment.ms": new("3600000")}

// purgedConfigs are the configs of a [TopicSpec.Purged] topic: retention
// unlimited (its reader deletes what it has read), and segments of at
// most 50 MiB or 10 minutes, as Kafka Streams makes its repartition
// topics. With the broker's default segments (1 GiB, 7 days) deleted
// records would stay on disk until a whole gigabyte of a partition had
// been read.
var purgedConfigs = map[string]*string{"retention.ms": new("-1"), "segment.bytes": new("52428800"), "segment.ms": new("600000")}

// PartitionCount returns the number of partitions of topic, or an error
// wrapping ErrNoTopic.
func PartitionCount(ctx context.Context, c Conn, topic string) (int, error) {
	cl, err := c.newClient()
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var n int
	err = retryAtStart(ctx, func(ctx context.Context) error {
		var err error
		n, err = partitionCount(ctx, adm, topic)
		return err
	})
	return n, err
}

// ReadTopic reads every partition of topic read_committed from its
// earliest offset up to its last stable offset at the call, and calls fn
// for each record, in offset order within each partition (a nil value is
// a tombstone). It is how a changelog is restored.
func ReadTopic(ctx context.Context, c Conn, topic string, fn func(p int32, key, value []byte) error) error {
	_, err := ReadTopicFrom(ctx, c, topic, nil, fn)
	return err
}

// ReadTopicFrom is ReadTopic starting each partition at the offset from
// gives it (the earliest where it gives none); it returns the offset
// after the last read of each partition: where the next reader goes on.
func ReadTopicFrom(ctx context.Context, c Conn, topic string, from map[int32]int64, fn func(p int32, key, value []byte) error) (map[int32]int64, error) {
	return ReadPartitions(ctx, c, topic, nil, from, fn)
}

// ReadPartitions is ReadTopicFrom over the partitions parts of topic only
// (nil: all of them); from may only name those.
func ReadPartitions(ctx context.Context, c Conn, topic string, parts []int32, from map[int32]int64, fn func(p int32, key, value []byte) error) (map[int32]int64, error) {
	return ReadRecords(ctx, c, topic, parts, from, func(p int32, r SourceRecord) error { return fn(p, r.Key, r.Value) })
}

// ReadRecords is ReadPartitions with each record whole (its offset and
// time too).
func ReadRecords(ctx context.Context, c Conn, topic string, parts []int32, from map[int32]int64, fn func(p int32, r SourceRecord) error) (map[int32]int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	src, err := NewSource(ctx, SourceConfig{Brokers: c.Brokers, Security: c.Security, Topic: topic, Partitions: parts, Bounded: true, Offsets: from})
	if err != nil {
		return nil, err
	}
	defer src.Close()
	next := map[int32]int64{}
	for b := range src.Batches() {
		for _, r := range b.Records {
			if err := fn(b.Partition, r); err != nil {
				return nil, err
			}
		}
		next[b.Partition] = b.Next
	}
	return next, src.Err()
}

// Producer is a plain (idempotent, not transactional) producer: the
// outputs of an at-least-once job, visible as soon as they are written.
// Produce may be called from several goroutines.
type Producer struct {
	cl  *kgo.Client
	mu  sync.Mutex
	err error
}

// NewProducer connects a plain producer to brokers.
func NewProducer(c Conn) (*Producer, error) {
	cl, err := c.newClient(kgo.MaxBufferedRecords(1<<16), kgo.ProducerLinger(0))
	if err != nil {
		return nil, fmt.Errorf("kafka: producer: %w", err)
	}
	return &Producer{cl: cl}, nil
}

// Produce sends a record partitioned by key, in the background: its
// failure is returned by the next Flush. Key and value must not be
// modified afterwards.
func (p *Producer) Produce(ctx context.Context, topic string, key, value []byte) {
	p.ProduceAt(ctx, topic, key, value, nil)
}

// ProduceAt is Produce that also notes the record's offset in *at (when
// at is not nil) once the broker has acknowledged it (read it after
// Flush): a publisher that must later tell its record from the ones
// written after it.
func (p *Producer) ProduceAt(ctx context.Context, topic string, key, value []byte, at *int64) {
	p.cl.Produce(ctx, &kgo.Record{Topic: topic, Key: key, Value: value}, func(r *kgo.Record, err error) {
		if err == nil && at == nil {
			return
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if err != nil {
			if p.err == nil {
				p.err = fmt.Errorf("kafka: produce to %s: %w", r.Topic, err)
			}
			return
		}
		*at = r.Offset
	})
}

// Flush waits until every record produced so far is acknowledged, and
// returns the first failure of any.
func (p *Producer) Flush(ctx context.Context) error {
	if err := p.cl.Flush(ctx); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Close disconnects; records not yet acknowledged may be lost.
func (p *Producer) Close() { p.cl.Close() }

// transientFor is how long retryTransient tries: longer than a broker's
// session timeout, so that a dead broker's partitions and coordinators
// have moved. A variable for tests.
var transientFor = 45 * time.Second

// retryTransient calls f until it succeeds, fails with an error that is
// not transient, ctx ends, or transientFor has passed. Transient: a
// retriable Kafka error or one that is no Kafka error at all (a refused
// connection, a timeout); not the context's. Each call of f gets a
// context that ends at that deadline: a broker that accepts connections
// and never answers costs transientFor, not that plus the client's own
// retries of the last attempt.
func retryTransient(ctx context.Context, f func(ctx context.Context) error) error {
	return retryUnless(ctx, f, nil)
}

// retryAtStart is retryTransient for the first call of a command or a job
// to the brokers, where a connection the broker closes at once, or an
// answer that is no Kafka answer, is a setting's fault (TLS against a
// plaintext listener, plaintext against a TLS one, SASL missing, another
// service at the address), which franz-go names, and not a broker away,
// once it has lasted misconfiguredFor: a broker killed as the call
// reached it closes the connection at once too, once (the next attempt
// meets a refused connection, or another broker).
func retryAtStart(ctx context.Context, f func(ctx context.Context) error) error {
	var since time.Time // of the misconfigured errors in a row
	return retryUnless(ctx, f, func(err error) bool {
		if !misconfigured(err) {
			since = time.Time{}
			return false
		}
		if since.IsZero() {
			since = time.Now()
		}
		return time.Since(since) >= misconfiguredFor
	})
}

// misconfiguredFor is how long the errors of a setting's fault must go on
// before retryAtStart gives up: a few attempts.
const misconfiguredFor = 2 * time.Second

// misconfigured reports whether err is a connection's fault of a setting
// (retryAtStart): franz-go says so in ErrFirstReadEOF, and of plaintext
// against TLS in its message only.
func misconfigured(err error) bool {
	return errors.As(err, new(*kgo.ErrFirstReadEOF)) || strings.Contains(err.Error(), "invalid large response size")
}

// retryUnless is retryTransient, with the errors permanent says are
// permanent too.
func retryUnless(ctx context.Context, f func(ctx context.Context) error, permanent func(error) bool) error {
	deadline := time.Now().Add(transientFor)
	for {
		actx, cancel := context.WithDeadline(ctx, deadline)
		err := f(actx)
		cancel()
		var ke *kerr.Error
		switch {
		case err == nil:
			return nil
		case permanent != nil && permanent(err):
			return err
		case ctx.Err() != nil, errors.Is(err, context.Canceled):
			return err
		case errors.Is(err, context.DeadlineExceeded) && !time.Now().Before(deadline):
			return fmt.Errorf("no answer from the brokers within %v (are they up, and is the address right?): %w", transientFor, err)
		case errors.Is(err, context.DeadlineExceeded):
			return err
		case errors.As(err, &ke) && !ke.Retriable:
			return err
		case errors.As(err, new(*tls.CertificateVerificationError)), errors.As(err, new(x509.UnknownAuthorityError)):
			return err // a TLS setting, not a broker away
		case errors.Is(err, kerr.GroupIDNotFound), errors.Is(err, ErrNoTopic), errors.Is(err, ErrPartitionCount):
			return err
		case time.Now().After(deadline):
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(250 * time.Millisecond):
		}
	}
}
