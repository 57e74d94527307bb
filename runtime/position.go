package runtime

import (
	"bytes"
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

// A Mark is the last bytes of the last record read before a [Position]:
// at most [MarkBytes] of its line (terminator excluded), ending at byte At
// of the (decompressed) stream. A checkpoint keeps one beside each file's
// position, and a resume given it ([ReaderConfig].Marks) refuses a file
// that holds other bytes there: another file took the name (a rotation
// that renamed the file read away and created a new one, a rewrite),
// whose first lines reading on from the old position would skip without
// a word whenever the byte before the position happens to be a newline.
// The zero Mark checks nothing (a checkpoint of an earlier build, a
// position before the first record).
type Mark struct {
	At    int64
	Bytes []byte
}

// MarkBytes bounds a [Mark].
const MarkBytes = 64

// MarkOf returns the mark of the position just after rec (a copy of the
// end of its data).
func MarkOf(rec *Record) Mark {
	d := rec.Data
	if len(d) > MarkBytes {
		d = d[len(d)-MarkBytes:]
	}
	return Mark{At: rec.Offset + int64(len(rec.Data)), Bytes: append([]byte(nil), d...)}
}

// errReplaced is the error of a resume whose file holds other bytes than
// its mark's.
func errReplaced(name string, pos Position) error {
	if name == "stdin" {
		return fmt.Errorf("%w: stdin holds other bytes before position %s than the run that took the checkpoint read there: it is another stream, and reading it on from there would skip its first lines; pipe in the stream the run read, from its first byte, to resume it (or give another stream a new state directory)",
			ErrBadPosition, pos)
	}
	return fmt.Errorf("%w: %s holds other bytes before position %s than the run that took the checkpoint read there: another file has taken its name since (a rotation, a rewrite), and reading it on from there would skip its first lines; put back the file that was read to resume it (a followed directory reads a file under a new name as a new partition)",
		ErrBadPosition, name, pos)
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
	return openFileSourceAt(path, pos, Mark{}, cfg)
}

// openFileSourceAt is OpenFileSourceAt, checking mark (of pos) too.
func openFileSourceAt(path string, pos Position, mark Mark, cfg SourceConfig) (*FileSource, error) {
	if path == "-" {
		return openSourceAt(os.Stdin, "stdin", nil, pos, mark, cfg)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("runtime: source: %w", err)
	}
	s, err := openSourceAt(f, path, f, pos, mark, cfg)
	if err != nil {
		f.Close()
		return nil, err
	}
	s.closer = f
	return s, nil
}

// openSourceAt builds a FileSource named name over r and resumes it at pos,
// checking mark. seek, when r is a regular file, is that file: a plain
// input is then resumed by seeking it (r may wrap it, reading from its
// current offset); otherwise the stream is read and discarded up to the
// offset.
func openSourceAt(r io.Reader, name string, seek *os.File, pos Position, mark Mark, cfg SourceConfig) (*FileSource, error) {
	if err := checkPosition(pos, name); err != nil {
		return nil, err
	}
	if err := checkMark(mark, pos); err != nil {
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
	if err := s.resume(pos, mark, seek); err != nil {
		return nil, err
	}
	return s, nil
}

// checkMark checks that mark can be the mark of pos: its bytes end at the
// position at the latest.
func checkMark(mark Mark, pos Position) error {
	if len(mark.Bytes) == 0 {
		return nil
	}
	if len(mark.Bytes) > MarkBytes || mark.At < int64(len(mark.Bytes)) || mark.At > pos.Offset {
		return fmt.Errorf("%w: the mark of position %s (%d bytes ending at %d) does not fit it", ErrBadPosition, pos, len(mark.Bytes), mark.At)
	}
	return nil
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
// input is plain, else by discarding, and checks that the bytes before pos
// are mark's (checkMark has checked that it fits pos).
func (s *FileSource) resume(pos Position, mark Mark, f *os.File) error {
	switch {
	case pos.Line == 0 && (pos.Offset == 0 || pos.Offset == s.off):
		return nil // the start (before or after a byte order mark)
	case pos.Offset < s.off || pos.Line == 0:
		return fmt.Errorf("%w: position %s does not fit the start of %s", ErrBadPosition, pos, s.name)
	}
	markFrom := mark.At - int64(len(mark.Bytes))
	if len(mark.Bytes) > 0 && markFrom < s.off {
		return fmt.Errorf("%w: the mark of position %s starts before the data of %s", ErrBadPosition, pos, s.name)
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
		if len(mark.Bytes) > 0 {
			same, err := sameTailOf(f, mark.Bytes, mark.At)
			if err != nil {
				return err
			}
			if !same {
				return errReplaced(s.name, pos)
			}
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
		at := s.off // where the discarding stands
		discard := func(to int64) error {
			_, err := s.r.Discard(int(to - at))
			at = to
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return short()
			}
			if err != nil {
				return fmt.Errorf("runtime: source %s: %w", s.name, err)
			}
			return nil
		}
		if len(mark.Bytes) > 0 {
			if err := discard(markFrom); err != nil {
				return err
			}
			b := make([]byte, len(mark.Bytes))
			_, err := io.ReadFull(s.r, b)
			at = mark.At
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return short()
			}
			if err != nil {
				return fmt.Errorf("runtime: source %s: %w", s.name, err)
			}
			if !bytes.Equal(b, mark.Bytes) {
				return errReplaced(s.name, pos)
			}
		}
		// The byte before the position: the mark's last one when the
		// mark ends there (a last line without its newline).
		var c byte
		if at < pos.Offset {
			if err := discard(pos.Offset - 1); err != nil {
				return err
			}
			var err error
			c, err = s.r.ReadByte()
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return short()
			}
			if err != nil {
				return fmt.Errorf("runtime: source %s: %w", s.name, err)
			}
		} else {
			c = mark.Bytes[len(mark.Bytes)-1]
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
