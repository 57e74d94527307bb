package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/event/jsonev"
)

// runAhead runs times (one event per line, in ms) through a subtask with
// MaxAhead 1s and returns the lines that reached the operator, the dead
// lines and the watermarks.
func runAhead(t *testing.T, times ...int64) (passed, dead []int64, wms []string) {
	t.Helper()
	var in strings.Builder
	for _, ts := range times {
		fmt.Fprintf(&in, `{"card":"a","ts":%d}`+"\n", ts)
	}
	src, err := NewFileSource(strings.NewReader(in.String()), "test", SourceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	dec, _ := jsonev.NewDecoder(jsonev.Config{Schema: subtaskSchema, TimeField: "ts"})
	wm, _ := NewWatermarkGenerator(0, 1)
	var log []string
	op := &recorder{name: "op", log: &log}
	sink := &deadSink{}
	st, err := NewSubtask(SubtaskConfig[string]{Source: src, Decoder: dec, Watermarks: wm,
		Operators: []KeyedOperator[string]{op}, DeadLetter: sink, MaxAhead: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, ev := range op.events {
		passed = append(passed, int64(ev.Seq))
	}
	for _, r := range sink.recs {
		dead = append(dead, r.Line)
		if !strings.Contains(r.Reason, "is more than 1s ahead of") {
			t.Errorf("line %d: reason %q", r.Line, r.Reason)
		}
	}
	if s := st.Stats(); s.Ahead != int64(len(dead)) || s.Dead != s.Ahead || s.Decoded != int64(len(passed)) {
		t.Errorf("stats %+v, %d passed, %d dead", s, len(passed), len(dead))
	}
	for _, l := range log {
		if w, ok := strings.CutPrefix(l, "op wm "); ok {
			wms = append(wms, w)
		}
	}
	return passed, dead, wms
}

type deadSink struct{ recs []DeadRecord }

func (d *deadSink) DeadLetter(r DeadRecord) error { d.recs = append(d.recs, r); return nil }

// TestSubtaskMaxAhead: one time far ahead of the stream goes to the dead
// letters and never moves the watermark; a jump that the following events
// confirm (a gap in the input) goes through; a bad time among the first
// events is judged against their median.
func TestSubtaskMaxAhead(t *testing.T) {
	const far = 253402300799000 // 9999-12-31T23:59:59Z
	const maxT = int64(event.MaxTime)
	for _, c := range []struct {
		name         string
		times        []int64
		passed, dead []int64
	}{
		{"one far-future event", []int64{10000, 11000, 12000, 13000, 14000, 15000, far, 16000, 17000},
			[]int64{1, 2, 3, 4, 5, 6, 8, 9}, []int64{7}},
		{"two in a row, then the stream", []int64{10000, 11000, 12000, 13000, 14000, far, far, 15000},
			[]int64{1, 2, 3, 4, 5, 8}, []int64{6, 7}},
		{"a gap confirmed by five events", []int64{10000, 11000, 12000, 13000, 14000, 90000, 90100, 90200, 90300, 90400, 90500, 10000},
			[]int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, nil},
		{"a jump not confirmed before the end", []int64{10000, 11000, 12000, 13000, 14000, 15000, 90000, 90100},
			[]int64{1, 2, 3, 4, 5, 6}, []int64{7, 8}},
		{"two different jumps", []int64{10000, 11000, 12000, 13000, 14000, 90000, 190000, 190100, 190200, 190300, 190400},
			[]int64{1, 2, 3, 4, 5, 7, 8, 9, 10, 11}, []int64{6}},
		{"on line 1", []int64{far, 10000, 11000, 12000, 13000, 14000},
			[]int64{2, 3, 4, 5, 6}, []int64{1}},
		{"a short input", []int64{10000, far}, []int64{1}, []int64{2}},
		{"within the bound", []int64{10000, 11000, 12000, 12500, 11500, 13000}, []int64{1, 2, 3, 4, 5, 6}, nil},
		// The stream's time plus the bound is past MaxTime (-time-unit ms takes
		// any number): it wrapped around to a time before the stream, and every
		// event, however near, was called far ahead.
		{"near the largest time", []int64{maxT - 600, maxT - 500, maxT - 400, maxT - 300, maxT - 200, maxT - 100, maxT - 50},
			[]int64{1, 2, 3, 4, 5, 6, 7}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			passed, dead, wms := runAhead(t, c.times...)
			if fmt.Sprint(passed) != fmt.Sprint(c.passed) || fmt.Sprint(dead) != fmt.Sprint(c.dead) {
				t.Errorf("passed %v, dead %v; want %v, %v", passed, dead, c.passed, c.dead)
			}
			for _, w := range wms {
				if w != "MAX" && strings.HasPrefix(w, "2") && len(w) > 12 {
					t.Errorf("watermark %s moved by a far-future event", w)
				}
			}
		})
	}
}

// TestSubtaskGiveUp: with GiveUpAfter, a run in which no record decodes
// stops there with ErrNothingDecoded; one that decodes something reads on.
func TestSubtaskGiveUp(t *testing.T) {
	run := func(input string) (Stats, error) {
		src, _ := NewFileSource(strings.NewReader(input), "test", SourceConfig{})
		dec, _ := jsonev.NewDecoder(jsonev.Config{Schema: subtaskSchema, TimeField: "ts", Required: []string{"card"}})
		wm, _ := NewWatermarkGenerator(0, 1)
		var log []string
		st, err := NewSubtask(SubtaskConfig[string]{Source: src, Decoder: dec, Watermarks: wm,
			Operators: []KeyedOperator[string]{&recorder{name: "op", log: &log}}, GiveUpAfter: 3})
		if err != nil {
			t.Fatal(err)
		}
		err = st.Run(context.Background())
		return st.Stats(), err
	}
	bad := strings.Repeat(`{"ts":1}`+"\n", 10)
	if s, err := run(bad); !errors.Is(err, ErrNothingDecoded) || s.Records != 3 || s.Dead != 3 {
		t.Errorf("nothing decodes: %v after %+v", err, s)
	}
	if s, err := run(`{"card":"a","ts":1}` + "\n" + bad); err != nil || s.Records != 11 || s.Watermark != event.MaxTime {
		t.Errorf("one decodes: %v after %+v", err, s)
	}

	// With lookups that reject every event (a lookup failing closed whose
	// source is down), the events decode but none reaches the operators:
	// the run gives up once the events waiting for their lookups are
	// rejected, not at the one record count it checked first, while a
	// batch was still waiting.
	rejectAll := func(input string, batch int) (Stats, error) {
		src, _ := NewFileSource(strings.NewReader(input), "test", SourceConfig{})
		dec, _ := jsonev.NewDecoder(jsonev.Config{Schema: subtaskSchema, TimeField: "ts", Required: []string{"card"}})
		wm, _ := NewWatermarkGenerator(0, 1)
		var log []string
		st, err := NewSubtask(SubtaskConfig[string]{Source: src, Decoder: dec, Watermarks: wm,
			Operators: []KeyedOperator[string]{&recorder{name: "op", log: &log}}, GiveUpAfter: 3, EnrichBatch: batch,
			Enrich: func(_ context.Context, evs []*event.Event, reasons []string) error {
				for i := range evs {
					reasons[i] = "lookup l: source down"
				}
				return nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		err = st.Run(context.Background())
		return st.Stats(), err
	}
	good := strings.Repeat(`{"card":"a","ts":1}`+"\n", 20)
	if s, err := rejectAll(good, 2); !errors.Is(err, ErrNothingDecoded) || s.Records >= 20 || s.Decoded != 0 {
		t.Errorf("every event rejected by its lookups: %v after %+v; want ErrNothingDecoded before the end", err, s)
	}
}
