package event

import "encoding/binary"

// Reader reads the varint-based binary encodings of checkpointed state
// (run state, operator snapshots). The first error sticks: every later
// read returns a zero value, so a decoder can read a whole record and check
// Err once. Lengths read with Count are bounded by the remaining input, so
// corrupt input cannot make a decoder allocate without bound.
type Reader struct {
	// B is the unread input; a decoder may consume it directly (for
	// example with DecodeEvent) and store the rest back.
	B []byte
	// Err is the first error, Corrupt's value.
	Err error
	// Corrupt is the error a malformed input sets (the caller's sentinel).
	Corrupt error
}

// Fail records Corrupt as the error unless one is already set.
func (r *Reader) Fail() {
	if r.Err == nil {
		r.Err = r.Corrupt
	}
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if r.Err != nil || len(r.B) == 0 {
		r.Fail()
		return 0
	}
	c := r.B[0]
	r.B = r.B[1:]
	return c
}

// Bool reads a byte that is 0 (false) or 1 (true); any other byte is
// corrupt.
func (r *Reader) Bool() bool {
	c := r.Byte()
	if c > 1 {
		r.Fail()
	}
	return c == 1
}

// Uvarint reads an unsigned varint.
func (r *Reader) Uvarint() uint64 {
	if r.Err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.B)
	if n <= 0 {
		r.Fail()
		return 0
	}
	r.B = r.B[n:]
	return v
}

// Varint reads a signed varint.
func (r *Reader) Varint() int64 {
	if r.Err != nil {
		return 0
	}
	v, n := binary.Varint(r.B)
	if n <= 0 {
		r.Fail()
		return 0
	}
	r.B = r.B[n:]
	return v
}

// Count reads a length that cannot exceed the remaining input (every
// element takes at least one byte).
func (r *Reader) Count() int {
	n := r.Uvarint()
	if r.Err == nil && n > uint64(len(r.B)) {
		r.Fail()
		return 0
	}
	return int(n)
}

// Bytes reads n bytes; the result aliases the input.
func (r *Reader) Bytes(n int) []byte {
	if r.Err != nil || n < 0 || n > len(r.B) {
		r.Fail()
		return nil
	}
	out := r.B[:n]
	r.B = r.B[n:]
	return out
}
