package cep

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/rules"
	"github.com/cepheus-cep/cepheus/runtime"
)

// Velocity aggregates of a transactional Kafka job (docs/kafka.md,
// "Velocity aggregates"). A rule reads only the aggregates keyed by its
// own key fields (checkKafkaAggregates), so every event of an aggregate's
// key passes through one partition: an input partition for the
// aggregates keyed by the record key, a partition of the repartition
// topic of the other key specifications. Each such partition has its own
// runtime.Aggregator on the coordinator (partAgg): the input partition's
// holds the events before they go to the local specifications (they go
// to the repartition topics at once, as their input records), a
// repartition partition's before they go to its specification. They
// release with the watermark those rules get (forward, forwardRep).
// Each one's state goes into the checkpoint by partition name
// (sourceMeta.PartAggregates), and in the changelog as a record of its
// own in the partition's changelog partition (aggStateKey), not in the
// marker: a partition that moves to another instance takes it along.
//
// A job of one instance without transactions reads every partition on
// one coordinator: it runs the one aggregator of embedded runs.

// partAgg is the aggregator of one partition of a Kafka job.
type partAgg struct {
	a     runtime.Aggregation
	decls []*rules.Aggregate // its aggregates, in the engine's order
	mask  uint64             // the key specifications its events go to
	name  string             // the partition's
	// fresh: it started without state at a restore, its windows empty
	// from the watermark from (its rules'): the job before ran no
	// aggregates here, so the events it read after from wait in the
	// rules' buffers, and settleHeld moves them into it.
	fresh bool
	from  event.Watermark
}

// checkKafkaAggregates refuses a rule that reads an aggregate keyed by
// other fields than its own: in Kafka mode an aggregate is computed where
// the events of its key meet, the partitions of a key specification.
func (e *Engine) checkKafkaAggregates() error {
	aggs := e.Aggregates()
	for _, cr := range e.rules {
		for _, name := range cr.rule.Aggregates {
			i := slices.IndexFunc(aggs, func(a *rules.Aggregate) bool { return a.Name == name })
			if i < 0 || sameFields(aggs[i].KeyFields, cr.rule.KeyFields) {
				continue
			}
			return fmt.Errorf("rule %s (key %s) reads aggregate %s (key %s): in Kafka mode a rule reads only the aggregates keyed by its own key fields (an aggregate is computed on the partitions of its key); key them alike, or backtest",
				cr.rule.Name, fieldList(cr.rule.KeyFields), name, fieldList(aggs[i].KeyFields))
		}
	}
	return nil
}

// fieldList writes key fields for a message.
func fieldList(fields []string) string {
	if len(fields) == 0 {
		return "none"
	}
	return strings.Join(fields, ", ")
}

// aggregatesKeyedBy returns the engine's aggregates keyed by fields (in
// any order).
func (e *Engine) aggregatesKeyedBy(fields []string) []*rules.Aggregate {
	var out []*rules.Aggregate
	for _, a := range e.Aggregates() {
		if sameFields(a.KeyFields, fields) {
			out = append(out, a)
		}
	}
	return out
}

// partAggSignature identifies the aggregates of a Kafka job's
// partitions: the declarations and the record key field, which decides
// which aggregates run where.
func partAggSignature(e *Engine, k *KafkaInput) string {
	return aggregateSignature(e) + "\x01" + e.recordKeyField(k)
}

// addPartAgg gives partition idx (name) of the job the aggregator of the
// aggregates keyed by fields, whose events go to the specifications of
// mask, restored from the checkpoint's state of the partition; none when
// no aggregate is keyed so and the checkpoint's state holds no event. An
// aggregator of no aggregate holds the events the checkpoint's held
// until the coordinator's start routes them (routeHeldOfNone).
func (s *streamSource) addPartAgg(idx int, name string, fields []string, mask uint64) error {
	j := s.j
	decls := j.e.aggregatesKeyedBy(fields)
	var st []byte
	same := false
	if m := j.meta; m != nil {
		st = m.Source.PartAggregates[name]
		same = m.Source.AggregatesOf == partAggSignature(j.e, j.cfg.Kafka)
	}
	if len(decls) == 0 && st == nil {
		return nil
	}
	workers := j.aggWorkers()
	if len(decls) == 0 {
		workers = 1 // it only holds events (routeHeldOfNone)
	}
	a, err := newAggregation(aggregateSpecs(decls), workers)
	if err != nil {
		return err
	}
	pa := &partAgg{a: a, decls: decls, mask: mask, name: name}
	switch {
	case st == nil && j.meta != nil:
		// The windows start empty at the watermark the partition's rules
		// have, as the one aggregator of a job that ran none does
		// (openSource): an event at or before it is late, counted nowhere.
		pa.fresh, pa.from = true, s.rulesWatermark(mask)
		err = a.Advance(pa.from, func(*event.Event) error { return nil })
	case st == nil:
	case len(decls) == 0:
		// No aggregate here any more: the events held go to the rules at
		// the coordinator's start (routeHeldOfNone).
		_, err = a.RestoreMatching(st)
	case same:
		err = a.Restore(st)
	default:
		// Other aggregates: the events held go on, the windows of the
		// aggregates declared alike too, the others start empty (as in an
		// embedded run).
		var kept []bool
		if kept, err = a.RestoreMatching(st); err == nil {
			j.logf("the velocity aggregates changed since checkpoint %d: in %s, %s; the events held go on", j.restored, name, keptWindows(decls, kept))
		}
	}
	if err != nil {
		a.Close()
		return fmt.Errorf("%w: partition %s: %w", ErrRestore, name, err)
	}
	if len(decls) == 0 && a.Len() == 0 {
		a.Close() // nothing to hold: the partition goes on without
		return nil
	}
	if s.paggs == nil {
		s.paggs = map[int]*partAgg{}
	}
	s.paggs[idx] = pa
	s.paggIdx = append(s.paggIdx, idx)
	slices.Sort(s.paggIdx)
	return nil
}

