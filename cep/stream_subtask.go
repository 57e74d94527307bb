package cep

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/internal/failpoint"
	"github.com/cepheus-cep/cepheus/runtime"
	"github.com/cepheus-cep/cepheus/runtime/kafka"
	"github.com/cepheus-cep/cepheus/runtime/state"
)

// msgKind says what a message to a subtask carries.
type msgKind uint8

const (
	msgElements  msgKind = iota // elems, in arrival order
	msgWatermark                // wm
	msgBarrier                  // checkpoint id into w
	msgCommit                   // checkpoint id is complete: commit the sinks
	msgEnd                      // no more messages
)

// msg is what travels over a subtask's channel: elements, watermarks,
// barriers and commits in band, in the order the coordinator sent them.
type msg struct {
	kind  msgKind
	elems []elem
	wm    event.Watermark
	mask  uint64 // of a watermark: the key specifications it is for (0: all)
	id    int64
	w     *state.CheckpointWriter
}

// elem is one event for a subtask, with the key specifications (bits of
// Engine.specs) whose keys the subtask owns.
type elem struct {
	ev   *event.Event
	mask uint64
}

// ack is a subtask's answer to a barrier: its sinks' pending states, once
// its state is in the checkpoint writer.
type ack struct {
	sub          int
	id           int64
	alerts, late runtime.PendingState
	shadow       runtime.PendingState
	stall        time.Duration  // the subtask's time on the barrier
	keys, buf    int64          // keys holding state, events buffered
	partials     int64          // partial matches held
	stateBytes   int64          // the store's size (in Kafka mode a memory store's as of the checkpoint before)
	written      int64          // bytes of state records this checkpoint wrote
	nAlerts      int64          // the host's alerts at the barrier
	nLate        int64          // and late events
	headers      []headerRecord // a transactional Kafka job's: for the marker
	phase        ackPhase
	err          error
}

// ackPhase says which part of a subtask's checkpoint an ack reports.
type ackPhase uint8

const (
	// ackAll: the whole part (the state in the writer, if any).
	ackAll ackPhase = iota
	// ackChangelog: a transactional Kafka job's changed state is in the
	// transaction; the local copy (an ackLocal) follows.
	ackChangelog
	// ackLocal: the local copy of a Kafka checkpoint is written.
	ackLocal
)

// subtaskBuffer is the capacity, in messages, of a subtask's channel, and
// batchElems the elements of one message: together, the events that may
// wait for a subtask.
const (
	subtaskBuffer = 8
	batchElems    = 512
)

// streamSubtask is one subtask of a job: the goroutine that owns a range
// of key groups, the engine's operators over them, their state store and
// the subtask's sinks.
type streamSubtask struct {
	j     *job
	index int
	host  *hostOperator
	in    chan msg
	free  chan []elem // element slices handed back to the coordinator
	store interface {
		state.Writer
		state.Reader
	}
	mem          *memBackend
	peb          *state.Pebble
	alerts, late runtime.CommitSink
	shadow       runtime.CommitSink // the shadow version's alerts; nil without
	buf          []byte
	// alertCount and lateCount mirror the host's counters for the
	// coordinator's progress reports.
	alertCount, lateCount atomic.Int64
	ruleCells             []ruleCells // by rule, with a monitor
	// cellsMu makes alertCount and ruleCells one snapshot for the
	// monitor (job.publish): read cell by cell while the subtask stored
	// them, a rule's alerts lagged the total, or a shadow's overlap its
	// active twin's alerts.
	cellsMu   sync.Mutex
	stored    uint64       // host.changes when the counters were last stored
	processed atomic.Int64 // elements processed
	// collected counts the outputs Collect wrote; timed, the processing
	// time ticks that wrote any (job.quiet: a timer that fires on the wall
	// clock changes neither the input's positions nor its watermark, yet
	// its outputs wait for the next checkpoint's commit).
	collected uint64
	timed     atomic.Int64
	// committed is the newest checkpoint whose outputs the subtask has
	// committed (the restored one's at the start: its recovery commits
	// them).
	committed atomic.Int64
	// snap is the subtask's part of the checkpoint in progress, if any;
	// changes its changelog writer (a transactional Kafka job).
	snap      *subtaskSnapshot
	changes   *changelogWriter
	written   *byteCounter         // of the snapshot in progress
	partition kafka.KeyPartitioner // of the changelog's records
	bg        sync.WaitGroup       // the Pebble checkpoints being made
}

