package cep

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/event/jsonev"
	"github.com/cepheus-cep/cepheus/runtime"
	"github.com/cepheus-cep/cepheus/runtime/state"
)

// streamSource is the reading side of a job, run by the coordinator: the
// partition reader, the decoder, the partitions' watermarks, and the
// batches being filled for the subtasks.
type streamSource struct {
	j         *job
	reader    batchSource
	dec       *jsonev.Decoder
	repDec    *jsonev.Decoder // of repartition records: dec counts the input's alone (Mixed)
	pw        *runtime.PartitionWatermarks
	positions map[string]runtime.Position
	names     map[int]string // partition names by index
	added     map[int]bool   // partitions known to pw
	// closed are the partitions whose followed file is closed for
	// inactivity (their latest batch was Closed), left out of the
	// monitor's partition watermarks.
	closed map[int]bool
	// wasClosed are the files the restored checkpoint names closed for
	// inactivity, at their positions then: each stays closed in the
	// checkpoints (read to its end, nothing new since) while its position
	// stays, also while it is open again (a gzip file, or one modified
	// since, is opened at a restart and closed once quiet again), so that
	// it may still be deleted before a restart (resumeFiles).
	wasClosed map[string]runtime.Position
	// index is the partition index of each file by name (nil for a Kafka
	// input), nextIndex the next one given (sourceMeta.Indexes).
	index     map[string]int
	nextIndex int
	// tails are the last bytes read of the files closed for inactivity
	// (sourceMeta.ClosedTails).
	tails map[string]fileTail
	// marks are the marks of the files' positions (sourceMeta.Marks):
	// the end of the last record before each.
	marks map[string]runtime.Mark
	// sinceWM counts the events since the last watermark check (every
	// Engine's watermarkEvery events, as a backtest's generator);
	// forwarded is the last watermark sent to the subtasks.
	sinceWM   int
	forwarded event.Watermark
	pending   [][]elem // by subtask
	route     []routeTo
	// guard is the far-ahead check (InputPolicy.MaxAhead; nil without);
	// guardParts the partitions of the events it holds, in order.
	guard      *runtime.AheadGuard
	guardParts []int
	guardData  [][]byte // their records' values, with repartitioning
	// rep is the repartitioning of a Kafka job (nil without).
	rep *repSource
	// backlog is each Kafka partition's lag as its latest batch said
	// (records between its position and its end), for the monitor.
	backlog map[string]int64
	// unread is each followed file's bytes past the reader's position, as
	// its latest batch said (Batch.Unread), for the monitor.
	unread map[string]int64
	// wantBarrier says that a barrier is due but waits for the guard to
	// hold nothing: it goes out after the record that empties it.
	wantBarrier bool
	wantSince   time.Time
	// moved counts the changes of positions and of the files closed for
	// inactivity (job.quiet).
	moved int64
	// cursors, for a directory read without following, are the batches
	// of each partition being consumed, in name order: records come one at a
	// time from the partition whose watermark is lowest (nil otherwise).
	cursors []cursor

	firstDeadLine   int64
	firstDeadReason string
	firstDeadFile   string // the partition of firstDeadLine

	// keySlot is the slot of the field the input's records must be keyed
	// by (keyField), checked at each record; -1: no check.
	keySlot  int
	keyField string
	// The record-key check over blocks of keyBlock records: the records
	// checked and failed in the block, and its first failure's error.
	keyChecked, keyFailed int
	keyFirst              *RecordKeyError
	keyDead               int64 // records sent to the dead letters so (the first is logged)

	// enrich is the lookups (nil without). With lookups, a batch's
	// records are decoded and enriched together when it arrives
	// (prepare), then taken one by one as without, so the order of
	// routing, watermarks and barriers does not change; pre is onBatch's
	// prepared records (a cursor has its own).
	enrich *enrichStage
	// agg is the velocity aggregates (nil without): an event waits in it
	// until the watermark passes it, and is routed then, its aggregates
	// set, just before the watermark goes out. aggNone says it is an
	// aggregator of none instead: the rules declare no aggregates, and it
	// holds the events the restored checkpoint's aggregates held, until
	// the coordinator's start routes them (routeHeldOfNone).
	agg     runtime.Aggregation
	aggNone bool
	// paggs are, in a transactional Kafka job, the aggregators of its
	// partitions by source index instead (stream_aggregate.go; agg is
	// nil), paggIdx their indexes in order.
	paggs   map[int]*partAgg
	paggIdx []int
	pre     []prepared
	evs     []*event.Event
	reasons []string
}

// prepared is a record decoded and enriched ahead (prepare): its event,
// or the reason it is a dead letter.
type prepared struct {
	ev     *event.Event
	reason string
}

// batchSource is where the coordinator's batches come from: a
// runtime.PartitionReader over files, or a Kafka topic (kafkaReader).
type batchSource interface {
	Batches() <-chan runtime.Batch
	Err() error
	Close() error
}

// cursor is where the consumption of one partition stands (aligned
// reading): its channel, the batch being consumed and the next record.
type cursor struct {
	p      runtime.Partition
	ch     <-chan runtime.Batch
	b      runtime.Batch
	next   int        // the next record of b
	pre    []prepared // b's records prepared (with lookups)
	opened bool       // its Opened batch came
	done   bool       // its Done batch is consumed
}

// routeTo is a subtask and the key specifications of an event it owns.
type routeTo struct {
	sub  int
	mask uint64
}

