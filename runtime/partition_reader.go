package runtime

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ReaderConfig configures a [PartitionReader]. The zero value reads the
// input once, from its start, without following.
type ReaderConfig struct {
	// Source configures the line reading of every partition.
	Source SourceConfig
	// Follow keeps reading files as they grow (tail -f): at the end of a
	// file the reader waits for more, polling every PollInterval, and
	// delivers a line only once its newline has arrived; a partial last
	// line is held back, never decoded. Every partition of a followed
	// directory is read and followed at the same time, each in its own
	// goroutine (but for the files closed for inactivity, CloseInactive),
	// and a file that appears in the directory later (a name
	// [IsPartitionFile] accepts, not seen before) becomes a new partition
	// with the next index, those found by one look in name order. A
	// followed file that shrinks is an error. Standard input is read until
	// its end in either mode.
	Follow bool
	// PollInterval is how often a followed file at its end, and a
	// followed directory, are looked at; a file with nothing new for 100
	// polls is looked at every 10 polls until it grows. Default (0): 100ms.
	PollInterval time.Duration
	// CloseInactive, when positive, closes a followed directory's file
	// that has had nothing new for that long: its goroutine ends and its
	// descriptor is closed (a [Batch] marked Closed says so). Every 10
	// polls the directory scan stats the closed files, and one that grew
	// past what was read is opened again and read on from its position,
	// without an Opened batch: its partition (index, name, position) is
	// the same. A closed file that shrank, or whose name now holds
	// another file (os.SameFile), is an error; one deleted is not: its
	// partition ends with a [Batch] marked Gone, as does one grown whose
	// last bytes read are not there any more (deleted and created again,
	// the inode given again: the new file is a new partition). A partition resumed at the end of its file (a plain
	// one) not modified for CloseInactive starts closed, after its Opened
	// batch: a restart over a directory of rotated files opens only those
	// written lately. Default (0): files stay open. A followed file that
	// is not in a directory is never closed.
	CloseInactive time.Duration
	// BatchRecords and BatchBytes bound a [Batch]: at most BatchRecords
	// records and, unless it holds a single record, at most BatchBytes
	// bytes of record data. Defaults (0): 1024 records, 256 KiB.
	BatchRecords, BatchBytes int
	// Buffer is the capacity, in batches, of the channel of
	// [PartitionReader.Batches]. Default (0): 4.
	Buffer int
	// Resume holds the positions to resume at, one per partition, matched
	// by name ([Position].File); a partition without one starts at its
	// beginning. A position whose file is not among the partitions is an
	// error ([ErrBadPosition]), as is one that does not fit its file
	// ([OpenFileSourceAt]).
	Resume []Position
	// Marks are the marks of the Resume positions ([Mark]), by partition
	// name: a file that holds other bytes before its position is refused
	// ([ErrBadPosition]). A position without one is not checked so.
	Marks map[string]Mark
	// Indexes and NextIndex number the partitions ([NumberPartitions]):
	// a resumed reading gives them those a checkpoint kept, so that a file
	// keeps its index (and its events their Seqs) whatever files were
	// added or deleted since. Default (nil, 0): in name order from 0.
	Indexes   map[string]int
	NextIndex int
	// Stdin is read for the partition "-". Default (nil): os.Stdin.
	Stdin io.Reader
	// Aligned, without Follow, reads every partition at once, each in its
	// own goroutine into its own channel ([PartitionReader.Aligned]), so
	// that the consumer chooses which partition's records come next (the
	// one whose watermark is lowest, say). Batches hold at most
	// BatchRecords records; each channel holds one batch.
	Aligned bool
}

