package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"
)

// TestCtxReader: it passes on what the reader gives, byte for byte, its
// error after the last byte; a Read waiting on a reader that gives
// nothing returns the context's error once it is done, and so does every
// Read after.
func TestCtxReader(t *testing.T) {
	src := strings.Repeat("a line of input\n", 20000)
	got, err := io.ReadAll(newCtxReader(context.Background(), iotest.HalfReader(strings.NewReader(src))))
	if err != nil || string(got) != src {
		t.Fatalf("ReadAll: %d bytes, %v; want the %d of the source", len(got), err, len(src))
	}
	if err := iotest.TestReader(newCtxReader(context.Background(), strings.NewReader(src)), []byte(src)); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if _, err := io.ReadAll(newCtxReader(context.Background(), iotest.ErrReader(boom))); err != boom {
		t.Errorf("a failing reader: %v, want its error", err)
	}

	pr, pw := io.Pipe() // a writer that writes one line, then idles
	defer pw.Close()
	go pw.Write([]byte("first\n"))
	ctx, cancel := context.WithCancel(context.Background())
	r := newCtxReader(ctx, pr)
	buf := make([]byte, 100)
	if n, err := r.Read(buf); err != nil || string(buf[:n]) != "first\n" {
		t.Fatalf("the first line: %q, %v", buf[:n], err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := r.Read(buf)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("a Read with nothing to read returned %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the waiting Read, cancelled: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting Read did not return once its context was done")
	}
	if _, err := r.Read(buf); !errors.Is(err, context.Canceled) {
		t.Errorf("a Read after: %v, want context.Canceled", err)
	}
}

// interruptOnStdin runs the command of args in-process with standard
// input a pipe that holds written and then idles, cancelling its context
// (Ctrl-C) after wait; it returns the exit status, the outputs and how
// long the command took.
func interruptOnStdin(t *testing.T, written string, wait time.Duration, args ...string) (code int, stdout, stderr string, took time.Duration) {
	t.Helper()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	if _, err := pw.WriteString(written); err != nil {
		t.Fatal(err)
	}
	saved := os.Stdin
	os.Stdin = pr
	defer func() { os.Stdin = saved }()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(wait, cancel)
	var out, errOut bytes.Buffer
	began := time.Now()
	err = run(ctx, args, &out, &errOut)
	took = time.Since(began)
	return exitCode(err, &errOut), out.String(), errOut.String(), took
}

// TestBacktestStdinInterrupted: Ctrl-C stops a backtest reading standard
// input that nothing writes at once, with the partial summary: it waited
// for the writer's next line, or its end (a pipe from a tail -f, a
// producer that idles).
func TestBacktestStdinInterrupted(t *testing.T) {
	rules := writeFile(t, t.TempDir(), "good.cep", goodSrc)
	for _, c := range []struct {
		name, written, want string
		wait                time.Duration // before Ctrl-C: the line read by then on a loaded host
	}{
		{"a line written", `{"ts": 1, "k": "x", "name": "a"}` + "\n", "cepheus: backtest interrupted at line 1; the summary above is partial\n", time.Second},
		{"nothing written", "", "cepheus: backtest interrupted before its first line\n", 200 * time.Millisecond},
	} {
		code, _, stderr, took := interruptOnStdin(t, c.written, c.wait, "backtest", "-rules", rules, "-events", "-", "-time-unit", "ms")
		if code != 130 || !strings.HasSuffix(stderr, c.want) || took > 10*time.Second {
			t.Errorf("%s, then Ctrl-C: exit %d after %v, stderr\n%s\nwant 130 within 10 s and stderr ending %q", c.name, code, took.Round(time.Millisecond), stderr, c.want)
		}
	}
}

// TestCheckFmtStdinInterrupted: Ctrl-C stops check - and fmt waiting for
// standard input at once (they waited for its end).
func TestCheckFmtStdinInterrupted(t *testing.T) {
	for _, args := range [][]string{{"check", "-"}, {"fmt"}, {"fmt", "-d", "-"}} {
		code, stdout, stderr, took := interruptOnStdin(t, "", 100*time.Millisecond, args...)
		want := "cepheus: " + args[0] + " interrupted while reading standard input\n"
		if code != 130 || stderr != want || stdout != "" || took > 10*time.Second {
			t.Errorf("%s, then Ctrl-C: exit %d after %v, stdout %q, stderr %q; want 130 within 10 s and %q", strings.Join(args, " "), code, took.Round(time.Millisecond), stdout, stderr, want)
		}
	}
}

// countingReader counts the Reads made of r.
type countingReader struct {
	r     io.Reader
	calls atomic.Int32
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.calls.Add(1)
	return c.r.Read(p)
}

// TestCtxReaderZeroLength: a Read into an empty buffer returns 0, nil at
// once (io.Reader) and starts no read of the source, which may wait for
// input that a zero-length Read has no room for; later Reads get the
// source's bytes.
func TestCtxReaderZeroLength(t *testing.T) {
	src := &countingReader{r: strings.NewReader("first\n")}
	r := newCtxReader(context.Background(), src)
	if n, err := r.Read(nil); n != 0 || err != nil {
		t.Fatalf("Read(nil) = %d, %v; want 0, nil", n, err)
	}
	// Had it started one, Read(nil) would have waited for its result.
	if calls := src.calls.Load(); calls != 0 {
		t.Fatalf("Read(nil) made %d reads of the source, want none", calls)
	}
	if got, err := io.ReadAll(r); err != nil || string(got) != "first\n" {
		t.Fatalf("then ReadAll: %q, %v; want the source's line", got, err)
	}
}