// sourceMeta is the source's part of a checkpoint.
type sourceMeta struct {
	Positions []runtime.Position
	// Closed are the followed directory's files closed for inactivity,
	// by name: one deleted before the restart is let go (resumeFiles).
	Closed []string `json:",omitempty"`
	// Indexes are the partition indexes of the files the run knew (read
	// or not yet), by name, and NextIndex the index of the next file
	// found: a restart numbers the files as the run before did
	// (runtime.NumberPartitions), so that the events the checkpoint holds
	// keep Seqs no new event gets, and the events of a file it had not
	// read yet get the Seqs of an uninterrupted run.
	// A checkpoint of an earlier build has neither: files in name order.
	Indexes   map[string]int `json:",omitempty"`
	NextIndex int            `json:",omitempty"`
	// ClosedTails are the last bytes read of the files of Closed (where
	// known): a restart that finds others there has another file under
	// the name, created since, and reads it from its start as a new
	// partition (resumeFiles).
	ClosedTails map[string]fileTail `json:",omitempty"`
	// Marks are the marks of the files' Positions (runtime.Mark: the
	// end of the last record read before each), by name: a restart that
	// finds other bytes there has another file under the name, and
	// refuses it. A checkpoint of an earlier build has none.
	Marks           map[string]runtime.Mark `json:",omitempty"`
	Watermarks      []byte
	Forwarded       int64
	SinceWatermark  int
	FirstDeadLine   int64
	FirstDeadReason string
	FirstDeadFile   string `json:",omitempty"`
	Ahead           runtime.AheadState
	// Repartition is what the upstream markers of each repartition
	// partition said, by partition name (a Kafka job with rules not keyed
	// by the record key).
	Repartition map[string][]repUpstream `json:",omitempty"`
	// RepSent is what the markers of each input partition the job reads
	// said in the repartition topics as of the checkpoint, by partition
	// name: a restored job does not write them again.
	RepSent map[string]repUpstream `json:",omitempty"`
	// Aggregates is the velocity aggregates' state (runtime.Aggregator):
	// the events waiting for the watermark and each key's window;
	// AggregatesOf the aggregates it is of (aggregateSignature).
	Aggregates   []byte `json:",omitempty"`
	AggregatesOf string `json:",omitempty"`
	// PartAggregates is, in a transactional Kafka job, each partition's
	// aggregator state by partition name (AggregatesOf is then
	// partAggSignature); the changelog's marker leaves it out, the
	// partitions' own records hold it (aggStateKey).
	PartAggregates map[string][]byte `json:",omitempty"`
}

