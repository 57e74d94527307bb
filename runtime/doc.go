// Package runtime will be Cepheus's generic event-time dataflow. It knows
// nothing of NFAs or rules: it hosts keyed operators (the CEP operator of
// package cep is one) through an operator interface and moves events,
// watermarks and checkpoint barriers between them.
//
// This is a placeholder: the package has no code yet. Its code arrives with
// later issues, and until then nothing here should be relied on.
//
// # What it will own
//
//   - the keyed-operator interface, sources and sinks;
//   - watermark generation per source partition (bounded out-of-orderness,
//     idleness) and the minimum over a subtask's inputs;
//   - shards (key groups in embedded mode, partitions in Kafka mode) and the
//     subtasks that run them;
//   - checkpoint barriers, their alignment and the checkpoint coordinator;
//   - the async stage (bounded in flight, ordered or unordered within a
//     watermark) and salted two-phase aggregation for skewed keys.
//
// # Invariants
//
//   - Watermarks, checkpoint barriers and ruleset changes travel in band, in
//     the same channels as events.
//   - Channels are bounded: a slow subtask slows its producers; nothing is
//     dropped.
//   - Each subtask goroutine is the single owner of its keyed state; there
//     are no locks on the hot path.
//   - A barrier never sits inside a batch: pending batches are flushed, then
//     the barrier goes to every output.
//   - Watermarks come from record timestamps, never from a wall-clock ticker,
//     so a replay produces the same watermarks.
//
// # Imports
//
// Package runtime may import, of ours, only event and runtime/state. The
// standard library's runtime package is always imported as goruntime, here
// and everywhere else in the module. internal/lint enforces both rules.
package runtime
