package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// modelLine is line i of the deterministic output the sink tests write: a
// JSON object of a length that varies with i.
func modelLine(i int) []byte {
	return fmt.Appendf(nil, "{\"i\":%d,\"pad\":%q}\n", i, strings.Repeat("x", (i*7919)%97))
}

// modelLines returns lines [from, to) of the model, concatenated.
func modelLines(from, to int) []byte {
	var b []byte
	for i := from; i < to; i++ {
		b = append(b, modelLine(i)...)
	}
	return b
}

// sinkSeed is the base seed of the randomised sink tests: CEPHEUS_SEED, or 1.
func sinkSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(1)
	if s := os.Getenv("CEPHEUS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CEPHEUS_SEED=%q: %v", s, err)
		}
		seed = v
	}
	return seed
}

// committed reads what a reader of DIR/*.jsonl sees of s's output: its
// committed part files in checkpoint order, concatenated. Every file must
// be non-empty and hold whole, valid JSON lines.
func committed(t *testing.T, s *FileSink) []byte {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(s.Dir(), "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var cks []int64
	for _, n := range names {
		if kind, c := s.parseName(filepath.Base(n)); kind == partCommitted {
			cks = append(cks, c)
		}
	}
	slices.Sort(cks)
	var out []byte
	for _, c := range cks {
		b, err := os.ReadFile(filepath.Join(s.Dir(), s.CommittedName(c)))
		if err != nil {
			t.Fatal(err)
		}
		checkWholeLines(t, s.CommittedName(c), b)
		out = append(out, b...)
	}
	return out
}

func checkWholeLines(t *testing.T, name string, b []byte) {
	t.Helper()
	if len(b) == 0 || b[len(b)-1] != '\n' {
		t.Fatalf("%s: empty, or a torn last line: %q", name, tail(b))
	}
	for line := range bytes.Lines(b) {
		if !json.Valid(line) {
			t.Fatalf("%s: not a JSON line: %q", name, line)
		}
	}
}

func tail(b []byte) []byte {
	if len(b) > 60 {
		return b[len(b)-60:]
	}
	return b
}

// ownFiles returns the names of s's files in its directory, by kind.
func ownFiles(t *testing.T, s *FileSink) map[int][]string {
	t.Helper()
	entries, err := os.ReadDir(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	m := map[int][]string{}
	for _, e := range entries {
		if kind, _ := s.parseName(e.Name()); kind != partNone {
			m[kind] = append(m[kind], e.Name())
		}
	}
	return m
}

// onlyCommitted fails unless s has no in-progress or pending file left.
func onlyCommitted(t *testing.T, s *FileSink) {
	t.Helper()
	own := ownFiles(t, s)
	if len(own[partInProgress])+len(own[partPending]) > 0 {
		t.Fatalf("files left besides committed ones: %v %v", own[partInProgress], own[partPending])
	}
}

// abandon drops s as a killed process would: the in-progress file is
// closed without flushing what the buffer holds.
func abandon(s *FileSink) {
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
}

func mustWrite(t *testing.T, s CommitSink, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := s.Write(modelLine(i)); err != nil {
			t.Fatal(err)
		}
	}
}

func newRecovered(t *testing.T, dir, prefix string, subtask int, st PendingState) *FileSink {
	t.Helper()
	s, err := NewFileSink(dir, prefix, subtask)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Recover(st); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestFileSinkCommitProtocol(t *testing.T) {
	dir := t.TempDir()
	s := newRecovered(t, dir, "alerts", 0, PendingState{})
	mustWrite(t, s, 0, 3)
	if got := committed(t, s); len(got) != 0 {
		t.Fatalf("visible before PreCommit: %q", got)
	}
	st, err := s.PreCommit(1)
	if err != nil {
		t.Fatal(err)
	}
	if want := (PendingState{Subtask: 0, Checkpoint: 1, Parts: []int64{1}}); !slices.Equal(st.Parts, want.Parts) || st.Checkpoint != 1 {
		t.Fatalf("PreCommit(1) = %+v, want %+v", st, want)
	}
	if got := committed(t, s); len(got) != 0 {
		t.Fatalf("visible before Commit: %q", got)
	}
	if own := ownFiles(t, s); !slices.Equal(own[partPending], []string{".alerts-0-1.pending"}) {
		t.Fatalf("files after PreCommit: %v", own)
	}
	if err := s.Commit(1); err != nil {
		t.Fatal(err)
	}
	if got, want := committed(t, s), modelLines(0, 3); !bytes.Equal(got, want) {
		t.Fatalf("after Commit(1): %q, want %q", got, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "alerts-0-1.jsonl")); err != nil {
		t.Fatal(err)
	}

	// Commit is idempotent, and a no-op for a checkpoint with nothing pending.
	for _, c := range []int64{1, 0, 1} {
		if err := s.Commit(c); err != nil {
			t.Fatalf("Commit(%d) again: %v", c, err)
		}
	}

	// An empty transaction leaves no file.
	st, err = s.PreCommit(2)
	if err != nil || len(st.Parts) != 0 {
		t.Fatalf("empty PreCommit(2) = %+v, %v", st, err)
	}
	if own := ownFiles(t, s); len(own[partPending])+len(own[partInProgress]) > 0 {
		t.Fatalf("an empty transaction left files: %v", own)
	}

	// Two checkpoints pre-committed before either commits: the second's
	// state holds both, and Commit(n) commits exactly those up to n.
	mustWrite(t, s, 3, 5)
	if _, err := s.PreCommit(3); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, s, 5, 9)
	st, err = s.PreCommit(5)
	if err != nil || !slices.Equal(st.Parts, []int64{3, 5}) || st.Checkpoint != 5 {
		t.Fatalf("PreCommit(5) = %+v, %v", st, err)
	}
	if err := s.Commit(4); err != nil {
		t.Fatal(err)
	}
	if got, want := committed(t, s), modelLines(0, 5); !bytes.Equal(got, want) {
		t.Fatalf("after Commit(4): %q, want %q", got, want)
	}
	if err := s.Commit(9); err != nil {
		t.Fatal(err)
	}
	if got, want := committed(t, s), modelLines(0, 9); !bytes.Equal(got, want) {
		t.Fatalf("after Commit(9): %q, want %q", got, want)
	}

	// Argument errors do not end the sink.
	if _, err := s.PreCommit(5); err == nil {
		t.Fatal("PreCommit(5) twice: no error")
	}
	if err := s.Write([]byte(`{"torn":`)); !errors.Is(err, ErrNotLine) {
		t.Fatalf("Write without newline: %v, want ErrNotLine", err)
	}
	mustWrite(t, s, 9, 10)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	onlyCommitted(t, s)
	if err := s.Write(modelLine(10)); !errors.Is(err, ErrSinkClosed) {
		t.Fatalf("Write after Close: %v", err)
	}
}

// TestFileSinkCommitIdempotent: a part file already renamed (by an
// earlier Commit or Recover that died before its bookkeeping) counts as
// committed, in Commit and in Recover alike.
func TestFileSinkCommitIdempotent(t *testing.T) {
	dir := t.TempDir()
	s := newRecovered(t, dir, "alerts", 2, PendingState{})
	mustWrite(t, s, 0, 4)
	if _, err := s.PreCommit(1); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, s, 4, 6)
	st, err := s.PreCommit(2)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, s.pendingName(1)), filepath.Join(dir, s.CommittedName(1))); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(2); err != nil {
		t.Fatal(err)
	}
	if got, want := committed(t, s), modelLines(0, 6); !bytes.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	abandon(s)

	// Recovering the same state again and again changes nothing.
	for range 2 {
		r := newRecovered(t, dir, "alerts", 2, st)
		if got, want := committed(t, r), modelLines(0, 6); !bytes.Equal(got, want) {
			t.Fatalf("after Recover: %q, want %q", got, want)
		}
		onlyCommitted(t, r)
	}
}

