package runtime

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cepheus-cep/cepheus/internal/failpoint"
)

// FileSink is the exactly-once [CommitSink] of one subtask into a
// directory of JSON-lines part files. A reader of DIR/*.jsonl sees every
// committed line once, whole, and nothing else, whatever moment the
// process died, provided the runtime follows the protocol of
// [CommitSink] and restores from the latest completed checkpoint.
//
// # Files
//
// With prefix P and subtask S, the sink owns three kinds of names in
// DIR, none of which another (prefix, subtask) can produce:
//
//   - .P-S.inprogress: the open transaction, created at its first line
//     (so an empty transaction leaves no file); written through a 64 KiB
//     buffer and never visible.
//   - .P-S-N.pending: the transaction of checkpoint N, pre-committed:
//     fsynced, closed, renamed from the in-progress name, the directory
//     fsynced. Never written again.
//   - P-S-N.jsonl: the committed part file of checkpoint N, renamed from
//     the pending name by Commit (or Recover), the directory fsynced.
//
// A part file is complete before it gets its .jsonl name, and the rename
// is atomic, so a reader never sees a torn line. Commit renames in
// checkpoint order, so the committed part files, ordered by checkpoint,
// hold a prefix of the output at every moment.
//
// # Recovery
//
// Recover(restored), for the state of the restored checkpoint N: it
// renames the pending files of restored.Parts whose rename had not
// happened (or finds them already renamed), fsyncs the directory, then
// deletes every other in-progress and pending file of (P, S) (those of
// later checkpoints, which did not complete, and the open transaction),
// and fsyncs again. The lines they held come after checkpoint N, and the
// restored job writes them again. A committed file of a checkpoint after
// N means that checkpoint completed and was not the one restored (or the
// directory holds another job's output): Recover fails with
// [ErrCommittedAhead] rather than duplicate its lines.
//
// A sink the restored checkpoint N has no state for (its output was left
// out of the run that took N, or its subtask was not in it) recovers
// PendingState{Subtask: S, Checkpoint: N}: the committed files of
// checkpoints up to N are an earlier run's output and stay, a committed
// file of a later checkpoint is refused as above, and every in-progress
// and pending file is deleted. That includes a pending file whose
// checkpoint completed but whose commit a crash interrupted before a run
// without the output: no run committed it, and its lines go the way of
// the lines of the runs without the output.
// Recover compares checkpoint numbers only: committed files of another
// job numbered up to N are not told apart from this job's.
//
// A part file of restored.Parts that is neither pending nor committed is
// an error (another output directory than the run before's, or one
// emptied under it), unless the caller knows the directory is the one
// the restored checkpoint's run wrote to ([FileSink.TakenOK]): its
// committed file was then taken by a consumer (moved or deleted, as
// consumers of committed part files do), and [FileSink.Consumed] names
// it.
//
// A FileSink is not safe for concurrent use. Several subtasks (and
// several prefixes, say alerts, late events and dead letters) may share a
// directory: each touches only its own names.
type FileSink struct {
	dir     string
	prefix  string
	subtask int

	recovered bool
	last      int64   // the latest checkpoint pre-committed or restored
	pending   []int64 // checkpoints with a pending part file, ascending

	// taken: Recover takes a part file of the restored checkpoint that
	// is neither pending nor committed as taken by a consumer (TakenOK);
	// consumed are the committed names it found so.
	taken    bool
	consumed []string

	f *os.File // the in-progress file; nil when no line was written since the last PreCommit
	w *bufio.Writer

	err error // sticky: an I/O error (or ErrSinkClosed) ends the sink

	// failpoint, when set (by tests only), is called at the dangerous
	// moments with their name; an error it returns acts as an I/O error
	// there, which lets a test stop the sink as a crash would.
	failpoint func(name string) error
}

var _ CommitSink = (*FileSink)(nil)

// ErrCommittedAhead is returned (wrapped) by [FileSink.Recover] when the
// directory holds a committed part file of this prefix and subtask for a
// checkpoint after the one restored.
var ErrCommittedAhead = errors.New("runtime: file sink: committed part file of a later checkpoint")

// CheckOutputDir reports whether the output directory dir exists, and
// the error LockOutputDir would give for a dir that is not a directory
// (a file, a path through a file) or cannot be looked at, without making
// anything: a run checks every output before it creates its state
// directory or another output.
func CheckOutputDir(dir string) (exists bool, err error) {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("runtime: output directory: %w", err)
	case !st.IsDir():
		return true, fmt.Errorf("runtime: output directory %s is not a directory", dir)
	}
	return true, nil
}