func (j *job) openSource(ctx context.Context) (*streamSource, error) {
	c := &j.cfg
	dc := j.e.decoder
	if c.Time == ProcessingTime {
		// The clock stamps each event: a record need not carry its
		// time, which the rules do not read as the event's time.
		dc.OptionalTime = true
	}
	dec, err := jsonev.NewDecoder(dc)
	if err != nil {
		return nil, fmt.Errorf("cep: %w", err)
	}
	repDec, err := jsonev.NewDecoder(dc)
	if err != nil {
		return nil, fmt.Errorf("cep: %w", err)
	}
	pwc := runtime.PartitionWatermarksConfig{OutOfOrderness: j.e.cfg.outOfOrderness}
	if c.live() {
		pwc.IdleTimeout, pwc.WallClockAdvance = c.IdleTimeout, c.WallClockAdvance
		// A Kafka partition is idle only once caught up to its end,
		// not after silence alone.
		pwc.IdleWhenCaughtUp = c.Kafka != nil
	}
	pw, err := runtime.NewPartitionWatermarks(pwc)
	if err != nil {
		return nil, fmt.Errorf("cep: %w", err)
	}
	if j.carried != nil && j.carried.activity != nil {
		pw.Carry(*j.carried.activity)
	}
	if !j.enrich.serves(j.e) {
		old := j.enrich
		if j.enrich, err = j.e.newEnrichStage(j.cfg.Logf); err != nil { // (not j.logf: the stage may outlive the job)
			return nil, err
		}
		j.retired = j.enrich.carry(old, j.retired)
		if sw := j.switched; sw != nil && sw.req != nil {
			// A deploy: the process warned at its start of the lookups
			// of its rules file only.
			for _, name := range j.e.UnboundLookups() {
				j.logf("warning: lookup %s of version %.12s is not bound (the process was started without -lookup %s=...): every event gets its defaults; to bind it, restart with this version's file as the rules file and -lookup %s=...", name, sw.res.Version, name, name)
			}
		}
	}
	s := &streamSource{
		enrich: j.enrich,
		j:      j, dec: dec, repDec: repDec, pw: pw,
		positions: map[string]runtime.Position{},
		names:     map[int]string{},
		added:     map[int]bool{},
		closed:    map[int]bool{},
		tails:     map[string]fileTail{},
		marks:     map[string]runtime.Mark{},
		forwarded: event.MinTime,
		pending:   make([][]elem, len(j.subs)),
		keySlot:   -1,
	}
	if b := j.e.cfg.input.MaxAhead; b > 0 && c.Time != ProcessingTime {
		// (In processing time the events' times move no watermark:
		// the check would refuse events for a time nobody reads.)
		s.guard = runtime.NewAheadGuard(b)
	}
	rc := runtime.ReaderConfig{Follow: c.Follow, PollInterval: c.PollInterval, CloseInactive: c.CloseInactive, Stdin: c.Stdin}
	var parts []runtime.Partition
	if c.Kafka == nil {
		parts, err = runtime.OpenPartitions(c.Events, c.Follow)
	}
	if err == nil && len(parts) > 1 && !c.Follow {
		// The files of a directory side by side, each record from the
		// one whose watermark is lowest: a choice that depends on the
		// data only, so a restored run makes it again.
		rc.Aligned, rc.BatchRecords, rc.Buffer = true, 256, 1
	}
	if s.agg, err = j.e.newAggregator(j.aggWorkers()); err != nil {
		return nil, err
	}
	if s.agg != nil && c.Time == ProcessingTime {
		return nil, errAggregatesProcessingTime
	}
	if s.agg != nil && c.Kafka != nil {
		if err := j.e.checkKafkaAggregates(); err != nil {
			return nil, fmt.Errorf("cep: stream: %w", err)
		}
		if j.kafka != nil {
			s.agg.Close()
			s.agg = nil // one per partition (addPartAgg)
		}
	}
	if m := j.meta; m != nil {
		if m.Source.Aggregates != nil {
			var err error
			switch {
			case s.agg != nil && m.Source.AggregatesOf == aggregateSignature(j.e):
				err = s.agg.Restore(m.Source.Aggregates)
			case s.agg == nil:
				// The aggregates are gone: the events they held go on
				// without them (an aggregator of none holds them for
				// settleHeld, then routeHeldOfNone routes them).
				if s.agg, err = runtime.NewAggregator(nil); err == nil {
					s.aggNone = true
					_, err = s.agg.RestoreMatching(m.Source.Aggregates)
				}
			default:
				// An aggregate declared alike keeps its windows; the
				// others start empty, and count the events held.
				var kept []bool
				if kept, err = s.agg.RestoreMatching(m.Source.Aggregates); err == nil {
					j.logf("the velocity aggregates changed since checkpoint %d: %s; the events held go on", j.restored, keptWindows(j.e.Aggregates(), kept))
				}
			}
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrRestore, err)
			}
		}
		if s.guard != nil {
			s.guard.Restore(m.Source.Ahead)
		}
		if err := pw.Restore(m.Source.Watermarks); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrRestore, err)
		}
		s.forwarded = event.Watermark(m.Source.Forwarded)
		if s.agg != nil && m.Source.Aggregates == nil {
			// The job before ran no aggregates: the windows start empty,
			// at the watermark it forwarded (settleHeld hands them the
			// events the rules' buffers hold).
			j.logf("velocity aggregates from checkpoint %d on: their windows start empty at its watermark, and count the events it holds", j.restored)
			if err := s.agg.Advance(s.forwarded, func(*event.Event) error { return nil }); err != nil {
				return nil, err
			}
		}
		s.sinceWM = m.Source.SinceWatermark
		s.firstDeadLine, s.firstDeadReason, s.firstDeadFile = m.Source.FirstDeadLine, m.Source.FirstDeadReason, m.Source.FirstDeadFile
		if rc.Resume, err = j.resumeFiles(m.Source, parts); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrRestore, err)
		}
		for _, p := range rc.Resume {
			s.positions[p.File] = p
			if mk, ok := m.Source.Marks[p.File]; ok {
				if rc.Marks == nil {
					rc.Marks = map[string]runtime.Mark{}
				}
				rc.Marks[p.File] = mk
				s.marks[p.File] = mk
			}
			if slices.Contains(m.Source.Closed, p.File) {
				if s.wasClosed == nil {
					s.wasClosed = map[string]runtime.Position{}
				}
				s.wasClosed[p.File] = p
				if t, ok := m.Source.ClosedTails[p.File]; ok {
					s.tails[p.File] = t
				}
			}
		}
	}
	if c.Kafka == nil && parts != nil {
		// Numbered as the run of the checkpoint numbered them, but for
		// the files it let go (a file created under such a name since is
		// a new one).
		var indexes map[string]int
		next := 0
		if m := j.meta; m != nil {
			next = m.Source.NextIndex
			letGo := map[string]bool{}
			for _, pos := range m.Source.Positions {
				if _, ok := s.positions[pos.File]; !ok {
					letGo[pos.File] = true
				}
			}
			for name, i := range m.Source.Indexes {
				// A file not read yet at the checkpoint keeps its index
				// too: the resumed run numbers its events as the
				// uninterrupted one does.
				if !letGo[name] {
					if indexes == nil {
						indexes = map[string]int{}
					}
					indexes[name] = i
				}
				next = max(next, i+1)
			}
		}
		s.nextIndex = runtime.NumberPartitions(parts, indexes, next)
		s.index = make(map[string]int, len(parts))
		for _, p := range parts {
			s.index[p.Name] = p.Index
		}
		rc.Indexes, rc.NextIndex = maps.Clone(s.index), s.nextIndex
	}
	if c.Kafka != nil {
		resume := rc.Resume
		if ko := j.kafka; ko != nil && len(ko.reps) > 0 {
			// The repartition partitions' positions are their readers'.
			resume = nil
			for _, pos := range rc.Resume {
				if _, ok := partitionOf(c.Kafka.Topic, pos.File); ok {
					resume = append(resume, pos)
				}
			}
		}
		if ko := j.kafka; ko != nil && ko.local != 0 && !c.Kafka.TrustRecordKeys {
			// The rules beside the partitions need the records keyed by
			// their key field.
			s.keyField = j.e.recordKeyField(c.Kafka)
			if slot, ok := j.e.schema.Slot(s.keyField); ok {
				s.keySlot = slot
			}
		}
		kr, err := newKafkaReader(ctx, c.Kafka, resume, s.keySlot >= 0, j.logf)
		if err != nil {
			if j.meta != nil {
				return nil, fmt.Errorf("%w: %w", ErrRestore, err)
			}
			return nil, err
		}
		s.reader = kr
		parts := kr.partitions()
		if kr.aligned {
			for i, p := range parts {
				s.cursors = append(s.cursors, cursor{p: p, ch: kr.chans[i]})
			}
		}
		// From here on, an error returns s too: the job closes its reader.
		if err := s.addPartitions(parts); err != nil {
			return s, err
		}
		if ko := j.kafka; ko != nil && ko.local != 0 {
			// The aggregates keyed by the record key, per input partition.
			field := []string{j.e.recordKeyField(c.Kafka)}
			for _, p := range parts {
				if err := s.addPartAgg(p.Index, p.Name, field, ko.local); err != nil {
					return s, err
				}
			}
		}
		if ko := j.kafka; ko != nil && len(ko.reps) > 0 {
			var restored map[string][]repUpstream
			if j.meta != nil {
				restored = j.meta.Source.Repartition
			}
			if err := s.openRepartitions(ctx, restored); err != nil {
				return s, err
			}
		}
		return s, nil
	}
	r, err := runtime.NewPartitionReader(ctx, c.Events, rc)
	if err != nil {
		if j.meta != nil {
			return nil, fmt.Errorf("%w: %w", ErrRestore, err)
		}
		return nil, err
	}
	s.reader = r
	if h := j.cfg.hooks.reader; h != nil {
		s.reader = h(r)
	}
	if rc.Aligned {
		parts, chans := r.Aligned()
		for i, p := range parts {
			s.cursors = append(s.cursors, cursor{p: p, ch: chans[i]})
		}
		return s, s.addPartitions(parts)
	}
	// The files of a followed directory found at the start are known
	// before any batch too: each file's goroutine sends its Opened batch
	// when it is scheduled, and the batches of one scheduled first moved
	// the watermark past the events of another, all of them then late.
	return s, s.addPartitions(r.Listed())
}

