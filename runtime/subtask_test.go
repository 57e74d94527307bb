package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/event/jsonev"
	"github.com/cepheus-cep/cepheus/runtime/state"
)

// recorder is a KeyedOperator that logs what it is given.
type recorder struct {
	name   string
	log    *[]string
	events []*event.Event
	failAt int64 // fail the element with this Seq (line)
	failWM event.Watermark
	onElem func(*event.Event)
}

func (r *recorder) ProcessElement(ev *event.Event, ts event.Time, out Collector[string]) error {
	*r.log = append(*r.log, fmt.Sprintf("%s el %d@%d", r.name, ev.Seq, ts))
	r.events = append(r.events, ev)
	if r.onElem != nil {
		r.onElem(ev)
	}
	if r.failAt != 0 && int64(ev.Seq) == r.failAt {
		return errBoom
	}
	return nil
}

func (r *recorder) ProcessWatermark(w event.Watermark, out Collector[string]) error {
	*r.log = append(*r.log, fmt.Sprintf("%s wm %v", r.name, wmString(w)))
	if r.failWM != 0 && w == r.failWM {
		return errBoom
	}
	return out.Collect(fmt.Sprintf("%s wm %v", r.name, wmString(w)))
}

// Snapshot writes the number of elements seen as the recorder's one
// record.
func (r *recorder) Snapshot(w state.Writer) error {
	return w.Put(state.Key{Operator: state.OperatorID(r.name)}, strconv.AppendInt(nil, int64(len(r.events)), 10))
}

// Restore makes room for the elements of the checkpoint (nil events).
func (r *recorder) Restore(rd state.Reader) error {
	for rec, err := range rd.Records(state.OperatorID(r.name), state.AllKeyGroups) {
		if err != nil {
			return err
		}
		n, err := strconv.Atoi(string(rec.Value))
		if err != nil {
			return err
		}
		r.events = make([]*event.Event, n)
	}
	return nil
}

var errBoom = errors.New("boom")

func wmString(w event.Watermark) string {
	if w == event.MaxTime || w == event.MinTime {
		return w.String()
	}
	return fmt.Sprint(int64(w))
}

var subtaskSchema = event.MustSchema(
	event.Field{Name: "card", Kind: event.KindString},
	event.Field{Name: "amount", Kind: event.KindFloat},
)

type subtaskSetup struct {
	input    string
	bound    time.Duration
	every    int
	ops      []*recorder
	dead     DeadLetter
	progress func(Stats)
	progN    int64
}

func newTestSubtask(t *testing.T, c subtaskSetup) (*Subtask[string], *FileSource) {
	t.Helper()
	src, err := NewFileSource(strings.NewReader(c.input), "test", SourceConfig{MaxLineBytes: 64})
	if err != nil {
		t.Fatal(err)
	}
	dec, err := jsonev.NewDecoder(jsonev.Config{Schema: subtaskSchema, TimeField: "ts", Required: []string{"card"}})
	if err != nil {
		t.Fatal(err)
	}
	wm, err := NewWatermarkGenerator(c.bound, c.every)
	if err != nil {
		t.Fatal(err)
	}
	var ops []KeyedOperator[string]
	for _, op := range c.ops {
		ops = append(ops, op)
	}
	st, err := NewSubtask(SubtaskConfig[string]{
		Source: src, Decoder: dec, Watermarks: wm, Operators: ops,
		DeadLetter: c.dead, Progress: c.progress, ProgressEvery: c.progN,
	})
	if err != nil {
		t.Fatal(err)
	}
	return st, src
}

