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
	mark          Mark // after's
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
			mark:   MarkOf(&rec),
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
				openMarked := func(pos Position, mark Mark) (*FileSource, error) {
					if kind != "stdin pipe" {
						return openFileSourceAt(path, pos, mark, cfg)
					}
					return openSourceAt(bytes.NewReader(data), "stdin", nil, pos, mark, cfg)
				}
				open := func(pos Position) (*FileSource, error) { return openMarked(pos, Mark{}) }
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
				// With the mark of the record before: the same records.
				for i, st := range all {
					s, err := openMarked(st.after, st.mark)
					if err != nil {
						t.Fatalf("resume at %v with mark %+v: %v", st.after, st.mark, err)
					}
					got := readStepped(t, s)
					s.Close()
					if len(got) != len(all)-i-1 || len(got) > 0 && got[0].rec != all[i+1].rec {
						t.Errorf("resume at %v with its mark: %d records, want %d", st.after, len(got), len(all)-i-1)
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

// TestResumeRefusesReplaced: a file that holds other bytes before the
// position than its mark says (another file took the name: a rotation,
// a rewrite) is refused, also where the byte before the position is a
// newline, which the position alone cannot tell from the file read.
func TestResumeRefusesReplaced(t *testing.T) {
	old := "{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n"
	// Another file whose second line ends where the old one's did.
	other := "{\"b\":1}\n{\"b\":2}\n{\"b\":3}\n{\"b\":4}\n"
	for _, kind := range []string{"plain", "gzip", "stdin pipe"} {
		t.Run(kind, func(t *testing.T) {
			file, data := "in.jsonl", []byte(old)
			if kind == "gzip" {
				file, data = "in.jsonl.gz", gzipBytes(t, old)
			}
			path := writeFile(t, file, data)
			open := func(pos Position, mark Mark) (*FileSource, error) {
				if kind == "stdin pipe" {
					pos.File = "stdin"
					return openSourceAt(bytes.NewReader(data), "stdin", nil, pos, mark, SourceConfig{})
				}
				return openFileSourceAt(path, pos, mark, SourceConfig{})
			}
			s, err := open(Position{File: file}, Mark{})
			if err != nil {
				t.Fatal(err)
			}
			all := readStepped(t, s)
			s.Close()
			pos, mark := all[1].after, all[1].mark
			if mark.At != pos.Offset-1 || string(mark.Bytes) != "{\"a\":2}" {
				t.Fatalf("mark after line 2: %+v (%q), position %v", mark, mark.Bytes, pos)
			}
			data = []byte(other)
			if kind == "gzip" {
				data = gzipBytes(t, other)
			}
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			// Without the mark the other file is read on: its first two
			// lines skipped without a word.
			s, err = open(pos, Mark{})
			if err != nil {
				t.Fatal(err)
			}
			rest := readStepped(t, s)
			s.Close()
			if len(rest) != 2 || !strings.Contains(rest[0].rec, `"b":3`) {
				t.Fatalf("the other file without the mark: %v", rest)
			}
			s, err = open(pos, mark)
			if err == nil {
				s.Close()
				t.Fatal("the other file with the old mark: no error")
			}
			want := "another file has taken its name"
			if kind == "stdin pipe" {
				want = "stdin holds other bytes before position stdin@16:2 than the run that took the checkpoint read there: it is another stream"
			}
			if !errors.Is(err, ErrBadPosition) || !strings.Contains(err.Error(), want) {
				t.Errorf("the other file with the old mark: %v", err)
			}
			// A mark that cannot be the position's.
			for _, m := range []Mark{{At: pos.Offset + 1, Bytes: []byte("x")}, {At: 2, Bytes: []byte("xyz")}, {At: pos.Offset, Bytes: make([]byte, MarkBytes+1)}} {
				if s, err := open(pos, m); err == nil || !errors.Is(err, ErrBadPosition) {
					if s != nil {
						s.Close()
					}
					t.Errorf("mark %d bytes at %d: %v, want ErrBadPosition", len(m.Bytes), m.At, err)
				}
			}
		})
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
