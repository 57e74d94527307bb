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

// appendAlert appends one alert as a JSON line (jsonev.Encoder.AppendAlert):
// the rule's key values from the match's first event, the emits evaluated
// over the match.
func appendAlert(b []byte, bt *backtest, r *rules.Rule, it *Item) []byte {
	a := &bt.alert
	*a = jsonev.Alert{
		ID:             AlertID(r, it.Key, it.Match.Events),
		Rule:           r.Name,
		Ruleset:        bt.rs.Name,
		RulesetVersion: bt.rs.Hash,
		Severity:       r.Severity.String(),
		KeyFields:      r.KeyFields,
		Key:            a.Key[:0],
		DetectedAt:     it.Match.At,
		Stages:         r.NFA.Stages(),
		Matched:        it.Match.Events,
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
	for _, em := range r.Emits {
		v, err := em.Expr.Eval(it.Match.Events)
		if err != nil {
			v = event.Null // counted by the expression; the alert still goes out
		}
		a.EmitNames = append(a.EmitNames, em.Name)
		a.Emit = append(a.Emit, v)
	}
	return bt.encoder.AppendAlert(b, a)
}

func sortStrings(s []string) { slices.Sort(s) }
