package cep

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/event/jsonev"
	"github.com/cepheus-cep/cepheus/rules"
)

// paritySource is a ruleset whose one rule matches every event, so that a
// backtest writes each decoded event into an alert.
const paritySource = `ruleset parity
event time ts
schema {
  ts: time
  card: string
  amount: float
  n: int
  ok: bool
  at: time
}
rule every {
  key card
  pattern {
    begin a
  }
}
`

// How a line decodes in the two paths (docs/decisions.md, "JSON events").
const (
	same       = iota // the same event in both
	sameError         // the same error in both
	strictOnly        // an event in a backtest, an error naming the field in a test
)

var parityLines = []struct {
	line string
	want int
	err  string // the reason, for sameError and strictOnly
}{
	{`{"ts": 1000, "card": "c", "n": 3}`, same, ""},
	{`{"ts": 1000, "card": "c", "n": 3.0}`, same, ""}, // 3.0 is the int 3
	{`{"ts": 1000, "card": "c", "n": 1.5e1, "amount": 3}`, same, ""},
	{`{"ts": "1970-01-01T00:00:02.5Z", "card": "c", "at": 5, "ok": true}`, same, ""},
	{`{"ts": 1e3, "card": "c\u00e9\ud83d\ude00", "amount": null, "at": "2026-01-01T00:00:00+01:00"}`, same, ""},
	{`{"card": "c", "ts": 2000.0}`, same, ""},
	{`{"ts": 1, "card": "c", "n": 3.5}`, sameError, `field "n": want int, got 3.5`},
	{`{"ts": 1, "card": "c", "n": 99999999999999999999}`, sameError, `field "n": want int, got 99999999999999999999 (out of int64 range)`},
	{`{"ts": 1, "card": "c", "amount": "x"}`, sameError, `field "amount": want float, got a string`},
	{`{"ts": 1, "card": "c", "n": {"x": 1}}`, sameError, `field "n": want int, got an object`},
	{`{"card": "c"}`, sameError, `missing time field "ts"`},
	{`{"ts": "yesterday", "card": "c"}`, sameError, `time field "ts": "yesterday" is not RFC 3339`},
	{`{"ts": 1}`, sameError, `missing required field "card"`},
	{`{"ts": 1, "card": null}`, sameError, `required field "card" is null`},
	{`{"ts": 1, "card": "c",}`, sameError, `invalid character '}', want an object key`},
	{`{"ts": 1, "card": "c"} {"ts": 2}`, sameError, `invalid character '{' after the object`},
	{`{"ts": 1, "card": "c", "colour": "red"}`, strictOnly, `unknown field "colour" (not in the schema)`},
	{`{"ts": 1, "card": "c", "extra": {"deep": [1, "x", null]}}`, strictOnly, `unknown field "extra" (not in the schema)`},
	{`{"ts": 1, "card": "c", "n": 1, "n": 2}`, strictOnly, `field "n" is given twice`},
	{`{"ts": 1, "ts": 2, "card": "c"}`, strictOnly, `field "ts" is given twice`},
}

// decoded is what the backtest's decoder made of a line: an event, or the
// reason of its error.
type decoded struct {
	ev  event.Event
	err string
}

func (d *decoded) decode(dec *jsonev.Decoder, line string) {
	ev, err := dec.Decode([]byte(line))
	if err != nil {
		var de *jsonev.DecodeError
		if !errors.As(err, &de) {
			panic(err)
		}
		d.err = de.Reason
		return
	}
	d.ev = *ev
}

// inFileTest compiles paritySource with a test holding lines, as `cepheus
// test` does, and returns the ruleset (nil when it does not compile) and
// the decode error of each event line by event number.
func inFileTest(t *testing.T, lines []string) (*rules.Ruleset, map[int]string) {
	t.Helper()
	var src strings.Builder
	src.WriteString(paritySource + "test \"parity\" {\n  events {\n")
	for _, l := range lines {
		src.WriteString("    " + l + "\n")
	}
	src.WriteString("  }\n  expect none\n}\n")
	rs, err := rules.Load("parity.cep", []byte(src.String()))
	errs := map[int]string{}
	if err != nil {
		var list rules.ErrorList
		if !errors.As(err, &list) {
			t.Fatal(err)
		}
		for _, e := range list {
			var n int
			var reason string
			if _, serr := fmt.Sscanf(e.Msg, "event %d: ", &n); serr != nil {
				t.Fatalf("not a decode error: %v", e)
			}
			reason = strings.TrimPrefix(e.Msg, fmt.Sprintf("event %d: ", n))
			errs[n] = reason
		}
	}
	return rs, errs
}

