package cep

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestOpenDirEventSource: a directory's files (a hidden one aside) are
// read as one stream in event-time order, so an input split in two by time
// gives the alerts of the whole input; a backtest's progress counts up to
// the plain files' size, and is unknown with a compressed file among them.
func TestOpenDirEventSource(t *testing.T) {
	var b strings.Builder
	base := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	for i := range 600 {
		fmt.Fprintf(&b, `{"ts":%q,"card":"c%d","type":"auth","amount":%d,"country":"US"}`+"\n",
			base.Add(time.Duration(i)*7*time.Second).Format(time.RFC3339), i%5, (i*7919)%600)
	}
	whole := b.String()
	lines := strings.SplitAfter(whole, "\n")
	lines = lines[:len(lines)-1] // each with its newline
	dir := t.TempDir()
	for name, content := range map[string]string{
		"a.jsonl": strings.Join(lines[:250], ""), "b.jsonl": strings.Join(lines[250:], ""), ".c.jsonl": "not an event\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(src *EventSource) []string {
		t.Helper()
		var ids []string
		e, err := New(WithRuleset(loadRules(t, engineRules)), WithOutOfOrderness(10*time.Second), WithObservers(idObserver{&ids}))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Run(context.Background(), src); err != nil {
			t.Fatal(err)
		}
		slices.Sort(ids)
		return ids
	}
	src, err := NewEventSource(strings.NewReader(whole), "whole")
	if err != nil {
		t.Fatal(err)
	}
	want := run(src)
	rs := loadRules(t, engineRules)
	src, err = OpenDirEventSource(context.Background(), dir, rs.TimeField)
	if err != nil {
		t.Fatal(err)
	}
	got := run(src)
	read, total := src.Progress()
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Fatalf("the directory's alerts %v, want the whole input's %v", got, want)
	}
	if int(total) != len(whole) || read != total {
		t.Fatalf("progress %d of %d bytes at the end, want %d of %d", read, total, len(whole), len(whole))
	}

	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(strings.Join(lines[250:], "")))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	// Compressed under a plain name: the reader goes by the magic bytes.
	if err := os.WriteFile(filepath.Join(dir, "b.jsonl"), gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err = OpenDirEventSource(context.Background(), dir, rs.TimeField)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	// With a compressed file among the plain, progress counts the bytes on
	// disk: the compressed ones of b.jsonl.
	size := int64(len(strings.Join(lines[:250], "")) + gz.Len())
	if _, total := src.Progress(); total != size {
		t.Fatalf("the input's size with a compressed file among the plain: %d, want %d", total, size)
	}
	if got := run(src); !slices.Equal(got, want) {
		t.Fatalf("with b.jsonl compressed: the alerts %v, want %v", got, want)
	}
	if read, total := src.Progress(); read != size || total != size {
		t.Fatalf("progress %d of %d bytes at the end, want %d of %d", read, total, size, size)
	}
}
