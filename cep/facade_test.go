package cep

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/runtime"
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
	src, err = OpenDirEventSource(context.Background(), dir, rs.TimeField, Millis)
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
	src, err = OpenDirEventSource(context.Background(), dir, rs.TimeField, Millis)
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

// TestOpenDirEventSourceTimeUnit: the files of a directory are merged in
// the order of the times the run reads, in the run's time unit: epoch
// seconds with a fraction (-time-unit s) split into two files by line give
// the whole input's alerts and no late event. The merge read every number
// as milliseconds and took a fraction for no time: it read a.jsonl, then
// b.jsonl, whose events were all late.
func TestOpenDirEventSourceTimeUnit(t *testing.T) {
	base := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC).Unix()
	var whole, a, b strings.Builder
	for i := range 600 {
		line := fmt.Sprintf(`{"ts":%d.%03d,"card":"c%d","type":"auth","amount":%d,"country":"US"}`+"\n",
			base+int64(i)*7, (i*137)%1000, i%5, (i*7919)%600)
		whole.WriteString(line)
		if i%2 == 0 {
			a.WriteString(line)
		} else {
			b.WriteString(line)
		}
	}
	dir := t.TempDir()
	for name, content := range map[string]string{"a.jsonl": a.String(), "b.jsonl": b.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(src *EventSource) ([]string, int64) {
		t.Helper()
		var ids []string
		e, err := New(WithRuleset(loadRules(t, engineRules)), WithOutOfOrderness(10*time.Second),
			WithInputPolicy(InputPolicy{TimeUnit: Seconds, CheckNumericTimes: true}), WithObservers(idObserver{&ids}))
		if err != nil {
			t.Fatal(err)
		}
		sum, err := e.Run(context.Background(), src)
		if err != nil {
			t.Fatal(err)
		}
		if sum.Dead != 0 {
			t.Fatalf("%d dead letters", sum.Dead)
		}
		slices.Sort(ids)
		return ids, sum.Late
	}
	src, err := NewEventSource(strings.NewReader(whole.String()), "whole")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := run(src)
	src, err = OpenDirEventSource(context.Background(), dir, "ts", Seconds)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	got, late := run(src)
	if late != 0 || len(want) == 0 || !slices.Equal(got, want) {
		t.Fatalf("the directory's alerts %v (%d late events), want the whole input's %v and none late", got, late, want)
	}
}

// TestDirEventSourceDeadLetters: the dead letters of a directory's backtest
// name the file of each line, with its line and offset there (what a run
// over the directory writes), and the summary's first one names its file;
// an over-long line is "line too long" there as in a file. The merged
// stream gave the line's number in the merged order and an offset in no
// file, and handed on a 1 KiB prefix of an over-long line as if it were
// the line: a dead letter for a cut string, or an event when the line was
// an object padded with spaces.
func TestDirEventSourceDeadLetters(t *testing.T) {
	ev := func(sec int, card string) string {
		return fmt.Sprintf(`{"ts":"2026-01-01T10:00:%02dZ","card":%q,"type":"auth","amount":1,"country":"US"}`, sec, card)
	}
	padded := ev(4, "c9") + strings.Repeat(" ", 2<<20) // a whole object, then 2 MiB of spaces
	a := strings.Join([]string{ev(0, "c1"), ev(2, "c1"), "{not json", padded, ev(6, "c1")}, "\n") + "\n"
	b := strings.Join([]string{ev(1, "c2"), `{"card":"c2","type":"auth"}`, ev(5, "c2")}, "\n") + "\n"
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(b))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, content := range map[string][]byte{"a.jsonl": []byte(a), "b.jsonl.gz": gz.Bytes()} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var dead bytes.Buffer
	dw := NewDeadLetterWriter(&dead)
	e, err := New(WithRuleset(loadRules(t, engineRules)), WithDeadLetters(dw))
	if err != nil {
		t.Fatal(err)
	}
	src, err := OpenDirEventSource(context.Background(), dir, "ts", Millis)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	sum, err := e.Run(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	if err := dw.Close(); err != nil {
		t.Fatal(err)
	}
	// Merged by time (a line without one first): a:1, b:1, b:2 (the first
	// dead letter, merged line 3), a:2, a:3, a:4, b:3, a:5.
	offA3 := len(ev(0, "c1")) + 1 + len(ev(2, "c1")) + 1
	want := []string{
		fmt.Sprintf(`{"file":"b.jsonl.gz","line":2,"offset":%d,"reason":"missing time field \"ts\""}`, len(ev(1, "c2"))+1),
		fmt.Sprintf(`{"file":"a.jsonl","line":3,"offset":%d,"reason":"column 2: invalid character 'n', want an object key"}`, offA3),
		fmt.Sprintf(`{"file":"a.jsonl","line":4,"offset":%d,"reason":"line too long: more than 1048576 bytes"}`, offA3+len("{not json")+1),
	}
	var got []string
	for line := range strings.Lines(dead.String()) {
		var d struct {
			File   string `json:"file"`
			Line   int64  `json:"line"`
			Offset int64  `json:"offset"`
			Reason string `json:"reason"`
		}
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatalf("dead letter %q: %v", line, err)
		}
		b, _ := json.Marshal(d)
		got = append(got, string(b))
	}
	if !slices.Equal(got, want) {
		t.Errorf("dead letters\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if sum.Records != 8 || sum.Decoded != 5 || sum.Dead != 3 || sum.FirstDeadFile != "b.jsonl.gz" || sum.FirstDeadLine != 2 {
		t.Errorf("summary: %d records, %d decoded, %d dead, first dead %s line %d; want 8, 5, 3, b.jsonl.gz line 2",
			sum.Records, sum.Decoded, sum.Dead, sum.FirstDeadFile, sum.FirstDeadLine)
	}
}

