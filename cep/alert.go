package cep

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"slices"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/event/jsonev"
	"github.com/cepheus-cep/cepheus/rules"
)

// AlertID returns the deterministic id of a match of rule under key
// (docs/decisions.md, "Alert id"): the first 16 bytes, in hex, of a SHA-256
// over the rule's content hash, the key, and for each matched event (stage
// order, then the order the stage took them) its timestamp, the SHA-256 of
// its field values and an occurrence index that tells identical events
// apart. The field values are those of rs's input fields in its order
// ([rules.Ruleset.IDSlots]): not a lookup's or an aggregate's. Offsets,
// line numbers, instance ids and wall time never enter it, so a replay
// gives the same ids.
func AlertID(rs *rules.Ruleset, rule *rules.Rule, key event.Key, match [][]*event.Event) string {
	return alertID(rs, rule, key, match, false)
}

// timedOutMark ends what the id of an alert for a timed-out partial match
// hashes (docs/decisions.md, "Alert id"): such an alert never has the id
// of a match of the same events.
var timedOutMark = []byte("\xfftimed out")

// alertID is AlertID. It hashes of each event the values of rs.IDSlots
// alone, so it leaves out the fields a lookup fills or an aggregate
// computes (docs/decisions.md, "Alert id"), which belong to no input:
// an alert's id does not depend on the lookups' data, nor on whether they
// are bound; the fields only an event observer reads (-label), appended
// after the ruleset's; and, in a job that deployed versions, the fields
// of the layout that rs does not read (another version's), so that a
// version's ids are the same whichever versions ran before it. A slot
// past an event's fields (an event held from before the layout grew) is
// null, as the field is in an event that lacks it.
//
// timedOut marks the id of a timed-out partial match: timedOutMark, then
// the number of events of each stage, end what it hashes (a partial
// match's events alone do not say where one stage's end: a loop's [1, 2]
// and [1] then [2] in the next stage are two partial matches).
func alertID(rs *rules.Ruleset, rule *rules.Rule, key event.Key, match [][]*event.Event, timedOut bool) string {
	h := sha256.New()
	h.Write([]byte(rule.Hash))
	h.Write([]byte{0})
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(key)))
	h.Write(n[:])
	h.Write([]byte(key))
	type seen struct {
		ts  event.Time
		sum [32]byte
	}
	counts := map[seen]uint32{}
	var buf []byte
	for _, evs := range match {
		for _, e := range evs {
			buf = buf[:0]
			for _, slot := range rs.IDSlots {
				v := event.Null
				if slot < len(e.Fields) {
					v = e.Fields[slot]
				}
				buf = v.AppendBinary(buf)
			}
			k := seen{ts: e.Time, sum: sha256.Sum256(buf)}
			occ := counts[k]
			counts[k] = occ + 1
			binary.LittleEndian.PutUint64(n[:], uint64(e.Time))
			h.Write(n[:])
			h.Write(k.sum[:])
			binary.LittleEndian.PutUint32(n[:4], occ)
			h.Write(n[:4])
		}
	}
	if timedOut {
		h.Write(timedOutMark)
		for _, evs := range match {
			binary.LittleEndian.PutUint32(n[:4], uint32(len(evs)))
			h.Write(n[:4])
		}
	}
	sum := h.Sum(nil)
	return hex.EncodeToString(sum[:16])
}

// Alert is one alert: a match of a rule, with what the rule says about
// it. Every sink writes it with the one encoder, [AlertEncoder]; observers
// ([Observer]) see it as it is emitted.
//
// An Alert handed to an observer or a sink is valid only during the call:
// the engine reuses it and its slices for the next alert (a copy of the
// struct shares them), so keep [Alert.Clone]'s copy. The matched events
// themselves are never modified and may be kept.
//
// Its JSON line, as the sinks write it, is [Engine.AlertEncoder]'s
// AppendAlert (json.Marshal knows no schema: it writes the key and
// emitted values, [event.Value.MarshalJSON], but not the names of the
// matched events' fields). A matched event's field by name: its slot in
// [Engine.Schema].
type Alert struct {
	// jsonev.Alert holds the fields, promoted: ID (the deterministic
	// alert id, [AlertID]), Rule, Ruleset, RulesetVersion (the full hex
	// hash of the ruleset version the rule belongs to), RuleHash (the
	// rule's content hash), Severity, KeyFields and Key (the rule's key
	// fields and their values from the match's first event, null when
	// missing), DetectedAt (the event time at which the match completed),
	// Stages and Matched (the events each stage took, in order), EmitNames
	// and Emit (the emitted fields and their values; null where the
	// expression failed). The encoder writes it as it is, with no copy.
	jsonev.Alert
}

