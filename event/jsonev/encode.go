package jsonev

import (
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/cepheus-cep/cepheus/event"
)

// The encoders of the JSON lines every sink writes: alerts, late events
// and dead letters. They append to a caller's buffer and never fail; the
// field names and their order are part of the output format (fields may be
// added, never renamed).

// Alert is one alert, ready to encode with [Encoder.AppendAlert]. The
// caller owns it and its slices; the encoder only reads them.
type Alert struct {
	// ID is the alert id (docs/decisions.md, "Alert id").
	ID string
	// Rule, Ruleset, RulesetVersion (the full hex hash of the ruleset),
	// RuleHash (the rule's content hash) and Severity name where the alert
	// comes from.
	Rule, Ruleset, RulesetVersion, RuleHash, Severity string
	// KeyFields and Key are the rule's key fields and their values (the
	// same length; a missing value is null).
	KeyFields []string
	Key       []event.Value
	// DetectedAt is the event time at which the match completed (for a
	// timed-out partial match, at which its window ended).
	DetectedAt event.Time
	// TimedOut marks an alert for a partial match that its window dropped
	// (a rule's timeout block), written as "timed_out": true after
	// "detected_at"; the field is left out of other alerts.
	TimedOut bool
	// Stages names the stages; Matched[i] are the events stage i took, in
	// the order it took them. A stage that took nothing is left out.
	Stages  []string
	Matched [][]*event.Event
	// Null marks the slots the matched events are written with null in
	// (nil: none): the fields a rule's alerts do not show.
	Null []bool
	// EmitNames and Emit are the emitted fields and their values (the same
	// length).
	EmitNames []string
	Emit      []event.Value
}

// DeadLetter is a record that could not become an event.
type DeadLetter struct {
	Ruleset string // the ruleset whose run rejected it; "" leaves the field out
	File    string // the input file (partition) it came from; "" leaves the field out
	Line    int64  // 1-based line number
	Offset  int64  // byte offset of the line in the (decompressed) input
	Reason  string // why
	Data    []byte // the raw line
}

// Encoder writes the events of one schema, and the alerts and late events
// that carry them, as JSON. Time fields are written as RFC 3339 strings
// (UTC, milliseconds when not zero), other values as their JSON type;
// non-finite floats as null. An Encoder is immutable after [NewEncoder] and
// safe for concurrent use.
type Encoder struct {
	schema *event.Schema
	keys   [][]byte // per slot: `,"name":`
	isTime []bool   // per slot: written as RFC 3339
}

// NewEncoder returns an encoder for events of schema whose fields
// timeFields (names outside the schema are ignored) hold times as ints of
// epoch milliseconds.
func NewEncoder(schema *event.Schema, timeFields ...string) *Encoder {
	e := &Encoder{
		schema: schema,
		keys:   make([][]byte, schema.Len()),
		isTime: make([]bool, schema.Len()),
	}
	for i := range schema.Len() {
		k := AppendString([]byte{','}, schema.Field(i).Name)
		e.keys[i] = append(k, ':')
	}
	for _, f := range timeFields {
		if s, ok := schema.Slot(f); ok {
			e.isTime[s] = true
		}
	}
	return e
}

// AppendEvent appends ev as a JSON object: "line" (the input line, from
// ev.Seq; [event.SeqOf]) and, for a partition after the first of a source
// of several, "partition" (its index), then every schema field in slot
// order.
//
//	{"line":12,"ts":"2024-05-01T12:00:00Z","card":"c1","amount":25.5}
func (e *Encoder) AppendEvent(b []byte, ev *event.Event) []byte { return e.appendEvent(b, ev, nil) }

// appendEvent is AppendEvent writing null in the slots null marks.
func (e *Encoder) appendEvent(b []byte, ev *event.Event, null []bool) []byte {
	b = appendLine(append(b, '{'), ev)
	for i := range e.keys {
		b = append(b, e.keys[i]...)
		v := ev.Field(i)
		if i < len(null) && null[i] {
			v = event.Null
		}
		if e.isTime[i] {
			if t, ok := v.AsInt(); ok {
				b = AppendString(b, event.Time(t).String())
				continue
			}
		}
		b = AppendValue(b, v)
	}
	return append(b, '}')
}

// appendLine appends the "line" member of ev, and its "partition" when not
// the first.
func appendLine(b []byte, ev *event.Event) []byte {
	b = append(b, `"line":`...)
	b = strconv.AppendInt(b, ev.Line(), 10)
	if p := ev.Partition(); p > 0 {
		b = append(b, `,"partition":`...)
		b = strconv.AppendInt(b, int64(p), 10)
	}
	return b
}

// AppendLate appends a late event of ruleset as one JSON line (newline
// included):
//
//	{"ruleset":"cards","line":12,"time":"2024-05-01T12:00:00Z","event":{...}}
func (e *Encoder) AppendLate(b []byte, ruleset string, ev *event.Event) []byte {
	b = append(b, `{"ruleset":`...)
	b = AppendString(b, ruleset)
	b = appendLine(append(b, ','), ev)
	b = append(b, `,"time":`...)
	b = AppendString(b, ev.Time.String())
	b = append(b, `,"event":`...)
	b = e.AppendEvent(b, ev)
	return append(b, "}\n"...)
}

