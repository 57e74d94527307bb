// Package runtime is Cepheus's generic event-time dataflow. It knows nothing
// of NFAs or rules: it hosts keyed operators (the CEP operator of package
// cep is one) through the [KeyedOperator] interface and moves events and
// watermarks to them.
//
// # What it holds
//
// The pieces of the streaming runtime that package cep assembles into a
// backtest ([cep.Engine.Run]) and a live job ([cep.Engine.Stream]); the
// job's coordinator, its checkpoint barriers and the Kafka wiring are
// cep's, the Kafka clients runtime/kafka's, the state backends
// runtime/state's.
//
//   - Sources: [FileSource] reads JSON lines from a file, a gzip file
//     (detected by its magic bytes; a ".gz" name without them is an
//     error) or standard input ("-"), through one large buffer. Each
//     [Record] carries its 1-based line number and byte offset; CRLF is
//     tolerated, blank lines are skipped (but counted), and a line over
//     the maximum length becomes a record with a reason instead of an
//     error. [Source] is the interface a subtask reads; [ProgressSource]
//     adds bytes read and total size. [PartitionReader] reads the files
//     of a directory (or one file) as partitions, each in its own
//     goroutine, following them as they grow (follow.go: rotation,
//     deletion, closing quiet files), in [Batch] values that carry each
//     partition's [Position] for the checkpoints.
//   - The decoder of the records is [jsonev.Decoder] (package
//     event/jsonev, the one JSON codec of the module, shared with the
//     in-file tests of package rules), in lenient mode: fields outside the
//     schema are skipped, the last of a repeated key wins.
//   - Time: [WatermarkGenerator] is Flink's bounded-out-of-orderness
//     generator (watermark = largest timestamp - bound - 1 ms, emitted only
//     when it advanced; a bounded input ends with event.MaxTime);
//     [PartitionWatermarks] keeps one per partition and gives their
//     minimum, leaving out the idle and finished ones; [AheadGuard] sends
//     an event too far ahead of the stream's time to the dead letters
//     instead of letting it move the watermark.
//   - [Subtask] runs a source through the decoder and the generator into
//     one or more [KeyedOperator] values on the calling goroutine: each
//     element goes to every operator, then the watermark it advanced, then,
//     at the end of the input, the final watermark. Operators emit into the
//     [Collector] the subtask passes to every call. Bad records go to a
//     [DeadLetter] sink, such as the JSON-lines [DeadLetterWriter] (its
//     lines encoded by [jsonev.AppendDeadLetter]). [Subtask.Snapshot] and
//     [Subtask.Restore] write and read the subtask's own record and each
//     operator's through a [state.Writer] and [state.Reader].
//   - Sinks driven by checkpoints ([CommitSink], Flink's two-phase-commit
//     sink): [FileSink] is exactly once (part files written under hidden
//     names, renamed to *.jsonl when their checkpoint completes, recovered
//     from a [PendingState] stored in the checkpoint); [WriterSink]
//     (stdout) is at most once after a crash.
//   - Velocity aggregates: [Aggregator] holds each event until the
//     watermark passes it and sets the windows' values in it (count, sum,
//     avg, min, max, distinct count; sliding or tumbling, per key);
//     [ParallelAggregator] computes the same values on several workers,
//     salting hot keys over them and merging their partial aggregates.
//     Both checkpoint their windows and the events they hold.
//   - The lock of a state or output directory (dirlock_*.go) and the
//     check that a file read is still linked (unlinked_*.go).
//
// # Invariants
//
//   - Watermarks come from record timestamps, never from a wall-clock
//     ticker, so a replay produces the same watermarks. They only go
//     forward, and an element always reaches the operators before the
//     watermark it advanced.
//   - An event handed to an operator is never modified or reused
//     afterwards: operators keep events (the NFA holds matched ones), so
//     the subtask decodes every record into a fresh event.
//   - No record is dropped silently: it becomes an event, or a dead record
//     with its line, offset and reason. (Late events are the operator's to
//     count and emit.)
//   - Each subtask goroutine is the single owner of its operators and
//     their keyed state; there are no locks on the hot path.
//   - Watermarks, checkpoint barriers and ruleset changes travel in band,
//     in the same channels as events; channels are bounded, so a slow
//     subtask slows its producers and nothing is dropped; a barrier never
//     sits inside a batch.
//   - Sources that block (stdin in a live run, a followed file) read in
//     their own goroutine, so that watermarks and barriers still flow while
//     the input is quiet. A backtest's bounded file or stdin is read on the
//     subtask's goroutine.
//
// # Imports
//
// Package runtime may import, of ours, only event, event/jsonev and
// runtime/state. The
// standard library's runtime package is always imported as goruntime, here
// and everywhere else in the module. internal/lint enforces both rules.
package runtime
