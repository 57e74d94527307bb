package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/event/jsonev"
	"github.com/cepheus-cep/cepheus/runtime/state"
)

// Collector receives the outputs of the keyed operators of a subtask
// (Flink's Collector and side outputs in one): T is whatever the
// operators emit, for package cep an alert or a late event. The subtask
// hands its collector ([SubtaskConfig.Output]) to every operator call, on
// its own goroutine.
type Collector[T any] interface {
	// Collect takes one output. The collector owns what it keeps of out
	// only for the call unless T's documentation says otherwise. An error
	// (a sink that cannot write) is returned by the operator, and stops
	// the subtask.
	Collect(out T) error
}

// KeyedOperator is an operator the runtime hosts on a keyed stream. It keys
// the elements itself (each rule has its own key) and holds its own state;
// it emits its outputs into the collector of each call, and writes and
// reads its state through the Snapshot and Restore hooks.
// Implementations are single-threaded: the subtask calls them from its
// goroutine only.
type KeyedOperator[T any] interface {
	// ProcessElement takes one element and its record timestamp. The
	// operator may keep ev: the runtime never modifies an event after
	// handing it over, and gives the same event to every operator of the
	// subtask, so operators must not modify it either.
	ProcessElement(ev *event.Event, ts event.Time, out Collector[T]) error
	// ProcessWatermark advances event time to w. Watermarks only go
	// forward; the last one of a bounded input is event.MaxTime.
	ProcessWatermark(w event.Watermark, out Collector[T]) error
	// Snapshot writes the operator's state at a checkpoint, between two
	// elements: the records (under the operator's own [state.OperatorID])
	// that changed since its previous Snapshot, so that a [state.Reader]
	// of the checkpoint restores it.
	Snapshot(w state.Writer) error
	// Restore sets the operator's state to that of a checkpoint, before
	// its first element: then every later output is the same as if the
	// operator that took the checkpoint had gone on.
	Restore(r state.Reader) error
}

// OperatorError is an error returned by an operator of a subtask.
type OperatorError struct {
	Operator int   // index of the operator in SubtaskConfig.Operators
	Line     int64 // line of the record being processed; 0 at the end of input
	Err      error
}

func (e *OperatorError) Error() string {
	where := "at end of input"
	if e.Line > 0 {
		where = "line " + strconv.FormatInt(e.Line, 10)
	}
	return fmt.Sprintf("runtime: operator %d: %s: %v", e.Operator, where, e.Err)
}

func (e *OperatorError) Unwrap() error { return e.Err }

// Stats are the counters of a [Subtask].
type Stats struct {
	Records int64 // records read (non-blank lines, dead ones included)
	Decoded int64 // records decoded into events and forwarded
	Dead    int64 // records sent to the dead letters
	Ahead   int64 // of Dead, the events too far ahead of the stream (SubtaskConfig.MaxAhead)
	// FirstDeadLine and FirstDeadReason are the line and reason of the first
	// dead record (0 and "" when there is none); FirstDeadFile the input
	// of its line when the source merges several ([Record.File]).
	FirstDeadLine   int64
	FirstDeadReason string
	FirstDeadFile   string
	Line            int64           // line number of the last record read
	Watermark       event.Watermark // last watermark forwarded (event.MinTime before the first)
	// BytesRead and TotalBytes come from a ProgressSource: bytes read from
	// the input and its size; both -1 when the source cannot tell, and
	// TotalBytes -1 when only the size is unknown.
	BytesRead, TotalBytes int64
}