// TestMergedSourceRecords: the merge of partitions hands each record on
// whole, numbered in the merged order, with its partition's name, line and
// offset: a record holding a newline (a Kafka value) is one record, a blank
// one is numbered and skipped as a file's blank line, and a record's
// Reason is kept. The merged stream used to be cut into lines.
func TestMergedSourceRecords(t *testing.T) {
	part := func(name string, recs ...runtime.Record) <-chan runtime.Batch {
		ch := make(chan runtime.Batch, 1)
		ch <- runtime.Batch{Partition: runtime.Partition{Name: name}, Records: recs, Done: true}
		close(ch)
		return ch
	}
	chans := []<-chan runtime.Batch{
		part("t-0",
			runtime.Record{Line: 1, Offset: 0, Data: []byte("{\"ts\":1,\n\"k\":\"a\"}")},
			runtime.Record{Line: 2, Offset: 1, Data: []byte(" ")},
			runtime.Record{Line: 3, Offset: 2, Data: []byte(`{"ts":4}`)}),
		part("t-1",
			runtime.Record{Line: 8, Offset: 7, Data: []byte(`{"ts":2}`)},
			runtime.Record{Line: 9, Offset: 8, Data: []byte(`{"ts":3,"x":"xx`), Reason: "line too long: more than 1048576 bytes"}),
	}
	src, err := mergedEventSource(context.Background(), "topic t", chans, "ts", Millis, fakeReader{}, func() {})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var got []string
	for {
		r, err := src.source().Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d %s:%d@%d %q %s", r.Line, r.File, r.FileLine, r.FileOffset, r.Data, r.Reason))
	}
	want := []string{
		"1 t-0:1@0 \"{\\\"ts\\\":1,\\n\\\"k\\\":\\\"a\\\"}\" ",
		// Merged line 2 is t-0's blank record (no time: first).
		"3 t-1:8@7 \"{\\\"ts\\\":2}\" ",
		"4 t-1:9@8 \"{\\\"ts\\\":3,\\\"x\\\":\\\"xx\" line too long: more than 1048576 bytes",
		"5 t-0:3@2 \"{\\\"ts\\\":4}\" ",
	}
	if !slices.Equal(got, want) {
		t.Errorf("merged records\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// fakeReader is the reader of partitions a test hands mergedEventSource.
type fakeReader struct{}

func (fakeReader) Err() error   { return nil }
func (fakeReader) Close() error { return nil }

// TestDirEventSourceStopped: a directory's source whose context is done
// before its end, or that was closed, fails the run that reads it; a
// partition's channel closed before its Done batch is not the end of the
// input. The run ended as if the input had: a backtest of nothing, or of
// the part read, with no error, its final watermark releasing every
// pending match.
func TestDirEventSourceStopped(t *testing.T) {
	dir := t.TempDir()
	base := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	for f := range 2 {
		var b strings.Builder
		for i := range 2000 {
			fmt.Fprintf(&b, `{"ts":%q,"card":"c%d","type":"auth","amount":%d,"country":"US"}`+"\n",
				base.Add(time.Duration(2*i+f)*time.Second).Format(time.RFC3339), i%5, i%600)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("p%d.jsonl", f)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e, err := New(WithRuleset(loadRules(t, engineRules)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	src, err := OpenDirEventSource(ctx, dir, "ts", Millis)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	sum, err := e.Run(context.Background(), src)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("a run over a source whose context is done: %v (%d records), want context.Canceled", err, sum.Records)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}

	src, err = OpenDirEventSource(context.Background(), dir, "ts", Millis)
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	sum, err = e.Run(context.Background(), src)
	if err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("a run over a closed source: %v (%d records), want an error saying it is closed", err, sum.Records)
	}

	// A partition that stops before its Done batch: what came before it is
	// read, then the error.
	ch := make(chan runtime.Batch, 1)
	ch <- runtime.Batch{Partition: runtime.Partition{Name: "t-0"}, Records: []runtime.Record{{Line: 1, Data: []byte(`{"ts":1}`)}}}
	close(ch)
	m, err := mergedEventSource(context.Background(), "topic t", []<-chan runtime.Batch{ch}, "ts", Millis, fakeReader{}, func() {})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.source().Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.source().Next(); err == nil || err == io.EOF {
		t.Errorf("after a partition's channel closed before its Done batch: %v, want an error", err)
	}
}