func (c ReaderConfig) withDefaults() (ReaderConfig, error) {
	if c.PollInterval < 0 || c.CloseInactive < 0 || c.BatchRecords < 0 || c.BatchBytes < 0 || c.Buffer < 0 {
		return c, errors.New("runtime: partition reader: negative setting")
	}
	if _, err := c.Source.withDefaults(); err != nil {
		return c, err
	}
	if c.PollInterval == 0 {
		c.PollInterval = 100 * time.Millisecond
	}
	if c.BatchRecords == 0 {
		c.BatchRecords = 1024
	}
	if c.BatchBytes == 0 {
		c.BatchBytes = 256 << 10
	}
	if c.Buffer == 0 {
		c.Buffer = 4
	}
	if c.Stdin == nil {
		c.Stdin = os.Stdin
	}
	return c, nil
}

// Batch is what a [PartitionReader] delivers: consecutive records of one
// partition. The batches of one partition arrive in order; those of
// different partitions interleave.
type Batch struct {
	// Partition is the partition the records are of.
	Partition Partition
	// Records are the records, in order. Their Data belongs to the batch
	// (not to a reader's buffer): the consumer may keep it.
	Records []Record
	// End is the position after the last record (the partition's start or
	// resume position in a batch without records): a checkpoint taken
	// after this batch, and before the partition's next, stores End.
	End Position
	// Opened marks the first batch of a partition, sent before any of its
	// records (it has none), so that the consumer knows the partition (for
	// its watermark) before its first record.
	Opened bool
	// CaughtUp says that the reader has delivered everything available so
	// far and waits for more: a followed file at its end, or standard
	// input with nothing to read. It may come in a batch without records.
	CaughtUp bool
	// Unmodified, in the first CaughtUp batch of a followed directory's
	// file since the reader opened it, is how long the file had not been
	// modified when the reader reached its end (its modification time's
	// age), when that is ReaderConfig.CloseInactive or more (as a file
	// that starts closed at a resume); 0 otherwise: no record was
	// written to it for that long, however recently they were read
	// ([PartitionWatermarks.Unmodified]).
	Unmodified time.Duration
	// Unread, in a batch of a followed file, is how many bytes the file
	// held past Read when the reader sent the batch (its size less Read,
	// compressed bytes in a gzip file): the backlog of a file written
	// faster than the job reads it. 0 for other inputs.
	Unread int64
	// Done marks the last batch of a partition: the end of a file read
	// without following, or of standard input.
	Done bool
	// Closed marks the last batch before a followed directory's file is
	// closed for inactivity (ReaderConfig.CloseInactive), caught up: the
	// partition is not done, and its next batch, if its file grows, comes
	// from the file opened again.
	Closed bool
	// Tail, in a Closed batch, is the file's last bytes read (at most 64)
	// and TailAt the byte of the file they end at (compressed, in a gzip
	// file): a restart that finds other bytes there has another file
	// under the name ([SameTail]).
	Tail   []byte
	TailAt int64
	// Gone marks the last batch of a followed directory's file that was
	// deleted while closed for inactivity: it has no records, the
	// partition brings nothing more (its descriptor was closed before the
	// deletion), and a checkpoint taken after it need not keep its
	// position. A file that takes the name later is a new partition, read
	// from its start.
	Gone bool
	// Backlog, when at least 0, is how far the partition's end was past
	// End when the batch was read (a Kafka partition: the records, as
	// offsets, not read yet); -1 (or 0 from a reader that does not know)
	// for files.
	Backlog int64
	// Read is how many bytes of the file the partition's reader had read
	// when it sent the batch (compressed bytes in a gzip file; ahead of
	// End by what it buffered), or, for a partition of a topic read to a
	// bound, the offsets from its start to End: a backtest's progress over
	// a directory or a topic. 0 when unknown (standard input, a topic read
	// without a bound).
	Read int64

	chunk []byte // the arena the records' data is copied into
	bytes int    // record data in the batch
}