// addPartitions registers a known set of partitions (a directory read
// side by side or followed, a topic's partitions) before any batch, so that the
// combined watermark waits for every one of them: else a partition that
// opens at its end (resumed there) would finish, and move the watermark
// to its own, before the others are known.
func (s *streamSource) addPartitions(parts []runtime.Partition) error {
	for _, p := range parts {
		if err := s.pw.Add(p, s.j.cfg.live()); err != nil {
			return err
		}
		s.added[p.Index] = true
		s.names[p.Index] = p.Name
		if s.index != nil {
			s.index[p.Name] = p.Index
			s.nextIndex = max(s.nextIndex, p.Index+1)
		}
	}
	return nil
}

// pick returns the partition (aligned reading) whose record comes next:
// the one, among those not done, whose watermark is lowest (a partition
// not opened yet counts as the lowest), the first by name on a tie;
// need says that its batch is consumed and the next one must come first.
// ok is false once every partition is done.
func (s *streamSource) pick() (p int, need, ok bool) {
	p = -1
	var low event.Watermark
	for i := range s.cursors {
		c := &s.cursors[i]
		if c.done {
			continue
		}
		wm := event.MinTime
		if c.opened {
			wm = s.pw.Of(c.p.Index)
		}
		if p < 0 || wm < low {
			p, low = i, wm
		}
	}
	if p < 0 {
		return 0, false, false
	}
	c := &s.cursors[p]
	return p, !c.opened || c.next >= len(c.b.Records), true
}

// noteBacklog keeps a Kafka batch's lag, or a followed file's bytes not
// read yet, for the monitor.
func (s *streamSource) noteBacklog(b runtime.Batch) {
	switch {
	case s.j.cfg.Monitor == nil:
	case s.j.cfg.Kafka != nil:
		if s.backlog == nil {
			s.backlog = map[string]int64{}
		}
		s.backlog[b.Partition.Name] = b.Backlog
	case s.j.cfg.Follow && b.Gone:
		delete(s.unread, b.Partition.Name)
	case s.j.cfg.Follow:
		if s.unread == nil {
			s.unread = map[string]int64{}
		}
		s.unread[b.Partition.Name] = b.Unread
	}
}

// setBatch takes the next batch b of partition p (aligned reading).
func (s *streamSource) setBatch(p int, b runtime.Batch) error {
	s.noteBacklog(b)
	c := &s.cursors[p]
	if b.Opened {
		c.opened = true
	}
	c.b, c.next = b, 0
	if s.enrich != nil {
		var err error
		if c.pre, err = s.prepare(&b, c.pre); err != nil {
			return err
		}
	}
	if len(b.Records) == 0 {
		s.setPosition(b.Partition.Name, b.End)
		return s.endOfBatch(p)
	}
	return nil
}

// endOfBatch is called once the records of partition p's batch are all
// consumed: a Done batch ends the partition.
func (s *streamSource) endOfBatch(p int) error {
	c := &s.cursors[p]
	if !c.b.Done {
		return nil
	}
	c.done = true
	s.pw.Finish(c.p.Index)
	return s.forward(s.pw.Current())
}

// step consumes up to n records of the partitions (aligned reading), each
// from the partition pick chooses, until one needs its next batch.
func (s *streamSource) step(n int) error {
	for range n {
		p, need, ok := s.pick()
		if !ok || need {
			break
		}
		c := &s.cursors[p]
		i := c.next
		c.next++
		if err := s.record(c.b.Partition, &c.b.Records[i], preparedAt(c.pre, i)); err != nil {
			return err
		}
		s.setPosition(c.p.Name, positionAfter(&c.b, i))
		if c.next == len(c.b.Records) {
			if err := s.endOfBatch(p); err != nil {
				return err
			}
		}
		if s.barrierDue() {
			if err := s.barrier(); err != nil {
				return err
			}
		}
	}
	return s.flush()
}

// meta is the source's state at a barrier: every batch received so far is
// routed.
func (s *streamSource) meta() (sourceMeta, error) {
	wm, err := s.pw.AppendBinary(nil)
	if err != nil {
		return sourceMeta{}, err
	}
	m := sourceMeta{
		Watermarks: wm, Forwarded: int64(s.forwarded), SinceWatermark: s.sinceWM,
		FirstDeadLine: s.firstDeadLine, FirstDeadReason: s.firstDeadReason, FirstDeadFile: s.firstDeadFile, Repartition: s.repMeta(),
	}
	if s.guard != nil {
		m.Ahead = s.guard.State()
	}
	if s.agg != nil {
		m.Aggregates, m.AggregatesOf = s.agg.AppendBinary(nil), aggregateSignature(s.j.e)
	}
	if m.PartAggregates = s.partAggMeta(); m.PartAggregates != nil {
		m.AggregatesOf = partAggSignature(s.j.e, s.j.cfg.Kafka)
	}
	for _, p := range s.positions {
		m.Positions = append(m.Positions, p)
		if mk, ok := s.marks[p.File]; ok {
			if m.Marks == nil {
				m.Marks = map[string]runtime.Mark{}
			}
			m.Marks[p.File] = mk
		}
	}
	if s.index != nil {
		m.Indexes, m.NextIndex = maps.Clone(s.index), s.nextIndex
	}
	for p := range s.closed {
		m.Closed = append(m.Closed, s.names[p])
	}
	for name, pos := range s.wasClosed {
		if s.positions[name] == pos && !slices.Contains(m.Closed, name) {
			m.Closed = append(m.Closed, name)
		}
	}
	slices.Sort(m.Closed)
	for _, name := range m.Closed {
		if t, ok := s.tails[name]; ok {
			if m.ClosedTails == nil {
				m.ClosedTails = map[string]fileTail{}
			}
			m.ClosedTails[name] = t
		}
	}
	return m, nil
}

