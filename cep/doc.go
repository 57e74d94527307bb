// Package cep is the CEP library of Cepheus on top of the runtime: the
// keyed CEP operator ([Operator], [SharedOperator]) and the public facade,
// [Engine], that wires rules, lookups (package enrich), the runtime and
// state together.
//
// # The engine
//
// [New] builds an [Engine] from options ([WithRuleset], [WithAlerts],
// [WithLate], [WithDeadLetters], [WithOutOfOrderness],
// [WithWatermarkEvery], [WithLimits], [WithInputPolicy], [WithLookups],
// [WithAggregateWorkers], [WithGCPercent], [WithMemoryLimit],
// [WithObservers], [WithProgress]), each documenting its default, and
// checks them together. [Engine.Run] runs the ruleset over a bounded
// [EventSource] and returns a [Summary]: a backtest is that run, the live
// operator and watermark strategy over a bounded input. Every alert is an
// [Alert] value, written by the one [AlertEncoder] and shown to the
// observers ([Observer], [EventObserver]); the label statistics of a
// backtest are such an observer, [Labels]. [Engine.Stream] runs the same
// rules as a live, checkpointed job ([StreamConfig]), its alerts written to
// the outputs the configuration names and handed to its OnAlert function
// (at least once).
//
// Inside a run, one runtime subtask hosts one operator that holds a
// SharedOperator per key specification and emits alerts (in rule order)
// and late events into the subtask's collector. Its snapshot hook writes
// each SharedOperator's snapshot as one record of runtime/state, and the
// engine's counters as another.
//
// # The operator
//
// An [Operator] reproduces Flink's CepOperator for one subtask: it keys
// each element, buffers it per key until the watermark passes it, then
// feeds the key's elements to the key's [nfa.Run] in timestamp order (ties
// by the configured comparator, else arrival order), advances the run's
// time to the watermark so that within windows expire, and reports matches,
// timed-out partial matches, late elements and overflowing elements in one
// ordered [Output]. A processing-time mode stamps each element with the
// operator's processing clock instead. [Operator.Snapshot] and
// [RestoreOperator] carry the whole state across a restart.
//
// A [SharedOperator] hosts several rules with the same key (Flink would run
// one CepOperator per rule): each element is keyed, buffered, sorted and
// timed once per key, then offered to the run of every rule at that key.
// Per rule its output is item for item what an Operator of that rule
// alone gives: matches and timeouts with the same At and Wake (the rule's
// own due time at the key) and, within one time advance, the rule's own
// order of keys. That order is (due time, rank of the rule's state at the
// key, key bytes), where the rank is the Seq of the element whose arrival
// created that state (docs/decisions.md, "Tie-break for equal
// timestamps"), and each rule keeps its own ranks, because a key's state
// can be dropped for one rule (its run emptied) and kept for another: the
// next element then ranks the key last for the first rule only. An
// element a rule's idle run would only ignore is not fed to it (the exact
// relevance filter, docs/decisions.md). [SharedOperator.SnapshotTo] writes
// the state as records, one per key changed since the previous checkpoint,
// and [RestoreSharedOperatorFrom] reads them back. Late,
// overflowing and watermark items appear once, for every rule
// ([AllRules]). A rule whose run fails fails alone: it emits nothing more,
// and the call returns its [RuleError]. [SharedOperator.AddRule] and
// [SharedOperator.RemoveRule] change the rules between calls without
// touching the state of the others; an added rule sees only the elements
// that arrive after it was added.
//
// # Invariants
//
//   - An Operator is single-threaded: no goroutines, no locks, no clock.
//     Time comes in only through ProcessElement's timestamp,
//     ProcessWatermark and SetProcessingTime; the runtime hosts one
//     operator per subtask and calls it from that subtask's goroutine.
//   - A watermark never scans all keys: keys with buffered elements or a
//     pending window deadline sit in one timer queue (a heap and FIFO
//     lanes, merged), ordered by due time, then rank, then key.
//   - A key whose run holds nothing and that has nothing buffered has no
//     state at all (Flink clears finished keys), so state does not leak.
//   - Output depends only on the inputs and their order: a snapshot and a
//     restore in between change nothing, and Snapshot is deterministic.
//
// # Imports
//
// Package cep may import every package of ours except cmd and benchmarks
// (internal/lint enforces the table of DESIGN.md). Today it imports event,
// event/jsonev, nfa, rules, enrich, runtime, runtime/state, runtime/kafka,
// internal/failpoint and internal/humanize.
package cep