// SubtaskConfig configures a [Subtask] whose operators emit values of type
// T.
type SubtaskConfig[T any] struct {
	Source     Source              // required
	Decoder    *jsonev.Decoder     // required
	Watermarks *WatermarkGenerator // required
	Operators  []KeyedOperator[T]  // at least one
	// Output is the collector every operator call is given. Default
	// (nil): the outputs are discarded.
	Output Collector[T]
	// DeadLetter receives the records that cannot become events. When nil
	// they are only counted (Stats.Dead).
	DeadLetter DeadLetter
	// Progress, when set, is called with the counters every ProgressEvery
	// records, and once more after the final watermark. It runs on the
	// subtask's goroutine and must be quick; the caller times it if it
	// wants wall-clock output.
	Progress func(Stats)
	// ProgressEvery is the number of records between Progress calls.
	// Default (0): 100000.
	ProgressEvery int64
	// MaxAhead, when positive, keeps a bad time from moving the watermark:
	// an event more than MaxAhead after the stream's time (the largest
	// event time forwarded so far) goes to the dead letters instead of the
	// operators, unless the [AheadConfirm] events from it on are all that
	// far ahead and within MaxAhead of it (the input has a gap: the stream
	// did jump). The first AheadConfirm events of the input are held and
	// judged in order, the stream's time starting at their lower median.
	// At most AheadConfirm events are held at a time; their order is kept. Default (0): no check
	// (conformance and differential runs, whose times are a few
	// milliseconds from the epoch, never set it).
	MaxAhead time.Duration
	// GiveUpAfter, when positive, stops Run with [ErrNothingDecoded] once
	// that many records were read and none of them became an event (none
	// reached the operators: all dead letters, or rejected by lookups
	// failing closed), as soon as none is left waiting to be judged: a
	// schema or time unit that matches nothing, or a source of lookups
	// that is down, not worth reading to the end. Default (0): read on.
	GiveUpAfter int64
	// Checkpoint, when set, is called every CheckpointEvery records
	// (counted from the start of the input, also across a restore), on
	// Run's goroutine, between two records: everything read before has
	// reached the operators, the watermark it advanced included, and
	// nothing after. It may call [Subtask.Snapshot]. An error stops Run.
	// (It stands in for the in-band checkpoint barriers of the streaming
	// runtime to come.)
	Checkpoint      func(Stats) error
	CheckpointEvery int64
	// Enrich, when set, is the enrichment stage before keying (lookups):
	// the decoded events are handed to it in arrival order, EnrichBatch
	// at a time (fewer before a checkpoint and at the end of the input),
	// before the far-ahead check and the operators. An event whose
	// reasons[i] it sets goes to the dead letters with that reason (a
	// lookup that failed closed). A batch is enriched on a goroutine of
	// its own while Run decodes the next one and the operators take the
	// one before (one call at a time, in order); its events reach the
	// operators, in order, once it returns. An error stops Run.
	Enrich func(ctx context.Context, evs []*event.Event, reasons []string) error
	// EnrichBatch is the number of events per Enrich call. Default (0):
	// 256.
	EnrichBatch int
}

// defaultEnrichBatch is the default of SubtaskConfig.EnrichBatch.
const defaultEnrichBatch = 256

// enrichWindow holds the decoded events waiting for SubtaskConfig.Enrich,
// with their records (Data copied into arena, reused from one batch to
// the next: the dead letters and the far-ahead check copy what they keep).
type enrichWindow struct {
	evs     []*event.Event
	recs    []Record
	reasons []string
	arena   []byte
	done    chan error // the call in flight's outcome (nil: none)
}

// ErrNothingDecoded is returned by [Subtask.Run] when SubtaskConfig.GiveUpAfter
// records were read and none decoded.
var ErrNothingDecoded = errors.New("runtime: no record decoded")

// cancelCheckEvery is how often (in records) Run looks at its context; a
// power of two.
const cancelCheckEvery = 4096