// resumeFiles returns the positions of m to resume the files of parts at:
// all of them, but for those of followed files closed for inactivity at
// the checkpoint and deleted since (they are not among parts). Such a file
// had been read to its end and had nothing new for CloseInactive, and a
// live run lets it go when it is deleted ([runtime.Batch].Gone); logf
// says which are let go. Another followed file of a directory deleted is
// an error that says why it is not let go; any other position of a
// missing file stays, for the reader to refuse.
func (j *job) resumeFiles(m sourceMeta, parts []runtime.Partition) ([]runtime.Position, error) {
	c := &j.cfg
	followed := false // a followed directory
	if c.Follow && c.Kafka == nil && c.Events != "-" {
		fi, err := os.Stat(c.Events)
		followed = err == nil && fi.IsDir()
	}
	if len(m.Closed) == 0 && !followed {
		return m.Positions, nil
	}
	var kept []runtime.Position
	for _, pos := range m.Positions {
		i := slices.IndexFunc(parts, func(p runtime.Partition) bool { return p.Name == pos.File })
		there := i >= 0
		switch {
		case !there && slices.Contains(m.Closed, pos.File):
			j.logf("%s, closed for inactivity at the checkpoint (read to line %d), was deleted since: its partition ends", pos.File, pos.Line)
			continue
		case there && slices.Contains(m.Closed, pos.File) && m.ClosedTails[pos.File].replacedAt(parts[i].Path):
			j.logf("%s, closed for inactivity at the checkpoint (read to line %d), is another file since (deleted and created again, or truncated): its partition ends, and the file is read from its start as a new one", pos.File, pos.Line)
			continue
		case !there && followed:
			return nil, fmt.Errorf("%w: %s, read to line %d at checkpoint %d, is no longer in %s, and was not closed for inactivity then: only a file closed for quiet at the checkpoint (read to its end, nothing new for -close-inactive) is let go when deleted; put it back to resume (it is read on from that line)",
				runtime.ErrBadPosition, pos.File, pos.Line, j.restored, c.Events)
		}
		kept = append(kept, pos)
	}
	return kept, nil
}

// fileTail is the last bytes read of a file closed for inactivity, and
// the byte of the file they end at ([runtime.Batch].Tail, TailAt).
type fileTail struct {
	At    int64
	Bytes []byte
}

// replacedAt reports whether the file at path does not hold t's bytes
// (a file without t: false): another file took the name. A file that
// does not read is left for the reader to report.
func (t fileTail) replacedAt(path string) bool {
	same, err := runtime.SameTail(path, t.Bytes, t.At)
	return err == nil && !same
}

// maxUnended bounds the bytes unended reads after a position.
const maxUnended = 1 << 20

// unended returns the plain files of events (a file or a directory) whose
// bytes after their position hold no line end (StreamResult.Unended), by
// name. A gzip file's position counts the bytes decompressed: left out.
func (s *streamSource) unended(events string) []UnendedFile {
	if s.j.cfg.Kafka != nil || events == "-" {
		return nil
	}
	dir := ""
	if fi, err := os.Stat(events); err == nil && fi.IsDir() {
		dir = events
	}
	var out []UnendedFile
	for _, name := range slices.Sorted(maps.Keys(s.positions)) {
		path := events
		if dir != "" {
			path = filepath.Join(dir, name)
		} else if name != filepath.Base(events) {
			continue
		}
		if n := unendedBytes(path, s.positions[name].Offset); n > 0 {
			out = append(out, UnendedFile{File: name, Bytes: n})
		}
	}
	return out
}

// unendedBytes returns how many bytes path holds after offset when none
// of them is a line end (and there are at most maxUnended), else 0.
func unendedBytes(path string, offset int64) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() <= offset || fi.Size()-offset > maxUnended {
		return 0
	}
	var magic [2]byte
	if _, err := f.ReadAt(magic[:], 0); err == nil && magic == [2]byte{0x1f, 0x8b} {
		return 0 // gzip
	}
	b := make([]byte, fi.Size()-offset)
	if _, err := f.ReadAt(b, offset); err != nil || bytes.IndexByte(b, '\n') >= 0 {
		return 0
	}
	return int64(len(b))
}

// setMark sets the mark of partition p's position, just after rec: for a
// file's partition or standard input's (a resume refuses another stream
// piped in), not a topic's.
func (s *streamSource) setMark(p runtime.Partition, rec *runtime.Record) {
	if s.j.cfg.Kafka == nil {
		s.marks[p.Name] = runtime.MarkOf(rec)
	}
}

// setPosition sets partition name's position, counting a change (moved).
func (s *streamSource) setPosition(name string, p runtime.Position) {
	if s.positions[name] != p {
		s.positions[name] = p
		s.moved++
	}
}

// gone ends partition p, whose file was deleted while closed for
// inactivity ([runtime.Batch].Gone): it no longer holds the watermark back
// and leaves the checkpoints (a file that takes its name later is a new
// partition, read from its start), the monitor's partitions and its
// series.
func (s *streamSource) gone(p runtime.Partition) error {
	delete(s.positions, p.Name)
	delete(s.wasClosed, p.Name)
	delete(s.index, p.Name)
	delete(s.tails, p.Name)
	delete(s.marks, p.Name)
	delete(s.names, p.Index)
	delete(s.added, p.Index)
	s.moved++
	s.j.logf("%s, closed for inactivity, was deleted: its partition ends", p.Name)
	s.pw.Remove(p.Index)
	if err := s.forward(s.pw.Current()); err != nil {
		return err
	}
	return s.flush()
}

// activity is a digest of what the source's part of a checkpoint holds
// that input and time change: the changes of positions, the watermark
// forwarded, the partitions' watermarks (their largest times), the rules
// version the process's rules source holds, and (in processing time) the
// subtasks' ticks whose timers wrote outputs: such a timer fires on the
// wall clock, with no record and no watermark, and its outputs wait for
// the next checkpoint's commit. A partition's idleness acts through the
// watermark forwarded (and, repartitioned, the markers: [job.quiet] looks
// at those). Equal at two moments, nothing was read between them and no
// timer wrote an output: a checkpoint would hold nothing the previous one
// does not.
func (s *streamSource) activity() ([]byte, error) {
	b := binary.AppendVarint(nil, s.moved)
	b = binary.AppendVarint(b, int64(s.forwarded))
	for _, st := range s.j.subs {
		// In processing time, the ticks whose timers wrote outputs.
		b = binary.AppendVarint(b, st.timed.Load())
	}
	if t := s.j.taken; t != nil {
		b = append(b, t.Hash...)
	}
	return s.pw.AppendBinary(b)
}

