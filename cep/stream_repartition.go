package cep

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/runtime"
	"github.com/cepheus-cep/cepheus/runtime/kafka"
)

// Repartitioning (docs/kafka.md, "Repartitioning"). In Kafka mode the keys
// of a rule keyed by the field the input records are keyed by follow the
// input's partitions: the instance that reads a partition holds their
// state. Any other key specification is repartitioned: the coordinator
// writes every input event, inside the checkpoint's transaction, to the
// specification's repartition topic (as many partitions as the input,
// the record keyed and partitioned by the event's key), and the job reads
// partition p of each repartition topic beside partition p of the input
// (the instance that owns one owns the other), handing those events to
// that specification's rules only. A repartition topic has no watermarks
// of its own: every checkpoint writes, for each input partition the job
// reads, a marker with its watermark (idle, or final at its end) into
// every partition of every repartition topic, and a repartition
// partition's watermark is the lowest its upstream partitions' markers
// say. It is complete once every upstream partition's final marker came.
// The repartitioned rules go by the lowest watermark of the job's
// repartition partitions, the others by the input's (so they wait for no
// marker).

// repartition is a key specification of a Kafka job that is not keyed by
// the input's record key.
type repartition struct {
	spec  int    // in Engine.specs
	topic string // <group>-repartition-<fields>
	base  int    // the source index of its partition 0 (its partition r is base+r)
}

// recordKeyField is the event field the input's records are keyed by:
// RecordKey, else the key field of the first rule keyed by one field
// ("" when there is none: every keyed rule is repartitioned).
func (e *Engine) recordKeyField(k *KafkaInput) string {
	if k.RecordKey != "" {
		return k.RecordKey
	}
	for _, cr := range e.rules {
		if len(cr.rule.KeyFields) == 1 {
			return cr.rule.KeyFields[0]
		}
	}
	return ""
}

// kafkaSpecs splits the key specifications of a Kafka job over an input
// of parts partitions: the mask of those keyed by the record key alone,
// and the others, repartitioned.
func (e *Engine) kafkaSpecs(k *KafkaInput, parts int) (local uint64, reps []repartition) {
	field := e.recordKeyField(k)
	for i := range e.specs {
		fields := e.rules[e.specs[i].rules[0]].rule.KeyFields
		if len(fields) == 1 && fields[0] == field {
			local |= 1 << i
			continue
		}
		reps = append(reps, repartition{spec: i, topic: repartitionTopic(k.Group, fields), base: (len(reps) + 1) * parts})
	}
	return local, reps
}

// repartitionTopic is the repartition topic of the key fields of a
// group's job: GROUP-repartition-F1.F2 (characters a topic name cannot
// hold replaced by _; _all_ for rules without key).
func repartitionTopic(group string, fields []string) string {
	name := strings.Join(fields, ".")
	if name == "" {
		name = "_all_"
	}
	name = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		}
		return '_'
	}, name)
	return group + "-repartition-" + name
}

// repUpstream is what the markers of one upstream input partition said
// last in a repartition partition.
type repUpstream struct {
	Seen  bool            `json:",omitempty"`
	WM    event.Watermark `json:",omitempty"`
	Idle  bool            `json:",omitempty"`
	Final bool            `json:",omitempty"`
}

// merge is u after a marker m that follows it: the watermark never goes
// back, and a final partition stays final.
func (u repUpstream) merge(m repUpstream) repUpstream {
	return repUpstream{Seen: true, WM: max(u.WM, m.WM), Idle: m.Idle, Final: u.Final || m.Final}
}

// repWatermark is the watermark of a repartition partition whose upstream
// partitions said ups: the lowest of those neither idle nor final (the
// lowest of all until each has said something), the highest when all are
// idle or final, the end when all are final (complete).
func repWatermark(ups []repUpstream) (wm event.Watermark, complete bool) {
	lo, hi, some, complete := event.MaxTime, event.MinTime, false, true
	for _, u := range ups {
		if !u.Seen {
			return event.MinTime, false
		}
		complete = complete && u.Final
		if !u.Final {
			hi = max(hi, u.WM)
		}
		if u.Idle || u.Final {
			continue
		}
		lo, some = min(lo, u.WM), true
	}
	switch {
	case complete:
		return event.MaxTime, true
	case !some:
		return hi, false
	}
	return lo, false
}

