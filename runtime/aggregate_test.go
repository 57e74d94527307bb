package runtime

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/runtime/state"
)

// aggEvent slots: 0 key, 1 value, 2 flag (the filter), then the outputs.
const (
	slotKey = iota
	slotValue
	slotFlag
	slotOut
)

// randomAggEvents returns n events in arrival order: times up to bound
// behind the newest, keys Zipf-skewed, values ints, floats with cents,
// floats of any size, strings and nulls.
func randomAggEvents(rnd *rand.Rand, n, keys int, bound int64, outs int) []*event.Event {
	zipf := rand.NewZipf(rnd, 1.3, 2, uint64(keys-1))
	var evs []*event.Event
	newest := int64(1_000_000)
	for i := range n {
		newest += rnd.Int64N(300)
		t := newest - rnd.Int64N(bound+1)
		var v event.Value
		switch rnd.IntN(6) {
		case 0:
			v = event.Int(rnd.Int64N(100) - 20)
		case 1:
			v = event.Float(float64(rnd.Int64N(100000)) / 100)
		case 2:
			v = event.Float(rnd.NormFloat64() * math.Pow(10, float64(rnd.IntN(40)-20)))
		case 3:
			v = event.String(fmt.Sprintf("s%d", rnd.IntN(7)))
		case 4:
			v = event.Null
		default:
			v = event.Float(float64(rnd.IntN(5))) // integral: the same distinct value as the int
		}
		key := event.String(fmt.Sprintf("k%d", zipf.Uint64()))
		if rnd.IntN(50) == 0 {
			key = event.Null
		}
		fields := make([]event.Value, slotOut+outs)
		fields[slotKey], fields[slotValue], fields[slotFlag] = key, v, event.Bool(rnd.IntN(4) != 0)
		evs = append(evs, &event.Event{Time: event.Time(t), Seq: uint64(i + 1), Fields: fields})
	}
	return evs
}

// aggSpecs are every function, sliding and tumbling, filtered or not.
func aggSpecs() []AggregateSpec {
	var specs []AggregateSpec
	accept := func(ev *event.Event) bool { b, _ := ev.Field(slotFlag).AsBool(); return b }
	for _, fn := range []AggFunc{AggCount, AggSum, AggAvg, AggMin, AggMax, AggDistinct} {
		for _, tumbling := range []bool{false, true} {
			for _, filter := range []bool{false, true} {
				s := AggregateSpec{KeySlots: []int{slotKey}, Func: fn, ValueSlot: slotValue, Window: 5000, Tumbling: tumbling, Slot: slotOut + len(specs)}
				if fn == AggCount {
					s.ValueSlot = -1
				}
				if tumbling {
					s.Window = 7000
				}
				if filter {
					s.Accepts = accept
				}
				specs = append(specs, s)
			}
		}
	}
	return specs
}

// naiveAggregate is the aggregate of s at ev over all: every event of
// ev's key that counts, at a time in ev's window.
func naiveAggregate(s AggregateSpec, all []*event.Event, ev *event.Event) event.Value {
	if ev.Field(slotKey).IsNull() {
		return event.Null
	}
	var key []byte
	key = canonical(key, ev.Field(slotKey))
	t := int64(ev.Time)
	from := t - s.Window + 1
	if s.Tumbling {
		from = int64(floorDiv(ev.Time, event.Time(s.Window)) * event.Time(s.Window))
	}
	n, nums := 0, 0
	sum := new(big.Float).SetPrec(4096)
	var nan, pinf, ninf bool
	var best *float64
	distinct := map[string]bool{}
	for _, e := range all {
		if string(canonical(nil, e.Field(slotKey))) != string(key) || e.Field(slotKey).IsNull() ||
			int64(e.Time) < from || int64(e.Time) > t || s.Accepts != nil && !s.Accepts(e) {
			continue
		}
		v := e.Field(slotValue)
		switch s.Func {
		case AggCount:
			n++
		case AggDistinct:
			if !v.IsNull() {
				distinct[string(canonical(nil, v))] = true
			}
		case AggSum, AggAvg:
			f, ok := v.AsFloat()
			if !ok {
				continue
			}
			nums++
			switch {
			case math.IsNaN(f):
				nan = true
			case math.IsInf(f, 1):
				pinf = true
			case math.IsInf(f, -1):
				ninf = true
			default:
				sum.Add(sum, new(big.Float).SetFloat64(f))
			}
		case AggMin, AggMax:
			f, ok := v.AsFloat()
			if !ok || math.IsNaN(f) {
				continue
			}
			if best == nil || s.Func == AggMin && f < *best || s.Func == AggMax && f > *best {
				best = &f
			}
		}
	}
	total := func() float64 {
		switch {
		case nan || pinf && ninf:
			return math.NaN()
		case pinf:
			return math.Inf(1)
		case ninf:
			return math.Inf(-1)
		}
		f, _ := sum.Float64()
		return f
	}
	switch s.Func {
	case AggCount:
		return event.Int(int64(n))
	case AggDistinct:
		return event.Int(int64(len(distinct)))
	case AggSum:
		return event.Float(total())
	case AggAvg:
		if nums == 0 {
			return event.Null
		}
		return event.Float(total() / float64(nums))
	}
	if best == nil {
		return event.Null
	}
	return event.Float(*best)
}

