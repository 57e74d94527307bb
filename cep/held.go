package cep

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/rules"
	"github.com/cepheus-cep/cepheus/runtime"
)

// This file settles the events a job holds when it restores a checkpoint
// taken under other rules (a hot-loading switch, a restart with another
// rules file): the events in the rules' buffers, waiting for the
// watermark, and those in the velocity aggregates' stage were decoded and
// enriched under the version before, and a lookup or an aggregate the new
// version adds has no value in them. settleHeld gives them what the new
// version declares before any rule sees them: the new lookups' records
// (or their defaults, or their failure policy, as for any event), the
// slots of the new aggregates, and, when the job before ran no
// aggregates (in a transactional Kafka job: none on their partition), a
// place in the aggregates' stage, which sets their values when the
// watermark passes them (docs/decisions.md, "Events held at a switch").
// A restore under the same lookups and aggregates does nothing here.

// settleHeld settles the events the restored job holds (see above). It
// runs once the subtasks' state and the source's aggregators are
// restored, before the subtasks start: it reads and changes their
// operators. The events changed are written at the next checkpoint; a
// crash before it restores the same checkpoint, and settles them again.
func (j *job) settleHeld(ctx context.Context) error {
	s := j.src
	lookups := j.enrich.addedSince(j.e, j.took)
	aggs := j.aggregatesChanged()
	if len(lookups) == 0 && !aggs {
		return nil
	}
	// The slots the events must have: the new lookups', the aggregates'.
	need := -1
	for _, i := range lookups {
		for _, f := range j.enrich.fields[i] {
			need = max(need, f.Slot)
		}
	}
	if aggs {
		for _, a := range j.e.Aggregates() {
			need = max(need, a.Slot)
		}
	}
	n := j.e.schema.Len()
	// Every copy of each event held, by Seq: a subtask's operators each
	// decoded their own from the checkpoint, and an event is in the
	// operators of each of its keys.
	copies := map[uint64][]*event.Event{}
	var firsts []*event.Event // one copy of each
	note := func(ev *event.Event) {
		if len(ev.Fields) <= need {
			ev.Fields = append(ev.Fields, make([]event.Value, n-len(ev.Fields))...) // nulls
		}
		if _, ok := copies[ev.Seq]; !ok {
			firsts = append(firsts, ev)
		}
		copies[ev.Seq] = append(copies[ev.Seq], ev)
	}
	for _, op := range j.operators() {
		op.readBuffered(note)
	}
	for _, a := range s.aggregations() {
		a.EachHeld(func(ev *event.Event) bool { note(ev); return true })
	}
	failed, err := j.lookUpHeld(ctx, lookups, firsts, copies)
	if err != nil {
		return err
	}
	// Into the aggregates' stage: the events the rules' buffers hold where
	// it started at this restore (heldStage), after the watermark it
	// starts at; one copy of each per aggregator, the others dropped.
	toAgg := map[runtime.Aggregation][]*event.Event{}
	into := map[runtime.Aggregation]map[uint64]bool{}
	moved := map[uint64]bool{}
	for _, sub := range j.subs {
		for spec := range sub.host.keyOps {
			sub.host.keyOps[spec].op.eachBuffered(func(ev *event.Event) bool {
				if failed[ev.Seq] != "" {
					return false
				}
				a, from := s.heldStage(spec, ev)
				if a == nil || ev.Time <= from {
					return true
				}
				if into[a] == nil {
					into[a] = map[uint64]bool{}
				}
				if !into[a][ev.Seq] {
					into[a][ev.Seq] = true
					toAgg[a] = append(toAgg[a], ev)
				}
				moved[ev.Seq] = true
				return false
			})
		}
	}
	for _, a := range s.aggregations() {
		a.EachHeld(func(ev *event.Event) bool { return failed[ev.Seq] == "" })
	}
	for agg, evs := range toAgg {
		// In time order, ties in arrival order, as they came
		// (event.SeqOf).
		slices.SortFunc(evs, func(a, b *event.Event) int {
			if c := cmp.Compare(a.Time, b.Time); c != 0 {
				return c
			}
			return cmp.Compare(a.Seq, b.Seq)
		})
		for _, ev := range evs {
			agg.Add(ev) // after its watermark: held
		}
	}
	var dead []*event.Event
	for _, ev := range firsts {
		if failed[ev.Seq] != "" {
			dead = append(dead, ev)
		}
	}
	slices.SortFunc(dead, func(a, b *event.Event) int { return cmp.Compare(a.Seq, b.Seq) })
	for _, ev := range dead {
		if err := s.heldDeadLetter(ev, failed[ev.Seq]); err != nil {
			return err
		}
	}
	if len(lookups) > 0 {
		// An unbound lookup looked nothing up: its defaults went in (the
		// line said "looked up by" of it too).
		var bound, unbound []string
		for _, i := range lookups {
			if l := j.enrich.lookups[i]; l.Bound() {
				bound = append(bound, l.Name())
			} else {
				unbound = append(unbound, l.Name())
			}
		}
		var what []string
		if len(bound) > 0 {
			what = append(what, "were looked up by "+strings.Join(bound, ", "))
		}
		if len(unbound) > 0 {
			what = append(what, "got the defaults of "+strings.Join(unbound, ", ")+" (not bound)")
		}
		j.logf("the %d events held at checkpoint %d %s, which the version before lacked: %d failed closed (to the dead letters)",
			len(firsts), j.restored, strings.Join(what, " and "), len(dead))
	}
	if len(moved) > 0 {
		j.logf("the %d events the rules' buffers held at checkpoint %d went to the velocity aggregates' stage", len(moved), j.restored)
	}
	return nil
}

