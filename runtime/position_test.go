package runtime

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cepheus-cep/cepheus/runtime/state"
)

func TestPositionEncoding(t *testing.T) {
	ps := []Position{
		{File: "a.jsonl"},
		{File: "stdin", Offset: 3, Line: 0},
		{File: "events-2024-01-01.jsonl.gz", Offset: 1 << 40, Line: 1 << 33},
		{File: "", Offset: 7, Line: 2},
	}
	var b []byte
	for _, p := range ps {
		var err error
		if b, err = p.AppendBinary(b); err != nil {
			t.Fatal(err)
		}
	}
	rest := b
	for _, want := range ps {
		var got Position
		var err error
		got, rest, err = DecodePosition(rest)
		if err != nil || got != want {
			t.Fatalf("DecodePosition = %v, %v; want %v", got, err, want)
		}
	}
	if len(rest) != 0 {
		t.Fatalf("%d bytes left", len(rest))
	}
	// Every strict prefix of an encoding is corrupt, never a position.
	one, _ := ps[2].AppendBinary(nil)
	for n := range len(one) {
		if p, _, err := DecodePosition(one[:n]); err == nil {
			t.Errorf("prefix %d decoded as %v", n, p)
		}
	}
	// A later build's version is refused as such (TestLaterRecordVersions).
	if _, _, err := DecodePosition([]byte{9, 0, 0, 0}); !errors.Is(err, state.ErrCheckpointVersion) || !strings.Contains(err.Error(), "a source position of version 9") {
		t.Errorf("version 9: %v", err)
	}
	if _, err := (Position{File: "x", Offset: -1}).AppendBinary(nil); err == nil {
		t.Error("negative offset encoded")
	}
}

// stepped is a record and the positions of a source before and after it.
type stepped struct {
	rec           string
	before, after Position
}

// readStepped reads s to its end, with the position after each record.
func readStepped(t *testing.T, s *FileSource) []stepped {
	t.Helper()
	var out []stepped
	for {
		rec, err := s.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, stepped{
			rec:    fmt.Sprintf("%d@%d:%s", rec.Line, rec.Offset, rec.Data),
			before: Position{File: partitionName(s.name), Offset: rec.Offset, Line: rec.Line - 1},
			after:  s.Position(),
		})
	}
}

func TestResumeEveryPosition(t *testing.T) {
	inputs := map[string]string{
		"lines":           "{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n",
		"blank and crlf":  "\n{\"a\":1}\r\n\r\n  \n{\"a\":2}\n\n{\"a\":3}\r\n\n",
		"bom":             "\xef\xbb\xbf{\"a\":1}\n{\"a\":2}\n",
		"no final eol":    "{\"a\":1}\n{\"a\":2}",
		"too long":        "ok\n" + strings.Repeat("x", 50) + "\nok2\n",
		"long, small buf": strings.Repeat("y", 40) + "\n" + strings.Repeat("z", 41) + "\nend\n",
	}
	cfg := SourceConfig{BufferBytes: 16, MaxLineBytes: 45}
	for name, in := range inputs {
		for _, kind := range []string{"plain", "gzip", "gzip members", "stdin pipe"} {
			t.Run(name+"/"+kind, func(t *testing.T) {
				data, file := []byte(in), "in.jsonl"
				switch kind {
				case "gzip":
					data, file = gzipBytes(t, in), "in.jsonl.gz"
				case "gzip members":
					half := len(in) / 2
					data, file = gzipBytes(t, in[:half], in[half:]), "in.jsonl.gz"
				}
				path := writeFile(t, file, data)
				open := func(pos Position) (*FileSource, error) {
					if kind != "stdin pipe" {
						return OpenFileSourceAt(path, pos, cfg)
					}
					return openSourceAt(bytes.NewReader(data), "stdin", nil, pos, cfg)
				}
				if kind == "stdin pipe" {
					file = "stdin"
				}
				s, err := open(Position{File: file})
				if err != nil {
					t.Fatal(err)
				}
				all := readStepped(t, s)
				s.Close()
				if len(all) < 2 {
					t.Fatalf("only %d records", len(all))
				}
				start := Position{File: all[0].before.File}
				starts := []Position{start}
				for _, st := range all {
					starts = append(starts, st.before, st.after)
				}
				for _, pos := range starts {
					s, err := open(pos)
					if err != nil {
						t.Fatalf("resume at %v: %v", pos, err)
					}
					got := readStepped(t, s)
					s.Close()
					var want []string
					for _, st := range all {
						if st.before.Offset >= pos.Offset {
							want = append(want, st.rec)
						}
					}
					var recs []string
					for _, g := range got {
						recs = append(recs, g.rec)
					}
					if !slices.Equal(recs, want) {
						t.Errorf("resume at %v:\n got %q\nwant %q", pos, recs, want)
					}
				}
			})
		}
	}
}

