package cep

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/cepheus-cep/cepheus/runtime"
)

// EventSource is a bounded input of JSON lines with line numbers (the
// events' Seq): a file, a gzip-compressed file (detected by its magic
// bytes), or stdin. Lines are at most 1 MiB; a longer one becomes a dead
// letter. It is read by one [Engine.Run]: a second run over it fails
// (open the input again). The zero EventSource is no source.
type EventSource struct {
	fs *runtime.FileSource // a file or stdin; nil for merged partitions
	// merged, name and stop are a directory's files or a topic's
	// partitions merged by event time: the source, its name and the end
	// of their reader, which Close calls.
	merged *mergedSource
	name   string
	stop   func() error
	// read is set by the run that reads the source: a second finds it
	// read to its end, or to where the first stopped.
	read bool
}

// source returns what a run reads, nil for the zero EventSource.
func (s *EventSource) source() runtime.Source {
	switch {
	case s.merged != nil:
		return s.merged
	case s.fs != nil:
		return s.fs
	}
	return nil
}

// OpenEventSource opens path ("-" for stdin) as an [EventSource].
func OpenEventSource(path string) (*EventSource, error) {
	fs, err := runtime.OpenFileSource(path, runtime.SourceConfig{})
	if err != nil {
		return nil, err
	}
	return &EventSource{fs: fs}, nil
}

// OpenDirEventSource reads the partition files of directory dir (as
// [StreamConfig.Events] reads a directory: its *.jsonl and *.jsonl.gz
// files, not hidden, each read to its end once) as one [EventSource]: the
// files merged into one stream, each next record the head whose event
// time (timeField, the ruleset's, with numbers in unit, the run's
// [InputPolicy.TimeUnit]) is lowest (a record without one first; ties by
// file name), so a backtest over a file split into files by time
// or by shard sees about the order of the whole file. The records are
// numbered in that order (their "line"); a dead letter gives the file of
// its line, and its line and offset there. The files are read until ctx is
// done or Close: a run that reads the source after that fails (with an
// error that wraps ctx's, or says the source is closed) rather than take
// the rest of the input for absent.
func OpenDirEventSource(ctx context.Context, dir, timeField string, unit TimeUnit) (*EventSource, error) {
	opened := ctx
	ctx, cancel := context.WithCancel(ctx)
	r, err := runtime.NewPartitionReader(ctx, dir, runtime.ReaderConfig{Aligned: true})
	if err != nil {
		cancel()
		return nil, err
	}
	parts, chans := r.Aligned()
	src, err := mergedEventSource(opened, "directory "+dir, chans, timeField, unit, r, cancel)
	if err != nil {
		return nil, err
	}
	src.merged.size = filesSize(parts)
	return src, nil
}

// filesSize returns the bytes of the files of parts as they are on disk
// (compressed or not: what their readers count, [runtime.Batch.Read]),
// or 0 when one cannot be looked at.
func filesSize(parts []runtime.Partition) int64 {
	var n int64
	for _, p := range parts {
		fi, err := os.Stat(p.Path)
		if err != nil {
			return 0
		}
		n += fi.Size()
	}
	return n
}

// IsEventsFile reports whether a directory's entry named name is read as
// events when the directory is (by [OpenDirEventSource] and
// [StreamConfig.Events]): not hidden, and ending in .jsonl or .jsonl.gz.
func IsEventsFile(name string) bool { return runtime.IsPartitionFile(name) }

// NewEventSource returns an [EventSource] reading r (gzip detected), named
// name in errors. Close does not close r.
func NewEventSource(r io.Reader, name string) (*EventSource, error) {
	if r == nil {
		return nil, fmt.Errorf("cep: event source %s: nil reader", name)
	}
	fs, err := runtime.NewFileSource(r, name, runtime.SourceConfig{})
	if err != nil {
		return nil, err
	}
	return &EventSource{fs: fs}, nil
}

// Name returns the path or name the source was opened with.
func (s *EventSource) Name() string {
	if s.fs == nil {
		return s.name
	}
	return s.fs.Name()
}

// Progress returns the bytes read so far and the input's size (-1 when
// unknown, as for stdin or a topic). A directory's are its files' bytes
// on disk (a gzip file's compressed), read as far as the merge of its
// files has taken their records.
func (s *EventSource) Progress() (read, total int64) {
	switch {
	case s.merged != nil:
		return s.merged.Progress()
	case s.fs != nil:
		return s.fs.Progress()
	}
	return 0, -1
}

// Close closes the file the source opened. It may be called more than
// once.
func (s *EventSource) Close() error {
	switch {
	case s.merged != nil:
		return s.stop()
	case s.fs != nil:
		return s.fs.Close()
	}
	return nil
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
func (d *DeadLetterWriter) Flush() error {
	if d.w == nil {
		return nil // the zero writer, which New refuses: nothing written
	}
	return d.w.Flush()
}

// Close flushes the writer.
func (d *DeadLetterWriter) Close() error {
	if d.w == nil {
		return nil
	}
	return d.w.Close()
}
