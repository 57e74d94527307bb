package rules

import (
	"fmt"
	"slices"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/event/jsonev"
)

// DecoderConfig returns the configuration of the JSON decoder for the
// ruleset's events: its schema, its event time field and other time
// fields, the key fields that all its rules share as required fields, and
// mode. Every
// path that reads JSON events of the ruleset starts from it, so in-file
// tests (Strict) and backtests (Lenient) decode alike: an event decodes to
// the same values in both modes, or fails in both with the same error,
// except that Strict also rejects fields outside a declared schema and
// keys given twice. An inferred schema lists only the fields the rules
// read, so its records may carry others in both modes (Config.Open).
func (rs *Ruleset) DecoderConfig(mode jsonev.Mode) jsonev.Config {
	// The key fields every rule keys by: a record without one can reach
	// no rule. A key field of only some rules may be missing (a login
	// event has a customer but no card); those rules see a null there.
	var required []string
	for i, r := range rs.Rules {
		if i == 0 {
			required = append(required, r.KeyFields...)
			continue
		}
		required = slices.DeleteFunc(required, func(f string) bool { return !slices.Contains(r.KeyFields, f) })
	}
	return jsonev.Config{
		Schema:     rs.Schema,
		TimeField:  rs.TimeField,
		TimeFields: rs.TimeFields(),
		Required:   required,
		Mode:       mode,
		Open:       !rs.Declared,
	}
}

// DecodeEvent decodes one event, a flat JSON object, into an event of the
// ruleset's schema, as the ruleset's tests do: with
// rs.DecoderConfig(jsonev.Strict). Seq is left 0. The error wraps a
// [*jsonev.DecodeError].
func (rs *Ruleset) DecodeEvent(data []byte) (*event.Event, error) {
	ev, err := rs.decodeEvent(data)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	return ev, nil
}

// LenientDecoder returns a decoder of events of the ruleset's schema in
// the lenient mode of streams and backtests (a field outside the schema
// skipped: an alert's matched events carry their "line"), for reading
// events written back (cepheus explain). The error wraps a
// [*jsonev.DecodeError].
func (rs *Ruleset) LenientDecoder() (func(data []byte) (*event.Event, error), error) {
	dec, err := jsonev.NewDecoder(rs.DecoderConfig(jsonev.Lenient))
	if err != nil {
		return nil, err
	}
	return dec.Decode, nil
}

func (rs *Ruleset) decodeEvent(data []byte) (*event.Event, error) {
	dec, err := jsonev.NewDecoder(rs.DecoderConfig(jsonev.Strict))
	if err != nil {
		return nil, err
	}
	return dec.Decode(data)
}

// decodeOffset returns the byte offset in the event's JSON of a decode
// error: its column, or 0 when it has none (a missing field) or de is nil.
func decodeOffset(de *jsonev.DecodeError) int {
	if de != nil && de.Column > 0 {
		return de.Column - 1
	}
	return 0
}
