package enrich

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cepheus-cep/cepheus/event"
)

// Source fetches lookup records by key. A [Lookup] calls Fetch from several
// goroutines at once (up to [LookupConfig.InFlight]); each call is used from
// one goroutine.
type Source interface {
	// Fetch returns one entry per key, in the order of keys: the values of
	// the spec's Fields in order, or nil when no record exists for that
	// key. A field the record lacks is event.Null (the caller applies its
	// default). The caller does not modify the entries, and the source
	// must not modify them after returning them.
	//
	// An error fails the whole request, but for [BadRecords]: the records
	// of some keys did not read, and the entries of the others are good.
	// It need not name the source, which the caller adds. Fetch honours
	// ctx: it returns (with an error) once ctx is done.
	Fetch(ctx context.Context, keys []string) ([][]event.Value, error)
	// Close releases the source's resources. Fetch must not be called
	// after it.
	Close() error
	// String describes the source for logs and errors. It never contains a
	// password.
	String() string
}

// table is the records of an in-memory source, by key. It is not modified
// after it is built.
type table map[string][]event.Value

// fetch returns the records of keys, nil for those it lacks.
func (t table) fetch(keys []string) [][]event.Value {
	out := make([][]event.Value, len(keys))
	for i, k := range keys {
		out[i] = t[k]
	}
	return out
}

// MemSource is an in-memory [Source], for tests and for programs that embed
// the engine, whose Fetch can be made slow ([MemSource.SetDelay]) or
// failing ([MemSource.SetFail]). All its methods may be called
// concurrently.
type MemSource struct {
	records table
	fetches atomic.Int64

	// mu guards fail and delay.
	mu    sync.Mutex
	fail  error
	delay time.Duration
}

// NewMemSource returns a source of records: for each key, the values of
// spec.Fields in order (event.Null for a field the record lacks). It copies
// the map, not the records, which the caller must not modify afterwards.
// The records are not checked against spec: a [Lookup] rejects, as a failed
// request, a record of the wrong length or kinds.
func NewMemSource(spec Spec, records map[string][]event.Value) *MemSource {
	t := make(table, len(records))
	for k, rec := range records {
		t[k] = rec
	}
	return &MemSource{records: t}
}

// SetFail makes every later Fetch fail with err, until SetFail(nil).
func (m *MemSource) SetFail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fail = err
}

// SetDelay makes every later Fetch wait d before it answers, or until its
// ctx is done (it then returns ctx.Err()). 0 removes the delay.
func (m *MemSource) SetDelay(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.delay = d
}

// Fetches returns how many times Fetch has been called.
func (m *MemSource) Fetches() int64 { return m.fetches.Load() }

// Fetch implements [Source]: it waits for the delay, then fails with the
// error of SetFail or returns the records of keys.
func (m *MemSource) Fetch(ctx context.Context, keys []string) ([][]event.Value, error) {
	m.fetches.Add(1)
	m.mu.Lock()
	fail, delay := m.fail, m.delay
	m.mu.Unlock()
	if delay > 0 {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if fail != nil {
		return nil, fail
	}
	return m.records.fetch(keys), nil
}

// Close implements [Source]; it does nothing.
func (m *MemSource) Close() error { return nil }

// String implements [Source]: "mem".
func (m *MemSource) String() string { return "mem" }

// BadRecords is the error of a Fetch that had an answer for every key but
// could not read the records of some (a value that does not convert to
// its field's kind): their entries are nil, each with its error, and the
// other entries stand. The failure policy then applies to those keys
// alone; the request is not retried (the same records would not read).
type BadRecords []BadRecord

// BadRecord is the record of keys[Index] that did not read.
type BadRecord struct {
	Index int
	Err   error
}

func (b BadRecords) Error() string {
	if len(b) == 1 {
		return b[0].Err.Error()
	}
	return fmt.Sprintf("%v (and %d more records of its request that do not read)", b[0].Err, len(b)-1)
}
