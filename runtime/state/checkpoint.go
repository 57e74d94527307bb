package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/cepheus-cep/cepheus/internal/failpoint"
	"hash/crc32"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// CheckpointID numbers the checkpoints of a job: each is greater than the
// one before.
type CheckpointID uint64

// CheckpointFormat is the version of the layout of a checkpoint directory
// and of its marker that this build writes, and the only one it reads.
const CheckpointFormat = 1

// DefaultKeep is the number of complete checkpoints a [CheckpointDir]
// keeps unless configured otherwise with [WithKeep].
const DefaultKeep = 3

// Errors of checkpoint directories. Test for them with errors.Is.
var (
	// ErrNoCheckpoint: there is no complete checkpoint (of that id).
	ErrNoCheckpoint = errors.New("state: no complete checkpoint")
	// ErrCorruptCheckpoint: a file of a complete checkpoint does not
	// read back as written (bad checksum, truncated, not ours).
	ErrCorruptCheckpoint = errors.New("state: corrupt checkpoint")
	// ErrCheckpointVersion: the checkpoint was written in a format this
	// build does not read.
	ErrCheckpointVersion = errors.New("state: unknown checkpoint format version")
	// ErrNotInCheckpoint: the checkpoint has no store or metadata blob
	// of that name.
	ErrNotInCheckpoint = errors.New("state: not in the checkpoint")
)

// LaterRecord is the error of a checkpoint record (what) of version v,
// above newest, the newest this build reads: a record a later build
// wrote, which an earlier build cannot tell from a damaged one unless it
// says so ([ErrCheckpointVersion]).
func LaterRecord(what string, v, newest uint64) error {
	return fmt.Errorf("%w: %s of version %d, this build reads up to %d (a checkpoint of a later build: resume it with that build, or start over with a new state directory)", ErrCheckpointVersion, what, v, newest)
}

// StoreKind says how a store was written into a checkpoint.
type StoreKind string

// The kinds of stores.
const (
	// KindPebble is a Pebble checkpoint of a [Pebble] store: a directory
	// of hard links to its sstables and copies of its small files.
	KindPebble StoreKind = "pebble"
	// KindMem is a file of the records of a [Mem] store.
	KindMem StoreKind = "mem"
)

// A checkpoint directory holds, under its root:
//
//	LOCK                     held while a CheckpointDir is open
//	chk-N.tmp/               checkpoint N being written
//	chk-N/                   checkpoint N, complete once its marker exists
//	  _COMPLETE              the marker: format, checksum, manifest (JSON)
//	  state/NAME/            a Pebble store (KindPebble)
//	  state/NAME.mem         a Mem store (KindMem)
//	  meta/NAME              a metadata blob
const (
	lockName    = "LOCK"
	markerName  = "_COMPLETE"
	stateSubdir = "state"
	metaSubdir  = "meta"
	tmpSuffix   = ".tmp"
	chkPrefix   = "chk-"
	markerMagic = "cepheus checkpoint"
)

// CheckpointDir is the embedded checkpoint store over a state directory
// on local disk: one subdirectory per checkpoint, written aside as
// chk-N.tmp, made durable, renamed to chk-N, and marked complete last
// (package doc, "Invariants"). The working directories of the Pebble
// stores it checkpoints must be on the same file system as the state
// directory, so that checkpoints hard-link their sstables (elsewhere,
// they are copied: correct, not incremental).
//
// The methods of a CheckpointDir are called by one goroutine (the
// checkpoint coordinator); a [CheckpointWriter] takes the stores of
// several subtasks concurrently.
type CheckpointDir struct {
	dir  string
	fs   vfs.FS
	keep int
	lock io.Closer
	// crash, when set (tests), is called at each step of Commit; an error
	// stops Commit there, as a crash would.
	crash func(commitStep) error
}

// CheckpointDirOption configures [OpenCheckpointDir].
type CheckpointDirOption func(*CheckpointDir)

// WithKeep sets how many complete checkpoints are kept: a commit deletes
// the older ones. The default is [DefaultKeep]; k < 1 keeps it.
func WithKeep(k int) CheckpointDirOption {
	return func(d *CheckpointDir) {
		if k >= 1 {
			d.keep = k
		}
	}
}

