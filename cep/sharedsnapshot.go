package cep

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cepheus-cep/cepheus/event"
)

// sharedSnapshotVersion differs from snapshotVersion, so that neither
// kind of operator restores the other's snapshot.
const sharedSnapshotVersion = 2

// Snapshot encodes the operator's whole state: the watermark, the
// processing clock, the counters, the rule ids with their counters and,
// for every key in key order, its rank, its buffered elements and, for
// each rule, whether it holds state there, its rank and run, and which
// buffered elements it does not see. The bytes are deterministic. A
// failed rule makes it return that rule's *[RuleError].
func (o *SharedOperator) Snapshot() ([]byte, error) {
	for _, r := range o.rules {
		if r.err != nil {
			return nil, &RuleError{Rule: r.id, Err: r.err}
		}
	}
	b := make([]byte, 0, 64+32*len(o.keys)*(1+len(o.rules))+64*o.buffered)
	b = append(b, sharedSnapshotVersion)
	b = binary.AppendVarint(b, int64(o.watermark))
	b = binary.AppendVarint(b, int64(o.procTime))
	b = binary.AppendUvarint(b, o.late)
	b = binary.AppendUvarint(b, o.overflow)
	b = binary.AppendUvarint(b, o.nextOrder)
	b = binary.AppendUvarint(b, uint64(len(o.rules)))
	for _, r := range o.rules {
		b = binary.AppendUvarint(b, uint64(r.id))
		b = binary.AppendUvarint(b, r.dropped)
		b = binary.AppendUvarint(b, r.matches)
		b = binary.AppendUvarint(b, r.timeouts)
	}
	keys := make([]*keyState, 0, len(o.keys))
	for _, ks := range o.keys {
		keys = append(keys, ks)
	}
	slices.SortFunc(keys, func(x, y *keyState) int { return strings.Compare(string(x.key), string(y.key)) })
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, ks := range keys {
		b = binary.AppendUvarint(b, uint64(len(ks.key)))
		b = append(b, ks.key...)
		b = binary.AppendUvarint(b, ks.order)
		b = appendBuffer(b, ks)
		for i := range ks.rules {
			sl := &ks.rules[i]
			var flags byte
			if sl.present {
				flags |= 1
			}
			if sl.run != nil {
				flags |= 2
			}
			b = append(b, flags)
			if sl.present {
				b = binary.AppendUvarint(b, sl.order)
			}
			if sl.run != nil {
				b = sl.run.AppendBinary(b)
			}
			b = binary.AppendUvarint(b, uint64(len(sl.hidden)))
			for _, h := range sl.hidden {
				bi, _ := slices.BinarySearchFunc(ks.buf, h.ts, func(bk bucket, ts event.Time) int { return compareTime(bk.ts, ts) })
				b = binary.AppendUvarint(b, uint64(bi))
				b = binary.AppendUvarint(b, uint64(slices.Index(ks.buf[bi].evs, h.ev)))
			}
		}
	}
	return b, nil
}

func compareTime(a, b event.Time) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// RestoreSharedOperator returns an operator in the state encoded by
// snapshot, with its timers re-armed. cfg and rules (ids in the same
// order, the same compiled patterns) must describe the operator that took
// the snapshot; then every later output is the same as if it had never
// stopped. A snapshot that does not decode returns an error wrapping
// [ErrCorruptSnapshot]; rules that do not match it, [ErrInvalidConfig].
func RestoreSharedOperator(cfg SharedConfig, rules []SharedRule, snapshot []byte) (*SharedOperator, error) {
	o, err := NewSharedOperator(cfg, rules...)
	if err != nil {
		return nil, err
	}
	if err := o.decode(snapshot); err != nil {
		if errors.Is(err, ErrCorruptSnapshot) || errors.Is(err, ErrInvalidConfig) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", ErrCorruptSnapshot, err)
	}
	return o, nil
}