// heldStage returns the aggregator that ev, an event the rules of key
// specification spec buffer at the restore, goes into, and the watermark
// that aggregator starts at; nil when ev stays in the buffers. The
// aggregates' stage of its events (the job's aggregator, or in a
// transactional Kafka job its partition's) takes it when the stage
// started without state at this restore: the job before ran no
// aggregates there, so its events waited in the rules' buffers instead
// (after a job that ran some, the buffers hold none after its
// watermark).
func (s *streamSource) heldStage(spec int, ev *event.Event) (runtime.Aggregation, event.Watermark) {
	if s.agg != nil {
		if s.j.meta.Source.Aggregates != nil {
			return nil, 0
		}
		return s.agg, s.forwarded // (started there in openSource)
	}
	pa := s.paggs[s.aggPartition(spec, ev)]
	if pa == nil || !pa.fresh {
		return nil, 0
	}
	return pa.a, pa.from
}

// aggPartition is the source index of the partition through which the
// events of key specification spec like ev come, in a Kafka job: its
// input partition for the rules keyed by the record key, else the
// partition of its key in the specification's repartition topic (as
// repWrite chose it); -1 for none.
func (s *streamSource) aggPartition(spec int, ev *event.Event) int {
	ko := s.j.kafka
	if ko == nil || ko.local&(1<<spec) != 0 {
		return ev.Partition()
	}
	for _, rp := range ko.reps {
		if rp.spec != spec {
			continue
		}
		sp := &s.j.e.specs[spec]
		var key []byte
		if !hasNullKey(ev, sp.slots) {
			key = recordKey(sp.key(ev))
		}
		return rp.base + int(s.rep.part(key, ko.parts))
	}
	return -1
}

// lookUpHeld runs lookups over firsts, one copy of each event held, in
// arrival order and in batches, and gives their other copies the same
// values; it returns the reasons of the events that failed closed, by
// Seq.
func (j *job) lookUpHeld(ctx context.Context, lookups []int, firsts []*event.Event, copies map[uint64][]*event.Event) (map[uint64]string, error) {
	failed := map[uint64]string{}
	if len(lookups) == 0 {
		return failed, nil
	}
	evs := slices.Clone(firsts)
	slices.SortFunc(evs, func(a, b *event.Event) int { return cmp.Compare(a.Seq, b.Seq) })
	batch := j.e.cfg.lookupOpts.Batch
	if batch <= 0 {
		batch = defaultLookupBatch
	}
	reasons := make([]string, batch)
	for from := 0; from < len(evs); from += batch {
		part := evs[from:min(from+batch, len(evs))]
		clear(reasons)
		if err := j.enrich.run(ctx, lookups, part, reasons[:len(part)]); err != nil {
			return nil, err
		}
		for i, ev := range part {
			if reasons[i] != "" {
				failed[ev.Seq] = reasons[i]
				continue
			}
			for _, c := range copies[ev.Seq] {
				for _, l := range lookups {
					for _, f := range j.enrich.fields[l] {
						c.Fields[f.Slot] = ev.Fields[f.Slot]
					}
				}
			}
		}
	}
	return failed, nil
}