func TestSubtaskForwarding(t *testing.T) {
	input := `{"card":"a","ts":10}` + "\r\n" +
		"\n" +
		`{"card":"b","ts":5,"amount":1.5}` + "\n" +
		`{"card":"a","ts":20}` + "\n" +
		`{"card":"c","ts":20}` + "\n" +
		`{"ts":30}` + "\n" + // no card: dead
		`not json` + "\n" +
		`{"card":"` + strings.Repeat("x", 70) + `","ts":40}` + "\n" + // too long
		`{"card":"d","ts":1}`
	var log []string
	op0 := &recorder{name: "op0", log: &log}
	op1 := &recorder{name: "op1", log: &log}
	var dead bytes.Buffer
	dlw := NewDeadLetterWriter(&dead)
	var progress []Stats
	st, _ := newTestSubtask(t, subtaskSetup{
		input: input, bound: 2 * time.Millisecond, ops: []*recorder{op0, op1}, dead: dlw,
		progress: func(s Stats) { progress = append(progress, s) }, progN: 3,
	})
	if err := st.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"op0 el 1@10", "op1 el 1@10", "op0 wm 7", "op1 wm 7",
		"op0 el 3@5", "op1 el 3@5", // no watermark: it did not advance
		"op0 el 4@20", "op1 el 4@20", "op0 wm 17", "op1 wm 17",
		"op0 el 5@20", "op1 el 5@20",
		"op0 el 9@1", "op1 el 9@1",
		"op0 wm MAX", "op1 wm MAX",
	}
	if strings.Join(log, "\n") != strings.Join(want, "\n") {
		t.Errorf("operator calls:\n got %q\nwant %q", log, want)
	}

	// Events are fresh per record, decoded, numbered by line, and shared
	// by the operators.
	for i, ev := range op0.events {
		if op1.events[i] != ev {
			t.Errorf("event %d differs between operators", i)
		}
		for j := range i {
			if op0.events[j] == ev {
				t.Errorf("events %d and %d share one *event.Event", j, i)
			}
		}
	}
	if ev := op0.events[1]; ev.Seq != 3 || ev.Time != 5 || !ev.Fields[0].Equal(event.String("b")) || !ev.Fields[1].Equal(event.Float(1.5)) {
		t.Errorf("second event = %+v", ev)
	}
	if ev := op0.events[0]; !ev.Fields[0].Equal(event.String("a")) || !ev.Fields[1].IsNull() {
		t.Errorf("first event overwritten: %+v", ev)
	}

	if err := dlw.Close(); err != nil {
		t.Fatal(err)
	}
	gotDead := parseDeadLetters(t, dead.Bytes())
	wantDead := []deadLine{
		{6, 98, `missing required field "card"`, `{"ts":30}`},
		{7, 108, `column 1: want a JSON object, found 'n'`, `not json`},
		{8, 117, `line too long: more than 64 bytes`, `{"card":"` + strings.Repeat("x", 70) + `","ts":40}`},
	}
	if len(gotDead) != len(wantDead) {
		t.Fatalf("dead letters:\n%s", dead.Bytes())
	}
	for i := range wantDead {
		if gotDead[i] != wantDead[i] {
			t.Errorf("dead letter %d:\n got %+v\nwant %+v", i, gotDead[i], wantDead[i])
		}
	}

	wantStats := Stats{Records: 8, Decoded: 5, Dead: 3, Line: 9, Watermark: event.MaxTime,
		FirstDeadLine: 6, FirstDeadReason: `missing required field "card"`,
		BytesRead: int64(len(input)), TotalBytes: -1}
	if got := st.Stats(); got != wantStats {
		t.Errorf("Stats = %+v\nwant %+v", got, wantStats)
	}
	// Progress after records 3 and 6, then once at the end.
	if len(progress) != 3 || progress[0].Records != 3 || progress[1].Records != 6 || progress[2] != wantStats {
		t.Errorf("progress calls: %+v", progress)
	}
	if progress[0].Watermark != 17 || progress[1].Dead != 2 {
		t.Errorf("progress contents: %+v", progress)
	}
}

