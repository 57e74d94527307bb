package runtime

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Record is one raw record of a [Source]: a line of a JSON-lines file.
type Record struct {
	// Line is the 1-based line number. Blank lines are skipped but
	// counted, so Line is what an editor shows.
	Line int64
	// Offset is the byte offset of the line's first byte in the
	// (decompressed) stream.
	Offset int64
	// Data is the line without its terminator ("\n" or "\r\n"). It
	// aliases the source's buffer: it is valid only until the next call
	// of Next.
	Data []byte
	// Reason is empty for a usable record. Otherwise the source could not
	// deliver the record whole and says why (today only "line too long:
	// ..."); Data then holds at most the first [DeadDataPrefix] bytes.
	// Such a record belongs in the dead letters.
	Reason string
	// Key is a Kafka record's key, from a source asked for them (nil
	// otherwise, and for a record without key; an empty key is not nil).
	Key []byte
	// File, FileLine and FileOffset place a record of a source that merges
	// several inputs into one order (a backtest of a directory or of a
	// topic's partitions, whose Line and Offset count that order): the
	// input it was read from (a file's name, TOPIC-P) and its Line and
	// Offset there, which a dead letter gives. Empty for one input.
	File                 string
	FileLine, FileOffset int64
}

// DeadDataPrefix is how much of an over-long line a [Record] keeps.
const DeadDataPrefix = 1 << 10

// Source yields the records of one input partition in order. A Source is
// used by one goroutine.
type Source interface {
	// Next returns the next record, or io.EOF when the input is exhausted;
	// any other error is fatal.
	Next() (Record, error)
}

// ProgressSource is a [Source] that can tell how far it has read. The
// subtask reports it in its progress callback when its source has it.
type ProgressSource interface {
	Source
	// Progress returns the bytes read from the underlying input so far
	// (compressed bytes for a gzip file) and its total size, -1 when
	// unknown (stdin, a pipe).
	Progress() (read, total int64)
}

// SourceConfig configures a [FileSource]. The zero value is ready to use.
type SourceConfig struct {
	// MaxLineBytes bounds a line, terminator excluded. A longer line
	// becomes a record with Reason "line too long: ..." and the source
	// skips to the next newline. Default (0): 1 MiB.
	MaxLineBytes int
	// BufferBytes is the size of the read buffer. Lines that fit in it
	// are returned without copying. Default (0): 1 MiB; at least 16.
	BufferBytes int
}

const defaultMaxLine = 1 << 20

func (c SourceConfig) withDefaults() (SourceConfig, error) {
	if c.MaxLineBytes < 0 || c.BufferBytes < 0 {
		return c, errors.New("runtime: source: negative size")
	}
	if c.MaxLineBytes == 0 {
		c.MaxLineBytes = defaultMaxLine
	}
	if c.BufferBytes == 0 {
		c.BufferBytes = 1 << 20
	}
	c.BufferBytes = max(c.BufferBytes, 16)
	return c, nil
}

// gzipMagic starts every gzip stream.
var gzipMagic = []byte{0x1f, 0x8b}

// gzipAt reports whether the file f starts with gzipMagic (as a source
// detects compression).
func gzipAt(f io.ReaderAt) bool {
	magic := make([]byte, len(gzipMagic))
	n, _ := f.ReadAt(magic, 0)
	return n == len(magic) && bytes.Equal(magic, gzipMagic)
}

// FileSource reads JSON lines from a file, a gzip file or a reader (stdin).
// Records are lines: numbered from 1, with their byte offsets, CRLF
// tolerated, blank lines (only spaces, tabs, CRs) skipped.
//
// A UTF-8 byte order mark at the start of the input is skipped.
//
// Input is gzip-compressed when it starts with the gzip magic bytes,
// whatever its name; a name ending in ".gz" without the magic is an error.
// Concatenated gzip members are read as one stream; bytes after a member
// that start no other member are an error (not ignored as gzip(1) does).
//
// A FileSource is read by one goroutine, which blocks while it reads. That
// is fine for a backtest; live sources (stdin in a live run, a followed
// file) will read in their own goroutine so that watermarks and barriers
// still flow while the input is quiet.
type FileSource struct {
	name    string
	closer  io.Closer // the opened file; nil for a reader we do not own
	counter countingReader
	gz      *gzipMembers // a gzip input's decompressor; nil for plain input
	r       *bufio.Reader
	size    int64
	max     int

	line int64 // number of the last line read
	off  int64 // offset of the next line
	long []byte
	err  error // sticky: io.EOF or a fatal error
}

// OpenFileSource opens path for reading; "-" is standard input (which
// Close leaves open).
func OpenFileSource(path string, cfg SourceConfig) (*FileSource, error) {
	if path == "-" {
		return newFileSource(os.Stdin, "stdin", nil, cfg)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("runtime: source: %w", err)
	}
	s, err := newFileSource(f, path, f, cfg)
	if err != nil {
		f.Close()
		return nil, err
	}
	return s, nil
}

// NewFileSource reads from r, which the source does not close. name is used
// in errors and for the ".gz" check. The total size is known when r is a
// regular *os.File.
func NewFileSource(r io.Reader, name string, cfg SourceConfig) (*FileSource, error) {
	return newFileSource(r, name, nil, cfg)
}

