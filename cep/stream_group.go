package cep

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cepheus-cep/cepheus/runtime/kafka"
)

// streamGroup runs a transactional Kafka job as one instance of a job
// that may have several: the instances of one group share the input's
// partitions through the group (static members, the cooperative sticky
// assignor), and each runs a job over the partitions it owns. A change of
// its partitions stops that job with a final checkpoint (its last
// transaction commits the offsets of every partition it owned, under the
// group's current generation) before the group may hand a revoked
// partition to another instance, which restores it from the changelog;
// then a new job starts over the partitions now owned, restored from the
// checkpoints the group's offsets name. Bounded, the instance ends once
// every partition of the input is committed at or past the end it listed
// at its start (its own jobs' and the others'), and leaves the group; an
// instance started after that ends at once.
func (e *Engine) streamGroup(ctx context.Context, c StreamConfig, start time.Time) (*StreamResult, error) {
	k := c.Kafka
	var ends map[int32]int64
	var reps []repartition
	if k.Bounded {
		var err error
		if ends, err = kafka.EndOffsets(ctx, k.conn(), k.Topic); err != nil {
			return nil, fmt.Errorf("cep: stream: input: %w", err)
		}
		_, reps = e.kafkaSpecs(k, len(ends))
		// The group's offsets are stable once the transaction of a
		// predecessor of this instance (killed amid a commit) is aborted:
		// fence it first.
		txn, err := kafka.NewTxn(ctx, kafka.TxnConfig{Brokers: k.Brokers, Security: k.Security, TransactionalID: k.transactionalID(), Group: k.Group, Timeout: k.TxnTimeout})
		if err != nil {
			return nil, fmt.Errorf("cep: stream: %w", err)
		}
		txn.Close()
		done, err := groupDone(ctx, k, ends, reps, true)
		if err != nil {
			return nil, err
		}
		if done {
			c.Logf("group %s has committed every partition of topic %s at its end: nothing to do", k.Group, k.Topic)
			res := e.emptyResult()
			res.AlreadyFinished, res.Finished = true, true
			return res, nil
		}
	}
	if !k.Bounded {
		if err := refuseFinished(ctx, k); err != nil {
			return nil, err
		}
	}
	m, err := kafka.NewMember(ctx, kafka.MemberConfig{
		Conn: k.conn(), Group: k.Group, Topic: k.Topic, InstanceID: k.transactionalID(), SessionTimeout: k.SessionTimeout,
	})
	if err != nil {
		return nil, fmt.Errorf("cep: stream: join group %s: %w", k.Group, err)
	}
	defer m.Close()
	var last *StreamResult
	lookups := new(lookupCarry) // across the jobs of the member's partitions
	fails := 0
	poll := time.NewTicker(500 * time.Millisecond)
	defer poll.Stop()
	for {
		owned, seen := m.OwnedSeq()
		if len(owned) == 0 || last != nil && last.Finished && slices.Equal(owned, last.Partitions) {
			// Nothing to read (yet, or any more): wait for partitions,
			// and, bounded, for the others to finish theirs.
			if len(owned) == 0 && c.Monitor != nil {
				c.Monitor.unassigned()
			}
			if k.Bounded && last != nil {
				done, err := groupDone(ctx, k, ends, reps, false)
				if err != nil {
					return last, err
				}
				if done {
					if err := m.Leave(ctx); err != nil {
						c.Logf("%v", err)
					}
					c.Logf("every partition of topic %s is committed at its end: leaving group %s", k.Topic, k.Group)
					return last, nil
				}
			}
			select {
			case ch := <-m.Changes():
				ch.Done()
			case <-poll.C:
			case <-ctx.Done():
				if last == nil {
					last = e.emptyResult()
				}
				return last, ctx.Err()
			}
			continue
		}
		jk := *k
		jk.partitions, jk.member = owned, m
		if k.Bounded {
			var err error
			if jk.ends, jk.final, err = finalEnds(ctx, k, ends, c.Logf); err != nil {
				return last, err
			}
		}
		jc := c
		jc.Kafka = &jk
		if last != nil || fails > 0 {
			c.Logf("group %s: this instance now reads partitions %v of topic %s", k.Group, owned, k.Topic)
		} else {
			// The first assignment too (the Kafka trial could not tell
			// from the logs which instance read what until a rebalance).
			c.Logf("group %s: this instance reads partitions %v of topic %s", k.Group, owned, k.Topic)
		}
		res, err, changes := e.runMember(ctx, jc, start, m, seen, lookups)
		if res != nil {
			res.Partitions = owned
			last = res
		}
		for _, ch := range changes {
			ch.Done()
		}
		switch {
		case ctx.Err() != nil:
			// Stopped: whatever the job did not commit (its final
			// checkpoint refused amid a rebalance, a restore cut short)
			// is redone from the last committed checkpoint by the
			// partitions' next owner, or by this instance restarted.
			if err != nil && !errors.Is(err, context.Canceled) {
				c.Logf("stopping: the job over partitions %v did not end with a checkpoint: %v", owned, err)
			}
			if last == nil {
				last = e.emptyResult()
			}
			return last, ctx.Err()
		case errors.Is(err, ErrFenced):
			return last, err
		case errors.Is(err, kafka.ErrGroupMoved):
			c.Logf("group %s refused the offsets of partitions %v: %v: a rebalance is under way, or this instance was paused or cut off for longer than the session timeout and its partitions went to another instance; what it did not commit is dropped, and it goes on with the partitions the group gives it now", k.Group, owned, err)
		case len(changes) > 0:
			if err != nil && !errors.Is(err, context.Canceled) {
				c.Logf("group %s: the job over partitions %v stopped for a rebalance: %v", k.Group, owned, err)
			}
		case err == nil && res != nil && res.Finished:
			// Bounded, its partitions are done: the loop waits for the
			// others.
		case isTxnFailure(err) && fails < streamTxnRetries:
			fails++
			c.Logf("%v: restarting from the last committed checkpoint (attempt %d of %d)", err, fails, streamTxnRetries)
			continue
		default:
			return last, err
		}
		if res != nil && res.Stats.Checkpoints > 0 {
			fails = 0
		}
	}
}