// A repartition record whose value starts with repMarkerByte is a marker:
// version, upstream partition, watermark, flags. One that starts with
// repEventByte is an event of a job without lookups: the sequence number
// it had at its input (its partition and line there, which alerts name),
// then its JSON. One that starts with repEnrichedByte is an event of a job
// with lookups, which carries what they gave it at its input, so that it
// is enriched once (docs/decisions.md, "Lookups"): version, sequence
// number, the hash of the lookups' signature (8 bytes, big-endian:
// enrichStage.sigHash), the length of their values, their values
// (enrichStage.appendValues), then its JSON. A build before
// repEnrichedByte writes repEventByte records with lookups too, and
// cannot read repEnrichedByte ones.
const (
	repEventByte       = 1
	repMarkerByte      = 0
	repMarkerVersion   = 1
	repMarkerIdle      = 1
	repMarkerFinal     = 2
	repEnrichedByte    = 2
	repEnrichedVersion = 1
)

func appendRepMarker(b []byte, upstream int32, u repUpstream) []byte {
	b = append(b, repMarkerByte, repMarkerVersion)
	b = binary.AppendUvarint(b, uint64(upstream))
	b = binary.AppendVarint(b, int64(u.WM))
	var flags byte
	if u.Idle {
		flags |= repMarkerIdle
	}
	if u.Final {
		flags |= repMarkerFinal
	}
	return append(b, flags)
}

var errRepMarker = errors.New("cep: stream: corrupt repartition marker")

func decodeRepMarker(b []byte) (upstream int32, u repUpstream, err error) {
	r := event.Reader{B: b, Corrupt: errRepMarker}
	if r.Byte() != repMarkerByte || r.Byte() != repMarkerVersion {
		return 0, u, errRepMarker
	}
	up := r.Uvarint()
	u.WM = event.Watermark(r.Varint())
	flags := r.Byte()
	if r.Err != nil || len(r.B) != 0 || up > math.MaxInt32 || flags&^(repMarkerIdle|repMarkerFinal) != 0 {
		return 0, u, errRepMarker
	}
	u.Seen, u.Idle, u.Final = true, flags&repMarkerIdle != 0, flags&repMarkerFinal != 0
	return int32(up), u, nil
}

// repEvent is an event record of a repartition topic, decoded.
type repEvent struct {
	seq uint64 // the event's sequence number at its input
	raw []byte // its input record's JSON
	// enriched says that the record carries what the lookups of sigHash
	// gave the event at its input: values (enrichStage.applyValues).
	enriched bool
	sigHash  uint64
	values   []byte
}

var errRepEvent = errors.New("not a repartition record")

// appendRepEvent appends the value of the repartition record of an event
// of a job without lookups: its sequence number seq and its input record
// raw.
func appendRepEvent(b []byte, seq uint64, raw []byte) []byte {
	b = append(b, repEventByte)
	b = binary.AppendUvarint(b, seq)
	return append(b, raw...)
}

// appendRepEnriched appends the value of the repartition record of an
// event of a job with lookups: its sequence number seq, what the lookups
// of sigHash gave it (values: enrichStage.appendValues), and its input
// record raw.
func appendRepEnriched(b []byte, seq, sigHash uint64, values, raw []byte) []byte {
	b = append(b, repEnrichedByte, repEnrichedVersion)
	b = binary.AppendUvarint(b, seq)
	b = binary.BigEndian.AppendUint64(b, sigHash)
	b = binary.AppendUvarint(b, uint64(len(values)))
	b = append(b, values...)
	return append(b, raw...)
}

// decodeRepEvent decodes the value of an event record of a repartition
// topic (repEventByte or repEnrichedByte).
func decodeRepEvent(b []byte) (repEvent, error) {
	var e repEvent
	r := event.Reader{B: b, Corrupt: errRepEvent}
	switch r.Byte() {
	case repEventByte:
	case repEnrichedByte:
		if v := r.Byte(); v > repEnrichedVersion {
			return e, fmt.Errorf("a repartition record of version %d, this build reads up to %d (an instance of a later build wrote it: run the instances of a group with one build)", v, repEnrichedVersion)
		} else if v != repEnrichedVersion {
			return e, errRepEvent
		}
		e.enriched = true
	default:
		return e, errRepEvent
	}
	e.seq = r.Uvarint()
	if e.enriched {
		if h := r.Bytes(8); h != nil {
			e.sigHash = binary.BigEndian.Uint64(h)
		}
		e.values = r.Bytes(r.Count())
	}
	if r.Err != nil {
		return repEvent{}, errRepEvent
	}
	e.raw = r.B
	return e, nil
}