// LockOutputDir locks the output directory dir for a whole run, creating
// it if needed (durably, as [NewFileSink] does). The part files of every
// run are named alike (P-S-N.jsonl, .P-S.inprogress), so two runs given
// one directory would write, rename and delete each other's files: the
// output of both lost or mixed, neither failing for sure. Locked, the
// second fails at once, before its sinks touch a file. The lock is a
// flock of the directory itself (nothing is made in it); Close releases
// it, and the kernel does when the process dies. A dir that is not a
// directory, or that is not writable (a read-only file system), fails
// too, before anything is read: a sink would fail only at its first line,
// which for late events or dead letters may come hours later.
func LockOutputDir(dir string) (io.Closer, error) {
	exists, err := CheckOutputDir(dir)
	if err != nil {
		return nil, err
	}
	if !exists {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("runtime: output directory: %w", err)
		}
		if err := syncDir(filepath.Dir(filepath.Clean(dir))); err != nil {
			return nil, fmt.Errorf("runtime: output directory: %w", err)
		}
	}
	if err := checkWritable(dir); err != nil {
		return nil, fmt.Errorf("runtime: output directory %w", err)
	}
	lock, err := lockDir(dir)
	if errors.Is(err, errDirLocked) {
		return nil, fmt.Errorf("runtime: output directory %s is in use by another run (two runs must not share an output directory: their part files have the same names)", dir)
	}
	if err != nil {
		return nil, fmt.Errorf("runtime: cannot lock output directory %s: %w", dir, err)
	}
	return lock, nil
}

// NewFileSink returns the sink of subtask (0 or more) writing part files
// named after prefix into dir, which it creates if needed. prefix is made
// of ASCII letters, digits, '_', '-' and '.', and does not start with '.'.
// A directory it creates is made durable in its parent (fsync); so are the
// names it creates in dir. Call Recover before the first Write.
//
// The part files are created with mode 0600, and a directory with 0700
// (the umask may narrow them): alerts, late events and dead letters hold
// customer data (card numbers, amounts).
func NewFileSink(dir, prefix string, subtask int) (*FileSink, error) {
	if err := checkPrefix(prefix); err != nil {
		return nil, err
	}
	if subtask < 0 {
		return nil, fmt.Errorf("runtime: file sink: negative subtask %d", subtask)
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("runtime: file sink: %w", err)
		}
		// Committed files are only as durable as their directory's
		// entry in its parent.
		if err := syncDir(filepath.Dir(filepath.Clean(dir))); err != nil {
			return nil, fmt.Errorf("runtime: file sink: %w", err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("runtime: file sink: %w", err)
	}
	s := &FileSink{dir: dir, prefix: prefix, subtask: subtask}
	if failpoint.Armed() {
		// The crash tests kill the process at the sink's dangerous steps
		// ("sink.precommit.synced", "sink.commit.renamed", ...).
		s.failpoint = func(name string) error { failpoint.Hit("sink." + name); return nil }
	}
	return s, nil
}

func checkPrefix(p string) error {
	if p == "" || p[0] == '.' {
		return fmt.Errorf("runtime: file sink: prefix %q is empty or starts with '.'", p)
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return fmt.Errorf("runtime: file sink: prefix %q: character %q not allowed", p, c)
		}
	}
	return nil
}

// Dir returns the directory of the part files.
func (s *FileSink) Dir() string { return s.dir }

// CommittedName returns the name (in [FileSink.Dir]) of the committed part
// file of checkpoint.
func (s *FileSink) CommittedName(checkpoint int64) string {
	return s.prefix + "-" + strconv.Itoa(s.subtask) + "-" + strconv.FormatInt(checkpoint, 10) + ".jsonl"
}

func (s *FileSink) inProgressName() string {
	return "." + s.prefix + "-" + strconv.Itoa(s.subtask) + ".inprogress"
}

func (s *FileSink) pendingName(checkpoint int64) string {
	return "." + s.prefix + "-" + strconv.Itoa(s.subtask) + "-" + strconv.FormatInt(checkpoint, 10) + ".pending"
}

func (s *FileSink) path(name string) string { return filepath.Join(s.dir, name) }

// Name kinds of parseName.
const (
	partNone = iota
	partInProgress
	partPending
	partCommitted
)