// finalEnds is ends with the end of each partition the group committed
// as final (a bounded job's final checkpoint) at its committed offset: a
// job that takes such a partition over reads nothing past it, even when
// the topic has grown since. Its final watermark passed: what came after
// would all be late, and would reach the repartition topics after the
// final markers, where no job reads it. final is those partitions: the
// job's checkpoints commit them as final again (a job that owns them
// with partitions not yet at their ends commits every offset before its
// final checkpoint).
func finalEnds(ctx context.Context, k *KafkaInput, ends map[int32]int64, logf func(string, ...any)) (out map[int32]int64, final map[int32]bool, err error) {
	committed, err := kafka.GroupOffsetsHeld(ctx, k.conn(), k.Group, k.Topic, offsetsHeldLog(logf, k.Group, k.Topic))
	if err != nil {
		return nil, nil, fmt.Errorf("cep: stream: %w", err)
	}
	out, final = make(map[int32]int64, len(ends)), map[int32]bool{}
	for p, end := range ends {
		if c, ok := committed[p]; ok && txnFinal(c.Metadata) {
			end = min(end, c.Offset)
			final[p] = true
		}
		out[p] = end
	}
	return out, final, nil
}

// refuseFinished refuses an unbounded run of a group whose bounded job
// finished (every committed input offset final), or finished some of its
// partitions (an unbounded run read their new records after their final
// watermark). Its final watermark
// passed: each new record would be late. On the finished state the job
// said "nothing to do" and then waited forever, reading nothing; restored
// from the changelog it read every new record as late.
func refuseFinished(ctx context.Context, k *KafkaInput) error {
	committed, err := kafka.GroupOffsets(ctx, k.conn(), k.Group, k.Topic)
	if err != nil {
		return fmt.Errorf("cep: stream: %w", err)
	}
	var final []int32
	for p, c := range committed {
		if txnFinal(c.Metadata) {
			final = append(final, p)
		}
	}
	if len(final) == 0 {
		return nil
	}
	n, err := kafka.PartitionCount(ctx, k.conn(), k.Topic)
	if err != nil {
		return fmt.Errorf("cep: stream: %w", err)
	}
	if len(final) < n {
		// Another instance's bounded job had not ended (its partitions
		// not final, or not committed at all): those finished are
		// final, the same. The group was said to have finished when
		// every partition committed was final, some never committed.
		slices.Sort(final)
		return fmt.Errorf("%w: group %s finished a bounded run over partitions %v of topic %s (their offsets are committed as final; the bounded run of the others has not ended): their final watermark passed, so an unbounded run would take every new record of theirs as late; finish the bounded run (-bounded), or give the unbounded run a new -group (and so a new changelog)", ErrRestore, k.Group, final, k.Topic)
	}
	return fmt.Errorf("%w: group %s finished a bounded run over topic %s (its offsets are committed as final): its final watermark passed, so an unbounded run would take every new record as late; give the unbounded run a new -group (and so a new changelog)", ErrRestore, k.Group, k.Topic)
}