// repSource is the repartitioning side of a Kafka job's source: the
// readers of its repartition partitions, their upstream markers, and the
// repartition records it writes.
type repSource struct {
	local uint64 // the specifications of the input's events
	reps  []repartition
	parts int // of the input, and of each repartition topic
	ups   map[int][]repUpstream
	done  map[int]bool // complete repartition partitions
	ch    chan runtime.Batch
	rdrs  []*kafkaReader
	stop  context.CancelFunc
	part  kafka.KeyPartitioner
	// held are the records written after a barrier, produced once its
	// transaction commits; lastSent the markers last committed, by
	// upstream input partition.
	held     []repRecord
	lastSent map[int32]repUpstream
	// mask is the repartitioned specifications; forwarded the last
	// watermark sent to them.
	mask      uint64
	forwarded event.Watermark
	// values is repWrite's scratch: what the lookups gave an event.
	values []byte
}

// repRecord is a record of a repartition topic.
type repRecord struct {
	topic      string
	p          int32
	key, value []byte
}

// repOf returns the repartitioning whose partitions have source index i,
// and the partition.
func (r *repSource) repOf(i int) (*repartition, int32) {
	k := i/r.parts - 1
	return &r.reps[k], int32(i % r.parts)
}

// pending reports whether a repartition partition is not complete.
func (r *repSource) pending() bool { return r != nil && len(r.done) < len(r.ups) }

// openRepartitions starts reading the repartition partitions of the
// owned partitions, from the restored positions (the earliest offset
// where there is none), each registered with the watermark its restored
// markers say.
func (s *streamSource) openRepartitions(ctx context.Context, restored map[string][]repUpstream) error {
	ko := s.j.kafka
	r := &repSource{local: ko.local, reps: ko.reps, parts: ko.parts, ups: map[int][]repUpstream{}, done: map[int]bool{},
		ch: make(chan runtime.Batch, 4), part: kafka.NewKeyPartitioner(), lastSent: map[int32]repUpstream{}, forwarded: event.MinTime}
	for _, rp := range ko.reps {
		r.mask |= 1 << rp.spec
	}
	if m := s.j.meta; m != nil {
		for _, p := range ko.owned {
			if u, ok := m.Source.RepSent[partitionName(ko.in.Topic, p)]; ok {
				r.lastSent[p] = u
			}
		}
	}
	s.rep = r
	ctx, r.stop = context.WithCancel(ctx)
	for i := range r.reps {
		rp := &r.reps[i]
		offsets := map[int32]int64{}
		for name, pos := range s.positions {
			if p, ok := partitionOf(rp.topic, name); ok {
				offsets[p] = pos.Offset
			}
		}
		src, err := kafka.NewSource(ctx, kafka.SourceConfig{
			Brokers: ko.in.Brokers, Security: ko.in.Security, Topic: rp.topic, Partitions: ko.owned, Offsets: offsets,
			Stalled: stallLog(s.j.logf, "repartition topic", rp.topic),
		})
		if err != nil {
			return fmt.Errorf("cep: stream: repartition topic %s: %w", rp.topic, err)
		}
		kr := &kafkaReader{src: src, out: r.ch, topic: rp.topic, done: make(chan struct{}), stop: make(chan struct{}), base: rp.base, shared: true}
		r.rdrs = append(r.rdrs, kr)
		go kr.pump()
		for _, p := range ko.owned {
			idx := rp.base + int(p)
			name := partitionName(rp.topic, p)
			ups := make([]repUpstream, r.parts)
			if st := restored[name]; len(st) == r.parts {
				copy(ups, st)
			}
			r.ups[idx] = ups
			s.names[idx] = name
			fields := s.j.e.rules[s.j.e.specs[rp.spec].rules[0]].rule.KeyFields
			if err := s.addPartAgg(idx, name, fields, 1<<rp.spec); err != nil {
				return err
			}
			if _, complete := repWatermark(ups); complete {
				r.done[idx] = true
			}
		}
	}
	return nil
}