// onBatch decodes, routes and (at the watermark cadence) forwards
// watermarks for the records of b.
func (s *streamSource) onBatch(b runtime.Batch) error {
	j := s.j
	p := b.Partition
	s.noteBacklog(b)
	if b.Opened && !s.added[p.Index] {
		if err := s.pw.Add(p, j.cfg.live()); err != nil {
			return err
		}
		s.added[p.Index] = true
		s.names[p.Index] = p.Name
		if s.index != nil {
			s.index[p.Name] = p.Index
			s.nextIndex = max(s.nextIndex, p.Index+1)
		}
	}
	if j.cfg.Kafka != nil {
		s.pw.SetCaughtUp(p.Index, b.CaughtUp)
	}
	if b.Closed != s.closed[p.Index] {
		// A file closed (or open again) changes what a checkpoint holds
		// (sourceMeta.Closed), though no position moved: the next
		// checkpoint is not skipped as quiet, so that a file closed and
		// then deleted while no run goes on (a crash) is let go at the
		// restart (resumeFiles), not refused.
		s.moved++
	}
	if b.Closed {
		s.closed[p.Index] = true
		if b.Tail != nil {
			s.tails[p.Name] = fileTail{At: b.TailAt, Bytes: b.Tail}
		}
	} else {
		delete(s.closed, p.Index)
	}
	if b.Gone {
		return s.gone(p)
	}
	if s.enrich != nil {
		var err error
		if s.pre, err = s.prepare(&b, s.pre); err != nil {
			return err
		}
	}
	for i := range b.Records {
		if err := s.record(p, &b.Records[i], preparedAt(s.pre, i)); err != nil {
			return err
		}
		if s.barrierDue() {
			// A barrier between two records of the batch: the
			// partition's position is just after this one.
			s.setPosition(p.Name, positionAfter(&b, i))
			s.setMark(p, &b.Records[i])
			if err := s.barrier(); err != nil {
				return err
			}
		}
	}
	s.setPosition(p.Name, b.End)
	if n := len(b.Records); n > 0 {
		s.setMark(p, &b.Records[n-1])
	}
	if b.Unmodified > 0 && (s.guard == nil || s.guard.Holding() == 0) {
		// Caught up to the end of a file written to long ago (a backlog):
		// idle at the next tick when that was IdleTimeout or more. Not
		// while the far-ahead check holds events back: its partitions'
		// events must come before the watermark passes them.
		s.pw.Unmodified(p.Index, b.Unmodified)
	}
	if b.Closed {
		// Closed for inactivity: quiet for CloseInactive at least, which
		// makes it idle at the next tick when that is IdleTimeout or more
		// (a file that starts closed after a restart no longer holds the
		// watermark back for a whole IdleTimeout).
		s.pw.Quiet(p.Index, j.cfg.CloseInactive)
	}
	if b.Done {
		s.pw.Finish(p.Index)
		if err := s.forward(s.pw.Current()); err != nil {
			return err
		}
	}
	return s.flush()
}

// record reads one record of partition p: a dead letter, or an event for
// the far-ahead check or straight for the subtasks. pre is the record
// prepared ahead (with lookups), else nil: it is decoded here.
func (s *streamSource) record(p runtime.Partition, rec *runtime.Record, pre *prepared) error {
	j := s.j
	j.stats.Records++
	if rec.Reason != "" {
		return s.deadLetter(p, rec, rec.Reason)
	}
	var ev *event.Event
	if pre != nil {
		if pre.reason != "" {
			return s.deadLetter(p, rec, pre.reason)
		}
		ev = pre.ev
	} else {
		var err error
		if ev, err = s.dec.Decode(rec.Data); err != nil {
			return s.deadLetter(p, rec, err.Error())
		}
	}
	ev.Seq = event.SeqOf(p.Index, rec.Line)
	if s.keySlot >= 0 {
		if s.keyChecked++; s.keyChecked > keyBlock {
			s.keyChecked, s.keyFailed, s.keyFirst = 1, 0, nil
		}
		if !recordKeyIs(rec.Key, ev.Field(s.keySlot)) {
			return s.strayKey(p, rec, ev)
		}
	}
	if s.guard == nil {
		return s.accept(p.Index, ev, rec.Data)
	}
	s.guardParts = append(s.guardParts, p.Index)
	if s.rep != nil {
		s.guardData = append(s.guardData, rec.Data)
	}
	return s.guard.Offer(ev, *rec, s)
}

