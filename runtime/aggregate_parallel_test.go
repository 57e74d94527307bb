package runtime

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/cepheus-cep/cepheus/event"
)

// skewedAggEvents are n events of which share are of one hot key, the
// others Zipf-skewed over keys, with the values of randomAggEvents.
func skewedAggEvents(rnd *rand.Rand, n, keys int, share float64, bound int64, outs int) []*event.Event {
	evs := randomAggEvents(rnd, n, keys, bound, outs)
	for _, ev := range evs {
		if rnd.Float64() < share {
			ev.Fields[slotKey] = event.String("hot")
		}
	}
	return evs
}

// feed runs evs through agg as runAggregator does (a watermark bound
// behind the newest every 7 events, then the final one), switching to
// the aggregation next(state) returns at the indexes of switchAt.
func feed(t *testing.T, agg Aggregation, evs []*event.Event, bound int64, switchAt map[int]func([]byte) Aggregation) []*event.Event {
	return feedEvery(t, agg, evs, bound, 7, switchAt)
}

// feedEvery is feed with a watermark every every events.
func feedEvery(t *testing.T, agg Aggregation, evs []*event.Event, bound int64, every int, switchAt map[int]func([]byte) Aggregation) []*event.Event {
	t.Helper()
	var out []*event.Event
	collect := func(ev *event.Event) error { out = append(out, ev); return nil }
	newest := event.MinTime
	for i, ev := range evs {
		if next := switchAt[i]; next != nil {
			agg = next(agg.AppendBinary(nil))
		}
		if !agg.Add(ev) {
			t.Fatalf("event %d is late", i)
		}
		newest = max(newest, ev.Time)
		if i%every == every-1 {
			if err := agg.Advance(newest-event.Time(bound)-1, collect); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := agg.Advance(event.MaxTime, collect); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestParallelAggregatorEqualsSerial: over Zipf-skewed streams where one
// key has most of the events, the aggregates spread over 1, 2 and 3
// workers, with the hot keys salted (the threshold lowered so that they
// are, early), give exactly the serial Aggregator's values at every
// event, in the same order; and a state moves between the two midway (a
// restore with another parallelism) without changing any. Seeds 4-7
// release 150 events at a time with the default thresholds: a key is
// salted as jobs salt it, and the hot keys reported are the serial
// Aggregator's.
func TestParallelAggregatorEqualsSerial(t *testing.T) {
	for seed := range uint64(8) {
		every := 7
		if seed >= 4 {
			every = 150
		}
		rnd := rand.New(rand.NewPCG(seed, 16))
		const bound = 2000
		specs := aggSpecs()
		evs := skewedAggEvents(rnd, 3000, 8, 0.6, bound, len(specs))
		copyEvents := func() []*event.Event { return cloneEvents(evs) }
		serialAgg, err := NewAggregator(specs)
		if err != nil {
			t.Fatal(err)
		}
		want := feedEvery(t, serialAgg, copyEvents(), bound, every, nil)
		workers := 1 + int(seed%3)
		par, err := NewParallelAggregator(specs, workers, workers)
		if err != nil {
			t.Fatal(err)
		}
		defer par.Close()
		if every == 7 {
			par.SetHot(0.05, 2)
		}
		switchAt := map[int]func([]byte) Aggregation{}
		if seed%2 == 1 {
			// Parallel to serial and back, with other workers.
			switchAt[900] = func(st []byte) Aggregation {
				s, _ := NewAggregator(specs)
				if err := s.Restore(st); err != nil {
					t.Fatal(err)
				}
				return s
			}
			switchAt[1800] = func(st []byte) Aggregation {
				p, _ := NewParallelAggregator(specs, 3, 2)
				t.Cleanup(p.Close)
				if every == 7 {
					p.SetHot(0.05, 2)
				}
				if err := p.Restore(st); err != nil {
					t.Fatal(err)
				}
				return p
			}
		}
		got := feedEvery(t, par, copyEvents(), bound, every, switchAt)
		if len(got) != len(want) {
			t.Fatalf("seed %d: %d events, want %d", seed, len(got), len(want))
		}
		if seed%2 == 0 && workers > 1 && par.hotCount == 0 {
			t.Errorf("seed %d: no key was salted", seed)
		}
		if every != 7 && seed%2 == 0 && !slices.Equal(par.HotKeys(), serialAgg.HotKeys()) {
			t.Errorf("seed %d: hot keys %v, serial %v", seed, par.HotKeys(), serialAgg.HotKeys())
		}
		compareSerial(t, fmt.Sprintf("seed %d, %d workers", seed, workers), specs, got, want)
		t.Logf("seed %d: %d workers, %d hot keys, %d events", seed, workers, par.hotCount, len(got))
	}
}

// compareSerial reports the events of got that are not want's, in the
// same order, or whose aggregates (of specs) differ from want's, the
// serial Aggregator's (what names the run).
func compareSerial(t *testing.T, what string, specs []AggregateSpec, got, want []*event.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events, want %d", what, len(got), len(want))
	}
	bad := 0
	for i := range want {
		if got[i].Seq != want[i].Seq {
			t.Fatalf("%s: event %d is seq %d, want %d", what, i, got[i].Seq, want[i].Seq)
		}
		for _, s := range specs {
			if g, w := got[i].Fields[s.Slot], want[i].Fields[s.Slot]; !sameValue(g, w) {
				if bad++; bad <= 10 {
					t.Errorf("%s: event seq %d key %v, %v (tumbling %v, filtered %v): %v, serial %v",
						what, got[i].Seq, got[i].Field(slotKey), s.Func, s.Tumbling, s.Accepts != nil, g, w)
				}
			}
		}
	}
	if bad > 10 {
		t.Errorf("%s: %d values differ in all", what, bad)
	}
}

// TestParallelAggregatorBound: MaxPerKey bounds a key's window, salted
// or not: over Zipf-skewed streams with one key at 60% and a bound of 5
// events (crossed at most of the hot key's events; times rounded in some
// streams, so that many events share a time, more than 5 of the hot key
// at once in some), ParallelAggregators of 1-3 workers, salted or not,
// give the serial Aggregator's values at every event and its Dropped
// counts (the same events forgotten); and so do runs whose state moves,
// past the bound, into other numbers of workers (one included) and the
// serial Aggregator. Seeds 3-5 release 150 events at a time with the
// default thresholds, the others 7 with the hot key salted early. Seeds
// 6-8 bound at 16, and a gap in event time empties every window midway:
// the salted key's releases go from near its bound (evNear) to far from
// it and back, several times.
func TestParallelAggregatorBound(t *testing.T) {
	configs := [][2]int{{2, 2}, {3, 3}, {3, 2}, {2, 1}, {1, 1}} // workers, salts
	for seed := range uint64(9) {
		rnd := rand.New(rand.NewPCG(seed, 18))
		round := []int64{1, 500, 2000, 6000}[seed%4]
		const bound = 2000
		every, most := 7, 5
		if seed >= 3 && seed < 6 {
			every = 150
		}
		if seed >= 6 {
			most = 16
		}
		specs := aggSpecs()
		for i := range specs {
			specs[i].MaxPerKey = most
		}
		evs := skewedAggEvents(rnd, 3000, 8, 0.6, bound, len(specs))
		for i, ev := range evs {
			ev.Time -= ev.Time % event.Time(round)
			if most == 16 && i >= len(evs)/2 {
				ev.Time += 30_000 // past every window
			}
		}
		serial, err := NewAggregator(specs)
		if err != nil {
			t.Fatal(err)
		}
		want := feedEvery(t, serial, cloneEvents(evs), bound+round, every, nil)
		for si, d := range serial.Dropped() {
			if d == 0 {
				t.Fatalf("seed %d: aggregate %d (%v) dropped nothing: the bound is not crossed", seed, si, specs[si].Func)
			}
		}
		newParallel := func(c [2]int) *ParallelAggregator {
			p, err := NewParallelAggregator(specs, c[0], c[1])
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(p.Close)
			if every == 7 {
				p.SetHot(0.05, 2)
			}
			return p
		}
		for ci, c := range configs {
			for _, moved := range []bool{false, true} {
				what := fmt.Sprintf("seed %d, %d workers, %d salts", seed, c[0], c[1])
				var cur Aggregation // the aggregation in use
				restoreInto := func(next Aggregation) func([]byte) Aggregation {
					return func(st []byte) Aggregation {
						if err := next.Restore(st); err != nil {
							t.Fatal(err)
						}
						cur = next
						return next
					}
				}
				switchAt := map[int]func([]byte) Aggregation{}
				if moved {
					// Past the bound from the start: to the serial
					// Aggregator, to the next configuration, back to this one.
					next := configs[(ci+1)%len(configs)]
					what += fmt.Sprintf(", moved to 1 worker, %v and back", next)
					serialNext, err := NewAggregator(specs)
					if err != nil {
						t.Fatal(err)
					}
					switchAt[800] = restoreInto(serialNext)
					switchAt[1500] = restoreInto(newParallel(next))
					switchAt[2200] = restoreInto(newParallel(c))
				}
				par := &nearCount{ParallelAggregator: newParallel(c)}
				cur = par
				got := feedEvery(t, par, cloneEvents(evs), bound+round, every, switchAt)
				if !moved && c[1] > 1 && par.hotCount == 0 {
					t.Errorf("%s: no key was salted", what)
				}
				if !moved && c[1] > 1 && most == 16 && (par.near < 10 || par.far < 10) {
					t.Errorf("%s: salted keys near their bound in %d releases, far from it in %d: want both", what, par.near, par.far)
				}
				compareSerial(t, what, specs, got, want)
				if g, w := cur.Dropped(), serial.Dropped(); !slices.Equal(g, w) {
					t.Errorf("%s: dropped %v, serial %v", what, g, w)
				}
			}
		}
	}
}

// TestAggregateKeyCounts: after every Advance, KeyCounts of the serial
// Aggregator and of ParallelAggregators on 1-3 workers, salted or not,
// are the keys whose window holds a counted event at the watermark
// (sliding: in (wm-Window, wm]; tumbling: in wm's bucket), as a scan of
// the events released gives, whatever the sweeps have forgotten yet;
// none at the final watermark. The stream has Zipf-skewed tail keys
// whose windows go stale, a hot key salted early, a gap in event time
// that empties every window, and a restore midway; and counting changes
// no value (against an aggregator never counted).
func TestAggregateKeyCounts(t *testing.T) {
	for seed := range uint64(4) {
		rnd := rand.New(rand.NewPCG(seed, 17))
		const bound = 2000
		specs := aggSpecs()
		evs := skewedAggEvents(rnd, 1500, 40, 0.4, bound, len(specs))
		for _, ev := range evs[len(evs)/2:] {
			ev.Time += 30_000 // past every window
		}
		copyEvents := func() []*event.Event { return cloneEvents(evs) }
		type run struct {
			name string
			make func() Aggregation
			agg  Aggregation
			evs  []*event.Event
			out  []*event.Event
		}
		runs := []*run{{name: "serial", make: func() Aggregation {
			a, err := NewAggregator(specs)
			if err != nil {
				t.Fatal(err)
			}
			return a
		}}}
		for _, ws := range [][2]int{{1, 1}, {2, 1}, {2, 2}, {3, 1}, {3, 2}} {
			runs = append(runs, &run{name: fmt.Sprintf("%d workers, %d salts", ws[0], ws[1]), make: func() Aggregation {
				a, err := NewParallelAggregator(specs, ws[0], ws[1])
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(a.Close)
				a.SetHot(0.05, 2)
				return a
			}})
		}
		for _, r := range runs {
			r.agg, r.evs = r.make(), copyEvents()
		}
		// The reference: an aggregator whose KeyCounts is never called.
		ref := runs[0].make()
		refEvs := copyEvents()
		var released []*event.Event // by the reference
		advance := func(wm event.Watermark) {
			if err := ref.Advance(wm, func(ev *event.Event) error { released = append(released, ev); return nil }); err != nil {
				t.Fatal(err)
			}
			want := make([]int, len(specs))
			for si, sp := range specs {
				want[si] = naiveKeyCount(sp, released, wm)
			}
			for _, r := range runs {
				if err := r.agg.Advance(wm, func(ev *event.Event) error { r.out = append(r.out, ev); return nil }); err != nil {
					t.Fatal(err)
				}
				if got := r.agg.KeyCounts(); !slices.Equal(got, want) {
					t.Fatalf("seed %d, %s, watermark %d (%d events released): key counts %v, want %v", seed, r.name, wm, len(released), got, want)
				}
			}
		}
		newest, salted := event.MinTime, false
		for i := range evs {
			if i == len(evs)/3 {
				for _, r := range runs {
					next := r.make()
					if err := next.Restore(r.agg.AppendBinary(nil)); err != nil {
						t.Fatal(err)
					}
					r.agg = next
				}
			}
			if !ref.Add(refEvs[i]) {
				t.Fatalf("seed %d: event %d is late", seed, i)
			}
			for _, r := range runs {
				r.agg.Add(r.evs[i])
				if p, ok := r.agg.(*ParallelAggregator); ok && p.hotCount > 0 {
					salted = true
				}
			}
			newest = max(newest, evs[i].Time)
			if i%7 == 6 {
				advance(newest - bound - 1)
			}
		}
		advance(event.MaxTime)
		if !salted {
			t.Errorf("seed %d: no key was salted", seed)
		}
		for _, r := range runs {
			if len(r.out) != len(released) {
				t.Fatalf("seed %d, %s: %d events out, want %d", seed, r.name, len(r.out), len(released))
			}
			for i, ev := range r.out {
				for _, sp := range specs {
					if g, w := ev.Fields[sp.Slot], released[i].Fields[sp.Slot]; ev.Seq != released[i].Seq || !sameValue(g, w) {
						t.Fatalf("seed %d, %s: event %d (seq %d, want %d), %v (tumbling %v): %v, want %v (never counted)",
							seed, r.name, i, ev.Seq, released[i].Seq, sp.Func, sp.Tumbling, g, w)
					}
				}
			}
		}
	}
}

// TestParallelAggregatorTies: of a salted key's events of one time, the
// bound forgets first the one that came first, as the serial Aggregator
// does, whether the key was salted with them in its window, or they came
// after, and after a checkpoint of its partials restored into the serial
// Aggregator: one key, four events of one time (values 1-4, in that
// order) or four times two, then one a time, bounded at 4 and 5, every
// function, on 2 and 3 workers salting the key from its first release;
// a release a time.
func TestParallelAggregatorTies(t *testing.T) {
	var specs []AggregateSpec
	for _, fn := range []AggFunc{AggCount, AggSum, AggMin, AggMax, AggDistinct} {
		for _, most := range []int{4, 5} {
			specs = append(specs, AggregateSpec{KeySlots: []int{0}, Func: fn, ValueSlot: 1, Window: 1_000_000, Slot: 2 + len(specs), MaxPerKey: most})
		}
	}
	for _, first := range []int{1, 2} { // the first release: 4 events of one time, after 4 of another
		var evs []*event.Event
		add := func(ts int64, v int64) {
			ev := &event.Event{Time: event.Time(ts), Seq: uint64(len(evs) + 1), Fields: make([]event.Value, 2+len(specs))}
			ev.Fields[0], ev.Fields[1] = event.String("k"), event.Int(v)
			evs = append(evs, ev)
		}
		for ts := range first {
			for v := range int64(4) {
				add(int64(100+100*ts), 10*int64(ts)+v+1)
			}
		}
		for v := range int64(6) {
			add(int64(1000+100*v), 100+v)
		}
		run := func(agg Aggregation, evs []*event.Event, moveAt int) []*event.Event {
			var out []*event.Event
			for i, ev := range evs {
				agg.Add(ev)
				if i+1 < len(evs) && evs[i+1].Time == ev.Time {
					continue
				}
				if err := agg.Advance(ev.Time, func(ev *event.Event) error { out = append(out, ev); return nil }); err != nil {
					t.Fatal(err)
				}
				if i == moveAt {
					serial, err := NewAggregator(specs)
					if err != nil {
						t.Fatal(err)
					}
					if err := serial.Restore(agg.AppendBinary(nil)); err != nil {
						t.Fatal(err)
					}
					agg = serial
				}
			}
			return out
		}
		serial, err := NewAggregator(specs)
		if err != nil {
			t.Fatal(err)
		}
		want := run(serial, cloneEvents(evs), -1)
		for _, workers := range []int{2, 3} {
			for moveAt := -1; moveAt < len(evs); moveAt++ {
				par, err := NewParallelAggregator(specs, workers, workers)
				if err != nil {
					t.Fatal(err)
				}
				par.SetHot(0.05, 2)
				got := run(par, cloneEvents(evs), moveAt)
				par.Close()
				if par.hotCount == 0 {
					t.Fatalf("%d workers: the key is not salted", workers)
				}
				compareSerial(t, fmt.Sprintf("%d first, %d workers, moved to the serial Aggregator after event %d", first, workers, moveAt), specs, got, want)
			}
		}
	}
}

// nearCount is a ParallelAggregator that counts, at each Advance, the
// keys salted before it whose release was near their bound (evNear) and
// those whose release was not.
type nearCount struct {
	*ParallelAggregator
	near, far int
}

func (n *nearCount) Advance(wm event.Watermark, out func(*event.Event) error) error {
	salted := make([]int, len(n.hotList))
	for si, hl := range n.hotList {
		salted[si] = len(hl)
	}
	err := n.ParallelAggregator.Advance(wm, out)
	for si, hl := range n.hotList {
		for _, hk := range hl[:salted[si]] {
			if hk.flag&evNear != 0 {
				n.near++
			} else {
				n.far++
			}
		}
	}
	return err
}

// TestAggregatorRestoreBound: a state whose windows hold more events of
// a key than MaxPerKey (as a salted aggregator's did before its bound
// was per key: up to MaxPerKey in each partial), here one bounded at 40
// restored into aggregators bounded at 5 (serial, and on 1-3 workers,
// salted or not): each window keeps its newest 5 events and counts the
// others as dropped, so from then on every value is that of a run
// bounded at 5 from the start.
func TestAggregatorRestoreBound(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 20))
	const bound = 2000
	wide, narrow := aggSpecs(), aggSpecs()
	for i := range wide {
		wide[i].MaxPerKey, narrow[i].MaxPerKey = 40, 5
	}
	evs := skewedAggEvents(rnd, 2000, 8, 0.6, bound, len(wide))
	ref, err := NewAggregator(narrow)
	if err != nil {
		t.Fatal(err)
	}
	want := feed(t, ref, cloneEvents(evs), bound, nil)
	for _, c := range [][2]int{{0, 0}, {1, 1}, {2, 1}, {2, 2}, {3, 2}} { // workers (0: serial), salts
		what := fmt.Sprintf("into %d workers, %d salts", c[0], c[1])
		first, err := NewAggregator(wide)
		if err != nil {
			t.Fatal(err)
		}
		var wm event.Watermark
		trimmed := 0
		switchAt := map[int]func([]byte) Aggregation{1000: func(st []byte) Aggregation {
			wm = first.wm
			dropped := first.Dropped() // and the events past 5 in the state's windows:
			for si := range wide {
				for _, w := range first.keys[si] {
					over := max(0, len(w.live())-5)
					dropped[si] += uint64(over)
					trimmed += over
				}
			}
			var into Aggregation
			if c[0] == 0 {
				into, err = NewAggregator(narrow)
			} else {
				p, perr := NewParallelAggregator(narrow, c[0], c[1])
				t.Cleanup(p.Close)
				p.SetHot(0.05, 2)
				into, err = p, perr
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := into.Restore(st); err != nil {
				t.Fatal(err)
			}
			if got := into.Dropped(); !slices.Equal(got, dropped) {
				t.Errorf("%s: restored, dropped %v, want %v", what, got, dropped)
			}
			return into
		}}
		got := feed(t, first, cloneEvents(evs), bound, switchAt)
		if trimmed == 0 {
			t.Fatalf("%s: no window held more than 5 events", what)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d events, want %d", what, len(got), len(want))
		}
		var gotAfter, wantAfter []*event.Event // released after the restore
		for i := range got {
			if got[i].Time > wm {
				gotAfter, wantAfter = append(gotAfter, got[i]), append(wantAfter, want[i])
			}
		}
		if len(gotAfter) == 0 {
			t.Fatalf("%s: no event released after the restore", what)
		}
		compareSerial(t, what, narrow, gotAfter, wantAfter)
	}
}

// naiveKeyCount is the number of keys of s with an event of released
// that counts at a time in the window of watermark wm.
func naiveKeyCount(s AggregateSpec, released []*event.Event, wm event.Watermark) int {
	from := int64(wm) - s.Window + 1
	if s.Tumbling {
		from = int64(floorDiv(wm, event.Time(s.Window)) * event.Time(s.Window))
	}
	keys := map[string]bool{}
	for _, e := range released {
		if int64(e.Time) >= from && e.Time <= wm && naiveCounts(s, e) {
			keys[string(canonical(nil, e.Field(slotKey)))] = true
		}
	}
	return len(keys)
}

// BenchmarkSaltedAggregate: a distinct count per merchant over a stream
// where one merchant has 60% of the events (the others Zipf-skewed over
// 2,000), on 2 workers, unsalted (the hot merchant's window on one
// worker) and salted (its partials on both). events/s is the throughput
// of Add and Advance over the releases of 512 events. cold makes a new
// aggregator for each pass of the stream, its windows growing from
// nothing (and its hash seed new: the hot merchant's worker at random);
// steady keeps one and replays the stream later in time at each pass, as
// a long-running stream sees it (its windows full), with the hot
// merchant's window on the caller's worker or on a goroutine's. All run at
// the garbage collector's target of the commands that run aggregates
// (cmd/cepheus: 400, unless GOGC is set, as there). wakes/release is the
// workers found parked at a release (crewYield).
func BenchmarkSaltedAggregate(b *testing.B) {
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(400))
	}
	const n = 200_000
	const step = 10 // ms between two events
	rnd := rand.New(rand.NewPCG(1, 2))
	zipf := rand.NewZipf(rnd, 1.1, 4, 1999)
	evs := make([]*event.Event, n)
	for i := range evs {
		m := fmt.Sprintf("m%d", zipf.Uint64()+1)
		if rnd.Float64() < 0.6 {
			m = "m0"
		}
		evs[i] = &event.Event{Time: event.Time(i * step), Fields: []event.Value{
			event.String(m), event.String(fmt.Sprintf("card%d", rnd.IntN(100_000))), event.Null,
		}}
	}
	specs := []AggregateSpec{{KeySlots: []int{0}, Func: AggDistinct, ValueSlot: 1, Window: 600_000, Slot: 2}}
	// pass runs the stream through a, its times shifted by shift.
	pass := func(b *testing.B, a *ParallelAggregator, shift event.Time) {
		for i, ev := range evs {
			ev.Time = event.Time(i*step) + shift
			a.Add(ev)
			if i%512 == 511 {
				if err := a.Advance(ev.Time, func(*event.Event) error { return nil }); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	newAgg := func(b *testing.B, salts int) *ParallelAggregator {
		a, err := NewParallelAggregator(specs, 2, salts)
		if err != nil {
			b.Fatal(err)
		}
		return a
	}
	// hotOn is an aggregator whose hash seed gives the hot merchant's
	// window (its salt 0) to worker w: 0 the caller's, 1 a goroutine's.
	hotOn := func(b *testing.B, salts, w int) *ParallelAggregator {
		for {
			a := newAgg(b, salts)
			if a.workerOf(a.hash(aggKey{kind: event.KindString, s: "m0"}), 0) == w {
				return a
			}
			a.Close()
		}
	}
	for _, mode := range []string{"cold", "steady-hot-on-caller", "steady-hot-on-worker"} {
		for _, salts := range []int{1, 2} {
			name := mode + "/" + map[int]string{1: "unsalted", 2: "salted"}[salts]
			b.Run(name, func(b *testing.B) {
				var a *ParallelAggregator
				if mode != "cold" {
					a = hotOn(b, salts, map[bool]int{true: 0, false: 1}[mode == "steady-hot-on-caller"])
					defer a.Close()
					pass(b, a, 0) // fills the windows, untimed
				}
				b.ReportAllocs()
				var total, wakes, releases int
				for p := 1; b.Loop(); p++ {
					if mode == "cold" {
						a = newAgg(b, salts)
					}
					w0 := a.crew.wakes
					pass(b, a, event.Time(p*n*step))
					wakes += a.crew.wakes - w0
					releases += n / 512
					if mode == "cold" {
						a.Close()
					}
					total += n
				}
				b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "events/s")
				// A worker woken at a release costs the caller (crewYield).
				b.ReportMetric(float64(wakes)/float64(releases), "wakes/release")
			})
		}
	}
}

// TestAggregatePartialTable: a partial is found by its key and salt,
// whether its key's string is short (compared with the copy in the
// partial) or long, among partials whose keys share a hash and a length;
// and a table of many keys (some hashes shared) finds each partial as
// they are added, removed and swept.
func TestAggregatePartialTable(t *testing.T) {
	long := strings.Repeat("x", partialName)
	keys := []aggKey{
		{kind: event.KindString, s: "m1"}, {kind: event.KindString, s: "m2"}, {kind: event.KindString},
		{kind: event.KindString, s: long + "1"}, {kind: event.KindString, s: long + "2"},
		{kind: event.KindString, s: long[1:] + "1"}, {kind: event.KindString, s: long[1:] + "2"},
		{kind: event.KindInt, n: 1}, {kind: event.KindFloat, n: 1}, {kind: keyParts, s: "m1"},
	}
	var tab partialTable
	for i, k := range keys {
		for salt := range 2 {
			tab.add(7, partialKey{key: k, salt: salt}).nums = 2*i + salt
		}
	}
	for i, k := range keys {
		for salt := range 2 {
			// A copy of the string, as an event's key is.
			k.s = strings.Clone(k.s)
			if p := tab.get(7, partialKey{key: k, salt: salt}); p == nil || p.nums != 2*i+salt {
				t.Errorf("key %v salt %d: found %v", k, salt, p)
			}
		}
	}
	if p := tab.get(7, partialKey{key: aggKey{kind: event.KindString, s: "m3"}}); p != nil {
		t.Errorf("key m3: found the partial of %v", p.key)
	}

	rnd := rand.New(rand.NewPCG(5, 6))
	tab = partialTable{}
	type entry struct {
		h    uint64
		pk   partialKey
		kept bool // holds an entry (a sweep keeps it)
	}
	in := map[int]entry{}
	spec := &AggregateSpec{Window: 1000}
	check := func(when string) {
		t.Helper()
		n := 0
		tab.each(func(*partial) { n++ })
		if n != len(in) {
			t.Fatalf("%s: %d partials, want %d", when, n, len(in))
		}
		for id, e := range in {
			if p := tab.get(e.h, e.pk); p == nil || p.nums != id {
				t.Fatalf("%s: partial %d (hash %x) not found", when, id, e.h)
			}
		}
	}
	for round := range 4 {
		for range 3000 {
			id := len(in) + 10_000*round
			// A few hashes are shared, by other keys or another salt.
			h := rnd.Uint64() >> (rnd.IntN(2) * 55)
			e := entry{h: h, pk: partialKey{key: aggKey{kind: event.KindString, s: fmt.Sprint("k", id)}, salt: rnd.IntN(2)}, kept: rnd.IntN(3) == 0}
			p := tab.add(h, e.pk)
			p.nums = id
			if e.kept {
				p.entries = []aggEntry{{t: 0}}
			}
			in[id] = e
		}
		check("added")
		for id, e := range in {
			if rnd.IntN(4) == 0 {
				tab.remove(e.h, tab.get(e.h, e.pk))
				delete(in, id)
			}
		}
		check("removed")
		if n, want := tab.removeEmpty(spec, 0), len(in); n != want {
			t.Fatalf("swept %d partials, want %d", n, want)
		}
		for id, e := range in {
			if !e.kept {
				delete(in, id)
			}
		}
		check("swept")
	}
}

// cloneEvents returns copies of evs, fields included: each aggregator of
// a test fills the aggregate slots of its own.
func cloneEvents(evs []*event.Event) []*event.Event {
	out := make([]*event.Event, len(evs))
	for i, ev := range evs {
		c := *ev
		c.Fields = append([]event.Value(nil), ev.Fields...)
		out[i] = &c
	}
	return out
}

// errOut is the error of the failing outputs of TestAggregatorAdvanceError.
var errOut = errors.New("the output failed")

// advanceRetry is how TestAggregatorAdvanceError goes on after an
// Advance whose output failed.
type advanceRetry int

const (
	retrySame     advanceRetry = iota // Advance again with the same watermark
	retryNext                         // at the next watermark, more events added
	retryRestored                     // the state moved into the other kind of aggregator, then the same watermark
)

func (r advanceRetry) String() string {
	return [...]string{"same watermark", "next watermark", "restored"}[r]
}

// TestAggregatorAdvanceError: an Advance whose output fails hands out no
// more, and the next Advance hands out first the events it did not (out
// had the one it failed on), once each, in the order an uninterrupted
// run hands them out, with its values: the serial Aggregator and
// ParallelAggregators of 1-3 workers, salted or not, outputs failing at
// random events (several events of one time too, times rounded), retried
// with the same watermark, left to the next watermark, or retried after
// the state moved into the other kind of aggregator. Len counts the
// events kept. Before, the parallel one lost the rest of its release,
// and the serial one counted the rest of the failing time's events
// again at the retry (and a retry with the same watermark handed out
// nothing).
func TestAggregatorAdvanceError(t *testing.T) {
	for seed := range uint64(4) {
		rnd := rand.New(rand.NewPCG(seed, 21))
		round := []int64{1, 200}[seed%2]
		const bound = 2000
		specs := aggSpecs()
		evs := skewedAggEvents(rnd, 2000, 8, 0.6, bound, len(specs))
		for _, ev := range evs {
			ev.Time -= ev.Time % event.Time(round)
		}
		want := feedEvery(t, mustAggregator(t, specs), cloneEvents(evs), bound+round, 7, nil)
		for workers := range 4 { // 0: the serial Aggregator
			for _, how := range []advanceRetry{retrySame, retryNext, retryRestored} {
				t.Run(fmt.Sprintf("seed %d, %d workers, %v", seed, workers, how), func(t *testing.T) {
					fail := rand.New(rand.NewPCG(seed, uint64(10*workers)+uint64(how)))
					got, failures := advanceFailing(t, specs, cloneEvents(evs), bound+round, workers, how, fail)
					if failures < 10 {
						t.Fatalf("%d outputs failed: the test checks little", failures)
					}
					compareSerial(t, fmt.Sprintf("%d failed outputs", failures), specs, got, want)
				})
			}
		}
	}
}

// advanceFailing feeds evs as feed does to an aggregator of specs over
// workers (0: the serial Aggregator) whose output fails at one event in
// 40 (fail draws), going on after each failure as how says, and returns
// the events handed out (those out failed on included: it had them) and
// the number of failures.
func advanceFailing(t *testing.T, specs []AggregateSpec, evs []*event.Event, bound int64, workers int, how advanceRetry, fail *rand.Rand) ([]*event.Event, int) {
	t.Helper()
	newParallel := func(workers int) *ParallelAggregator {
		p, err := NewParallelAggregator(specs, workers, workers)
		if err != nil {
			t.Fatal(err)
		}
		p.SetHot(0.05, 2)
		return p
	}
	var agg Aggregation = mustAggregator(t, specs)
	if workers > 0 {
		agg = newParallel(workers)
	}
	defer func() { agg.Close() }()
	var got []*event.Event
	failures, added := 0, 0
	out := func(ev *event.Event) error {
		got = append(got, ev)
		if fail.IntN(40) == 0 {
			failures++
			return errOut
		}
		return nil
	}
	advance := func(wm event.Watermark, final bool) {
		err := agg.Advance(wm, out)
		for err != nil {
			if !errors.Is(err, errOut) {
				t.Fatal(err)
			}
			if held := added - len(got); agg.Len() != held {
				t.Fatalf("after a failed output, Len is %d, want %d (added, not handed out)", agg.Len(), held)
			}
			switch {
			case how == retryNext && !final:
				return
			case how == retryRestored:
				var moved Aggregation = newParallel(2)
				if _, ok := agg.(*ParallelAggregator); ok {
					moved = mustAggregator(t, specs)
				}
				if err := moved.Restore(agg.AppendBinary(nil)); err != nil {
					t.Fatal(err)
				}
				agg.Close()
				agg = moved
			}
			err = agg.Advance(wm, out)
		}
	}
	newest := event.MinTime
	for i, ev := range evs {
		if !agg.Add(ev) {
			t.Fatalf("event %d is late", i)
		}
		added++
		newest = max(newest, ev.Time)
		if i%7 == 6 {
			advance(newest-event.Time(bound)-1, false)
		}
	}
	advance(event.MaxTime, true)
	if agg.Len() != 0 {
		t.Errorf("%d events held after the final watermark", agg.Len())
	}
	return got, failures
}