// Clone returns a copy of a that stays as it is after the call that
// handed a over: its slices are its own, the matched events (never
// modified) shared.
func (a *Alert) Clone() *Alert {
	c := *a
	c.KeyFields = slices.Clone(a.KeyFields)
	c.Key = slices.Clone(a.Key)
	c.Stages = slices.Clone(a.Stages)
	c.Matched = make([][]*event.Event, len(a.Matched))
	for i, evs := range a.Matched {
		c.Matched[i] = slices.Clone(evs)
	}
	c.Null = slices.Clone(a.Null)
	c.EmitNames = slices.Clone(a.EmitNames)
	c.Emit = slices.Clone(a.Emit)
	return &c
}

// AlertEncoder writes alerts as JSON lines, the one alert format of every
// sink. The fields, in this order (fields may be added, never renamed):
//
//	{"alert_id", "rule", "ruleset", "ruleset_version", "rule_hash", "severity",
//	 "key": {field: value}, "detected_at", ["timed_out": true,]
//	 "matched": {stage: [event...]}, "emit": {name: value}}
//
// Stages that took no event are left out; each matched event is an object
// of its line number ("line") and the fields of the run's schema, time
// fields as RFC 3339 strings. An AlertEncoder is immutable and safe for
// concurrent use; [Engine.AlertEncoder] returns the one of an engine's
// events.
type AlertEncoder struct {
	enc     *jsonev.Encoder
	ruleset string // the ruleset's name, in late events
}

// newAlertEncoder returns the encoder of alerts over events of schema,
// the ruleset's event time field and timeFields written as times (those
// its decoder reads as times: decoderConfig).
func newAlertEncoder(rs *rules.Ruleset, schema *event.Schema, timeFields []string) *AlertEncoder {
	return &AlertEncoder{enc: jsonev.NewEncoder(schema, append([]string{rs.TimeField}, timeFields...)...), ruleset: rs.Name}
}

// AppendAlert appends a as one JSON line, newline included, to b.
func (e *AlertEncoder) AppendAlert(b []byte, a *Alert) []byte {
	return e.enc.AppendAlert(b, &a.Alert)
}

// appendLate appends a late event as one JSON line ({"ruleset", "line",
// "time", "event"}).
func (e *AlertEncoder) appendLate(b []byte, ev *event.Event) []byte {
	return e.enc.AppendLate(b, e.ruleset, ev)
}

// appendOverflow appends an event refused by a key's buffer limit, which
// rules did not see, as one JSON line (a late event's, with "reason":
// "limit" and "rules").
func (e *AlertEncoder) appendOverflow(b []byte, ev *event.Event, rules []string) []byte {
	return e.enc.AppendOverflow(b, e.ruleset, ev, rules)
}

// makeAlert fills a (reusing its slices) with the alert of a match of r:
// the rule's key values from the match's first event, the emits
// evaluated over the match.
// null marks the slots the matched events show as null
// (compiledRule.null).
//
// A timed-out partial match (an ItemTimeout of a rule with a timeout
// block) gives an alert marked TimedOut, detected at the time its window
// ended, with the timeout block's severity and emits.
func makeAlert(a *Alert, rs *rules.Ruleset, r *rules.Rule, it *Item, null []bool) {
	timedOut := it.Kind == ItemTimeout && r.Timeout != nil
	severity, emits, at := r.Severity, r.Emits, it.Match.At
	if timedOut {
		severity, emits, at = r.Timeout.Severity, r.Timeout.Emits, it.At
	}
	a.Alert = jsonev.Alert{
		ID:             alertID(rs, r, it.Key, it.Match.Events, timedOut),
		Rule:           r.Name,
		Ruleset:        rs.Name,
		RulesetVersion: rs.Hash,
		RuleHash:       r.Hash,
		Severity:       severity.String(),
		KeyFields:      r.KeyFields,
		Key:            a.Key[:0],
		DetectedAt:     at,
		TimedOut:       timedOut,
		Stages:         r.NFA.Stages(),
		Matched:        it.Match.Events,
		Null:           null,
		EmitNames:      a.EmitNames[:0],
		Emit:           a.Emit[:0],
	}
	var first *event.Event
	for _, evs := range it.Match.Events {
		if len(evs) > 0 {
			first = evs[0]
			break
		}
	}
	for i := range r.KeyFields {
		v := event.Null
		if first != nil {
			v = first.Field(r.KeySlots[i])
		}
		a.Key = append(a.Key, v)
	}
	for _, em := range emits {
		v, err := em.Expr.Eval(it.Match.Events)
		if err != nil {
			v = event.Null // counted by the expression; the alert still goes out
		}
		a.EmitNames = append(a.EmitNames, em.Name)
		a.Emit = append(a.Emit, v)
	}
}
