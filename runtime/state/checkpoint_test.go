package state

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/internal/failpoint"
	"github.com/cockroachdb/pebble/v2/vfs"
)

func openTestDir(t *testing.T, fs vfs.FS, dir string, opts ...CheckpointDirOption) *CheckpointDir {
	t.Helper()
	d, err := OpenCheckpointDir(dir, append([]CheckpointDirOption{withCheckpointFS(fs)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// change applies n random puts and deletes to both stores (the store
// under test and its model).
func change(t *testing.T, rng *rand.Rand, n, keys int, stores ...Writer) {
	t.Helper()
	for range n {
		key := event.Key(fmt.Sprint("key-", rng.IntN(keys)))
		k := Key{Operator: testOps[1+rng.IntN(2)], KeyGroup: GroupOf(key, DefaultKeyGroups), Key: key}
		if rng.IntN(8) == 0 {
			for _, s := range stores {
				must(t, s.Delete(k))
			}
			continue
		}
		v := fmt.Appendf(nil, "value-%d-%s", rng.Uint64(), strings.Repeat("x", rng.IntN(40)))
		for _, s := range stores {
			must(t, s.Put(k, v))
		}
	}
}

func commit(t *testing.T, d *CheckpointDir, id CheckpointID, add func(w *CheckpointWriter)) {
	t.Helper()
	w, err := d.Begin(id)
	must(t, err)
	add(w)
	must(t, w.Commit())
}

func ids(t *testing.T, d *CheckpointDir) []CheckpointID {
	t.Helper()
	got, err := d.Complete()
	must(t, err)
	return got
}

func TestCheckpointCommitLatestKeep(t *testing.T) {
	fs := vfs.NewMem()
	d := openTestDir(t, fs, "state", WithKeep(2))
	if _, err := d.Latest(); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("Latest of an empty dir = %v, want ErrNoCheckpoint", err)
	}
	m := NewMem()
	rng := rand.New(rand.NewPCG(testSeed(t), 3))
	var written [][]string
	for id := CheckpointID(1); id <= 4; id++ {
		change(t, rng, 50, 30, m)
		written = append(written, dumpAll(t, m))
		commit(t, d, id, func(w *CheckpointWriter) {
			must(t, w.AddMem("subtask-0", m.Snapshot()))
			must(t, w.PutMeta("offsets", fmt.Appendf(nil, "line %d", id)))
			must(t, w.PutMeta("empty", nil))
		})
		change(t, rng, 10, 30, m) // after the snapshot: not in the checkpoint
	}
	if got := ids(t, d); !slices.Equal(got, []CheckpointID{3, 4}) {
		t.Fatalf("complete checkpoints = %v, want [3 4]", got)
	}
	if names, _ := fs.List("state"); len(names) != 3 { // LOCK, chk-3, chk-4
		t.Errorf("state dir holds %q", names)
	}
	c, err := d.Latest()
	must(t, err)
	if c.ID != 4 {
		t.Fatalf("Latest = %d, want 4", c.ID)
	}
	if got := c.MetaNames(); !slices.Equal(got, []string{"empty", "offsets"}) {
		t.Errorf("MetaNames = %q", got)
	}
	if b, err := c.Meta("offsets"); err != nil || string(b) != "line 4" {
		t.Errorf("Meta(offsets) = %q, %v", b, err)
	}
	if b, err := c.Meta("empty"); err != nil || len(b) != 0 {
		t.Errorf("Meta(empty) = %q, %v", b, err)
	}
	if _, err := c.Meta("nope"); !errors.Is(err, ErrNotInCheckpoint) {
		t.Errorf("Meta(nope) = %v, want ErrNotInCheckpoint", err)
	}
	if got := c.Stores(); !slices.Equal(got, []StoreInfo{{"subtask-0", KindMem}}) {
		t.Errorf("Stores = %v", got)
	}
	for _, id := range []CheckpointID{3, 4} {
		c, err := d.Open(id)
		must(t, err)
		r, err := c.OpenMem("subtask-0")
		must(t, err)
		if got := dumpAll(t, r); !slices.Equal(got, written[id-1]) {
			t.Errorf("checkpoint %d restores %d records, want the %d written", id, len(got), len(written[id-1]))
		}
	}
	if _, err := c.OpenPebble("subtask-0", "work"); err == nil {
		t.Error("a mem store opened as a pebble store")
	}
	if _, err := d.Open(2); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("Open of a deleted checkpoint = %v, want ErrNoCheckpoint", err)
	}
	for _, id := range []CheckpointID{3, 4} {
		if _, err := d.Begin(id); err == nil {
			t.Errorf("Begin(%d) after checkpoint 4: no error", id)
		}
	}
}

// errCrash stops Commit at a step, as a crash would.
var errCrash = errors.New("crash")

// TestCheckpointTorn crashes the commit of checkpoint 2 at each of its
// steps, on a file system that keeps only what was synced (or, for a
// process crash with the machine up, everything), and checks that the
// state directory then restores checkpoint 1, or 2 once it is complete,
// with exactly the records written at that checkpoint; and that the next
// checkpoint replaces the torn one.
func TestCheckpointTorn(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 5))
	for step := stepWritten; step <= stepComplete; step++ {
		for _, keepUnsynced := range []int{0, 100} {
			t.Run(fmt.Sprintf("step%d/unsynced%d", step, keepUnsynced), func(t *testing.T) {
				fs := vfs.NewCrashableMem()
				d := openTestDir(t, fs, "state")
				p := openTestPebble(t, fs, "work/subtask-0")
				mp, mm := NewMem(), NewMem() // models of the Pebble store, and a Mem store
				var pebbleAt, memAt [][]string
				write := func(id CheckpointID) (*CheckpointWriter, error) {
					change(t, rng, 300, 100, p, mp)
					change(t, rng, 50, 30, mm)
					pebbleAt, memAt = append(pebbleAt, dumpAll(t, mp)), append(memAt, dumpAll(t, mm))
					w, err := d.Begin(id)
					must(t, err)
					must(t, w.AddPebble("subtask-0", p))
					must(t, w.AddMem("subtask-1", mm.Snapshot()))
					must(t, w.PutMeta("id", fmt.Append(nil, id)))
					return w, w.Commit()
				}
				must(t, func() error { _, err := write(1); return err }())
				must(t, p.db.Flush()) // checkpoint 2 holds an sstable too
				d.crash = func(s commitStep) error {
					if s == step {
						return errCrash
					}
					return nil
				}
				if _, err := write(2); !errors.Is(err, errCrash) {
					t.Fatalf("Commit = %v, want the crash", err)
				}
				crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: keepUnsynced, RNG: rng})

				want := CheckpointID(1)
				if step == stepComplete || step == stepMarkerRenamed && keepUnsynced == 100 {
					want = 2
				}
				d2 := openTestDir(t, crashed, "state")
				c, err := d2.Latest()
				must(t, err)
				if c.ID != want {
					t.Fatalf("Latest after the crash = %d, want %d", c.ID, want)
				}
				if b, err := c.Meta("id"); err != nil || string(b) != fmt.Sprint(want) {
					t.Errorf("Meta(id) = %q, %v", b, err)
				}
				rp, err := c.OpenPebble("subtask-0", "work2/subtask-0", withFS(crashed))
				must(t, err)
				defer rp.Close()
				if got := dumpAll(t, rp); !slices.Equal(got, pebbleAt[want-1]) {
					t.Errorf("pebble store restored with %d records, want the %d of checkpoint %d", len(got), len(pebbleAt[want-1]), want)
				}
				rm, err := c.OpenMem("subtask-1")
				must(t, err)
				if got := dumpAll(t, rm); !slices.Equal(got, memAt[want-1]) {
					t.Errorf("mem store restored with %d records, want the %d of checkpoint %d", len(got), len(memAt[want-1]), want)
				}

				// The restored stores go on: the next checkpoint replaces a
				// torn one and leaves no .tmp behind.
				w, err := d2.Begin(want + 1)
				must(t, err)
				must(t, w.AddPebble("subtask-0", rp))
				must(t, w.AddMem("subtask-1", rm.Snapshot()))
				must(t, w.Commit())
				names, err := crashed.List("state")
				must(t, err)
				for _, n := range names {
					if strings.HasSuffix(n, tmpSuffix) {
						t.Errorf("left behind: %s", n)
					}
				}
				if c, err := d2.Latest(); err != nil || c.ID != want+1 {
					t.Errorf("Latest after the next commit = %v, %v", c, err)
				}
			})
		}
	}
}