func TestSubtaskEmitEvery(t *testing.T) {
	var input strings.Builder
	for i := 1; i <= 7; i++ {
		fmt.Fprintf(&input, `{"card":"a","ts":%d}`+"\n", i*10)
	}
	var log []string
	st, _ := newTestSubtask(t, subtaskSetup{input: input.String(), every: 3, ops: []*recorder{{name: "op", log: &log}}})
	if err := st.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	var wms []string
	for _, l := range log {
		if strings.Contains(l, " wm ") {
			wms = append(wms, strings.TrimPrefix(l, "op wm "))
		}
	}
	if got := strings.Join(wms, " "); got != "29 59 MAX" {
		t.Errorf("watermarks %q, want 29 59 MAX", got)
	}
}

func TestSubtaskOperatorError(t *testing.T) {
	const input = `{"card":"a","ts":1}` + "\n" + `{"card":"b","ts":2}` + "\n" + `{"card":"c","ts":3}` + "\n"
	t.Run("element", func(t *testing.T) {
		var log []string
		st, _ := newTestSubtask(t, subtaskSetup{input: input, ops: []*recorder{
			{name: "op0", log: &log}, {name: "op1", log: &log, failAt: 2},
		}})
		err := st.Run(context.Background())
		var oe *OperatorError
		if !errors.As(err, &oe) || !errors.Is(err, errBoom) || oe.Operator != 1 || oe.Line != 2 {
			t.Fatalf("Run = %v, want operator 1's error at line 2", err)
		}
		if want := "runtime: operator 1: line 2: boom"; err.Error() != want {
			t.Errorf("message %q, want %q", err, want)
		}
		if st.Stats().Records != 2 {
			t.Errorf("went on after the error: %+v", st.Stats())
		}
	})
	t.Run("final watermark", func(t *testing.T) {
		var log []string
		st, _ := newTestSubtask(t, subtaskSetup{input: input, ops: []*recorder{{name: "op0", log: &log, failWM: event.MaxTime}}})
		err := st.Run(context.Background())
		var oe *OperatorError
		if !errors.As(err, &oe) || oe.Line != 0 || err.Error() != "runtime: operator 0: at end of input: boom" {
			t.Fatalf("Run = %v", err)
		}
	})
	t.Run("dead letter sink", func(t *testing.T) {
		var log []string
		st, _ := newTestSubtask(t, subtaskSetup{input: "x\n" + input, ops: []*recorder{{name: "op0", log: &log}},
			dead: failingSink{}})
		if err := st.Run(context.Background()); !errors.Is(err, errBoom) {
			t.Fatalf("Run = %v with a failing dead-letter sink", err)
		}
	})
}

// failingSink is a dead-letter sink that always fails.
type failingSink struct{}

func (failingSink) DeadLetter(DeadRecord) error { return errBoom }

// endless is a Source that never ends.
type endless struct{ n int64 }

func (e *endless) Next() (Record, error) {
	e.n++
	return Record{Line: e.n, Data: []byte(`{"card":"a","ts":` + fmt.Sprint(e.n) + `}`)}, nil
}

