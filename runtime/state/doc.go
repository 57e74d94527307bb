// Package state will hold the keyed state of runtime subtasks: a Pebble store
// behind an in-memory write-back cache, and its snapshots for checkpoints.
//
// This is a placeholder: the package has no code yet. Its code arrives with
// later issues, and until then nothing here should be relied on.
//
// # Invariants
//
//   - One Pebble database per subtask, owned by that subtask's goroutine.
//   - A snapshot is taken at the subtask's checkpoint barrier, after the
//     write-back cache has been flushed.
//   - A checkpoint directory is written as chk-N.tmp, fsynced, renamed and its
//     parent fsynced, metadata last; chk-N is never opened in place (it is
//     hard-linked into a fresh directory on restore).
//   - Only keys dirtied since the last checkpoint are snapshotted (Go maps
//     have no copy-on-write).
//   - Unit tests run on an in-memory file system, never on the real disk.
//
// # Imports
//
// Package state may import, of ours, only event. It is the only package of
// the module that may import github.com/cockroachdb/pebble. internal/lint
// enforces both rules.
package state