// PartitionReader reads the partitions of a source ([OpenPartitions]) in
// goroutines of its own and delivers their records in [Batch] values over
// one bounded channel, so that the consumer can select on its timers
// (watermarks, checkpoint barriers) while no record comes. Without Follow
// a single goroutine reads the partitions one after another, in index
// order; with Follow each partition has its own (a followed directory's
// file closed for inactivity has none until it grows).
//
// The channel is the backpressure: when the consumer is slow, the readers
// block, and nothing is dropped. At most Buffer batches wait in the
// channel, plus the one each partition goroutine is filling.
//
// A reader that reaches the end of its last partition closes the channel;
// a followed one runs until Close or the cancellation of its context. The
// first error (a read error, a position that does not fit) stops every
// goroutine and closes the channel; Err returns it.
type PartitionReader struct {
	cfg    ReaderConfig
	path   string
	dir    bool // path is a directory
	ctx    context.Context
	cancel context.CancelFunc
	out    chan Batch
	done   chan struct{} // closed after out, when every goroutine ended
	wg     sync.WaitGroup
	resume map[string]Position
	read   atomic.Int64 // records read, for tests
	// listings counts the directory's listings by watchDir, for tests.
	listings atomic.Int64

	// parts are the partitions found at the start, numbered; outs are
	// their channels (Aligned).
	parts []Partition
	outs  []chan Batch

	mu sync.Mutex // guards err, pumps, stopped and closed
	// err is the first error of a goroutine.
	err     error
	pumps   []*streamPump
	stopped bool
	// closed are the files closed for inactivity since the directory scan
	// last took them.
	closed []closedFile
}

// closedFile is a followed directory's file closed for inactivity.
type closedFile struct {
	p Partition
	// pos is where its reading goes on: after the last record delivered.
	pos Position
	// info and read are the file as its reader last looked at it and the
	// bytes read of it (past pos by a partial last line, and, in a gzip
	// file, counted compressed).
	info os.FileInfo
	read int64
	// tail are the last bytes read (at most tailBytes, ending at read):
	// a file deleted and created again under the name may have the same
	// inode (os.SameFile holds), but not these bytes there.
	tail []byte
}

// tailBytes bounds closedFile.tail.
const tailBytes = 64

// readTail returns the bytes of f before offset read, at most tailBytes
// (nil when they do not read).
func readTail(f *os.File, read int64) []byte {
	b := make([]byte, min(read, tailBytes))
	if _, err := f.ReadAt(b, read-int64(len(b))); err != nil {
		return nil
	}
	return b
}

// sameTail reports whether the file under c's name holds, before what
// was read of it, the bytes read there (true when they cannot be read:
// the reading, opened again, reports why).
func (c *closedFile) sameTail() bool {
	same, err := SameTail(c.p.Path, c.tail, c.read)
	return same || err != nil
}

// SameTail reports whether the file at path holds tail just before byte
// at ([Batch].Tail, TailAt): false when it holds other bytes there, or
// is shorter. An error says that the file does not open or read.
func SameTail(path string, tail []byte, at int64) (bool, error) {
	if len(tail) == 0 {
		return true, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	return sameTailOf(f, tail, at)
}

// sameTailOf is SameTail of the open file f.
func sameTailOf(f *os.File, tail []byte, at int64) (bool, error) {
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	if fi.Size() < at || at < int64(len(tail)) {
		return false, nil
	}
	b := make([]byte, len(tail))
	if _, err := f.ReadAt(b, at-int64(len(b))); err != nil {
		return false, fmt.Errorf("runtime: source %s: its bytes before %d do not read: %w", f.Name(), at, err)
	}
	return bytes.Equal(b, tail), nil
}

// NewPartitionReader lists the partitions of path with [OpenPartitions]
// and starts reading them. The reader stops when ctx is done or at Close,
// which the caller must call in any case.
func NewPartitionReader(ctx context.Context, path string, cfg ReaderConfig) (*PartitionReader, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	parts, err := OpenPartitions(path, cfg.Follow)
	if err != nil {
		return nil, err
	}
	next := NumberPartitions(parts, cfg.Indexes, cfg.NextIndex)
	isDir := false
	if path != "-" {
		fi, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("runtime: source: %w", err)
		}
		isDir = fi.IsDir()
	}
	resume := make(map[string]Position, len(cfg.Resume))
	for _, p := range cfg.Resume {
		if _, dup := resume[p.File]; dup {
			return nil, fmt.Errorf("%w: two positions of %s", ErrBadPosition, p.File)
		}
		if !slices.ContainsFunc(parts, func(q Partition) bool { return q.Name == p.File }) {
			return nil, fmt.Errorf("%w: %s, of position %s, is not an input of %s", ErrBadPosition, p.File, p, path)
		}
		resume[p.File] = p
	}
	r := &PartitionReader{cfg: cfg, path: path, dir: isDir, out: make(chan Batch, cfg.Buffer), done: make(chan struct{}), resume: resume, parts: parts}
	r.ctx, r.cancel = context.WithCancel(ctx)
	context.AfterFunc(r.ctx, r.stopPumps)
	switch {
	case !cfg.Follow && cfg.Aligned:
		for _, p := range parts {
			ch := make(chan Batch, 1)
			r.outs = append(r.outs, ch)
			r.start(func(ctx context.Context) error {
				err := r.readPartitionTo(ctx, p, ch)
				// The error before the close: a consumer reads Err once
				// the channel is closed.
				r.fail(err)
				close(ch)
				return nil
			})
		}
	case !cfg.Follow:
		r.start(func(ctx context.Context) error {
			for _, p := range parts {
				if err := r.readPartition(ctx, p); err != nil {
					return err
				}
			}
			return nil
		})
	case isDir:
		r.start(func(ctx context.Context) error { return r.watchDir(ctx, parts, next) })
	default:
		r.start(func(ctx context.Context) error { return r.readPartition(ctx, parts[0]) })
	}
	go func() {
		r.wg.Wait()
		close(r.out)
		close(r.done)
	}()
	return r, nil
}