// TestCheckpointRestorePebbleDisk checkpoints a Pebble store on the real
// disk twice, with few changes in between, and checks that the second
// checkpoint hard-links the sstables of the first (same inodes, one link
// more), that each restores exactly what was written, and that a
// restored store, written to and compacted, leaves its checkpoint as it
// was.
func TestCheckpointRestorePebbleDisk(t *testing.T) {
	root := t.TempDir()
	rng := rand.New(rand.NewPCG(testSeed(t), 9))
	d, err := OpenCheckpointDir(filepath.Join(root, "state"), WithKeep(2))
	must(t, err)
	defer d.Close()
	if _, err := OpenCheckpointDir(filepath.Join(root, "state")); err == nil {
		t.Error("a second OpenCheckpointDir of a locked state dir: no error")
	}
	p, err := OpenPebble(filepath.Join(root, "work", "subtask-0"))
	must(t, err)
	defer p.Close()
	model := NewMem()
	change(t, rng, 20000, 10000, p, model)
	must(t, p.Flush())
	must(t, p.db.Flush()) // the memtable into an sstable, as a large state's would be
	at1 := dumpAll(t, model)
	commit(t, d, 1, func(w *CheckpointWriter) { must(t, w.AddPebble("subtask-0", p)) })

	change(t, rng, 50, 10000, p, model)
	at2 := dumpAll(t, model)
	commit(t, d, 2, func(w *CheckpointWriter) { must(t, w.AddPebble("subtask-0", p)) })

	chk1 := filepath.Join(root, "state", "chk-1", "state", "subtask-0")
	chk2 := filepath.Join(root, "state", "chk-2", "state", "subtask-0")
	ssts1, _ := filepath.Glob(filepath.Join(chk1, "*.sst"))
	if len(ssts1) == 0 {
		t.Fatal("checkpoint 1 holds no sstable")
	}
	var shared, copied int64
	for _, f1 := range ssts1 {
		f2 := filepath.Join(chk2, filepath.Base(f1))
		fi1, err1 := os.Stat(f1)
		fi2, err2 := os.Stat(f2)
		if err1 != nil || err2 != nil || !os.SameFile(fi1, fi2) {
			t.Errorf("%s is not hard-linked into checkpoint 2 (%v, %v)", filepath.Base(f1), err1, err2)
			continue
		}
		if n, ok := links(fi2); ok && n < 3 { // the working dir and both checkpoints
			t.Errorf("%s has %d links, want 3", filepath.Base(f1), n)
		}
		shared += fi1.Size()
	}
	files2, _ := os.ReadDir(chk2)
	for _, e := range files2 {
		if fi, _ := e.Info(); !slices.Contains(ssts1, filepath.Join(chk1, e.Name())) {
			copied += fi.Size()
		}
	}
	t.Logf("checkpoint 2: %d bytes of sstables shared with checkpoint 1, %d bytes new", shared, copied)
	if copied > shared/4 {
		t.Errorf("checkpoint 2 wrote %d new bytes for 50 changes (%d shared)", copied, shared)
	}

	for id, want := range map[CheckpointID][]string{1: at1, 2: at2} {
		c, err := d.Open(id)
		must(t, err)
		work := filepath.Join(root, "restore", fmt.Sprint(id))
		r, err := c.OpenPebble("subtask-0", work)
		must(t, err)
		if got := dumpAll(t, r); !slices.Equal(got, want) {
			t.Errorf("checkpoint %d restores %d records, want %d", id, len(got), len(want))
		}
		// The restored store changes, compacts, closes: its checkpoint
		// stays as it was.
		change(t, rng, 2000, 10000, r)
		must(t, r.Flush())
		must(t, r.db.Compact(context.Background(), []byte{0}, []byte{0xff}, true))
		must(t, r.Close())
		if _, err := c.OpenPebble("subtask-0", work); err == nil {
			t.Error("restore into a non-empty working dir: no error")
		}
		r, err = c.OpenPebble("subtask-0", work+"-again")
		must(t, err)
		if got := dumpAll(t, r); !slices.Equal(got, want) {
			t.Errorf("checkpoint %d after a restored store changed: %d records, want %d", id, len(got), len(want))
		}
		must(t, r.Close())
	}
}

