package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"slices"
	"testing"
)

// withCRC is body followed by its CRC-32C, as the mem store files and
// the markers end: the fuzz targets below mutate what the checksum
// covers, or else nearly every input would fail it.
func withCRC(body []byte) []byte {
	return binary.BigEndian.AppendUint32(slices.Clip(body), crc32.Checksum(body, castagnoli))
}

// FuzzDecodeMem decodes arbitrary bytes, given their checksum, as a mem
// store file. The input fails with ErrCorruptCheckpoint (or a version
// error), or decodes to a store whose file decodes to an equal store,
// counting the bytes of each record once.
func FuzzDecodeMem(f *testing.F) {
	m := NewMem()
	for i, k := range []Key{{Operator: "cep/cards", KeyGroup: 3, Key: "card-1"}, {Operator: "cep/cards", KeyGroup: 0xffff}, {Operator: "", Key: "x"}} {
		if err := m.Put(k, bytes.Repeat([]byte{byte(i)}, i*3)); err != nil {
			f.Fatal(err)
		}
	}
	for _, s := range []*Mem{NewMem(), m} {
		var b bytes.Buffer
		if err := encodeMem(&b, s.Snapshot().recs); err != nil {
			f.Fatal(err)
		}
		f.Add(b.Bytes()[:b.Len()-4])
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := decodeMem(withCRC(body))
		if err != nil {
			if !errors.Is(err, ErrCorruptCheckpoint) && !errors.Is(err, ErrCheckpointVersion) {
				t.Fatalf("error %v is neither ErrCorruptCheckpoint nor ErrCheckpointVersion", err)
			}
			return
		}
		n := int64(0)
		for k, v := range m.recs {
			n += int64(len(k) + len(v))
		}
		if m.bytes != n {
			t.Fatalf("the store counts %d bytes, its records hold %d", m.bytes, n)
		}
		var b bytes.Buffer
		if err := encodeMem(&b, m.recs); err != nil {
			t.Fatal(err)
		}
		m2, err := decodeMem(b.Bytes())
		if err != nil || !maps.EqualFunc(m.recs, m2.recs, bytes.Equal) || m2.bytes != m.bytes {
			t.Fatalf("the file of a decoded store does not decode to it (%v)", err)
		}
	})
}

// FuzzDecodeMarker decodes arbitrary bytes, given their checksum line,
// as a checkpoint's marker: it fails with ErrCorruptCheckpoint (or a
// version error), or decodes to a marker that encodes to a marker
// decoding to the same.
func FuzzDecodeMarker(f *testing.F) {
	for _, m := range []marker{
		{Format: CheckpointFormat, ID: 7},
		{Format: CheckpointFormat, ID: 1 << 40, Stores: []markerStore{{Name: "sub-0", Kind: KindPebble}, {Name: "sub-1", Kind: KindMem}},
			Meta: []markerBlob{{Name: "job", Size: 120, CRC: 0xdeadbeef}}},
	} {
		b := encodeMarker(m)
		lines := bytes.SplitN(b, []byte("\n"), 4)
		f.Add(string(lines[1]), lines[3])
	}
	f.Fuzz(func(t *testing.T, format string, body []byte) {
		b := fmt.Appendf(nil, "%s\n%s\ncrc32c 0x%08x\n%s", markerMagic, format, crc32.Checksum(body, castagnoli), body)
		m, err := decodeMarker(b)
		if err != nil {
			if !errors.Is(err, ErrCorruptCheckpoint) && !errors.Is(err, ErrCheckpointVersion) {
				t.Fatalf("error %v is neither ErrCorruptCheckpoint nor ErrCheckpointVersion", err)
			}
			return
		}
		m2, err := decodeMarker(encodeMarker(m))
		if err != nil || m2.ID != m.ID || m2.Format != m.Format || !slices.Equal(m2.Stores, m.Stores) || !slices.Equal(m2.Meta, m.Meta) {
			t.Fatalf("marker %+v encodes to one that decodes to %+v (%v)", m, m2, err)
		}
	})
}

// TestDecodeMemRejectsKeyTwice: a mem store file holds each key once (it
// is written from a map); a file that holds one twice is corrupt, not
// the store of its last value (whose byte count would count both).
func TestDecodeMemRejectsKeyTwice(t *testing.T) {
	k := AppendKey(nil, Key{Operator: "op", KeyGroup: 1, Key: "k"})
	body := binary.AppendUvarint([]byte(memMagic), memVersion)
	body = binary.AppendUvarint(body, 2)
	for _, v := range []string{"first", "second"} {
		body = binary.AppendUvarint(body, uint64(len(k)))
		body = append(body, k...)
		body = binary.AppendUvarint(body, uint64(len(v)))
		body = append(body, v...)
	}
	if m, err := decodeMem(withCRC(body)); !errors.Is(err, ErrCorruptCheckpoint) {
		t.Fatalf("decodeMem: %v (%d records), want ErrCorruptCheckpoint", err, m.Len())
	}
}