// Aligned returns, for a reader with ReaderConfig.Aligned, its partitions
// (in name order) and the channel of each, in the same order: a partition's batches in order, the
// channel closed after its Done batch (or an error, see Err). Batches
// returns a channel that is only closed.
func (r *PartitionReader) Aligned() ([]Partition, []<-chan Batch) {
	outs := make([]<-chan Batch, len(r.outs))
	for i, ch := range r.outs {
		outs[i] = ch
	}
	return r.parts, outs
}

// Listed returns the partitions the reader found at its start (those of
// a directory: its files then, in name order), numbered as their batches
// are. Each of them sends its Opened batch, at a time of its goroutine's
// scheduling; the files a followed directory gets later are not listed.
func (r *PartitionReader) Listed() []Partition { return r.parts }

// Batches returns the channel of the batches. It is closed when the
// reader has ended: at the end of the input (without Follow), after an
// error, or once stopped. The consumer owns each batch it receives.
func (r *PartitionReader) Batches() <-chan Batch { return r.out }

// Err returns the error that stopped the reader, nil when it ended at the
// end of its input or was stopped (Close, ctx). Call it after the channel
// of Batches is closed.
func (r *PartitionReader) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Close stops the reader and waits for its goroutines to end; batches not
// yet received are dropped (a checkpoint's positions cover only what the
// consumer received). It returns Err. Close is idempotent.
//
// A read of standard input that is blocked in the operating system and
// cannot be interrupted (a terminal; a pipe or socket can) leaves one
// goroutine behind until that read returns; it delivers nothing more.
func (r *PartitionReader) Close() error {
	r.cancel()
	<-r.done
	return r.Err()
}

// start runs f in a goroutine of the reader. An error stops the reader,
// unless the reader was stopping anyway (then it is the stop's echo).
func (r *PartitionReader) start(f func(ctx context.Context) error) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.fail(f(r.ctx))
	}()
}

// fail records err (nil: nothing) as the reader's error, unless it has one
// or was stopping anyway (err is then the stop's echo), and stops it.
func (r *PartitionReader) fail(err error) {
	if err == nil || r.ctx.Err() != nil {
		return
	}
	r.mu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.mu.Unlock()
	r.cancel()
}

// stopPumps unblocks the stream pumps once the reader's context is done.
func (r *PartitionReader) stopPumps() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	for _, p := range r.pumps {
		p.stop()
	}
}

