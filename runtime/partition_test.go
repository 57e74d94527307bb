package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestOpenPartitions(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string][]byte{
		"b.jsonl":        []byte("{}\n"),
		"a.jsonl.gz":     gzipBytes(t, "{}\n"),
		"c.jsonl":        nil,
		".hidden.jsonl":  []byte("{}\n"),
		"notes.txt":      []byte("x\n"),
		"d.json":         []byte("{}\n"),
		"e.jsonl.tmp":    []byte("{}\n"),
		"sub/x.jsonl":    []byte("{}\n"),
		"sub.jsonl/y.gz": []byte("{}\n"),
	} {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(dir, "b.jsonl"), filepath.Join(dir, "link.jsonl")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "gone"), filepath.Join(dir, "dangling.jsonl")); err != nil {
		t.Fatal(err)
	}
	// Read once, a link to a missing file would lose its events without a
	// word: an error naming it. A followed directory reads it once its
	// target appears, so it is no partition yet.
	if _, err := OpenPartitions(dir, false); err == nil || !strings.Contains(err.Error(), "dangling.jsonl is a symbolic link to a missing file") {
		t.Errorf("a dangling link, not followed: %v", err)
	}
	parts, err := OpenPartitions(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, p := range parts {
		if p.Index != i || p.Path != filepath.Join(dir, p.Name) {
			t.Errorf("partition %d: %+v", i, p)
		}
		got = append(got, p.Name)
	}
	if want := []string{"a.jsonl.gz", "b.jsonl", "c.jsonl", "link.jsonl"}; !slices.Equal(got, want) {
		t.Errorf("partitions %q, want %q", got, want)
	}

	file := filepath.Join(dir, "notes.txt")
	if parts, err := OpenPartitions(file, false); err != nil || len(parts) != 1 || parts[0] != (Partition{0, "notes.txt", file}) {
		t.Errorf("file: %+v, %v", parts, err)
	}
	if parts, err := OpenPartitions("-", false); err != nil || len(parts) != 1 || parts[0] != (Partition{0, "stdin", "-"}) {
		t.Errorf("stdin: %+v, %v", parts, err)
	}
	if parts, err := OpenPartitions(t.TempDir(), false); err != nil || len(parts) != 0 {
		t.Errorf("empty directory: %+v, %v", parts, err)
	}
	if _, err := OpenPartitions(filepath.Join(dir, "missing"), false); err == nil {
		t.Error("missing path: no error")
	}
}

// batchLog renders batches as lines: "name: open@pos", "name: line@off:data",
// "name: done@pos", "name: closed@pos".
func batchLog(b Batch) []string {
	var out []string
	n := b.Partition.Name
	if b.Opened {
		out = append(out, fmt.Sprintf("%s: open@%d:%d", n, b.End.Offset, b.End.Line))
	}
	for _, r := range b.Records {
		out = append(out, fmt.Sprintf("%s: %d@%d:%s", n, r.Line, r.Offset, r.Data))
	}
	if b.Done {
		out = append(out, fmt.Sprintf("%s: done@%d:%d", n, b.End.Offset, b.End.Line))
	}
	if b.Closed {
		out = append(out, fmt.Sprintf("%s: closed@%d:%d", n, b.End.Offset, b.End.Line))
	}
	if b.Gone {
		out = append(out, fmt.Sprintf("%s: gone@%d:%d", n, b.End.Offset, b.End.Line))
	}
	return out
}

// drain reads every batch of r until its channel closes (within a few
// seconds), and checks the reader ended without error.
func drain(t *testing.T, r *PartitionReader) []Batch {
	t.Helper()
	var out []Batch
	timeout := time.After(5 * time.Second)
	for {
		select {
		case b, ok := <-r.Batches():
			if !ok {
				if err := r.Err(); err != nil {
					t.Fatalf("reader: %v", err)
				}
				return out
			}
			out = append(out, b)
		case <-timeout:
			t.Fatal("reader did not end")
		}
	}
}

