package cep

import (
	"errors"
	"io"

	"github.com/cepheus-cep/cepheus/runtime"
)

// EventSource is a bounded input of JSON lines with line numbers (the
// events' Seq): a file, a gzip-compressed file (detected by its magic
// bytes), or stdin. Lines are at most 1 MiB; a longer one becomes a dead
// letter. It is read by one [Engine.Run] at a time.
type EventSource struct {
	fs   *runtime.FileSource
	stop func() error // what else Close ends (a topic's reader)
}

// OpenEventSource opens path ("-" for stdin) as an [EventSource].
func OpenEventSource(path string) (*EventSource, error) {
	fs, err := runtime.OpenFileSource(path, runtime.SourceConfig{})
	if err != nil {
		return nil, err
	}
	return &EventSource{fs: fs}, nil
}

// NewEventSource returns an [EventSource] reading r (gzip detected), named
// name in errors. Close does not close r.
func NewEventSource(r io.Reader, name string) (*EventSource, error) {
	fs, err := runtime.NewFileSource(r, name, runtime.SourceConfig{})
	if err != nil {
		return nil, err
	}
	return &EventSource{fs: fs}, nil
}

// Name returns the path or name the source was opened with.
func (s *EventSource) Name() string { return s.fs.Name() }

// Progress returns the bytes read so far and the input's size (-1 when
// unknown, as for stdin).
func (s *EventSource) Progress() (read, total int64) { return s.fs.Progress() }

// Close closes the file the source opened.
func (s *EventSource) Close() error {
	err := s.fs.Close()
	if s.stop != nil {
		err = errors.Join(err, s.stop())
	}
	return err
}

// DeadLetterWriter writes the records that cannot become events as JSON
// lines ({"ruleset", "line", "offset", "reason", "data"}), through a
// buffer: call Close. It is not safe for concurrent use; runs that share
// one must not overlap.
type DeadLetterWriter struct {
	w *runtime.DeadLetterWriter
}

// NewDeadLetterWriter returns a buffered dead-letter writer on w; Close
// flushes it and does not close w.
func NewDeadLetterWriter(w io.Writer) *DeadLetterWriter {
	return &DeadLetterWriter{w: runtime.NewDeadLetterWriter(w)}
}

// Flush writes the buffered records.
func (d *DeadLetterWriter) Flush() error { return d.w.Flush() }

// Close flushes the writer.
func (d *DeadLetterWriter) Close() error { return d.w.Close() }