func sameValue(a, b event.Value) bool {
	fa, oka := a.AsFloat()
	fb, okb := b.AsFloat()
	if oka && okb && math.IsNaN(fa) && math.IsNaN(fb) {
		return true
	}
	return a.Equal(b) && a.Kind() == b.Kind()
}

// runAggregator feeds evs in arrival order with a watermark bound behind
// the newest time every few events (none is late), snapshotting and
// restoring into a fresh aggregator at the given arrival indexes, and
// returns the events as released.
func runAggregator(t *testing.T, specs []AggregateSpec, evs []*event.Event, bound int64, restoreAt map[int]bool) []*event.Event {
	t.Helper()
	a, err := NewAggregator(specs)
	if err != nil {
		t.Fatal(err)
	}
	var out []*event.Event
	collect := func(ev *event.Event) error { out = append(out, ev); return nil }
	newest := event.MinTime
	for i, ev := range evs {
		if restoreAt[i] {
			st := a.AppendBinary(nil)
			b, err := NewAggregator(specs)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Restore(st); err != nil {
				t.Fatal(err)
			}
			if b.Len() != a.Len() || b.Keys() != a.Keys() {
				t.Fatalf("restored: %d held, %d keys; want %d, %d", b.Len(), b.Keys(), a.Len(), a.Keys())
			}
			a = b
		}
		if !a.Add(ev) {
			t.Fatalf("event %d (time %d) is late at watermark %d", i, ev.Time, a.wm)
		}
		newest = max(newest, ev.Time)
		if i%7 == 6 {
			if err := a.Advance(newest-event.Time(bound)-1, collect); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := a.Advance(event.MaxTime, collect); err != nil {
		t.Fatal(err)
	}
	if a.Len() != 0 {
		t.Fatalf("%d events held after the final watermark", a.Len())
	}
	return out
}

// TestAggregatorAgainstNaive: over random streams (out of order within a
// bound, skewed keys, every kind of value), every function sliding and
// tumbling, filtered or not, gives at each event exactly what a naive
// scan of all the events gives, the events come out in time order (ties
// in arrival order), and snapshots restored midway change nothing.
func TestAggregatorAgainstNaive(t *testing.T) {
	for seed := range uint64(5) {
		rnd := rand.New(rand.NewPCG(seed, 15))
		const bound = 2000
		specs := aggSpecs()
		evs := randomAggEvents(rnd, 600, 6, bound, len(specs))
		restore := map[int]bool{}
		if seed%2 == 1 {
			for range 5 {
				restore[rnd.IntN(len(evs))] = true
			}
		}
		out := runAggregator(t, specs, evs, bound, restore)
		if len(out) != len(evs) {
			t.Fatalf("seed %d: %d events out, want %d", seed, len(out), len(evs))
		}
		for i := 1; i < len(out); i++ {
			if out[i].Time < out[i-1].Time || out[i].Time == out[i-1].Time && out[i].Seq < out[i-1].Seq {
				t.Fatalf("seed %d: event %d (time %d, seq %d) after (time %d, seq %d)", seed, i, out[i].Time, out[i].Seq, out[i-1].Time, out[i-1].Seq)
			}
		}
		bad := 0
		for _, ev := range out {
			for _, s := range specs {
				want := naiveAggregate(s, evs, ev)
				if got := ev.Fields[s.Slot]; !sameValue(got, want) {
					if bad++; bad <= 10 {
						t.Errorf("seed %d: event seq %d time %d key %v, %v (tumbling %v, filtered %v): %v, want %v",
							seed, ev.Seq, ev.Time, ev.Field(slotKey), s.Func, s.Tumbling, s.Accepts != nil, got, want)
					}
				}
			}
		}
	}
}

// TestAggregatorLateAndBound: an event at or behind the watermark is late
// (null values, nothing kept); a key's window holds at most MaxPerKey
// events, the oldest forgotten and counted.
func TestAggregatorLateAndBound(t *testing.T) {
	a, err := NewAggregator([]AggregateSpec{{KeySlots: []int{0}, Func: AggCount, ValueSlot: -1, Window: 1000, Slot: 1, MaxPerKey: 3}})
	if err != nil {
		t.Fatal(err)
	}
	ev := func(ts int64) *event.Event {
		return &event.Event{Time: event.Time(ts), Fields: []event.Value{event.String("k"), event.Int(99)}}
	}
	var out []*event.Event
	collect := func(e *event.Event) error { out = append(out, e); return nil }
	for _, ts := range []int64{10, 20, 30, 40, 50} {
		a.Add(ev(ts))
	}
	if err := a.Advance(100, collect); err != nil {
		t.Fatal(err)
	}
	late := ev(100)
	if a.Add(late) || !late.Fields[1].IsNull() || a.Len() != 0 {
		t.Errorf("an event at the watermark: not late, or its value %v, or held", late.Fields[1])
	}
	var got []int64
	for _, e := range out {
		n, _ := e.Fields[1].AsInt()
		got = append(got, n)
	}
	if fmt.Sprint(got) != "[1 2 3 3 3]" || a.Dropped()[0] != 2 {
		t.Errorf("counts %v, dropped %v; want [1 2 3 3 3] and 2 (at most 3 a key)", got, a.Dropped())
	}
	if _, err := NewAggregator([]AggregateSpec{{Func: AggSum, ValueSlot: -1, Window: 1}}); err == nil {
		t.Errorf("a sum without a value slot is accepted")
	}
}

// TestAggregatorBoundAgainstNaive: past MaxPerKey (3 or 8 events a key,
// crossed by most keys; times rounded in some streams, so that many
// events share one), every function gives at each event what a naive
// scan gives of the last MaxPerKey events of its key that count up to
// its time (in time order, ties in arrival order) that are in its
// window, and Dropped counts the events that left a window by the bound,
// not by time: those still in the window of the event MaxPerKey after
// them; snapshots restored midway change nothing.
func TestAggregatorBoundAgainstNaive(t *testing.T) {
	for seed := range uint64(6) {
		rnd := rand.New(rand.NewPCG(seed, 19))
		round := []int64{1, 700, 3000}[seed%3]
		const bound = 2000
		specs := aggSpecs()
		for i := range specs {
			specs[i].MaxPerKey = []int{3, 8}[(i+int(seed))%2]
		}
		evs := randomAggEvents(rnd, 800, 6, bound, len(specs))
		for _, ev := range evs {
			ev.Time -= ev.Time % event.Time(round)
		}
		agg, err := NewAggregator(specs)
		if err != nil {
			t.Fatal(err)
		}
		switchAt := map[int]func([]byte) Aggregation{}
		for _, i := range []int{200, 500} {
			switchAt[i] = func(st []byte) Aggregation {
				agg, err = NewAggregator(specs)
				if err != nil {
					t.Fatal(err)
				}
				if err := agg.Restore(st); err != nil {
					t.Fatal(err)
				}
				return agg
			}
		}
		out := feedEvery(t, agg, cloneEvents(evs), bound+round, 7, switchAt)
		counted := make([]map[string][]*event.Event, len(specs))
		for si, s := range specs {
			counted[si] = keyCounted(s, evs)
		}
		bad := 0
		for _, ev := range out {
			for si, s := range specs {
				if got, want := ev.Fields[s.Slot], naiveAggregate(s, lastCounted(s, counted[si], ev), ev); !sameValue(got, want) {
					if bad++; bad <= 10 {
						t.Errorf("seed %d: event seq %d time %d key %v, %v (tumbling %v, filtered %v, at most %d): %v, want %v",
							seed, ev.Seq, ev.Time, ev.Field(slotKey), s.Func, s.Tumbling, s.Accepts != nil, s.MaxPerKey, got, want)
					}
				}
			}
		}
		want := make([]uint64, len(specs))
		for si, s := range specs {
			want[si] = naiveDropped(s, evs)
			if want[si] == 0 {
				t.Fatalf("seed %d: aggregate %d drops nothing: the bound is not crossed", seed, si)
			}
		}
		if got := agg.Dropped(); !slices.Equal(got, want) {
			t.Errorf("seed %d: dropped %v, want %v", seed, got, want)
		}
	}
}

// naiveCounts reports whether e counts for s: a key, accepted, and a
// value s's function counts.
func naiveCounts(s AggregateSpec, e *event.Event) bool {
	if e.Field(slotKey).IsNull() || s.Accepts != nil && !s.Accepts(e) {
		return false
	}
	v := e.Field(slotValue)
	f, num := v.AsFloat()
	switch s.Func {
	case AggDistinct:
		return !v.IsNull()
	case AggSum, AggAvg:
		return num
	case AggMin, AggMax:
		return num && !math.IsNaN(f)
	}
	return true
}

// keyCounted returns, by key, the events of all that count for s, in
// time order (ties in arrival order, Seq).
func keyCounted(s AggregateSpec, all []*event.Event) map[string][]*event.Event {
	by := map[string][]*event.Event{}
	for _, e := range all {
		if naiveCounts(s, e) {
			k := string(canonical(nil, e.Field(slotKey)))
			by[k] = append(by[k], e)
		}
	}
	for _, evs := range by {
		slices.SortStableFunc(evs, func(x, y *event.Event) int {
			return cmp.Or(cmp.Compare(x.Time, y.Time), cmp.Compare(x.Seq, y.Seq))
		})
	}
	return by
}

// lastCounted returns the events of ev's key that count for s at or
// before its time (of counted, keyCounted's), the last s.MaxPerKey of
// them: those a window bounded at MaxPerKey may hold at ev
// (naiveAggregate keeps those in its window).
func lastCounted(s AggregateSpec, counted map[string][]*event.Event, ev *event.Event) []*event.Event {
	if ev.Field(slotKey).IsNull() {
		return nil
	}
	var upTo []*event.Event
	for _, e := range counted[string(canonical(nil, ev.Field(slotKey)))] {
		if e.Time <= ev.Time {
			upTo = append(upTo, e)
		}
	}
	return upTo[max(0, len(upTo)-s.MaxPerKey):]
}

// naiveDropped is the number of events of all that leave their key's
// window by the bound of s: still in the window at the time of the
// event of their key that counts MaxPerKey after them.
func naiveDropped(s AggregateSpec, all []*event.Event) uint64 {
	n := uint64(0)
	for _, evs := range keyCounted(s, all) {
		for i := 0; i+s.MaxPerKey < len(evs); i++ {
			if evs[i].Time >= s.start(evs[i+s.MaxPerKey].Time) {
				n++
			}
		}
	}
	return n
}

// TestExactSum: sums do not depend on the order of the values, and
// subtracting what was added gives zero exactly.
func TestExactSum(t *testing.T) {
	vals := []float64{0.1, 0.2, 0.3, 1e20, -1e20, 5e-324, 1.5, -0.7, 1e308, -1e308}
	var s exactSum
	for _, v := range vals {
		s.add(v, 1)
	}
	if got := s.value(); got != 0.1+0.2+0.3+5e-324+1.5-0.7 && math.Abs(got-1.4) > 1e-15 {
		t.Errorf("sum %v", got)
	}
	var r exactSum
	for i := len(vals) - 1; i >= 0; i-- {
		r.add(vals[i], 1)
	}
	if s.value() != r.value() {
		t.Errorf("order changes the sum: %v and %v", s.value(), r.value())
	}
	for _, v := range vals {
		s.add(v, -1)
	}
	if got := s.value(); got != 0 || s.n.Sign() != 0 {
		t.Errorf("after removing every value: %v", got)
	}
}

// TestExactSumInts: ints beyond 2^53, which no float64 holds, are added
// exactly too: 2^53+1 and -2^53 sum to 1 (converted to float64 one by
// one they gave 0), and removing them leaves nothing.
func TestExactSumInts(t *testing.T) {
	vals := []event.Value{event.Int(1<<53 + 1), event.Int(-(1 << 53)), event.Int(math.MaxInt64), event.Int(math.MinInt64 + 1), event.Int(7)}
	var s exactSum
	for _, v := range vals[:2] {
		s.addValue(v, 1)
	}
	if got := s.value(); got != 1 {
		t.Errorf("2^53+1 - 2^53 = %v, want 1", got)
	}
	for _, v := range vals[2:] {
		s.addValue(v, 1)
	}
	if got := s.value(); got != 8 { // 1 + MaxInt64 + MinInt64+1 + 7
		t.Errorf("with MaxInt64, MinInt64+1 and 7: %v, want 8", got)
	}
	for _, v := range vals {
		s.addValue(v, -1)
	}
	if got := s.value(); got != 0 || s.n.Sign() != 0 {
		t.Errorf("after removing every value: %v", got)
	}
}

// TestAggregatorHotKeys: a key with most of each release's events is
// hot, the others are not; a minute of event time later without it, it
// is no longer.
func TestAggregatorHotKeys(t *testing.T) {
	a, err := NewAggregator([]AggregateSpec{{KeySlots: []int{0}, Func: AggCount, ValueSlot: -1, Window: 1000, Slot: 1}})
	if err != nil {
		t.Fatal(err)
	}
	none := func(*event.Event) error { return nil }
	ts := int64(0)
	feed := func(n int, key func(i int) string) {
		for i := range n {
			ts += 10
			a.Add(&event.Event{Time: event.Time(ts), Fields: []event.Value{event.String(key(i)), event.Null}})
			if i%512 == 511 {
				if err := a.Advance(event.Time(ts), none); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	feed(2048, func(i int) string {
		if i%10 < 6 {
			return "big"
		}
		return fmt.Sprintf("k%d", i%97)
	})
	if got := a.HotKeys(); got[0] != 1 {
		t.Errorf("hot keys %v with one key at 60%%, want 1", got)
	}
	feed(20_000, func(i int) string { return fmt.Sprintf("k%d", i%97) })
	if got := a.HotKeys(); got[0] != 0 {
		t.Errorf("hot keys %v after 200 s of evenly spread keys, want 0", got)
	}
}

// TestDistinctClash: with a hash under which most values clash (all the
// strings, and half the numbers, share one), distinct counts stay exact:
// the serial and the parallel aggregators give what the naive scan
// gives, snapshots restored midway included.
func TestDistinctClash(t *testing.T) {
	defer func(h func(aggKey) uint64) { distinctHash = h }(distinctHash)
	distinctHash = func(k aggKey) uint64 { return k.n % 2 }
	var specs []AggregateSpec
	for _, s := range aggSpecs() {
		if s.Func == AggDistinct {
			s.Slot = slotOut + len(specs)
			specs = append(specs, s)
		}
	}
	for seed := range uint64(4) {
		rnd := rand.New(rand.NewPCG(seed, 17))
		const bound = 2000
		evs := randomAggEvents(rnd, 600, 4, bound, len(specs))
		restore := map[int]bool{150: seed%2 == 1, 400: seed%2 == 1}
		serial := runAggregator(t, specs, evs, bound, restore)
		par, err := NewParallelAggregator(specs, 2, 2)
		if err != nil {
			t.Fatal(err)
		}
		par.SetHot(0.05, 2)
		copies := make([]*event.Event, len(evs))
		for i, ev := range evs {
			c := *ev
			c.Fields = slices.Clone(ev.Fields)
			copies[i] = &c
		}
		parallel := feed(t, par, copies, bound, nil)
		par.Close()
		for name, out := range map[string][]*event.Event{"serial": serial, "parallel": parallel} {
			bad := 0
			for _, ev := range out {
				for _, s := range specs {
					if got, want := ev.Fields[s.Slot], naiveAggregate(s, evs, ev); !sameValue(got, want) {
						if bad++; bad <= 10 {
							t.Errorf("seed %d, %s: event seq %d key %v (tumbling %v, filtered %v): %v, want %v",
								seed, name, ev.Seq, ev.Field(slotKey), s.Tumbling, s.Accepts != nil, got, want)
						}
					}
				}
			}
		}
	}
}

// TestDistinctSmall: a distinct count's window, its entries coming and
// going so that it crosses distinctSmall (scanned, then mapped, then
// scanned again) many times, counts what a multiset of its values counts,
// under the real hash, one under which most values clash and one under
// which all do.
func TestDistinctSmall(t *testing.T) {
	defer func(h func(aggKey) uint64) { distinctHash = h }(distinctHash)
	hashes := map[string]func(aggKey) uint64{
		"real":  distinctHash,
		"clash": func(k aggKey) uint64 { return k.n % 2 },
		"one":   func(aggKey) uint64 { return 1 },
	}
	spec := &AggregateSpec{Func: AggDistinct, Window: 1}
	for name, h := range hashes {
		distinctHash = h
		rnd := rand.New(rand.NewPCG(3, uint64(len(name))))
		var w aggWindow
		want := map[aggKey]int{}
		mapped := 0
		for step := range 20_000 {
			// The window's size wanders between 0 and 3*distinctSmall.
			size := rnd.IntN(3*distinctSmall + 1)
			for len(w.live()) > size {
				k := keyOf(w.live()[0].v)
				w.remove(spec)
				if want[k]--; want[k] == 0 {
					delete(want, k)
				}
			}
			for len(w.live()) < size {
				var v event.Value
				switch rnd.IntN(3) {
				case 0:
					v = event.Int(rnd.Int64N(12))
				case 1:
					v = event.Float(float64(rnd.IntN(12)) + 0.5)
				default:
					v = event.String(fmt.Sprint("c", rnd.IntN(12)))
				}
				w.insert(spec, aggEntry{v: v})
				want[keyOf(v)]++
			}
			if w.seen.mapped {
				mapped++
			}
			if got, _ := w.value(spec).AsInt(); int(got) != len(want) {
				t.Fatalf("%s hash, step %d, %d entries: %d distinct values, want %d", name, step, size, got, len(want))
			}
		}
		if mapped == 0 || mapped == 20_000 {
			t.Errorf("%s hash: mapped at %d steps of 20,000", name, mapped)
		}
	}
}

// TestDistinctTable: values added to and removed from a distinctTable at
// random, with hashes whose home slots collide in a few places (long
// clusters, wrapping round the end), are found as a map holds them, and
// none that was removed; the table grows and shrinks on the way.
func TestDistinctTable(t *testing.T) {
	rnd := rand.New(rand.NewPCG(11, 12))
	for _, homes := range []uint64{3, 64, 1 << 40} {
		var tab distinctTable
		want := map[uint64]int{}
		var sizes []int
		for step := range 20_000 {
			// Hashes: few homes (h mod the table's size) for most, a
			// high bit telling them apart; the size wanders up and down.
			h := rnd.Uint64N(homes) | rnd.Uint64N(600)<<44 | 1<<63
			drain := step%4000 >= 2000 // removes only
			if len(want) > 0 && (rnd.IntN(2) == 0 || drain) {
				for k := range want { // one at random
					h = k
					break
				}
			}
			i := tab.find(h)
			if (i >= 0) != (want[h] > 0) {
				t.Fatalf("homes %d, step %d: found %v, want %d occurrences", homes, step, i >= 0, want[h])
			}
			switch {
			case i < 0:
				tab.add(h, aggKey{kind: event.KindInt, n: h})
				want[h] = 1
			case !drain && rnd.IntN(3) == 0:
				tab.slots[i].n++
				want[h]++
			case tab.slots[i].n <= 1:
				tab.remove(i)
				delete(want, h)
			default:
				tab.slots[i].n--
				want[h]--
			}
			if tab.len() != len(want) {
				t.Fatalf("homes %d, step %d: len %d, want %d", homes, step, tab.len(), len(want))
			}
			if len(sizes) == 0 || sizes[len(sizes)-1] != len(tab.slots) {
				sizes = append(sizes, len(tab.slots))
			}
		}
		for h, n := range want {
			if i := tab.find(h); i < 0 || tab.slots[i].n != n || tab.slots[i].key.n != h {
				t.Fatalf("homes %d: value %x: slot %d, want %d occurrences", homes, h, i, n)
			}
		}
		used := 0
		for _, s := range tab.slots {
			if s.n != 0 {
				used++
			}
		}
		if used != len(want) {
			t.Fatalf("homes %d: %d slots used, want %d", homes, used, len(want))
		}
		grew, shrank := false, false
		for i := 1; i < len(sizes); i++ {
			grew = grew || sizes[i] > sizes[i-1]
			shrank = shrank || sizes[i] < sizes[i-1]
		}
		if !grew || !shrank {
			t.Fatalf("homes %d: table sizes %v: want it grown and shrunk", homes, sizes)
		}
	}
}

// namedAggSpecs are aggSpecs, named s0, s1, ...
func namedAggSpecs() []AggregateSpec {
	specs := aggSpecs()
	for i := range specs {
		specs[i].Name = fmt.Sprintf("s%d", i)
	}
	return specs
}

// TestAggregatorRestoreMatching: a state restored into an aggregator of
// other specifications (a restart whose rules changed the aggregates)
// gives each spec the windows of the spec of its name, whatever its
// place (and says which did), and starts the others empty, counting the events held; the
// events held that EachHeld drops are never released nor counted. Serial
// and parallel, into one another.
func TestAggregatorRestoreMatching(t *testing.T) {
	const bound = 2000
	for seed := range uint64(4) {
		rnd := rand.New(rand.NewPCG(seed, 17))
		old := namedAggSpecs()
		evs := randomAggEvents(rnd, 900, 6, bound, len(old))
		// The new specifications: the even ones of old as they were, the
		// odd ones under another name (new aggregates: empty windows),
		// in reverse order.
		var specs []AggregateSpec
		for i := len(old) - 1; i >= 0; i-- {
			s := old[i]
			if i%2 == 1 {
				s.Name = "new " + s.Name
			}
			specs = append(specs, s)
		}
		parallel := seed%2 == 1
		newAgg := func(specs []AggregateSpec, parallel bool) Aggregation {
			if !parallel {
				a, err := NewAggregator(specs)
				if err != nil {
					t.Fatal(err)
				}
				return a
			}
			p, err := NewParallelAggregator(specs, 2, 2)
			if err != nil {
				t.Fatal(err)
			}
			p.SetHot(0.05, 2)
			t.Cleanup(p.Close)
			return p
		}
		var wm event.Watermark
		dropped := map[uint64]bool{}
		switchAt := map[int]func([]byte) Aggregation{400: func(st []byte) Aggregation {
			if err := newAgg(specs, !parallel).Restore(st); err == nil {
				t.Errorf("seed %d: a state of other aggregates restored as the same ones", seed)
			}
			a := newAgg(specs, !parallel)
			kept, err := a.RestoreMatching(st)
			if err != nil {
				t.Fatal(err)
			}
			for j := range specs {
				if want := (len(specs)-1-j)%2 == 0; kept[j] != want {
					t.Errorf("seed %d: spec %d (%s) kept its windows %v, want %v", seed, j, specs[j].Name, kept[j], want)
				}
			}
			switch a := a.(type) {
			case *Aggregator:
				wm = a.wm
			case *ParallelAggregator:
				wm = a.wm
			}
			a.EachHeld(func(ev *event.Event) bool {
				if ev.Seq%5 == 0 {
					dropped[ev.Seq] = true
					return false
				}
				return true
			})
			return a
		}}
		got := feed(t, newAgg(old, parallel), evs, bound, switchAt)
		if len(dropped) == 0 || wm == event.MinTime {
			t.Fatalf("seed %d: %d events dropped at watermark %v: the test checks nothing", seed, len(dropped), wm)
		}
		var all, after []*event.Event
		for _, ev := range evs {
			if dropped[ev.Seq] {
				continue
			}
			all = append(all, ev)
			if ev.Time > wm {
				after = append(after, ev)
			}
		}
		if len(got) != len(all) {
			t.Fatalf("seed %d: %d events released, want %d (%d dropped)", seed, len(got), len(all), len(dropped))
		}
		bad := 0
		for _, ev := range got {
			if dropped[ev.Seq] {
				t.Fatalf("seed %d: event %d was dropped, and released", seed, ev.Seq)
			}
			for _, s := range specs {
				counted := all
				if ev.Time > wm && s.Name[0] == 'n' {
					counted = after
				}
				if want := naiveAggregate(s, counted, ev); !sameValue(ev.Fields[s.Slot], want) {
					if bad++; bad <= 5 {
						t.Errorf("seed %d: event %d (time %d, watermark %d at the restore): %s is %v, want %v", seed, ev.Seq, ev.Time, wm, s.Name, ev.Fields[s.Slot], want)
					}
				}
			}
		}
	}
}

// TestAggregatorFormat1: a state of an earlier build (format 1, the
// windows in the order of the specifications, unnamed) restores into an
// aggregator of the same specifications as it did, and matching, gives
// its events held alone.
func TestAggregatorFormat1(t *testing.T) {
	const bound = 2000
	rnd := rand.New(rand.NewPCG(1, 18))
	specs := namedAggSpecs()
	evs := randomAggEvents(rnd, 600, 6, bound, len(specs))
	want := runAggregator(t, specs, cloneEvents(evs), bound, nil)
	restored := func(matching bool) func([]byte) Aggregation {
		return func(st []byte) Aggregation {
			a, err := NewAggregator(specs)
			if err != nil {
				t.Fatal(err)
			}
			prev, _ := NewAggregator(specs)
			if err := prev.Restore(st); err != nil {
				t.Fatal(err)
			}
			v1 := prev.appendState(nil, 1)
			if matching {
				var kept []bool
				kept, err = a.RestoreMatching(v1)
				if slices.Contains(kept, true) {
					t.Errorf("a state of format 1 (no names) kept windows %v", kept)
				}
			} else {
				err = a.Restore(v1)
			}
			if err != nil {
				t.Fatal(err)
			}
			if a.Len() != prev.Len() || !matching && a.Keys() != prev.Keys() || matching && a.Keys() != 0 {
				t.Fatalf("restored (matching %v): %d held, %d keys; of %d held, %d keys", matching, a.Len(), a.Keys(), prev.Len(), prev.Keys())
			}
			return a
		}
	}
	got := feed(t, mustAggregator(t, specs), cloneEvents(evs), bound, map[int]func([]byte) Aggregation{300: restored(false)})
	for i := range want {
		for _, s := range specs {
			if !sameValue(got[i].Fields[s.Slot], want[i].Fields[s.Slot]) {
				t.Fatalf("event %d: %s is %v after a format 1 state, want %v", got[i].Seq, s.Name, got[i].Fields[s.Slot], want[i].Fields[s.Slot])
			}
		}
	}
	if got := feed(t, mustAggregator(t, specs), cloneEvents(evs), bound, map[int]func([]byte) Aggregation{300: restored(true)}); len(got) != len(evs) {
		t.Fatalf("matching a format 1 state: %d events released, want %d", len(got), len(evs))
	}
}

// TestAggregatorLaterFormat: a state of a format above this build's (a
// later build's) is refused as such (state.ErrCheckpointVersion, naming
// its format), by Restore and RestoreMatching.
func TestAggregatorLaterFormat(t *testing.T) {
	specs := namedAggSpecs()
	later := mustAggregator(t, specs).appendState(nil, aggregatorFormat+1)
	want := fmt.Sprintf("the aggregator's state of version %d, this build reads up to %d", aggregatorFormat+1, aggregatorFormat)
	matching := func(b []byte) error {
		_, err := mustAggregator(t, specs).RestoreMatching(b)
		return err
	}
	for _, restore := range []func([]byte) error{mustAggregator(t, specs).Restore, matching} {
		if err := restore(later); !errors.Is(err, state.ErrCheckpointVersion) || !strings.Contains(err.Error(), want) {
			t.Errorf("restore of format %d: %v, want a later build's state", aggregatorFormat+1, err)
		}
	}
}

func mustAggregator(t *testing.T, specs []AggregateSpec) *Aggregator {
	t.Helper()
	a, err := NewAggregator(specs)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