func newFileSource(r io.Reader, name string, closer io.Closer, cfg SourceConfig) (*FileSource, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &FileSource{name: name, closer: closer, size: -1, max: cfg.MaxLineBytes}
	if f, ok := r.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			s.size = fi.Size()
		}
	}
	s.counter.r = r
	s.r = bufio.NewReaderSize(&s.counter, cfg.BufferBytes)
	magic, err := s.r.Peek(len(gzipMagic))
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("runtime: source %s: %w", name, err)
	}
	isGz := bytes.Equal(magic, gzipMagic)
	if !isGz && strings.HasSuffix(name, ".gz") {
		return nil, fmt.Errorf("runtime: source %s: not gzip data (no gzip magic bytes)", name)
	}
	if isGz {
		gz := &gzipMembers{br: s.r}
		if err := gz.nextMember(); err != nil {
			return nil, fmt.Errorf("runtime: source %s: %w", name, err)
		}
		s.gz = gz
		s.r = bufio.NewReaderSize(gz, cfg.BufferBytes)
	}
	// A UTF-8 byte order mark (Windows tools write one) is not JSON: skip it
	// rather than reject line 1. Offsets still count it. Only a first byte
	// of 0xef makes it worth waiting for three bytes: a live stream whose
	// first line is shorter must not stall.
	if first, _ := s.r.Peek(1); len(first) == 1 && first[0] == utf8BOM[0] {
		if bom, _ := s.r.Peek(len(utf8BOM)); bytes.Equal(bom, utf8BOM) {
			s.r.Discard(len(utf8BOM))
			s.off = int64(len(utf8BOM))
		}
	}
	return s, nil
}

var utf8BOM = []byte{0xef, 0xbb, 0xbf}

// Name returns the name given at construction ("stdin" for "-").
func (s *FileSource) Name() string { return s.name }

// Progress implements [ProgressSource]: read is the bytes of the lines
// returned so far; of a gzip file, the compressed bytes read, which run
// ahead of the lines returned by up to the buffer size. (Of a plain file
// too, it said 100% at line 20,480 of 30,000 in a slow backtest: the
// buffer's read-ahead.)
func (s *FileSource) Progress() (read, total int64) {
	if s.gz != nil {
		return s.counter.n, s.size
	}
	return s.off, s.size
}

// Close closes the file, if the source opened it.
func (s *FileSource) Close() error {
	if s.closer == nil {
		return nil
	}
	c := s.closer
	s.closer = nil
	if s.err == nil {
		s.err = errors.New("runtime: source " + s.name + ": closed")
	}
	return c.Close()
}

// Next returns the next non-blank line, or io.EOF after the last one.
// Errors other than io.EOF (a read error, corrupt or truncated gzip data)
// are fatal and sticky.
func (s *FileSource) Next() (Record, error) {
	for s.err == nil {
		start := s.off
		data, n, tooLong, err := s.readLine()
		if n == 0 && err == io.EOF {
			s.err = io.EOF
			break
		}
		s.line++
		s.off += n
		if err != nil && err != io.EOF {
			s.err = fmt.Errorf("runtime: source %s: line %d: %w%s", s.name, s.line, err, s.hint(err))
			break
		}
		if err == io.EOF {
			// The last line has no newline; the next call reports io.EOF.
			s.err = io.EOF
		}
		if tooLong {
			return Record{
				Line: s.line, Offset: start, Data: data[:min(len(data), DeadDataPrefix)],
				Reason: "line too long: more than " + strconv.Itoa(s.max) + " bytes",
			}, nil
		}
		if isBlank(data) {
			continue
		}
		return Record{Line: s.line, Offset: start, Data: data}, nil
	}
	return Record{}, s.err
}

// hint explains a read error whose own words do not say what is wrong
// with the input: a gzip reader's "unexpected EOF" is a compressed stream
// cut short.
func (s *FileSource) hint(err error) string {
	if s.gz != nil && errors.Is(err, io.ErrUnexpectedEOF) {
		return " (the input ends in the middle of a compressed block: a truncated .gz file?)"
	}
	return ""
}

// readLine reads one line. It returns the line without its terminator, the
// bytes consumed (terminator included) and whether the line is longer than
// the maximum (then line holds a prefix of at least DeadDataPrefix bytes,
// or the whole line when shorter).
func (s *FileSource) readLine() (line []byte, n int64, tooLong bool, err error) {
	b, err := s.r.ReadSlice('\n')
	n = int64(len(b))
	if err == bufio.ErrBufferFull {
		// A line longer than the buffer: gather it in s.long, but never more
		// than max+2 bytes (content plus "\r\n"); beyond that it is too long
		// whatever its terminator.
		limit := s.max + 2
		s.long = append(s.long[:0], b[:min(len(b), limit)]...)
		for err == bufio.ErrBufferFull {
			b, err = s.r.ReadSlice('\n')
			n += int64(len(b))
			if room := limit - len(s.long); room > 0 {
				s.long = append(s.long, b[:min(len(b), room)]...)
			}
		}
		b = s.long
		if int64(len(b)) < n {
			// Truncated: only the content length matters, and it exceeds
			// max even after removing a two-byte terminator.
			return b, n, true, err
		}
	}
	line = trimEOL(b)
	return line, n, len(line) > s.max, err
}

// trimEOL removes a trailing "\n" or "\r\n".
func trimEOL(b []byte) []byte {
	if len(b) > 0 && b[len(b)-1] == '\n' {
		b = b[:len(b)-1]
		if len(b) > 0 && b[len(b)-1] == '\r' {
			b = b[:len(b)-1]
		}
	}
	return b
}

// isBlank reports whether b holds only JSON whitespace.
func isBlank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return false
		}
	}
	return true
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