func TestFileSinkRecoverErrors(t *testing.T) {
	dir := t.TempDir()
	s := newRecovered(t, dir, "late", 0, PendingState{})
	mustWrite(t, s, 0, 2)
	st1, err := s.PreCommit(1)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(1); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, s, 2, 3)
	st2, err := s.PreCommit(2)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(2); err != nil {
		t.Fatal(err)
	}
	s.Close()

	r, _ := NewFileSink(dir, "late", 0)
	if err := r.Recover(PendingState{}); !errors.Is(err, ErrCommittedAhead) {
		t.Fatalf("fresh start over committed files: %v, want ErrCommittedAhead", err)
	}
	r, _ = NewFileSink(dir, "late", 0)
	if err := r.Recover(st1); !errors.Is(err, ErrCommittedAhead) {
		t.Fatalf("restore of checkpoint 1 with 2 committed: %v, want ErrCommittedAhead", err)
	}
	r, _ = NewFileSink(dir, "late", 1)
	if err := r.Recover(st2); err == nil {
		t.Fatal("subtask 1 recovered the state of subtask 0")
	}
	r, _ = NewFileSink(dir, "late", 0)
	missing := PendingState{Checkpoint: 3, Parts: []int64{3}}
	want := "runtime: file sink: part file .late-0-3.pending of restored checkpoint 3 is missing from " + dir +
		" (another output directory than the one the run that took the checkpoint wrote to? resume with that one;" +
		" if this directory was removed or emptied, the lines of its part files are lost: a new state directory and an empty output directory write them all again)"
	if err := r.Recover(missing); err == nil || err.Error() != want {
		t.Fatalf("Recover of a state whose part file is gone: %v, want %s", err, want)
	}
	// In the directory the checkpoint's run wrote to, the part file was
	// committed and taken by a consumer: named, not refused.
	r, _ = NewFileSink(dir, "late", 0)
	r.TakenOK()
	if err := r.Recover(missing); err != nil {
		t.Fatalf("Recover of a state whose part file a consumer took: %v", err)
	}
	if got := r.Consumed(); !slices.Equal(got, []string{"late-0-3.jsonl"}) {
		t.Fatalf("consumed %q, want late-0-3.jsonl", got)
	}
	r.Close()
	r, _ = NewFileSink(dir, "late", 0)
	if err := r.Write(modelLine(0)); err == nil {
		t.Fatal("Write before Recover: no error")
	}
	if err := r.Recover(st2); err != nil {
		t.Fatal(err)
	}
	if err := r.Recover(st2); err == nil {
		t.Fatal("Recover twice: no error")
	}
	for _, p := range []string{"", ".hidden", "a/b", "a b"} {
		if _, err := NewFileSink(dir, p, 0); err == nil {
			t.Errorf("NewFileSink(prefix %q): no error", p)
		}
	}
	if _, err := NewFileSink(dir, "x", -1); err == nil {
		t.Error("NewFileSink(subtask -1): no error")
	}
}