// parseName tells whether name is one of this sink's files, of which
// kind, and for which checkpoint. A checkpoint must be written in
// canonical decimal (as the sink writes it), so one name never parses for
// two sinks.
func (s *FileSink) parseName(name string) (kind int, checkpoint int64) {
	if name == s.inProgressName() {
		return partInProgress, 0
	}
	base := s.prefix + "-" + strconv.Itoa(s.subtask) + "-"
	var mid string
	switch {
	case strings.HasPrefix(name, "."+base) && strings.HasSuffix(name, ".pending"):
		kind, mid = partPending, name[1+len(base):len(name)-len(".pending")]
	case strings.HasPrefix(name, base) && strings.HasSuffix(name, ".jsonl"):
		kind, mid = partCommitted, name[len(base):len(name)-len(".jsonl")]
	default:
		return partNone, 0
	}
	c, err := strconv.ParseInt(mid, 10, 64)
	if err != nil || c <= 0 || strconv.FormatInt(c, 10) != mid {
		return partNone, 0
	}
	return kind, c
}

// fail records err as the sticky error and returns it.
func (s *FileSink) fail(err error) error {
	s.err = fmt.Errorf("runtime: file sink: %w", err)
	return s.err
}

// fp runs the failpoint name, if any.
func (s *FileSink) fp(name string) error {
	if s.failpoint == nil {
		return nil
	}
	return s.failpoint(name)
}

// Write implements [CommitSink.Write]: line goes to the in-progress part
// file, created by the first line after a PreCommit.
func (s *FileSink) Write(line []byte) error {
	if s.err != nil {
		return s.err
	}
	if !s.recovered {
		return errors.New("runtime: file sink: Write before Recover")
	}
	if len(line) == 0 || line[len(line)-1] != '\n' {
		return ErrNotLine
	}
	if s.f == nil {
		f, err := os.OpenFile(s.path(s.inProgressName()), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return s.fail(err)
		}
		s.f = f
		if s.w == nil {
			s.w = bufio.NewWriterSize(f, 64<<10)
		} else {
			s.w.Reset(f)
		}
	}
	if _, err := s.w.Write(line); err != nil {
		return s.fail(err)
	}
	return nil
}

// PreCommit implements [CommitSink.PreCommit]: the in-progress part file,
// if any line was written since the previous PreCommit, is flushed,
// fsynced, closed and renamed to the pending name of checkpoint, and the
// directory fsynced. It returns the state to store in checkpoint: every
// pending part file not yet committed.
func (s *FileSink) PreCommit(checkpoint int64) (PendingState, error) {
	if s.err != nil {
		return PendingState{}, s.err
	}
	if !s.recovered {
		return PendingState{}, errors.New("runtime: file sink: PreCommit before Recover")
	}
	if checkpoint <= s.last {
		return PendingState{}, fmt.Errorf("runtime: file sink: checkpoint %d after checkpoint %d", checkpoint, s.last)
	}
	if s.f != nil {
		if err := s.w.Flush(); err != nil {
			return PendingState{}, s.fail(err)
		}
		if err := s.f.Sync(); err != nil {
			return PendingState{}, s.fail(err)
		}
		err := s.f.Close()
		s.f = nil
		if err != nil {
			return PendingState{}, s.fail(err)
		}
		if err := s.fp("precommit.synced"); err != nil {
			return PendingState{}, s.fail(err)
		}
		if err := os.Rename(s.path(s.inProgressName()), s.path(s.pendingName(checkpoint))); err != nil {
			return PendingState{}, s.fail(err)
		}
		if err := s.fp("precommit.renamed"); err != nil {
			return PendingState{}, s.fail(err)
		}
		// The fsync of the directory makes both the file's creation and
		// its rename durable: a checkpoint that completes after this
		// finds the pending file after any crash.
		if err := syncDir(s.dir); err != nil {
			return PendingState{}, s.fail(err)
		}
		s.pending = append(s.pending, checkpoint)
	}
	s.last = checkpoint
	return s.state(), nil
}

func (s *FileSink) state() PendingState {
	st := PendingState{Subtask: s.subtask, Checkpoint: s.last}
	if len(s.pending) > 0 {
		st.Parts = append([]int64(nil), s.pending...)
	}
	return st
}