// keptWindows says which of decls kept their windows at a restore with
// other aggregates (kept, by declaration, as RestoreMatching says) and
// which start empty: for the log.
func keptWindows(decls []*rules.Aggregate, kept []bool) string {
	var same, fresh []string
	for i, d := range decls {
		if kept[i] {
			same = append(same, d.Name)
		} else {
			fresh = append(fresh, d.Name)
		}
	}
	var says []string
	say := func(names []string, one, many string) {
		switch len(names) {
		case 0:
		case 1:
			says = append(says, names[0]+" "+one)
		default:
			says = append(says, strings.Join(names, ", ")+" "+many)
		}
	}
	say(same, "keeps its windows", "keep their windows")
	say(fresh, "starts empty (new, or declared otherwise)", "start empty (new, or declared otherwise)")
	if len(says) == 0 {
		return "none is declared any more"
	}
	return strings.Join(says, ", ")
}

// rulesWatermark is the watermark the restored rules of the
// specifications of mask have: the input's forwarded for those keyed by
// the record key, the repartitioned rules' own (their operators', as no
// forwarded watermark of theirs is restored).
func (s *streamSource) rulesWatermark(mask uint64) event.Watermark {
	j := s.j
	if mask&j.kafka.local != 0 {
		return s.forwarded
	}
	wm := event.MaxTime
	for _, sub := range j.subs {
		for i := range sub.host.keyOps {
			if mask&(1<<i) != 0 {
				wm = min(wm, sub.host.keyOps[i].op.Watermark())
			}
		}
	}
	return wm
}

// routeHeldOfNone routes the events the aggregators of no aggregate hold
// and drops those aggregators, at the coordinator's start (after
// settleHeld, which settles those events as any held): the job's
// aggregator of none (streamSource.aggNone: a restore, by rules that
// declare no aggregates, of a checkpoint whose aggregates held events)
// and, in a transactional Kafka job, a partition's aggregator of no
// aggregate (addPartAgg). Such an aggregator sets no value: it would only
// hold each event until the watermark passes it, as the rules' buffers do.
// So its events go to the rules at once, in time order (ties in arrival
// order), before any event read after the restore; all are after the
// watermark the rules have, so each rule buffers them as a job that never
// had aggregates would have. From then on the job is such a job: every
// event routed as it comes, and no aggregator state in its checkpoints.
// (An aggregator of none that stayed held every later event until the
// watermark and wrote its state into every checkpoint.)
func (s *streamSource) routeHeldOfNone() error {
	held := 0
	if s.aggNone {
		held += s.agg.Len()
		if err := s.agg.Advance(event.MaxTime, func(ev *event.Event) error { return s.routeEvent(ev, allSpecs) }); err != nil {
			return err
		}
		s.agg.Close()
		s.agg, s.aggNone = nil, false
	}
	var err error
	s.paggIdx = slices.DeleteFunc(s.paggIdx, func(idx int) bool {
		pa := s.paggs[idx]
		if err != nil || len(pa.decls) > 0 {
			return false
		}
		held += pa.a.Len()
		if err = pa.a.Advance(event.MaxTime, func(ev *event.Event) error { return s.routeEvent(ev, pa.mask) }); err != nil {
			return false
		}
		pa.a.Close()
		delete(s.paggs, idx)
		return true
	})
	if err != nil {
		return err
	}
	if held > 0 {
		s.j.logf("the %d events held at checkpoint %d by velocity aggregates the rules no longer declare went to the rules", held, s.j.restored)
	}
	return nil
}

// closeAggregates stops the aggregators' goroutines (after the
// coordinator's end).
func (s *streamSource) closeAggregates() {
	if s.agg != nil {
		s.agg.Close()
	}
	for _, pa := range s.paggs {
		pa.a.Close()
	}
}

