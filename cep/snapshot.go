package cep

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/runtime/state"
)

// ErrCorruptSnapshot marks the errors of [RestoreOperator] for a truncated,
// malformed or inconsistent snapshot.
var ErrCorruptSnapshot = errors.New("cep: corrupt operator snapshot")

const snapshotVersion = 5

// Snapshot encodes the operator's whole state: the watermark, the
// processing clock, the counters and, for every key in key order, its
// rank, its buffered elements by timestamp (in arrival order)
// and its run. The bytes are deterministic: the same state always encodes
// the same way. Timers are not stored; RestoreOperator derives them.
// A failed operator returns its error instead.
func (o *Operator) Snapshot() ([]byte, error) {
	if o.err != nil {
		return nil, o.err
	}
	b := make([]byte, 0, 64+32*len(o.keys)+64*o.buffered)
	b = append(b, snapshotVersion)
	b = binary.AppendVarint(b, int64(o.watermark))
	b = binary.AppendVarint(b, int64(o.procTime))
	for _, c := range [...]uint64{o.stats.late, o.stats.overflow, o.stats.dropped, o.stats.matches, o.stats.timeouts} {
		b = binary.AppendUvarint(b, c)
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
		if ks.run == nil {
			b = append(b, 0)
		} else {
			b = append(b, 1)
			b = ks.run.AppendBinary(b)
		}
	}
	return b, nil
}

// RestoreOperator returns an operator in the state encoded by snapshot, with
// its timers re-armed. cfg must describe the operator that took the
// snapshot (the same compiled pattern, time mode and comparator); then
// every later output is the same as if the operator had never stopped.
// A snapshot that does not decode returns an error wrapping
// [ErrCorruptSnapshot]; one of a later build's version, an error wrapping
// state.ErrCheckpointVersion.
func RestoreOperator(cfg OperatorConfig, snapshot []byte) (*Operator, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	o := newOperator(cfg)
	if err := o.decode(snapshot); err != nil {
		if errors.Is(err, ErrCorruptSnapshot) || errors.Is(err, state.ErrCheckpointVersion) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", ErrCorruptSnapshot, err)
	}
	return o, nil
}

func (o *Operator) decode(b []byte) error {
	d := decoder{event.Reader{B: b, Corrupt: ErrCorruptSnapshot}}
	if v := d.Byte(); d.Err == nil && v > snapshotVersion {
		return state.LaterRecord("operator snapshot", uint64(v), snapshotVersion)
	} else if d.Err == nil && v != snapshotVersion {
		return fmt.Errorf("%w: unknown version %d", ErrCorruptSnapshot, v)
	}
	o.watermark = event.Time(d.Varint())
	o.procTime = event.Time(d.Varint())
	for _, c := range [...]*uint64{&o.stats.late, &o.stats.overflow, &o.stats.dropped, &o.stats.matches, &o.stats.timeouts} {
		*c = d.Uvarint()
	}

	nkeys := d.Count()
	var prev *keyState
	for range nkeys {
		if d.Err != nil {
			return d.Err
		}
		ks := &keyState{key: event.Key(d.Bytes(d.Count()))}
		ks.order = d.Uvarint()
		if d.Err == nil && prev != nil && ks.key <= prev.key {
			return fmt.Errorf("%w: key %q out of order", ErrCorruptSnapshot, string(ks.key))
		}
		if err := decodeBuffer(&d, ks); err != nil {
			return err
		}
		switch d.Byte() {
		case 0:
		case 1:
			if d.Err != nil {
				return d.Err
			}
			run, rest, err := o.cfg.NFA.DecodeRun(d.B)
			if err != nil {
				return fmt.Errorf("%w: key %q: %w", ErrCorruptSnapshot, string(ks.key), err)
			}
			run.SetMaxPartialMatches(o.cfg.MaxPartialMatches)
			ks.run, d.B = run, rest
		default:
			d.Fail()
		}
		if d.Err != nil {
			return d.Err
		}
		if ks.n == 0 && (ks.run == nil || ks.run.Empty()) {
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
	// The heap orders live timers by (due, rank, key), a total order, so
	// the keys fire in the original operator's order whatever the order
	// they are armed in here.
	for _, ks := range o.keys {
		o.armTimers(ks)
	}
	return nil
}

// appendBuffer encodes the elements ks buffers, by timestamp.
func appendBuffer(b []byte, ks *keyState) []byte {
	b = binary.AppendUvarint(b, uint64(len(ks.buf)))
	for _, bk := range ks.buf {
		b = binary.AppendVarint(b, int64(bk.ts))
		b = binary.AppendUvarint(b, uint64(len(bk.evs)))
		for _, ev := range bk.evs {
			b = ev.AppendBinary(b)
		}
	}
	return b
}

// decodeBuffer reads what appendBuffer writes into ks.
func decodeBuffer(d *decoder, ks *keyState) error {
	nb := d.Count()
	if nb > 0 {
		ks.buf = make([]bucket, 0, nb)
	}
	for range nb {
		ts := event.Time(d.Varint())
		ne := d.Count()
		if d.Err != nil {
			return d.Err
		}
		if ne == 0 || len(ks.buf) > 0 && ks.buf[len(ks.buf)-1].ts >= ts {
			return fmt.Errorf("%w: key %q: bad buffer at %d", ErrCorruptSnapshot, string(ks.key), ts)
		}
		evs := make([]*event.Event, ne)
		for i := range evs {
			ev, rest, err := event.DecodeEvent(d.B)
			if err != nil {
				return fmt.Errorf("%w: key %q: %w", ErrCorruptSnapshot, string(ks.key), err)
			}
			evs[i], d.B = ev, rest
		}
		ks.buf = append(ks.buf, bucket{ts: ts, evs: evs})
		ks.n += ne
	}
	return d.Err
}

// decoder reads the snapshot encoding; the first error sticks and turns
// every later read into a zero value.
type decoder struct {
	event.Reader
}