// Commit implements [CommitSink.Commit]: the pending part files of the
// checkpoints up to checkpoint are renamed to their .jsonl names, in
// checkpoint order, then the directory is fsynced. A part file found
// already renamed counts as committed.
func (s *FileSink) Commit(checkpoint int64) error {
	if s.err != nil {
		return s.err
	}
	n := 0
	for n < len(s.pending) && s.pending[n] <= checkpoint {
		if err := s.commitPart(s.pending[n]); err != nil {
			return s.fail(err)
		}
		n++
		if err := s.fp("commit.renamed"); err != nil {
			return s.fail(err)
		}
	}
	if n == 0 {
		return nil
	}
	if err := syncDir(s.dir); err != nil {
		return s.fail(err)
	}
	s.pending = append(s.pending[:0], s.pending[n:]...)
	return nil
}

// commitPart renames the pending part file of checkpoint to its committed
// name; a part file already renamed is fine.
func (s *FileSink) commitPart(checkpoint int64) error {
	err := os.Rename(s.path(s.pendingName(checkpoint)), s.path(s.CommittedName(checkpoint)))
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Lstat(s.path(s.CommittedName(checkpoint))); serr == nil {
			return nil
		}
		return fmt.Errorf("part file of checkpoint %d is neither pending nor committed: %w", checkpoint, err)
	}
	return err
}

// Recover implements [CommitSink.Recover] (see the type's documentation,
// "Recovery"). It fails for the state of another subtask, when a part file
// of restored.Parts is neither pending nor committed, when one is both
// (the committed one being another job's), and with [ErrCommittedAhead].
func (s *FileSink) Recover(restored PendingState) error {
	if s.err != nil {
		return s.err
	}
	if s.recovered {
		return errors.New("runtime: file sink: Recover called twice")
	}
	if err := restored.validate(); err != nil {
		return err
	}
	if !restored.isZero() && restored.Subtask != s.subtask {
		return fmt.Errorf("runtime: file sink: subtask %d cannot recover the state of subtask %d", s.subtask, restored.Subtask)
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return s.fail(err)
	}
	var stale []string // in-progress and pending files to delete
	pending := map[int64]bool{}
	committed := map[int64]bool{}
	for _, e := range entries {
		kind, c := s.parseName(e.Name())
		switch kind {
		case partInProgress:
			stale = append(stale, e.Name())
		case partPending:
			pending[c] = true
		case partCommitted:
			if c > restored.Checkpoint {
				return fmt.Errorf("%w: %s in %s, %s: %s", ErrCommittedAhead, e.Name(), s.dir, restoredName(restored), aheadHint(restored))
			}
			committed[c] = true
		}
	}
	renamed := false
	for _, c := range restored.Parts {
		switch {
		case pending[c] && committed[c]:
			return fmt.Errorf("runtime: file sink: %s and %s both exist in %s", s.pendingName(c), s.CommittedName(c), s.dir)
		case pending[c]:
			if err := os.Rename(s.path(s.pendingName(c)), s.path(s.CommittedName(c))); err != nil {
				return s.fail(err)
			}
			renamed = true
			delete(pending, c)
			if err := s.fp("recover.renamed"); err != nil {
				return s.fail(err)
			}
		case !committed[c] && s.taken:
			// Committed (a consumer takes only committed names), then
			// taken away: nothing to do.
			s.consumed = append(s.consumed, s.CommittedName(c))
		case !committed[c]:
			// Most often another output directory than the run before's:
			// say which one resumes. Or the directory was removed (or
			// emptied) under the run: its lines are gone, and only a run
			// from the start writes them again.
			return fmt.Errorf("runtime: file sink: part file %s of restored checkpoint %d is missing from %s (another output directory than the one the run that took the checkpoint wrote to? resume with that one; if this directory was removed or emptied, the lines of its part files are lost: a new state directory and an empty output directory write them all again)",
				s.pendingName(c), restored.Checkpoint, s.dir)
		}
	}
	// Renames first and durable, then deletions: a crash in between
	// leaves only files the next Recover deletes again.
	if renamed {
		if err := syncDir(s.dir); err != nil {
			return s.fail(err)
		}
	}
	for c := range pending {
		stale = append(stale, s.pendingName(c))
	}
	for _, name := range stale {
		if err := os.Remove(s.path(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return s.fail(err)
		}
		if err := s.fp("recover.deleted"); err != nil {
			return s.fail(err)
		}
	}
	if len(stale) > 0 {
		if err := syncDir(s.dir); err != nil {
			return s.fail(err)
		}
	}
	s.recovered = true
	s.last = restored.Checkpoint
	s.pending = nil
	return nil
}

// OutputIDFile is the hidden file that names an output directory
// ([OutputDirID]): not output, and never written again once made.
const OutputIDFile = ".cepheus-output-id"

// OutputDirID returns the id of the output directory dir, a random hex
// string that its first use writes into the hidden file
// .cepheus-output-id there (durably: written, synced, renamed into place,
// the directory synced). A restore compares it with the id its checkpoint
// recorded: the same path may be another directory (removed and made
// again, another volume mounted, a link moved), which one with the
// checkpoint's id is not. The caller holds the directory's lock
// ([LockOutputDir]).
func OutputDirID(dir string) (string, error) {
	path := filepath.Join(dir, OutputIDFile)
	b, err := os.ReadFile(path)
	if err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("runtime: output directory id: %w", err)
	}
	var r [16]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", fmt.Errorf("runtime: output directory id: %w", err)
	}
	id := hex.EncodeToString(r[:])
	tmp := path + ".tmp"
	if err := writeSynced(tmp, []byte(id+"\n")); err != nil {
		return "", fmt.Errorf("runtime: output directory id: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("runtime: output directory id: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return "", fmt.Errorf("runtime: output directory id: %w", err)
	}
	return id, nil
}

