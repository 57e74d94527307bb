package benchmarks

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/cep"
	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/internal/gen"
)

// small returns a workload's first n events, through the data file format
// that both engines read.
func small(tb testing.TB, w *Workload, n int) ([]*event.Event, []*cep.Rule) {
	tb.Helper()
	recs, err := w.Generate(n)
	if err != nil {
		tb.Fatal(err)
	}
	var buf bytes.Buffer
	if err := gen.WriteBenchCSV(&buf, w.Columns, recs); err != nil {
		tb.Fatal(err)
	}
	rs, r, err := w.Compile()
	if err != nil {
		tb.Fatal(err)
	}
	evs, err := ReadData(&buf, rs)
	if err != nil {
		tb.Fatal(err)
	}
	if len(evs) != n {
		tb.Fatalf("%s: read %d events, wrote %d", w.Name, len(evs), n)
	}
	return evs, r
}

// smallSize is the size of a workload in the tests and Go benchmarks: a
// few windows' worth, quick even for W2-7's partial-match explosion.
func smallSize(w *Workload) int {
	switch w.Name {
	case "W2-7":
		return 5_000
	case "W4", "W4-F":
		return 10_000 // 100 rules: as much work as 1M events of W1
	}
	return w.Events / 20
}

// TestWorkloads runs every workload at a small size: it must find matches,
// find the same ones whatever the watermark cadence (a watermark after every
// event, or every WatermarkEvery events), and never see a late event.
func TestWorkloads(t *testing.T) {
	for _, w := range Workloads {
		t.Run(w.Name, func(t *testing.T) {
			evs, r := small(t, w, smallSize(w))
			var hashes []string
			for _, every := range []int{1, WatermarkEvery} {
				res, err := Run(w.Name, r, evs, RunConfig{Warmup: len(evs) / 10, OutOfOrderness: w.OutOfOrderness, WatermarkEvery: every})
				if err != nil {
					t.Fatal(err)
				}
				// W4 has 0.6 events per key: its small size matches
				// nothing (W4-F, the same ruleset denser, does).
				if !res.Finished || (res.Matches == 0 && w.Name != "W4") {
					t.Fatalf("watermark every %d: finished %v, %d matches; want a finished run with matches", every, res.Finished, res.Matches)
				}
				hashes = append(hashes, res.Hash)
			}
			if hashes[0] != hashes[1] {
				t.Errorf("the watermark cadence changes the matches: hash %s, then %s", hashes[0], hashes[1])
			}
		})
	}
}

// TestWorkloadsSorted checks the generators' promise: no event is further
// behind the largest timestamp before it than the workload's bound.
func TestWorkloadsSorted(t *testing.T) {
	for _, w := range Workloads {
		recs, err := w.Generate(smallSize(w))
		if err != nil {
			t.Fatal(err)
		}
		bound := w.OutOfOrderness.Milliseconds()
		maxTs := recs[0].TS
		for i, r := range recs {
			if r.TS < maxTs-bound {
				t.Fatalf("%s: event %d at %d is more than %d ms behind %d", w.Name, i+1, r.TS, bound, maxTs)
			}
			maxTs = max(maxTs, r.TS)
		}
	}
}

// TestSignatureHash pins the hash of a small set of signatures. The Flink
// runner's BenchJobTest pins the same value: the two engines must hash
// alike, or every comparison would fail.
func TestSignatureHash(t *testing.T) {
	got := SignatureHash([]string{"login=3;pays=4,5;over=9", "login=1;pays=2,6;over=7", "t1=10;t2=11"})
	if want := "f299a5e197e50f13"; got != want {
		t.Errorf("SignatureHash = %s, want %s", got, want)
	}
}

