package cep

import (
	"io"

	"github.com/cepheus-cep/cepheus/runtime"
)

// The CLI and other users reach the runtime through package cep, the public
// facade (ARCHITECTURE.md section 2): these aliases re-export the pieces a
// backtest is assembled from.

// EventSource is a bounded input of JSON lines with line numbers: a file, a
// gzip-compressed file, or stdin.
type EventSource = runtime.FileSource

// OpenEventSource opens path ("-" for stdin; gzip detected by its magic
// bytes) as an [EventSource] with the default limits (1 MiB lines).
func OpenEventSource(path string) (*EventSource, error) {
	return runtime.OpenFileSource(path, runtime.SourceConfig{})
}

// DeadLetterWriter writes undecodable records as JSON lines
// ({"line", "offset", "reason", "data"}).
type DeadLetterWriter = runtime.DeadLetterWriter

// NewDeadLetterWriter returns a buffered dead-letter writer on w; Close
// flushes it.
func NewDeadLetterWriter(w io.Writer) *DeadLetterWriter { return runtime.NewDeadLetterWriter(w) }