func TestCheckpointCorrupt(t *testing.T) {
	fs := vfs.NewMem()
	d := openTestDir(t, fs, "state")
	m := NewMem()
	must(t, m.Put(Key{Operator: "a", Key: "k"}, []byte("v")))
	commit(t, d, 1, func(w *CheckpointWriter) {
		must(t, w.AddMem("s", m.Snapshot()))
		must(t, w.PutMeta("meta", []byte("hello")))
	})
	marker := "state/chk-1/_COMPLETE"
	good, err := readFile(fs, marker)
	must(t, err)
	rewrite := func(path string, b []byte) {
		t.Helper()
		must(t, fs.Remove(path))
		must(t, writeFileSync(fs, path, b))
	}
	for _, c := range []struct {
		name  string
		edit  func([]byte) []byte
		want  error
		wants string
	}{
		{"version", func(b []byte) []byte { return bytes.Replace(b, []byte("format 1"), []byte("format 2"), 1) },
			ErrCheckpointVersion, "unknown checkpoint format version 2 (this build reads version 1)"},
		{"flipped", func(b []byte) []byte { b[len(b)-5] ^= 1; return b }, ErrCorruptCheckpoint, "checksum mismatch"},
		{"truncated", func(b []byte) []byte { return b[:len(b)/2] }, ErrCorruptCheckpoint, ""},
		{"empty", func([]byte) []byte { return nil }, ErrCorruptCheckpoint, "not a checkpoint marker"},
	} {
		rewrite(marker, c.edit(bytes.Clone(good)))
		_, err := d.Latest()
		if !errors.Is(err, c.want) || !strings.Contains(fmt.Sprint(err), c.wants) {
			t.Errorf("%s: Latest = %v, want %v", c.name, err, c.want)
		}
	}
	rewrite(marker, good)

	c, err := d.Latest()
	must(t, err)
	rewrite("state/chk-1/meta/meta", []byte("hellO"))
	if _, err := c.Meta("meta"); !errors.Is(err, ErrCorruptCheckpoint) {
		t.Errorf("Meta of a changed blob = %v, want ErrCorruptCheckpoint", err)
	}

	memFile := "state/chk-1/state/s.mem"
	b, err := readFile(fs, memFile)
	must(t, err)
	b[len(memMagic)+3] ^= 1
	rewrite(memFile, b)
	if _, err := c.OpenMem("s"); !errors.Is(err, ErrCorruptCheckpoint) {
		t.Errorf("OpenMem of a damaged file = %v, want ErrCorruptCheckpoint", err)
	}
	var buf bytes.Buffer
	must(t, encodeMem(&buf, m.recs))
	b = buf.Bytes()
	b[len(memMagic)] = 9 // version 9, with a good checksum
	b = binary.BigEndian.AppendUint32(b[:len(b)-4:len(b)-4], crc32.Checksum(b[:len(b)-4], castagnoli))
	rewrite(memFile, b)
	if _, err := c.OpenMem("s"); !errors.Is(err, ErrCheckpointVersion) {
		t.Errorf("OpenMem of a version 9 file = %v, want ErrCheckpointVersion", err)
	}
}