// Subtask runs one source partition through a decoder and a watermark
// generator into keyed operators, on the calling goroutine: Run reads a
// record, decodes it into a fresh event, hands it to every operator in
// order, then, if the watermark advanced, hands the watermark to every
// operator in order. Bad records go to the dead letters. At the end of a
// bounded input it sends the final watermark, event.MaxTime.
//
// Event.Seq of each event is its line number: increasing in arrival
// order, and it points back into the input.
type Subtask[T any] struct {
	cfg   SubtaskConfig[T]
	stats Stats
	ran   bool
	guard *aheadGuard // nil without MaxAhead
	// skipTo is the line of the checkpoint the subtask was restored from:
	// Run skips the records up to it, which the checkpoint covers.
	skipTo int64
	// win is the window being filled; flight the one being enriched.
	win, flight *enrichWindow
}

// NewSubtask checks cfg and returns a subtask.
func NewSubtask[T any](cfg SubtaskConfig[T]) (*Subtask[T], error) {
	switch {
	case cfg.Source == nil:
		return nil, errors.New("runtime: subtask: no source")
	case cfg.Decoder == nil:
		return nil, errors.New("runtime: subtask: no decoder")
	case cfg.Watermarks == nil:
		return nil, errors.New("runtime: subtask: no watermark generator")
	case len(cfg.Operators) == 0:
		return nil, errors.New("runtime: subtask: no operators")
	case cfg.ProgressEvery < 0:
		return nil, errors.New("runtime: subtask: negative progress interval")
	case cfg.MaxAhead < 0 || cfg.GiveUpAfter < 0:
		return nil, errors.New("runtime: subtask: negative MaxAhead or GiveUpAfter")
	case cfg.Checkpoint != nil && cfg.CheckpointEvery <= 0:
		return nil, errors.New("runtime: subtask: Checkpoint needs a positive CheckpointEvery")
	}
	for i, op := range cfg.Operators {
		if op == nil {
			return nil, fmt.Errorf("runtime: subtask: operator %d is nil", i)
		}
	}
	if cfg.ProgressEvery == 0 {
		cfg.ProgressEvery = 100000
	}
	cfg.Operators = append([]KeyedOperator[T](nil), cfg.Operators...)
	if cfg.Output == nil {
		cfg.Output = discard[T]{}
	}
	s := &Subtask[T]{cfg: cfg, stats: Stats{Watermark: event.MinTime}}
	if b := event.Millis(cfg.MaxAhead); b > 0 {
		s.guard = &aheadGuard{bound: event.Time(b), boundD: cfg.MaxAhead}
	}
	return s, nil
}

// Stats returns the counters so far. Call it from Run's goroutine (from the
// progress callback) or after Run returned.
func (s *Subtask[T]) Stats() Stats {
	st := s.stats
	st.BytesRead, st.TotalBytes = -1, -1
	if p, ok := s.cfg.Source.(ProgressSource); ok {
		st.BytesRead, st.TotalBytes = p.Progress()
	}
	return st
}

