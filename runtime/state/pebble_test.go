package state

import (
	"bytes"
	"errors"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cockroachdb/pebble/v2/vfs"
)

func testSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(1)
	if s := os.Getenv("CEPHEUS_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d (CEPHEUS_SEED)", seed)
		}
	})
	return seed
}

var testOps = []OperatorID{"", "a", "ab", "b", "runtime.subtask"}

// dumpAll lists every record of the operators in testOps.
func dumpAll(t *testing.T, r Reader) []string {
	t.Helper()
	var out []string
	for _, op := range testOps {
		out = append(out, dump(t, r, op, AllKeyGroups)...)
	}
	return out
}

func openTestPebble(t *testing.T, fs vfs.FS, dir string, opts ...PebbleOption) *Pebble {
	t.Helper()
	p, err := OpenPebble(dir, append([]PebbleOption{withFS(fs)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// TestPebbleEquivalentToMem drives a Mem and a Pebble store with the
// same random operations (puts, overwrites, deletes, flushes, reopens,
// reads of random operators and key-group ranges) and compares every read.
func TestPebbleEquivalentToMem(t *testing.T) {
	for _, c := range []struct {
		name string
		fs   func(t *testing.T) (vfs.FS, string)
		ops  int
	}{
		{"memfs", func(*testing.T) (vfs.FS, string) { return vfs.NewMem(), "db" }, 20000},
		{"disk", func(t *testing.T) (vfs.FS, string) { return vfs.Default, t.TempDir() }, 3000},
	} {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(testSeed(t), 11))
			fs, dir := c.fs(t)
			m := NewMem()
			// A small batch, so that the batch also commits by itself.
			p := openTestPebble(t, fs, dir, WithBatchBytes(512))
			groups := []KeyGroup{0, 1, 2, 127, 128, 255, 256, MaxKeyGroups}
			randKey := func() Key {
				return Key{
					Operator: testOps[rng.IntN(len(testOps))],
					KeyGroup: groups[rng.IntN(len(groups))],
					Key:      event.Key(fmt.Sprint("k", rng.IntN(40))),
				}
			}
			randRange := func() KeyGroupRange {
				a, b := groups[rng.IntN(len(groups))], groups[rng.IntN(len(groups))]
				if rng.IntN(10) > 0 && a > b {
					a, b = b, a // now and then an empty range (First > Last)
				}
				return KeyGroupRange{a, b}
			}
			for i := range c.ops {
				switch r := rng.IntN(100); {
				case r < 55:
					k := randKey()
					v := make([]byte, rng.IntN(64))
					for j := range v {
						v[j] = byte(rng.IntN(256))
					}
					must(t, m.Put(k, v))
					must(t, p.Put(k, v))
					for j := range v {
						v[j] ^= 0xff // the stores copied it
					}
				case r < 80:
					k := randKey()
					must(t, m.Delete(k))
					must(t, p.Delete(k))
				case r < 85:
					must(t, p.Flush())
				case r < 86:
					must(t, p.Close())
					p = openTestPebble(t, fs, dir, WithBatchBytes(512))
				default:
					op, gr := testOps[rng.IntN(len(testOps))], randRange()
					if got, want := dump(t, p, op, gr), dump(t, m, op, gr); !slices.Equal(got, want) {
						t.Fatalf("op %d: Records(%q, %v):\npebble %q\nmem    %q", i, op, gr, got, want)
					}
				}
			}
			if got, want := dumpAll(t, p), dumpAll(t, m); !slices.Equal(got, want) || len(want) == 0 {
				t.Fatalf("final records: pebble has %d, mem %d", len(got), len(want))
			}
		})
	}
}

// TestPebbleRealDisk writes, closes and reopens a store on the real disk,
// checks that Pebble logs nothing (a reopen replays the write-ahead log,
// which Pebble's default logger reports), that breaking out of Records
// stops it, and that a closed store says so.
func TestPebbleRealDisk(t *testing.T) {
	var logged bytes.Buffer
	log.SetOutput(&logged)
	t.Cleanup(func() { log.SetOutput(os.Stderr) })

	dir := t.TempDir()
	p, err := OpenPebble(dir)
	must(t, err)
	val := []byte("value")
	for i := range 1000 {
		must(t, p.Put(Key{Operator: "op", KeyGroup: GroupOf(event.Key(strconv.Itoa(i)), DefaultKeyGroups), Key: event.Key(strconv.Itoa(i))}, val))
	}
	must(t, p.Delete(Key{Operator: "op", KeyGroup: GroupOf("7", DefaultKeyGroups), Key: "7"}))
	n := 0
	for _, err := range p.Records("op", AllKeyGroups) { // sees the unflushed batch
		must(t, err)
		n++
	}
	if n != 999 {
		t.Fatalf("records before close = %d, want 999", n)
	}
	must(t, p.Put(Key{Operator: "op", Key: "last"}, val)) // committed by Close
	must(t, p.Close())
	must(t, p.Close())
	if err := p.Put(Key{Operator: "op"}, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Put after Close = %v, want ErrClosed", err)
	}

	p, err = OpenPebble(dir)
	must(t, err)
	defer p.Close()
	n = 0
	for range p.Records("op", AllKeyGroups) {
		n++
	}
	if n != 1000 {
		t.Errorf("records after reopen = %d, want 1000", n)
	}
	n = 0
	for range p.Records("op", AllKeyGroups) {
		n++
		break
	}
	if n != 1 {
		t.Errorf("iterations after break = %d", n)
	}
	if logged.Len() > 0 {
		t.Errorf("pebble logged:\n%s", logged.String())
	}
}

func TestPrefixSuccessor(t *testing.T) {
	for _, c := range []struct{ in, want []byte }{
		{[]byte{1, 'a', 0, 5}, []byte{1, 'a', 0, 6}},
		{[]byte{1, 'a', 0xff, 0xff}, []byte{1, 'b'}},
		{[]byte{0xff, 0xff}, nil},
	} {
		if got := prefixSuccessor(bytes.Clone(c.in)); !bytes.Equal(got, c.want) {
			t.Errorf("prefixSuccessor(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}