// TestFileSinkRecoverLeftOut: an output left out of the runs that took
// checkpoints 4 to 7 recovers from checkpoint 7 as checkpoint 7 without
// parts. Its committed files of checkpoints 1 and 2 stay, the pending
// file and the open transaction an earlier run left go, and it goes on at
// checkpoint 8. A committed file ahead of the checkpoint is refused, and
// the error names the checkpoint restored, or says there was none.
func TestFileSinkRecoverLeftOut(t *testing.T) {
	dir := t.TempDir()
	s := newRecovered(t, dir, "late", 0, PendingState{})
	mustWrite(t, s, 0, 2)
	if _, err := s.PreCommit(1); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(1); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, s, 2, 4)
	if _, err := s.PreCommit(2); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(2); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, s, 4, 5)
	if _, err := s.PreCommit(3); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, s, 5, 6)
	abandon(s) // killed with checkpoint 3 pending and a transaction open

	leftOut := PendingState{Subtask: 0, Checkpoint: 7}
	r := newRecovered(t, dir, "late", 0, leftOut)
	if got, want := committed(t, r), modelLines(0, 4); !bytes.Equal(got, want) {
		t.Fatalf("after Recover of checkpoint 7: %q, want %q", got, want)
	}
	onlyCommitted(t, r)
	mustWrite(t, r, 10, 12)
	if _, err := r.PreCommit(8); err != nil {
		t.Fatal(err)
	}
	if err := r.Commit(8); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if got, want := committed(t, r), append(modelLines(0, 4), modelLines(10, 12)...); !bytes.Equal(got, want) {
		t.Fatalf("after checkpoint 8: %q, want %q", got, want)
	}

	// Checkpoint 8 is committed: a restore of checkpoint 7 (a state
	// directory put back from an older copy) is refused, and so is a
	// fresh start; each error says which it was.
	for _, c := range []struct {
		st   PendingState
		want string
	}{
		{leftOut, "late-0-8.jsonl in " + dir + ", restored checkpoint 7: the state directory is older than the output (a newer checkpoint deleted, or the state put back from a copy)"},
		{PendingState{}, "late-0-1.jsonl in " + dir + ", on a fresh start (no checkpoint restored): the output of an earlier run; give a new state directory a new or empty output directory"},
	} {
		r, _ := NewFileSink(dir, "late", 0)
		err := r.Recover(c.st)
		if !errors.Is(err, ErrCommittedAhead) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Recover(%+v): %v; want ErrCommittedAhead saying %q", c.st, err, c.want)
		}
	}
}