func TestPartitionReaderDirectory(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("2.jsonl", []byte("b1\n\nb3\nb4"))
	write("1.jsonl.gz", gzipBytes(t, "a1\na2\n"))
	write("3.jsonl", nil)
	write("4.jsonl", []byte("d1\r\nd2\n"))
	r, err := NewPartitionReader(context.Background(), dir, ReaderConfig{BatchRecords: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got []string
	ends := map[string]Position{}
	for _, b := range drain(t, r) {
		if len(b.Records) > 1 {
			t.Errorf("batch of %d records, BatchRecords is 1", len(b.Records))
		}
		got = append(got, batchLog(b)...)
		ends[b.Partition.Name] = b.End
	}
	want := []string{
		"1.jsonl.gz: open@0:0", "1.jsonl.gz: 1@0:a1", "1.jsonl.gz: 2@3:a2", "1.jsonl.gz: done@6:2",
		"2.jsonl: open@0:0", "2.jsonl: 1@0:b1", "2.jsonl: 3@4:b3", "2.jsonl: 4@7:b4", "2.jsonl: done@9:4",
		"3.jsonl: open@0:0", "3.jsonl: done@0:0",
		"4.jsonl: open@0:0", "4.jsonl: 1@0:d1", "4.jsonl: 2@4:d2", "4.jsonl: done@7:2",
	}
	if !slices.Equal(got, want) {
		t.Errorf("batches:\n got %q\nwant %q", got, want)
	}

	// Resume: the first file done, the second after its line 1 (the blank
	// line 2 is read again), the fourth not yet begun.
	r2, err := NewPartitionReader(context.Background(), dir, ReaderConfig{
		Resume: []Position{ends["1.jsonl.gz"], {File: "2.jsonl", Offset: 3, Line: 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	got = got[:0]
	for _, b := range drain(t, r2) {
		got = append(got, batchLog(b)...)
	}
	want = []string{
		"1.jsonl.gz: open@6:2", "1.jsonl.gz: done@6:2",
		"2.jsonl: open@3:1", "2.jsonl: 3@4:b3", "2.jsonl: 4@7:b4", "2.jsonl: done@9:4",
		"3.jsonl: open@0:0", "3.jsonl: done@0:0",
		"4.jsonl: open@0:0", "4.jsonl: 1@0:d1", "4.jsonl: 2@4:d2", "4.jsonl: done@7:2",
	}
	if !slices.Equal(got, want) {
		t.Errorf("resumed batches:\n got %q\nwant %q", got, want)
	}

	// A position of a file that is not there, and one that does not fit.
	if _, err := NewPartitionReader(context.Background(), dir, ReaderConfig{
		Resume: []Position{{File: "0.jsonl", Offset: 3, Line: 1}},
	}); err == nil || !strings.Contains(err.Error(), "is not an input") {
		t.Errorf("position of a missing file: %v", err)
	}
	r3, err := NewPartitionReader(context.Background(), dir, ReaderConfig{
		Resume: []Position{{File: "4.jsonl", Offset: 50, Line: 3}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for range r3.Batches() {
	}
	if err := r3.Close(); err == nil || !strings.Contains(err.Error(), "shorter than") {
		t.Errorf("position past the end: %v", err)
	}
}

// TestPartitionReaderAlignedError: a partition read side by side that
// fails has its error recorded before its channel is closed, so that a
// consumer that sees the channel end without a Done batch finds the
// error (the coordinator of a stream does so).
func TestPartitionReaderAlignedError(t *testing.T) {
	dir := t.TempDir()
	gz := gzipBytes(t, strings.Repeat("a record\n", 1000))
	if err := os.WriteFile(filepath.Join(dir, "1.jsonl.gz"), gz[:len(gz)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "2.jsonl"), []byte("b1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 500 {
		r, err := NewPartitionReader(context.Background(), dir, ReaderConfig{Aligned: true})
		if err != nil {
			t.Fatal(err)
		}
		parts, chans := r.Aligned()
		if len(parts) != 2 || parts[0].Name != "1.jsonl.gz" {
			t.Fatalf("partitions %v", parts)
		}
		done := false
		for b := range chans[0] {
			done = done || b.Done
		}
		if done {
			t.Fatal("a truncated gzip file read to its end")
		}
		if err := r.Err(); err == nil {
			t.Fatal("the channel of a failed partition closed before its error was recorded")
		}
		if err := r.Close(); err == nil {
			t.Fatal("Close: no error")
		}
	}
}

// TestPartitionReaderBackpressure: a consumer that does not read stops the
// reader after the channel and the batch being filled are full; then every
// record arrives, in order.
func TestPartitionReaderBackpressure(t *testing.T) {
	const n = 20000
	var sb strings.Builder
	for i := range n {
		fmt.Fprintf(&sb, "{\"i\":%d}\n", i)
	}
	path := writeFile(t, "big.jsonl", []byte(sb.String()))
	const batch, buffer = 10, 3
	r, err := NewPartitionReader(context.Background(), path, ReaderConfig{
		BatchRecords: batch, Buffer: buffer, Source: SourceConfig{BufferBytes: 64},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// Buffer batches in the channel (the first is the Opened one, with no
	// records) and one being sent.
	limit := int64((buffer + 1) * batch)
	waitFor(t, func() bool { return r.read.Load() >= (buffer-1)*batch })
	time.Sleep(20 * time.Millisecond)
	if got := r.read.Load(); got > limit {
		t.Fatalf("the reader read %d records ahead of a stalled consumer; bound %d", got, limit)
	}
	next := 0
	for _, b := range drain(t, r) {
		for _, rec := range b.Records {
			if want := fmt.Sprintf("{\"i\":%d}", next); string(rec.Data) != want || rec.Line != int64(next+1) {
				t.Fatalf("record %d: line %d %q", next, rec.Line, rec.Data)
			}
			next++
		}
		time.Sleep(0) // a slow consumer
	}
	if next != n {
		t.Fatalf("%d records, want %d", next, n)
	}
}

// waitFor polls cond for up to a few seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestPartitionReaderStdin reads standard input (a pipe here) through the
// pump: records come as they are written, the end of the pipe ends the
// partition, and Close in the middle of a blocked read leaks nothing.
func TestPartitionReaderStdin(t *testing.T) {
	base := goroutines()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	r, err := NewPartitionReader(context.Background(), "-", ReaderConfig{Stdin: pr})
	if err != nil {
		t.Fatal(err)
	}
	if b := recv(t, r); !b.Opened || b.Partition.Name != "stdin" {
		t.Fatalf("first batch %+v", b)
	}
	fmt.Fprint(pw, "one\ntw")
	var got []string
	for len(got) < 1 {
		got = append(got, batchLog(recv(t, r))...)
	}
	fmt.Fprint(pw, "o\nthree")
	pw.Close()
	for _, b := range drain(t, r) {
		got = append(got, batchLog(b)...)
	}
	want := []string{"stdin: 1@0:one", "stdin: 2@4:two", "stdin: 3@8:three", "stdin: done@13:3"}
	if !slices.Equal(got, want) {
		t.Errorf("batches:\n got %q\nwant %q", got, want)
	}
	r.Close()

	// Close while the pump is blocked in a read.
	pr2, pw2, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw2.Close()
	defer pr2.Close()
	r2, err := NewPartitionReader(context.Background(), "-", ReaderConfig{Stdin: pr2})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(pw2, "xy\n")
	for b := recv(t, r2); len(b.Records) == 0; b = recv(t, r2) {
	}
	if err := r2.Close(); err != nil {
		t.Fatal(err)
	}
	checkGoroutines(t, base)
}

// recv receives one batch within a few seconds.
func recv(t *testing.T, r *PartitionReader) Batch {
	t.Helper()
	select {
	case b, ok := <-r.Batches():
		if !ok {
			t.Fatalf("channel closed: %v", r.Err())
		}
		return b
	case <-time.After(5 * time.Second):
		t.Fatal("no batch")
	}
	return Batch{}
}

// TestNumberPartitions: a resumed reading numbers the files as its
// checkpoint says, the new ones after every index given before.
func TestNumberPartitions(t *testing.T) {
	for _, tc := range []struct {
		names   []string
		indexes map[string]int
		next    int
		want    []int
		wantNxt int
	}{
		{[]string{"a", "b", "c"}, nil, 0, []int{0, 1, 2}, 3},
		// a (0) deleted, c found later (2) and a new file 0 sorting first.
		{[]string{"0", "b", "c"}, map[string]int{"b": 1, "c": 2}, 3, []int{3, 1, 2}, 4},
		// The next index is above every index given, and above next.
		{[]string{"b", "z"}, map[string]int{"b": 7}, 5, []int{7, 8}, 9},
		{[]string{"b", "z"}, map[string]int{"b": 1}, 5, []int{1, 5}, 6},
	} {
		parts := make([]Partition, len(tc.names))
		for i, n := range tc.names {
			parts[i] = Partition{Index: i, Name: n}
		}
		next := NumberPartitions(parts, tc.indexes, tc.next)
		got := make([]int, len(parts))
		for i, p := range parts {
			got[i] = p.Index
		}
		if !slices.Equal(got, tc.want) || next != tc.wantNxt {
			t.Errorf("NumberPartitions(%v, %v, %d): %v, next %d; want %v, next %d", tc.names, tc.indexes, tc.next, got, next, tc.want, tc.wantNxt)
		}
	}
}

// TestPartitionReaderTruncatedRecordsFirst: the records of a truncated
// gzip file read before its error reach the consumer, every one and in
// order, then the error, as a [FileSource] gives them to a backtest. The
// reader kept the batch being filled and sent only the error, so `run`
// processed fewer records than `backtest` (none of a small file).
func TestPartitionReaderTruncatedRecordsFirst(t *testing.T) {
	var sb strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&sb, "{\"i\":%d}\n", i)
	}
	gz := gzipBytes(t, sb.String())
	gz = gz[:len(gz)*2/3]
	src, err := NewFileSource(bytes.NewReader(gz), "cut.jsonl.gz", SourceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for ; ; want++ {
		if _, err = src.Next(); err != nil {
			break
		}
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) || want == 0 {
		t.Fatalf("the source read %d records, then %v", want, err)
	}
	path := writeFile(t, "cut.jsonl.gz", gz)
	r, err := NewPartitionReader(context.Background(), path, ReaderConfig{BatchRecords: 1000})
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for b := range r.Batches() {
		for _, rec := range b.Records {
			if w := fmt.Sprintf("{\"i\":%d}", got); string(rec.Data) != w {
				t.Fatalf("record %d: %q", got, rec.Data)
			}
			got++
		}
	}
	if err := r.Close(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("Close: %v, want the truncation", err)
	}
	if got != want {
		t.Errorf("the reader sent %d records before the error, the source reads %d", got, want)
	}
}
