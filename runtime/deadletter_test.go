package runtime

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// deadLine is one decoded line of a dead-letter file.
type deadLine struct {
	Line   int64  `json:"line"`
	Offset int64  `json:"offset"`
	Reason string `json:"reason"`
	Data   string `json:"data"`
}

func parseDeadLetters(t *testing.T, data []byte) []deadLine {
	t.Helper()
	var out []deadLine
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var d deadLine
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&d); err != nil {
			t.Fatalf("dead-letter line %q: %v", sc.Bytes(), err)
		}
		out = append(out, d)
	}
	return out
}

func TestDeadLetterWriter(t *testing.T) {
	recs := []DeadRecord{
		{Line: 1, Offset: 0, Reason: `missing time field "ts"`, Data: []byte(`{"id":1}`)},
		{Line: 7, Offset: 1234567890123, Reason: "column 3: invalid character 'x'", Data: []byte("a\\b\"c\td\x01e\x7f<&>é😀\u2028")},
		{Line: 9, Offset: 5, Reason: "bad utf-8", Data: []byte("a\xffb\xe2\x82")},
		{Line: 10, Offset: 6, Reason: "", Data: nil},
	}
	want := []deadLine{
		{1, 0, `missing time field "ts"`, `{"id":1}`},
		{7, 1234567890123, "column 3: invalid character 'x'", "a\\b\"c\td\x01e\x7f<&>é😀\u2028"},
		{9, 5, "bad utf-8", "a\ufffdb\ufffd\ufffd"},
		{10, 6, "", ""},
	}
	path := filepath.Join(t.TempDir(), "dead.jsonl")
	w, err := CreateDeadLetterFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.DeadLetter(r); err != nil {
			t.Fatal(err)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != 0 {
		t.Errorf("written before Close (buffered): %v, %v", fi.Size(), err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), `{"line":1,"offset":0,"reason":"missing time field \"ts\"","data":"{\"id\":1}"}`+"\n") {
		t.Errorf("first line not in the documented form:\n%s", data)
	}
	got := parseDeadLetters(t, data)
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(got), len(want), data)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestDeadLetterWriterError(t *testing.T) {
	w := NewDeadLetterWriter(failingWriter{})
	rec := DeadRecord{Line: 1, Data: bytes.Repeat([]byte("x"), 100<<10)} // larger than the buffer
	if err := w.DeadLetter(rec); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("DeadLetter = %v, want disk full", err)
	}
	if err := w.Close(); err == nil {
		t.Fatal("Close after a write error = nil")
	}
}

// TestDeadLetterWriterNil: a writer onto nil fails every call with an
// error that says so; it panicked at the first flush.
func TestDeadLetterWriterNil(t *testing.T) {
	w := NewDeadLetterWriter(nil)
	const want = "runtime: dead letters: no writer (NewDeadLetterWriter of nil)"
	if err := w.DeadLetter(DeadRecord{Line: 1, Data: []byte("x")}); err == nil || err.Error() != want {
		t.Errorf("DeadLetter = %v, want %q", err, want)
	}
	if err := w.Close(); err == nil || err.Error() != want {
		t.Errorf("Close = %v, want %q", err, want)
	}
}

// TestDeadLetterRuleset: a record of a ruleset's run names it first.
func TestDeadLetterRuleset(t *testing.T) {
	var b strings.Builder
	d := NewDeadLetterWriter(&b)
	if err := d.DeadLetter(DeadRecord{Ruleset: "cards", Line: 2, Offset: 10, Reason: "bad", Data: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if want := `{"ruleset":"cards","line":2,"offset":10,"reason":"bad","data":"x"}` + "\n"; b.String() != want {
		t.Errorf("got %s want %s", b.String(), want)
	}
}