func (j *job) newSubtask(i int) (*streamSubtask, error) {
	host, err := j.e.newHost(j.cfg.Time)
	if err != nil {
		return nil, err
	}
	host.needAlerts = true
	host.events = nil // observers are the backtest's
	s := &streamSubtask{j: j, index: i, host: host, in: make(chan msg, subtaskBuffer), free: make(chan []elem, subtaskBuffer+2)}
	s.committed.Store(j.restored)
	if j.cfg.Monitor != nil {
		s.ruleCells = make([]ruleCells, len(j.e.rules))
		s.stored = ^uint64(0) // the restored counters go out with the first message
	}
	c := &j.cfg
	restored := func(of func(*jobMeta) []runtime.PendingState) runtime.PendingState {
		return j.restoredSink(func(m *jobMeta, s int) (runtime.PendingState, bool) {
			if st := of(m); s < len(st) {
				return st[s], true
			}
			return runtime.PendingState{}, false
		}, i)
	}
	if ko := j.kafka; ko != nil {
		s.alerts = j.newTxnSink(ko.in.AlertsTopic)
		if ko.in.LateTopic != "" {
			s.late = j.newTxnSink(ko.in.LateTopic)
		}
		if ko.in.ShadowTopic != "" {
			s.shadow = j.newTxnSink(ko.in.ShadowTopic)
		}
		return s, nil
	}
	alerts := restored(func(m *jobMeta) []runtime.PendingState { return m.Alerts })
	if c.AlertsDir != "" {
		fs, err := runtime.NewFileSink(c.AlertsDir, "alerts", i)
		if err != nil {
			return nil, err
		}
		s.alerts = fs
		err = j.recoverFile(fs, "alerts", c.AlertsDir, alerts)
		if err != nil {
			return nil, fmt.Errorf("cep: stream: alerts of subtask %d: %w", i, err)
		}
	} else {
		s.alerts = runtime.NewWriterSink(j.sharedAlerts(), i)
		if err := s.alerts.Recover(alerts); err != nil {
			return nil, fmt.Errorf("cep: stream: alerts of subtask %d: %w", i, err)
		}
	}
	if c.LateDir != "" {
		fs, err := runtime.NewFileSink(c.LateDir, "late", i)
		if err != nil {
			return nil, err
		}
		s.late = fs
		if err := j.recoverFile(fs, "late", c.LateDir, restored(func(m *jobMeta) []runtime.PendingState { return m.Late })); err != nil {
			return nil, fmt.Errorf("cep: stream: late events of subtask %d: %w", i, err)
		}
	}
	if c.ShadowDir != "" {
		fs, err := runtime.NewFileSink(c.ShadowDir, "shadow", i)
		if err != nil {
			return nil, err
		}
		s.shadow = fs
		if err := j.recoverFile(fs, "shadow", c.ShadowDir, restored(func(m *jobMeta) []runtime.PendingState { return m.Shadow })); err != nil {
			return nil, fmt.Errorf("cep: stream: shadow alerts of subtask %d: %w", i, err)
		}
	}
	return s, nil
}

