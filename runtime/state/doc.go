// Package state holds the keyed state of runtime subtasks: what an
// operator's Snapshot hook writes at a checkpoint and its Restore hook
// reads back.
//
// State is a table of records, one per (operator, key group, key) ([Key]),
// each a []byte value the operator encodes itself. Operators write the
// records of a checkpoint through a [Writer] (Put and Delete, only what
// changed) and read them back through a [Reader], by operator and
// optionally by a range of key groups (the unit that moves when a job is
// rescaled). [AppendKey] encodes a key so that the records of an operator,
// or of a key group of it, are one contiguous range of an ordered store.
//
// [Mem] is the in-memory store; [Mem.Snapshot] freezes it as a
// checkpoint. The Pebble store (behind an in-memory write-back cache) of
// the streaming runtime comes with later issues and plugs into the same
// interfaces.
//
// # Invariants
//
//   - A store is owned by one subtask's goroutine; snapshots are immutable.
//   - A snapshot never sees writes made after it was taken.
//   - Records are yielded in key order: the state of a job restores the
//     same way whatever the store.
//   - For the Pebble store to come: one database per subtask; a snapshot
//     is taken at the subtask's checkpoint barrier, after the write-back
//     cache has been flushed; a checkpoint directory is written as
//     chk-N.tmp, fsynced, renamed and its parent fsynced, metadata last;
//     chk-N is never opened in place (it is hard-linked into a fresh
//     directory on restore); only keys dirtied since the last checkpoint
//     are written (Go maps have no copy-on-write). Its unit tests run on an
//     in-memory file system, never on the real disk.
//
// # Imports
//
// Package state may import, of ours, only event. It is the only package of
// the module that may import github.com/cockroachdb/pebble. internal/lint
// enforces both rules.
package state
