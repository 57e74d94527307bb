package cep

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cepheus-cep/cepheus/event"
)

// ErrCorruptSnapshot marks the errors of [RestoreOperator] for a truncated,
// malformed or inconsistent snapshot.
var ErrCorruptSnapshot = errors.New("cep: corrupt operator snapshot")

const snapshotVersion = 1

// Snapshot encodes the operator's whole state: the watermark, the
// processing clock, the counters and, for every key in key order, its
// first-seen rank, its buffered elements by timestamp (in arrival order)
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
	b = binary.AppendUvarint(b, o.nextOrder)

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
		b = binary.AppendUvarint(b, uint64(len(ks.buf)))
		for _, bk := range ks.buf {
			b = binary.AppendVarint(b, int64(bk.ts))
			b = binary.AppendUvarint(b, uint64(len(bk.evs)))
			for _, ev := range bk.evs {
				b = ev.AppendBinary(b)
			}
		}
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
// [ErrCorruptSnapshot].
func RestoreOperator(cfg OperatorConfig, snapshot []byte) (*Operator, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	o := newOperator(cfg)
	if err := o.decode(snapshot); err != nil {
		if errors.Is(err, ErrCorruptSnapshot) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", ErrCorruptSnapshot, err)
	}
	return o, nil
}

func (o *Operator) decode(b []byte) error {
	d := decoder{b: b}
	if v := d.byte(); d.err == nil && v != snapshotVersion {
		return fmt.Errorf("%w: unknown version %d", ErrCorruptSnapshot, v)
	}
	o.watermark = event.Time(d.varint())
	o.procTime = event.Time(d.varint())
	for _, c := range [...]*uint64{&o.stats.late, &o.stats.overflow, &o.stats.dropped, &o.stats.matches, &o.stats.timeouts} {
		*c = d.uvarint()
	}
	o.nextOrder = d.uvarint()

	nkeys := d.count()
	orders := make(map[uint64]bool, nkeys)
	var prev *keyState
	for range nkeys {
		if d.err != nil {
			return d.err
		}
		ks := &keyState{key: event.Key(d.bytes(d.count()))}
		ks.order = d.uvarint()
		if d.err == nil && (prev != nil && ks.key <= prev.key || ks.order >= o.nextOrder || orders[ks.order]) {
			return fmt.Errorf("%w: key %q out of order or with a bad rank", ErrCorruptSnapshot, string(ks.key))
		}
		orders[ks.order] = true
		if err := o.decodeBuffer(&d, ks); err != nil {
			return err
		}
		switch d.byte() {
		case 0:
		case 1:
			if d.err != nil {
				return d.err
			}
			run, rest, err := o.cfg.NFA.DecodeRun(d.b)
			if err != nil {
				return fmt.Errorf("%w: key %q: %w", ErrCorruptSnapshot, string(ks.key), err)
			}
			ks.run, d.b = run, rest
		default:
			d.fail()
		}
		if d.err != nil {
			return d.err
		}
		if ks.n == 0 && (ks.run == nil || ks.run.Empty()) {
			return fmt.Errorf("%w: key %q holds no state", ErrCorruptSnapshot, string(ks.key))
		}
		o.keys[ks.key] = ks
		o.buffered += ks.n
		prev = ks
	}
	if d.err != nil {
		return d.err
	}
	if len(d.b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrCorruptSnapshot, len(d.b))
	}
	// The heap orders live timers by (due, rank), and ranks are unique, so
	// the keys fire in the original operator's order whatever the order
	// they are armed in here.
	for _, ks := range o.keys {
		if due, ok := o.dueOf(ks); ok {
			o.timers.arm(ks, due)
		}
	}
	return nil
}

func (o *Operator) decodeBuffer(d *decoder, ks *keyState) error {
	nb := d.count()
	if nb > 0 {
		ks.buf = make([]bucket, 0, nb)
	}
	for range nb {
		ts := event.Time(d.varint())
		ne := d.count()
		if d.err != nil {
			return d.err
		}
		if ne == 0 || len(ks.buf) > 0 && ks.buf[len(ks.buf)-1].ts >= ts {
			return fmt.Errorf("%w: key %q: bad buffer at %d", ErrCorruptSnapshot, string(ks.key), ts)
		}
		evs := make([]*event.Event, ne)
		for i := range evs {
			ev, rest, err := event.DecodeEvent(d.b)
			if err != nil {
				return fmt.Errorf("%w: key %q: %w", ErrCorruptSnapshot, string(ks.key), err)
			}
			evs[i], d.b = ev, rest
		}
		ks.buf = append(ks.buf, bucket{ts: ts, evs: evs})
		ks.n += ne
	}
	return d.err
}

// decoder reads the snapshot encoding; the first error sticks and turns
// every later read into a zero value.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = ErrCorruptSnapshot
	}
}

func (d *decoder) byte() byte {
	if d.err != nil || len(d.b) == 0 {
		d.fail()
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a length that cannot exceed the remaining input (every
// element takes at least one byte), so a corrupt snapshot cannot make the
// decoder allocate without bound.
func (d *decoder) count() int {
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.b)) {
		d.fail()
		return 0
	}
	return int(n)
}

func (d *decoder) bytes(n int) []byte {
	if d.err != nil || n > len(d.b) {
		d.fail()
		return nil
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out
}
