package runtime

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// sinkKillEnv names the directory of the child of TestFileSinkKill; the
// child test runs only when it is set.
const sinkKillEnv = "CEPHEUS_SINK_KILL_CHILD"

// killK is the child's checkpoint interval, in lines.
const killK = 40

// killCheckpoint is the child's stand-in for a checkpoint's metadata: the
// lines it covers and the sink's PendingState, in the file chk, replaced
// atomically (write chk.tmp, fsync, rename, fsync the directory). A
// checkpoint is complete once its file is renamed.
func writeKillCheckpoint(dir string, pos int, st PendingState) error {
	b := binary.AppendUvarint(nil, uint64(pos))
	b, err := st.AppendBinary(b)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "chk.tmp")
	if err := writeSynced(tmp, b); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, "chk")); err != nil {
		return err
	}
	return syncDir(dir)
}

// readKillCheckpoint returns the latest complete checkpoint, the zero one
// when none completed yet.
func readKillCheckpoint(dir string) (pos int, st PendingState, err error) {
	b, err := os.ReadFile(filepath.Join(dir, "chk"))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, PendingState{}, nil
	}
	if err != nil {
		return 0, st, err
	}
	p, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, st, errors.New("corrupt chk")
	}
	err = st.UnmarshalBinary(b[n:])
	return int(p), st, err
}

// TestFileSinkKillChild is the child process of TestFileSinkKill: a job
// that restores the latest checkpoint in $CEPHEUS_SINK_KILL_CHILD and
// writes the model's lines from there, a checkpoint every killK lines
// (commits lagging one checkpoint in three), until it is killed.
func TestFileSinkKillChild(t *testing.T) {
	dir := os.Getenv(sinkKillEnv)
	if dir == "" {
		t.Skip("the child process of TestFileSinkKill")
	}
	pos, st, err := readKillCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewFileSink(filepath.Join(dir, "out"), "alerts", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Recover(st); err != nil {
		t.Fatal(err)
	}
	ck := st.Checkpoint
	deadline := time.Now().Add(30 * time.Second) // should the parent forget to kill
	for i := pos; time.Now().Before(deadline); {
		if err := s.Write(modelLine(i)); err != nil {
			t.Fatal(err)
		}
		if i++; i%killK != 0 {
			continue
		}
		ck++
		st, err := s.PreCommit(ck)
		if err != nil {
			t.Fatal(err)
		}
		if err := writeKillCheckpoint(dir, i, st); err != nil {
			t.Fatal(err)
		}
		if ck%3 != 1 {
			if err := s.Commit(ck); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Fatal("not killed within 30s")
}

// TestFileSinkKill runs the job of TestFileSinkKillChild in a child
// process and kills it with SIGKILL at random moments (fixed seeds), at
// least 12 times, restarting it each time from its latest complete
// checkpoint. After every kill the committed part files hold a prefix of
// the model, no more than that checkpoint covers, in whole lines; after
// the last, Recover leaves exactly the lines the checkpoint covers, each
// once, and no other file of the sink.
func TestFileSinkKill(t *testing.T) {
	if testing.Short() {
		t.Skip("kills child processes; skipped in -short mode")
	}
	seed := sinkSeed(t)
	rng := rand.New(rand.NewPCG(seed, 13))
	dir := t.TempDir()
	probe, err := NewFileSink(filepath.Join(dir, "out"), "alerts", 0)
	if err != nil {
		t.Fatal(err)
	}
	const kills = 12
	leftovers := 0 // kills that left an in-progress or pending file
	for k := range kills {
		delay := time.Duration(5+rng.IntN(150)) * time.Millisecond
		var out bytes.Buffer
		cmd := exec.Command(os.Args[0], "-test.run=^TestFileSinkKillChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), sinkKillEnv+"="+dir)
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case err := <-exited:
			t.Fatalf("seed %d, kill %d: the child exited by itself (%v):\n%s", seed, k, err, out.Bytes())
		case <-time.After(delay):
		}
		// The child leads its own process group (Setpgid): kill the group.
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		err := <-exited
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("seed %d, kill %d: the child ended with %v, not SIGKILL:\n%s", seed, k, err, out.Bytes())
		}
		pos, _, err := readKillCheckpoint(dir)
		if err != nil {
			t.Fatal(err)
		}
		got := committed(t, probe)
		if want := modelLines(0, pos); len(got) > len(want) || !bytes.Equal(got, want[:len(got)]) {
			t.Fatalf("seed %d, kill %d after %v: the committed output is not a prefix of the %d lines of the latest checkpoint",
				seed, k, delay, pos)
		}
		if own := ownFiles(t, probe); len(own[partInProgress])+len(own[partPending]) > 0 {
			leftovers++
		}
	}
	pos, st, err := readKillCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := newRecovered(t, filepath.Join(dir, "out"), "alerts", 0, st)
	if got, want := committed(t, s), modelLines(0, pos); !bytes.Equal(got, want) {
		t.Fatalf("seed %d: after Recover of checkpoint %d: %d bytes committed, want the %d of its %d lines",
			seed, st.Checkpoint, len(got), len(want), pos)
	}
	onlyCommitted(t, s)
	if pos == 0 {
		t.Fatalf("seed %d: no checkpoint completed in %d runs", seed, kills)
	}
	t.Logf("seed %d: %d kills (%d left in-progress or pending files), checkpoint %d covers %d lines",
		seed, kills, leftovers, st.Checkpoint, pos)
}
