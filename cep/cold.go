package cep

import "github.com/cepheus-cep/cepheus/event"

// Cold keys. Most keys of a long stream sit for a long time between two of
// their events, holding a partial match or a run with nothing due (a rule
// without a window waiting for a key's next event). As Go objects such a
// key costs a few kilobytes of pointers that every garbage collection
// scans. A SharedOperator therefore keeps a key that has not been touched
// since its previous sweep, and has nothing buffered and no timer, as its
// encoded state record (the bytes SnapshotTo writes for it, but for its
// deferred starts, see coldNotesVersion): one pointer-free slice. The
// next element of the key decodes it back. Nothing else can reach a cold
// key: only an element arriving, a rule change, a snapshot or the stats
// do, and each handles it; a cold key never fires.
//
// Freezing and thawing change no output: the record is the key's whole
// state, as restoring from a checkpoint shows (internal/difftest runs the
// shared-operator equivalence tests with a sweep after every element).

// DefaultCompactEvery is the number of elements between two sweeps of a
// SharedOperator's keys when SharedConfig.CompactEvery is 0.
const DefaultCompactEvery = 1 << 16

func (o *SharedOperator) compactEvery() int {
	if o.cfg.CompactEvery == 0 {
		return DefaultCompactEvery
	}
	return o.cfg.CompactEvery
}

// maybeSweep freezes the keys not touched since the previous sweep, once
// enough elements arrived since it.
func (o *SharedOperator) maybeSweep() {
	every := o.compactEvery()
	if every < 0 || o.sinceSweep < every {
		return
	}
	o.sinceSweep = 0
	for _, r := range o.rules {
		if r.err != nil {
			return // a failed rule's state is undefined: do not encode it
		}
	}
	for _, ks := range o.keys {
		if ks.warm || ks.n > 0 || ks.armed() {
			ks.warm = false
			continue
		}
		o.freeze(ks)
	}
}

// coldNotesVersion is the first byte of a cold record that holds a note
// (a deferred start, ruleSlot.pend): kept as the note, not as the run it
// stands for as in a state record, it thaws into the note again, and the
// key's next element needs no run when it ends the note's partial match
// (nfa.Run.PendingDies). record turns it into the key's state record.
const coldNotesVersion = keyRecordVersion + 1

// freeze turns ks into its record.
// REQUIRES: ks has nothing buffered and no timer; no rule failed.
func (o *SharedOperator) freeze(ks *keyState) {
	if ks.quiet.group != nil {
		o.materialize(ks) // its rules' slots count in coldPresent below
	}
	b, noted := o.appendKeyNotes(append(o.coldBuf[:0], keyRecordVersion), ks, true)
	if noted {
		b[0] = coldNotesVersion
	}
	o.coldBuf = b
	if o.cold == nil {
		o.cold = map[event.Key][]byte{}
	}
	o.cold[ks.key] = append([]byte(nil), o.coldBuf...)
	if ks.snap {
		o.snap.set[ks.key] = struct{}{} // the snapshot's mark goes with the key
	}
	for i := range ks.rules {
		if ks.rules[i].present {
			o.rules[i].coldPresent++
		}
	}
	o.coldPartials += partialsOf(ks)
	delete(o.keys, ks.key)
	o.release(ks)
}

// thaw returns the state of key k, decoding it if it is cold; nil if k
// holds no state.
func (o *SharedOperator) thaw(k event.Key) *keyState {
	rec, ok := o.cold[k]
	if !ok {
		return nil
	}
	delete(o.cold, k)
	ks := o.decodeCold(k, rec)
	o.keys[k] = ks
	for i := range ks.rules {
		if ks.rules[i].present {
			o.rules[i].coldPresent--
		}
	}
	o.coldPartials -= partialsOf(ks)
	if sn := o.snap; sn != nil {
		if _, ok := sn.set[k]; ok {
			delete(sn.set, k)
			ks.snap = true
		}
	}
	return ks
}

// decodeCold returns the state of cold key k, of record rec, not added
// to o.
func (o *SharedOperator) decodeCold(k event.Key, rec []byte) *keyState {
	d := decoder{event.Reader{B: rec[1:], Corrupt: ErrCorruptSnapshot}}
	ks, err := o.decodeKeyState(&d, k, rec[0] == coldNotesVersion)
	if err != nil || d.end() != nil {
		// The operator encoded it moments ago: only a bug gets here.
		panic("cep: a cold key does not decode: " + errString(err, d.end()))
	}
	return ks
}

// record appends to b the state record of cold key k, of record rec: rec
// itself unless it holds notes.
func (o *SharedOperator) record(b []byte, k event.Key, rec []byte) []byte {
	if rec[0] != coldNotesVersion {
		return append(b, rec...)
	}
	ks := o.decodeCold(k, rec)
	b = o.appendKey(append(b, keyRecordVersion), ks)
	o.release(ks)
	return b
}

// partialsOf is the partial matches the rules hold at ks.
func partialsOf(ks *keyState) int {
	n := 0
	for i := range ks.rules {
		if r := ks.rules[i].run; r != nil {
			n += r.PartialMatches()
		}
		if ks.rules[i].pend != nil {
			n++ // one partial match (nfa.NFA.DeferrableStart)
		}
	}
	return n
}

// PartialMatches returns the partial matches every rule holds at every
// key. It scans the keys in memory (the cold ones are counted as they
// go cold).
func (o *SharedOperator) PartialMatches() int {
	n := o.coldPartials
	for _, ks := range o.keys {
		n += partialsOf(ks)
		if q := &ks.quiet; q.group != nil {
			n += q.group.rules // one each (nfa.NFA.DeferrableStart)
		}
	}
	return n
}

// thawAll decodes every cold key (before a rule change, which alters every
// key's slots).
func (o *SharedOperator) thawAll() {
	for k := range o.cold {
		o.thaw(k)
	}
}

func errString(errs ...error) string {
	for _, err := range errs {
		if err != nil {
			return err.Error()
		}
	}
	return "no error"
}