// closeRepartitions stops the readers.
func (s *streamSource) closeRepartitions() {
	r := s.rep
	if r == nil {
		return
	}
	r.stop()
	for _, kr := range r.rdrs {
		close(kr.stop)
		_ = kr.src.Close()
	}
	// The pumps may be blocked on the shared channel: drain it.
	for _, kr := range r.rdrs {
	drain:
		for {
			select {
			case <-r.ch:
			case <-kr.done:
				break drain
			}
		}
	}
}

// repErr is the first error of a repartition reader.
func (s *streamSource) repErr() error {
	if s.rep == nil {
		return nil
	}
	for _, kr := range s.rep.rdrs {
		if err := kr.src.Err(); err != nil {
			return fmt.Errorf("cep: stream: repartition topic %s: %w", kr.topic, err)
		}
	}
	return nil
}

// repChan is the channel of the repartition partitions' batches (nil
// without repartitioning: never ready).
func (s *streamSource) repChan() <-chan runtime.Batch {
	if s.rep == nil {
		return nil
	}
	return s.rep.ch
}

// repWrite writes ev, decoded from raw, to every repartition topic: held
// while a checkpoint's transaction is not committed yet (its barrier
// went out before the event). With lookups, ev is enriched already, and
// the record carries what they gave it: its readers do not look it up
// again.
func (s *streamSource) repWrite(ev *event.Event, raw []byte) {
	r := s.rep
	j := s.j
	f := j.flight
	hold := f != nil && !f.committed
	// One allocation per event, shared by the repartition topics.
	var value []byte
	if st := s.enrich; st != nil && !j.cfg.hooks.repWithoutLookups {
		r.values = st.appendValues(r.values[:0], ev)
		value = make([]byte, 0, 2+2*binary.MaxVarintLen64+8+len(r.values)+len(raw))
		value = appendRepEnriched(value, ev.Seq, st.sigHash, r.values, raw)
	} else {
		value = appendRepEvent(make([]byte, 0, 1+binary.MaxVarintLen64+len(raw)), ev.Seq, raw)
	}
	for i := range r.reps {
		rp := &r.reps[i]
		spec := &j.e.specs[rp.spec]
		var key []byte
		if !hasNullKey(ev, spec.slots) {
			key = recordKey(spec.key(ev))
		}
		p := r.part(key, r.parts)
		if hold {
			r.held = append(r.held, repRecord{rp.topic, p, key, value})
			continue
		}
		j.kafka.txn.ProduceTo(j.sctx, rp.topic, p, key, value)
	}
}

// repUpstreams is, at a barrier, what the markers of the job's input
// partitions say: those read so far.
func (s *streamSource) repUpstreams() map[int32]repUpstream {
	out := map[int32]repUpstream{}
	ko := s.j.kafka
	for _, p := range ko.owned {
		i := int(p)
		if !s.added[i] {
			continue
		}
		u := repUpstream{Seen: true, WM: s.pw.Of(i), Idle: s.pw.Idle(i)}
		if last := s.rep.lastSent[p]; s.pw.Finished(i) || last.Final {
			// Final once its final marker is committed (restored: the
			// partition's end may not be read again yet), and never
			// written again: the repartition partitions are complete
			// once each upstream's final marker is read (groupDone).
			u = repUpstream{Seen: true, WM: event.MaxTime, Final: true}
		}
		out[p] = u
	}
	return out
}

// repSent is, at a barrier whose markers are ups, what the markers of
// each input partition say once its transaction commits, by partition
// name.
func (s *streamSource) repSent(ups map[int32]repUpstream) map[string]repUpstream {
	out := map[string]repUpstream{}
	for p, u := range s.rep.lastSent {
		out[partitionName(s.j.cfg.Kafka.Topic, p)] = u
	}
	for p, u := range ups {
		out[partitionName(s.j.cfg.Kafka.Topic, p)] = u
	}
	return out
}