// Run processes the source until it is exhausted, then sends the final
// watermark and returns nil. It returns early with ctx's error when ctx is
// cancelled (looked at every few thousand records; no final watermark is
// sent then), with the source's error, with a dead-letter sink's error, or
// with an [*OperatorError]. A subtask runs once.
func (s *Subtask[T]) Run(ctx context.Context) error {
	if s.ran {
		return errors.New("runtime: subtask: Run called twice")
	}
	s.ran = true
	var (
		src    = s.cfg.Source
		dec    = s.cfg.Decoder
		wm     = s.cfg.Watermarks
		nextPr = (s.stats.Records/s.cfg.ProgressEvery + 1) * s.cfg.ProgressEvery
		nextCk = int64(-1)
		// skipped is the line of the last record skipped (restored).
		skipped int64
	)
	if every := s.cfg.CheckpointEvery; s.cfg.Checkpoint != nil {
		nextCk = (s.stats.Records/every + 1) * every
	}
	for {
		// The previous record is done: report, checkpoint, and look at
		// ctx.
		if s.stats.Records >= nextPr {
			nextPr += s.cfg.ProgressEvery
			if s.cfg.Progress != nil {
				s.cfg.Progress(s.Stats())
			}
		}
		if s.stats.Records == nextCk {
			nextCk += s.cfg.CheckpointEvery
			if err := s.flushEnrich(ctx); err != nil {
				return err
			}
			if err := s.cfg.Checkpoint(s.Stats()); err != nil {
				return err
			}
		}
		if s.stats.Records&(cancelCheckEvery-1) == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		// GiveUpAfter records dead and none passed: not "at GiveUpAfter
		// records", when events may still wait for their lookups (there
		// is nearly always a batch in flight) or for the far-ahead check.
		if s.cfg.GiveUpAfter > 0 && s.stats.Decoded == 0 && s.stats.Dead >= s.cfg.GiveUpAfter {
			return ErrNothingDecoded
		}
		rec, err := src.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			// The records read before the error are handled as at the
			// end of the input, so that a partial run is the run of the
			// lines read (none left waiting for its lookups), but for the
			// final watermark: the input did not end.
			if ferr := s.flushEnrich(ctx); ferr != nil {
				return errors.Join(err, ferr)
			}
			if s.guard != nil {
				if gerr := s.guard.end(guardOut[T]{s}); gerr != nil {
					return errors.Join(err, gerr)
				}
			}
			return err
		}
		if rec.Line <= s.skipTo {
			skipped = rec.Line
			continue // covered by the checkpoint restored
		}
		s.stats.Records++
		s.stats.Line = rec.Line
		if rec.Reason != "" {
			if err := s.dead(rec, rec.Reason); err != nil {
				return err
			}
			continue
		}
		e, err := dec.Decode(rec.Data)
		if err != nil {
			if err := s.dead(rec, err.Error()); err != nil {
				return err
			}
			continue
		}
		e.Seq = uint64(rec.Line)
		if s.cfg.Enrich != nil {
			if err := s.enqueue(ctx, e, rec); err != nil {
				return err
			}
			continue
		}
		if s.guard != nil {
			err = s.guard.offer(e, rec, guardOut[T]{s})
		} else {
			err = s.pass(e, rec.Line)
		}
		if err != nil {
			return err
		}
	}
	if err := s.flushEnrich(ctx); err != nil {
		return err
	}
	if s.skipTo > 0 && skipped < s.skipTo && s.stats.Line == s.skipTo {
		return fmt.Errorf("runtime: subtask: the input ends before line %d of the checkpoint restored", s.skipTo)
	}
	if s.guard != nil {
		if err := s.guard.end(guardOut[T]{s}); err != nil {
			return err
		}
	}
	if err := s.watermark(wm.Final(), 0); err != nil {
		return err
	}
	if s.cfg.Progress != nil {
		s.cfg.Progress(s.Stats())
	}
	return nil
}

// enqueue adds a decoded event to the enrichment window; a full window
// goes to Enrich on a goroutine, once the one before it is handed on.
func (s *Subtask[T]) enqueue(ctx context.Context, ev *event.Event, rec Record) error {
	if s.win == nil {
		s.win, s.flight = &enrichWindow{}, &enrichWindow{}
	}
	w := s.win
	if len(w.evs) == 0 {
		w.arena = w.arena[:0]
	}
	start := len(w.arena)
	w.arena = append(w.arena, rec.Data...)
	rec.Data = w.arena[start:len(w.arena):len(w.arena)]
	w.evs = append(w.evs, ev)
	w.recs = append(w.recs, rec)
	batch := s.cfg.EnrichBatch
	if batch <= 0 {
		batch = defaultEnrichBatch
	}
	if len(w.evs) < batch {
		return nil
	}
	if err := s.landFlight(); err != nil {
		return err
	}
	s.win, s.flight = s.flight, w
	w.reasons = append(w.reasons[:0], make([]string, len(w.evs))...)
	w.done = make(chan error, 1)
	go func() { w.done <- s.cfg.Enrich(ctx, w.evs, w.reasons) }()
	return nil
}

