package runtime

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/runtime/state"
)

// Position is where the reading of one input partition stands: what a
// checkpoint stores of a source, so that a restart reads on from the
// record after the last one the checkpoint covers.
//
// The zero Position of a file (File set, Offset and Line 0) is its start.
// The position just before a [Record] r is {File, r.Offset, r.Line - 1}:
// blank lines skipped in between are read (and skipped) again.
type Position struct {
	// File is the partition's name ([Partition.Name]): the file's base
	// name, "stdin" for standard input. A checkpoint therefore survives the
	// directory being moved or named by another path.
	File string
	// Offset is the byte offset of the next line in the uncompressed
	// stream (a UTF-8 byte order mark at the start counts).
	Offset int64
	// Line is the number of lines before Offset: the next line read is
	// line Line+1. Blank lines count, as in [Record].Line.
	Line int64
}

// ErrBadPosition is the error (wrapped, with the details) of resuming a
// source at a [Position] that does not fit its input: another file name,
// an input shorter than the offset, or an offset that is not at the start
// of a line.
var ErrBadPosition = errors.New("runtime: source position does not fit the input")

// positionVersion is the first byte of an encoded Position.
const positionVersion = 1

// AppendBinary appends the encoding of p to b (it implements
// encoding.BinaryAppender): a version byte, the name's length and bytes,
// then the offset and the line as unsigned varints. It fails only for a
// negative offset or line.
func (p Position) AppendBinary(b []byte) ([]byte, error) {
	if p.Offset < 0 || p.Line < 0 {
		return b, fmt.Errorf("runtime: position %s: negative offset or line", p)
	}
	b = append(b, positionVersion)
	b = binary.AppendUvarint(b, uint64(len(p.File)))
	b = append(b, p.File...)
	b = binary.AppendUvarint(b, uint64(p.Offset))
	return binary.AppendUvarint(b, uint64(p.Line)), nil
}

// errCorruptPosition is the error of decoding a malformed Position.
var errCorruptPosition = errors.New("runtime: corrupt source position")

// DecodePosition decodes a Position that [Position.AppendBinary] wrote at
// the start of b. It returns the position and the rest of b, which may
// hold further positions.
func DecodePosition(b []byte) (Position, []byte, error) {
	r := event.Reader{B: b, Corrupt: errCorruptPosition}
	if v := r.Byte(); r.Err == nil && v > positionVersion {
		return Position{}, b, state.LaterRecord("a source position", uint64(v), positionVersion)
	} else if r.Err == nil && v != positionVersion {
		return Position{}, b, fmt.Errorf("runtime: source position of an unknown version %d", v)
	}
	var p Position
	p.File = string(r.Bytes(r.Count()))
	off, line := r.Uvarint(), r.Uvarint()
	if r.Err != nil || off > 1<<62 || line > 1<<62 || line > off {
		return Position{}, b, errCorruptPosition
	}
	p.Offset, p.Line = int64(off), int64(line)
	return p, r.B, nil
}

// String returns "name@offset:line".
func (p Position) String() string { return fmt.Sprintf("%s@%d:%d", p.File, p.Offset, p.Line) }

// partitionName is the name of the partition read from path: its base
// name, "stdin" for "-".
func partitionName(path string) string {
	if path == "-" {
		return "stdin"
	}
	return filepath.Base(path)
}

// Position returns the position after the last record Next returned (the
// start before the first): resuming there with [OpenFileSourceAt] yields
// the records that come after it.
func (s *FileSource) Position() Position {
	return Position{File: partitionName(s.name), Offset: s.off, Line: s.line}
}

