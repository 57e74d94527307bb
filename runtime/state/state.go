package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"math"

	"github.com/cepheus-cep/cepheus/event"
)

// OperatorID names an operator in a job's state: every record an operator
// writes carries it, so that operators sharing a store never see each
// other's records. It stays the same across restarts of the job (a
// restored operator finds its records by it). At most 255 bytes.
type OperatorID string

// KeyGroup is the shard a key belongs to: the unit in which keyed state
// moves between subtasks when a job is rescaled (Flink's key groups).
// Operators that do not shard their state yet write key group 0.
type KeyGroup uint16

// DefaultKeyGroups is the number of key groups keyed state is split into
// unless an operator is configured otherwise (docs/decisions.md, "Shard
// model").
const DefaultKeyGroups = 128

// MaxKeyGroups is the most key groups an operator may split its keys into:
// key group MaxKeyGroups (the largest KeyGroup) is left for an operator's
// records that belong to no key.
const MaxKeyGroups = math.MaxUint16

// GroupOf returns the key group of k among groups key groups: the FNV-1a
// 64-bit hash of the key bytes, mod groups. It is the same in every
// process (hash/maphash is seeded per process). REQUIRES: 0 < groups <=
// MaxKeyGroups.
func GroupOf(k event.Key, groups int) KeyGroup {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := 0; i < len(k); i++ {
		h ^= uint64(k[i])
		h *= prime
	}
	return KeyGroup(h % uint64(groups))
}

// KeyGroupRange is the key groups from First to Last, both included.
type KeyGroupRange struct {
	First, Last KeyGroup
}

// AllKeyGroups is the range of every key group.
var AllKeyGroups = KeyGroupRange{First: 0, Last: math.MaxUint16}

// Contains reports whether g lies in r.
func (r KeyGroupRange) Contains(g KeyGroup) bool { return r.First <= g && g <= r.Last }

// Key names one record: the state of one key of one operator, in the key
// group the key belongs to. An operator that writes its whole state as one
// blob uses key group 0 and the empty key.
type Key struct {
	Operator OperatorID
	KeyGroup KeyGroup
	Key      event.Key
}

func (k Key) String() string {
	return fmt.Sprintf("%s/%d/%q", k.Operator, k.KeyGroup, string(k.Key))
}

// Record is one record of state: its key and its value.
type Record struct {
	Key   Key
	Value []byte
}

// Writer takes the records of one checkpoint: what changed since the
// previous one. Put replaces the record of k with value (the writer copies
// value; the caller may reuse it at once); Delete removes the record of k
// (deleting a missing record is no error). A Writer is used by one
// goroutine: the subtask that owns the operators writing to it.
type Writer interface {
	Put(k Key, value []byte) error
	Delete(k Key) error
}

// Reader reads the records of a checkpoint, to restore operators from.
type Reader interface {
	// Records yields the records of op whose key group lies in groups, in
	// key order ([Compare]). The value is valid only until the next
	// iteration and must not be modified: copy it to keep it. An error
	// (of the store) is yielded once, as the last pair, with a zero
	// Record.
	Records(op OperatorID, groups KeyGroupRange) iter.Seq2[Record, error]
}

// ErrCorruptKey marks an encoded key that [DecodeKey] cannot read.
var ErrCorruptKey = errors.New("state: corrupt record key")

// AppendKey appends the byte encoding of k to b: the operator id's length
// (one byte) and bytes, the key group (two bytes, big endian), then the
// key's bytes. Encoded keys sort as [Compare] orders keys, and the records
// of one operator, or of one key group of it, are a contiguous range:
// this is the key of a record in an ordered store such as Pebble.
// AppendKey panics when the operator id is longer than 255 bytes.
func AppendKey(b []byte, k Key) []byte {
	if len(k.Operator) > math.MaxUint8 {
		panic(fmt.Sprintf("state: operator id %q longer than 255 bytes", k.Operator))
	}
	b = append(b, byte(len(k.Operator)))
	b = append(b, k.Operator...)
	b = binary.BigEndian.AppendUint16(b, uint16(k.KeyGroup))
	return append(b, k.Key...)
}

// DecodeKey decodes a key encoded by [AppendKey]. The error wraps
// [ErrCorruptKey].
func DecodeKey(b []byte) (Key, error) {
	if len(b) < 1 || len(b) < 1+int(b[0])+2 {
		return Key{}, fmt.Errorf("%w: %d bytes", ErrCorruptKey, len(b))
	}
	n := int(b[0])
	return Key{
		Operator: OperatorID(b[1 : 1+n]),
		KeyGroup: KeyGroup(binary.BigEndian.Uint16(b[1+n:])),
		Key:      event.Key(b[1+n+2:]),
	}, nil
}

// Compare orders keys by operator id, key group, then key (bytewise), the
// order of their encodings.
func Compare(a, b Key) int {
	if len(a.Operator) != len(b.Operator) {
		// The encoding puts the id's length first.
		if len(a.Operator) < len(b.Operator) {
			return -1
		}
		return 1
	}
	switch {
	case a.Operator < b.Operator:
		return -1
	case a.Operator > b.Operator:
		return 1
	case a.KeyGroup < b.KeyGroup:
		return -1
	case a.KeyGroup > b.KeyGroup:
		return 1
	case a.Key < b.Key:
		return -1
	case a.Key > b.Key:
		return 1
	}
	return 0
}
