package runtime

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/event"
)

func TestWatermarkGenerator(t *testing.T) {
	cases := []struct {
		name  string
		bound time.Duration
		every int
		ts    []event.Time
		want  string // emitted watermarks, one per event ("-" for none)
	}{
		{name: "no bound", ts: []event.Time{10, 5, 11, 11, 12}, want: "9 - 10 - 11"},
		{name: "bound", bound: 5 * time.Millisecond, ts: []event.Time{100, 103, 99, 106}, want: "94 97 - 100"},
		{name: "sub-millisecond bound truncated", bound: 1500 * time.Microsecond, ts: []event.Time{100}, want: "98"},
		{name: "every 3", every: 3, ts: []event.Time{1, 2, 3, 4, 5, 6, 7, 2, 1, 8}, want: "- - 2 - - 5 - - 6 -"},
		{name: "every 2 without progress", every: 2, ts: []event.Time{10, 1, 2, 3, 11, 4}, want: "- 9 - - - 10"},
		{name: "negative times", ts: []event.Time{-10, -20, -5}, want: "-11 - -6"},
		{name: "underflow saturates", bound: time.Second,
			ts: []event.Time{event.MinTime, event.MinTime + 1000, event.MinTime + 1001, event.MinTime + 1002}, want: "- - - MIN+1"},
		{name: "max time", ts: []event.Time{event.MaxTime}, want: "MAX-1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, err := NewWatermarkGenerator(c.bound, c.every)
			if err != nil {
				t.Fatal(err)
			}
			if g.Current() != event.MinTime || g.Emitted() != event.MinTime {
				t.Fatalf("initial Current %v, Emitted %v; want MIN", g.Current(), g.Emitted())
			}
			var got []string
			for _, ts := range c.ts {
				w, ok := g.OnEvent(ts)
				switch {
				case !ok:
					got = append(got, "-")
				case w > event.MaxTime-100:
					got = append(got, fmt.Sprintf("MAX-%d", event.MaxTime-w))
				case w < event.MinTime+100:
					got = append(got, fmt.Sprintf("MIN+%d", w-event.MinTime))
				default:
					got = append(got, fmt.Sprint(int64(w)))
				}
				if ok && g.Emitted() != w {
					t.Errorf("Emitted = %v after emitting %v", g.Emitted(), w)
				}
			}
			if s := strings.Join(got, " "); s != c.want {
				t.Errorf("emitted %q, want %q", s, c.want)
			}
			if g.Final() != event.MaxTime || g.Emitted() != event.MaxTime {
				t.Error("Final is not event.MaxTime")
			}
		})
	}
}

// TestWatermarkFlinkFormula checks Current against Flink's
// maxTimestamp - outOfOrdernessMillis - 1 after every event.
func TestWatermarkFlinkFormula(t *testing.T) {
	g, err := NewWatermarkGenerator(250*time.Millisecond, 7)
	if err != nil {
		t.Fatal(err)
	}
	maxTS := event.MinTime
	for i := range 1000 {
		ts := event.Time(i*13%997) * 10
		maxTS = max(maxTS, ts)
		g.OnEvent(ts)
		if want := maxTS - 250 - 1; g.Current() != want {
			t.Fatalf("event %d: Current = %d, want %d", i, g.Current(), want)
		}
		if g.Emitted() > g.Current() {
			t.Fatalf("event %d: emitted %d ahead of current %d", i, g.Emitted(), g.Current())
		}
	}
}

func TestNewWatermarkGeneratorErrors(t *testing.T) {
	if _, err := NewWatermarkGenerator(-time.Millisecond, 1); err == nil {
		t.Error("negative bound accepted")
	}
	if _, err := NewWatermarkGenerator(0, -1); err == nil {
		t.Error("negative interval accepted")
	}
}
