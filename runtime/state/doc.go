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
// Two stores implement both interfaces with the same behaviour: [Mem],
// in memory ([Mem.Snapshot] freezes it, copy-on-write), and [Pebble], a
// Pebble database in a working directory of its own, behind a write-back
// batch ([Pebble.Flush]; reads flush it first). Operators write only the
// keys changed since the previous checkpoint, so a store accumulates
// across checkpoints: it is the whole state, not a delta.
//
// # Checkpoints
//
// [CheckpointDir] is the embedded checkpoint store over a state
// directory. [CheckpointDir.Begin] returns a [CheckpointWriter] for
// checkpoint N, written into chk-N.tmp: each subtask's store
// ([CheckpointWriter.AddPebble]: a Pebble checkpoint, hard links to its
// sstables, hence incremental; [CheckpointWriter.AddMem]: a file of its
// records) and the caller's named metadata blobs
// ([CheckpointWriter.PutMeta]: source positions, watermarks, the ruleset
// version, the configuration). [CheckpointWriter.Commit] makes it chk-N,
// marks it complete and keeps the last K. [CheckpointDir.Latest] opens the
// newest complete checkpoint, and a [Checkpoint] restores each store into
// a fresh working directory ([Checkpoint.OpenPebble]) or into memory
// ([Checkpoint.OpenMem]).
//
// # Invariants
//
//   - A store is owned by one subtask's goroutine; snapshots are immutable.
//   - A snapshot never sees writes made after it was taken.
//   - Records are yielded in key order: the state of a job restores the
//     same way whatever the store.
//   - One Pebble database per subtask. It is checkpointed at the subtask's
//     checkpoint barrier, after its write-back batch has been flushed, with
//     its write-ahead log flushed and synced into the checkpoint. Its own
//     commits are not synced: a restore always starts from a checkpoint,
//     never from a working directory.
//   - A checkpoint is written as chk-N.tmp; its files and directories are
//     synced, it is renamed chk-N, the state directory is synced, and the
//     marker chk-N/_COMPLETE (format version, checksum, manifest) is
//     written last, through a synced _COMPLETE.tmp and a rename. A chk-N
//     without its marker, or a chk-N.tmp, is torn: skipped on restore,
//     removed later. A marker that does not read (another format version,
//     a bad checksum) is an error, never skipped.
//   - A checkpoint loses its marker before its files when it is deleted.
//   - chk-N is never opened in place: a restore hard-links its sstables
//     (immutable) into a fresh working directory and copies its other
//     files, which opening a database writes.
//   - Working directories are on the file system of the state directory,
//     or checkpoints copy their sstables instead of linking them.
//
// Unit tests run Pebble on pebble's in-memory file system (vfs.NewMem;
// vfs.NewCrashableMem for crashes at each step of a commit), and on the
// real disk, under t.TempDir, where hard links and their counts are
// checked.
//
// # Imports
//
// Package state may import, of ours, only event. It is the only package of
// the module that may import github.com/cockroachdb/pebble. internal/lint
// enforces both rules.
package state
