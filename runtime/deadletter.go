package runtime

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"unicode/utf8"
)

// DeadRecord is a record that could not become an event: unreadable (a line
// too long) or rejected by the decoder.
type DeadRecord struct {
	Line   int64  // 1-based line number
	Offset int64  // byte offset of the line in the (decompressed) input
	Reason string // why, e.g. "column 12: invalid character 'x' in number"
	Data   []byte // the raw line (a prefix for a line too long); owned by the receiver
}

// DeadLetter receives dead records. An error from DeadLetter stops the
// subtask.
type DeadLetter interface {
	DeadLetter(rec DeadRecord) error
}

// DeadLetterWriter writes dead records as JSON lines, one object per record
// with its fields in this order:
//
//	{"line":12,"offset":3400,"reason":"missing time field \"ts\"","data":"{\"id\":1}"}
//
// data is the raw line as a JSON string; bytes that are not valid UTF-8
// become U+FFFD there (the offset still locates the original). Output is
// buffered: call Close (or Flush). A DeadLetterWriter is not safe for
// concurrent use.
type DeadLetterWriter struct {
	w      *bufio.Writer
	closer io.Closer // the file we created; nil for a writer we do not own
	buf    []byte
	err    error // sticky write error
}

// NewDeadLetterWriter returns a writer onto w, which Close does not close.
func NewDeadLetterWriter(w io.Writer) *DeadLetterWriter {
	return &DeadLetterWriter{w: bufio.NewWriterSize(w, 64<<10)}
}

// CreateDeadLetterFile creates (or truncates) the file at path and returns
// a writer that closes it on Close.
func CreateDeadLetterFile(path string) (*DeadLetterWriter, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("runtime: dead letters: %w", err)
	}
	d := NewDeadLetterWriter(f)
	d.closer = f
	return d, nil
}

// DeadLetter implements [DeadLetter].
func (d *DeadLetterWriter) DeadLetter(rec DeadRecord) error {
	if d.err != nil {
		return d.err
	}
	b := append(d.buf[:0], `{"line":`...)
	b = strconv.AppendInt(b, rec.Line, 10)
	b = append(b, `,"offset":`...)
	b = strconv.AppendInt(b, rec.Offset, 10)
	b = append(b, `,"reason":`...)
	b = AppendJSONString(b, rec.Reason)
	b = append(b, `,"data":`...)
	b = AppendJSONString(b, rec.Data)
	b = append(b, "}\n"...)
	d.buf = b
	if _, err := d.w.Write(b); err != nil {
		d.err = fmt.Errorf("runtime: dead letters: %w", err)
	}
	return d.err
}

// Flush writes buffered records to the underlying writer.
func (d *DeadLetterWriter) Flush() error {
	if d.err != nil {
		return d.err
	}
	if err := d.w.Flush(); err != nil {
		d.err = fmt.Errorf("runtime: dead letters: %w", err)
	}
	return d.err
}

// Close flushes, then closes the file if CreateDeadLetterFile opened it.
func (d *DeadLetterWriter) Close() error {
	err := d.Flush()
	if d.closer != nil {
		if cerr := d.closer.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("runtime: dead letters: %w", cerr)
		}
		d.closer = nil
	}
	return err
}

const hexDigits = "0123456789abcdef"

// AppendJSONString appends s to b as a JSON string: quotes, backslashes and
// control characters escaped, invalid UTF-8 replaced by U+FFFD. Shared by
// every JSON-lines writer (dead letters, alerts).
func AppendJSONString[S string | []byte](b []byte, s S) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRune([]byte(s[i:min(i+utf8.UTFMax, len(s))]))
			if r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
