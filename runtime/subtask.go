package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/event/jsonev"
)

// KeyedOperator is an operator the runtime hosts on a keyed stream. It keys
// the elements itself (each rule has its own key), holds its own state, and
// delivers its outputs itself: the runtime only feeds it. Implementations
// are single-threaded: the subtask calls them from its goroutine only.
type KeyedOperator interface {
	// ProcessElement takes one element and its record timestamp. The
	// operator may keep ev: the runtime never modifies an event after
	// handing it over, and gives the same event to every operator of the
	// subtask, so operators must not modify it either.
	ProcessElement(ev *event.Event, ts event.Time) error
	// ProcessWatermark advances event time to w. Watermarks only go
	// forward; the last one of a bounded input is event.MaxTime.
	ProcessWatermark(w event.Watermark) error
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
	Records   int64           // records read (non-blank lines, dead ones included)
	Decoded   int64           // records decoded into events and forwarded
	Dead      int64           // records sent to the dead letters
	Line      int64           // line number of the last record read
	Watermark event.Watermark // last watermark forwarded (event.MinTime before the first)
	// BytesRead and TotalBytes come from a ProgressSource: bytes read from
	// the input and its size; both -1 when the source cannot tell, and
	// TotalBytes -1 when only the size is unknown.
	BytesRead, TotalBytes int64
}

// SubtaskConfig configures a [Subtask].
type SubtaskConfig struct {
	Source     Source              // required
	Decoder    *jsonev.Decoder     // required
	Watermarks *WatermarkGenerator // required
	Operators  []KeyedOperator     // at least one
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
}

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
type Subtask struct {
	cfg   SubtaskConfig
	stats Stats
	ran   bool
}

// NewSubtask checks cfg and returns a subtask.
func NewSubtask(cfg SubtaskConfig) (*Subtask, error) {
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
	}
	for i, op := range cfg.Operators {
		if op == nil {
			return nil, fmt.Errorf("runtime: subtask: operator %d is nil", i)
		}
	}
	if cfg.ProgressEvery == 0 {
		cfg.ProgressEvery = 100000
	}
	cfg.Operators = append([]KeyedOperator(nil), cfg.Operators...)
	return &Subtask{cfg: cfg, stats: Stats{Watermark: event.MinTime}}, nil
}

// Stats returns the counters so far. Call it from Run's goroutine (from the
// progress callback) or after Run returned.
func (s *Subtask) Stats() Stats {
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
func (s *Subtask) Run(ctx context.Context) error {
	if s.ran {
		return errors.New("runtime: subtask: Run called twice")
	}
	s.ran = true
	var (
		src    = s.cfg.Source
		dec    = s.cfg.Decoder
		wm     = s.cfg.Watermarks
		ops    = s.cfg.Operators
		ev     *event.Event
		nextPr = s.cfg.ProgressEvery
	)
	for {
		// The previous record is done: report, and look at ctx.
		if s.stats.Records >= nextPr {
			nextPr += s.cfg.ProgressEvery
			if s.cfg.Progress != nil {
				s.cfg.Progress(s.Stats())
			}
		}
		if s.stats.Records&(cancelCheckEvery-1) == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		rec, err := src.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		s.stats.Records++
		s.stats.Line = rec.Line
		if rec.Reason != "" {
			if err := s.dead(rec, rec.Reason); err != nil {
				return err
			}
			continue
		}
		if ev == nil {
			// Operators keep the events they are given: a fresh one per
			// record, reused only after a record failed to decode.
			ev = new(event.Event)
		}
		if err := dec.Decode(rec.Data, ev); err != nil {
			if err := s.dead(rec, err.Error()); err != nil {
				return err
			}
			continue
		}
		ev.Seq = uint64(rec.Line)
		s.stats.Decoded++
		for i, op := range ops {
			if err := op.ProcessElement(ev, ev.Time); err != nil {
				return &OperatorError{Operator: i, Line: rec.Line, Err: err}
			}
		}
		ts := ev.Time
		ev = nil
		if w, ok := wm.OnEvent(ts); ok {
			if err := s.watermark(w, rec.Line); err != nil {
				return err
			}
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

func (s *Subtask) watermark(w event.Watermark, line int64) error {
	s.stats.Watermark = w
	for i, op := range s.cfg.Operators {
		if err := op.ProcessWatermark(w); err != nil {
			return &OperatorError{Operator: i, Line: line, Err: err}
		}
	}
	return nil
}

func (s *Subtask) dead(rec Record, reason string) error {
	s.stats.Dead++
	if s.cfg.DeadLetter == nil {
		return nil
	}
	return s.cfg.DeadLetter.DeadLetter(DeadRecord{
		Line: rec.Line, Offset: rec.Offset, Reason: reason, Data: bytes.Clone(rec.Data),
	})
}