func TestPendingStateEncoding(t *testing.T) {
	for _, p := range []PendingState{
		{},
		{Subtask: 3, Checkpoint: 7},
		{Subtask: 0, Checkpoint: 9, Parts: []int64{1, 4, 9}},
		{Subtask: 1 << 20, Checkpoint: 1 << 40, Parts: []int64{1<<40 - 1, 1 << 40}},
	} {
		b, err := p.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var q PendingState
		if err := q.UnmarshalBinary(b); err != nil {
			t.Fatalf("%+v: %v", p, err)
		}
		if q.Subtask != p.Subtask || q.Checkpoint != p.Checkpoint || !slices.Equal(q.Parts, p.Parts) {
			t.Fatalf("round trip of %+v gave %+v", p, q)
		}
		for n := range len(b) {
			if err := q.UnmarshalBinary(b[:n]); err == nil {
				t.Fatalf("%+v: a prefix of %d bytes decoded", p, n)
			}
		}
		if err := q.UnmarshalBinary(append(b, 0)); err == nil {
			t.Fatalf("%+v: trailing byte decoded", p)
		}
	}
	for _, p := range []PendingState{
		{Checkpoint: 2, Parts: []int64{3}},
		{Checkpoint: 5, Parts: []int64{4, 2}},
		{Checkpoint: 5, Parts: []int64{0}},
		{Subtask: -1},
	} {
		if _, err := p.MarshalBinary(); err == nil {
			t.Errorf("MarshalBinary(%+v): no error", p)
		}
	}
}

var errCrash = errors.New("simulated crash")

// crashModel is one run of TestFileSinkCrashRecovery: a job writing the
// model's lines [0, total) into a sink, a barrier every k lines (and at
// the end), dying at random moments and restarting from its latest
// completed checkpoint, until it completes.
type crashModel struct {
	t     *testing.T
	seed  uint64
	rng   *rand.Rand
	dir   string
	total int
	k     int
	left  int            // crashes still to happen
	hits  map[string]int // crash points reached, over all runs
	trace []string

	stored    PendingState // the state in the latest completed checkpoint
	storedPos int          // the lines the latest completed checkpoint covers
}