// operators returns the shared operators of every subtask.
func (j *job) operators() []*SharedOperator {
	var out []*SharedOperator
	for _, s := range j.subs {
		for i := range s.host.keyOps {
			out = append(out, s.host.keyOps[i].op)
		}
	}
	return out
}

// aggregations returns the source's aggregators: the one of the job, or
// those of a transactional Kafka job's partitions.
func (s *streamSource) aggregations() []runtime.Aggregation {
	var out []runtime.Aggregation
	if s.agg != nil {
		out = append(out, s.agg)
	}
	for _, p := range s.paggIdx {
		out = append(out, s.paggs[p].a)
	}
	return out
}

// aggregatesChanged reports whether the job's aggregates are other than
// those of an engine that took its state.
func (j *job) aggregatesChanged() bool {
	sig := aggregateSignature(j.e)
	return slices.ContainsFunc(j.took, func(e *Engine) bool { return aggregateSignature(e) != sig })
}

// addedSince returns the indexes of the lookups of st, which runs e's,
// that one of the engines took has not (or declares otherwise): the
// events held under that engine were not looked up by them.
func (st *enrichStage) addedSince(e *Engine, took []*Engine) []int {
	if st == nil {
		return nil
	}
	var out []int
	for i, d := range e.Lookups() {
		id := lookupID(d)
		if slices.ContainsFunc(took, func(t *Engine) bool {
			return !slices.ContainsFunc(t.Lookups(), func(o *rules.Lookup) bool { return lookupID(o) == id })
		}) {
			out = append(out, i)
		}
	}
	return out
}

// heldDeadLetter writes a dead letter for ev, an event held at a switch
// that a lookup failed closed on: its raw line is not kept, so its data is
// the event as decoded, and its offset -1.
func (s *streamSource) heldDeadLetter(ev *event.Event, reason string) error {
	data := s.j.e.encoder.enc.AppendEvent(nil, ev)
	return s.deadLetter(runtime.Partition{Index: ev.Partition(), Name: s.partitionName(ev.Partition())}, &runtime.Record{Line: ev.Line(), Offset: -1, Data: data}, reason)
}

// partitionName returns the name of input partition p, or "" when the
// source does not know it (a Kafka partition not opened yet, a file
// deleted).
func (s *streamSource) partitionName(p int) string {
	if name, ok := s.names[p]; ok {
		return name
	}
	for name, i := range s.index {
		if i == p {
			return name
		}
	}
	return ""
}

// readBuffered calls f with each element the operator buffers, changing
// nothing.
func (o *SharedOperator) readBuffered(f func(ev *event.Event)) {
	for _, ks := range o.keys {
		for _, b := range ks.buf {
			for _, ev := range b.evs {
				f(ev)
			}
		}
	}
}

// eachBuffered calls f with each element the operator buffers: f may
// change its fields, and returns false to drop it. Every key that buffers
// elements is written at the next snapshot; a key left holding nothing is
// dropped. For a restore (settleHeld), not per element.
func (o *SharedOperator) eachBuffered(f func(ev *event.Event) (keep bool)) {
	for k, ks := range o.keys {
		if ks.n == 0 {
			continue
		}
		o.beforeChange(k)
		o.touch(ks)
		gone := map[*event.Event]bool{}
		bs := ks.buf[:0]
		for _, b := range ks.buf {
			evs := b.evs[:0]
			for _, ev := range b.evs {
				if f(ev) {
					evs = append(evs, ev)
				} else {
					gone[ev] = true
				}
			}
			clear(b.evs[len(evs):])
			if b.evs = evs; len(evs) > 0 {
				bs = append(bs, b)
			} else {
				o.evsPool.put(evs)
			}
		}
		clear(ks.buf[len(bs):])
		ks.buf = bs
		if len(gone) == 0 {
			continue
		}
		ks.n -= len(gone)
		o.buffered -= len(gone)
		for i := range ks.rules {
			sl := &ks.rules[i]
			sl.hidden = slices.DeleteFunc(sl.hidden, func(h hiddenElem) bool { return gone[h.ev] })
		}
		o.settle(ks)
	}
}
