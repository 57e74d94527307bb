package enrich

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cepheus-cep/cepheus/event"
)

func TestKeyOf(t *testing.T) {
	ev := &event.Event{Fields: []event.Value{
		event.String("C1"), event.Int(-42), event.Float(1.5), event.Float(1e21), event.Bool(true),
		event.Null, event.String("a|b"), event.Float(3), event.Float(1e6), event.Float(math.Copysign(0, -1)),
		event.Float(1.5e-7), event.Float(-9.5e15),
	}}
	for _, tc := range []struct {
		slots []int
		key   string
		ok    bool
	}{
		{[]int{0}, "C1", true},
		{[]int{1}, "-42", true},
		{[]int{2}, "1.5", true},
		{[]int{3}, "1e+21", true},
		{[]int{7}, "3", true},
		{[]int{8}, "1000000", true}, // the key of the int 1000000, as rule keys
		{[]int{9}, "0", true},
		{[]int{10}, "1.5e-07", true},
		{[]int{11}, "-9500000000000000", true},
		{[]int{0, 8}, "C1|1000000", true},
		{[]int{4}, "true", true},
		{[]int{0, 1, 4}, "C1|-42|true", true},
		{[]int{6}, "a|b", true},
		{[]int{5}, "", false},
		{[]int{0, 5}, "", false},
		{[]int{99}, "", false}, // out of range reads as null
	} {
		for _, buf := range [][]byte{nil, make([]byte, 0, 64)} {
			key, ok := KeyOf(ev, tc.slots, buf)
			if key != tc.key || ok != tc.ok {
				t.Errorf("KeyOf(slots %v, cap(buf) %d) = %q, %v, want %q, %v", tc.slots, cap(buf), key, ok, tc.key, tc.ok)
			}
		}
	}
	if n := testing.AllocsPerRun(100, func() { KeyOf(ev, []int{0}, nil) }); n != 0 {
		t.Errorf("KeyOf of one string: %v allocations, want 0", n)
	}
}

// TestCacheModel runs random gets and puts on a small cache and on a plain
// LRU model of it (a slice in recency order), and compares every answer.
func TestCacheModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const max, ttl = 8, 100
	c := newCache(max, ttl)
	type entry struct {
		key     string
		val     int64
		expires int64
	}
	var model []entry // most recently used first
	find := func(key string) int {
		return slices.IndexFunc(model, func(e entry) bool { return e.key == key })
	}
	now := int64(0)
	for step := range 20_000 {
		now += rng.Int64N(10)
		key := fmt.Sprint(rng.IntN(20))
		if rng.IntN(2) == 0 {
			e := c.get([]byte(key), now)
			i := find(key)
			live := i >= 0 && now < model[i].expires
			if (e != nil) != live {
				t.Fatalf("step %d: get(%s) found %v, model %v", step, key, e != nil, live)
			}
			if live {
				if got, _ := e.vals[0].AsInt(); got != model[i].val {
					t.Fatalf("step %d: get(%s) = %d, model %d", step, key, got, model[i].val)
				}
				m := model[i]
				model = slices.Insert(slices.Delete(model, i, i+1), 0, m)
			}
			continue
		}
		v := int64(step)
		c.put(key, []event.Value{event.Int(v)}, true, now)
		if i := find(key); i >= 0 {
			model = slices.Delete(model, i, i+1)
		} else if len(model) == max {
			model = model[:max-1]
		}
		model = slices.Insert(model, 0, entry{key, v, now + ttl})
		if c.len() != len(model) {
			t.Fatalf("step %d: cache holds %d entries, model %d", step, c.len(), len(model))
		}
	}
}

func TestSpecCheckRecord(t *testing.T) {
	s := customerSpec()
	for _, tc := range []struct {
		rec  []event.Value
		want string
	}{
		{[]event.Value{event.Null, event.Null, event.Null}, ""},
		{[]event.Value{event.String("x"), event.String("y"), event.Int(math.MaxInt64)}, ""},
		{[]event.Value{event.String("x")}, "1 values for 3 fields"},
		{[]event.Value{event.Bool(true), event.Null, event.Null}, "field home_country is a bool, want a string"},
	} {
		err := s.checkRecord(tc.rec)
		if got := fmt.Sprint(err); tc.want == "" && err != nil || tc.want != "" && got != tc.want {
			t.Errorf("checkRecord(%s) = %v, want %q", fmtRecord(tc.rec), err, tc.want)
		}
	}
}
