// Package gen generates seeded synthetic card transactions and account
// events with injected, labelled fraud scenarios, for backtests, benchmarks,
// the demo and the CLI's gen command.
//
// A [Config] describes the run: a population of customers (home city, 1 to
// 3 cards, devices, usual IPs) and merchants (country, city, MCC, online or
// not) over 25 built-in cities, some days of sparse history then dense
// days, and a rate per fraud scenario. [New] validates it and builds the
// population; [Generator.WriteTo] streams JSON lines and
// [Generator.Records] yields the same events as [Record] values.
// [Generator.WriteProfiles] writes the population's lookup data, the
// profiles: one JSON-lines file per lookup of rulesets/cards.cep.
// docs/data.md documents the fields, the normal behaviour, the scenarios and
// the rules that catch them.
//
// # How a run works
//
// Activities arrive as Poisson processes in time order: normal traffic
// (customers drawn from a Zipf distribution, thinned by each customer's
// local daily rhythm), one process per scenario, and the planned last uses
// and wake-ups of dormant cards. Each activity pushes its events, some of
// them minutes or days ahead (captures, refunds), into a heap ordered by
// (ts, id). Events leave the heap once no later activity can precede them,
// then pass through an out-of-order window that holds some back by up to
// MaxDelay.
//
// # Invariants
//
//   - The output is a pure function of the Config: the same Config gives
//     the same events, byte for byte, on every run (for one architecture and
//     Go release; see docs/data.md). No clock, no map iteration order.
//   - The profiles are a pure function of Seed and Customers, drawn from
//     a random stream of their own: writing them or not gives the same
//     events.
//   - Every event's ts is in [Start, Start+(HistoryDays+Days) days) and at
//     most MaxDelay behind the largest ts written before it.
//   - Every line has exactly the fields of [Fields], in that order.
//   - is_fraud is true exactly when scenario is not empty, and every event
//     of a scenario instance carries the scenario's name.
//   - Memory is the population plus the events not yet written; it does not
//     grow with the length of the run.
//
// # Imports
//
// Package gen may import, of ours, only event. internal/lint enforces this.
package gen
