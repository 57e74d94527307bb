// Package event holds the leaf types that every layer of Cepheus shares:
// [Time] and [Watermark] (event time in milliseconds), [Value] (a typed field
// value), [Event] (a flat record of values addressed by slot), [Schema]
// (field names to slots) and [Key] (the partition key of a keyed stream).
//
// # Invariants
//
//   - An [Event] is immutable once it has been handed to an operator: the NFA
//     keeps pointers to matched events, so callers must not reuse a record
//     after passing it on.
//   - Field slots are assigned by a [Schema]; an [Event] built for a schema has
//     exactly one [Value] per field (missing fields hold the null value).
//   - The binary encoding ([Event.AppendBinary], [DecodeEvent]) is stable
//     within a major version: it is part of checkpointed state.
//
// # Imports
//
// Package event imports nothing of ours (standard library only).
package event
