package runtime

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cepheus-cep/cepheus/runtime/state"
)

// TestLaterRecordVersions: a source position, a sink's pending state and
// the partition watermarks of a version above this build's (a later
// build's checkpoint: going back after an upgrade) are refused as such
// (state.ErrCheckpointVersion, naming the versions), as the subtask's
// record is (TestSubtaskRestoreVersion1); they said "unknown version" or
// "corrupt" alone. Version 0 is still no later build's.
func TestLaterRecordVersions(t *testing.T) {
	pos, err := Position{File: "a.jsonl", Offset: 10, Line: 2}.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	pend, err := PendingState{}.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	newWatermarks := func() *PartitionWatermarks {
		w, err := NewPartitionWatermarks(PartitionWatermarksConfig{})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	wms, err := newWatermarks().AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		what    string
		rec     []byte
		newest  byte
		restore func([]byte) error
	}{
		{"a source position", pos, positionVersion, func(b []byte) error { _, _, err := DecodePosition(b); return err }},
		{"a sink's pending state", pend, pendingStateVersion, func(b []byte) error { var p PendingState; return p.UnmarshalBinary(b) }},
		{"the partition watermarks", wms, partitionWatermarksVersion, func(b []byte) error { return newWatermarks().Restore(b) }},
	} {
		if err := tt.restore(tt.rec); err != nil {
			t.Fatalf("%s of this build: %v", tt.what, err)
		}
		later := slices.Clone(tt.rec)
		later[0] = tt.newest + 1
		err := tt.restore(later)
		want := fmt.Sprintf("%s of version %d, this build reads up to %d", tt.what, tt.newest+1, tt.newest)
		if !errors.Is(err, state.ErrCheckpointVersion) || err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s of version %d: %v, want a later build's record", tt.what, tt.newest+1, err)
		}
		later[0] = 0
		if err := tt.restore(later); err == nil || errors.Is(err, state.ErrCheckpointVersion) {
			t.Errorf("%s of version 0: %v, want an error of its own", tt.what, err)
		}
	}
}