// withCheckpointFS puts the state directory on fs (vfs.NewMem in tests):
// the file system of the Pebble stores it checkpoints.
func withCheckpointFS(fs vfs.FS) CheckpointDirOption {
	return func(d *CheckpointDir) { d.fs = fs }
}

// OpenCheckpointDir opens the state directory dir, creating it if needed
// (mode 0700, as the directories inside it: the state holds events, with
// their customer data), and locks it: one process at a time. Close it when
// done.
func OpenCheckpointDir(dir string, opts ...CheckpointDirOption) (*CheckpointDir, error) {
	d := &CheckpointDir{dir: dir, fs: vfs.Default, keep: DefaultKeep}
	for _, o := range opts {
		o(d)
	}
	if err := d.fs.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state: checkpoint dir: %w", err)
	}
	lock, err := d.fs.Lock(d.fs.PathJoin(dir, lockName))
	if err != nil {
		return nil, lockError("checkpoint dir "+dir+" is in use", dir, err)
	}
	d.lock = lock
	return d, nil
}

// runLockName is the lock file of [LockRun], beside the checkpoint
// directory's own.
const runLockName = "RUN.LOCK"

// LockRun locks the state directory dir for a whole run, creating it if
// needed. A run's jobs open the directory one after the other
// ([OpenCheckpointDir]); this lock, held from before the first to after
// the last, makes a second process given the same directory fail at once,
// before it does anything that would disturb the first (fence its Kafka
// producer, take its place in a consumer group), and also between two of
// the first's jobs. Close releases it.
func LockRun(dir string) (io.Closer, error) {
	if err := vfs.Default.MkdirAll(dir, 0o700); err != nil {
		return nil, notDirError(dir, err)
	}
	lock, err := vfs.Default.Lock(vfs.Default.PathJoin(dir, runLockName))
	if err != nil {
		return nil, lockError("state dir "+dir+" is in use by another run", dir, err)
	}
	return lock, nil
}

// CheckRunLock reports, without making anything, whether dir can be the
// state directory of a new run: an error when another run holds it
// (LockRun's lock taken and let go at once), or when it, or a directory
// above it, is a file. A run that loads much before it locks (lookups
// read from a file) is refused at once so.
func CheckRunLock(dir string) error {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, iofs.ErrNotExist):
		return nil
	case err != nil || !st.IsDir():
		return notDirError(dir, err)
	}
	path := vfs.Default.PathJoin(dir, runLockName)
	if _, err := os.Stat(path); errors.Is(err, iofs.ErrNotExist) {
		return nil // never locked: no lock file is made here
	}
	lock, err := vfs.Default.Lock(path)
	if err != nil {
		return lockError("state dir "+dir+" is in use by another run", dir, err)
	}
	return lock.Close()
}

// notDirError is the error of a state directory dir that cannot be made
// (err): it, or a directory above it, is a file.
func notDirError(dir string, err error) error {
	switch file := fileOnPath(dir); {
	case file == filepath.Clean(dir):
		return fmt.Errorf("state: state dir %s is a file, not a directory", dir)
	case file != "":
		return fmt.Errorf("state: state dir %s: %s is a file, not a directory", dir, file)
	}
	return fmt.Errorf("state: state dir: %w", err)
}

// fileOnPath is dir, or the nearest directory above it, that exists,
// when that is a file; "" when it is a directory.
func fileOnPath(dir string) string {
	for p := filepath.Clean(dir); ; p = filepath.Dir(p) {
		if st, err := os.Stat(p); err == nil {
			if st.IsDir() {
				return ""
			}
			return p
		}
		if p == filepath.Dir(p) {
			return ""
		}
	}
}

// UnmakeRunDir removes a state directory that [LockRun] made and that
// holds nothing but its lock files (its locks released: the run's, and
// the checkpoint directory's of [OpenCheckpointDir]); one holding anything
// else stays as it is.
func UnmakeRunDir(dir string) {
	names, err := vfs.Default.List(dir)
	if err != nil {
		return
	}
	for _, n := range names {
		if n != runLockName && n != lockName {
			return
		}
	}
	for _, n := range names {
		_ = vfs.Default.Remove(vfs.Default.PathJoin(dir, n))
	}
	_ = vfs.Default.Remove(dir)
}

