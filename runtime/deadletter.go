package runtime

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cepheus-cep/cepheus/event/jsonev"
)

// DeadRecord is a record that could not become an event: unreadable (a line
// too long) or rejected by the decoder.
type DeadRecord struct {
	// Ruleset names the ruleset whose run rejected the record, when the
	// caller runs one (a backtest); written as "ruleset" when set.
	Ruleset string
	// File is the input of a source that merges several ([Record.File]);
	// Line and Offset are then the record's in it.
	File   string
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

// DeadLetterWriter writes dead records as JSON lines, one object per record,
// encoded by [jsonev.AppendDeadLetter]:
//
//	{"line":12,"offset":3400,"reason":"missing time field \"ts\"","data":"{\"id\":1}"}
//
// Output is buffered: call Close (or Flush). A DeadLetterWriter is not safe for
// concurrent use.
type DeadLetterWriter struct {
	w      *bufio.Writer
	closer io.Closer // the file we created; nil for a writer we do not own
	buf    []byte
	err    error // sticky write error
}

// NewDeadLetterWriter returns a writer onto w, which Close does not close.
// A nil w makes every call fail with an error that says so (it panicked at
// the first flush).
func NewDeadLetterWriter(w io.Writer) *DeadLetterWriter {
	if w == nil {
		return &DeadLetterWriter{err: errors.New("runtime: dead letters: no writer (NewDeadLetterWriter of nil)")}
	}
	return &DeadLetterWriter{w: bufio.NewWriterSize(w, 64<<10)}
}

// CreateDeadLetterFile creates (or truncates) the file at path, with mode
// 0600 (dead letters hold customer data), and returns a writer that closes
// it on Close.
func CreateDeadLetterFile(path string) (*DeadLetterWriter, error) {
	// Write only: a FIFO opened for reading too would never see its
	// reader go.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
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
	b := jsonev.AppendDeadLetter(d.buf[:0], jsonev.DeadLetter{
		Ruleset: rec.Ruleset, File: rec.File, Line: rec.Line, Offset: rec.Offset, Reason: rec.Reason, Data: rec.Data,
	})
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
