package cep

import (
	"errors"
	"math"
	"strings"
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

// TestRepEventRecords: an event record of a job with lookups carries what
// they gave the event (a lookup whose fields hold their defaults in one
// byte; -0 is not taken for the default 0), decodes back to it, and
// applies it to the event decoded from the input record; one of a job
// without lookups (as every build before repEnrichedByte wrote) carries
// none; truncated records are refused.
func TestRepEventRecords(t *testing.T) {
	e, st := repLookupEngine(t)
	slot := func(name string) int {
		s, ok := e.schema.Slot(name)
		if !ok {
			t.Fatalf("no field %s", name)
		}
		return s
	}
	raw := []byte(`{"ts":"2026-01-01T10:00:00Z","card":"c1","shop":"s1"}`)
	for _, c := range []struct {
		name  string
		tier  event.Value
		score event.Value
		risk  event.Value
		size  int // of the lookups' values
	}{
		{"defaults", event.String("none"), event.Float(0), event.Int(1), 2},
		{"a record", event.String("gold"), event.Float(2.5), event.Int(1), 1 + 6 + 9 + 1},
		{"-0 is no default", event.String("none"), event.Float(math.Copysign(0, -1)), event.Int(3), 1 + 6 + 9 + 1 + 2},
	} {
		ev := event.New(e.schema.Len())
		ev.Seq = event.SeqOf(2, 41)
		ev.Fields[slot("profile.tier")], ev.Fields[slot("profile.score")], ev.Fields[slot("merchant.risk")] = c.tier, c.score, c.risk
		values := st.appendValues(nil, ev)
		if len(values) != c.size {
			t.Errorf("%s: %d bytes of values, want %d", c.name, len(values), c.size)
		}
		b := appendRepEnriched(nil, ev.Seq, st.sigHash, values, raw)
		re, err := decodeRepEvent(b)
		if err != nil || !re.enriched || re.seq != ev.Seq || re.sigHash != st.sigHash || string(re.raw) != string(raw) {
			t.Fatalf("%s: decoded %+v, %v", c.name, re, err)
		}
		got := event.New(e.schema.Len())
		if err := st.applyValues(got, re.values); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for _, f := range []string{"profile.tier", "profile.score", "merchant.risk"} {
			if v, w := got.Field(slot(f)), ev.Field(slot(f)); !sameValue(v, w) {
				t.Errorf("%s: %s is %v, want %v", c.name, f, v, w)
			}
		}
		for i := range len(b) - len(raw) {
			if _, err := decodeRepEvent(b[:i]); err == nil {
				t.Errorf("%s: a record truncated to %d bytes (before its JSON) decoded", c.name, i)
			}
		}
		if err := st.applyValues(got, append(values, 0)); err == nil {
			t.Errorf("%s: values with a byte too many applied", c.name)
		}
	}
	re, err := decodeRepEvent(appendRepEvent(nil, 7, raw))
	if err != nil || re.enriched || re.seq != 7 || string(re.raw) != string(raw) {
		t.Errorf("a record without lookups decoded %+v, %v", re, err)
	}
	// A later build's record says so (a group of mixed builds), an
	// earlier version is no record.
	if _, err := decodeRepEvent([]byte{repEnrichedByte, repEnrichedVersion + 1, 7}); err == nil || !strings.Contains(err.Error(), "an instance of a later build wrote it") {
		t.Errorf("a record of a later version: %v", err)
	}
	if _, err := decodeRepEvent([]byte{repEnrichedByte, repEnrichedVersion - 1, 7}); !errors.Is(err, errRepEvent) {
		t.Errorf("a record of an unknown version: %v, want errRepEvent", err)
	}
}

// repLookupEngine is an engine with two lookups (three fields: a string,
// a float and an int, each with a default) and its enrichment stage.
func repLookupEngine(t testing.TB) (*Engine, *enrichStage) {
	rs, err := CompileRuleset("rl.cep", []byte(`
ruleset rl
event time ts

lookup profile {
  key card
  fields {
    tier: string default "none"
    score: float default 0
  }
}

lookup merchant {
  key shop
  fields {
    risk: int default 1
  }
}

rule r {
  key card
  pattern {
    begin a where profile.tier == "gold" && merchant.risk > 2
  }
}
`))
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(WithRuleset(rs))
	if err != nil {
		t.Fatal(err)
	}
	st, err := e.newEnrichStage(nil)
	if err != nil {
		t.Fatal(err)
	}
	return e, st
}