// lockError is the error of a lock file of dir that could not be taken:
// inUse when another holder has it (the errno of a lock held elsewhere,
// EAGAIN or EACCES, says nothing more to a reader), else what kept the
// file from being made (a directory not writable, a read-only file
// system), which is no run's doing.
func lockError(inUse, dir string, err error) error {
	var pathErr *iofs.PathError
	if errors.As(err, &pathErr) {
		return fmt.Errorf("state: cannot lock state dir %s: %w", dir, err)
	}
	return errors.New("state: " + inUse)
}

// Dir is the state directory.
func (d *CheckpointDir) Dir() string { return d.dir }

// Close releases the lock of the state directory.
func (d *CheckpointDir) Close() error {
	if d.lock == nil {
		return nil
	}
	err := d.lock.Close()
	d.lock = nil
	return err
}

func (d *CheckpointDir) path(id CheckpointID) string {
	return d.fs.PathJoin(d.dir, chkPrefix+strconv.FormatUint(uint64(id), 10))
}

// entry is a checkpoint directory found in the state directory.
type entry struct {
	id   CheckpointID
	name string
	tmp  bool // chk-N.tmp
}

// entries lists the checkpoint directories, newest first (a chk-N.tmp
// after its chk-N).
func (d *CheckpointDir) entries() ([]entry, error) {
	names, err := d.fs.List(d.dir)
	if err != nil {
		return nil, fmt.Errorf("state: checkpoint dir: %w", err)
	}
	var es []entry
	for _, name := range names {
		num, tmp := strings.CutSuffix(name, tmpSuffix)
		num, ok := strings.CutPrefix(num, chkPrefix)
		if !ok {
			continue
		}
		id, err := strconv.ParseUint(num, 10, 64)
		if err != nil || strconv.FormatUint(id, 10) != num {
			continue // not one of ours
		}
		es = append(es, entry{id: CheckpointID(id), name: name, tmp: tmp})
	}
	slices.SortFunc(es, func(a, b entry) int {
		switch {
		case a.id != b.id:
			if a.id > b.id {
				return -1
			}
			return 1
		case a.tmp != b.tmp:
			if b.tmp {
				return -1
			}
			return 1
		}
		return 0
	})
	return es, nil
}

func (d *CheckpointDir) complete(e entry) (bool, error) {
	if e.tmp {
		return false, nil
	}
	_, err := d.fs.Stat(d.fs.PathJoin(d.dir, e.name, markerName))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, iofs.ErrNotExist):
		return false, nil
	}
	return false, err
}

// Complete lists the ids of the complete checkpoints, oldest first.
func (d *CheckpointDir) Complete() ([]CheckpointID, error) {
	es, err := d.entries()
	if err != nil {
		return nil, err
	}
	var ids []CheckpointID
	for _, e := range slices.Backward(es) {
		ok, err := d.complete(e)
		if err != nil {
			return nil, err
		}
		if ok {
			ids = append(ids, e.id)
		}
	}
	return ids, nil
}

// Latest opens the newest complete checkpoint, to restore from. Torn
// checkpoints (a chk-N.tmp, or a chk-N without its marker: a crash
// during Commit) are skipped, so a torn newest falls back to the complete
// one before it. A marker that does not read is an error, never skipped:
// [ErrCheckpointVersion] for one of another format, [ErrCorruptCheckpoint]
// for a damaged one. With no complete checkpoint the error is
// [ErrNoCheckpoint].
func (d *CheckpointDir) Latest() (*Checkpoint, error) {
	es, err := d.entries()
	if err != nil {
		return nil, err
	}
	for _, e := range es {
		ok, err := d.complete(e)
		if err != nil {
			return nil, err
		}
		if ok {
			return d.Open(e.id)
		}
	}
	return nil, fmt.Errorf("%w in %s", ErrNoCheckpoint, d.dir)
}

