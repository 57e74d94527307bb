package runtime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

func goroutines() int { return goruntime.NumGoroutine() }

// checkGoroutines waits (briefly) until no more goroutines run than base,
// the count before the test started its readers.
func checkGoroutines(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for goroutines() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before:\n%s", goroutines(), base, buf[:goruntime.Stack(buf, true)])
		}
		time.Sleep(time.Millisecond)
	}
}

// follow starts a followed reader of path that polls every 2ms.
func follow(t *testing.T, ctx context.Context, path string, cfg ReaderConfig) *PartitionReader {
	t.Helper()
	cfg.Follow = true
	cfg.PollInterval = 2 * time.Millisecond
	r, err := NewPartitionReader(ctx, path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// recvLines receives batches until n lines of batchLog (opens included)
// have come, and returns them.
func recvLines(t *testing.T, r *PartitionReader, n int) []string {
	t.Helper()
	var got []string
	for len(got) < n {
		got = append(got, batchLog(recv(t, r))...)
	}
	if len(got) > n {
		t.Fatalf("more than %d lines: %q", n, got)
	}
	return got
}

// quiet checks that no record arrives for d (batches without records,
// CaughtUp ones, may).
func quiet(t *testing.T, r *PartitionReader, d time.Duration) {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case b, ok := <-r.Batches():
			if !ok {
				t.Fatalf("channel closed: %v", r.Err())
			}
			if len(b.Records) > 0 || b.Opened || b.Done || b.Gone {
				t.Fatalf("unexpected %q", batchLog(b))
			}
		case <-timeout:
			return
		}
	}
}