func TestResumeRefuses(t *testing.T) {
	in := "{\"a\":1}\n{\"a\":2}\n"
	plain := writeFile(t, "p.jsonl", []byte(in))
	gz := writeFile(t, "g.jsonl.gz", gzipBytes(t, in))
	cases := []struct {
		path string
		pos  Position
		want string
	}{
		{plain, Position{File: "other.jsonl", Offset: 8, Line: 1}, "is not of"},
		{plain, Position{File: "p.jsonl", Offset: 40, Line: 3}, "shorter than"},
		{plain, Position{File: "p.jsonl", Offset: 5, Line: 1}, "not at the start of a line"},
		{plain, Position{File: "p.jsonl", Offset: 5, Line: 0}, "does not fit the start"},
		{plain, Position{File: "p.jsonl", Offset: 2, Line: 3}, "invalid"},
		{gz, Position{File: "p.jsonl", Offset: 8, Line: 1}, "is not of"},
		{gz, Position{File: "g.jsonl.gz", Offset: 40, Line: 3}, "shorter than"},
		{gz, Position{File: "g.jsonl.gz", Offset: 17, Line: 3}, "shorter than"},
		{gz, Position{File: "g.jsonl.gz", Offset: 5, Line: 1}, "not at the start of a line"},
	}
	for _, c := range cases {
		s, err := OpenFileSourceAt(c.path, c.pos, SourceConfig{})
		if err == nil {
			s.Close()
			t.Errorf("%s at %v: no error", filepath.Base(c.path), c.pos)
			continue
		}
		if !errors.Is(err, ErrBadPosition) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s at %v: %v; want ErrBadPosition, %q", filepath.Base(c.path), c.pos, err, c.want)
		}
	}
	// At the end exactly: nothing left, no error.
	for _, path := range []string{plain, gz} {
		s, err := OpenFileSourceAt(path, Position{File: filepath.Base(path), Offset: 16, Line: 2}, SourceConfig{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Next(); err != io.EOF {
			t.Errorf("%s at its end: Next = %v, want io.EOF", path, err)
		}
		s.Close()
	}
	if _, err := os.Stat(plain); err != nil {
		t.Fatal(err)
	}
}

// TestOpenFileSourceAtCloses: Close closes the file OpenFileSourceAt
// opened, as OpenFileSource's does, and a later Next says it is closed.
// The file used to stay open until the garbage collector found it: the
// reader of a run's partitions (cepheus run over files, a backtest of a
// directory) left a descriptor behind per file read.
func TestOpenFileSourceAtCloses(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("no /proc/self/fd to count open files")
	}
	in := "{\"a\":1}\n{\"a\":2}\n"
	plain := writeFile(t, "p.jsonl", []byte(in))
	gz := writeFile(t, "g.jsonl.gz", gzipBytes(t, in))
	open := func(path string) int {
		t.Helper()
		fds, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, fd := range fds {
			if target, _ := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); target == path {
				n++
			}
		}
		return n
	}
	for _, path := range []string{plain, gz} {
		for _, pos := range []Position{{File: filepath.Base(path)}, {File: filepath.Base(path), Offset: 8, Line: 1}} {
			s, err := OpenFileSourceAt(path, pos, SourceConfig{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Next(); err != nil {
				t.Fatalf("%s at %v: %v", filepath.Base(path), pos, err)
			}
			if n := open(path); n != 1 {
				t.Fatalf("%s at %v: open %d times while read, want 1", filepath.Base(path), pos, n)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if n := open(path); n != 0 {
				t.Errorf("%s at %v: still open %d times after Close", filepath.Base(path), pos, n)
			}
			if _, err := s.Next(); err == nil || err == io.EOF {
				t.Errorf("%s at %v: Next after Close = %v, want the error of a closed source", filepath.Base(path), pos, err)
			}
		}
	}
}