// Open opens the complete checkpoint id, to restore from. Its errors are
// those of [CheckpointDir.Latest].
func (d *CheckpointDir) Open(id CheckpointID) (*Checkpoint, error) {
	dir := d.path(id)
	b, err := readFile(d.fs, d.fs.PathJoin(dir, markerName))
	if errors.Is(err, iofs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s has no marker", ErrNoCheckpoint, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("state: open checkpoint: %w", err)
	}
	m, err := decodeMarker(b)
	if err != nil {
		return nil, fmt.Errorf("%w (%s)", err, d.fs.PathJoin(dir, markerName))
	}
	if m.ID != id {
		return nil, fmt.Errorf("%w: %s says it is checkpoint %d", ErrCorruptCheckpoint, dir, m.ID)
	}
	return &Checkpoint{ID: id, Dir: dir, fs: d.fs, m: m}, nil
}

// Begin starts checkpoint id: a [CheckpointWriter] into chk-N.tmp. What a
// crash left of an earlier attempt at id (chk-N.tmp, or chk-N without
// its marker) is removed first. id must be greater than every complete
// checkpoint: after a restore from checkpoint n, the next is n+1 (or
// more).
func (d *CheckpointDir) Begin(id CheckpointID) (*CheckpointWriter, error) {
	ids, err := d.Complete()
	if err != nil {
		return nil, err
	}
	if len(ids) > 0 && id <= ids[len(ids)-1] {
		return nil, fmt.Errorf("state: checkpoint %d is not after the newest complete checkpoint, %d", id, ids[len(ids)-1])
	}
	final := d.path(id)
	tmp := final + tmpSuffix
	for _, p := range []string{tmp, final} {
		if err := d.fs.RemoveAll(p); err != nil {
			return nil, fmt.Errorf("state: begin checkpoint %d: %w", id, err) // the path and the cause are in err
		}
	}
	for _, sub := range []string{stateSubdir, metaSubdir} {
		if err := d.fs.MkdirAll(d.fs.PathJoin(tmp, sub), 0o700); err != nil {
			return nil, fmt.Errorf("state: begin checkpoint %d: %w", id, err)
		}
	}
	return &CheckpointWriter{d: d, id: id, tmp: tmp, final: final, names: map[string]bool{}}, nil
}

// CheckpointWriter writes one checkpoint. Its Add and PutMeta methods
// may be called concurrently (each subtask adds its own store at its
// barrier), each name once; then Commit, or Abort, once.
type CheckpointWriter struct {
	d          *CheckpointDir
	id         CheckpointID
	tmp, final string

	mu    sync.Mutex // guards the fields below
	names map[string]bool
	m     marker
	err   error // the first failed Add or PutMeta: Commit refuses
	done  bool
}

// ID is the id of the checkpoint.
func (w *CheckpointWriter) ID() CheckpointID { return w.id }

// reserve claims a name of a store ("s/"+name) or blob ("m/"+name).
func (w *CheckpointWriter) reserve(name, ns string) error {
	if err := checkName(name); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.done:
		return errors.New("state: checkpoint writer used after Commit or Abort")
	case w.names[ns+name]:
		return fmt.Errorf("state: checkpoint %d: %q added twice", w.id, name)
	}
	w.names[ns+name] = true
	return nil
}

func (w *CheckpointWriter) fail(err error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
	return err
}

// AddPebble adds the store p under name: it flushes p's write-back batch,
// then writes a Pebble checkpoint of its database (hard links to its
// sstables, hence incremental; the write-ahead log flushed and synced
// first). It takes milliseconds, not a copy of the state. REQUIRES: the
// goroutine that owns p; p is on the file system of the state directory.
func (w *CheckpointWriter) AddPebble(name string, p *Pebble) error {
	if err := p.Flush(); err != nil {
		return w.fail(err)
	}
	return w.AddPebbleFlushed(name, p)
}

