package kafka

import (
	"testing"
	"time"
)

func TestTopFields(t *testing.T) {
	for _, c := range []struct {
		line      string
		key, time string // raw values; "" for nil
		wantErr   bool
		a, b      string // the fields looked up; "" for card_id and ts
	}{
		{line: `{"card_id":"c1","ts":"2026-01-01T00:00:00Z"}`, key: `"c1"`, time: `"2026-01-01T00:00:00Z"`},
		{line: ` { "ts" : 17 , "card_id" : 42 } `, key: `42`, time: `17`},
		{line: `{"card_id":{"a":[1, 2]},"x":"}"}`, key: `{"a":[1, 2]}`},
		{line: `{"nested":{"card_id":"no"},"card_id":null}`, key: `null`},
		{line: `{"card_id":"first","card_id":"last"}`, key: `"last"`},
		{line: `{"x":"a\"}]{[","card\u005fid":"esc","y":[{"z":"]"},[]],"ts":-1.5E+3}`, key: `"esc"`, time: `-1.5E+3`},
		{line: "\t{\"ts\":true,\"card_id\":false}\r\n", key: `false`, time: `true`},
		{line: `{"other":1}`},
		{line: `{}`},
		{line: `[1,2]`, wantErr: true},
		{line: `"card_id"`, wantErr: true},
		{line: `not json`, wantErr: true},
		{line: `{"card_id":"c1"`, wantErr: true},
		{line: `{"card_id":"c1"} {}`, wantErr: true},
		{line: `{"card_id":"c1",}`, wantErr: true},
		{line: `{"card_id":01}`, wantErr: true},
		{line: `{"card_id":1.}`, wantErr: true},
		{line: `{"card_id":tru}`, wantErr: true},
		{line: `{"card_id":[1}`, wantErr: true},
		{line: `{"card_id":[1]]}`, wantErr: true},
		{line: `{"card_id" 1}`, wantErr: true},
		{line: `{card_id:1}`, wantErr: true},
		{line: `{"card_id":"unterminated}`, wantErr: true},
		{line: ``, wantErr: true},
	} {
		a, b := c.a, c.b
		if a == "" {
			a, b = "card_id", "ts"
		}
		k, ts, err := topFields([]byte(c.line), a, b)
		if (err != nil) != c.wantErr || string(k) != c.key || string(ts) != c.time {
			t.Errorf("topFields(%s) = %q, %q, %v; want %q, %q, error %v", c.line, k, ts, err, c.key, c.time, c.wantErr)
		}
	}
	if k, ts, err := topFields([]byte(`{"t":5}`), "t", "t"); err != nil || string(k) != "5" || string(ts) != "5" {
		t.Errorf("one field for key and time: %q, %q, %v", k, ts, err)
	}
	if k, ts, err := topFields([]byte(`{"t":5}`), "", ""); err != nil || k != nil || ts != nil {
		t.Errorf("no field named: %q, %q, %v", k, ts, err)
	}
}

func TestKeyOf(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want *string
	}{
		{`"card_1"`, new("card_1")},
		{`""`, new("")},
		{`"a\"b\u00e9"`, new(`a"bé`)},
		{`42`, new("42")},
		{`-1.5e3`, new("-1.5e3")},
		{`true`, new("true")},
		{`{ "a" : [1, 2] }`, new(`{"a":[1,2]}`)},
		{`null`, nil},
	} {
		got := keyOf([]byte(c.raw))
		switch {
		case c.want == nil && got != nil, c.want != nil && (got == nil || string(got) != *c.want):
			t.Errorf("keyOf(%s) = %q (nil %v), want %v", c.raw, got, got == nil, c.want)
		}
	}
	if keyOf(nil) != nil {
		t.Errorf("keyOf of a missing field is not a null key")
	}
}

func TestTimeOf(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want time.Time
		ok   bool
	}{
		{`"2026-03-02T14:07:31.250Z"`, time.Date(2026, 3, 2, 14, 7, 31, 250e6, time.UTC), true},
		{`"2026-03-02T15:07:31+01:00"`, time.Date(2026, 3, 2, 14, 7, 31, 0, time.UTC), true},
		{`1772460451250`, time.UnixMilli(1772460451250), true},
		{`1772460451250.0`, time.UnixMilli(1772460451250), true},
		{`0`, time.UnixMilli(0), true},
		{`1.5`, time.Time{}, false},
		{`-5`, time.Time{}, false},
		{`"yesterday"`, time.Time{}, false},
		{`"2026-03-02"`, time.Time{}, false},
		{`null`, time.Time{}, false},
		{`true`, time.Time{}, false},
		{``, time.Time{}, false},
	} {
		got, ok := timeOf([]byte(c.raw), 0)
		if ok != c.ok || !got.Equal(c.want) {
			t.Errorf("timeOf(%s) = %v, %v; want %v, %v", c.raw, got, ok, c.want, c.ok)
		}
	}
}

// TestTimeOfSeconds: with time.Second a number is epoch seconds, its
// fraction read exactly to the millisecond (truncated past it), as the
// engine's -time-unit s reads it; strings are RFC 3339 still.
func TestTimeOfSeconds(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want time.Time
		ok   bool
	}{
		{`1772460451`, time.UnixMilli(1772460451000), true},
		{`1772460451.123`, time.UnixMilli(1772460451123), true}, // not 122, as 1772460451.123 * 1000 gives as a float
		{`1772460451.1239`, time.UnixMilli(1772460451123), true},
		{`1772460451.5`, time.UnixMilli(1772460451500), true},
		{`1.7724604515e9`, time.UnixMilli(1772460451500), true},
		{`0`, time.UnixMilli(0), true},
		{`"2026-03-02T14:07:31.250Z"`, time.Date(2026, 3, 2, 14, 7, 31, 250e6, time.UTC), true},
		{`-5`, time.Time{}, false},
		{`-0.5`, time.Time{}, false},
		{`1.2.3`, time.Time{}, false},
		{`99999999999999999999`, time.Time{}, false},
		{`null`, time.Time{}, false},
	} {
		got, ok := timeOf([]byte(c.raw), time.Second)
		if ok != c.ok || !got.Equal(c.want) {
			t.Errorf("timeOf(%s, s) = %v, %v; want %v, %v", c.raw, got, ok, c.want, c.ok)
		}
	}
}

// BenchmarkTopFields reads the key and time of a line of cepheus gen.
func BenchmarkTopFields(b *testing.B) {
	line := []byte(`{"ts":"2026-01-03T23:13:37.586Z","type":"auth","event_id":"evt_8664","customer_id":"cust_27420","card_id":"card_45342","amount":32.76,"currency":"USD","merchant_id":"merch_1012","merchant_country":"US","mcc":"5411","card_country":"US","device_id":"","ip":"","ip_country":"","lat":33.9809,"lon":-118.2922,"is_fraud":true,"scenario":"impossible_travel"}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		k, ts, err := topFields(line, "card_id", "ts")
		if err != nil || keyOf(k) == nil {
			b.Fatal(err)
		}
		if _, ok := timeOf(ts, 0); !ok {
			b.Fatal("no time")
		}
	}
}