// prepare decodes the records of b and runs the lookups over their
// events, in batches of the lookups' size, reusing out: entry i is
// record i's event, or the reason it is a dead letter (it does not
// decode, or a lookup failed closed). A record with a reader's reason
// is left to record.
func (s *streamSource) prepare(b *runtime.Batch, out []prepared) ([]prepared, error) {
	clear(out)
	out = append(out[:0], make([]prepared, len(b.Records))...)
	batch := s.j.e.cfg.lookupOpts.Batch
	if batch <= 0 {
		batch = defaultLookupBatch
	}
	ctx := s.j.sctx
	if ctx == nil {
		ctx = context.Background()
	}
	s.evs = s.evs[:0]
	var idx []int
	flush := func() error {
		if len(s.evs) == 0 {
			return nil
		}
		s.reasons = append(s.reasons[:0], make([]string, len(s.evs))...)
		if err := s.enrich.enrich(ctx, s.evs, s.reasons); err != nil {
			return err
		}
		for k, r := range s.reasons {
			if r != "" {
				out[idx[k]] = prepared{reason: r}
			}
		}
		s.evs, idx = s.evs[:0], idx[:0]
		return nil
	}
	for i := range b.Records {
		rec := &b.Records[i]
		if rec.Reason != "" {
			continue
		}
		ev, err := s.dec.Decode(rec.Data)
		if err != nil {
			out[i].reason = err.Error()
			continue
		}
		out[i].ev = ev
		s.evs, idx = append(s.evs, ev), append(idx, i)
		if len(s.evs) == batch {
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	clear(s.evs[:cap(s.evs)])
	return out, nil
}

// preparedAt returns record i's prepared entry, or nil without lookups.
func preparedAt(pre []prepared, i int) *prepared {
	if pre == nil {
		return nil
	}
	return &pre[i]
}

// barrierDue reports whether a barrier goes out after the record just
// read: one that waited for the far-ahead check to hold nothing, or one
// due by StreamConfig.CheckpointRecords (which also waits for that).
func (s *streamSource) barrierDue() bool {
	n := s.j.cfg.CheckpointRecords
	due := s.wantBarrier || n > 0 && s.j.stats.Records%n == 0
	return due && (s.guard == nil || s.guard.Holding() == 0)
}

// barrier sends the barrier barrierDue called for, after the checkpoint
// in flight, if any, is done.
func (s *streamSource) barrier() error {
	s.wantBarrier = false
	if err := s.j.drain(); err != nil {
		return err
	}
	return s.j.barrier(false)
}

// positionAfter is the position of b's partition just after its record i:
// just before the next record, or the batch's end.
func positionAfter(b *runtime.Batch, i int) runtime.Position {
	if i+1 < len(b.Records) {
		next := &b.Records[i+1]
		return runtime.Position{File: b.Partition.Name, Offset: next.Offset, Line: next.Line - 1}
	}
	return b.End
}

// accept hands a decoded event of partition p on: routed to the
// subtasks, then the watermark at its cadence.
func (s *streamSource) accept(p int, ev *event.Event, raw []byte) error {
	j := s.j
	j.stats.Decoded++
	j.stats.MaxEventTime = max(j.stats.MaxEventTime, ev.Time)
	mask := allSpecs
	if s.rep != nil {
		mask = s.rep.local
		s.repWrite(ev, raw)
	}
	if err := s.hold(p, ev, mask); err != nil {
		return err
	}
	s.pw.OnEvent(p, ev.Time)
	if s.sinceWM++; s.sinceWM >= j.e.cfg.watermarkEvery {
		s.sinceWM = 0
		return s.forward(s.pw.Current())
	}
	return nil
}

// Pass implements runtime.AheadSink: an event the guard lets through.
func (s *streamSource) Pass(ev *event.Event, _ int64) error {
	p := s.guardParts[0]
	s.guardParts = s.guardParts[1:]
	var raw []byte
	if s.rep != nil {
		raw, s.guardData = s.guardData[0], s.guardData[1:]
	}
	return s.accept(p, ev, raw)
}

// Reject implements runtime.AheadSink: an event too far ahead.
func (s *streamSource) Reject(rec runtime.Record, reason string) error {
	p := s.guardParts[0]
	s.guardParts = s.guardParts[1:]
	if s.rep != nil {
		s.guardData = s.guardData[1:]
	}
	s.j.stats.Ahead++
	return s.deadLetter(runtime.Partition{Index: p, Name: s.names[p]}, &rec, reason)
}

func (s *streamSource) deadLetter(p runtime.Partition, rec *runtime.Record, reason string) error {
	j := s.j
	j.stats.Dead++
	if s.firstDeadLine == 0 {
		s.firstDeadLine, s.firstDeadReason, s.firstDeadFile = rec.Line, reason, p.Name
	}
	if f := j.cfg.OnDeadLetter; f != nil {
		d := DeadLetter{File: p.Name, Line: rec.Line, Offset: rec.Offset, Reason: reason, Data: rec.Data}
		if err := j.cfg.gate.call("OnDeadLetter", func() error { return f(d) }); err != nil {
			return err
		}
	}
	if j.dead == nil {
		return nil
	}
	j.buf = jsonev.AppendDeadLetter(j.buf[:0], jsonev.DeadLetter{
		Ruleset: j.e.cfg.ruleset.Name, File: p.Name, Line: rec.Line, Offset: rec.Offset, Reason: reason, Data: rec.Data,
	})
	return j.dead.Write(j.buf)
}

// hold hands ev, an event of source index p for the specifications of
// mask, to the aggregator its partition's events go through, or routes
// it when there is none or it is late. Its aggregate slots are set
// before it is routed, never after: an event routed to several subtasks
// is only read there.
func (s *streamSource) hold(p int, ev *event.Event, mask uint64) error {
	if pa := s.paggs[p]; pa != nil {
		if pa.a.Add(ev) {
			return nil
		}
	} else if s.agg != nil && s.agg.Add(ev) {
		return nil
	}
	return s.routeEvent(ev, mask)
}

// routeEvent queues ev for every subtask that owns one of its keys (an
// event lacking a key field goes to subtask 0, which counts it).
func (s *streamSource) routeEvent(ev *event.Event, mask uint64) error {
	j := s.j
	s.route = s.route[:0]
	for si := range j.e.specs {
		if mask&(1<<si) == 0 {
			continue
		}
		spec := &j.e.specs[si]
		sub := 0
		if !hasNullKey(ev, spec.slots) {
			sub = j.owner[state.GroupOf(spec.key(ev), keyGroups)]
		}
		found := false
		for k := range s.route {
			if s.route[k].sub == sub {
				s.route[k].mask |= 1 << si
				found = true
			}
		}
		if !found {
			s.route = append(s.route, routeTo{sub: sub, mask: 1 << si})
		}
	}
	for _, r := range s.route {
		if s.pending[r.sub] == nil {
			select {
			case s.pending[r.sub] = <-j.subs[r.sub].free:
			default:
				s.pending[r.sub] = make([]elem, 0, batchElems)
			}
		}
		s.pending[r.sub] = append(s.pending[r.sub], elem{ev: ev, mask: r.mask})
		if j.routed++; !j.eventSeen {
			j.eventSeen = true
			j.stats.FirstEvent = time.Since(j.start)
			switch since := time.Since(j.begun); {
			case j.runRestored() == 0:
			case j.begun.Sub(j.start) > time.Second:
				// A later job of the run (a Kafka group's after a
				// rebalance): from the run's start it said minutes.
				j.logf("first event %v after the job's start (restore included)", since.Round(time.Millisecond))
			default:
				j.logf("first event %v after the start (restore included)", j.stats.FirstEvent.Round(time.Millisecond))
			}
		}
		if len(s.pending[r.sub]) == batchElems {
			if err := s.flushSub(r.sub); err != nil {
				return err
			}
		}
	}
	return nil
}

// forward sends wm, the input's watermark, to every subtask when it is
// ahead of the last one sent: for every rule, or with repartitioning for
// those keyed by the record key (the others go by their repartition
// partitions' watermark, forwardRep), and at the end (MaxTime) for all.
func (s *streamSource) forward(wm event.Watermark) error {
	if s.j.holding && wm > s.j.holdAt && wm < event.MaxTime {
		wm = s.j.holdAt // a group's switch point (job.takeRules)
	}
	if wm <= s.forwarded {
		return nil
	}
	if s.agg != nil {
		// The events the watermark passes go first, their aggregates set.
		if err := s.agg.Advance(wm, func(ev *event.Event) error { return s.routeEvent(ev, allSpecs) }); err != nil {
			return err
		}
	}
	if s.paggs != nil {
		to := allSpecs
		if s.rep != nil && wm < event.MaxTime {
			to = s.rep.local
		}
		if err := s.advancePartAggs(wm, to); err != nil {
			return err
		}
	}
	s.forwarded = wm
	s.j.stats.Watermark = wm
	var mask uint64
	if s.rep != nil && wm < event.MaxTime {
		mask = s.rep.local
		if mask == 0 {
			return nil
		}
	}
	return s.broadcast(msg{kind: msgWatermark, wm: wm, mask: mask})
}

// broadcast sends m to every subtask after what is queued for it.
func (s *streamSource) broadcast(m msg) error {
	if err := s.flush(); err != nil {
		return err
	}
	for i := range s.j.subs {
		if err := s.j.send(i, m); err != nil {
			return err
		}
	}
	return nil
}

func (s *streamSource) flush() error {
	for i := range s.pending {
		if err := s.flushSub(i); err != nil {
			return err
		}
	}
	return nil
}

func (s *streamSource) flushSub(i int) error {
	if len(s.pending[i]) == 0 {
		return nil
	}
	m := msg{kind: msgElements, elems: s.pending[i]}
	s.pending[i] = nil
	return s.j.send(i, m)
}

// recordKeyIs reports whether key is the record key of an event whose
// record-key field holds v, as KafkaProduce keys records: a string's
// characters, a number's or a boolean's JSON text (numbers compared by
// value: 12, 12.0 and 1.2e1 key 12 alike). An empty key and none are
// taken alike (producers differ there). Any key will do for null: the
// rules keyed by the field skip such an event.
func recordKeyIs(key []byte, v event.Value) bool {
	switch v.Kind() {
	case event.KindNull:
		return true
	case event.KindString:
		s, _ := v.AsString()
		return string(key) == s
	case event.KindBool:
		b, _ := v.AsBool()
		return string(key) == strconv.FormatBool(b)
	case event.KindInt:
		n, _ := v.AsInt()
		if m, err := strconv.ParseInt(string(key), 10, 64); err == nil {
			return m == n
		}
	}
	f, _ := v.AsFloat()
	g, err := strconv.ParseFloat(string(key), 64)
	return err == nil && g == f
}

// RecordKeyError stops a transactional Kafka job at an input record whose
// key is not the value of the field its rules beside the partitions are
// keyed by (KafkaInput.RecordKey, docs/kafka.md "Record keys"), when such
// records are not stray (keyStop of keyBlock in a row); a stray one is a
// dead letter.
type RecordKeyError struct {
	Partition string // TOPIC-P
	Offset    int64
	Key       []byte // nil: the record has no key
	Field     string
	Value     event.Value
	// KeyedBy is a field of the event whose value is the key ("" when
	// none is).
	KeyedBy string
}

func (e *RecordKeyError) Error() string {
	msg := fmt.Sprintf("cep: stream: %s offset %d: %s, so the input must be keyed by it", e.Partition, e.Offset, e.reason())
	if e.KeyedBy != "" {
		msg += "; the records look keyed by " + e.KeyedBy
	}
	return msg
}

// reason is what is wrong with the record, as its dead letter says.
func (e *RecordKeyError) reason() string {
	key := "no key"
	if e.Key != nil {
		key = "key " + strconv.Quote(string(e.Key))
	}
	return fmt.Sprintf("the record has %s, but its %s is %s: the rules keyed by %s run beside the input's partitions", key, e.Field, e.Value, e.Field)
}

// keyBlock and keyStop: a record whose key fails the check goes to the
// dead letters, unless keyStop of keyBlock records in a row (a block)
// failed: then the topic is keyed otherwise (or its producer went
// wrong), and the job stops at the block's first failure
// (RecordKeyError).
const keyBlock, keyStop = 100, 10

// strayKey sends rec, whose key is not its event's key field, to the dead
// letters, or stops the job when such records are not stray (keyStop).
func (s *streamSource) strayKey(p runtime.Partition, rec *runtime.Record, ev *event.Event) error {
	ke := s.keyError(p, rec, ev)
	if s.keyFailed++; s.keyFailed == 1 {
		s.keyFirst = ke
	}
	if s.keyFailed >= keyStop {
		return s.keyFirst
	}
	if s.keyDead++; s.keyDead == 1 {
		s.j.logf("warning: %s offset %d: %s: sent to the dead letters (the job stops when %d of %d records in a row fail so: docs/kafka.md, \"Record keys\")", p.Name, rec.Offset, ke.reason(), keyStop, keyBlock)
	}
	return s.deadLetter(p, rec, ke.reason())
}

// keyError is the RecordKeyError of rec, whose event is ev.
func (s *streamSource) keyError(p runtime.Partition, rec *runtime.Record, ev *event.Event) *RecordKeyError {
	e := &RecordKeyError{Partition: p.Name, Offset: rec.Offset, Key: bytes.Clone(rec.Key), Field: s.keyField, Value: ev.Field(s.keySlot)}
	if rec.Key != nil {
		schema := s.j.e.schema
		for i := range schema.Len() {
			if v := ev.Field(i); i != s.keySlot && !v.IsNull() && recordKeyIs(rec.Key, v) {
				e.KeyedBy = schema.Field(i).Name
				break
			}
		}
	}
	return e
}