// markersDue reports whether a marker of the job's input partitions
// changed since the last committed ones.
func (s *streamSource) markersDue() bool {
	for u, st := range s.repUpstreams() {
		if last, ok := s.rep.lastSent[u]; !ok || last != st {
			return true
		}
	}
	return false
}

// endsFinal reports whether the markers ups, about to be committed, are
// the first to say every input partition of the job final (read to its
// end): that transaction commits the job's input at its ends.
func (s *streamSource) endsFinal(ups map[int32]repUpstream) bool {
	first := false
	for _, p := range s.j.kafka.owned {
		if !ups[p].Final {
			return false
		}
		first = first || !s.rep.lastSent[p].Final
	}
	return first
}

// writeRepMarkers writes into the open transaction the markers of the
// upstream partitions whose state changed since the last committed ones.
func (j *job) writeRepMarkers(ups map[int32]repUpstream) {
	r := j.src.rep
	for u, st := range ups {
		if last, ok := r.lastSent[u]; ok && last == st {
			continue
		}
		m := appendRepMarker(nil, u, st)
		for i := range r.reps {
			for p := range r.parts {
				j.kafka.txn.ProduceTo(j.sctx, r.reps[i].topic, int32(p), nil, m)
			}
		}
	}
}

// repCommitted notes the markers committed, and produces the records held
// since the barrier into the next transaction.
func (j *job) repCommitted(ups map[int32]repUpstream) {
	r := j.src.rep
	for u, st := range ups {
		r.lastSent[u] = st
	}
	for _, h := range r.held {
		j.kafka.txn.ProduceTo(j.sctx, h.topic, h.p, h.key, h.value)
	}
	r.held = r.held[:0]
}

// onRepBatch takes a batch of a repartition partition: markers move its
// watermark (and complete it), events go to its specification's rules.
// An event gets the lookups' values its record carries (the input side
// enriched it once); only one whose record carries none for the job's
// lookups (written by a build before repEnrichedByte, or under other
// lookups: a version deployed between its writing and its reading) is
// looked up here.
func (s *streamSource) onRepBatch(b runtime.Batch) error {
	r := s.rep
	s.noteBacklog(b)
	idx := b.Partition.Index
	rp, _ := r.repOf(idx)
	ups := r.ups[idx]
	// The events to look up here, in a row, are routed together once
	// looked up (before the next marker or event that is not).
	var held []*event.Event
	var heldRaw [][]byte
	route := func() error {
		if len(held) == 0 {
			return nil
		}
		s.reasons = append(s.reasons[:0], make([]string, len(held))...)
		reasons := s.reasons
		ctx := s.j.sctx
		if ctx == nil {
			ctx = context.Background()
		}
		if err := s.enrich.enrich(ctx, held, reasons); err != nil {
			return err
		}
		for i, ev := range held {
			var err error
			if reasons[i] != "" {
				err = s.repDeadLetter(ev, heldRaw[i], reasons[i])
			} else {
				err = s.hold(idx, ev, 1<<rp.spec)
			}
			if err != nil {
				return err
			}
		}
		clear(held)
		held, heldRaw = held[:0], heldRaw[:0]
		return nil
	}
	for i := range b.Records {
		rec := &b.Records[i]
		if len(rec.Data) > 0 && rec.Data[0] == repMarkerByte {
			if err := route(); err != nil {
				return err
			}
			u, m, err := decodeRepMarker(rec.Data)
			if err != nil || int(u) >= len(ups) {
				return fmt.Errorf("%w: %s offset %d", errRepMarker, b.Partition.Name, rec.Offset)
			}
			ups[u] = ups[u].merge(m)
			if _, complete := repWatermark(ups); complete {
				r.done[idx] = true
			}
			if err := s.forwardRep(); err != nil {
				return err
			}
			continue
		}
		re, err := decodeRepEvent(rec.Data)
		if err != nil {
			return fmt.Errorf("cep: stream: %s offset %d: %w", b.Partition.Name, rec.Offset, err)
		}
		ev, err := s.repDec.Decode(re.raw)
		if err != nil {
			return fmt.Errorf("cep: stream: %s offset %d: a repartition record that does not decode: %w", b.Partition.Name, rec.Offset, err)
		}
		ev.Seq = re.seq
		switch st := s.enrich; {
		case st == nil:
			// No lookups (any the record carries are no rule's).
		case re.enriched && re.sigHash == st.sigHash:
			if err := st.applyValues(ev, re.values); err != nil {
				return fmt.Errorf("cep: stream: %s offset %d: a repartition record's %w", b.Partition.Name, rec.Offset, err)
			}
		default:
			held, heldRaw = append(held, ev), append(heldRaw, re.raw)
			continue
		}
		if err := route(); err != nil {
			return err
		}
		if err := s.hold(idx, ev, 1<<rp.spec); err != nil {
			return err
		}
	}
	if err := route(); err != nil {
		return err
	}
	s.setPosition(b.Partition.Name, b.End)
	return s.flush()
}