// crash reports whether the job dies at point, one time in oneIn.
func (m *crashModel) crash(point string, oneIn int) bool {
	if m.left == 0 || m.rng.IntN(oneIn) != 0 {
		return false
	}
	m.left--
	m.hits[point]++
	m.trace = append(m.trace, point)
	return true
}

// failpoint is the sink's failpoint outside Commit: a crash at the named
// point, one time in 6.
func (m *crashModel) failpoint(name string) error {
	if m.crash(name, 6) {
		return errCrash
	}
	return nil
}

func (m *crashModel) fatalf(format string, args ...any) {
	m.t.Helper()
	m.t.Fatalf("seed %d (CEPHEUS_SEED=%d to rerun; total %d, k %d, crashes %v): %s",
		m.seed, m.seed, m.total, m.k, m.trace, fmt.Sprintf(format, args...))
}

// run runs the job to completion and checks the output.
func (m *crashModel) run() {
	m.t.Helper()
	for attempt := 0; ; attempt++ {
		if attempt > 50 {
			m.fatalf("no completion after %d attempts", attempt)
		}
		s, err := NewFileSink(m.dir, "alerts", 0)
		if err != nil {
			m.fatalf("%v", err)
		}
		// Whatever the moment of the crash: what a reader sees is a
		// prefix of the output, and no more than the completed
		// checkpoint covers.
		got := committed(m.t, s)
		if want := modelLines(0, m.storedPos); len(got) > len(want) || !bytes.Equal(got, want[:len(got)]) {
			m.fatalf("before Recover: committed output is not a prefix of the %d lines of the completed checkpoint:\n%s", m.storedPos, got)
		}
		s.failpoint = m.failpoint
		done, err := m.attempt(s)
		if err != nil {
			if !errors.Is(err, errCrash) {
				m.fatalf("%v", err)
			}
			abandon(s)
			continue
		}
		if done {
			if err := s.Close(); err != nil {
				m.fatalf("%v", err)
			}
			if got, want := committed(m.t, s), modelLines(0, m.total); !bytes.Equal(got, want) {
				m.fatalf("final output differs from the uninterrupted run's:\n got %q\nwant %q", got, want)
			}
			onlyCommitted(m.t, s)
			return
		}
		abandon(s)
	}
}

// attempt is one life of the job: Recover from the stored checkpoint,
// replay from there. It returns done when the job completed, false (and
// no error) when it died between two calls of the sink, errCrash when a
// failpoint of the sink killed it.
func (m *crashModel) attempt(s *FileSink) (done bool, err error) {
	if err := s.Recover(m.stored); err != nil {
		return false, err
	}
	if got, want := committed(m.t, s), modelLines(0, m.storedPos); !bytes.Equal(got, want) {
		m.fatalf("after Recover of checkpoint %d: committed\n%q\nwant the %d lines it covers", m.stored.Checkpoint, got, m.storedPos)
	}
	onlyCommitted(m.t, s)
	ck := m.stored.Checkpoint
	for i := m.storedPos; i < m.total; {
		if m.crash("write", 3*m.k) {
			return false, nil
		}
		if err := s.Write(modelLine(i)); err != nil {
			return false, err
		}
		i++
		if i%m.k != 0 && i != m.total {
			continue
		}
		if m.crash("before-precommit", 10) {
			return false, nil
		}
		ck++
		st, err := s.PreCommit(ck)
		if err != nil {
			return false, err
		}
		if m.crash("after-precommit", 10) {
			return false, nil
		}
		// A checkpoint that does not complete (declined elsewhere): its
		// part file belongs to the next one that does.
		if i != m.total && m.rng.IntN(5) == 0 {
			continue
		}
		m.stored, m.storedPos = st, i
		if m.crash("after-store", 8) {
			return false, nil
		}
		// Commits may lag (Flink's notifyCheckpointComplete is
		// asynchronous); a later Commit commits the earlier parts too.
		if i != m.total && m.rng.IntN(3) == 0 {
			continue
		}
		parts := 0
		for _, c := range s.pending {
			if c <= ck {
				parts++
			}
		}
		calls := 0
		s.failpoint = func(name string) error {
			calls++
			point, oneIn := "commit-before-dirsync", 4
			if calls < parts {
				point, oneIn = "mid-commit", 2 // rarer to reach: make it likelier
			}
			if m.crash(point, oneIn) {
				return errCrash
			}
			return nil
		}
		if err := s.Commit(ck); err != nil {
			return false, err
		}
		s.failpoint = m.failpoint
		if m.crash("after-commit", 8) {
			return false, nil
		}
	}
	return true, nil
}