func TestCheckpointWriterMisuse(t *testing.T) {
	fs := vfs.NewMem()
	d := openTestDir(t, fs, "state")
	w, err := d.Begin(1)
	must(t, err)
	for _, name := range []string{"", ".hidden", "a/b", "..", "x y"} {
		if err := w.PutMeta(name, nil); err == nil {
			t.Errorf("PutMeta(%q): no error", name)
		}
	}
	must(t, w.PutMeta("m", nil))
	if err := w.PutMeta("m", nil); err == nil {
		t.Error("a metadata name twice: no error")
	}
	must(t, w.AddMem("m", NewMem().Snapshot())) // stores and blobs: two name spaces
	if err := w.AddMem("m", NewMem().Snapshot()); err == nil {
		t.Error("a store name twice: no error")
	}
	must(t, w.Abort())
	if err := w.Commit(); err == nil {
		t.Error("Commit after Abort: no error")
	}
	if names, _ := fs.List("state"); slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, chkPrefix) }) {
		t.Errorf("after Abort the state dir holds %q", names)
	}

	// A failed Add makes Commit refuse.
	w, err = d.Begin(1)
	must(t, err)
	p := openTestPebble(t, fs, "work")
	must(t, p.Close())
	if err := w.AddPebble("p", p); !errors.Is(err, ErrClosed) {
		t.Errorf("AddPebble of a closed store = %v, want ErrClosed", err)
	}
	if err := w.Commit(); !errors.Is(err, ErrClosed) {
		t.Errorf("Commit after a failed Add = %v, want its error", err)
	}
	if _, err := d.Latest(); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("Latest = %v, want ErrNoCheckpoint", err)
	}
}