// repDeadLetter sends to the dead letters ev, an event of a repartition
// record whose lookup failed closed where it was read, as its input
// record raw: named by its input partition and offset, as the input
// side's dead letters are.
func (s *streamSource) repDeadLetter(ev *event.Event, raw []byte, reason string) error {
	p := runtime.Partition{Index: ev.Partition(), Name: partitionName(s.j.cfg.Kafka.Topic, int32(ev.Partition()))}
	rec := runtime.Record{Line: ev.Line(), Offset: ev.Line() - 1, Data: raw}
	return s.deadLetter(p, &rec, reason)
}

// forwardRep sends the repartitioned rules their watermark when it
// advanced: the lowest of the job's repartition partitions that are not
// complete (the end once all are; the input's end comes by forward).
func (s *streamSource) forwardRep() error {
	r := s.rep
	wm := event.MaxTime
	for idx, ups := range r.ups {
		if !r.done[idx] {
			w, _ := repWatermark(ups)
			wm = min(wm, w)
		}
	}
	if s.j.holding && wm > s.j.holdAt {
		wm = s.j.holdAt // a group's switch point (job.takeRules)
	}
	if wm <= r.forwarded || wm == event.MaxTime {
		return nil
	}
	// The events the watermark passes go first, their aggregates set.
	if err := s.advancePartAggs(wm, r.mask); err != nil {
		return err
	}
	r.forwarded = wm
	return s.broadcast(msg{kind: msgWatermark, wm: wm, mask: r.mask})
}

// repMeta is the repartition partitions' markers for a checkpoint, by
// partition name.
func (s *streamSource) repMeta() map[string][]repUpstream {
	if s.rep == nil {
		return nil
	}
	out := map[string][]repUpstream{}
	for idx, ups := range s.rep.ups {
		out[s.names[idx]] = append([]repUpstream(nil), ups...)
	}
	return out
}

// purgeRepartitions deletes the records of the job's repartition
// partitions before the positions of checkpoint f, whose transaction
// committed them as the group's offsets: every restore of the group reads
// on from its committed offsets (the markers before them live in the
// checkpoints), so no one reads those records again, and without this
// the repartition topics (retention unlimited) would keep a copy of every
// event for ever. It runs at each local copy (every LocalInterval, and at
// the first and the final checkpoint), off the commit's path. A failure
// (an ACL without DELETE on the topic) costs disk, not correctness: it is
// logged, once until a deletion succeeds again.
func (j *job) purgeRepartitions(f *inflight) {
	ko := j.kafka
	if ko == nil || len(ko.reps) == 0 || ko.txn == nil {
		return
	}
	offsets := map[string]kafka.Offsets{}
	for _, p := range f.meta.Source.Positions {
		for _, rp := range ko.reps {
			if n, ok := partitionOf(rp.topic, p.File); ok && p.Offset > 0 {
				if offsets[rp.topic] == nil {
					offsets[rp.topic] = kafka.Offsets{}
				}
				offsets[rp.topic][n] = p.Offset
			}
		}
	}
	if len(offsets) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(j.sctx, purgeTimeout)
	defer cancel()
	err := ko.txn.DeleteBefore(ctx, offsets)
	if err != nil && !ko.purgeFailed {
		j.logf("warning: the repartition topics' consumed records are not deleted (they stay on the brokers' disks): %v", err)
	}
	ko.purgeFailed = err != nil
}

// purgeTimeout bounds a deletion of repartition records.
const purgeTimeout = 5 * time.Second