// sharedAlerts is the writer of the alerts without an alerts directory:
// the subtasks' sinks write it in turn.
func (j *job) sharedAlerts() io.Writer {
	if j.alertsOut == nil {
		j.alertsOut = &lockedWriter{w: j.cfg.Alerts}
	}
	return j.alertsOut
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// openStore opens the subtask's state store: restored from its own store
// in chk when same (the checkpoint has the same subtasks and backend),
// else empty.
func (s *streamSubtask) openStore(chk *state.Checkpoint, same bool, from *state.Mem) error {
	c := &s.j.cfg
	name := subtaskStore(s.index)
	switch c.Backend {
	case BackendPebble:
		dir := filepath.Join(c.StateDir, "work", name)
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("cep: stream: %w", err)
		}
		var err error
		if same {
			s.peb, err = chk.OpenPebble(name, dir)
		} else {
			s.peb, err = state.OpenPebble(dir)
		}
		if err != nil {
			return fmt.Errorf("%w: %w", ErrRestore, err)
		}
		if from != nil {
			if err := from.CopyTo(s.peb); err != nil {
				return fmt.Errorf("%w: %w", ErrRestore, err)
			}
			if err := s.peb.Flush(); err != nil {
				return fmt.Errorf("%w: %w", ErrRestore, err)
			}
		}
		s.store = s.peb
	default:
		base := state.NewMem()
		if from != nil {
			base = from
		} else if same {
			var err error
			if base, err = chk.OpenMem(name); err != nil {
				return fmt.Errorf("%w: %w", ErrRestore, err)
			}
		}
		s.mem = newMemBackend(s.j.sctx, name, base)
		s.store = s.mem
	}
	return nil
}

// memBackend is the state store of a subtask with the memory backend. The
// subtask writes each checkpoint's changed records into a delta; a
// goroutine of the backend's own applies the deltas in turn to the full
// table of records, which it alone owns, and writes the table into the
// checkpoint. So the subtask never copies the table: its stall is the
// changed records, not the state.
type memBackend struct {
	name    string
	base    *state.Mem // the records as of the last delta applied; the goroutine's once started
	delta   []deltaOp
	arena   []byte // of the delta's values
	jobs    chan memJob
	done    chan struct{}
	ctx     context.Context
	started bool
	bytes   atomic.Int64 // the table's size, after the last delta applied
}

type deltaOp struct {
	k   state.Key
	v   []byte // in the delta's arena
	del bool
}

// byteCounter counts the bytes of the records written through it.
type byteCounter struct {
	w state.Writer
	n int64
}

func (c *byteCounter) Put(k state.Key, v []byte) error {
	c.n += int64(len(k.Operator) + len(k.Key) + len(v))
	return c.w.Put(k, v)
}

func (c *byteCounter) Delete(k state.Key) error { return c.w.Delete(k) }

// memJob is a delta to apply and the checkpoint to write the table into.
type memJob struct {
	ops  []deltaOp
	w    *state.CheckpointWriter
	a    ack
	acks chan<- ack
}

func newMemBackend(ctx context.Context, name string, base *state.Mem) *memBackend {
	return &memBackend{name: name, base: base, ctx: ctx, jobs: make(chan memJob, 2), done: make(chan struct{})}
}

// Put and Delete record a change into the delta. The values are copied
// into an arena of the delta's own (a few large allocations, not one per
// record).
func (m *memBackend) Put(k state.Key, v []byte) error {
	if len(m.arena)+len(v) > cap(m.arena) {
		m.arena = make([]byte, 0, max(1<<20, len(v)))
	}
	start := len(m.arena)
	m.arena = append(m.arena, v...)
	m.delta = append(m.delta, deltaOp{k: k, v: m.arena[start:len(m.arena):len(m.arena)]})
	return nil
}

func (m *memBackend) Delete(k state.Key) error {
	m.delta = append(m.delta, deltaOp{k: k, del: true})
	return nil
}

// Records reads the table: only before the goroutine starts (a restore).
func (m *memBackend) Records(op state.OperatorID, groups state.KeyGroupRange) iter.Seq2[state.Record, error] {
	return m.base.Records(op, groups)
}

func (m *memBackend) start() {
	m.started = true
	go m.run()
}

func (m *memBackend) run() {
	defer close(m.done)
	for job := range m.jobs {
		for _, op := range job.ops {
			if op.del {
				_ = m.base.Delete(op.k)
			} else {
				_ = m.base.Put(op.k, op.v)
			}
		}
		m.bytes.Store(m.base.Bytes())
		job.a.stateBytes = m.base.Bytes()
		if job.w != nil { // else no local copy of this checkpoint
			job.a.err = job.w.AddMemStore(m.name, m.base)
		}
		select {
		case job.acks <- job.a:
		case <-m.ctx.Done():
			return
		}
	}
}