// TestLockRunErrors: a state directory another run holds is said to be in
// use, without the lock's errno; a lock file that cannot be made is not
// taken for another run (it said "in use by another run: open ...: is a
// directory").
func TestLockRunErrors(t *testing.T) {
	dir := t.TempDir()
	lock, err := LockRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = LockRun(dir)
	if want := "state: state dir " + dir + " is in use by another run"; err == nil || err.Error() != want {
		t.Errorf("LockRun of a locked directory: %v, want %q", err, want)
	}
	if err := lock.Close(); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	if err := os.Mkdir(filepath.Join(other, runLockName), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = LockRun(other)
	if want := "state: cannot lock state dir " + other + ": open " + filepath.Join(other, runLockName) + ": is a directory"; err == nil || err.Error() != want {
		t.Errorf("LockRun with %s a directory: %v, want %q", runLockName, err, want)
	}
}

// TestCheckRunLock: the check before a run makes nothing, passes a
// directory to be made and one whose lock is free (which stays free),
// refuses one another run holds, and says which path is a file when the
// directory, or one above it, is (mkdir's "not a directory" named no
// file).
func TestCheckRunLock(t *testing.T) {
	root := t.TempDir()
	missing := filepath.Join(root, "a", "state")
	if err := CheckRunLock(missing); err != nil {
		t.Errorf("a directory to be made: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "a")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the check made %s: %v", filepath.Join(root, "a"), err)
	}
	dir := filepath.Join(root, "state")
	lock, err := LockRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := "state: state dir " + dir + " is in use by another run"; fmt.Sprint(CheckRunLock(dir)) != want {
		t.Errorf("a locked directory: %v, want %q", CheckRunLock(dir), want)
	}
	if err := lock.Close(); err != nil {
		t.Fatal(err)
	}
	if err := CheckRunLock(dir); err != nil {
		t.Errorf("a directory whose lock is free: %v", err)
	}
	if lock, err = LockRun(dir); err != nil {
		t.Fatalf("the lock after a check: %v", err)
	}
	lock.Close()
	file := filepath.Join(root, "statefile")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ dir, want string }{
		{file, "state: state dir " + file + " is a file, not a directory"},
		{filepath.Join(file, "sub", "state"), "state: state dir " + filepath.Join(file, "sub", "state") + ": " + file + " is a file, not a directory"},
	} {
		if err := CheckRunLock(c.dir); fmt.Sprint(err) != c.want {
			t.Errorf("CheckRunLock(%s): %v, want %q", c.dir, err, c.want)
		}
		if _, err := LockRun(c.dir); fmt.Sprint(err) != c.want {
			t.Errorf("LockRun(%s): %v, want %q", c.dir, err, c.want)
		}
	}
}

// TestCommitStepsListed: every step of a checkpoint's commit is a point
// package failpoint lists ("checkpoint." + step), and it lists no other
// point of that family: a crash test can arm each, and none it cannot hit.
func TestCommitStepsListed(t *testing.T) {
	var steps []string
	for s := stepWritten; s <= stepComplete; s++ {
		steps = append(steps, "checkpoint."+s.String())
	}
	if len(steps) != len(stepNames) {
		t.Fatalf("%d steps from written to complete, %d names", len(steps), len(stepNames))
	}
	var listed []string
	for _, p := range failpoint.Points() {
		if strings.HasPrefix(p, "checkpoint.") {
			listed = append(listed, p)
		}
	}
	slices.Sort(steps)
	if !slices.Equal(listed, steps) {
		t.Errorf("package failpoint lists %q, the commit's steps are %q", listed, steps)
	}
}
