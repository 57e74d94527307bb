// Package jsonev is Cepheus's one JSON codec: the decoder of JSON events
// that every path reads them with (the records of a backtest, the events
// written in a ruleset's tests, and every later source), and the encoders
// of the JSON lines that every sink writes (alerts, late events, dead
// letters).
//
// # Decoding
//
// A [Decoder] turns one flat JSON object into an [event.Event] of a
// schema: a hand-written single-pass scanner, no reflection, one
// allocation per event (for all of its strings together). It has two
// modes ([Mode]) that differ only in fields outside the schema and keys
// given twice:
//
//   - [Lenient] (streams, backtests) skips unknown fields, without
//     decoding or allocating, and takes the last of a repeated key;
//   - [Strict] (in-file tests) rejects both, naming the field.
//
// Everything else is one behaviour, so the same line gives the same event,
// or the same [*DecodeError], in both modes. In particular 3.0 given for an
// int field is the int 3 (JSON has one number type), 3.5 is an error
// (docs/decisions.md, "JSON events").
//
// # Encoding
//
// An [Encoder] writes the events of one schema ("line", then every field,
// time fields as RFC 3339), and the alerts ([Encoder.AppendAlert]) and late
// events ([Encoder.AppendLate]) that carry them; [AppendDeadLetter] writes
// a dead record. The field names of these lines are an interface: fields
// may be added, never renamed.
//
// # Imports
//
// Package jsonev may import, of ours, only event; internal/lint enforces
// it.
package jsonev
