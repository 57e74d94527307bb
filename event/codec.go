package event

import (
	"encoding/binary"
	"errors"
	"math"
)

// ErrCorrupt is returned by the decoders when the input is truncated or
// malformed.
var ErrCorrupt = errors.New("event: corrupt encoding")

// AppendBinary appends the compact binary encoding of v to b.
func (v Value) AppendBinary(b []byte) []byte {
	k := v.Kind()
	b = append(b, byte(k))
	switch k {
	case KindBool:
		b = append(b, byte(v.n))
	case KindInt:
		b = binary.AppendVarint(b, int64(v.n))
	case KindFloat:
		b = binary.LittleEndian.AppendUint64(b, v.n)
	case KindString:
		b = binary.AppendUvarint(b, v.n)
		b = append(b, v.str()...)
	}
	return b
}

// DecodeValue decodes one value from b and returns the rest of b.
func DecodeValue(b []byte) (Value, []byte, error) {
	if len(b) == 0 {
		return Null, nil, ErrCorrupt
	}
	k := Kind(b[0])
	b = b[1:]
	switch k {
	case KindNull:
		return Null, b, nil
	case KindBool:
		if len(b) < 1 || b[0] > 1 {
			return Null, nil, ErrCorrupt
		}
		return Bool(b[0] == 1), b[1:], nil
	case KindInt:
		i, n := binary.Varint(b)
		if n <= 0 {
			return Null, nil, ErrCorrupt
		}
		return Int(i), b[n:], nil
	case KindFloat:
		if len(b) < 8 {
			return Null, nil, ErrCorrupt
		}
		return Float(math.Float64frombits(binary.LittleEndian.Uint64(b))), b[8:], nil
	case KindString:
		l, n := binary.Uvarint(b)
		if n <= 0 || uint64(len(b)-n) < l {
			return Null, nil, ErrCorrupt
		}
		return String(string(b[n : n+int(l)])), b[n+int(l):], nil
	}
	return Null, nil, ErrCorrupt
}

// AppendBinary appends the binary encoding of e to b.
func (e *Event) AppendBinary(b []byte) []byte {
	b = binary.AppendVarint(b, int64(e.Time))
	b = binary.AppendUvarint(b, e.Seq)
	b = binary.AppendUvarint(b, uint64(len(e.Fields)))
	for _, v := range e.Fields {
		b = v.AppendBinary(b)
	}
	return b
}

// DecodeEvent decodes one event from b and returns the rest of b.
func DecodeEvent(b []byte) (*Event, []byte, error) {
	t, n := binary.Varint(b)
	if n <= 0 {
		return nil, nil, ErrCorrupt
	}
	b = b[n:]
	seq, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, nil, ErrCorrupt
	}
	b = b[n:]
	nf, n := binary.Uvarint(b)
	if n <= 0 || nf > uint64(len(b)) {
		return nil, nil, ErrCorrupt
	}
	b = b[n:]
	e := &Event{Time: Time(t), Seq: seq, Fields: make([]Value, nf)}
	for i := range e.Fields {
		var err error
		if e.Fields[i], b, err = DecodeValue(b); err != nil {
			return nil, nil, err
		}
	}
	return e, b, nil
}
