package state

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	iofs "io/fs"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// The file of a [Mem] store in a checkpoint:
//
//	memMagic, the format version (uvarint), the number of records
//	(uvarint), then per record (each key once, in no particular order:
//	sorting a million keys took most of the time of writing them) its
//	encoded key and its value (each a uvarint length and the bytes), then
//	the CRC-32C (Castagnoli) of everything before it, 4 bytes big endian.
const (
	memMagic   = "cepheus-mem\n"
	memVersion = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// writeMemFile writes the records of s to a new file at path and syncs it.
func writeMemFile(fs vfs.FS, path string, s *MemSnapshot) error {
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if err := encodeMem(f, s.recs); err != nil {
		f.Close()
		if pe := (*iofs.PathError)(nil); errors.As(err, &pe) {
			return fmt.Errorf("state: %w", err) // it names the path
		}
		return fmt.Errorf("state: write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func encodeMem(w io.Writer, recs map[string][]byte) error {
	crc := crc32.New(castagnoli)
	// The checksum first: a writer may scribble on what it was given (pebble's
	// MemFS does, under the race detector, to catch callers that rely on it).
	bw := bufio.NewWriterSize(io.MultiWriter(crc, w), 64<<10)
	var n [binary.MaxVarintLen64]byte
	uvarint := func(v uint64) { bw.Write(n[:binary.PutUvarint(n[:], v)]) }
	bw.WriteString(memMagic)
	uvarint(memVersion)
	uvarint(uint64(len(recs)))
	for k, v := range recs {
		uvarint(uint64(len(k)))
		bw.WriteString(k)
		uvarint(uint64(len(v)))
		bw.Write(v)
	}
	if err := bw.Flush(); err != nil { // the first write error, if any
		return err
	}
	_, err := w.Write(binary.BigEndian.AppendUint32(nil, crc.Sum32()))
	return err
}

// readMemFile reads a file written by [writeMemFile] into a new [Mem].
func readMemFile(fs vfs.FS, path string) (*Mem, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	m, err := decodeMem(b)
	if err != nil {
		return nil, fmt.Errorf("%w (%s)", err, path)
	}
	return m, nil
}

func decodeMem(b []byte) (*Mem, error) {
	corrupt := func(what string) error { return fmt.Errorf("%w: mem store file: %s", ErrCorruptCheckpoint, what) }
	if len(b) < len(memMagic)+4 || string(b[:len(memMagic)]) != memMagic {
		return nil, corrupt("not a mem store file")
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, corrupt("checksum mismatch")
	}
	r := body[len(memMagic):]
	uvarint := func() uint64 {
		v, n := binary.Uvarint(r)
		if n <= 0 {
			r = nil
			return 0
		}
		r = r[n:]
		return v
	}
	bytesOf := func() ([]byte, bool) {
		n := uvarint()
		if r == nil || n > uint64(len(r)) {
			return nil, false
		}
		v := r[:n:n]
		r = r[n:]
		return v, true
	}
	if v := uvarint(); v != memVersion {
		return nil, fmt.Errorf("%w %d of a mem store file (this build reads version %d)", ErrCheckpointVersion, v, memVersion)
	}
	count := uvarint()
	if r == nil || count > uint64(len(r)) {
		return nil, corrupt("bad record count")
	}
	m := &Mem{recs: make(map[string][]byte, count)}
	for range count {
		k, ok := bytesOf()
		if !ok {
			return nil, corrupt("truncated key")
		}
		v, ok := bytesOf()
		if !ok {
			return nil, corrupt("truncated value")
		}
		if _, err := DecodeKey(k); err != nil {
			return nil, corrupt(err.Error())
		}
		if _, ok := m.recs[string(k)]; ok {
			return nil, corrupt(fmt.Sprintf("key %x twice", k))
		}
		m.recs[string(k)] = v // a sub-slice of b, which m now owns
		m.bytes += int64(len(k) + len(v))
	}
	if len(r) != 0 {
		return nil, corrupt("trailing bytes")
	}
	return m, nil
}
