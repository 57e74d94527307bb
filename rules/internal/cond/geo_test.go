package cond

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cepheus-cep/cepheus/event"
)

func TestHaversineKm(t *testing.T) {
	tests := []struct {
		name                   string
		lat1, lon1, lat2, lon2 float64
		want                   float64
	}{
		{"same point", 10, 20, 10, 20, 0},
		{"New York to London", 40.7128, -74.006, 51.5074, -0.1278, 5570},
		{"quarter meridian", 0, 0, 90, 0, 10008},
		{"antipodes", 0, 0, 0, 180, 20015},
	}
	for _, tc := range tests {
		if got := haversineKm(tc.lat1, tc.lon1, tc.lat2, tc.lon2); math.Abs(got-tc.want) > 1 {
			t.Errorf("%s: %.1f km, want %.0f", tc.name, got, tc.want)
		}
	}
}

func TestDistanceKmCondition(t *testing.T) {
	b, err := CompileBoolExpr(`distance_km(amount, 0, x, 0) > 1000`, unitEnv)
	if err != nil {
		t.Fatal(err)
	}
	// 10 degrees of latitude are about 1112 km.
	if got := outcome(b, unitEvent("amount", 0.0, "x", 10.0)); got != "true" {
		t.Errorf("10 degrees apart: %s, want true", got)
	}
	if got := outcome(b, unitEvent("amount", 0.0, "x", 5)); got != "false" {
		t.Errorf("5 degrees apart: %s, want false", got)
	}
	if got := outcome(b, unitEvent("amount", 0.0)); got != "error" {
		t.Errorf("null argument: %s, want a counted error", got)
	}
	for src, want := range map[string]string{
		`distance_km(amount, 0, 1) > 0`:     "takes four numbers",
		`distance_km(country, 0, 1, 2) > 0`: "invalid argument for distance_km",
		`distanse_km(amount, 0, 1, 2) > 0`:  "did you mean distance_km",
	} {
		if _, err := CompileBoolExpr(src, unitEnv); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", src, err, want)
		}
	}
}

// TestDistanceOrder: a comparison of distance_km with a constant, decided
// by bounds where they suffice, gives what comparing the computed
// distance gives, for random points (near and far, poles, longitudes past
// ±180, latitudes out of range, non-finite values), thresholds (some at
// the computed distance itself, where only the computation decides) and
// operators; compiled, it agrees with the expression compiled without
// the shortcut (the distance as a value, then compared).
func TestDistanceOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 9))
	coord := func(limit float64) float64 {
		switch rng.IntN(20) {
		case 0:
			return math.NaN()
		case 1:
			return math.Inf(1 - 2*rng.IntN(2))
		case 2:
			return limit * float64(rng.IntN(3)-1) // a pole, the antimeridian, 0
		case 3:
			return (rng.Float64()*2 - 1) * 3 * limit // out of range
		}
		return (rng.Float64()*2 - 1) * limit
	}
	ops := []binOp{opLt, opLe, opGt, opGe, opEq, opNe}
	decided := 0
	for i := range 200_000 {
		deg := [4]float64{coord(90), coord(180), coord(90), coord(180)}
		if i%2 == 0 { // a nearby point: most pairs of a rule
			deg[2], deg[3] = deg[0]+rng.NormFloat64(), deg[1]+rng.NormFloat64()
		}
		d := haversineKm(deg[0], deg[1], deg[2], deg[3])
		k := []float64{2000, 0, 1, 20015, rng.Float64() * 21000, d, d + 0.5, d - 0.5}[rng.IntN(8)]
		op := ops[rng.IntN(len(ops))]
		args := func(frame) ([4]float64, *Error) { return deg, nil }
		got, err := distanceOrder(op, args, k)(frame{})
		if want := cmpOrdered(op, d, k); err != nil || got != want {
			t.Fatalf("%v op %d %v: %v (err %v), want %v (distance %v)", deg, op, k, got, err, want, d)
		}
		if lo, hi, ok := distanceBounds(deg); ok {
			if d < lo-1e-6 || d > hi+1e-6 {
				t.Fatalf("%v: distance %v outside its bounds [%v, %v]", deg, d, lo, hi)
			}
			if hi+1 < k || lo-1 > k {
				decided++
			}
		}
	}
	if decided < 50_000 {
		t.Errorf("the bounds decided %d comparisons of 200,000: the shortcut hardly works", decided)
	}

	geo := &Env{Declared: true, Schema: event.MustSchema(
		event.Field{Name: "lat1", Kind: event.KindFloat}, event.Field{Name: "lon1", Kind: event.KindFloat},
		event.Field{Name: "lat2", Kind: event.KindFloat}, event.Field{Name: "lon2", Kind: event.KindFloat},
	)}
	short, err := CompileBoolExpr(`distance_km(lat1, lon1, lat2, lon2) > 2000`, geo)
	if err != nil {
		t.Fatal(err)
	}
	long, err := CompileBoolExpr(`distance_km(lat1, lon1, lat2, lon2) + 0 > 2000`, geo)
	if err != nil {
		t.Fatal(err)
	}
	for range 20_000 {
		ev := &event.Event{Fields: []event.Value{
			event.Float(coord(90)), event.Float(coord(180)), event.Float(coord(90)), event.Float(coord(180)),
		}}
		if rng.IntN(2) == 0 {
			lat, _ := ev.Fields[0].AsFloat()
			lon, _ := ev.Fields[1].AsFloat()
			ev.Fields[2], ev.Fields[3] = event.Float(lat+10*rng.NormFloat64()), event.Float(lon+10*rng.NormFloat64())
		}
		if a, b := outcome(short, ev), outcome(long, ev); a != b {
			t.Fatalf("%v: %s with the bounds, %s without", ev.Fields, a, b)
		}
	}
}