// checkpoint hands the delta so far to the goroutine, which acks a once
// the table is in w.
func (m *memBackend) checkpoint(w *state.CheckpointWriter, a ack, acks chan<- ack) {
	ops := m.delta
	m.delta, m.arena = nil, nil
	// The goroutine is gone once the job stops (while acking): the
	// checkpoint is dropped with the job.
	select {
	case m.jobs <- memJob{ops: ops, w: w, a: a, acks: acks}:
	case <-m.ctx.Done():
	}
}

func (m *memBackend) close() {
	close(m.jobs)
	if m.started {
		<-m.done
	}
}

func (s *streamSubtask) close() error {
	var errs []error
	if s.alerts != nil {
		errs = append(errs, s.alerts.Close())
	}
	if s.late != nil {
		errs = append(errs, s.late.Close())
	}
	if s.shadow != nil {
		errs = append(errs, s.shadow.Close())
	}
	s.bg.Wait()
	if s.peb != nil {
		errs = append(errs, s.peb.Close())
	}
	if s.mem != nil {
		s.mem.close()
	}
	return errors.Join(errs...)
}

// run processes the subtask's messages until msgEnd, or until ctx is
// cancelled (the job failed).
func (s *streamSubtask) run(ctx context.Context, acks chan<- ack) error {
	// In processing time the subtask's clock is the wall clock, read
	// before each message and every tick (which fires the timers of a
	// quiet stream).
	var tick <-chan time.Time
	processing := s.j.cfg.Time == ProcessingTime
	if processing {
		t := time.NewTicker(tickEvery)
		defer t.Stop()
		tick = t.C
	}
	for {
		var m msg
		if s.snap != nil {
			// A snapshot in progress: its steps go between messages,
			// larger ones while no message waits.
			select {
			case m = <-s.in:
			case <-ctx.Done():
				return nil
			default:
				s.stepSnapshot(snapshotStepIdle, acks)
				continue
			}
		} else {
			select {
			case m = <-s.in:
			case <-tick:
				before := s.collected
				if err := s.host.setProcessingTime(event.Time(time.Now().UnixMilli()), s); err != nil {
					return err
				}
				if s.collected != before {
					s.timed.Add(1)
					s.storeCounters()
				}
				continue
			case <-ctx.Done():
				return nil
			}
		}
		var err error
		if processing && (m.kind == msgElements || m.kind == msgWatermark) {
			if err := s.host.setProcessingTime(event.Time(time.Now().UnixMilli()), s); err != nil {
				return err
			}
		}
		switch m.kind {
		case msgElements:
			for _, el := range m.elems {
				if err = s.host.processMasked(el.ev, el.ev.Time, el.mask, s); err != nil {
					break
				}
			}
			s.processed.Add(int64(len(m.elems)))
			clear(m.elems)
			select {
			case s.free <- m.elems[:0]:
			default:
			}
		case msgWatermark:
			err = s.host.processWatermarkMasked(m.wm, m.mask, s)
		case msgBarrier:
			s.barrier(m, acks)
		case msgCommit:
			if h := s.j.cfg.hooks.beforeSinkCommit; h != nil {
				h(s.index, m.id)
			}
			err = s.alerts.Commit(m.id)
			if err == nil && s.late != nil {
				err = s.late.Commit(m.id)
			}
			if err == nil && s.shadow != nil {
				err = s.shadow.Commit(m.id)
			}
			if err == nil {
				s.committed.Store(m.id)
			}
		case msgEnd:
			return nil
		}
		if err != nil {
			return err
		}
		if s.snap != nil {
			s.stepSnapshot(snapshotStepBusy, acks)
		}
		s.storeCounters()
	}
}

