package cep

import (
	"testing"

	"github.com/cepheus-cep/cepheus/event"
)

func TestRepWatermark(t *testing.T) {
	at := func(wm event.Watermark) repUpstream { return repUpstream{Seen: true, WM: wm} }
	idle := func(wm event.Watermark) repUpstream { return repUpstream{Seen: true, WM: wm, Idle: true} }
	final := repUpstream{Seen: true, WM: event.MaxTime, Final: true}
	for _, c := range []struct {
		name     string
		ups      []repUpstream
		wm       event.Watermark
		complete bool
	}{
		{"an upstream not heard of holds it at the start", []repUpstream{at(50), {}}, event.MinTime, false},
		{"the lowest upstream", []repUpstream{at(50), at(20), at(90)}, 20, false},
		{"idle upstreams do not hold it back", []repUpstream{at(50), idle(20)}, 50, false},
		{"final ones neither", []repUpstream{final, at(30)}, 30, false},
		{"all idle: the highest", []repUpstream{idle(40), idle(70), final}, 70, false},
		{"all final: complete", []repUpstream{final, final}, event.MaxTime, true},
	} {
		wm, complete := repWatermark(c.ups)
		if wm != c.wm || complete != c.complete {
			t.Errorf("%s: %v, %v; want %v, %v", c.name, wm, complete, c.wm, c.complete)
		}
	}
	// A later marker never moves an upstream back, and final stays.
	u := at(80).merge(repUpstream{Seen: true, WM: 60, Idle: true})
	if u.WM != 80 || !u.Idle {
		t.Errorf("merged %+v, want watermark 80 and idle", u)
	}
	if u = final.merge(at(10)); !u.Final {
		t.Errorf("merged %+v: no longer final", u)
	}
}

func TestRepMarkerRoundTrip(t *testing.T) {
	for _, u := range []repUpstream{
		{Seen: true, WM: 1_700_000_000_123},
		{Seen: true, WM: event.MinTime, Idle: true},
		{Seen: true, WM: event.MaxTime, Final: true},
	} {
		b := appendRepMarker(nil, 5, u)
		if b[0] != repMarkerByte {
			t.Fatalf("a marker starts with %d", b[0])
		}
		p, got, err := decodeRepMarker(b)
		if err != nil || p != 5 || got != u {
			t.Errorf("decoded %d, %+v, %v; want 5, %+v", p, got, err, u)
		}
		if _, _, err := decodeRepMarker(b[:len(b)-1]); err == nil {
			t.Errorf("a truncated marker of %+v decoded", u)
		}
	}
}

func TestRepartitionTopic(t *testing.T) {
	for _, c := range []struct {
		fields []string
		want   string
	}{
		{[]string{"customer_id"}, "g-repartition-customer_id"},
		{[]string{"card_id", "merchant_id"}, "g-repartition-card_id.merchant_id"},
		{nil, "g-repartition-_all_"},
		{[]string{"ip/country"}, "g-repartition-ip_country"},
	} {
		if got := repartitionTopic("g", c.fields); got != c.want {
			t.Errorf("repartitionTopic(%q) = %q, want %q", c.fields, got, c.want)
		}
	}
}
