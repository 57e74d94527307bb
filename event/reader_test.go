package event

import (
	"encoding/binary"
	"errors"
	"testing"
)

func TestReader(t *testing.T) {
	errBad := errors.New("bad")
	var b []byte
	b = append(b, 7)
	b = binary.AppendUvarint(b, 300)
	b = binary.AppendVarint(b, -5)
	b = binary.AppendUvarint(b, 2)
	b = append(b, 'h', 'i')
	r := &Reader{B: b, Corrupt: errBad}
	if r.Byte() != 7 || r.Uvarint() != 300 || r.Varint() != -5 {
		t.Fatal("wrong values")
	}
	if n := r.Count(); n != 2 || string(r.Bytes(n)) != "hi" || r.Err != nil || len(r.B) != 0 {
		t.Fatalf("count/bytes: err %v, rest %d", r.Err, len(r.B))
	}
	// Reading past the end sets Corrupt, and it sticks.
	if r.Byte() != 0 || !errors.Is(r.Err, errBad) {
		t.Fatalf("err = %v, want bad", r.Err)
	}
	r = &Reader{B: binary.AppendUvarint(nil, 1000), Corrupt: errBad}
	if r.Count() != 0 || !errors.Is(r.Err, errBad) {
		t.Fatalf("a count beyond the input: err = %v", r.Err)
	}
	r = &Reader{B: []byte{1, 2}, Corrupt: errBad}
	if r.Bytes(3) != nil || !errors.Is(r.Err, errBad) || r.Uvarint() != 0 {
		t.Fatalf("Bytes past the end: err = %v", r.Err)
	}
	// A bool is the byte 0 or 1; any other is corrupt, not false.
	r = &Reader{B: []byte{0, 1, 2}, Corrupt: errBad}
	if r.Bool() || !r.Bool() || r.Err != nil {
		t.Fatalf("Bool of 0 and 1: err = %v", r.Err)
	}
	if r.Bool() || !errors.Is(r.Err, errBad) {
		t.Fatalf("Bool of 2: err = %v", r.Err)
	}
}