// emptyResult is the result of an instance that ran no job.
func (e *Engine) emptyResult() *StreamResult {
	return &StreamResult{Summary: Summary{Ruleset: e.cfg.ruleset.Name, RulesetVersion: e.cfg.ruleset.Hash}}
}

// runMember runs one job over the partitions of jc until it ends or a
// change of the member's partitions comes, which stops it with a final
// checkpoint. It returns the job's outcome and the changes that came, not
// yet acknowledged. A change of Seq at most seen (m.OwnedSeq's when the
// partitions were read) is already in them: it is acknowledged at once,
// the job going on.
func (e *Engine) runMember(ctx context.Context, jc StreamConfig, start time.Time, m *kafka.Member, seen uint64, lk *lookupCarry) (*StreamResult, error, []kafka.Change) {
	jctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type outcome struct {
		res *StreamResult
		err error
	}
	out := make(chan outcome, 1)
	go func() {
		res, err := e.runJob(jctx, jc, start, lk)
		out <- outcome{res, err}
	}()
	var changes []kafka.Change
	for {
		select {
		case ch := <-m.Changes():
			if ch.Seq <= seen {
				ch.Done()
				continue
			}
			changes = append(changes, ch)
			cancel()
		case o := <-out:
			if len(changes) > 0 && errors.Is(o.err, context.Canceled) {
				o.err = nil
			}
			return o.res, o.err, changes
		}
	}
}

// groupDone reports whether the group has committed every partition of
// the input at or past its end in ends, or as final (by a bounded job's
// final checkpoint, whose end may be before ends when the topic grew
// since), and every partition of the repartition topics of reps past its
// last record.
//
// With finalOnly (a bounded instance's start), every committed input
// partition must be final: offsets at the ends but not final are those of
// a job that did not end (an unbounded run that read everything and was
// stopped, or a bounded one that crashed before its final checkpoint),
// whose held matches (a window still open, a trailing notFollowedBy)
// wait for a final watermark: the starting instance's job reads nothing
// and sends it.
func groupDone(ctx context.Context, k *KafkaInput, ends map[int32]int64, reps []repartition, finalOnly bool) (bool, error) {
	// What is committed, not what a transaction holds: an instance paused
	// or killed amid its commit holds its offsets until its transaction
	// times out (90 s by default), and an instance done with its own
	// partitions waited for them here, deaf to the group that gave it
	// that instance's partitions meanwhile (and failed after 45 s). Not
	// done then: it is asked again, and a transaction that commits shows.
	committed, err := kafka.CommittedOffsets(ctx, k.conn(), k.Group, k.Topic)
	if err != nil {
		return false, fmt.Errorf("cep: stream: %w", err)
	}
	for p, end := range ends {
		c, ok := committed[p]
		if ok && (finalOnly || c.Offset < end) && !txnFinal(c.Metadata) || !ok && end > 0 {
			return false, nil
		}
	}
	// The input is all committed, so every repartition record is
	// (the events, then each upstream's final marker, which a restarted
	// job does not write again: repUpstreams). A repartition partition
	// with a record past its committed offset is not done: an instance
	// that read its input to the end and stopped before its repartition
	// partitions were complete leaves their last records to another.
	for _, rp := range reps {
		if done, err := repartitionDone(ctx, k, rp.topic); err != nil || !done {
			return false, err
		}
	}
	return true, nil
}