// pendingEnrich is the number of decoded events not yet handed on.
func (s *Subtask[T]) pendingEnrich() int {
	if s.win == nil {
		return 0
	}
	return len(s.win.evs) + len(s.flight.evs)
}

// landFlight waits for the window in flight, if any, and hands its events
// on.
func (s *Subtask[T]) landFlight() error {
	f := s.flight
	if f == nil || f.done == nil {
		return nil
	}
	err := <-f.done
	f.done = nil
	if err != nil {
		return err
	}
	return s.handOn(f)
}

// flushEnrich hands on every decoded event: the window in flight, then
// the one being filled, enriched here (before a checkpoint and at the end
// of the input).
func (s *Subtask[T]) flushEnrich(ctx context.Context) error {
	if err := s.landFlight(); err != nil {
		return err
	}
	w := s.win
	if w == nil || len(w.evs) == 0 {
		return nil
	}
	w.reasons = append(w.reasons[:0], make([]string, len(w.evs))...)
	if err := s.cfg.Enrich(ctx, w.evs, w.reasons); err != nil {
		return err
	}
	return s.handOn(w)
}

// handOn hands the events of an enriched window on, in order: to the
// dead letters (a reason set), the far-ahead check or the operators.
func (s *Subtask[T]) handOn(w *enrichWindow) error {
	for i, ev := range w.evs {
		var err error
		switch rec := w.recs[i]; {
		case w.reasons[i] != "":
			err = s.dead(rec, w.reasons[i])
		case s.guard != nil:
			err = s.guard.offer(ev, rec, guardOut[T]{s})
		default:
			err = s.pass(ev, rec.Line)
		}
		if err != nil {
			return err
		}
	}
	clear(w.evs)
	clear(w.recs)
	w.evs, w.recs = w.evs[:0], w.recs[:0]
	return nil
}

// pass hands ev, decoded from line, to every operator, then the
// watermark if it advanced.
func (s *Subtask[T]) pass(ev *event.Event, line int64) error {
	s.stats.Decoded++
	for i, op := range s.cfg.Operators {
		if err := op.ProcessElement(ev, ev.Time, s.cfg.Output); err != nil {
			return &OperatorError{Operator: i, Line: line, Err: err}
		}
	}
	if w, ok := s.cfg.Watermarks.OnEvent(ev.Time); ok {
		return s.watermark(w, line)
	}
	return nil
}

// guardOut is the subtask as the ahead guard's sink.
type guardOut[T any] struct{ s *Subtask[T] }

func (g guardOut[T]) pass(ev *event.Event, line int64) error { return g.s.pass(ev, line) }

func (g guardOut[T]) reject(rec Record, reason string) error {
	g.s.stats.Ahead++
	return g.s.dead(rec, reason)
}

func (s *Subtask[T]) watermark(w event.Watermark, line int64) error {
	s.stats.Watermark = w
	for i, op := range s.cfg.Operators {
		if err := op.ProcessWatermark(w, s.cfg.Output); err != nil {
			return &OperatorError{Operator: i, Line: line, Err: err}
		}
	}
	return nil
}

func (s *Subtask[T]) dead(rec Record, reason string) error {
	d := DeadRecord{Line: rec.Line, Offset: rec.Offset, Reason: reason}
	if rec.File != "" {
		// A merged source's line and offset count no file: give the ones
		// that find the line.
		d.File, d.Line, d.Offset = rec.File, rec.FileLine, rec.FileOffset
	}
	s.stats.Dead++
	if s.stats.FirstDeadLine == 0 {
		s.stats.FirstDeadFile, s.stats.FirstDeadLine, s.stats.FirstDeadReason = d.File, d.Line, reason
	}
	if s.cfg.DeadLetter == nil {
		return nil
	}
	d.Data = bytes.Clone(rec.Data)
	return s.cfg.DeadLetter.DeadLetter(d)
}

// discard is the collector of a subtask without SubtaskConfig.Output.
type discard[T any] struct{}

func (discard[T]) Collect(T) error { return nil }
