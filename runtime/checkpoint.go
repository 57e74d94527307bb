package runtime

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/runtime/state"
)

// SubtaskStateID is the operator id under which a subtask writes its own
// record of a checkpoint: its position in the input, its counters and the
// state of its watermark generator and far-ahead guard.
const SubtaskStateID state.OperatorID = "runtime.subtask"

// subtaskStateVersion is the first byte of the subtask's record.
// Version 1 had no FirstDeadFile; its records are still read.
const subtaskStateVersion = 2 // 2: FirstDeadFile

// ErrHeld is returned by [Subtask.Snapshot] while the far-ahead guard
// holds events back (SubtaskConfig.MaxAhead): they belong to no
// checkpoint yet. The next record boundary usually has none held.
var ErrHeld = errors.New("runtime: subtask: events held by the far-ahead guard")

// Snapshot writes a checkpoint of the subtask into w: its own record
// ([SubtaskStateID]: the line reached, the counters, the watermark
// generator and the far-ahead guard), then each operator's records
// through its Snapshot hook, in operator order. Call it between two
// records, from SubtaskConfig.Checkpoint (or before or after Run). An
// operator's error comes back as an [*OperatorError].
func (s *Subtask[T]) Snapshot(w state.Writer) error {
	if s.guard != nil && len(s.guard.held) > 0 {
		return ErrHeld
	}
	if err := w.Put(state.Key{Operator: SubtaskStateID}, s.appendState(nil)); err != nil {
		return err
	}
	for i, op := range s.cfg.Operators {
		if err := op.Snapshot(w); err != nil {
			return &OperatorError{Operator: i, Line: s.stats.Line, Err: err}
		}
	}
	return nil
}

// Restore sets the subtask and its operators to the checkpoint r holds
// (written by [Subtask.Snapshot] of a subtask with the same configuration)
// before Run: Run then reads the input from its start, skips the records
// the checkpoint covers and goes on from there, so that the outputs after
// the checkpoint are those of the subtask that took it. The input must be
// the same. An operator's error comes back as an [*OperatorError].
func (s *Subtask[T]) Restore(r state.Reader) error {
	if s.ran {
		return errors.New("runtime: subtask: Restore after Run")
	}
	found := false
	for rec, err := range r.Records(SubtaskStateID, state.AllKeyGroups) {
		if err != nil {
			return err
		}
		if rec.Key.KeyGroup != 0 || rec.Key.Key != "" {
			continue
		}
		if err := s.decodeState(rec.Value); err != nil {
			return err
		}
		found = true
	}
	if !found {
		return errors.New("runtime: subtask: the checkpoint has no subtask record")
	}
	for i, op := range s.cfg.Operators {
		if err := op.Restore(r); err != nil {
			return &OperatorError{Operator: i, Line: s.stats.Line, Err: err}
		}
	}
	return nil
}

var errCorruptState = errors.New("runtime: subtask: corrupt checkpoint record (or one of another configuration)")

func (s *Subtask[T]) appendState(b []byte) []byte {
	st := &s.stats
	b = append(b, subtaskStateVersion)
	for _, n := range []int64{st.Records, st.Decoded, st.Dead, st.Ahead, st.FirstDeadLine, st.Line, int64(st.Watermark)} {
		b = binary.AppendVarint(b, n)
	}
	b = binary.AppendUvarint(b, uint64(len(st.FirstDeadReason)))
	b = append(b, st.FirstDeadReason...)
	b = binary.AppendUvarint(b, uint64(len(st.FirstDeadFile)))
	b = append(b, st.FirstDeadFile...)
	g := s.cfg.Watermarks
	b = binary.AppendVarint(b, int64(g.n))
	b = appendBool(b, g.seen)
	b = binary.AppendVarint(b, int64(g.max))
	b = binary.AppendVarint(b, int64(g.emitted))
	if s.guard != nil {
		b = appendBool(b, s.guard.started)
		b = binary.AppendVarint(b, int64(s.guard.max))
	}
	return b
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func (s *Subtask[T]) decodeState(b []byte) error {
	r := event.Reader{B: b, Corrupt: errCorruptState}
	v := r.Byte()
	if r.Err == nil && v > subtaskStateVersion {
		return state.LaterRecord("the subtask's record", uint64(v), subtaskStateVersion)
	}
	if v < 1 {
		return fmt.Errorf("runtime: subtask: checkpoint record of an unknown version")
	}
	var st Stats
	for _, p := range []*int64{&st.Records, &st.Decoded, &st.Dead, &st.Ahead, &st.FirstDeadLine, &st.Line} {
		*p = r.Varint()
	}
	st.Watermark = event.Watermark(r.Varint())
	st.FirstDeadReason = string(r.Bytes(r.Count()))
	if v >= 2 {
		st.FirstDeadFile = string(r.Bytes(r.Count()))
	}
	g := *s.cfg.Watermarks
	g.n = int(r.Varint())
	g.seen = r.Bool()
	g.max = event.Time(r.Varint())
	g.emitted = event.Watermark(r.Varint())
	var guard aheadGuard
	if s.guard != nil {
		guard = *s.guard
		guard.started = r.Bool()
		guard.max = event.Time(r.Varint())
		guard.held = nil
	}
	if r.Err != nil || len(r.B) != 0 || g.n < 0 || g.n >= g.every {
		return errCorruptState
	}
	s.stats = st
	*s.cfg.Watermarks = g
	if s.guard != nil {
		*s.guard = guard
	}
	s.skipTo = st.Line
	return nil
}
