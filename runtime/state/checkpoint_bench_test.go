package state

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/cepheus-cep/cepheus/event"
)

const benchKeys = 1_000_000

// benchKey is the i-th key of the benchmarks: a 16-byte key in its key
// group, as a card id would be.
func benchKey(i int) Key {
	key := event.Key(fmt.Sprintf("card-%011d", i))
	return Key{Operator: "cep.shared/card_id", KeyGroup: GroupOf(key, DefaultKeyGroups), Key: key}
}

// benchValue is a 64-byte value (a small per-key record) that differs
// with round.
func benchValue(buf []byte, i, round int) []byte {
	buf = binary.BigEndian.AppendUint64(buf[:0], uint64(i))
	buf = binary.BigEndian.AppendUint64(buf, uint64(round))
	for len(buf) < 64 {
		buf = append(buf, byte(len(buf)))
	}
	return buf
}

func fillBench(b *testing.B, w Writer) {
	b.Helper()
	var v []byte
	for i := range benchKeys {
		v = benchValue(v, i, 0)
		if err := w.Put(benchKey(i), v); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPebblePut is the cost of one Put of a 1M-key load (batched,
// committed every DefaultBatchBytes).
func BenchmarkPebblePut(b *testing.B) {
	p, err := OpenPebble(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	b.ReportAllocs()
	var v []byte
	i := 0
	for b.Loop() {
		v = benchValue(v, i%benchKeys, i/benchKeys)
		if err := p.Put(benchKey(i%benchKeys), v); err != nil {
			b.Fatal(err)
		}
		i++
	}
	if err := p.Flush(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkCheckpointPebble1M is one checkpoint of a Pebble store of 1M
// keys on the real disk: 1000 keys changed, then Begin, AddPebble (flush,
// Pebble checkpoint), a metadata blob, Commit (fsyncs, rename, marker,
// pruning beyond 3).
func BenchmarkCheckpointPebble1M(b *testing.B) {
	root := b.TempDir()
	d, err := OpenCheckpointDir(filepath.Join(root, "state"))
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	p, err := OpenPebble(filepath.Join(root, "work", "0"))
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	fillBench(b, p)
	if err := p.Flush(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var v []byte
	id := CheckpointID(0)
	for b.Loop() {
		id++
		b.StopTimer()
		for j := range 1000 {
			i := (int(id)*7919 + j*104729) % benchKeys
			v = benchValue(v, i, int(id))
			if err := p.Put(benchKey(i), v); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		w, err := d.Begin(id)
		if err != nil {
			b.Fatal(err)
		}
		if err := w.AddPebble("0", p); err != nil {
			b.Fatal(err)
		}
		if err := w.PutMeta("sources", []byte("offsets")); err != nil {
			b.Fatal(err)
		}
		if err := w.Commit(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRestorePebble1M restores the latest checkpoint of a 1M-key
// Pebble store (hard links, copies of the small files, open) and reads
// every record back.
func BenchmarkRestorePebble1M(b *testing.B) {
	root := b.TempDir()
	d, err := OpenCheckpointDir(filepath.Join(root, "state"))
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	p, err := OpenPebble(filepath.Join(root, "work", "0"))
	if err != nil {
		b.Fatal(err)
	}
	fillBench(b, p)
	w, err := d.Begin(1)
	if err != nil {
		b.Fatal(err)
	}
	if err := w.AddPebble("0", p); err != nil {
		b.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		b.Fatal(err)
	}
	if err := p.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n++
		c, err := d.Latest()
		if err != nil {
			b.Fatal(err)
		}
		r, err := c.OpenPebble("0", filepath.Join(root, "restore", fmt.Sprint(n)))
		if err != nil {
			b.Fatal(err)
		}
		recs := 0
		for _, err := range r.Records(benchKey(0).Operator, AllKeyGroups) {
			if err != nil {
				b.Fatal(err)
			}
			recs++
		}
		if recs != benchKeys {
			b.Fatalf("restored %d records", recs)
		}
		if err := r.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckpointMem1M is one checkpoint of a Mem store of 1M keys:
// the whole store written to a file and synced (Mem checkpoints are
// full, not incremental), then Commit.
func BenchmarkCheckpointMem1M(b *testing.B) {
	d, err := OpenCheckpointDir(filepath.Join(b.TempDir(), "state"))
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	m := NewMem()
	fillBench(b, m)
	b.ReportAllocs()
	id := CheckpointID(0)
	for b.Loop() {
		id++
		w, err := d.Begin(id)
		if err != nil {
			b.Fatal(err)
		}
		if err := w.AddMem("0", m.Snapshot()); err != nil {
			b.Fatal(err)
		}
		if err := w.Commit(); err != nil {
			b.Fatal(err)
		}
	}
}