// TestFileSinkCrashRecovery: a job that dies at random moments (in the
// middle of a transaction, before and after PreCommit, between PreCommit
// and the checkpoint's completion, in the middle of a Commit of several
// part files, after Commit, inside PreCommit and Recover) and restarts
// from its latest completed checkpoint, replaying the input after it,
// leaves exactly the output of an uninterrupted run, each line once; and
// at every crash, what a reader sees is a prefix of it.
func TestFileSinkCrashRecovery(t *testing.T) {
	base := sinkSeed(t)
	hits := map[string]int{}
	for r := range uint64(200) {
		seed := base + r
		rng := rand.New(rand.NewPCG(seed, 11))
		m := &crashModel{
			t: t, seed: seed, rng: rng, dir: t.TempDir(),
			total: 1 + rng.IntN(150), k: 1 + rng.IntN(12), left: rng.IntN(5), hits: hits,
		}
		m.run()
	}
	for _, p := range []string{
		"write", "before-precommit", "precommit.synced", "precommit.renamed", "after-precommit",
		"after-store", "mid-commit", "commit-before-dirsync", "after-commit", "recover.renamed", "recover.deleted",
	} {
		if hits[p] == 0 {
			t.Errorf("no run crashed at %s (seeds from %d): %v", p, base, hits)
		}
	}
	t.Logf("crash points: %v", hits)
}

