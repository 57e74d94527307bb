// Package difftest is the differential tester of Cepheus against real Flink
// CEP (make diff-flink): it generates random conformance cases, runs them
// through the Flink runner of benchmarks/flinkcep (Flink CEP 2.3.0, one JVM
// per batch of cases) and through Cepheus ([conformance.RunCase]), compares
// the two results of every case, and shrinks each disagreement that no
// documented difference explains to a minimal reproducing case.
//
// # Cases
//
// [Generate] draws case i of a seed from its own random source, so a case
// can be regenerated alone. Cases use the conformance format
// (shared/conformance/README.md, with the extensions for generated cases):
// 1-4 top-level stages with every contiguity, nested groups (depth 2 at
// most), every quantifier (one, times n, times n..m with min 0,
// timesOrMore, oneOrMore) with optional, greedy, consecutive,
// allowCombinations, until and per-loop windows, within in both window
// types, every skip strategy with and without throw-on-miss, and conditions
// over name (a-d), price (1-5) and SubEvent volume, some iterative ones
// that read an earlier stage, or a looping stage itself, with ctx. Events:
// 3-12 per case. nfa_harness timestamps are small, often equal and
// sometimes go backwards; operator_harness cases are keyed by id (1-2
// keys), in event or processing time, with watermarks, late events,
// snapshot_restore and structured comparators.
//
// Invalid patterns are drawn on purpose, at a low rate (a quantifier on a
// NOT stage, greedy or consecutive on a single stage, until on a stage that
// does not loop, a notFollowedBy at the end without a window, an optional
// stage before a NOT stage, a skip target that is no top-level stage,
// timesOrMore(0), ...): both engines must then reject the pattern, and a
// case on which both report an error agrees (messages are not compared).
//
// Some inputs are avoided or kept rare because the Flink side cannot give
// a meaningful answer, each for a documented reason:
//
//   - A looping group whose body can be passed without taking an event
//     (loopsOverNothing) is never drawn: Flink loops forever or overflows
//     its stack on it (doc id epsilon-cycle).
//   - A timestamp that returns to a value already passed (2, 3, 2) is
//     drawn in 5% of the nfa_harness cases only (doc id
//     event-id-collision).
//   - Operator time mostly starts after 0 (doc id window-timer).
//   - After a snapshot_restore in processing time the clock is mostly set
//     again to where it was: Flink's harness restores into a new harness
//     whose clock starts again at 0, which no real clock does (doc id
//     restored-processing-clock).
//   - times(0, n) never comes with optional: Flink makes times(0, n)
//     optional itself, and the case format cannot say whether a second
//     optional() (which Flink rejects) was meant.
//
// # Profiles
//
// [Profiles] names the generators: "narrow" ([Generate], above) and
// "wide" ([GenerateWide]: what users run, long inputs over many keys,
// realistic timestamps and windows, several rules over one keyed stream).
// make diff-flink PROFILE=wide selects it. The summary line names the
// profile and the largest number of events, keys and rules of a case run.
//
// # Comparison
//
// [Compare] checks, per case: whether each side failed and, when both did,
// the class of the error (compile: the pattern was rejected; run:
// processing failed) and the step that failed; the matches with their via,
// stage-by-stage seqs, the step whose call released them and (operator)
// Flink's Context.timestamp(), as a multiset and then in emission order;
// the timed-out partial matches with their timestamps and steps, the same
// way; the operator's main output (watermarks and matches) and the late
// events in exact order. The step of a match also places it among
// processing-time advances, which the output does not show. A Cepheus
// error that is a panic, a crash or a timeout is a difference even when
// Flink fails too. A case that an engine did not finish within the case
// timeout (10 s) runs again with 12 times that: through Cepheus alone,
// after the Flink JVM has ended (beside it, on a busy host of few CPUs, a
// case can take longer than alone), and then, if Cepheus finished it,
// through Flink. A case Cepheus finished only then is named in the run's
// output (SLOW, [Summary].SlowCepheus, counted in the summary line); one it does not finish alone
// either keeps its timeout and is reported unexplained. Cases with several rules (Input.Rules; Flink runs one
// CepOperator per rule) are compared rule by rule. Error messages are not
// compared.
//
// Cepheus runs in child processes of the command ([CepheusWorker],
// [MaybeServeWorker]), so that a case that crashes it (a fatal stack
// overflow, say) is reported as that case's result instead of ending the
// run. Tests run it in process ([Cepheus]).
//
// # Explanations
//
// A disagreement is explained only when an entry of [Explanations] applies:
// an id of docs/flink-differences.md and a check on the case and both
// results that must account for every difference. Where the case can be
// changed so that the difference cannot arise, the check is a
// counterfactual: [Counterfactuals] builds the changed cases of every
// disagreement, the run sends them all through Flink in one more JVM, and
// Cepheus's result must equal Flink's result on the changed case exactly
// (with the changes of several explanations applied together when several
// act in one case). The other checks demand equality up to the first step
// at which the difference can act. Results record the timer that woke a
// key (Wake), which the key-order checks use. TestExplanationsDocumented
// holds the registry and the page's "checked by code" column to the same
// ids; TestExplanationsRejectFaults re-checks stored explained cases
// (testdata/explained, make diff-flink-explained) and requires every
// explanation to reject a fabricated, a dropped and an altered item.
//
// # Shrinking
//
// Unexplained disagreements are delta-debugged in rounds (fewer events,
// steps and stages, simpler quantifiers, conditions and options; all
// candidates of all disagreements run in one batch per round, each
// finding moving to its first candidate that still disagrees in the same
// aspect, with the counterfactuals of the candidates that disagree rerun
// so that an explained candidate is never taken). At most [Options.MaxShrink] are shrunk, one per kind first.
// Each is written to <out>/<case id>.json with notes saying what differs
// and Flink's result as expectations, so that make conformance
// CONFORMANCE_DIR=<out> runs it.
//
// # Regression corpus
//
// [WriteCorpus] keeps agreed cases with Flink's results; testdata/corpus is
// such a corpus (make diff-flink-corpus), and TestCorpus re-checks Cepheus
// against it without Java.
//
// # Imports
//
// Package difftest imports, of ours, internal/conformance (and through it
// event, nfa, rules and cep). internal/lint enforces this.
package difftest