func TestSubtaskCancel(t *testing.T) {
	dec, err := jsonev.NewDecoder(jsonev.Config{Schema: subtaskSchema, TimeField: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	run := func(ctx context.Context, op *recorder) (*Subtask[string], error) {
		wm, _ := NewWatermarkGenerator(0, 0)
		st, err := NewSubtask(SubtaskConfig[string]{Source: &endless{}, Decoder: dec, Watermarks: wm, Operators: []KeyedOperator[string]{op}})
		if err != nil {
			t.Fatal(err)
		}
		return st, st.Run(ctx)
	}

	ctx, cancel := context.WithCancel(context.Background())
	var log []string
	op := &recorder{name: "op", log: &log}
	op.onElem = func(ev *event.Event) {
		if ev.Seq == 10 {
			cancel()
		}
	}
	st, err := run(ctx, op)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if n := st.Stats().Records; n < 10 || n > cancelCheckEvery {
		t.Errorf("stopped after %d records, want 10..%d", n, cancelCheckEvery)
	}
	if strings.HasSuffix(log[len(log)-1], "MAX") {
		t.Error("final watermark sent after cancellation")
	}

	log = nil
	st, err = run(ctx, &recorder{name: "op", log: &log}) // already cancelled
	if !errors.Is(err, context.Canceled) || st.Stats().Records != 0 || len(log) != 0 {
		t.Errorf("pre-cancelled: Run = %v after %d records, %d calls", err, st.Stats().Records, len(log))
	}
}

// errSource fails after ok records.
type errSource struct{ n, ok int }

func (e *errSource) Next() (Record, error) {
	if e.n++; e.n <= max(e.ok, 1) {
		return Record{Line: int64(e.n), Data: fmt.Appendf(nil, `{"card":"a","ts":%d}`, e.n)}, nil
	}
	return Record{}, io.ErrUnexpectedEOF
}

func TestSubtaskSourceError(t *testing.T) {
	dec, _ := jsonev.NewDecoder(jsonev.Config{Schema: subtaskSchema, TimeField: "ts"})
	wm, _ := NewWatermarkGenerator(0, 0)
	var log []string
	st, err := NewSubtask(SubtaskConfig[string]{Source: &errSource{}, Decoder: dec, Watermarks: wm,
		Operators: []KeyedOperator[string]{&recorder{name: "op", log: &log}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Run(context.Background()); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("Run = %v", err)
	}
	if s := st.Stats(); s.BytesRead != -1 || s.TotalBytes != -1 || s.Decoded != 1 {
		t.Errorf("Stats = %+v", s)
	}
	if err := st.Run(context.Background()); err == nil {
		t.Error("second Run = nil")
	}
}

// TestSubtaskSourceErrorHandsOnWhatWasRead: when the source fails, the
// events read before, still waiting for their lookups (Enrich) or held
// by the time guard (MaxAhead), reach the operators, the guard's judged
// as at the input's end; no final watermark follows.
func TestSubtaskSourceErrorHandsOnWhatWasRead(t *testing.T) {
	for _, c := range []struct {
		ahead bool
		n     int // records before the error: 3, fewer than the guard's start group
	}{{false, 11}, {true, 11}, {false, 3}, {true, 3}} {
		ahead, n := c.ahead, c.n
		dec, _ := jsonev.NewDecoder(jsonev.Config{Schema: subtaskSchema, TimeField: "ts"})
		wm, _ := NewWatermarkGenerator(0, 0)
		var log []string
		enriched := 0
		cfg := SubtaskConfig[string]{Source: &errSource{ok: n}, Decoder: dec, Watermarks: wm,
			Operators: []KeyedOperator[string]{&recorder{name: "op", log: &log}},
			Enrich: func(_ context.Context, evs []*event.Event, _ []string) error {
				enriched += len(evs)
				return nil
			},
			EnrichBatch: 4,
		}
		if ahead {
			cfg.MaxAhead = time.Hour
		}
		st, err := NewSubtask(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Run(context.Background()); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("Run = %v", err)
		}
		elems := 0
		for _, l := range log {
			if strings.Contains(l, " el ") {
				elems++
			}
			if strings.HasSuffix(l, "MAX") {
				t.Errorf("ahead %v: final watermark after a source error: %q", ahead, l)
			}
		}
		if s := st.Stats(); s.Records != int64(n) || s.Decoded != int64(n) || enriched != n || elems != n {
			t.Errorf("ahead %v: %d records, %d decoded, %d enriched, %d elements handed on; want %d each (log %q)",
				ahead, s.Records, s.Decoded, enriched, elems, n, log)
		}
	}
}

func TestNewSubtaskErrors(t *testing.T) {
	dec, _ := jsonev.NewDecoder(jsonev.Config{Schema: subtaskSchema, TimeField: "ts"})
	wm, _ := NewWatermarkGenerator(0, 0)
	src := &endless{}
	op := &recorder{log: new([]string)}
	cases := []struct {
		cfg SubtaskConfig[string]
		err string
	}{
		{SubtaskConfig[string]{Decoder: dec, Watermarks: wm, Operators: []KeyedOperator[string]{op}}, "no source"},
		{SubtaskConfig[string]{Source: src, Watermarks: wm, Operators: []KeyedOperator[string]{op}}, "no decoder"},
		{SubtaskConfig[string]{Source: src, Decoder: dec, Operators: []KeyedOperator[string]{op}}, "no watermark generator"},
		{SubtaskConfig[string]{Source: src, Decoder: dec, Watermarks: wm}, "no operators"},
		{SubtaskConfig[string]{Source: src, Decoder: dec, Watermarks: wm, Operators: []KeyedOperator[string]{nil}}, "operator 0 is nil"},
		{SubtaskConfig[string]{Source: src, Decoder: dec, Watermarks: wm, Operators: []KeyedOperator[string]{op}, ProgressEvery: -1}, "negative progress"},
	}
	for _, c := range cases {
		if _, err := NewSubtask(c.cfg); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("NewSubtask: %v, want %q", err, c.err)
		}
	}
}

// nopOperator discards everything.
type nopOperator struct{ n int }

func (o *nopOperator) ProcessElement(*event.Event, event.Time, Collector[string]) error {
	o.n++
	return nil
}
func (o *nopOperator) ProcessWatermark(event.Watermark, Collector[string]) error { return nil }
func (o *nopOperator) Snapshot(state.Writer) error                               { return nil }
func (o *nopOperator) Restore(state.Reader) error                                { return nil }

// benchSchema is the 14-field payment schema of jsonev's BenchmarkDecode.
var benchSchema = event.MustSchema(
	event.Field{Name: "id", Kind: event.KindString},
	event.Field{Name: "card", Kind: event.KindString},
	event.Field{Name: "type", Kind: event.KindString},
	event.Field{Name: "amount", Kind: event.KindFloat},
	event.Field{Name: "cur", Kind: event.KindString},
	event.Field{Name: "merchant", Kind: event.KindString},
	event.Field{Name: "mcc", Kind: event.KindInt},
	event.Field{Name: "country", Kind: event.KindString},
	event.Field{Name: "channel", Kind: event.KindString},
	event.Field{Name: "ip", Kind: event.KindString},
	event.Field{Name: "device", Kind: event.KindString},
	event.Field{Name: "ok", Kind: event.KindBool},
	event.Field{Name: "risk", Kind: event.KindFloat},
	event.Field{Name: "n"},
)

// BenchmarkSubtask runs the whole pipeline (line splitting, decoding, a
// fresh event per record, watermarks) into an operator that does nothing.
func BenchmarkSubtask(b *testing.B) {
	const lines = 100000
	var buf bytes.Buffer
	for i := range lines {
		fmt.Fprintf(&buf, `{"id":"t%d","ts":%d,"card":"4000123412341234","type":"buy",`+
			`"amount":123.45,"cur":"EUR","merchant":"m8812","mcc":5411,"country":"FR","channel":"web",`+
			`"ip":"10.1.2.3","device":"d77aa","ok":true,"risk":0.42,"n":1}`+"\n", 10000+i, 1714564800000+int64(i)*10-int64(i%7)*3)
	}
	data := buf.Bytes()
	dec, err := jsonev.NewDecoder(jsonev.Config{Schema: benchSchema, TimeField: "ts", Required: []string{"card"}})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		src, _ := NewFileSource(bytes.NewReader(data), "bench", SourceConfig{})
		wm, _ := NewWatermarkGenerator(time.Second, 1)
		op := &nopOperator{}
		st, err := NewSubtask(SubtaskConfig[string]{Source: src, Decoder: dec, Watermarks: wm, Operators: []KeyedOperator[string]{op}})
		if err != nil {
			b.Fatal(err)
		}
		if err := st.Run(context.Background()); err != nil {
			b.Fatal(err)
		}
		if op.n != lines {
			b.Fatalf("%d events, want %d", op.n, lines)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*lines), "ns/event")
}