// TestFileSinkSubtasks: sinks of several subtasks and prefixes in one
// directory, whose names look alike ("alerts" of subtask 1 and "alerts-1"
// of subtask 0), never touch each other's files, crashes and recoveries
// included.
func TestFileSinkSubtasks(t *testing.T) {
	dir := t.TempDir()
	type sinkID struct {
		prefix string
		sub    int
	}
	ids := []sinkID{{"alerts", 0}, {"alerts", 1}, {"alerts-1", 0}, {"alerts-1", 1}, {"late", 1}}
	sinks := make([]*FileSink, len(ids))
	for i, id := range ids {
		sinks[i] = newRecovered(t, dir, id.prefix, id.sub, PendingState{})
	}
	// Each sink j writes lines j*1000+[0, n): checkpoint 1 committed,
	// checkpoint 2 pre-committed, an open transaction.
	states := make([]PendingState, len(ids))
	for j, s := range sinks {
		mustWrite(t, s, j*1000, j*1000+3)
		if _, err := s.PreCommit(1); err != nil {
			t.Fatal(err)
		}
		if err := s.Commit(1); err != nil {
			t.Fatal(err)
		}
		mustWrite(t, s, j*1000+3, j*1000+5)
		st, err := s.PreCommit(2)
		if err != nil {
			t.Fatal(err)
		}
		states[j] = st
		mustWrite(t, s, j*1000+5, j*1000+6)
		if err := s.w.Flush(); err != nil { // the open transaction reaches its file
			t.Fatal(err)
		}
	}
	// Sink 1 dies and restores checkpoint 1 (2 did not complete); sink 3
	// restores checkpoint 2; the others carry on.
	abandon(sinks[1])
	sinks[1] = newRecovered(t, dir, "alerts", 1, PendingState{Subtask: 1, Checkpoint: 1})
	abandon(sinks[3])
	sinks[3] = newRecovered(t, dir, "alerts-1", 1, states[3])

	for j, s := range sinks {
		own := ownFiles(t, s)
		wantCommitted, wantPending, wantInProgress := 2, 0, 1
		switch j {
		case 1:
			wantCommitted, wantInProgress = 1, 0
		case 3:
			wantInProgress = 0
		default:
			wantCommitted, wantPending = 1, 1
		}
		if len(own[partCommitted]) != wantCommitted || len(own[partPending]) != wantPending || len(own[partInProgress]) != wantInProgress {
			t.Errorf("sink %v: files %v", ids[j], own)
		}
		want := modelLines(j*1000, j*1000+3)
		if j == 3 {
			want = modelLines(j*1000, j*1000+5)
		}
		if got := committed(t, s); !bytes.Equal(got, want) {
			t.Errorf("sink %v: committed %q, want %q", ids[j], got, want)
		}
	}
	for j, s := range sinks {
		if j != 1 && j != 3 {
			if err := s.Commit(2); err != nil {
				t.Fatal(err)
			}
			if got, want := committed(t, s), modelLines(j*1000, j*1000+5); !bytes.Equal(got, want) {
				t.Errorf("sink %v after Commit(2): %q, want %q", ids[j], got, want)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		onlyCommitted(t, s)
	}
}

// TestFileSinkReaderSeesWholeLines: a reader globbing DIR/*.jsonl while a
// sink writes and commits never sees a torn line, a partial part file or
// a line of an uncommitted checkpoint.
func TestFileSinkReaderSeesWholeLines(t *testing.T) {
	dir := t.TempDir()
	const k, checkpoints = 200, 60
	s := newRecovered(t, dir, "alerts", 0, PendingState{})
	done := make(chan struct{})
	var wg sync.WaitGroup
	var reads int
	var readErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			names, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
			if err != nil {
				readErr = err
				return
			}
			for _, n := range names {
				kind, c := s.parseName(filepath.Base(n))
				if kind != partCommitted {
					readErr = fmt.Errorf("%s: not a committed part file", n)
					return
				}
				b, err := os.ReadFile(n)
				if err != nil {
					readErr = err
					return
				}
				// Checkpoint c holds lines [(c-1)k, ck), whole.
				if want := modelLines(int(c-1)*k, int(c)*k); !bytes.Equal(b, want) {
					readErr = fmt.Errorf("%s: %d bytes, want the %d of lines [%d, %d): tail %q",
						n, len(b), len(want), (c-1)*k, c*k, tail(b))
					return
				}
				reads++
			}
		}
	}()
	for c := 1; c <= checkpoints; c++ {
		mustWrite(t, s, (c-1)*k, c*k)
		if _, err := s.PreCommit(int64(c)); err != nil {
			t.Fatal(err)
		}
		if err := s.Commit(int64(c)); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
	if readErr != nil {
		t.Fatal(readErr)
	}
	if got, want := committed(t, s), modelLines(0, k*checkpoints); !bytes.Equal(got, want) {
		t.Fatalf("final output: %d bytes, want %d", len(got), len(want))
	}
	t.Logf("%d part files read while committing", reads)
}

// TestWriterSink: lines reach the writer at Commit only, in checkpoint
// order; a crash loses the lines of a completed checkpoint whose Commit
// did not run (at most once), and a restored run never writes a line of
// the restored checkpoint again.
func TestWriterSink(t *testing.T) {
	var out bytes.Buffer
	s := NewWriterSink(&out, 0)
	if err := s.Write(modelLine(0)); err == nil {
		t.Fatal("Write before Recover: no error")
	}
	if err := s.Recover(PendingState{}); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, s, 0, 3)
	if _, err := s.PreCommit(1); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, s, 3, 5)
	st2, err := s.PreCommit(2)
	if err != nil {
		t.Fatal(err)
	}
	if len(st2.Parts) != 0 || st2.Checkpoint != 2 {
		t.Fatalf("PreCommit(2) = %+v", st2)
	}
	if out.Len() != 0 {
		t.Fatalf("written before Commit: %q", out.Bytes())
	}
	if err := s.Commit(1); err != nil {
		t.Fatal(err)
	}
	if got, want := out.Bytes(), modelLines(0, 3); !bytes.Equal(got, want) {
		t.Fatalf("after Commit(1): %q, want %q", got, want)
	}
	if err := s.Commit(1); err != nil || out.Len() != len(modelLines(0, 3)) {
		t.Fatalf("Commit(1) twice: %v, %d bytes", err, out.Len())
	}
	if err := s.Write([]byte("x")); !errors.Is(err, ErrNotLine) {
		t.Fatalf("Write without newline: %v", err)
	}
	mustWrite(t, s, 5, 6)
	// The job dies after checkpoint 2 completed, before Commit(2), and
	// restores checkpoint 2: lines [3, 5) are lost, [5, ...) replayed.
	s.Close()
	r := NewWriterSink(&out, 0)
	if err := r.Recover(st2); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, r, 5, 7)
	if _, err := r.PreCommit(2); err == nil {
		t.Fatal("PreCommit of the restored checkpoint: no error")
	}
	if _, err := r.PreCommit(3); err != nil {
		t.Fatal(err)
	}
	if err := r.Commit(3); err != nil {
		t.Fatal(err)
	}
	want := append(modelLines(0, 3), modelLines(5, 7)...)
	if !bytes.Equal(out.Bytes(), want) {
		t.Fatalf("after the crash: %q, want %q", out.Bytes(), want)
	}
}