// storeCounters hands the host's counters to the coordinator's progress
// reports and the monitor (the per-rule ones only when they moved).
func (s *streamSubtask) storeCounters() {
	if s.ruleCells != nil {
		s.cellsMu.Lock()
		defer s.cellsMu.Unlock()
	}
	s.alertCount.Store(s.host.alerts)
	if s.ruleCells != nil && s.host.changes != s.stored {
		s.stored = s.host.changes
		for i := range s.ruleCells {
			c, rc := &s.ruleCells[i], &s.host.rules[i]
			c.alerts.Store(rc.alerts)
			c.timedOut.Store(rc.timedOut)
			// Its events over the buffer limit and its partial matches
			// over the partial-match limit (docs/operations.md).
			counts, _ := s.host.keyOps[s.host.e.rules[i].spec].op.RuleCounts(i)
			c.overflow.Store(rc.overflow)
			c.partials.Store(int64(counts.DroppedPartialMatches))
			c.noKey.Store(rc.noKey)
			c.compared.Store(rc.compared)
			c.overlap.Store(rc.overlap)
		}
	}
	s.lateCount.Store(s.host.late)
}

// ruleCells mirror a host's counters of one rule for the monitor
// (ruleFigure).
type ruleCells struct {
	alerts, timedOut, overflow, partials, noKey, compared, overlap atomic.Int64
}

// addTo adds the cells' figures to f.
func (c *ruleCells) addTo(f *ruleFigure) {
	f.alerts += c.alerts.Load()
	f.timedOut += c.timedOut.Load()
	f.overflow += c.overflow.Load()
	f.partials += c.partials.Load()
	f.noKey += c.noKey.Load()
	f.compared += c.compared.Load()
	f.overlap += c.overlap.Load()
}

// Collect writes the host's outputs to the subtask's sinks.
func (s *streamSubtask) Collect(x emitted) error {
	s.collected++
	switch {
	case x.alert != nil:
		if f := s.j.cfg.OnAlert; f != nil && !x.shadow {
			if err := s.j.cfg.gate.call("OnAlert", func() error { return f(x.alert) }); err != nil {
				return err
			}
		}
		sink := s.alerts
		if x.shadow {
			if sink = s.shadow; sink == nil {
				return ErrNoShadowOutput
			}
		}
		s.buf = s.j.e.encoder.AppendAlert(s.buf[:0], x.alert)
		if kw, ok := sink.(keyedWriter); ok {
			return kw.WriteKeyed(alertKey(x.alert), s.buf)
		}
		return sink.Write(s.buf)
	case x.late != nil && x.limit == nil && s.j.cfg.OnLate != nil:
		f := s.j.cfg.OnLate
		if err := s.j.cfg.gate.call("OnLate", func() error { return f(x.late) }); err != nil || s.late == nil {
			return err
		}
		s.buf = s.j.e.encoder.appendLate(s.buf[:0], x.late)
		return s.late.Write(s.buf)
	case x.late != nil && s.late != nil && x.limit != nil:
		s.buf = s.j.e.encoder.appendOverflow(s.buf[:0], x.late, x.limit)
		return s.late.Write(s.buf)
	case x.late != nil && s.late != nil:
		s.buf = s.j.e.encoder.appendLate(s.buf[:0], x.late)
		return s.late.Write(s.buf)
	}
	return nil
}

// The keys a step of an incremental snapshot writes: after each message,
// and while no message waits. A key's record takes a few microseconds.
const (
	snapshotStepBusy = 512
	snapshotStepIdle = 4096
)

// subtaskSnapshot is the subtask's part of a checkpoint in progress.
type subtaskSnapshot struct {
	a     ack
	w     *state.CheckpointWriter
	began time.Time
}