func (o *SharedOperator) decode(b []byte) error {
	d := decoder{event.Reader{B: b, Corrupt: ErrCorruptSnapshot}}
	if v := d.Byte(); d.Err == nil && v != sharedSnapshotVersion {
		return fmt.Errorf("%w: unknown version %d", ErrCorruptSnapshot, v)
	}
	o.watermark = event.Time(d.Varint())
	o.procTime = event.Time(d.Varint())
	o.late, o.overflow, o.nextOrder = d.Uvarint(), d.Uvarint(), d.Uvarint()
	if n := d.Count(); d.Err == nil && n != len(o.rules) {
		return fmt.Errorf("%w: the snapshot hosts %d rules, the config %d", ErrInvalidConfig, n, len(o.rules))
	}
	for _, r := range o.rules {
		if id := d.Uvarint(); d.Err == nil && id != uint64(r.id) {
			return fmt.Errorf("%w: the snapshot hosts rule %d where the config has rule %d", ErrInvalidConfig, id, r.id)
		}
		r.dropped, r.matches, r.timeouts = d.Uvarint(), d.Uvarint(), d.Uvarint()
	}
	nkeys := d.Count()
	var prev *keyState
	for range nkeys {
		if d.Err != nil {
			return d.Err
		}
		ks := &keyState{key: event.Key(d.Bytes(d.Count())), rules: make([]ruleSlot, len(o.rules))}
		ks.order = d.Uvarint()
		if d.Err == nil && (prev != nil && ks.key <= prev.key || ks.order >= o.nextOrder) {
			return fmt.Errorf("%w: key %q out of order or with a bad rank", ErrCorruptSnapshot, string(ks.key))
		}
		if err := decodeBuffer(&d, ks); err != nil {
			return err
		}
		held := ks.n > 0
		for i := range ks.rules {
			if err := o.decodeSlot(&d, ks, i); err != nil {
				return err
			}
			held = held || ks.rules[i].present
		}
		if d.Err != nil {
			return d.Err
		}
		if !held {
			return fmt.Errorf("%w: key %q holds no state", ErrCorruptSnapshot, string(ks.key))
		}
		o.keys[ks.key] = ks
		o.buffered += ks.n
		prev = ks
	}
	if d.Err != nil {
		return d.Err
	}
	if len(d.B) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrCorruptSnapshot, len(d.B))
	}
	// The heap breaks ties by the keys' ranks, which are unique, and each
	// rule's order comes from its own ranks: the order of arming is free.
	for _, ks := range o.keys {
		o.settle(ks)
	}
	return nil
}

func (o *SharedOperator) decodeSlot(d *decoder, ks *keyState, i int) error {
	sl := &ks.rules[i]
	flags := d.Byte()
	if d.Err == nil && flags > 3 {
		d.Fail()
	}
	if sl.present = flags&1 != 0; sl.present {
		sl.order = d.Uvarint()
		if d.Err == nil && sl.order >= o.nextOrder {
			return fmt.Errorf("%w: key %q: bad rank of rule %d", ErrCorruptSnapshot, string(ks.key), o.rules[i].id)
		}
	}
	if flags&2 != 0 {
		if d.Err != nil {
			return d.Err
		}
		run, rest, err := o.rules[i].nfa.DecodeRun(d.B)
		if err != nil {
			return fmt.Errorf("%w: key %q, rule %d: %w", ErrCorruptSnapshot, string(ks.key), o.rules[i].id, err)
		}
		run.SetMaxPartialMatches(o.rules[i].maxPartial)
		sl.run, d.B = run, rest
	}
	nh := d.Count()
	for range nh {
		bi, ei := d.Uvarint(), d.Uvarint()
		if d.Err != nil {
			return d.Err
		}
		if bi >= uint64(len(ks.buf)) || ei >= uint64(len(ks.buf[bi].evs)) {
			return fmt.Errorf("%w: key %q: bad hidden element", ErrCorruptSnapshot, string(ks.key))
		}
		bk := &ks.buf[bi]
		sl.hidden = append(sl.hidden, hiddenElem{ts: bk.ts, ev: bk.evs[ei]})
	}
	return d.Err
}