func appendTo(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestFollowHalfLines: a followed file's line is delivered only once its
// newline has arrived, however it was written; the reader waits at the end
// of the file and reports that it is caught up.
func TestFollowHalfLines(t *testing.T) {
	base := goroutines()
	path := writeFile(t, "live.jsonl", []byte("aa\n"))
	r := follow(t, context.Background(), path, ReaderConfig{})
	defer r.Close()
	if b := recv(t, r); !b.Opened {
		t.Fatalf("first batch %q", batchLog(b))
	}
	// The record comes when the reader waits at the end, in a batch that
	// says it is caught up.
	b := recv(t, r)
	for len(b.Records) == 0 {
		b = recv(t, r)
	}
	if got := batchLog(b); !b.CaughtUp || !slices.Equal(got, []string{"live.jsonl: 1@0:aa"}) {
		t.Fatalf("got %q, caught up %v", got, b.CaughtUp)
	}
	appendTo(t, path, `{"x":`)
	quiet(t, r, 30*time.Millisecond)
	appendTo(t, path, `1,`)
	quiet(t, r, 10*time.Millisecond)
	appendTo(t, path, "\"y\":2}\r\n")
	if got := recvLines(t, r, 1); got[0] != `live.jsonl: 2@3:{"x":1,"y":2}` {
		t.Fatalf("got %q", got)
	}
	// Several lines at once, the last one partial; then the file is left
	// as it is: the partial line never comes.
	appendTo(t, path, "\nb\nc\nd")
	if got := recvLines(t, r, 2); !slices.Equal(got, []string{"live.jsonl: 4@19:b", "live.jsonl: 5@21:c"}) {
		t.Fatalf("got %q", got)
	}
	quiet(t, r, 20*time.Millisecond)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-r.Batches(); ok {
		t.Fatal("batch after Close")
	}
	checkGoroutines(t, base)

	// Resumed at the position after line 3: the partial "d" has grown.
	appendTo(t, path, "d\n")
	r2 := follow(t, context.Background(), path, ReaderConfig{Resume: []Position{{File: "live.jsonl", Offset: 19, Line: 3}}})
	defer r2.Close()
	if got := recvLines(t, r2, 4); !slices.Equal(got, []string{
		"live.jsonl: open@19:3", "live.jsonl: 4@19:b", "live.jsonl: 5@21:c", "live.jsonl: 6@23:dd",
	}) {
		t.Fatalf("resumed: got %q", got)
	}
}

// TestFollowDirectory: every file of a followed directory is followed at
// the same time; a file that appears later is a new partition; cancelling
// the context ends the reader without error and leaks no goroutine.
func TestFollowDirectory(t *testing.T) {
	base := goroutines()
	dir := t.TempDir()
	appendTo(t, filepath.Join(dir, "1.jsonl"), "a1\n")
	appendTo(t, filepath.Join(dir, "2.jsonl.gz"), string(gzipBytes(t, "g1\ng2\n")))
	ctx, cancel := context.WithCancel(context.Background())
	r := follow(t, ctx, dir, ReaderConfig{})
	defer r.Close()
	byPart := func(lines []string) map[string][]string {
		m := map[string][]string{}
		for _, l := range lines {
			name, rest, _ := strings.Cut(l, ": ")
			m[name] = append(m[name], rest)
		}
		return m
	}
	got := byPart(recvLines(t, r, 5))
	if !slices.Equal(got["1.jsonl"], []string{"open@0:0", "1@0:a1"}) ||
		!slices.Equal(got["2.jsonl.gz"], []string{"open@0:0", "1@0:g1", "2@3:g2"}) {
		t.Fatalf("got %q", got)
	}
	appendTo(t, filepath.Join(dir, ".3.jsonl"), "hidden\n")
	appendTo(t, filepath.Join(dir, "0.jsonl"), "z1\n")
	appendTo(t, filepath.Join(dir, "1.jsonl"), "a2\n")
	var indexes []int
	var lines []string
	for len(lines) < 3 {
		b := recv(t, r)
		if b.Opened {
			indexes = append(indexes, b.Partition.Index)
		}
		lines = append(lines, batchLog(b)...)
	}
	got = byPart(lines)
	if !slices.Equal(got["0.jsonl"], []string{"open@0:0", "1@0:z1"}) || !slices.Equal(got["1.jsonl"], []string{"2@3:a2"}) ||
		!slices.Equal(indexes, []int{2}) {
		t.Fatalf("got %q, new indexes %v", got, indexes)
	}
	quiet(t, r, 20*time.Millisecond)
	cancel()
	for range r.Batches() {
	}
	if err := r.Close(); err != nil {
		t.Fatalf("Close after cancel: %v", err)
	}
	checkGoroutines(t, base)
}

// TestFollowDirectoryListedOnChange: a followed directory whose
// modification time stays as it was is not listed again at each poll
// (but every dirForced polls); a file created in it (which moves that
// time) is found and read.
func TestFollowDirectoryListedOnChange(t *testing.T) {
	dir := t.TempDir()
	appendTo(t, filepath.Join(dir, "1.jsonl"), "a1\n")
	hourAgo := time.Now().Add(-time.Hour)
	if err := os.Chtimes(dir, hourAgo, hourAgo); err != nil {
		t.Fatal(err)
	}
	r := follow(t, context.Background(), dir, ReaderConfig{})
	defer r.Close()
	recvLines(t, r, 2)
	waitFor(t, func() bool { return r.listings.Load() >= 1 })
	// 40 polls of 2 ms at most, fewer than dirForced: the first listing
	// alone.
	time.Sleep(80 * time.Millisecond)
	if n := r.listings.Load(); n != 1 {
		t.Fatalf("the unchanged directory was listed %d times in 40 polls or more, want once", n)
	}
	appendTo(t, filepath.Join(dir, "2.jsonl"), "b1\n")
	if got := recvLines(t, r, 2); !slices.Equal(got, []string{"2.jsonl: open@0:0", "2.jsonl: 1@0:b1"}) {
		t.Fatalf("the new file: got %q", got)
	}
	quiet(t, r, 20*time.Millisecond)
}

// TestFollowDanglingLink: a followed directory's symbolic link whose
// target is missing is no partition (and no error, as it is read once) until
// its target appears; then it is read from its start.
func TestFollowDanglingLink(t *testing.T) {
	dir, elsewhere := t.TempDir(), t.TempDir()
	appendTo(t, filepath.Join(dir, "1.jsonl"), "a1\n")
	target := filepath.Join(elsewhere, "later.jsonl")
	if err := os.Symlink(target, filepath.Join(dir, "2.jsonl")); err != nil {
		t.Fatal(err)
	}
	r := follow(t, context.Background(), dir, ReaderConfig{})
	defer r.Close()
	if got := recvLines(t, r, 2); !slices.Equal(got, []string{"1.jsonl: open@0:0", "1.jsonl: 1@0:a1"}) {
		t.Fatalf("got %q", got)
	}
	quiet(t, r, 20*time.Millisecond)
	appendTo(t, target, "b1\n")
	// The directory did not change: the link is found at a forced listing.
	if got := recvLines(t, r, 2); !slices.Equal(got, []string{"2.jsonl: open@0:0", "2.jsonl: 1@0:b1"}) {
		t.Fatalf("the link's target appeared: got %q", got)
	}
}

// TestFollowTruncated: a followed file that shrinks stops the reader with
// an error.
func TestFollowTruncated(t *testing.T) {
	path := writeFile(t, "t.jsonl", []byte("a\nb\n"))
	r := follow(t, context.Background(), path, ReaderConfig{})
	defer r.Close()
	recvLines(t, r, 3)
	if err := os.Truncate(path, 1); err != nil {
		t.Fatal(err)
	}
	for range r.Batches() {
	}
	if err := r.Close(); err == nil || !strings.Contains(err.Error(), "truncated while followed") {
		t.Fatalf("Close = %v", err)
	}
}

// TestFollowBackpressure: a followed file whose consumer stalls holds its
// reader in place while the file grows; nothing is lost once it reads.
func TestFollowBackpressure(t *testing.T) {
	path := writeFile(t, "bp.jsonl", nil)
	r := follow(t, context.Background(), path, ReaderConfig{BatchRecords: 4, Buffer: 2, Source: SourceConfig{BufferBytes: 16}})
	defer r.Close()
	var sb strings.Builder
	const n = 500
	for i := range n {
		sb.WriteString(strings.Repeat("x", i%7+1) + "\n")
	}
	appendTo(t, path, sb.String())
	waitFor(t, func() bool { return r.read.Load() >= 4 })
	time.Sleep(20 * time.Millisecond)
	if got := r.read.Load(); got > 3*4 {
		t.Fatalf("%d records read ahead of a stalled consumer", got)
	}
	next := 0
	for next < n {
		for _, rec := range recv(t, r).Records {
			if want := strings.Repeat("x", next%7+1); string(rec.Data) != want {
				t.Fatalf("record %d: %q", next, rec.Data)
			}
			next++
		}
	}
	quiet(t, r, 10*time.Millisecond)
}

// TestFollowUnreadUnmodified: a followed file's batches say how many of
// its bytes the reader had not read yet (its backlog: the file less what
// was read, down to 0 at its end). The first time the reader reaches the
// end of a directory's file it has opened, the batch says how long the
// file had not been modified, when that is -close-inactive or more (a
// backlog); not later, when the reader has watched the file itself (a
// modification time need not follow the writes), nor for a file modified
// more lately.
func TestFollowUnreadUnmodified(t *testing.T) {
	var sb strings.Builder
	const n = 2000
	for i := range n {
		fmt.Fprintf(&sb, "%04d%s\n", i, strings.Repeat("x", 95))
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "backlog.jsonl")
	appendTo(t, path, sb.String())
	appendTo(t, filepath.Join(dir, "recent.jsonl"), "r\n")
	ago := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(path, ago, ago); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(dir, "recent.jsonl"), time.Now().Add(-30*time.Minute), time.Now().Add(-30*time.Minute)); err != nil {
		t.Fatal(err)
	}
	size := int64(sb.Len())
	// Polls far apart next to the append and the time put back below, so
	// that the reader's look at the file falls between the two once in
	// thousands of runs, not once in forty (which passed without the fix:
	// the reader saw the append's time).
	r, err := NewPartitionReader(context.Background(), dir, ReaderConfig{Follow: true, PollInterval: 250 * time.Millisecond,
		BatchRecords: 100, CloseInactive: time.Hour, Source: SourceConfig{BufferBytes: 4096}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var first, last Batch
	var recent []Batch
	for records := 0; records < n || !last.CaughtUp; {
		b := recv(t, r)
		if b.Partition.Name == "recent.jsonl" {
			recent = append(recent, b)
			continue
		}
		if len(b.Records) > 0 && records == 0 {
			first = b
		}
		records += len(b.Records)
		last = b
	}
	if first.Unread <= 0 || first.Unread != size-first.Read {
		t.Errorf("the first batch: %d bytes unread, read %d of %d; want the rest, more than 0", first.Unread, first.Read, size)
	}
	if first.Unmodified != 0 {
		t.Errorf("the first batch, not caught up: unmodified for %v, want 0", first.Unmodified)
	}
	if last.Unread != 0 || last.Unmodified < 2*time.Hour || last.Unmodified > 3*time.Hour {
		t.Errorf("the caught-up batch: %d bytes unread, unmodified for %v; want 0 and the file's 2h", last.Unread, last.Unmodified)
	}
	for _, b := range recent {
		if b.Unmodified != 0 {
			t.Errorf("recent.jsonl, modified 30m ago (under -close-inactive): unmodified for %v, want 0", b.Unmodified)
		}
	}
	// Written to again, with its modification time put back: the reader
	// has seen it grow, and no longer goes by the time.
	appendTo(t, path, "more\n")
	if err := os.Chtimes(path, ago, ago); err != nil {
		t.Fatal(err)
	}
	for {
		b := recv(t, r)
		if b.Partition.Name != "backlog.jsonl" || len(b.Records) == 0 {
			continue
		}
		if b.Unmodified != 0 {
			t.Errorf("the end after an append: unmodified for %v, want 0 (the reader watched the file itself)", b.Unmodified)
		}
		break
	}
}

// TestFollowQuietFile: a followed file with nothing new for quietPolls
// polls is looked at every quietFactor polls, and at every poll again once
// it has grown: a directory of files that no longer grow (rotated ones)
// cost a poll of each every 100 ms for ever (a thousand files: ten
// thousand looks a second, 9 % of a core).
func TestFollowQuietFile(t *testing.T) {
	path := writeFile(t, "quiet.jsonl", []byte("a\n"))
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const poll = time.Millisecond
	var waits []time.Duration
	grow := quietPolls + 5 // the poll after which the file grows
	r := &followReader{ctx: ctx, f: f, poll: poll, wait: func() error { return nil },
		sleep: func(_ context.Context, d time.Duration) error {
			waits = append(waits, d)
			if len(waits) == grow {
				appendTo(t, path, "b\n")
			}
			return nil
		}}
	buf := make([]byte, 64)
	if n, err := r.Read(buf); err != nil || string(buf[:n]) != "a\n" {
		t.Fatalf("first read: %q, %v", buf[:n], err)
	}
	if n, err := r.Read(buf); err != nil || string(buf[:n]) != "b\n" {
		t.Fatalf("read after %d polls: %q, %v", grow, buf[:n], err)
	}
	for i, d := range waits {
		want := poll
		if i >= quietPolls {
			want = quietFactor * poll
		}
		if d != want {
			t.Fatalf("wait %d of %d: %v, want %v", i, len(waits), d, want)
		}
	}
	if len(waits) != grow {
		t.Fatalf("%d waits before the file grew, want %d", len(waits), grow)
	}
	// Grown, the file is polled at the poll interval again.
	waits = nil
	go func() {
		time.Sleep(20 * time.Millisecond)
		cancel()
	}()
	r.sleep = func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		return sleepCtx(ctx, d)
	}
	if _, err := r.Read(buf); err != context.Canceled {
		t.Fatalf("read at the end after the cancel: %v", err)
	}
	if len(waits) == 0 || waits[0] != poll {
		t.Fatalf("waits after the file grew: %v, want %v first", waits, poll)
	}
}

// openFDs counts the open file descriptors of the process.
func openFDs(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// recvUntilClosed receives batches until each partition named in names
// has sent a Closed batch, and returns their lines (batchLog) by
// partition.
func recvUntilClosed(t *testing.T, r *PartitionReader, names ...string) map[string][]string {
	t.Helper()
	waiting := map[string]bool{}
	for _, name := range names {
		waiting[name] = true
	}
	lines := map[string][]string{}
	for len(waiting) > 0 {
		b := recv(t, r)
		lines[b.Partition.Name] = append(lines[b.Partition.Name], batchLog(b)...)
		if b.Closed {
			delete(waiting, b.Partition.Name)
		}
	}
	return lines
}

// TestFollowCloseInactive: the files of a followed directory that have
// nothing new for CloseInactive are closed and their goroutines end (a
// directory of rotated files kept a descriptor and a goroutine of each
// for ever); a closed file that grows is opened again and read on from
// its position, once, as are a partial last line completed and a gzip
// member appended; a resumed reader closes them again, and a closed file
// truncated is an error.
func TestFollowCloseInactive(t *testing.T) {
	if goruntime.GOOS != "linux" {
		t.Skip("counts descriptors in /proc/self/fd")
	}
	base, baseFDs := goroutines(), openFDs(t)
	dir := t.TempDir()
	const n = 300
	var names []string
	for i := range n {
		name := fmt.Sprintf("f%03d.jsonl", i)
		names = append(names, name)
		appendTo(t, filepath.Join(dir, name), fmt.Sprintf("%d-a\n", i))
	}
	appendTo(t, filepath.Join(dir, "f007.jsonl"), "7-b") // a partial last line
	appendTo(t, filepath.Join(dir, "g.jsonl.gz"), string(gzipBytes(t, "g1\n")))
	appendTo(t, filepath.Join(dir, "empty.jsonl"), "") // closed while it is opened
	names = append(names, "g.jsonl.gz", "empty.jsonl")
	cfg := ReaderConfig{CloseInactive: 20 * time.Millisecond}
	r := follow(t, context.Background(), dir, cfg)
	defer r.Close()
	got := recvUntilClosed(t, r, names...)
	if !slices.Equal(got["f007.jsonl"], []string{"f007.jsonl: open@0:0", "f007.jsonl: 1@0:7-a", "f007.jsonl: closed@4:1"}) ||
		!slices.Equal(got["f123.jsonl"], []string{"f123.jsonl: open@0:0", "f123.jsonl: 1@0:123-a", "f123.jsonl: closed@6:1"}) ||
		!slices.Equal(got["g.jsonl.gz"], []string{"g.jsonl.gz: open@0:0", "g.jsonl.gz: 1@0:g1", "g.jsonl.gz: closed@3:1"}) ||
		!slices.Equal(got["empty.jsonl"], []string{"empty.jsonl: open@0:0", "empty.jsonl: closed@0:0"}) {
		t.Fatalf("before the close: %q, %q, %q, %q", got["f007.jsonl"], got["f123.jsonl"], got["g.jsonl.gz"], got["empty.jsonl"])
	}
	// The directory scan alone is left (and the reader's own goroutine
	// that closes its channel): not one goroutine or descriptor a file.
	const margin = 10
	waitFor(t, func() bool { return goroutines() <= base+margin && openFDs(t) <= baseFDs+margin })

	// Grown, closed files are read on from their positions, once each,
	// and closed again.
	appendTo(t, filepath.Join(dir, "f007.jsonl"), "x\n")
	appendTo(t, filepath.Join(dir, "f123.jsonl"), "b\nc\n")
	appendTo(t, filepath.Join(dir, "g.jsonl.gz"), string(gzipBytes(t, "g2\n")))
	appendTo(t, filepath.Join(dir, "empty.jsonl"), "e1\n")
	got = recvUntilClosed(t, r, "f007.jsonl", "f123.jsonl", "g.jsonl.gz", "empty.jsonl")
	if len(got) != 4 ||
		!slices.Equal(got["empty.jsonl"], []string{"empty.jsonl: 1@0:e1", "empty.jsonl: closed@3:1"}) ||
		!slices.Equal(got["f007.jsonl"], []string{"f007.jsonl: 2@4:7-bx", "f007.jsonl: closed@9:2"}) ||
		!slices.Equal(got["f123.jsonl"], []string{"f123.jsonl: 2@6:b", "f123.jsonl: 3@8:c", "f123.jsonl: closed@10:3"}) ||
		!slices.Equal(got["g.jsonl.gz"], []string{"g.jsonl.gz: 2@3:g2", "g.jsonl.gz: closed@6:2"}) {
		t.Fatalf("after the appends: %q", got)
	}
	quiet(t, r, 50*time.Millisecond)
	waitFor(t, func() bool { return goroutines() <= base+margin && openFDs(t) <= baseFDs+margin })
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	checkGoroutines(t, base)

	// Resumed at the positions of closed files (a checkpoint's): each is
	// opened at its position and closed again; what was appended while
	// no reader ran is read once.
	resume := []Position{{File: "f007.jsonl", Offset: 9, Line: 2}, {File: "f123.jsonl", Offset: 10, Line: 3},
		{File: "g.jsonl.gz", Offset: 6, Line: 2}, {File: "f050.jsonl", Offset: 5, Line: 1}}
	appendTo(t, filepath.Join(dir, "f050.jsonl"), "d\n")
	cfg.Resume = resume
	r2 := follow(t, context.Background(), dir, cfg)
	defer r2.Close()
	got = recvUntilClosed(t, r2, names...)
	if !slices.Equal(got["f050.jsonl"], []string{"f050.jsonl: open@5:1", "f050.jsonl: 2@5:d", "f050.jsonl: closed@7:2"}) ||
		!slices.Equal(got["f007.jsonl"], []string{"f007.jsonl: open@9:2", "f007.jsonl: closed@9:2"}) ||
		!slices.Equal(got["g.jsonl.gz"], []string{"g.jsonl.gz: open@6:2", "g.jsonl.gz: closed@6:2"}) {
		t.Fatalf("resumed: %q, %q, %q", got["f050.jsonl"], got["f007.jsonl"], got["g.jsonl.gz"])
	}
	waitFor(t, func() bool { return goroutines() <= base+margin && openFDs(t) <= baseFDs+margin })

	// A closed file truncated is an error, as an open one is.
	if err := os.Truncate(filepath.Join(dir, "f200.jsonl"), 2); err != nil {
		t.Fatal(err)
	}
	for range r2.Batches() {
	}
	if err := r2.Close(); err == nil || !strings.Contains(err.Error(), "f200.jsonl: truncated while followed (2 bytes, 6 read)") {
		t.Fatalf("Close = %v", err)
	}
	checkGoroutines(t, base)
}

// TestFollowClosedReplaced: a closed file deleted is no error: its
// partition ends with a Gone batch at its position, once, and a file
// created later under its name is a new partition read from its start; a
// closed file whose name now holds another file (renamed over it) is an
// error: read at the old file's position, its lines would be lost or
// wrong.
func TestFollowClosedReplaced(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	appendTo(t, a, "a1\n")
	appendTo(t, b, "b1\n")
	r := follow(t, context.Background(), dir, ReaderConfig{CloseInactive: 10 * time.Millisecond})
	defer r.Close()
	recvUntilClosed(t, r, "a.jsonl", "b.jsonl")
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	var gone Batch
	for gone = recv(t, r); !gone.Gone; gone = recv(t, r) {
		if len(gone.Records) > 0 || gone.Opened || gone.Done {
			t.Fatalf("before a.jsonl is gone: %q", batchLog(gone))
		}
	}
	if log := batchLog(gone); !slices.Equal(log, []string{"a.jsonl: gone@3:1"}) || gone.Partition.Index != 0 || len(gone.Records) != 0 {
		t.Fatalf("a.jsonl deleted while closed: %q (partition %d), want it gone at its position, partition 0", log, gone.Partition.Index)
	}
	quiet(t, r, 100*time.Millisecond) // five scans of the closed files: gone once
	appendTo(t, a, "new1\n")
	got := recvUntilClosed(t, r, "a.jsonl")
	if want := []string{"a.jsonl: open@0:0", "a.jsonl: 1@0:new1", "a.jsonl: closed@5:1"}; !slices.Equal(got["a.jsonl"], want) {
		t.Fatalf("a new a.jsonl: %q, want %q", got["a.jsonl"], want)
	}
	appendTo(t, filepath.Join(dir, ".b.tmp"), "b1\nb2\n")
	if err := os.Rename(filepath.Join(dir, ".b.tmp"), b); err != nil {
		t.Fatal(err)
	}
	for range r.Batches() {
	}
	if err := r.Close(); err == nil || !strings.Contains(err.Error(), "b.jsonl: replaced by another file while followed") {
		t.Fatalf("Close = %v", err)
	}
}

// TestFollowResumeClosed: resumed at the end of a plain file not modified
// for CloseInactive, a followed directory's partition starts closed (a
// restart over a directory of rotated files opened every one of them for
// CloseInactive); a file modified lately, one with more to read and a
// gzip file are opened; one started closed that grows is read on.
func TestFollowResumeClosed(t *testing.T) {
	if goruntime.GOOS != "linux" {
		t.Skip("counts descriptors in /proc/self/fd")
	}
	base, baseFDs := goroutines(), openFDs(t)
	dir := t.TempDir()
	old := time.Now().Add(-2 * time.Hour)
	var names []string
	var resume []Position
	add := func(name, data string, modified time.Time, pos Position) {
		t.Helper()
		path := filepath.Join(dir, name)
		appendTo(t, path, data)
		if err := os.Chtimes(path, modified, modified); err != nil {
			t.Fatal(err)
		}
		resume = append(resume, pos)
	}
	const n = 100
	for i := range n {
		name := fmt.Sprintf("r%03d.jsonl", i)
		names = append(names, name)
		add(name, "x\n", old, Position{File: name, Offset: 2, Line: 1})
	}
	add("fresh.jsonl", "x\n", time.Now(), Position{File: "fresh.jsonl", Offset: 2, Line: 1})
	add("more.jsonl", "x\ny\n", old, Position{File: "more.jsonl", Offset: 2, Line: 1})
	add("g.jsonl.gz", string(gzipBytes(t, "g1\n")), old, Position{File: "g.jsonl.gz", Offset: 3, Line: 1})
	r := follow(t, context.Background(), dir, ReaderConfig{CloseInactive: time.Hour, Resume: resume})
	defer r.Close()
	got := map[string][]string{}
	closed := 0
	for closed < n || len(got["more.jsonl"]) < 2 || len(got["fresh.jsonl"]) < 1 || len(got["g.jsonl.gz"]) < 1 {
		b := recv(t, r)
		got[b.Partition.Name] = append(got[b.Partition.Name], batchLog(b)...)
		if b.Closed {
			closed++
		}
	}
	if !slices.Equal(got["r042.jsonl"], []string{"r042.jsonl: open@2:1", "r042.jsonl: closed@2:1"}) ||
		!slices.Equal(got["more.jsonl"], []string{"more.jsonl: open@2:1", "more.jsonl: 2@2:y"}) ||
		!slices.Equal(got["fresh.jsonl"], []string{"fresh.jsonl: open@2:1"}) ||
		!slices.Equal(got["g.jsonl.gz"], []string{"g.jsonl.gz: open@3:1"}) || closed != n {
		t.Fatalf("%d closed; %q, %q, %q, %q", closed, got["r042.jsonl"], got["more.jsonl"], got["fresh.jsonl"], got["g.jsonl.gz"])
	}
	// Three files open, a goroutine and a descriptor each.
	const margin = 10
	waitFor(t, func() bool { return goroutines() <= base+3+margin && openFDs(t) <= baseFDs+3+margin })
	appendTo(t, filepath.Join(dir, "r050.jsonl"), "z\n")
	if got := recvLines(t, r, 1); !slices.Equal(got, []string{"r050.jsonl: 2@2:z"}) {
		t.Fatalf("the closed file grown: %q", got)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	checkGoroutines(t, base)
}

// TestFollowClosedRecreated: a closed file deleted and created again
// under its name before the scan of the closed files may get the same
// inode (ext4 gives it again), so os.SameFile took it for the closed file
// grown, and read it on from the old position: the new file's first line
// ("xx", as long as the old "a1") was lost, its second read as line 2 of
// the old partition. What was read is not there any more: the old
// partition ends (Gone) and the file is a new partition, read from its
// start. The same file written over in place (its inode surely the same)
// checks it whatever the file system does; deleted and created again, the
// file may also get another inode, which is an error as for a file
// renamed over it (the scan cannot tell them apart): never lines lost.
func TestFollowClosedRecreated(t *testing.T) {
	want := []string{"a.jsonl: gone@3:1", "a.jsonl: open@0:0", "a.jsonl: 1@0:xx", "a.jsonl: 2@3:new2", "a.jsonl: closed@8:2"}
	t.Run("written over", func(t *testing.T) {
		r, a := followA(t, ReaderConfig{CloseInactive: 10 * time.Millisecond, PollInterval: 20 * time.Millisecond})
		recvUntilClosed(t, r, "a.jsonl")
		f, err := os.OpenFile(a, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte("xx\nnew2\n"), 0); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		log, indexes := recvLog(t, r, 5)
		if !slices.Equal(log, want) || indexes[0] != 0 || indexes[len(indexes)-1] != 1 {
			t.Fatalf("a.jsonl written over: %q (partitions %v), want %q (0, then 1)", log, indexes, want)
		}
	})
	t.Run("deleted and created again", func(t *testing.T) {
		r, a := followA(t, ReaderConfig{CloseInactive: 10 * time.Millisecond, PollInterval: 20 * time.Millisecond})
		recvUntilClosed(t, r, "a.jsonl")
		before, err := os.Stat(a)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(a); err != nil {
			t.Fatal(err)
		}
		appendTo(t, a, "xx\nnew2\n")
		after, err := os.Stat(a)
		if err != nil {
			t.Fatal(err)
		}
		if !os.SameFile(before, after) {
			t.Log("the new a.jsonl has another inode")
			for range r.Batches() {
			}
			if err := r.Close(); err == nil || !strings.Contains(err.Error(), "a.jsonl: replaced by another file while followed") {
				t.Fatalf("Close = %v", err)
			}
			return
		}
		t.Log("the new a.jsonl has the old one's inode")
		if log, indexes := recvLog(t, r, 5); !slices.Equal(log, want) || indexes[0] != 0 || indexes[len(indexes)-1] != 1 {
			t.Fatalf("a.jsonl deleted and created again: %q (partitions %v), want %q (0, then 1)", log, indexes, want)
		}
	})
}

// TestFollowOpenDeletedRecreated: an open file deleted, and another
// created under its name before the first is closed for quiet, ends its
// partition once closed, as the docs say of an open file deleted, and the
// new file is a new partition read from its start: the run stopped with
// "replaced by another file while followed" (os.SameFile failed, as for
// a file renamed away, which has a name left and still stops the run).
func TestFollowOpenDeletedRecreated(t *testing.T) {
	r, a := followA(t, ReaderConfig{CloseInactive: 200 * time.Millisecond, PollInterval: 10 * time.Millisecond})
	first, _ := recvLog(t, r, 2)
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	appendTo(t, a, "b1\n")
	log, indexes := recvLog(t, r, 5)
	log = append(first, log...)
	want := []string{"a.jsonl: open@0:0", "a.jsonl: 1@0:a1", "a.jsonl: closed@3:1", "a.jsonl: gone@3:1", "a.jsonl: open@0:0", "a.jsonl: 1@0:b1", "a.jsonl: closed@3:1"}
	if !slices.Equal(log, want) || indexes[0] != 0 || indexes[len(indexes)-1] != 1 {
		t.Fatalf("a.jsonl deleted while open and created again: %q (partitions %v), want %q", log, indexes, want)
	}
}

// followA follows a directory of one file, a.jsonl, holding "a1", with
// cfg; it returns the reader (closed at the end of t) and the file's path.
func followA(t *testing.T, cfg ReaderConfig) (*PartitionReader, string) {
	t.Helper()
	dir := t.TempDir()
	a := filepath.Join(dir, "a.jsonl")
	appendTo(t, a, "a1\n")
	r := follow(t, context.Background(), dir, cfg)
	t.Cleanup(func() { r.Close() })
	return r, a
}

// recvLog receives batches of r until they make n lines of batchLog, and
// returns those and the partition index of each batch.
func recvLog(t *testing.T, r *PartitionReader, n int) (log []string, indexes []int) {
	t.Helper()
	for len(log) < n {
		b := recv(t, r)
		log = append(log, batchLog(b)...)
		indexes = append(indexes, b.Partition.Index)
	}
	return log, indexes
}

// TestFollowOpenReplaced: a followed file that is never closed (a single
// file, or a directory's without CloseInactive), renamed away and another
// created under its name, is read on through its descriptor while it
// grows; once quiet for quietPolls polls, the reading stops with an error
// that says so (it stood still without a word: the new file never read).
func TestFollowOpenReplaced(t *testing.T) {
	for _, inDir := range []bool{false, true} {
		t.Run(map[bool]string{false: "file", true: "directory"}[inDir], func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "a.jsonl")
			appendTo(t, path, "a1\n")
			in := path
			if inDir {
				in = dir
			}
			r := follow(t, context.Background(), in, ReaderConfig{PollInterval: time.Millisecond})
			defer r.Close()
			// The file's first line, read: the file is open. (Its Opened
			// batch alone comes before the open: a rename right after it
			// had the new file opened under the name, read and followed
			// for ever, one run in tens under -race.)
			if got := recvLines(t, r, 2); got[1] != "a.jsonl: 1@0:a1" {
				t.Fatalf("the first batches: %q", got)
			}
			moved := filepath.Join(t.TempDir(), "a.jsonl.1")
			if err := os.Rename(path, moved); err != nil {
				t.Fatal(err)
			}
			appendTo(t, moved, "a2\n") // written after the rotation: read on
			appendTo(t, path, "b1\nb2\n")
			var lines []string
			for b := range r.Batches() {
				lines = append(lines, batchLog(b)...)
			}
			if !slices.Contains(lines, "a.jsonl: 2@3:a2") || slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, ":b") }) {
				t.Errorf("batches: %q, want the moved file's new line and none of the new file's", lines)
			}
			if err := r.Close(); err == nil || !strings.Contains(err.Error(), "a.jsonl: line 3: replaced by another file while followed: another file has taken its name") {
				t.Fatalf("Close = %v", err)
			}
		})
	}
}