// AddPebbleFlushed is [CheckpointWriter.AddPebble] of a store whose
// write-back batch its owner has flushed ([Pebble.Flush]) since its last
// write: it may run on any goroutine, while the owner goes on (the
// checkpoint holds the database as of the call; later writes do not enter
// it). The owner must not close p before it returns.
func (w *CheckpointWriter) AddPebbleFlushed(name string, p *Pebble) error {
	if err := w.reserve(name, "s/"); err != nil {
		return err
	}
	if err := p.checkpointDB(w.d.fs.PathJoin(w.tmp, stateSubdir, name)); err != nil {
		return w.fail(err)
	}
	w.mu.Lock()
	w.m.Stores = append(w.m.Stores, markerStore{Name: name, Kind: KindPebble})
	w.mu.Unlock()
	return nil
}

// AddMem adds the records of s under name, written to a file. s is
// immutable: AddMem may run on another goroutine than the owner of the
// [Mem] it was taken from.
func (w *CheckpointWriter) AddMem(name string, s *MemSnapshot) error {
	if err := w.reserve(name, "s/"); err != nil {
		return err
	}
	if err := writeMemFile(w.d.fs, w.d.fs.PathJoin(w.tmp, stateSubdir, name+".mem"), s); err != nil {
		return w.fail(err)
	}
	w.mu.Lock()
	w.m.Stores = append(w.m.Stores, markerStore{Name: name, Kind: KindMem})
	w.mu.Unlock()
	return nil
}

// AddMemStore is [CheckpointWriter.AddMem] of the records m holds now,
// without a snapshot: m must not be written until AddMemStore returns
// (its owner calls it, or hands m over). It saves the copy that the
// first write after a snapshot makes.
func (w *CheckpointWriter) AddMemStore(name string, m *Mem) error {
	return w.AddMem(name, &MemSnapshot{recs: m.recs})
}

// PutMeta adds the metadata blob data under name: what the caller needs
// besides the stores to restore (source positions, watermarks, the
// ruleset version, the configuration, its own format version). The
// marker records its size and checksum; [Checkpoint.Meta] checks them.
func (w *CheckpointWriter) PutMeta(name string, data []byte) error {
	if err := w.reserve(name, "m/"); err != nil {
		return err
	}
	blob := markerBlob{Name: name, Size: len(data), CRC: crc32.Checksum(data, castagnoli)}
	if err := writeFileSync(w.d.fs, w.d.fs.PathJoin(w.tmp, metaSubdir, name), data); err != nil {
		return w.fail(fmt.Errorf("state: checkpoint %d: metadata %q: %w", w.id, name, err))
	}
	w.mu.Lock()
	w.m.Meta = append(w.m.Meta, blob)
	w.mu.Unlock()
	return nil
}

// commitStep names the steps of Commit, for the crash tests.
type commitStep int

const (
	stepWritten       commitStep = iota // every file written, none synced by Commit
	stepSynced                          // the files and directories of chk-N.tmp synced
	stepRenamed                         // chk-N.tmp renamed to chk-N
	stepParentSynced                    // the state directory synced
	stepMarkerRenamed                   // _COMPLETE.tmp synced and renamed to _COMPLETE
	stepComplete                        // chk-N synced: the checkpoint is complete
)

var stepNames = [...]string{"written", "synced", "renamed", "parent-synced", "marker-renamed", "complete"}

// String names the step, as the failpoints "checkpoint.NAME" do.
func (s commitStep) String() string { return stepNames[s] }

func (d *CheckpointDir) step(s commitStep) error {
	failpoint.Hit("checkpoint." + s.String())
	if d.crash == nil {
		return nil
	}
	return d.crash(s)
}

