package runtime

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// readAll drains a source into "line@offset:data" strings, with
// "!reason" appended for records that carry a reason.
func readAll(t *testing.T, s Source) []string {
	t.Helper()
	var out []string
	for {
		rec, err := s.Next()
		if err == io.EOF {
			// EOF is sticky.
			if _, err := s.Next(); err != io.EOF {
				t.Fatalf("Next after EOF = %v, want io.EOF", err)
			}
			return out
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		r := fmt.Sprintf("%d@%d:%s", rec.Line, rec.Offset, rec.Data)
		if rec.Reason != "" {
			r += "!" + rec.Reason
		}
		out = append(out, r)
	}
}

func gzipBytes(t *testing.T, members ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	for _, m := range members {
		w := gzip.NewWriter(&buf)
		if _, err := io.WriteString(w, m); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestFileSourceLines(t *testing.T) {
	cases := []struct {
		name string
		in   string
		cfg  SourceConfig
		want []string
	}{
		{name: "empty", in: "", want: nil},
		{name: "only newlines", in: "\n\r\n\n", want: nil},
		{name: "lf", in: "a\nbb\nccc\n", want: []string{"1@0:a", "2@2:bb", "3@5:ccc"}},
		{name: "no final newline", in: "a\nbb", want: []string{"1@0:a", "2@2:bb"}},
		{name: "crlf", in: "a\r\nbb\r\n\r\nc", want: []string{"1@0:a", "2@3:bb", "4@9:c"}},
		{name: "blank lines counted", in: "\n\n  \t\nx\n \r\ny\n\n", want: []string{"4@6:x", "6@11:y"}},
		{name: "byte order mark", in: "\xef\xbb\xbfa\n\xef\xbb\xbfb\n", want: []string{"1@3:a", "2@5:\xef\xbb\xbfb"}},
		{name: "only a byte order mark", in: "\xef\xbb\xbf", want: nil},
		{name: "lone cr kept", in: "a\rb\n", want: []string{"1@0:a\rb"}},
		{name: "only crlf stripped once", in: "a\r\r\n", want: []string{"1@0:a\r"}},
		{name: "long lines, small buffer", cfg: SourceConfig{BufferBytes: 16},
			in:   strings.Repeat("x", 40) + "\r\n" + "y\n" + strings.Repeat("z", 33),
			want: []string{"1@0:" + strings.Repeat("x", 40), "2@42:y", "3@44:" + strings.Repeat("z", 33)}},
		{name: "too long", cfg: SourceConfig{MaxLineBytes: 4},
			in: "abcd\nabcde\r\nab\nabcd\r\nabcdefgh",
			want: []string{"1@0:abcd", "2@5:abcde!line too long: more than 4 bytes", "3@12:ab", "4@15:abcd",
				"5@21:abcdefgh!line too long: more than 4 bytes"}},
		{name: "too long, small buffer", cfg: SourceConfig{MaxLineBytes: 20, BufferBytes: 16},
			in: strings.Repeat("a", 20) + "\r\n" + strings.Repeat("b", 21) + "\n" + strings.Repeat("c", 100) + "\nok\n",
			want: []string{"1@0:" + strings.Repeat("a", 20),
				"2@22:" + strings.Repeat("b", 21) + "!line too long: more than 20 bytes",
				"3@44:" + strings.Repeat("c", 22) + "!line too long: more than 20 bytes",
				"4@145:ok"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			check := func(t *testing.T, s *FileSource) {
				t.Helper()
				got := readAll(t, s)
				if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
					t.Errorf("records:\n got %q\nwant %q", got, c.want)
				}
			}
			t.Run("reader", func(t *testing.T) {
				s, err := NewFileSource(strings.NewReader(c.in), "test", c.cfg)
				if err != nil {
					t.Fatal(err)
				}
				check(t, s)
				if read, total := s.Progress(); read != int64(len(c.in)) || total != -1 {
					t.Errorf("Progress = %d, %d; want %d, -1", read, total, len(c.in))
				}
			})
			t.Run("file", func(t *testing.T) {
				s, err := OpenFileSource(writeFile(t, "in.jsonl", []byte(c.in)), c.cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				check(t, s)
				if read, total := s.Progress(); read != int64(len(c.in)) || total != int64(len(c.in)) {
					t.Errorf("Progress = %d, %d; want %d, %d", read, total, len(c.in), len(c.in))
				}
			})
			t.Run("gzip", func(t *testing.T) {
				gz := gzipBytes(t, c.in)
				s, err := OpenFileSource(writeFile(t, "in.jsonl.gz", gz), c.cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				check(t, s)
				if read, total := s.Progress(); read != int64(len(gz)) || total != int64(len(gz)) {
					t.Errorf("Progress = %d, %d; want %d, %d", read, total, len(gz), len(gz))
				}
			})
		})
	}
}

func TestFileSourceGzip(t *testing.T) {
	t.Run("magic without extension", func(t *testing.T) {
		s, err := OpenFileSource(writeFile(t, "in.jsonl", gzipBytes(t, "a\nb\n")), SourceConfig{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if got := readAll(t, s); strings.Join(got, ",") != "1@0:a,2@2:b" {
			t.Errorf("records %q", got)
		}
	})
	t.Run("concatenated members", func(t *testing.T) {
		s, err := NewFileSource(bytes.NewReader(gzipBytes(t, "a\nb", "c\n", "d\n")), "x.gz", SourceConfig{})
		if err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, s); strings.Join(got, ",") != "1@0:a,2@2:bc,3@5:d" {
			t.Errorf("records %q", got)
		}
	})
	t.Run("extension without magic", func(t *testing.T) {
		_, err := OpenFileSource(writeFile(t, "in.jsonl.gz", []byte("{}\n")), SourceConfig{})
		if err == nil || !strings.Contains(err.Error(), "not gzip data") {
			t.Fatalf("err = %v, want not gzip data", err)
		}
	})
	t.Run("empty .gz", func(t *testing.T) {
		if _, err := OpenFileSource(writeFile(t, "in.jsonl.gz", nil), SourceConfig{}); err == nil {
			t.Fatal("no error for an empty .gz file")
		}
	})
	t.Run("truncated", func(t *testing.T) {
		gz := gzipBytes(t, strings.Repeat("{\"a\":1}\n", 1000))
		s, err := NewFileSource(bytes.NewReader(gz[:len(gz)-10]), "x.gz", SourceConfig{})
		if err != nil {
			t.Fatal(err)
		}
		var n int
		for {
			_, err = s.Next()
			if err != nil {
				break
			}
			n++
		}
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("after %d records: err = %v, want io.ErrUnexpectedEOF", n, err)
		}
		// The reader's "unexpected EOF" alone does not say that the file is
		// cut; every command that reads a source (run as well as backtest)
		// shows this message.
		if !strings.Contains(err.Error(), "a truncated .gz file?") {
			t.Errorf("err = %v, want it to say the .gz file looks truncated", err)
		}
		if _, err2 := s.Next(); err2 != err {
			t.Errorf("error not sticky: %v then %v", err, err2)
		}
	})
	// Bytes after the last member that start no member (trailing garbage,
	// zero padding) are an error that says so, after every line of the
	// members: not "unexpected EOF" (a truncated member) nor "invalid
	// header", which the reader said of them.
	t.Run("trailing data", func(t *testing.T) {
		for name, tail := range map[string]string{"garbage": "garbage\n", "zero padding": strings.Repeat("\x00", 512), "one byte": "\x1f"} {
			data := append(gzipBytes(t, "a\nb\n", "c\n"), tail...)
			s, err := NewFileSource(bytes.NewReader(data), "x.jsonl.gz", SourceConfig{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for {
				r, err := s.Next()
				if err != nil {
					const want = "x.jsonl.gz: line 4: after gzip member 2 the input holds bytes that start no gzip member (trailing garbage)"
					if !strings.Contains(err.Error(), want) {
						t.Errorf("%s: err = %v, want %q", name, err, want)
					}
					break
				}
				got = append(got, string(r.Data))
			}
			if strings.Join(got, ",") != "a,b,c" {
				t.Errorf("%s: records %q before the error, want a,b,c", name, got)
			}
		}
	})
	t.Run("corrupt", func(t *testing.T) {
		gz := gzipBytes(t, strings.Repeat("{\"a\":1}\n", 100))
		gz[len(gz)-6] ^= 0xff // the CRC-32 trailer
		s, err := NewFileSource(bytes.NewReader(gz), "x", SourceConfig{})
		if err != nil {
			t.Fatal(err)
		}
		for err == nil {
			_, err = s.Next()
		}
		if !errors.Is(err, gzip.ErrChecksum) {
			t.Fatalf("err = %v, want gzip.ErrChecksum", err)
		}
	})
}

func TestFileSourceErrors(t *testing.T) {
	if _, err := OpenFileSource(filepath.Join(t.TempDir(), "missing"), SourceConfig{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := NewFileSource(strings.NewReader(""), "x", SourceConfig{MaxLineBytes: -1}); err == nil {
		t.Error("negative MaxLineBytes accepted")
	}
	s, err := OpenFileSource(writeFile(t, "in", []byte("a\nb\n")), SourceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Next(); err == nil || err == io.EOF {
		t.Errorf("Next after Close = %v, want an error", err)
	}
}

// TestFileSourceStdin reads "-" through a pipe standing in for stdin.
func TestFileSourceStdin(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdin
	os.Stdin = r
	defer func() { os.Stdin = old; r.Close() }()
	gz := gzipBytes(t, "x\r\n\ny\n")
	go func() {
		w.Write(gz)
		w.Close()
	}()
	s, err := OpenFileSource("-", SourceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Name() != "stdin" {
		t.Errorf("Name = %q", s.Name())
	}
	if got := readAll(t, s); strings.Join(got, ",") != "1@0:x,3@4:y" {
		t.Errorf("records %q", got)
	}
	if _, total := s.Progress(); total != -1 {
		t.Errorf("total = %d for a pipe, want -1", total)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := r.Stat(); err != nil {
		t.Errorf("Close closed stdin: %v", err)
	}
}

// TestSourceShortFirstLineDoesNotStall: on a live stream whose first line
// is shorter than a byte-order mark, the source yields it without waiting
// for more input.
func TestSourceShortFirstLineDoesNotStall(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	got := make(chan string, 1)
	go func() {
		s, err := NewFileSource(pr, "live", SourceConfig{})
		if err != nil {
			got <- "error: " + err.Error()
			return
		}
		rec, err := s.Next()
		if err != nil {
			got <- "error: " + err.Error()
			return
		}
		got <- string(rec.Data)
	}()
	if _, err := pw.Write([]byte("7\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case line := <-got:
		if line != "7" {
			t.Fatalf("first record %q, want \"7\"", line)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the source waits for more input before yielding a 2-byte first line")
	}
}

// TestFileSourceProgressLinesReturned: a plain file's progress is the
// bytes of the lines returned, not what the buffer read ahead: a slow
// backtest of 30,000 lines said 100% at line 20,480.
func TestFileSourceProgressLinesReturned(t *testing.T) {
	var b strings.Builder
	for i := range 30000 {
		fmt.Fprintf(&b, `{"ts":%d,"k":"k%d"}`+"\n", i, i%7)
	}
	s, err := OpenFileSource(writeFile(t, "in.jsonl", []byte(b.String())), SourceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var want int64
	for range 100 {
		r, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		want += int64(len(r.Data)) + 1
	}
	if read, total := s.Progress(); read != want || total != int64(b.Len()) {
		t.Errorf("Progress after 100 lines = %d of %d, want %d of %d", read, total, want, b.Len())
	}
}