// writeSynced writes b to a new file at path (mode 0600), synced.
func writeSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// TakenOK tells Recover that the sink's directory is the one the restored
// checkpoint's run wrote to: a part file of the checkpoint found neither
// pending nor committed was committed and taken by a consumer, not lost
// (see the type's documentation, "Recovery"). Call it before Recover.
func (s *FileSink) TakenOK() { s.taken = true }

// Consumed returns the committed names of the restored checkpoint's part
// files that Recover found taken by a consumer (TakenOK), in checkpoint
// order.
func (s *FileSink) Consumed() []string { return s.consumed }

// restoredName names the checkpoint a sink recovers, for its errors:
// "restored checkpoint N", or "on a fresh start (no checkpoint
// restored)" for the zero state.
func restoredName(restored PendingState) string {
	if restored.isZero() {
		return "on a fresh start (no checkpoint restored)"
	}
	return "restored checkpoint " + strconv.FormatInt(restored.Checkpoint, 10)
}

// aheadHint says how output ahead of the restored checkpoint comes about,
// and, for the common case, what to do.
func aheadHint(restored PendingState) string {
	if restored.isZero() {
		return "the output of an earlier run; give a new state directory a new or empty output directory"
	}
	return "the state directory is older than the output (a newer checkpoint deleted, or the state put back from a copy)"
}

// Close implements [CommitSink.Close]: the in-progress part file, if any,
// is closed and deleted (its lines belong to no checkpoint yet); pending
// part files stay. Later calls of any method return [ErrSinkClosed].
func (s *FileSink) Close() error {
	var err error
	if s.f != nil {
		err = s.f.Close()
		s.f = nil
		if rerr := os.Remove(s.path(s.inProgressName())); err == nil && rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = rerr
		}
		if err != nil {
			err = fmt.Errorf("runtime: file sink: %w", err)
		}
	}
	s.err = ErrSinkClosed
	return err
}

// syncDir fsyncs the directory dir, making the creations, renames and
// removals of names in it durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// FileSinkSubtasks returns how many subtask indexes the part files of
// prefix in dir name: one more than the largest subtask with a file of
// any kind (in progress, pending or committed), 0 when there is none or
// dir does not exist. A job restarting with fewer subtasks than it had
// recovers the sinks of the others too, so that their pending files are
// committed or deleted.
func FileSinkSubtasks(dir, prefix string) (int, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("runtime: file sink: %w", err)
	}
	n := 0
	for _, e := range entries {
		name := strings.TrimPrefix(e.Name(), ".")
		rest, ok := strings.CutPrefix(name, prefix+"-")
		if !ok {
			continue
		}
		digits := rest
		if i := strings.IndexAny(rest, "-."); i >= 0 {
			digits = rest[:i]
		}
		s, err := strconv.Atoi(digits)
		if err != nil || s < 0 || strconv.Itoa(s) != digits {
			continue
		}
		probe := &FileSink{dir: dir, prefix: prefix, subtask: s}
		if kind, _ := probe.parseName(e.Name()); kind != partNone && s+1 > n {
			n = s + 1
		}
	}
	return n, nil
}
