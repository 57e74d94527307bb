package runtime

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// WriterSink is the at-most-once [CommitSink] onto an io.Writer, such as
// standard output. It keeps each checkpoint's lines in memory and writes
// them, in one Write call per checkpoint, when Commit makes them visible:
// a line reaches the writer only once its checkpoint is complete, so a
// restored job never writes it again. After a crash, the lines of the
// checkpoints that completed but whose Commit did not run (or did not
// finish: the last line written may be torn) are lost, and nothing on the
// writer tells which. Use a [FileSink] when every line counts.
//
// Memory: the lines of the open transaction and of the pre-committed
// checkpoints not yet committed, one checkpoint interval's output in the
// steady state. The writer is not closed by Close. A WriterSink is not
// safe for concurrent use.
type WriterSink struct {
	w         io.Writer
	subtask   int
	recovered bool
	last      int64 // the latest checkpoint pre-committed or restored
	open      []byte
	pending   []writerPart
	err       error // sticky
}

// writerPart is the transaction of one pre-committed checkpoint.
type writerPart struct {
	checkpoint int64
	lines      []byte
}

var _ CommitSink = (*WriterSink)(nil)

// NewWriterSink returns the sink of subtask onto w. Call Recover before
// the first Write.
func NewWriterSink(w io.Writer, subtask int) *WriterSink {
	return &WriterSink{w: w, subtask: subtask}
}

// NewStdoutSink returns the sink of subtask onto standard output
// ([NewWriterSink] of os.Stdout).
func NewStdoutSink(subtask int) *WriterSink { return NewWriterSink(os.Stdout, subtask) }

// Write implements [CommitSink.Write].
func (s *WriterSink) Write(line []byte) error {
	if s.err != nil {
		return s.err
	}
	if !s.recovered {
		return errors.New("runtime: writer sink: Write before Recover")
	}
	if len(line) == 0 || line[len(line)-1] != '\n' {
		return ErrNotLine
	}
	s.open = append(s.open, line...)
	return nil
}

// PreCommit implements [CommitSink.PreCommit]. The state it returns has
// no parts: nothing of a WriterSink survives a crash.
func (s *WriterSink) PreCommit(checkpoint int64) (PendingState, error) {
	if s.err != nil {
		return PendingState{}, s.err
	}
	if !s.recovered {
		return PendingState{}, errors.New("runtime: writer sink: PreCommit before Recover")
	}
	if checkpoint <= s.last {
		return PendingState{}, fmt.Errorf("runtime: writer sink: checkpoint %d after checkpoint %d", checkpoint, s.last)
	}
	if len(s.open) > 0 {
		s.pending = append(s.pending, writerPart{checkpoint, s.open})
		s.open = nil
	}
	s.last = checkpoint
	return PendingState{Subtask: s.subtask, Checkpoint: checkpoint}, nil
}

// Commit implements [CommitSink.Commit]: the lines of the checkpoints up
// to checkpoint go to the writer.
func (s *WriterSink) Commit(checkpoint int64) error {
	if s.err != nil {
		return s.err
	}
	n := 0
	for ; n < len(s.pending) && s.pending[n].checkpoint <= checkpoint; n++ {
		if _, err := s.w.Write(s.pending[n].lines); err != nil {
			s.err = fmt.Errorf("runtime: writer sink: %w", err)
			return s.err
		}
		s.pending[n].lines = nil
	}
	s.pending = append(s.pending[:0], s.pending[n:]...)
	return nil
}

// Recover implements [CommitSink.Recover]: it only notes the restored
// checkpoint, since nothing of an earlier run is left to finish.
func (s *WriterSink) Recover(restored PendingState) error {
	if s.err != nil {
		return s.err
	}
	if s.recovered {
		return errors.New("runtime: writer sink: Recover called twice")
	}
	if err := restored.validate(); err != nil {
		return err
	}
	s.recovered = true
	s.last = restored.Checkpoint
	return nil
}

// Close implements [CommitSink.Close]: lines not committed are dropped.
func (s *WriterSink) Close() error {
	s.open, s.pending = nil, nil
	s.err = ErrSinkClosed
	return nil
}