// TestRunTimeout checks that a run over its cap stops and says how far it
// got.
func TestRunTimeout(t *testing.T) {
	w := Lookup("W2-3")
	evs, r := small(t, w, 5_000)
	res, err := Run(w.Name, r, evs, RunConfig{Warmup: 100, Timeout: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Finished || res.Processed >= int64(len(evs)) {
		t.Errorf("finished %v after %d of %d events; want a run cut short", res.Finished, res.Processed, len(evs))
	}
}

// TestReport checks the table and the failure on a mismatch.
func TestReport(t *testing.T) {
	w := Lookup("W1")
	run := func(engine, hash string, eps float64) *Result {
		return &Result{Engine: engine, Workload: "W1", Events: w.Events, Warmup: w.Warmup, Finished: true,
			Processed: int64(w.Events), Matches: 7, Hash: hash, EventsPerSec: eps, CPUSeconds: 1, PeakRSSKiB: 2048}
	}
	rows, err := Summarize([]*Result{run("cepheus", "aa", 300), run("flink", "aa", 100), run("cepheus", "aa", 200)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows[0].Problems) > 0 {
		t.Fatalf("problems: %v", rows[0].Problems)
	}
	line := strings.Split(Table(rows), "\n")[2]
	if want := "| W1 | 2,400,000 | 7 | 200 | 100 | 2.00× | 1.0 / 1.0 | 2 / 2 |"; line != want {
		t.Errorf("row\n%s\nwant\n%s", line, want)
	}
	rows, err = Summarize([]*Result{run("cepheus", "aa", 300), run("flink", "bb", 100)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows[0].Problems) != 1 || !strings.Contains(rows[0].Problems[0], "MISMATCH") {
		t.Errorf("problems %v, want one MISMATCH", rows[0].Problems)
	}
	dnf := &Result{Engine: "flink", Workload: "W1", Events: w.Events, Warmup: w.Warmup, Processed: 99_328}
	rows, err = Summarize([]*Result{run("cepheus", "aa", 300), dnf})
	if err != nil {
		t.Fatal(err)
	}
	if got := Table(rows); !strings.Contains(got, "did not finish at 99,328 events") {
		t.Errorf("table without the did-not-finish cell:\n%s", got)
	}
}

// BenchmarkWorkloads runs each workload at its small size through the
// operator, as cepbench run does (watermark every WatermarkEvery events,
// final flush), from a new operator each iteration.
func BenchmarkWorkloads(b *testing.B) {
	for _, w := range Workloads {
		b.Run(w.Name, func(b *testing.B) {
			evs, r := small(b, w, smallSize(w))
			cfg := RunConfig{OutOfOrderness: w.OutOfOrderness}
			b.ReportAllocs()
			var n int
			for b.Loop() {
				if _, err := Run(w.Name, r, evs, cfg); err != nil {
					b.Fatal(err)
				}
				n += len(evs)
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkSteady measures the per-event cost of W1 (one rule) and W4-F
// (100 rules) in steady state: ns/op and allocs/op are per event. The
// workload's small stream is replayed lap after lap through one operator,
// each lap shifted in event time (and Seq) past the one before, so the
// stream never ends and no event is late; the clock starts after two laps
// of warm-up, when every key's state exists and the operator's pools are
// full. Two copies of the events alternate, and a copy is shifted only
// when its previous lap is two laps (40 minutes of event time, four
// windows) behind, so no state still refers to the events it changes.
// Watermarks come every WatermarkEvery events; matches are counted and
// dropped as cepbench run does.
func BenchmarkSteady(b *testing.B) {
	for _, name := range []string{"W1", "W4-F"} {
		w := Lookup(name)
		b.Run(name, func(b *testing.B) {
			evs, rules := small(b, w, smallSize(w))
			rs, _, err := w.Compile()
			if err != nil {
				b.Fatal(err)
			}
			tsSlot, _ := rs.Schema.Slot(rs.TimeField)
			n := len(evs)
			orig := make([]event.Time, n)
			maxTs := event.MinTime
			for i, ev := range evs {
				orig[i] = ev.Time
				maxTs = max(maxTs, ev.Time)
			}
			bound := event.Time(w.OutOfOrderness.Milliseconds())
			shift := maxTs + bound + 1 // the next lap starts after this one's last event
			copies := [2][]*event.Event{evs, make([]*event.Event, n)}
			for i, ev := range evs {
				c := *ev
				c.Fields = append([]event.Value(nil), ev.Fields...)
				copies[1][i] = &c
			}
			place := func(lap int) []*event.Event {
				cp := copies[lap%2]
				for i, ev := range cp {
					ev.Time = orig[i] + event.Time(lap)*shift
					ev.Fields[tsSlot] = event.Int(int64(ev.Time))
					ev.Seq = uint64(lap*n + i + 1)
				}
				return cp
			}
			op, err := NewOperator(rules)
			if err != nil {
				b.Fatal(err)
			}
			var (
				out     cep.Output
				matches int
				late    int
				seen    = event.MinTime
				lastWm  = event.MinTime
				count   int
			)
			step := func(ev *event.Event) {
				if err := op.ProcessElement(ev, ev.Time, &out); err != nil {
					b.Fatal(err)
				}
				seen = max(seen, ev.Time)
				count++
				if count%WatermarkEvery == 0 {
					if wm := seen - bound - 1; wm > lastWm {
						lastWm = wm
						if err := op.ProcessWatermark(wm, &out); err != nil {
							b.Fatal(err)
						}
					}
				}
				for i := range out.Items {
					switch out.Items[i].Kind {
					case cep.ItemMatch:
						matches++
					case cep.ItemLate:
						late++
					}
				}
				out.Reset()
			}
			lap := 0
			for ; lap < 2; lap++ {
				for _, ev := range place(lap) {
					step(ev)
				}
			}
			warm := matches
			cur, i := place(lap), 0
			b.ReportAllocs()
			for b.Loop() {
				if i == n {
					// Re-stamping a lap's events is the harness's work,
					// not the engine's: not timed.
					b.StopTimer()
					lap++
					cur, i = place(lap), 0
					b.StartTimer()
				}
				step(cur[i])
				i++
			}
			b.StopTimer()
			if late > 0 {
				b.Fatalf("%d late events", late)
			}
			if warm == 0 || matches == warm && b.N > n {
				b.Fatalf("%d matches in the warm-up, %d after: want matches in both", warm, matches-warm)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
