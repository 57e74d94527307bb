package cond

import (
	"math"
	"strings"
	"testing"
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