// repartitionDone reports whether the group's committed offsets of
// repartition topic topic are past every one of its records (true for a
// topic never written).
//
// The partitions are their owners' (other instances'), which go on
// reading, committing and deleting what they committed
// (purgeRepartitions) while they are read here: the records from an
// offset listed here may be gone by the time they are fetched (CI: an
// instance done with its own partitions failed with OFFSET_OUT_OF_RANGE
// at the offset its neighbour had committed a moment before). Their
// owner then committed past it: the offsets are read again, until they
// show its commit (movedOffsets), and the check starts over. Offsets that
// did not move within movedWait, their records gone all the same, are an
// error: no instance of the group deleted them.
func repartitionDone(ctx context.Context, k *KafkaInput, topic string) (bool, error) {
	if _, err := kafka.PartitionCount(ctx, k.conn(), topic); errors.Is(err, kafka.ErrNoTopic) {
		return true, nil
	}
	rc, err := kafka.CommittedOffsets(ctx, k.conn(), k.Group, topic)
	if err != nil {
		return false, fmt.Errorf("cep: stream: %w", err)
	}
	for {
		rends, err := kafka.EndOffsets(ctx, k.conn(), topic)
		if err != nil {
			return false, fmt.Errorf("cep: stream: %w", err)
		}
		from := map[int32]int64{}
		var parts []int32
		for p, end := range rends {
			if c := rc[p].Offset; c < end { // none committed: 0
				from[p] = c
				parts = append(parts, p)
			}
		}
		if len(parts) == 0 {
			return true, nil
		}
		if k.beforeRepRead != nil {
			k.beforeRepRead(topic)
		}
		// Past the committed offsets there may be nothing but the
		// commit markers of the transactions (control records).
		found := errors.New("found")
		_, rerr := kafka.ReadPartitions(ctx, k.conn(), topic, parts, from, func(int32, []byte, []byte) error { return found })
		switch {
		case errors.Is(rerr, found):
			return false, nil
		case rerr == nil:
			return true, nil
		case !kafka.OutOfRange(rerr):
			return false, fmt.Errorf("cep: stream: %w", rerr)
		}
		now, err := movedOffsets(ctx, k, topic, rc, parts)
		if err != nil {
			return false, fmt.Errorf("cep: stream: %w", err)
		}
		if !offsetsMoved(rc, now, parts) {
			return false, fmt.Errorf("cep: stream: group %s: the records of topic %s after its committed offsets %v are gone, and no instance committed past them within %v: %w", k.Group, topic, from, movedWait, rerr)
		}
		rc = now
	}
}

// movedOffsets returns the group's committed offsets of topic once one of
// parts is past its offset in before, or after movedWait. An owner deletes
// the records before its new offsets once its transaction's end answered
// (purgeRepartitions), but the broker writes the commit markers that make
// the offsets committed afterwards: until then CommittedOffsets, which
// leaves out what a transaction holds, still has the offsets of before,
// the records past them gone (a single read took this for records that no
// instance deleted, an error).
func movedOffsets(ctx context.Context, k *KafkaInput, topic string, before map[int32]kafka.Committed, parts []int32) (map[int32]kafka.Committed, error) {
	until := time.Now().Add(movedWait)
	for {
		now, err := kafka.CommittedOffsets(ctx, k.conn(), k.Group, topic)
		if err != nil || offsetsMoved(before, now, parts) || time.Now().After(until) {
			return now, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// movedWait bounds movedOffsets: the markers take milliseconds, more on a
// loaded broker.
const movedWait = 10 * time.Second

// offsetsMoved reports whether a partition of parts has a committed
// offset in now past the one in before.
func offsetsMoved(before, now map[int32]kafka.Committed, parts []int32) bool {
	for _, p := range parts {
		if now[p].Offset > before[p].Offset {
			return true
		}
	}
	return false
}
