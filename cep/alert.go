package cep

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"slices"
	"strconv"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/rules"
	"github.com/cepheus-cep/cepheus/runtime"
)

// AlertID returns the deterministic id of a match of rule under key
// (docs/decisions.md, "Alert id"): the first 16 bytes, in hex, of a SHA-256
// over the rule's content hash, the key, and for each matched event (stage
// order, then the order the stage took them) its timestamp, the SHA-256 of
// its field values and an occurrence index that tells identical events
// apart. Offsets, line numbers, instance ids and wall time never enter it,
// so a replay gives the same ids.
func AlertID(rule *rules.Rule, key event.Key, match [][]*event.Event) string {
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
			for _, v := range e.Fields {
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
	sum := h.Sum(nil)
	return hex.EncodeToString(sum[:16])
}

// appendAlert appends one alert as a JSON line:
//
//	{"alert_id", "rule", "ruleset", "ruleset_version", "severity",
//	 "key": {field: value}, "detected_at", "matched": {stage: [event...]},
//	 "emit": {name: value}}
//
// Stages appear in pattern order; stages that took no event are left out.
// Each matched event carries its input "line" and its fields.
func appendAlert(b []byte, bt *backtest, r *rules.Rule, it *Item) []byte {
	b = append(b, `{"alert_id":`...)
	b = runtime.AppendJSONString(b, AlertID(r, it.Key, it.Match.Events))
	b = append(b, `,"rule":`...)
	b = runtime.AppendJSONString(b, r.Name)
	b = append(b, `,"ruleset":`...)
	b = runtime.AppendJSONString(b, bt.rs.Name)
	b = append(b, `,"ruleset_version":`...)
	b = runtime.AppendJSONString(b, bt.rs.Hash)
	b = append(b, `,"severity":`...)
	b = runtime.AppendJSONString(b, r.Severity.String())
	b = append(b, `,"key":{`...)
	var first *event.Event
	for _, evs := range it.Match.Events {
		if len(evs) > 0 {
			first = evs[0]
			break
		}
	}
	for i, f := range r.KeyFields {
		if i > 0 {
			b = append(b, ',')
		}
		b = runtime.AppendJSONString(b, f)
		b = append(b, ':')
		if first != nil {
			b = appendValue(b, first.Field(r.KeySlots[i]))
		} else {
			b = append(b, "null"...)
		}
	}
	b = append(b, `},"detected_at":`...)
	b = runtime.AppendJSONString(b, it.Match.At.String())
	b = append(b, `,"matched":{`...)
	stages := r.NFA.Stages()
	sep := false
	for si, evs := range it.Match.Events {
		if len(evs) == 0 {
			continue
		}
		if sep {
			b = append(b, ',')
		}
		sep = true
		b = runtime.AppendJSONString(b, stages[si])
		b = append(b, ":["...)
		for j, e := range evs {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendEventJSON(b, bt, e)
		}
		b = append(b, ']')
	}
	b = append(b, `},"emit":{`...)
	for i, em := range r.Emits {
		if i > 0 {
			b = append(b, ',')
		}
		b = runtime.AppendJSONString(b, em.Name)
		b = append(b, ':')
		v, err := em.Expr.Eval(it.Match.Events)
		if err != nil {
			v = event.Null // counted by the expression; the alert still goes out
		}
		b = appendValue(b, v)
	}
	return append(b, "}}\n"...)
}

// appendEventJSON writes an event as {"line": N, field: value, ...}, time
// fields as RFC 3339.
func appendEventJSON(b []byte, bt *backtest, e *event.Event) []byte {
	b = append(b, `{"line":`...)
	b = strconv.AppendUint(b, e.Seq, 10)
	for i := range bt.schema.Len() {
		name := bt.schema.Field(i).Name
		b = append(b, ',')
		b = runtime.AppendJSONString(b, name)
		b = append(b, ':')
		v := e.Field(i)
		if bt.isTimeSlot(i) {
			if t, ok := v.AsInt(); ok {
				b = runtime.AppendJSONString(b, event.Time(t).String())
				continue
			}
		}
		b = appendValue(b, v)
	}
	return append(b, '}')
}

func (bt *backtest) isTimeSlot(i int) bool {
	if bt.timeSlots == nil {
		bt.timeSlots = map[int]bool{}
		if s, ok := bt.schema.Slot(bt.rs.TimeField); ok {
			bt.timeSlots[s] = true
		}
		for _, f := range bt.rs.TimeFields() {
			if s, ok := bt.schema.Slot(f); ok {
				bt.timeSlots[s] = true
			}
		}
	}
	return bt.timeSlots[i]
}

// appendLate writes a late event as {"line", "time", "event"}.
func appendLate(b []byte, bt *backtest, e *event.Event) []byte {
	b = append(b, `{"line":`...)
	b = strconv.AppendUint(b, e.Seq, 10)
	b = append(b, `,"time":`...)
	b = runtime.AppendJSONString(b, e.Time.String())
	b = append(b, `,"event":`...)
	b = appendEventJSON(b, bt, e)
	return append(b, "}\n"...)
}

// appendValue writes v as JSON (non-finite floats as null).
func appendValue(b []byte, v event.Value) []byte {
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
		return runtime.AppendJSONString(b, s)
	}
	return append(b, "null"...)
}

func sortStrings(s []string) { slices.Sort(s) }