// aggWorkers is the workers of the job's aggregators: the stream's
// setting, else the engine's.
func (j *job) aggWorkers() int {
	if j.cfg.AggregateWorkers > 0 {
		return j.cfg.AggregateWorkers
	}
	return j.e.cfg.aggWorkers
}

// advancePartAggs releases, up to wm, the events of the partitions' aggregators
// whose events go to the specifications of mask, their aggregates set.
func (s *streamSource) advancePartAggs(wm event.Watermark, mask uint64) error {
	for _, idx := range s.paggIdx {
		pa := s.paggs[idx]
		if pa.mask&mask == 0 {
			continue
		}
		if err := pa.a.Advance(wm, func(ev *event.Event) error { return s.routeEvent(ev, pa.mask) }); err != nil {
			return err
		}
	}
	return nil
}

// partAggMeta is the state of each partition's aggregator, by partition
// name, for a checkpoint.
func (s *streamSource) partAggMeta() map[string][]byte {
	if len(s.paggs) == 0 {
		return nil
	}
	out := make(map[string][]byte, len(s.paggs))
	for _, pa := range s.paggs {
		out[pa.name] = pa.a.AppendBinary(nil)
	}
	return out
}

// aggStats returns the figures of each aggregate of the job, summed over
// the partitions' aggregators, and the events they hold.
func (s *streamSource) aggStats() ([]AggregateStats, int) {
	if s.agg != nil {
		return aggregateStats(s.j.e, s.agg)
	}
	if len(s.paggs) == 0 {
		return nil, 0
	}
	decls := s.j.e.Aggregates()
	out := make([]AggregateStats, len(decls))
	for i, d := range decls {
		out[i].Name = d.Name
	}
	held := 0
	for _, pa := range s.paggs {
		keys, dropped, hot := pa.a.KeyCounts(), pa.a.Dropped(), pa.a.HotKeys()
		for k, d := range pa.decls {
			i := slices.Index(decls, d)
			if i < 0 || k >= len(keys) {
				continue
			}
			out[i].Keys += keys[k]
			out[i].Dropped += dropped[k]
			out[i].HotKeys += hot[k]
		}
		held += pa.a.Len()
	}
	return out, held
}

// aggStatePrefix starts the changelog key of a partition's aggregator
// state: 0x00 0x02, then the partition's name. No encoded state key
// starts so (no operator id is empty), nor a chunk's key (0x00 0x01) or
// the marker (0x00).
const aggStatePrefix = "\x00\x02"

func aggStateKey(name string) []byte { return []byte(aggStatePrefix + name) }

// writeAggStates produces into the open transaction of checkpoint id the
// aggregator state of every partition of the checkpoint's source whose
// changelog partition gets the marker (marked): one record (chunked when
// large) per partition, in the changelog partition of its number, before
// the marker; its value the checkpoint and the instance, then the state.
// A restore takes a partition's state only from its marker's checkpoint
// (a record of an earlier one, left by a job with other aggregates, is
// not).
func (j *job) writeAggStates(ctx context.Context, id int64, states map[string][]byte, marked map[int32]bool) {
	ko := j.kafka
	for _, name := range slices.Sorted(maps.Keys(states)) {
		p, ok := ko.partitionNumber(name)
		if !ok || !marked[p] {
			continue // not read yet: nothing held, no window
		}
		v := binary.AppendUvarint(nil, uint64(id))
		v = binary.AppendUvarint(v, uint64(len(ko.instance)))
		v = append(append(v, ko.instance...), states[name]...)
		ko.produceChangelog(ctx, p, aggStateKey(name), v)
	}
}

// aggState is a partition's aggregator state read from the changelog, of
// the checkpoint mark.
type aggState struct {
	mark  chkMark // id and instance
	state []byte
}

// partitionNumber is the partition number of name, a partition of the
// input or of a repartition topic.
func (ko *kafkaOut) partitionNumber(name string) (int32, bool) {
	if p, ok := partitionOf(ko.in.Topic, name); ok {
		return p, true
	}
	for _, rp := range ko.reps {
		if p, ok := partitionOf(rp.topic, name); ok {
			return p, true
		}
	}
	return 0, false
}

// takeAggStates removes the aggregator states from the changelog's
// records (joined), and returns them by partition name.
func takeAggStates(recs map[string][]byte) (map[string]aggState, error) {
	out := map[string]aggState{}
	for k, v := range recs {
		name, ok := strings.CutPrefix(k, aggStatePrefix)
		if !ok {
			continue
		}
		delete(recs, k)
		if v == nil {
			continue
		}
		bad := fmt.Errorf("%w: changelog: the aggregator state of %s does not decode", ErrRestore, name)
		id, n := binary.Uvarint(v)
		if n <= 0 {
			return nil, bad
		}
		v = v[n:]
		l, n := binary.Uvarint(v)
		if n <= 0 || uint64(len(v)-n) < l {
			return nil, bad
		}
		v = v[n:]
		out[name] = aggState{mark: chkMark{id: int64(id), instance: string(v[:l])}, state: v[l:]}
	}
	return out, nil
}
