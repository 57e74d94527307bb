package jsonev

import (
	"strings"
	"testing"

	"github.com/cepheus-cep/cepheus/event"
)

// TestTimeUnitSeconds: with Seconds, a number is epoch seconds, a fraction
// is kept to the millisecond and truncated towards the past below it;
// strings are unaffected.
func TestTimeUnitSeconds(t *testing.T) {
	d := testDecoder(t, Config{TimeUnit: Seconds})
	for _, c := range []struct {
		in   string
		want event.Time
	}{
		{`{"ts": 1714564800}`, 1714564800000},
		{`{"ts": 1714564800.25}`, 1714564800250},
		{`{"ts": 1714564800.2509}`, 1714564800250},
		{`{"ts": 1.7145648e9}`, 1714564800000},
		{`{"ts": -1.0005}`, -1001},
		{`{"ts": 0}`, 0},
		{`{"ts": "2024-05-01T12:00:00Z"}`, 1714564800000},
	} {
		ev, err := decodeValue(d, []byte(c.in))
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if ev.Time != c.want {
			t.Errorf("%s: time %d, want %d", c.in, ev.Time, c.want)
		}
	}
	if _, err := d.Decode([]byte(`{"ts": 1e300}`)); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("1e300 seconds: %v, want out of range", err)
	}
}

// TestCheckNumericTimes: a number that is no time between 2000 and 2100 in
// the configured unit is refused, and the error names the unit in which it
// would be one; strings and in-range numbers pass, and without the check
// any number goes.
func TestCheckNumericTimes(t *testing.T) {
	d := testDecoder(t, Config{CheckNumericTimes: true})
	for _, c := range []struct{ in, err string }{
		{`{"ts": 1714564800000}`, ""},
		{`{"ts": "1970-01-01T00:00:01Z"}`, ""}, // a string carries no unit
		{`{"ts": 1714564800}`, `time field "ts": 1714564800 as epoch milliseconds is 1970-01-20T20:16:04.800Z, outside 2000..2100; as epoch seconds it is 2024-05-01T12:00:00.000Z (say the time unit)`},
		// Microseconds and nanoseconds are no unit the decoder reads:
		// saying the unit would not help.
		{`{"ts": 1714564800000000}`, `as epoch microseconds it is 2024-05-01T12:00:00.000Z (times are read as epoch seconds or milliseconds only: write them so, or as RFC 3339)`},
		{`{"ts": 1714564800000000000}`, `beyond year 9999, outside 2000..2100; as epoch nanoseconds it is 2024-05-01T12:00:00.000Z (times are read as epoch seconds or milliseconds only: write them so, or as RFC 3339)`},
		{`{"ts": 3}`, `3 as epoch milliseconds is 1970-01-01T00:00:00.003Z, outside 2000..2100 (say the time unit)`},
	} {
		_, err := d.Decode([]byte(c.in))
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.in, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: error %v\nwant it to contain %s", c.in, err, c.err)
		}
	}
	ds := testDecoder(t, Config{CheckNumericTimes: true, TimeUnit: Seconds})
	if _, err := ds.Decode([]byte(`{"ts": 1714564800000}`)); err == nil ||
		!strings.Contains(err.Error(), "as epoch seconds is beyond year 9999, outside 2000..2100; as epoch milliseconds it is 2024-05-01T12:00:00.000Z") {
		t.Errorf("ms given as seconds: %v", err)
	}
	unchecked := testDecoder(t, Config{})
	if ev, err := decodeValue(unchecked, []byte(`{"ts": 3}`)); err != nil || ev.Time != 3 {
		t.Errorf("unchecked 3: %v, time %d", err, ev.Time)
	}
}
