package state

import (
	"bytes"
	"iter"
	"maps"
	"slices"
	"strings"
)

// Mem is an in-memory state store: a [Writer] and a [Reader] over one
// table of records, whose [Mem.Snapshot] freezes the table as it is (a
// checkpoint). It is the store of tests and of small jobs; the Pebble
// store of later issues has the same interfaces. A Mem is not safe for
// concurrent use; its snapshots are immutable and are.
type Mem struct {
	recs map[string][]byte // encoded key -> value (owned, never modified)
	// shared says that a snapshot holds recs: the next write copies the
	// map first, so snapshots never see later writes.
	shared bool
	bytes  int64 // of the records' keys and values
}

// NewMem returns an empty in-memory store.
func NewMem() *Mem { return &Mem{recs: map[string][]byte{}} }

// Put sets the record of k to a copy of value.
func (m *Mem) Put(k Key, value []byte) error {
	m.own()
	ek := string(AppendKey(nil, k))
	if old, ok := m.recs[ek]; ok {
		m.bytes -= int64(len(ek) + len(old))
	}
	m.recs[ek] = bytes.Clone(value)
	m.bytes += int64(len(ek) + len(value))
	return nil
}

// Delete removes the record of k, if any.
func (m *Mem) Delete(k Key) error {
	m.own()
	ek := string(AppendKey(nil, k))
	if old, ok := m.recs[ek]; ok {
		m.bytes -= int64(len(ek) + len(old))
		delete(m.recs, ek)
	}
	return nil
}

func (m *Mem) own() {
	if m.shared {
		m.recs = maps.Clone(m.recs)
		m.shared = false
	}
}

// Len is the number of records.
func (m *Mem) Len() int { return len(m.recs) }

// Bytes is the size of the records: their encoded keys and values.
func (m *Mem) Bytes() int64 { return m.bytes }

// CopyTo writes every record of m into w, in no particular order (a
// store rebuilt from records gathered in memory). A record whose key does
// not decode is [ErrCorruptKey].
func (m *Mem) CopyTo(w Writer) error {
	for k, v := range m.recs {
		key, err := DecodeKey([]byte(k))
		if err != nil {
			return err
		}
		if err := w.Put(key, v); err != nil {
			return err
		}
	}
	return nil
}

// Records yields the current records of op in groups, in key order
// ([Reader]). Writing to m during the iteration is not allowed.
func (m *Mem) Records(op OperatorID, groups KeyGroupRange) iter.Seq2[Record, error] {
	return records(m.recs, op, groups)
}

// Snapshot returns the records as they are now: later writes to m do not
// change it. It costs O(1); the next write to m copies the table.
func (m *Mem) Snapshot() *MemSnapshot {
	m.shared = true
	return &MemSnapshot{recs: m.recs}
}

// MemSnapshot is a frozen copy of a [Mem]: a [Reader] of one checkpoint.
type MemSnapshot struct {
	recs map[string][]byte
}

// Records yields the records of op in groups, in key order ([Reader]).
func (s *MemSnapshot) Records(op OperatorID, groups KeyGroupRange) iter.Seq2[Record, error] {
	return records(s.recs, op, groups)
}

// Len is the number of records.
func (s *MemSnapshot) Len() int { return len(s.recs) }

func records(recs map[string][]byte, op OperatorID, groups KeyGroupRange) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		prefix := string(AppendKey(nil, Key{Operator: op}))
		prefix = prefix[:len(prefix)-2] // the operator id, without the key group
		var keys []string
		for k := range recs {
			if strings.HasPrefix(k, prefix) && len(k) >= len(prefix)+2 {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, ek := range keys {
			k, err := DecodeKey([]byte(ek))
			if err != nil {
				yield(Record{}, err)
				return
			}
			if !groups.Contains(k.KeyGroup) {
				continue
			}
			if !yield(Record{Key: k, Value: recs[ek]}, nil) {
				return
			}
		}
	}
}