// TestDecodeParity checks that `cepheus test` (the in-file events of a
// ruleset, strict mode) and `cepheus backtest` (lenient mode) decode the
// same line alike: the same event, or the same error, except that a test
// also rejects unknown fields and repeated keys.
func TestDecodeParity(t *testing.T) {
	base, err := rules.Load("parity.cep", []byte(paritySource))
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(WithRuleset(base))
	if err != nil {
		t.Fatal(err)
	}
	lenient, err := jsonev.NewDecoder(e.decoder) // the engine's decoder
	if err != nil {
		t.Fatal(err)
	}
	var good []string // the lines a test accepts
	for _, tt := range parityLines {
		_, inErr := inFileTest(t, []string{tt.line})
		var bt decoded
		bt.decode(lenient, tt.line)
		switch tt.want {
		case same:
			if inErr[1] != "" || bt.err != "" {
				t.Errorf("%s: test error %q, backtest error %q, want none", tt.line, inErr[1], bt.err)
			}
			good = append(good, tt.line)
		case sameError:
			if inErr[1] != tt.err || bt.err != tt.err {
				t.Errorf("%s: test error %q, backtest error %q, want %q in both", tt.line, inErr[1], bt.err, tt.err)
			}
		case strictOnly:
			if inErr[1] != tt.err || bt.err != "" {
				t.Errorf("%s: test error %q, backtest error %q, want %q in the test only", tt.line, inErr[1], bt.err, tt.err)
			}
		}
	}

	// The events themselves: the test's, and the backtest's, through the
	// whole backtest (source, subtask, alerts). Both are written with the
	// alerts' event encoder, which writes every field with its kind.
	rs, errs := inFileTest(t, good)
	if rs == nil {
		t.Fatalf("the good lines do not compile: %v", errs)
	}
	enc := jsonev.NewEncoder(rs.Schema, append([]string{rs.TimeField}, rs.TimeFields()...)...)
	var want []string
	for _, ev := range rs.Tests[0].Events {
		want = append(want, string(enc.AppendEvent(nil, ev))+fmt.Sprintf(" @%d", ev.Time))
	}
	src, err := NewEventSource(strings.NewReader(strings.Join(good, "\n")+"\n"), "input")
	if err != nil {
		t.Fatal(err)
	}
	var alerts bytes.Buffer
	e, err = New(WithRuleset(rs), WithAlerts(&alerts), WithOutOfOrderness(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Run(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(alerts.String()), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d alerts, want %d:\n%s", len(lines), len(want), alerts.String())
	}
	for _, w := range want {
		ev := w[:strings.LastIndex(w, " @")]
		if !strings.Contains(alerts.String(), `"matched":{"a":[`+ev+`]}`) {
			t.Errorf("no alert carries the test's event %s", w)
		}
	}
	// And event by event, with kinds and times, through the decoder the
	// backtest uses.
	for i, l := range good {
		var b decoded
		b.decode(lenient, l)
		ev := rs.Tests[0].Events[i]
		if b.ev.Time != ev.Time || len(b.ev.Fields) != len(ev.Fields) {
			t.Errorf("%s: backtest %v, test %v", l, b.ev, ev)
			continue
		}
		for s := range ev.Fields {
			if string(b.ev.Fields[s].AppendBinary(nil)) != string(ev.Fields[s].AppendBinary(nil)) { // bit for bit
				t.Errorf("%s: field %s: backtest %v, test %v", l, rs.Schema.Field(s).Name, b.ev.Fields[s], ev.Fields[s])
			}
		}
	}
}