// TestLockOutputDir: an output directory locked by a run is refused to a
// second one, saying it is in use, until the first releases it; the lock
// makes a missing directory and nothing in it, and refuses a path that
// is a file, naming it.
func TestLockOutputDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	l, err := LockOutputDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Fatalf("the locked output directory: %v, %v; want it made, and empty", entries, err)
	}
	if _, err := LockOutputDir(dir); err == nil || !strings.Contains(err.Error(), "output directory "+dir+" is in use by another run") {
		t.Errorf("a second lock: %v, want the directory in use", err)
	}
	// The sinks of the run that holds it go on as ever.
	s, err := NewFileSink(dir, "alerts", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Recover(PendingState{}); err != nil {
		t.Fatalf("Recover in the locked directory: %v", err)
	}
	if err := s.Write([]byte("{}\n")); err != nil {
		t.Fatalf("Write in the locked directory: %v", err)
	}
	s.Close()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = LockOutputDir(dir)
	if err != nil {
		t.Fatalf("a lock after the first's release: %v", err)
	}
	l.Close()
	file := filepath.Join(t.TempDir(), "alerts")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LockOutputDir(file); err == nil || err.Error() != "runtime: output directory "+file+" is not a directory" {
		t.Errorf("a file as the output directory: %v", err)
	}
	if os.Geteuid() != 0 { // root writes whatever the mode says
		ro := t.TempDir()
		if err := os.Chmod(ro, 0o555); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(ro, 0o755)
		if _, err := LockOutputDir(ro); err == nil || !strings.Contains(err.Error(), ro+" is not writable: permission denied") {
			t.Errorf("a read-only output directory: %v, want it not writable", err)
		}
	}
}

// TestOutputDirID: an output directory's id is written at its first use
// and read back after; a directory made again under the same path gets
// another.
func TestOutputDirID(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	id, err := OutputDirID(dir)
	if err != nil || len(id) != 32 {
		t.Fatalf("first id %q, %v; want 32 hex digits", id, err)
	}
	if again, err := OutputDirID(dir); err != nil || again != id {
		t.Fatalf("id read back %q, %v; want %q", again, err, id)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if other, err := OutputDirID(dir); err != nil || other == id || len(other) != 32 {
		t.Fatalf("id of the directory made again %q, %v; want another than %q", other, err, id)
	}
}
