// Package runtime is Cepheus's generic event-time dataflow. It knows nothing
// of NFAs or rules: it hosts keyed operators (the CEP operator of package
// cep is one) through the [KeyedOperator] interface and moves events and
// watermarks to them.
//
// # What exists today
//
// The minimal pieces a backtest needs, reached through package cep. Later
// issues extend them rather than replace them.
//
//   - [FileSource] reads JSON lines from a file, a gzip file (detected by
//     its magic bytes; a ".gz" name without them is an error) or standard
//     input ("-"), through one large buffer. Each [Record] carries its
//     1-based line number and byte offset; CRLF is tolerated, blank lines
//     are skipped (but counted), and a line over the maximum length becomes
//     a record with a reason instead of an error. [Source] is the interface
//     a subtask reads; [ProgressSource] adds bytes read and total size.
//   - The decoder of the records is [jsonev.Decoder] (package
//     event/jsonev, the one JSON codec of the module, shared with the
//     in-file tests of package rules), in lenient mode: fields outside the
//     schema are skipped, the last of a repeated key wins.
//   - [WatermarkGenerator] is Flink's bounded-out-of-orderness generator:
//     watermark = largest timestamp - bound - 1 ms, offered every N events
//     and emitted only when it advanced; a bounded input ends with
//     event.MaxTime.
//   - [Subtask] runs one source through the decoder and the generator into
//     one or more [KeyedOperator] values (each keying by itself) on the
//     calling goroutine: each element goes to every operator, then the
//     watermark it advanced, then, at the end of the input, the final
//     watermark. Operators emit into the [Collector] the subtask passes to
//     every call (typed: a subtask's operators emit values of one type).
//     Bad records go to a [DeadLetter] sink, such as the JSON-lines
//     [DeadLetterWriter] (its lines encoded by [jsonev.AppendDeadLetter]).
//   - Checkpoints: [Subtask.Snapshot] writes the subtask's own record (the
//     line reached, its counters, the watermark generator and the
//     far-ahead guard) and then each operator's, through the operator's
//     Snapshot hook, into a [state.Writer]; [Subtask.Restore] reads them
//     back through a [state.Reader], and Run then skips the lines the
//     checkpoint covers. SubtaskConfig.Checkpoint is called every
//     CheckpointEvery records, between two records, until in-band
//     barriers exist.
//   - Sinks driven by checkpoints ([CommitSink], Flink's two-phase-commit
//     sink): [FileSink] is exactly once (part files written under hidden
//     names, renamed to *.jsonl when their checkpoint completes, recovered
//     from a [PendingState] stored in the checkpoint); [WriterSink] (stdout)
//     is at most once after a crash. Not yet wired into a run: the
//     streaming runtime will call PreCommit on each barrier and Commit
//     when the checkpoint is complete.
//
// # What it will own
//
//   - more sources (Kafka partitions, followed files) and sinks;
//   - idleness and the minimum watermark over a subtask's inputs;
//   - shards (key groups in embedded mode, partitions in Kafka mode) and the
//     subtasks that run them, each on its own goroutine;
//   - checkpoint barriers, their alignment and the checkpoint coordinator;
//   - the async stage (bounded in flight, ordered or unordered within a
//     watermark) and salted two-phase aggregation for skewed keys.
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
//     sits inside a batch. (For the multi-goroutine runtime to come.)
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