// barrier takes the subtask's part of checkpoint m.id: the sinks'
// transactions end and the operators' headers and counters go to the
// store now; the changed keys' records follow a few at a time between
// the next messages (SharedOperator.SnapshotBegin), so the subtask never
// stops for long; then the store goes into the checkpoint writer and the
// ack out (a memory store's table is written by a goroutine of its own).
// The ack's stall is the longest the subtask spent at once on the
// checkpoint.
func (s *streamSubtask) barrier(m msg, acks chan<- ack) {
	if h := s.j.cfg.hooks.atBarrier; h != nil {
		h(s.index, m.id)
	}
	if s.snap != nil {
		// The previous checkpoint was aborted while its snapshot went
		// on: finish it into its (aborted) writer first.
		s.stepSnapshot(-1, acks)
	}
	// The counters the checkpoint holds go out before its ack: the
	// monitor's last figures of a job that ends at it (a switch, which
	// may let a rule's state and counters go) are all of them.
	s.storeCounters()
	a := ack{sub: s.index, id: m.id, nAlerts: s.host.alerts, nLate: s.host.late}
	began := time.Now()
	fail := func(err error) {
		a.err = err
		s.ack(acks, a)
	}
	var err error
	if a.alerts, err = s.alerts.PreCommit(m.id); err != nil {
		fail(err)
		return
	}
	if s.late != nil {
		if a.late, err = s.late.PreCommit(m.id); err != nil {
			fail(err)
			return
		}
	}
	if s.shadow != nil {
		if a.shadow, err = s.shadow.PreCommit(m.id); err != nil {
			fail(err)
			return
		}
	}
	var w state.Writer = s.store
	if s.j.kafka != nil {
		s.changes = &changelogWriter{store: s.store, s: s}
		w = s.changes
	}
	s.written = &byteCounter{w: w}
	if err := s.host.snapshotBegin(s.written); err != nil {
		fail(err)
		return
	}
	a.stall = time.Since(began)
	s.snap = &subtaskSnapshot{a: a, w: m.w, began: began}
	s.stepSnapshot(0, acks)
}

// stepSnapshot writes up to n more keys of the snapshot in progress (all
// for n < 0); the last step completes the subtask's part of the
// checkpoint.
func (s *streamSubtask) stepSnapshot(n int, acks chan<- ack) {
	sn := s.snap
	t := time.Now()
	done, err := s.host.snapshotStep(n)
	sn.a.stall = max(sn.a.stall, time.Since(t))
	if err != nil {
		s.snap = nil
		sn.a.err = err
		s.ack(acks, sn.a)
		return
	}
	if !done {
		return
	}
	s.snap = nil
	a := sn.a
	if s.changes != nil {
		a.headers, s.changes = s.changes.headers, nil
	}
	for _, ko := range s.host.keyOps {
		st := ko.op.Stats()
		a.keys += int64(st.Keys)
		a.buf += int64(st.BufferedEvents)
		a.partials += int64(ko.op.PartialMatches())
	}
	a.written = s.written.n
	switch {
	case s.mem != nil:
		a.stateBytes = s.mem.bytes.Load()
	case s.peb != nil:
		a.stateBytes = s.peb.DiskBytes()
	}
	failpoint.Hit("snapshot.mid")
	if s.j.kafka != nil && sn.w != nil {
		// The transaction may commit now; the local copy reports on its
		// own.
		a.phase = ackChangelog
		s.ack(acks, a)
		a = ack{sub: s.index, id: a.id, phase: ackLocal}
	}
	if sn.w == nil && s.peb != nil {
		// No local copy of this checkpoint (a transactional Kafka job's):
		// the changes go into the working database, which the next local
		// checkpoint copies.
		t := time.Now()
		a.err = s.peb.Flush()
		a.stall = max(a.stall, time.Since(t))
		s.ack(acks, a)
		return
	}
	if s.peb != nil {
		// The batch is flushed here; the database's checkpoint (its
		// write-ahead log copied) is made on a goroutine of its own while
		// the subtask goes on: nothing writes to the store until the next
		// barrier, which waits for this checkpoint's ack.
		t := time.Now()
		err := s.peb.Flush()
		a.stall = max(a.stall, time.Since(t))
		if err != nil {
			a.err = err
			s.ack(acks, a)
			return
		}
		s.bg.Add(1)
		go func() {
			defer s.bg.Done()
			a.err = sn.w.AddPebbleFlushed(subtaskStore(s.index), s.peb)
			s.ack(acks, a)
		}()
		return
	}
	s.mem.checkpoint(sn.w, a, acks)
}

// ack sends a to the coordinator, unless the job stopped.
func (s *streamSubtask) ack(acks chan<- ack, a ack) {
	select {
	case acks <- a:
	case <-s.j.sctx.Done():
	}
}
