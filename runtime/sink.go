package runtime

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cepheus-cep/cepheus/runtime/state"
)

// CommitSink is a sink of JSON lines driven by checkpoints: Flink's
// two-phase commit sink (TwoPhaseCommitSinkFunction, FileSink). Lines
// written between two checkpoint barriers form one transaction. On
// barrier N the runtime calls PreCommit(N), which makes the transaction
// durable but not visible and returns the [PendingState] the runtime
// stores in checkpoint N. When checkpoint N is complete (its metadata
// durable), the runtime calls Commit(N), which makes every transaction of
// checkpoints up to N visible. On restore from checkpoint N the runtime
// calls Recover with the PendingState stored in N, before the first Write;
// for a fresh start, with the zero PendingState. A sink N stored no state
// for (its output was left out of the run that took N) recovers N without
// parts, PendingState{Subtask: s, Checkpoint: N}, not the zero state: its
// output of checkpoints up to N, written by earlier runs, is committed.
//
// What a reader sees after a crash depends on the implementation:
// [FileSink] is exactly-once, [WriterSink] at-most-once.
//
// A CommitSink is used by one goroutine. After an I/O error every method
// but Close returns that error again: the job must stop, restart and
// restore.
type CommitSink interface {
	// Write appends line, one or more whole JSON lines each ending in
	// '\n', to the open transaction. The sink copies line; the caller
	// may reuse it at once. A line without its final '\n' is refused with
	// [ErrNotLine].
	Write(line []byte) error
	// PreCommit ends the open transaction at the barrier of checkpoint
	// (ids increase; one not above the previous one is an error), makes
	// it durable and returns what checkpoint must store.
	PreCommit(checkpoint int64) (PendingState, error)
	// Commit makes visible the transactions of every checkpoint up to
	// checkpoint that were pre-committed and are not yet committed.
	// Committing twice, or a checkpoint with nothing pending, is a no-op.
	Commit(checkpoint int64) error
	// Recover sets the sink to the checkpoint restored (restored is what
	// PreCommit returned for it, the checkpoint without parts when it
	// holds no state for the sink, or the zero value for a fresh start)
	// and finishes or discards what earlier runs left. It is called once,
	// before the first Write.
	Recover(restored PendingState) error
	// Close releases the sink. Lines not pre-committed are dropped (a
	// restore replays them); pre-committed transactions stay for a later
	// Commit or Recover.
	Close() error
}

// ErrNotLine is returned by [CommitSink.Write] for data that does not end
// in '\n': a sink keeps whole lines only.
var ErrNotLine = errors.New("runtime: sink: data does not end in a newline")

// ErrSinkClosed is returned by the methods of a closed sink.
var ErrSinkClosed = errors.New("runtime: sink: closed")

// PendingState is what a [CommitSink] needs from a checkpoint to recover:
// the checkpoint and the transactions pre-committed up to it but not yet
// known to be committed. Its zero value is the state of a fresh start.
// Store it in the checkpoint with [PendingState.AppendBinary] (a few
// bytes) and read it back with [PendingState.UnmarshalBinary].
type PendingState struct {
	// Subtask is the index of the subtask whose sink wrote the state.
	Subtask int
	// Checkpoint is the checkpoint whose PreCommit returned the state; 0
	// for none.
	Checkpoint int64
	// Parts are the checkpoints, ascending and none above Checkpoint,
	// whose transactions were pre-committed and not yet committed when
	// PreCommit(Checkpoint) returned: a [FileSink] part file each.
	// Checkpoint itself is missing when its transaction was empty; an
	// earlier one is present when its own checkpoint did not complete
	// (its lines then belong to this checkpoint) or its commit had not
	// yet run.
	Parts []int64
}

// pendingStateVersion is the first byte of an encoded PendingState.
const pendingStateVersion = 1

// AppendBinary appends the encoding of p to b (encoding.BinaryAppender).
func (p PendingState) AppendBinary(b []byte) ([]byte, error) {
	if err := p.validate(); err != nil {
		return b, err
	}
	b = append(b, pendingStateVersion)
	b = binary.AppendUvarint(b, uint64(p.Subtask))
	b = binary.AppendUvarint(b, uint64(p.Checkpoint))
	b = binary.AppendUvarint(b, uint64(len(p.Parts)))
	prev := int64(0)
	for _, c := range p.Parts {
		b = binary.AppendUvarint(b, uint64(c-prev)) // ascending: deltas stay small
		prev = c
	}
	return b, nil
}

// MarshalBinary returns the encoding of p (encoding.BinaryMarshaler).
func (p PendingState) MarshalBinary() ([]byte, error) { return p.AppendBinary(nil) }

// UnmarshalBinary sets p to the state data encodes, as written by
// [PendingState.AppendBinary] (encoding.BinaryUnmarshaler).
func (p *PendingState) UnmarshalBinary(data []byte) error {
	if len(data) > 0 && data[0] > pendingStateVersion {
		return state.LaterRecord("a sink's pending state", uint64(data[0]), pendingStateVersion)
	}
	if len(data) == 0 || data[0] != pendingStateVersion {
		return errCorruptPending
	}
	data = data[1:]
	next := func() uint64 {
		v, n := binary.Uvarint(data)
		if n <= 0 {
			data = nil
			return 1 << 63 // out of every range below
		}
		data = data[n:]
		return v
	}
	sub, ck, n := next(), next(), next()
	if sub > 1<<31 || ck >= 1<<63 || n > uint64(len(data)) {
		return errCorruptPending
	}
	q := PendingState{Subtask: int(sub), Checkpoint: int64(ck)}
	if n > 0 {
		q.Parts = make([]int64, 0, n)
	}
	prev := int64(0)
	for range n {
		d := next()
		if d >= 1<<63 {
			return errCorruptPending
		}
		prev += int64(d)
		q.Parts = append(q.Parts, prev)
	}
	if len(data) != 0 {
		return errCorruptPending
	}
	if err := q.validate(); err != nil {
		return err
	}
	*p = q
	return nil
}

var errCorruptPending = errors.New("runtime: sink: corrupt pending state")

// validate checks the invariants of the Parts documentation.
func (p PendingState) validate() error {
	if p.Subtask < 0 || p.Checkpoint < 0 {
		return fmt.Errorf("runtime: sink: pending state of subtask %d, checkpoint %d", p.Subtask, p.Checkpoint)
	}
	prev := int64(0)
	for _, c := range p.Parts {
		if c <= prev || c > p.Checkpoint {
			return fmt.Errorf("runtime: sink: pending state of checkpoint %d has parts %v (not ascending, or above it)",
				p.Checkpoint, p.Parts)
		}
		prev = c
	}
	return nil
}

// isZero reports whether p is the state of a fresh start.
func (p PendingState) isZero() bool { return p.Checkpoint == 0 && len(p.Parts) == 0 }