// Commit makes the checkpoint durable and complete: it syncs every file
// and directory of chk-N.tmp, renames it chk-N, syncs the state directory,
// then writes the marker chk-N/_COMPLETE (through a synced _COMPLETE.tmp
// and a rename) and syncs chk-N. A crash at any point leaves either the
// checkpoint complete or a torn one that [CheckpointDir.Latest] skips.
// Then it deletes the complete checkpoints beyond the newest K (marker
// first) and the torn ones older than this one. Commit refuses a
// checkpoint one of whose Add or PutMeta calls failed (and aborts it).
func (w *CheckpointWriter) Commit() error {
	w.mu.Lock()
	if w.done {
		w.mu.Unlock()
		return errors.New("state: checkpoint writer used after Commit or Abort")
	}
	w.done = true
	failed := w.err
	m := w.m
	w.mu.Unlock()
	d, fs := w.d, w.d.fs
	if failed != nil {
		_ = fs.RemoveAll(w.tmp)
		return fmt.Errorf("state: checkpoint %d not committed: %w", w.id, failed)
	}
	m.Format = CheckpointFormat
	m.ID = w.id
	slices.SortFunc(m.Stores, func(a, b markerStore) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(m.Meta, func(a, b markerBlob) int { return strings.Compare(a.Name, b.Name) })
	wrap := func(err error) error { return fmt.Errorf("state: commit checkpoint %d: %w", w.id, err) }

	if err := d.step(stepWritten); err != nil {
		return err
	}
	if err := syncTree(fs, w.tmp); err != nil {
		return wrap(err)
	}
	if err := d.step(stepSynced); err != nil {
		return err
	}
	if err := fs.Rename(w.tmp, w.final); err != nil {
		return wrap(err)
	}
	if err := d.step(stepRenamed); err != nil {
		return err
	}
	if err := syncDir(fs, d.dir); err != nil {
		return wrap(err)
	}
	if err := d.step(stepParentSynced); err != nil {
		return err
	}
	markerTmp := fs.PathJoin(w.final, markerName+tmpSuffix)
	if err := writeFileSync(fs, markerTmp, encodeMarker(m)); err != nil {
		return wrap(err)
	}
	if err := fs.Rename(markerTmp, fs.PathJoin(w.final, markerName)); err != nil {
		return wrap(err)
	}
	if err := d.step(stepMarkerRenamed); err != nil {
		return err
	}
	if err := syncDir(fs, w.final); err != nil {
		return wrap(err)
	}
	if err := d.step(stepComplete); err != nil {
		return err
	}
	return d.prune(w.id)
}

// Abort drops the checkpoint: chk-N.tmp is removed.
func (w *CheckpointWriter) Abort() error {
	w.mu.Lock()
	done := w.done
	w.done = true
	w.mu.Unlock()
	if done {
		return nil
	}
	return w.d.fs.RemoveAll(w.tmp)
}

// prune deletes the complete checkpoints beyond the newest d.keep, and
// the torn ones older than id. A complete checkpoint loses its marker
// (synced) before its files: a crash in between leaves a torn one, never
// a marker over missing files.
func (d *CheckpointDir) prune(id CheckpointID) error {
	es, err := d.entries()
	if err != nil {
		return err
	}
	kept := 0
	for _, e := range es {
		ok, err := d.complete(e)
		if err != nil {
			return err
		}
		p := d.fs.PathJoin(d.dir, e.name)
		switch {
		case ok && kept < d.keep:
			kept++
			continue
		case ok:
			if err := d.fs.Remove(d.fs.PathJoin(p, markerName)); err != nil {
				return fmt.Errorf("state: delete checkpoint %d: %w", e.id, err)
			}
			if err := syncDir(d.fs, p); err != nil {
				return fmt.Errorf("state: delete checkpoint %d: %w", e.id, err)
			}
		case e.id >= id:
			continue // torn, but perhaps being written
		}
		if err := d.fs.RemoveAll(p); err != nil {
			return fmt.Errorf("state: delete checkpoint %d: %w", e.id, err)
		}
	}
	return nil
}

// DiscardAfter deletes every checkpoint newer than id, complete or torn:
// checkpoints a restore must not see again, such as those whose Kafka
// transaction never committed. A complete one loses its marker (synced)
// before its files, as in pruning.
func (d *CheckpointDir) DiscardAfter(id CheckpointID) error {
	es, err := d.entries()
	if err != nil {
		return err
	}
	for _, e := range es {
		if e.id <= id {
			continue
		}
		p := d.fs.PathJoin(d.dir, e.name)
		ok, err := d.complete(e)
		if err != nil {
			return err
		}
		if ok {
			if err := d.fs.Remove(d.fs.PathJoin(p, markerName)); err != nil {
				return fmt.Errorf("state: discard checkpoint %d: %w", e.id, err)
			}
			if err := syncDir(d.fs, p); err != nil {
				return fmt.Errorf("state: discard checkpoint %d: %w", e.id, err)
			}
		}
		if err := d.fs.RemoveAll(p); err != nil {
			return fmt.Errorf("state: discard checkpoint %d: %w", e.id, err)
		}
	}
	return nil
}

// Checkpoint is a complete checkpoint, opened to restore from. Its files
// are never written: a store is restored into a working directory of its
// own ([Checkpoint.OpenPebble]) or into memory ([Checkpoint.OpenMem]).
type Checkpoint struct {
	ID  CheckpointID
	Dir string // chk-N
	fs  vfs.FS
	m   marker
}

// Completed returns when the checkpoint was completed: the time its
// marker was written.
func (c *Checkpoint) Completed() (time.Time, error) {
	fi, err := c.fs.Stat(c.fs.PathJoin(c.Dir, markerName))
	if err != nil {
		return time.Time{}, fmt.Errorf("state: checkpoint %d: %w", c.ID, err)
	}
	return fi.ModTime(), nil
}

// StoreInfo names a store of a checkpoint and its kind.
type StoreInfo struct {
	Name string
	Kind StoreKind
}

// Stores lists the stores of the checkpoint, by name.
func (c *Checkpoint) Stores() []StoreInfo {
	out := make([]StoreInfo, len(c.m.Stores))
	for i, s := range c.m.Stores {
		out[i] = StoreInfo(s)
	}
	return out
}

// MetaNames lists the names of the metadata blobs, sorted.
func (c *Checkpoint) MetaNames() []string {
	out := make([]string, len(c.m.Meta))
	for i, b := range c.m.Meta {
		out[i] = b.Name
	}
	return out
}

// Meta reads the metadata blob name, checked against the size and
// checksum in the marker ([ErrCorruptCheckpoint]). A name the checkpoint
// does not have is [ErrNotInCheckpoint].
func (c *Checkpoint) Meta(name string) ([]byte, error) {
	i := slices.IndexFunc(c.m.Meta, func(b markerBlob) bool { return b.Name == name })
	if i < 0 {
		return nil, fmt.Errorf("%w: checkpoint %d has no metadata %q", ErrNotInCheckpoint, c.ID, name)
	}
	b, err := readFile(c.fs, c.fs.PathJoin(c.Dir, metaSubdir, name))
	if err != nil {
		return nil, fmt.Errorf("state: checkpoint %d: metadata %q: %w", c.ID, name, err)
	}
	if want := c.m.Meta[i]; len(b) != want.Size || crc32.Checksum(b, castagnoli) != want.CRC {
		return nil, fmt.Errorf("%w: checkpoint %d: metadata %q does not match its checksum", ErrCorruptCheckpoint, c.ID, name)
	}
	return b, nil
}

func (c *Checkpoint) store(name string, kind StoreKind) error {
	i := slices.IndexFunc(c.m.Stores, func(s markerStore) bool { return s.Name == name })
	switch {
	case i < 0:
		return fmt.Errorf("%w: checkpoint %d has no store %q", ErrNotInCheckpoint, c.ID, name)
	case c.m.Stores[i].Kind != kind:
		return fmt.Errorf("state: checkpoint %d: store %q is of kind %s, not %s", c.ID, name, c.m.Stores[i].Kind, kind)
	}
	return nil
}

// OpenPebble restores the Pebble store name into workDir, which must not
// exist or be empty, and opens it there. The checkpoint is never opened
// in place: its sstables are hard-linked into workDir (immutable, so
// shared safely; a later checkpoint of the restored store links them
// again) and its other files (manifest, options, write-ahead log,
// markers) copied, since opening a database writes to them. workDir must
// be on the file system of the state directory for the links.
func (c *Checkpoint) OpenPebble(name, workDir string, opts ...PebbleOption) (*Pebble, error) {
	if err := c.store(name, KindPebble); err != nil {
		return nil, err
	}
	wrap := func(err error) error { return fmt.Errorf("state: restore %q of checkpoint %d: %w", name, c.ID, err) }
	fs := c.fs
	if names, err := fs.List(workDir); err == nil && len(names) > 0 {
		return nil, wrap(fmt.Errorf("working directory %s is not empty", workDir))
	}
	if err := fs.MkdirAll(workDir, 0o700); err != nil {
		return nil, wrap(err)
	}
	src := fs.PathJoin(c.Dir, stateSubdir, name)
	names, err := fs.List(src)
	if err != nil {
		return nil, wrap(err)
	}
	for _, n := range names {
		from, to := fs.PathJoin(src, n), fs.PathJoin(workDir, n)
		if strings.HasSuffix(n, ".sst") || strings.HasSuffix(n, ".blob") {
			err = vfs.LinkOrCopy(fs, from, to)
		} else {
			err = vfs.Copy(fs, from, to)
		}
		if err != nil {
			return nil, wrap(err)
		}
	}
	p, err := OpenPebble(workDir, append([]PebbleOption{withFS(fs)}, opts...)...)
	if err != nil {
		return nil, wrap(err)
	}
	return p, nil
}

// OpenMem restores the Mem store name into a new [Mem].
func (c *Checkpoint) OpenMem(name string) (*Mem, error) {
	if err := c.store(name, KindMem); err != nil {
		return nil, err
	}
	m, err := readMemFile(c.fs, c.fs.PathJoin(c.Dir, stateSubdir, name+".mem"))
	if err != nil {
		return nil, fmt.Errorf("state: restore %q of checkpoint %d: %w", name, c.ID, err)
	}
	return m, nil
}

// marker is the manifest in a checkpoint's _COMPLETE file. The file is
//
//	cepheus checkpoint
//	format 1
//	crc32c 0x1a2b3c4d
//	{the marker as JSON}
//
// the checksum (CRC-32C) being that of the JSON bytes.
type marker struct {
	Format int           `json:"-"`
	ID     CheckpointID  `json:"id"`
	Stores []markerStore `json:"stores"`
	Meta   []markerBlob  `json:"meta"`
}

type markerStore struct {
	Name string    `json:"name"`
	Kind StoreKind `json:"kind"`
}

type markerBlob struct {
	Name string `json:"name"`
	Size int    `json:"size"`
	CRC  uint32 `json:"crc32c"`
}

func encodeMarker(m marker) []byte {
	body, err := json.Marshal(m)
	if err != nil {
		panic(err) // plain data: cannot fail
	}
	body = append(body, '\n')
	head := fmt.Sprintf("%s\nformat %d\ncrc32c 0x%08x\n", markerMagic, m.Format, crc32.Checksum(body, castagnoli))
	return append([]byte(head), body...)
}

func decodeMarker(b []byte) (marker, error) {
	corrupt := func(what string) error { return fmt.Errorf("%w: marker: %s", ErrCorruptCheckpoint, what) }
	lines := bytes.SplitN(b, []byte("\n"), 4)
	if len(lines) < 4 || string(lines[0]) != markerMagic {
		return marker{}, corrupt("not a checkpoint marker")
	}
	var format int
	if _, err := fmt.Sscanf(string(lines[1]), "format %d", &format); err != nil {
		return marker{}, corrupt("no format line")
	}
	if format != CheckpointFormat {
		return marker{}, fmt.Errorf("%w %d (this build reads version %d)", ErrCheckpointVersion, format, CheckpointFormat)
	}
	var sum uint32
	if _, err := fmt.Sscanf(string(lines[2]), "crc32c %v", &sum); err != nil {
		return marker{}, corrupt("no checksum line")
	}
	if crc32.Checksum(lines[3], castagnoli) != sum {
		return marker{}, corrupt("checksum mismatch")
	}
	var m marker
	dec := json.NewDecoder(bytes.NewReader(lines[3]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return marker{}, corrupt(err.Error())
	}
	m.Format = format
	return m, nil
}

// checkName accepts the names of stores and metadata blobs: one path
// element of letters, digits, '.', '_' and '-', not starting with '.'.
func checkName(name string) error {
	if name == "" || len(name) > 200 || name[0] == '.' {
		return fmt.Errorf("state: bad checkpoint entry name %q", name)
	}
	for _, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("state: bad checkpoint entry name %q", name)
		}
	}
	return nil
}
