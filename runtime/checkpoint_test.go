package runtime

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/event/jsonev"
	"github.com/cepheus-cep/cepheus/runtime/state"
)

// collected is a Collector that keeps what it is given.
type collected struct{ out []string }

func (c *collected) Collect(s string) error {
	c.out = append(c.out, s)
	return nil
}

var errStop = errors.New("stop after the checkpoint")

// checkpointInput has out-of-order times, a dead line and a blank one.
const checkpointInput = `{"card":"a","ts":10}
{"card":"b","ts":5}
not json

{"card":"a","ts":20}
{"card":"c","ts":18}
{"card":"a","ts":30}
{"ts":31}
{"card":"b","ts":40}
{"card":"c","ts":33}
{"card":"a","ts":50}
`

// runCheckpointed runs checkpointInput through two recorders, from the
// checkpoint in restore when it is set; with stopAt > 0 it snapshots into
// a fresh store after stopAt records and stops there.
func runCheckpointed(t *testing.T, every int, restore state.Reader, stopAt int64) (log, out []string, st Stats, snap *state.MemSnapshot) {
	t.Helper()
	src, err := NewFileSource(strings.NewReader(checkpointInput), "test", SourceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	dec, _ := jsonev.NewDecoder(jsonev.Config{Schema: subtaskSchema, TimeField: "ts", Required: []string{"card"}})
	wm, _ := NewWatermarkGenerator(3*time.Millisecond, every)
	ops := []*recorder{{name: "op0", log: &log}, {name: "op1", log: &log}}
	var c collected
	cfg := SubtaskConfig[string]{Source: src, Decoder: dec, Watermarks: wm,
		Operators: []KeyedOperator[string]{ops[0], ops[1]}, Output: &c}
	var sub *Subtask[string]
	if stopAt > 0 {
		cfg.CheckpointEvery = stopAt
		cfg.Checkpoint = func(Stats) error {
			m := state.NewMem()
			if err := sub.Snapshot(m); err != nil {
				return err
			}
			snap = m.Snapshot()
			return errStop
		}
	}
	sub, err = NewSubtask(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if restore != nil {
		if err := sub.Restore(restore); err != nil {
			t.Fatal(err)
		}
		for _, op := range ops {
			if len(op.events) == 0 {
				t.Errorf("%s: nothing restored", op.name)
			}
		}
	}
	err = sub.Run(context.Background())
	if stopAt > 0 && !errors.Is(err, errStop) || stopAt == 0 && err != nil {
		t.Fatalf("Run = %v", err)
	}
	return log, c.out, sub.Stats(), snap
}

// TestSubtaskCheckpointRestore: a subtask restored from a checkpoint taken
// after n records goes on exactly as the one that took it: the same
// operator calls, outputs and counters as the rest of an uninterrupted
// run.
func TestSubtaskCheckpointRestore(t *testing.T) {
	for _, every := range []int{1, 2} {
		wantLog, wantOut, wantStats, _ := runCheckpointed(t, every, nil, 0)
		for n := int64(1); n < 10; n++ {
			t.Run(fmt.Sprintf("every=%d/after=%d", every, n), func(t *testing.T) {
				log1, out1, _, snap := runCheckpointed(t, every, nil, n)
				log2, out2, st, _ := runCheckpointed(t, every, snap, 0)
				if got := append(log1, log2...); !slices.Equal(got, wantLog) {
					t.Errorf("operator calls:\n got %q\nwant %q", got, wantLog)
				}
				if got := append(out1, out2...); !slices.Equal(got, wantOut) {
					t.Errorf("outputs:\n got %q\nwant %q", got, wantOut)
				}
				if st != wantStats {
					t.Errorf("stats:\n got %+v\nwant %+v", st, wantStats)
				}
			})
		}
	}
}

// recorderSubtask is a subtask over input with one recorder operator.
func recorderSubtask(t *testing.T, input string) *Subtask[string] {
	t.Helper()
	src, _ := NewFileSource(strings.NewReader(input), "test", SourceConfig{})
	dec, _ := jsonev.NewDecoder(jsonev.Config{Schema: subtaskSchema, TimeField: "ts"})
	wm, _ := NewWatermarkGenerator(0, 1)
	st, err := NewSubtask(SubtaskConfig[string]{Source: src, Decoder: dec, Watermarks: wm,
		Operators: []KeyedOperator[string]{&recorder{name: "op", log: new([]string)}}})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestSubtaskRestoreErrors(t *testing.T) {
	newSub := func(input string) *Subtask[string] { return recorderSubtask(t, input) }
	if err := newSub("").Restore(state.NewMem()); err == nil || !strings.Contains(err.Error(), "no subtask record") {
		t.Errorf("Restore(empty) = %v", err)
	}
	bad := state.NewMem()
	bad.Put(state.Key{Operator: SubtaskStateID}, []byte{subtaskStateVersion, 1})
	if err := newSub("").Restore(bad); !errors.Is(err, errCorruptState) {
		t.Errorf("Restore(corrupt) = %v", err)
	}
	// A checkpoint after line 2 of an input of one line.
	long := newSub(`{"card":"a","ts":1}` + "\n" + `{"card":"a","ts":2}`)
	if err := long.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	m := state.NewMem()
	if err := long.Snapshot(m); err != nil {
		t.Fatal(err)
	}
	short := newSub(`{"card":"a","ts":1}`)
	if err := short.Restore(m); err != nil {
		t.Fatal(err)
	}
	if err := short.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "ends before line 2") {
		t.Errorf("Run of a shorter input = %v", err)
	}
	if err := long.Restore(m); err == nil {
		t.Error("Restore after Run = nil")
	}
}

// TestSubtaskSnapshotHeld: no checkpoint while the far-ahead guard holds
// events back.
func TestSubtaskSnapshotHeld(t *testing.T) {
	src, _ := NewFileSource(strings.NewReader(`{"card":"a","ts":1}`), "test", SourceConfig{})
	dec, _ := jsonev.NewDecoder(jsonev.Config{Schema: subtaskSchema, TimeField: "ts"})
	wm, _ := NewWatermarkGenerator(0, 1)
	var sub *Subtask[string]
	var snapErr error
	sub, _ = NewSubtask(SubtaskConfig[string]{Source: src, Decoder: dec, Watermarks: wm,
		Operators: []KeyedOperator[string]{&recorder{name: "op", log: new([]string)}}, MaxAhead: time.Hour,
		CheckpointEvery: 1, Checkpoint: func(Stats) error {
			snapErr = sub.Snapshot(state.NewMem())
			return nil
		}})
	if err := sub.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(snapErr, ErrHeld) {
		t.Errorf("Snapshot with a held start event = %v, want ErrHeld", snapErr)
	}
	if _, err := NewSubtask(SubtaskConfig[string]{Source: src, Decoder: dec, Watermarks: wm,
		Operators: []KeyedOperator[string]{&nopOperator{}}, Checkpoint: func(Stats) error { return nil }}); err == nil {
		t.Error("Checkpoint without CheckpointEvery accepted")
	}
	_ = event.MaxTime
}

// TestSubtaskRestoreVersion1: a subtask record of version 1, written
// before the first dead letter's file was kept, is still restored (with no
// file); a version past the known ones is refused.
func TestSubtaskRestoreVersion1(t *testing.T) {
	input := `{"card":"a","ts":1}` + "\nnot json\n" + `{"card":"a","ts":2}`
	newSub := func() *Subtask[string] { return recorderSubtask(t, input) }
	ran := newSub()
	if err := ran.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	ran.stats.FirstDeadFile = "in.jsonl" // as a merged source's record names it
	v2 := ran.appendState(nil)
	// Version 1: the same record without the file's length and bytes,
	// which follow the 7 counters and the reason.
	r := event.Reader{B: v2[1:], Corrupt: errCorruptState}
	for range 7 {
		r.Varint()
	}
	r.Bytes(r.Count())
	at := len(v2) - len(r.B)
	fileLen, n := binary.Uvarint(v2[at:])
	if r.Err != nil || n <= 0 || ran.stats.FirstDeadFile == "" || fileLen != uint64(len(ran.stats.FirstDeadFile)) {
		t.Fatalf("the version 2 record %x: file %q at %d", v2, ran.stats.FirstDeadFile, at)
	}
	v1 := append([]byte{1}, v2[1:at]...)
	v1 = append(v1, v2[at+n+int(fileLen):]...)

	m := state.NewMem()
	m.Put(state.Key{Operator: SubtaskStateID}, v1)
	restored := newSub()
	if err := restored.Restore(m); err != nil {
		t.Fatalf("Restore(version 1) = %v", err)
	}
	want := ran.stats
	want.FirstDeadFile = ""
	if restored.stats != want {
		t.Errorf("restored stats:\n got %+v\nwant %+v", restored.stats, want)
	}
	m.Put(state.Key{Operator: SubtaskStateID}, append([]byte{subtaskStateVersion + 1}, v2[1:]...))
	// A later build's record is refused as such (state.ErrCheckpointVersion,
	// naming its version), not as one of an unknown version.
	if err := newSub().Restore(m); !errors.Is(err, state.ErrCheckpointVersion) || !strings.Contains(err.Error(), fmt.Sprintf("the subtask's record of version %d, this build reads up to %d", subtaskStateVersion+1, subtaskStateVersion)) {
		t.Errorf("Restore(version %d) = %v, want a later build's record", subtaskStateVersion+1, err)
	}
}