// AppendOverflow appends an event of ruleset refused by a key's limit of
// buffered events as one JSON line (newline included): a late event's
// record with the reason and the rules that did not see it,
//
//	{"ruleset":"cards","line":12,"time":"...","reason":"limit","rules":["a","b"],"event":{...}}
func (e *Encoder) AppendOverflow(b []byte, ruleset string, ev *event.Event, rules []string) []byte {
	b = append(b, `{"ruleset":`...)
	b = AppendString(b, ruleset)
	b = appendLine(append(b, ','), ev)
	b = append(b, `,"time":`...)
	b = AppendString(b, ev.Time.String())
	b = append(b, `,"reason":"limit","rules":[`...)
	for i, r := range rules {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendString(b, r)
	}
	b = append(b, `],"event":`...)
	b = e.AppendEvent(b, ev)
	return append(b, "}\n"...)
}

// AppendAlert appends a as one JSON line (newline included), its fields in
// this order:
//
//	{"alert_id", "rule", "ruleset", "ruleset_version", "rule_hash", "severity",
//	 "key": {field: value}, "detected_at", "matched": {stage: [event...]},
//	 "emit": {name: value}}
//
// Stages appear in the order of a.Matched; stages that took no event are
// left out. Each matched event is written by [Encoder.AppendEvent], null
// in the slots a.Null marks.
func (e *Encoder) AppendAlert(b []byte, a *Alert) []byte {
	b = append(b, `{"alert_id":`...)
	b = AppendString(b, a.ID)
	b = append(b, `,"rule":`...)
	b = AppendString(b, a.Rule)
	b = append(b, `,"ruleset":`...)
	b = AppendString(b, a.Ruleset)
	b = append(b, `,"ruleset_version":`...)
	b = AppendString(b, a.RulesetVersion)
	b = append(b, `,"rule_hash":`...)
	b = AppendString(b, a.RuleHash)
	b = append(b, `,"severity":`...)
	b = AppendString(b, a.Severity)
	b = append(b, `,"key":{`...)
	for i, f := range a.KeyFields {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendString(b, f)
		b = append(b, ':')
		b = AppendValue(b, a.Key[i])
	}
	b = append(b, `},"detected_at":`...)
	b = AppendString(b, a.DetectedAt.String())
	if a.TimedOut {
		b = append(b, `,"timed_out":true`...)
	}
	b = append(b, `,"matched":{`...)
	sep := false
	for si, evs := range a.Matched {
		if len(evs) == 0 {
			continue
		}
		if sep {
			b = append(b, ',')
		}
		sep = true
		b = AppendString(b, a.Stages[si])
		b = append(b, ":["...)
		for j, ev := range evs {
			if j > 0 {
				b = append(b, ',')
			}
			b = e.appendEvent(b, ev, a.Null)
		}
		b = append(b, ']')
	}
	b = append(b, `},"emit":{`...)
	for i, name := range a.EmitNames {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendString(b, name)
		b = append(b, ':')
		b = AppendValue(b, a.Emit[i])
	}
	return append(b, "}}\n"...)
}

// AppendDeadLetter appends d as one JSON line (newline included), its
// fields in this order ("ruleset" only when d.Ruleset is set):
//
//	{"ruleset":"cards","line":12,"offset":3400,"reason":"missing time field \"ts\"","data":"{\"id\":1}"}
//
// data is the raw line as a JSON string; bytes that are not valid UTF-8
// become U+FFFD there (the offset still locates the original).
func AppendDeadLetter(b []byte, d DeadLetter) []byte {
	b = append(b, '{')
	if d.Ruleset != "" {
		b = append(b, `"ruleset":`...)
		b = AppendString(b, d.Ruleset)
		b = append(b, ',')
	}
	if d.File != "" {
		b = append(b, `"file":`...)
		b = AppendString(b, d.File)
		b = append(b, ',')
	}
	b = append(b, `"line":`...)
	b = strconv.AppendInt(b, d.Line, 10)
	b = append(b, `,"offset":`...)
	b = strconv.AppendInt(b, d.Offset, 10)
	b = append(b, `,"reason":`...)
	b = AppendString(b, d.Reason)
	b = append(b, `,"data":`...)
	b = AppendString(b, d.Data)
	return append(b, "}\n"...)
}

// AppendValue appends v as JSON: null, a bool, an int, a float in the
// shortest form that reads back exactly (non-finite floats as null), or a
// string.
func AppendValue(b []byte, v event.Value) []byte {
	switch v.Kind() {
	case event.KindBool:
		x, _ := v.AsBool()
		return strconv.AppendBool(b, x)
	case event.KindInt:
		x, _ := v.AsInt()
		return strconv.AppendInt(b, x, 10)
	case event.KindFloat:
		x, _ := v.AsFloat()
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return append(b, "null"...)
		}
		return strconv.AppendFloat(b, x, 'g', -1, 64)
	case event.KindString:
		s, _ := v.AsString()
		return AppendString(b, s)
	}
	return append(b, "null"...)
}

const hexDigits = "0123456789abcdef"

// AppendString appends s to b as a JSON string: quotes, backslashes and
// control characters escaped, invalid UTF-8 replaced by U+FFFD.
func AppendString[S string | []byte](b []byte, s S) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRune([]byte(s[i:min(i+utf8.UTFMax, len(s))]))
			if r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