// OpenFileSourceAt opens path ("-" is standard input) as [OpenFileSource]
// does and resumes it at pos: the first record Next returns is the first
// one after pos, with its line number and offset as in an uninterrupted
// read. A plain file is resumed by seeking; a gzip file (and standard
// input, which cannot seek) by decompressing (reading) again from the
// start and discarding up to the offset.
//
// It fails with [ErrBadPosition] when pos names another file than path's
// base name, when the input is shorter than pos.Offset, or when the byte
// before pos.Offset is not a newline (unless pos is at the very end of an
// input whose last line has none): the input is not the one the position
// was taken from.
func OpenFileSourceAt(path string, pos Position, cfg SourceConfig) (*FileSource, error) {
	if path == "-" {
		return openSourceAt(os.Stdin, "stdin", nil, pos, cfg)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("runtime: source: %w", err)
	}
	s, err := openSourceAt(f, path, f, pos, cfg)
	if err != nil {
		f.Close()
		return nil, err
	}
	s.closer = f
	return s, nil
}

// openSourceAt builds a FileSource named name over r and resumes it at pos.
// seek, when r is a regular file, is that file: a plain input is then
// resumed by seeking it (r may wrap it, reading from its current offset);
// otherwise the stream is read and discarded up to the offset.
func openSourceAt(r io.Reader, name string, seek *os.File, pos Position, cfg SourceConfig) (*FileSource, error) {
	if err := checkPosition(pos, name); err != nil {
		return nil, err
	}
	s, err := newFileSource(r, name, nil, cfg)
	if err != nil {
		return nil, err
	}
	if seek != nil {
		if fi, err := seek.Stat(); err == nil && fi.Mode().IsRegular() {
			s.size = fi.Size()
		} else {
			seek = nil
		}
	}
	if err := s.resume(pos, seek); err != nil {
		return nil, err
	}
	return s, nil
}

// checkPosition checks that pos is a valid position of the input name.
func checkPosition(pos Position, name string) error {
	if pos.File != partitionName(name) {
		return fmt.Errorf("%w: position %s is not of %s", ErrBadPosition, pos, name)
	}
	if pos.Offset < 0 || pos.Line < 0 || pos.Line > pos.Offset {
		return fmt.Errorf("%w: position %s is invalid", ErrBadPosition, pos)
	}
	return nil
}

// resume moves a fresh source to pos, by seeking f when it is set and the
// input is plain, else by discarding.
func (s *FileSource) resume(pos Position, f *os.File) error {
	switch {
	case pos.Line == 0 && (pos.Offset == 0 || pos.Offset == s.off):
		return nil // the start (before or after a byte order mark)
	case pos.Offset < s.off || pos.Line == 0:
		return fmt.Errorf("%w: position %s does not fit the start of %s", ErrBadPosition, pos, s.name)
	}
	short := func() error {
		return fmt.Errorf("%w: %s is shorter than position %s", ErrBadPosition, s.name, pos)
	}
	notLine := func() error {
		return fmt.Errorf("%w: position %s is not at the start of a line of %s", ErrBadPosition, pos, s.name)
	}
	if f != nil && s.gz == nil {
		if s.size < pos.Offset {
			return short()
		}
		var c [1]byte
		if _, err := f.ReadAt(c[:], pos.Offset-1); err != nil {
			return fmt.Errorf("runtime: source %s: %w", s.name, err)
		}
		if c[0] != '\n' && pos.Offset < s.size {
			return notLine()
		}
		if _, err := f.Seek(pos.Offset, io.SeekStart); err != nil {
			return fmt.Errorf("runtime: source %s: %w", s.name, err)
		}
		// What the buffer read ahead (the magic-byte check) is behind us.
		s.r.Reset(&s.counter)
		s.counter.n = pos.Offset
	} else {
		_, err := s.r.Discard(int(pos.Offset - s.off - 1))
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return short()
		}
		if err != nil {
			return fmt.Errorf("runtime: source %s: %w", s.name, err)
		}
		c, err := s.r.ReadByte()
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return short()
		}
		if err != nil {
			return fmt.Errorf("runtime: source %s: %w", s.name, err)
		}
		if c != '\n' {
			if _, err := s.r.Peek(1); err != io.EOF {
				return notLine()
			}
		}
	}
	s.off, s.line = pos.Offset, pos.Line
	return nil
}
