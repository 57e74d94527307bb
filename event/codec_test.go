package event

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

// FuzzDecodeEvent decodes arbitrary bytes as an event (the encoding of
// the events in snapshots and changelogs). The input fails with
// ErrCorrupt or decodes to an event whose encoding decodes again to the
// same encoding, with the rest of the input after it.
func FuzzDecodeEvent(f *testing.F) {
	for _, e := range []*Event{
		{},
		{Time: 1700000000000, Seq: 42, Fields: []Value{String("card-1"), Float(12.5), Int(-3), Bool(true), Bool(false), Null, String("")}},
		{Time: -1, Seq: math.MaxUint64, Fields: []Value{Float(math.NaN()), Float(math.Inf(-1)), Int(math.MinInt64), String("é\x00")}},
	} {
		f.Add(e.AppendBinary(nil))
		f.Add(e.AppendBinary([]byte{0}))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, rest, err := DecodeEvent(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if len(rest) > len(b) || !bytes.Equal(rest, b[len(b)-len(rest):]) {
			t.Fatalf("rest %x is not a suffix of the input %x", rest, b)
		}
		enc := e.AppendBinary(nil)
		e2, rest2, err := DecodeEvent(append(enc, 0xff))
		if err != nil || len(rest2) != 1 {
			t.Fatalf("re-encoding %x does not decode: %v (rest %x)", enc, err, rest2)
		}
		if again := e2.AppendBinary(nil); !bytes.Equal(again, enc) {
			t.Fatalf("re-encoding is not stable:\n%x\n%x", enc, again)
		}
	})
}

// A bool is encoded as the byte 0 or 1; any other byte is corrupt, not
// false.
func TestDecodeValueRejectsBadBool(t *testing.T) {
	for c := range 256 {
		v, rest, err := DecodeValue([]byte{byte(KindBool), byte(c), 9})
		switch c {
		case 0, 1:
			if b, ok := v.AsBool(); err != nil || !ok || b != (c == 1) || len(rest) != 1 {
				t.Errorf("byte %d: %v, %v, rest %x", c, v, err, rest)
			}
		default:
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("byte %d: got %v, %v, want ErrCorrupt", c, v, err)
			}
		}
	}
}