// watchDir reads the partitions of a followed directory and those that
// appear in it later, each in its own goroutine: it lists the directory at
// a poll when its modification time says names may have changed
// ([dirWatch]). Every quietFactor polls
// it stats the files closed for inactivity and opens again those that
// grew ([PartitionReader.reopenGrown]): at the default poll, a line
// appended to a closed file waits about as long as one appended to a
// quiet open one. next is the index of the next file found.
func (r *PartitionReader) watchDir(ctx context.Context, parts []Partition, next int) error {
	known := make(map[string]bool, len(parts))
	for _, p := range parts {
		known[p.Name] = true
		r.start(func(ctx context.Context) error { return r.readPartition(ctx, p) })
	}
	var closed, gone []closedFile
	var dw dirWatch
	for poll := 1; ; poll++ {
		if err := sleepCtx(ctx, r.cfg.PollInterval); err != nil {
			return err
		}
		r.mu.Lock()
		closed = append(closed, r.closed...)
		r.closed = nil
		r.mu.Unlock()
		if poll%quietFactor == 0 {
			var err error
			if closed, gone, err = r.reopenGrown(closed); err != nil {
				return err
			}
			for _, c := range gone {
				// The name is free for a new file, a new partition: the
				// directory is listed again at once (a file created under
				// the name before the listing would wait for a forced one).
				delete(known, c.p.Name)
				dw = dirWatch{}
				select {
				case r.out <- Batch{Partition: c.p, End: c.pos, CaughtUp: true, Gone: true}:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
		if !dw.changed(r.path, poll) {
			continue
		}
		r.listings.Add(1)
		names, _, err := partitionFiles(r.path)
		if err != nil {
			return err
		}
		for _, name := range names {
			if known[name] {
				continue
			}
			known[name] = true
			p := Partition{Index: next, Name: name, Path: filepath.Join(r.path, name)}
			next++
			r.start(func(ctx context.Context) error { return r.readPartition(ctx, p) })
		}
	}
}

// dirWatch tells watchDir when a followed directory may have new names:
// listing it at every poll cost a directory of a year's hourly files
// (8,760) 5 ms and 2 MB of garbage a poll, half a core's twentieth at the
// default poll. A name added or removed changes the directory's
// modification time.
type dirWatch struct {
	mod      time.Time // the directory's modification time at the last listing
	listedAt time.Time // when that listing began
}

// dirRacy is how long after a directory's modification time a listing may
// have missed a change that left that time as it was (file systems that
// keep whole seconds): the directory is listed again until a listing began
// that long after it.
const dirRacy = 2 * time.Second

// dirForced is every how many polls the directory is listed whatever its
// modification time says: a file system that reports stale times (a
// network one's cached attributes), or a symbolic link whose target
// appears later, which changes no time of the directory, costs a new file
// that long at most.
const dirForced = 10 * quietFactor

// changed reports whether the directory at path must be listed at poll,
// and if so notes when and at which modification time.
func (w *dirWatch) changed(path string, poll int) bool {
	now := time.Now()
	fi, err := os.Stat(path)
	if err != nil {
		return true // the listing reports it
	}
	if fi.ModTime().Equal(w.mod) && w.listedAt.Sub(w.mod) > dirRacy && poll%dirForced != 0 {
		return false
	}
	w.mod, w.listedAt = fi.ModTime(), now
	return true
}

// reopenGrown looks at the files closed for inactivity: it opens again,
// each in a goroutine of its own, those that grew past what was read, and
// returns those still closed and those deleted, or created again under
// their name (gone: their partitions end). A file that shrank or was
// replaced by another (renamed over it) is an error. (An open file
// deleted goes on being read, to no end, until it is closed for quiet;
// then it is gone.)
func (r *PartitionReader) reopenGrown(closed []closedFile) (still, gone []closedFile, err error) {
	for _, c := range closed {
		fi, err := os.Stat(c.p.Path)
		switch {
		case errors.Is(err, fs.ErrNotExist), unlinked(c.info):
			// Deleted (while closed, or while open before its close: a
			// file created under the name since is another, a new
			// partition).
			gone = append(gone, c)
			continue
		case err != nil:
			return nil, nil, fmt.Errorf("runtime: source: %w", err)
		}
		if err := c.check(fi); err != nil {
			return nil, nil, err
		}
		if fi.Size() == c.read {
			still = append(still, c)
			continue
		}
		if !c.sameTail() {
			// Grown, but what was read is not there: the file was
			// deleted and another created under the name, which took its
			// inode again (ext4 does), or it was truncated and written
			// again. Read on from the old position, its first lines were
			// lost (or cut): its partition ends, and the file is a new
			// one, read from its start.
			gone = append(gone, c)
			continue
		}
		r.start(func(ctx context.Context) error { return r.readFrom(ctx, c.p, c.pos, r.out, &c) })
	}
	return still, gone, nil
}

// check returns an error when fi, the file under c's name now, is not
// c's file or is shorter than what was read of it.
func (c *closedFile) check(fi os.FileInfo) error {
	if !os.SameFile(fi, c.info) {
		return fmt.Errorf("runtime: source %s: replaced by another file while followed", c.p.Path)
	}
	if fi.Size() < c.read {
		return fmt.Errorf("runtime: source %s: %w", c.p.Path, errTruncated(fi.Size(), c.read))
	}
	return nil
}

// partReader is the state of one partition's reading: the batch being
// filled.
type partReader struct {
	r        *PartitionReader
	out      chan<- Batch
	ctx      context.Context
	p        Partition
	cur      Batch
	end      Position
	caughtUp bool // a CaughtUp batch was sent and no record came since
	// fr is the followed file's reader (nil for stdin or a file read to
	// its end).
	fr *followReader
	// src is the file being read, for the batches' Read (nil for stdin).
	src *FileSource
}

// readPartition reads one partition from its resume position to its end
// (or, followed, until ctx is done).
func (r *PartitionReader) readPartition(ctx context.Context, p Partition) error {
	return r.readPartitionTo(ctx, p, r.out)
}

// readPartitionTo is readPartition into out.
func (r *PartitionReader) readPartitionTo(ctx context.Context, p Partition, out chan<- Batch) error {
	pos, ok := r.resume[p.Name]
	if !ok {
		pos = Position{File: p.Name}
	}
	return r.readFrom(ctx, p, pos, out, nil)
}

// readFrom reads partition p from pos into out. closed, when set, is the
// file closed for inactivity that this reading opens again: the partition
// has had its Opened batch, and the file must still be the one closed.
// A file that becomes inactive again is closed, sent as Closed and handed
// to the directory scan.
func (r *PartitionReader) readFrom(ctx context.Context, p Partition, pos Position, out chan<- Batch, closed *closedFile) error {
	pr := &partReader{r: r, out: out, ctx: ctx, p: p, end: pos}
	pr.cur = Batch{Partition: p}
	if closed == nil {
		pr.cur.Opened = true
		if err := pr.flush(true); err != nil {
			return err
		}
		if fi, tail, ok := r.quietAt(p, pos); ok {
			return pr.close(fi, fi.Size(), tail)
		}
	}
	src, err := r.open(ctx, pr, pos, closed)
	if errors.Is(err, errInactive) {
		return pr.close(pr.fr.info, pr.fr.offset, pr.fr.tail)
	}
	if err != nil {
		return err
	}
	defer src.Close()
	if p.Path != "-" {
		pr.src = src
	}
	for {
		rec, err := src.Next()
		if err == io.EOF {
			pr.cur.Done = true
			return pr.flush(true)
		}
		if errors.Is(err, errInactive) {
			src.Close()
			return pr.close(pr.fr.info, pr.fr.offset, pr.fr.tail)
		}
		if err != nil {
			// The records read before a broken input (a truncated .gz,
			// a read error) are sent first, as a backtest processes
			// them: the consumer meets the error after them.
			if ferr := pr.flush(false); ferr != nil {
				return ferr
			}
			return err
		}
		if err := pr.add(rec, src.Position()); err != nil {
			return err
		}
	}
}

// quietAt returns the file of partition p, of a followed directory
// resumed at pos, when it can start closed: a plain file that ends at pos
// and was not modified for CloseInactive. A gzip file (whose positions
// count uncompressed bytes) is opened, as is any file quietAt cannot
// look at (the open reports why).
func (r *PartitionReader) quietAt(p Partition, pos Position) (os.FileInfo, []byte, bool) {
	if !r.cfg.Follow || !r.dir || r.cfg.CloseInactive <= 0 || pos.Offset == 0 || checkPosition(pos, p.Path) != nil {
		return nil, nil, false
	}
	f, err := os.Open(p.Path)
	if err != nil {
		return nil, nil, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != pos.Offset || time.Since(fi.ModTime()) < r.cfg.CloseInactive {
		return nil, nil, false
	}
	if gzipAt(f) {
		return nil, nil, false
	}
	if m := r.cfg.Marks[p.Name]; len(m.Bytes) > 0 {
		// Another file of the same size under the name: opened, the
		// resume refuses it.
		if same, err := sameTailOf(f, m.Bytes, m.At); err != nil || !same {
			return nil, nil, false
		}
	}
	return fi, readTail(f, fi.Size()), true
}

// close sends what was read, marked Closed, and hands the partition's
// file, closed for inactivity, to the directory scan: info and read are
// the file as last looked at and the bytes read of it, tail its last
// bytes read (closedFile.tail).
func (pr *partReader) close(info os.FileInfo, read int64, tail []byte) error {
	pr.cur.CaughtUp, pr.cur.Closed = true, true
	pr.cur.Tail, pr.cur.TailAt = tail, read
	pr.caughtUp = true
	if err := pr.flush(true); err != nil {
		return err
	}
	c := closedFile{p: pr.p, pos: pr.end, info: info, read: read, tail: tail}
	pr.r.mu.Lock()
	pr.r.closed = append(pr.r.closed, c)
	pr.r.mu.Unlock()
	return nil
}

// open opens partition p of pr at pos: a file with or without following,
// or standard input through a pump. pr.wait is called before a read that
// would wait for input. closed, when set, is the file closed for
// inactivity that is opened again.
func (r *PartitionReader) open(ctx context.Context, pr *partReader, pos Position, closed *closedFile) (*FileSource, error) {
	p, wait := pr.p, pr.wait
	if p.Path == "-" {
		r.mu.Lock()
		if r.stopped {
			r.mu.Unlock()
			return nil, ctx.Err()
		}
		pump := newStreamPump(ctx, r.cfg.Stdin, wait)
		r.pumps = append(r.pumps, pump)
		r.mu.Unlock()
		return openSourceAt(pump, "stdin", nil, pos, r.cfg.Marks[p.Name], r.cfg.Source)
	}
	var mark Mark // the resume position's (a file opened again was checked as closed)
	if closed == nil {
		mark = r.cfg.Marks[p.Name]
	}
	if !r.cfg.Follow {
		return openFileSourceAt(p.Path, pos, mark, r.cfg.Source)
	}
	f, err := os.Open(p.Path)
	if err != nil {
		return nil, fmt.Errorf("runtime: source: %w", err)
	}
	if closed != nil {
		// Between the scan's stat and the open, the name may have
		// changed hands.
		fi, err := f.Stat()
		if err == nil {
			err = closed.check(fi)
		}
		if err != nil {
			f.Close()
			return nil, err
		}
	}
	fr := &followReader{ctx: ctx, f: f, poll: r.cfg.PollInterval, wait: wait, hold: pos.Offset > 0}
	if r.dir {
		fr.closeAfter = r.cfg.CloseInactive
	}
	pr.fr = fr
	s, err := openFollowed(fr, p.Path, pos, mark, r.cfg.Source)
	if err != nil {
		f.Close()
		return nil, err
	}
	fr.hold = false
	s.closer = f
	return s, nil
}

// openFollowed builds the source of a followed file at pos. A gzip file
// is decompressed member by member ([gzipMembers]), so that a member's
// last lines are delivered before the next member's header has arrived.
func openFollowed(fr *followReader, path string, pos Position, mark Mark, cfg SourceConfig) (*FileSource, error) {
	magic, _ := bufio.NewReaderSize(fr, 16).Peek(len(gzipMagic))
	if _, err := fr.f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("runtime: source %s: %w", path, err)
	}
	if !bytes.Equal(magic, gzipMagic) {
		return openSourceAt(fr, path, fr.f, pos, mark, cfg)
	}
	if err := checkPosition(pos, path); err != nil {
		return nil, err
	}
	if err := checkMark(mark, pos); err != nil {
		return nil, err
	}
	gz := &gzipMembers{br: bufio.NewReaderSize(fr, 64<<10)}
	// The decompressed stream has no gzip magic: a ".gz" name would be
	// refused, so the source is named after construction.
	s, err := newFileSource(gz, strings.TrimSuffix(path, ".gz"), nil, cfg)
	if err != nil {
		return nil, err
	}
	s.name = path
	if err := s.resume(pos, mark, nil); err != nil {
		return nil, err
	}
	return s, nil
}

// add appends a record, copied, to the batch being filled, after sending
// that batch if the record does not fit; end is the position after it.
func (pr *partReader) add(rec Record, end Position) error {
	cfg := &pr.r.cfg
	if n := len(pr.cur.Records); n == cfg.BatchRecords || n > 0 && pr.cur.bytes+len(rec.Data) > cfg.BatchBytes {
		if err := pr.flush(false); err != nil {
			return err
		}
	}
	b := &pr.cur
	if room := cap(b.chunk) - len(b.chunk); room < len(rec.Data) {
		// A new chunk (the data already copied stays in the old one):
		// doubling, so that a batch of small records is few allocations
		// and a quiet followed file's single-line batches stay small.
		size := max(len(rec.Data), min(2*cap(b.chunk), cfg.BatchBytes), 512)
		b.chunk = make([]byte, 0, size)
	}
	start := len(b.chunk)
	b.chunk = append(b.chunk, rec.Data...)
	rec.Data = b.chunk[start:len(b.chunk):len(b.chunk)]
	b.Records = append(b.Records, rec)
	b.bytes += len(rec.Data)
	pr.end = end
	pr.caughtUp = false
	pr.r.read.Add(1)
	return nil
}

// wait is called before the partition's input waits for more: it sends
// what was read so far, marked CaughtUp (once per stretch of waiting).
func (pr *partReader) wait() error {
	if len(pr.cur.Records) == 0 && pr.caughtUp {
		return nil
	}
	pr.cur.CaughtUp = true
	pr.caughtUp = true
	if fr := pr.fr; fr != nil && fr.closeAfter > 0 && !fr.caughtUpOnce {
		// The end of a file read since it was opened: written to last
		// before the run came to it (a backlog), idle as a file closed
		// for quiet would be. Later ends are the reader's own to judge:
		// a modification time need not follow the writes (a writer's
		// clock behind, a network file system's cached attributes).
		fr.caughtUpOnce = true
		if fi, err := fr.f.Stat(); err == nil {
			if age := time.Since(fi.ModTime()); age >= fr.closeAfter {
				pr.cur.Unmodified = age
			}
		}
	}
	return pr.flush(true)
}

// flush sends the batch being filled, if it has records or always is
// set, and starts the next one.
func (pr *partReader) flush(always bool) error {
	if len(pr.cur.Records) == 0 && !always {
		return nil
	}
	b := pr.cur
	b.End = pr.end
	if pr.src != nil {
		b.Read, _ = pr.src.Progress()
	}
	if pr.fr != nil {
		if fi, err := pr.fr.f.Stat(); err == nil {
			b.Unread = max(0, fi.Size()-b.Read)
		}
	}
	b.chunk = nil
	select {
	case pr.out <- b:
	case <-pr.ctx.Done():
		return pr.ctx.Err()
	}
	pr.cur = Batch{Partition: pr.p}
	return nil
}
