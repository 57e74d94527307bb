package state

import (
	"errors"
	"fmt"
	"iter"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// DefaultBatchBytes is the size (in bytes of encoded keys and values) at
// which a [Pebble] store commits its write-back batch by itself, unless
// configured otherwise with [WithBatchBytes].
const DefaultBatchBytes = 4 << 20

// ErrClosed is returned by the methods of a closed [Pebble] store. Test for
// it with errors.Is.
var ErrClosed = errors.New("state: store closed")

// Pebble is a store of records in a Pebble database: one database per
// subtask, in a working directory of its own. It is a [Writer] and a
// [Reader] with the behaviour of [Mem]: the same records, yielded in the
// same order.
//
// Writes go to a write-back batch, committed to the database by [Pebble.Flush]
// or as soon as the batch holds [DefaultBatchBytes] (see [WithBatchBytes]).
// Reads see every write, flushed or not: [Pebble.Records] flushes the batch
// first (the batch is not indexed, which keeps a Put at the cost of an
// append; reads are the restore path, rare and whole-operator).
//
// Commits are not synced: the working database is disposable. What
// survives a crash is a checkpoint ([CheckpointWriter.AddPebble], which
// flushes and syncs the write-ahead log into the checkpoint), and a
// restore always starts from one, never from a working directory.
//
// A Pebble store is used by one goroutine, the subtask that owns it.
type Pebble struct {
	db       *pebble.DB
	dir      string
	fs       vfs.FS
	batch    *pebble.Batch
	maxBatch int
	key      []byte // scratch for encoded keys
}

// PebbleOption configures [OpenPebble].
type PebbleOption func(*pebbleConfig)

type pebbleConfig struct {
	batchBytes int
	fs         vfs.FS
}

// WithBatchBytes sets the size at which the write-back batch is committed
// without waiting for [Pebble.Flush]. The default is [DefaultBatchBytes];
// n <= 0 keeps it.
func WithBatchBytes(n int) PebbleOption {
	return func(c *pebbleConfig) {
		if n > 0 {
			c.batchBytes = n
		}
	}
}

// withFS runs the database on fs (vfs.NewMem in tests). A [CheckpointDir]
// that checkpoints the store must use the same file system.
func withFS(fs vfs.FS) PebbleOption {
	return func(c *pebbleConfig) { c.fs = fs }
}

// OpenPebble opens the Pebble database in dir, creating it (and dir) if
// it does not exist. Pebble's logger is silenced. Close the store when
// done.
func OpenPebble(dir string, opts ...PebbleOption) (*Pebble, error) {
	cfg := pebbleConfig{batchBytes: DefaultBatchBytes, fs: vfs.Default}
	for _, o := range opts {
		o(&cfg)
	}
	db, err := pebble.Open(dir, &pebble.Options{
		FS:     cfg.fs,
		Logger: quietLogger{},
	})
	if err != nil {
		return nil, fmt.Errorf("state: open pebble %s: %w", dir, err)
	}
	return &Pebble{db: db, dir: dir, fs: cfg.fs, batch: db.NewBatch(), maxBatch: cfg.batchBytes}, nil
}

// Dir is the directory of the database.
func (p *Pebble) Dir() string { return p.dir }

// DiskBytes is the size of the database's files on disk.
func (p *Pebble) DiskBytes() int64 { return int64(p.db.Metrics().DiskSpaceUsage()) }

// Put sets the record of k to a copy of value ([Writer]).
func (p *Pebble) Put(k Key, value []byte) error {
	if p.db == nil {
		return ErrClosed
	}
	p.key = AppendKey(p.key[:0], k)
	if err := p.batch.Set(p.key, value, nil); err != nil {
		return err
	}
	return p.maybeFlush()
}

// Delete removes the record of k, if any ([Writer]).
func (p *Pebble) Delete(k Key) error {
	if p.db == nil {
		return ErrClosed
	}
	p.key = AppendKey(p.key[:0], k)
	if err := p.batch.Delete(p.key, nil); err != nil {
		return err
	}
	return p.maybeFlush()
}

func (p *Pebble) maybeFlush() error {
	if p.batch.Len() < p.maxBatch {
		return nil
	}
	return p.Flush()
}

// Flush commits the write-back batch to the database (without a sync).
func (p *Pebble) Flush() error {
	if p.db == nil {
		return ErrClosed
	}
	if p.batch.Empty() {
		return nil
	}
	if err := p.batch.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("state: pebble commit: %w", err)
	}
	p.batch.Reset()
	return nil
}

// Records yields the records of op in groups, in key order ([Reader]). It
// flushes the write-back batch first. Writing to p during the iteration
// is not allowed.
func (p *Pebble) Records(op OperatorID, groups KeyGroupRange) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		if err := p.Flush(); err != nil {
			yield(Record{}, err)
			return
		}
		if groups.First > groups.Last {
			return
		}
		lower := AppendKey(nil, Key{Operator: op, KeyGroup: groups.First})
		upper := prefixSuccessor(AppendKey(nil, Key{Operator: op, KeyGroup: groups.Last}))
		it, err := p.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
		if err != nil {
			yield(Record{}, err)
			return
		}
		for valid := it.First(); valid; valid = it.Next() {
			k, err := DecodeKey(it.Key())
			if err != nil {
				it.Close()
				yield(Record{}, err)
				return
			}
			v, err := it.ValueAndErr()
			if err != nil {
				it.Close()
				yield(Record{}, fmt.Errorf("state: pebble read: %w", err))
				return
			}
			if !yield(Record{Key: k, Value: v}, nil) {
				it.Close()
				return
			}
		}
		if err := it.Close(); err != nil {
			yield(Record{}, fmt.Errorf("state: pebble iterate: %w", err))
		}
	}
}

// Close commits the write-back batch and closes the database. Closing a
// closed store is no error.
func (p *Pebble) Close() error {
	if p.db == nil {
		return nil
	}
	err := p.Flush()
	p.batch.Close()
	if cerr := p.db.Close(); err == nil {
		err = cerr
	}
	p.db = nil
	return err
}

// checkpointDB writes a Pebble checkpoint of the database into dest
// (which must not exist): hard links to its sstables, copies of its
// manifest, options and write-ahead log, flushed and synced first. It
// does not touch the write-back batch: any goroutine may call it.
func (p *Pebble) checkpointDB(dest string) error {
	if err := p.db.Checkpoint(dest, pebble.WithFlushedWAL()); err != nil {
		return fmt.Errorf("state: pebble checkpoint %s: %w", dest, err)
	}
	return nil
}

// prefixSuccessor returns the smallest key greater than every key that
// starts with b (nil if there is none: b is all 0xff). It modifies b.
func prefixSuccessor(b []byte) []byte {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] != 0xff {
			b[i]++
			return b[:i+1]
		}
	}
	return nil
}

// quietLogger drops Pebble's informational and error lines (WAL replay,
// background errors that surface as errors of calls anyway); a fatal
// error still stops the process, as with Pebble's own logger.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("pebble: "+format, args...))
}
