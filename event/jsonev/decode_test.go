package jsonev

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cepheus-cep/cepheus/event"
)

// testSchema has one field of each kind, a required key and the time field
// "ts" outside the schema.
var testSchema = event.MustSchema(
	event.Field{Name: "s", Kind: event.KindString},
	event.Field{Name: "i", Kind: event.KindInt},
	event.Field{Name: "f", Kind: event.KindFloat},
	event.Field{Name: "b", Kind: event.KindBool},
	event.Field{Name: "a"},
	event.Field{Name: "k", Kind: event.KindString},
)

func testDecoder(t testing.TB, cfg Config) *Decoder {
	t.Helper()
	if cfg.Schema == nil {
		cfg.Schema = testSchema
	}
	if cfg.TimeField == "" {
		cfg.TimeField = "ts"
	}
	d, err := NewDecoder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// decodeValue decodes data with d: the event, or the zero event and the
// error.
func decodeValue(d *Decoder, data []byte) (event.Event, error) {
	ev, err := d.Decode(data)
	if err != nil {
		return event.Event{}, err
	}
	return *ev, nil
}

// fieldsString formats decoded fields as "name=value" for comparisons.
func fieldsString(s *event.Schema, ev *event.Event) string {
	var b strings.Builder
	for i, v := range ev.Fields {
		if v.IsNull() {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%s:%v", s.Field(i).Name, v.Kind(), v)
	}
	return b.String()
}

func TestDecode(t *testing.T) {
	const ts = `"ts":1000`
	cases := []struct {
		name   string
		cfg    Config
		in     string
		want   string     // fieldsString, when no error
		time   event.Time // when no error; default 1000
		err    string     // substring of the error
		column int        // error column, when err is set
	}{
		{name: "all kinds", in: `{"s":"x","i":-3,"f":2.5,"b":true,"a":"y","k":"c1",` + ts + `}`,
			want: `s=string:"x" i=int:-3 f=float:2.5 b=bool:true a=string:"y" k=string:"c1"`},
		{name: "missing fields are null", in: `{` + ts + `}`, want: ``},
		{name: "explicit nulls", in: `{"s":null,"i":null,"f":null,"b":null,"a":null,` + ts + `}`, want: ``},
		{name: "unknown fields skipped", in: `{"x":{"y":[1,{"z":"w"},[],{}],"q":null},"s":"v","n":[true,false,-1.5e-3],` + ts + `}`,
			want: `s=string:"v"`},
		{name: "whitespace", in: " \t{ \"s\" :\n\"v\" ,\r\n\"ts\" : 1000 } \n", want: `s=string:"v"`},
		{name: "empty strings", in: `{"s":"","k":"",` + ts + `}`, want: `s=string:"" k=string:""`},
		{name: "escapes", in: `{"s":"a\"b\\c\/d\b\f\n\r\t\u00e9\uD83D\uDE00",` + ts + `}`,
			want: `s=string:"a\"b\\c/d\b\f\n\r\té😀"`},
		{name: "lone surrogates", in: `{"s":"\uD800x\uDC00\uD800\u0041",` + ts + `}`, want: "s=string:\"\ufffdx\ufffd\ufffdA\""},
		{name: "invalid utf-8 replaced", in: "{\"s\":\"a\xffb\xe2\x82\",\"ts\":1000}", want: "s=string:\"a\ufffdb\ufffd\ufffd\""},
		{name: "utf-8 kept", in: `{"s":"日本€",` + ts + `}`, want: `s=string:"日本€"`},
		{name: "escaped key", in: `{"\u0073":"v",` + ts + `}`, want: `s=string:"v"`},
		{name: "duplicate keys: last wins", in: `{"a":"x","a":1,"s":"p","s":"q",` + ts + `}`, want: `s=string:"q" a=int:1`},
		{name: "duplicate keys: string last", in: `{"a":1,"a":"x",` + ts + `}`, want: `a=string:"x"`},
		{name: "duplicate keys: empty string last", in: `{"s":"p","s":"","a":"x","a":"\u0079","a":"",` + ts + `}`,
			want: `s=string:"" a=string:""`},
		{name: "duplicate keys: empty string first", in: `{"s":"","s":"q","a":"","a":null,"k":"","k":"","k":"r",` + ts + `}`,
			want: `s=string:"q" k=string:"r"`},

		{name: "int from whole float", in: `{"i":3.0,` + ts + `}`, want: `i=int:3`},
		{name: "int from exponent", in: `{"i":1.5e1,` + ts + `}`, want: `i=int:15`},
		{name: "int from big exponent", in: `{"i":-9.223372036854775808e18,` + ts + `}`, want: `i=int:-9223372036854775808`},
		{name: "int max", in: `{"i":9223372036854775807,` + ts + `}`, want: `i=int:9223372036854775807`},
		{name: "int min", in: `{"i":-9223372036854775808,` + ts + `}`, want: `i=int:-9223372036854775808`},
		{name: "int overflow", in: `{"i":9223372036854775808,` + ts + `}`, err: `field "i": want int, got 9223372036854775808`, column: 6},
		{name: "int overflow huge", in: `{"i":-99999999999999999999,` + ts + `}`, err: `field "i": want int, got -99999999999999999999 (out of int64 range)`, column: 6},
		{name: "int overflow exponent", in: `{"i":1e400,` + ts + `}`, err: `field "i": want int, got 1e400 (out of int64 range)`, column: 6},
		{name: "int from fraction", in: `{"i":3.5,` + ts + `}`, err: `field "i": want int, got 3.5`, column: 6},
		{name: "int overflow 1e19", in: `{"i":1e19,` + ts + `}`, err: `field "i": want int, got 1e19 (out of int64 range)`, column: 6},
		{name: "int from tiny fraction", in: `{"i":3.0000000000000000001,` + ts + `}`, err: `want int`, column: 6},
		{name: "int from 1e19", in: `{"i":1e19,` + ts + `}`, err: `want int`, column: 6},
		{name: "int from string", in: `{"i":"3",` + ts + `}`, err: `field "i": want int, got a string`, column: 6},
		{name: "float from int", in: `{"f":3,` + ts + `}`, want: `f=float:3`},
		{name: "float negative zero", in: `{"f":-0,` + ts + `}`, want: `f=float:-0`},
		{name: "float out of range", in: `{"f":1e400,` + ts + `}`, err: `field "f": number 1e400 is out of range`, column: 6},
		{name: "float from bool", in: `{"f":true,` + ts + `}`, err: `want float, got a bool`, column: 6},
		{name: "any int", in: `{"a":-42,` + ts + `}`, want: `a=int:-42`},
		{name: "any float", in: `{"a":4.2e1,` + ts + `}`, want: `a=float:42`},
		{name: "any big int", in: `{"a":12345678901234567890,` + ts + `}`, err: `field "a": the whole number 12345678901234567890 is beyond int64, and a float would not keep its digits: send it as a string (an id), or declare the field float to take it rounded`, column: 6},
		{name: "any big int 19 digits", in: `{"a":-9223372036854775809,` + ts + `}`, err: `field "a": the whole number -9223372036854775809 is beyond int64, and a float would not keep its digits: send it as a string (an id), or declare the field float to take it rounded`, column: 6},
		{name: "any big float", in: `{"a":12345678901234567890.0,` + ts + `}`, want: `a=float:1.2345678901234567e+19`},
		{name: "any bool", in: `{"a":false,` + ts + `}`, want: `a=bool:false`},
		{name: "object in schema field", in: `{"s":{},` + ts + `}`, err: `field "s": want string, got an object`, column: 6},
		{name: "array in any field", in: `{"a":[1],` + ts + `}`, err: `field "a": want a value, got an array`, column: 6},

		{name: "rfc3339 Z", in: `{"ts":"1970-01-01T00:00:01Z"}`, time: 1000},
		{name: "rfc3339 fraction", in: `{"ts":"1970-01-01T00:00:01.5Z"}`, time: 1500},
		{name: "rfc3339 nanos truncated", in: `{"ts":"1970-01-01T00:00:01.123999999Z"}`, time: 1123},
		{name: "rfc3339 offset", in: `{"ts":"2024-05-01T14:00:00.250+02:00"}`, time: 1714564800250},
		{name: "rfc3339 negative offset", in: `{"ts":"2024-04-30T23:30:00-00:30"}`, time: 1714521600000},
		{name: "rfc3339 before epoch", in: `{"ts":"1969-12-31T23:59:59.999Z"}`, time: -1},
		{name: "rfc3339 leap day", in: `{"ts":"2000-02-29T00:00:00Z"}`, time: 951782400000},
		{name: "rfc3339 bad day", in: `{"ts":"2023-02-29T00:00:00Z"}`, err: `time field "ts": "2023-02-29T00:00:00Z" is not RFC 3339`, column: 7},
		{name: "rfc3339 lowercase t", in: `{"ts":"2023-02-01t00:00:00Z"}`, err: `is not RFC 3339`, column: 7},
		{name: "rfc3339 leap second", in: `{"ts":"2016-12-31T23:59:60Z"}`, err: `time field "ts": "2016-12-31T23:59:60Z" is a leap second (second 60), which times in milliseconds since the epoch cannot hold`, column: 7},
		{name: "rfc3339 leap second offset", in: `{"ts":"2017-01-01T00:59:60.5+01:00"}`, err: `is a leap second`, column: 7},
		{name: "rfc3339 second 61", in: `{"ts":"2016-12-31T23:59:61Z"}`, err: `"2016-12-31T23:59:61Z" is not RFC 3339`, column: 7},
		{name: "rfc3339 second 60 bad day", in: `{"ts":"2016-02-30T23:59:60Z"}`, err: `"2016-02-30T23:59:60Z" is not RFC 3339`, column: 7},
		{name: "rfc3339 no seconds", in: `{"ts":"2023-02-01T00:00Z"}`, err: `is not RFC 3339`, column: 7},
		{name: "rfc3339 no zone", in: `{"ts":"2026-01-01T10:00:00"}`, err: `time field "ts": "2026-01-01T10:00:00" is not RFC 3339 (no time zone: write "2026-01-01T10:00:00Z" for UTC)`, column: 7},
		{name: "rfc3339 space", in: `{"ts":"2026-01-01 10:00:00+01:00"}`, err: `"2026-01-01 10:00:00+01:00" is not RFC 3339 (write "2026-01-01T10:00:00+01:00")`, column: 7},
		{name: "rfc3339 escaped", in: `{"ts":"1970-01-01T00:00:01\u005a"}`, time: 1000},
		{name: "epoch ms", in: `{"ts":-5}`, time: -5},
		{name: "epoch ms exponent", in: `{"ts":1.7145648e12}`, time: 1714564800000},
		{name: "epoch ms fraction", in: `{"ts":1.5}`, err: `time field "ts": 1.5 is not whole epoch milliseconds`, column: 7},
		// A whole number beyond int64 is whole: it is out of range.
		{name: "epoch ms overflow", in: `{"ts":99999999999999999999999}`, err: `time field "ts": 99999999999999999999999 epoch milliseconds is out of range`, column: 7},
		{name: "epoch ms overflow exponent", in: `{"ts":-1.5e30}`, err: `time field "ts": -1.5e30 epoch milliseconds is out of range`, column: 7},
		{name: "missing time", in: `{"s":"x"}`, err: `missing time field "ts"`},
		{name: "null time", in: `{"ts":null}`, err: `time field "ts" is null`, column: 7},
		{name: "bool time", in: `{"ts":true}`, err: `time field "ts": want a time, got a bool`, column: 7},
		{name: "optional time missing", cfg: Config{OptionalTime: true}, in: `{"s":"x"}`, time: event.MinTime, want: `s=string:"x"`},
		{name: "optional time null", cfg: Config{OptionalTime: true, Schema: event.MustSchema(event.Field{Name: "ts"})}, in: `{"ts":null}`, time: event.MinTime, want: ``},
		{name: "optional time given", cfg: Config{OptionalTime: true}, in: `{"ts":"1970-01-01T00:00:02Z"}`, time: 2000},
		{name: "optional time still checked", cfg: Config{OptionalTime: true}, in: `{"ts":"soon"}`, err: `time field "ts": "soon" is not RFC 3339`, column: 7},
		{name: "strict rfc3339 rejects a number", cfg: Config{TimeFormat: TimeRFC3339},
			in: `{"ts":1}`, err: `want an RFC 3339 string, got a number`, column: 7},
		{name: "strict epoch rejects a string", cfg: Config{TimeFormat: TimeEpochMillis},
			in: `{"ts":"1970-01-01T00:00:01Z"}`, err: `want epoch milliseconds, got a string`, column: 7},
		{name: "time field in schema", cfg: Config{Schema: event.MustSchema(event.Field{Name: "ts"})},
			in: `{"ts":"1970-01-01T00:00:02Z"}`, time: 2000, want: `ts=int:2000`},
		{name: "time field in schema, declared int", cfg: Config{Schema: event.MustSchema(event.Field{Name: "ts", Kind: event.KindInt})},
			in: `{"ts":2000.0}`, time: 2000, want: `ts=int:2000`},
		{name: "other time fields", cfg: Config{TimeFields: []string{"i", "a"}},
			in: `{"i":"1970-01-01T00:00:03Z","a":4000,` + ts + `}`, want: `i=int:3000 a=int:4000`},
		{name: "other time field null", cfg: Config{TimeFields: []string{"i"}}, in: `{"i":null,` + ts + `}`, want: ``},
		{name: "other time field bad", cfg: Config{TimeFields: []string{"a"}},
			in: `{"a":"soon",` + ts + `}`, err: `field "a": "soon" is not RFC 3339`, column: 6},
		{name: "other time field bool", cfg: Config{TimeFields: []string{"a"}},
			in: `{"a":true,` + ts + `}`, err: `field "a": want a time, got a bool`, column: 6},
		{name: "time field object", in: `{"ts":{}}`, err: `time field "ts": want a time, got an object`, column: 7},
		{name: "time field bad literal", in: `{"ts":nul}`, err: `invalid character '}' in literal null`, column: 10},

		{name: "strict", cfg: Config{Mode: Strict}, in: `{"s":"x",` + ts + `}`, want: `s=string:"x"`},
		{name: "strict unknown field", cfg: Config{Mode: Strict},
			in: `{"s":"x","x\u0079":1,` + ts + `}`, err: `unknown field "xy" (not in the schema)`, column: 10},
		{name: "strict duplicate", cfg: Config{Mode: Strict},
			in: `{"s":"x",` + ts + `,"s":"y"}`, err: `field "s" is given twice`, column: 20},
		{name: "strict duplicate time", cfg: Config{Mode: Strict},
			in: `{` + ts + `,` + ts + `}`, err: `field "ts" is given twice`, column: 12},

		{name: "required present", cfg: Config{Required: []string{"k"}}, in: `{"k":"c",` + ts + `}`, want: `k=string:"c"`},
		{name: "required missing", cfg: Config{Required: []string{"k"}}, in: `{` + ts + `}`, err: `missing required field "k"`},
		{name: "required null", cfg: Config{Required: []string{"k"}}, in: `{"k":null,` + ts + `}`, err: `required field "k" is null`},

		{name: "not an object", in: `[1]`, err: `want a JSON object, found an array`, column: 1},
		{name: "null record", in: ` null`, err: `want a JSON object, found null`, column: 2},
		{name: "empty", in: ` `, err: `empty record`, column: 2},
		{name: "trailing comma", in: `{"s":"x",}`, err: `invalid character '}', want an object key`, column: 10},
		{name: "missing colon", in: `{"s" "x"}`, err: `invalid character '"' after object key`, column: 6},
		{name: "leading zero", in: `{"i":01}`, err: `invalid character '1' after object value, want ',' or '}' (a number has no leading zero: write 1, not 01)`, column: 7},
		{name: "negative leading zero", in: `{"i": -012}`, err: `invalid character '1' after object value, want ',' or '}' (a number has no leading zero: write 1, not 01)`, column: 9},
		{name: "leading zero in a skipped object", in: `{"zz":{"a":01},"i":1}`, err: `invalid character '1' after object value, want ',' or '}' (a number has no leading zero: write 1, not 01)`, column: 13},
		{name: "zero then a digit elsewhere", in: `{"i":10 1}`, err: `invalid character '1' after object value, want ',' or '}'`, column: 9},
		{name: "bare minus", in: `{"i":-}`, err: `invalid character '}' in number`, column: 7},
		{name: "bad fraction", in: `{"i":1.}`, err: `invalid character '}' after decimal point in number`, column: 8},
		{name: "bad exponent", in: `{"x":1e+}`, err: `invalid character '}' in exponent of number`, column: 9},
		{name: "trailing data", in: `{"ts":1} {}`, err: `invalid character '{' after the object`, column: 10},
		{name: "unterminated string", in: `{"s":"abc`, err: `unexpected end of input in string`, column: 10},
		{name: "control char", in: "{\"s\":\"a\tb\"}", err: `invalid control character byte 0x09 in string`, column: 8},
		{name: "bad escape", in: `{"s":"\x"}`, err: `invalid character 'x' in string escape`, column: 8},
		{name: "bad unicode escape", in: `{"s":"\u12G4"}`, err: `invalid character 'G' in \u escape`, column: 11},
		{name: "bad literal", in: `{"b":tru}`, err: `invalid character '}' in literal true`, column: 9},
		{name: "bad nested", in: `{"x":[1,,2],"ts":1}`, err: `invalid character ',', want a value`, column: 9},
		{name: "bad nested object", in: `{"x":{"a":1 "b":2},"ts":1}`, err: `after object value, want ',' or '}'`, column: 13},
		{name: "truncated", in: `{"s":"x"`, err: `unexpected end of input, want ',' or '}'`, column: 9},
		{name: "unquoted key", in: `{s:1}`, err: `invalid character 's', want an object key`, column: 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := testDecoder(t, c.cfg)
			schema := c.cfg.Schema
			if schema == nil {
				schema = testSchema
			}
			ev, err := decodeValue(d, []byte(c.in))
			if c.err != "" {
				var de *DecodeError
				if !errors.As(err, &de) {
					t.Fatalf("Decode(%s) = %v, want a *DecodeError %q", c.in, err, c.err)
				}
				if !strings.Contains(de.Reason, c.err) || de.Column != c.column {
					t.Fatalf("Decode(%s) = %q (column %d), want %q at column %d", c.in, de.Reason, de.Column, c.err, c.column)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode(%s): %v", c.in, err)
			}
			want := c.time
			if want == 0 {
				want = 1000
			}
			if ev.Time != want {
				t.Errorf("Time = %d, want %d", ev.Time, want)
			}
			if got := fieldsString(schema, &ev); got != c.want {
				t.Errorf("fields:\n got %s\nwant %s", got, c.want)
			}
		})
	}
}

// TestDecodeOptionalTimeAfterATime: with OptionalTime, a record without
// the time field after one with it has no time (MinTime), not the time
// of the record before.
func TestDecodeOptionalTimeAfterATime(t *testing.T) {
	d := testDecoder(t, Config{OptionalTime: true})
	if ev, err := decodeValue(d, []byte(`{"ts":5000}`)); err != nil || ev.Time != 5000 {
		t.Fatalf("Decode with a time = %d, %v; want 5000", ev.Time, err)
	}
	if ev, err := decodeValue(d, []byte(`{"s":"x"}`)); err != nil || ev.Time != event.MinTime {
		t.Fatalf("Decode without a time, after one with = %d, %v; want event.MinTime", ev.Time, err)
	}
}

// TestDecodeAbsent: the fields no decoded record had, null or not, in
// the schema's order; a record that did not decode counts for nothing,
// and the time field outside the schema is none of them.
func TestDecodeAbsent(t *testing.T) {
	d := testDecoder(t, Config{})
	if got := d.Absent(); !slices.Equal(got, []string{"s", "i", "f", "b", "a", "k"}) {
		t.Fatalf("before any record: %q", got)
	}
	for _, rec := range []string{
		`{"ts": 1, "i": 2, "k": "x"}`,
		`{"ts": 2, "a": null}`,
		`{"ts": 3, "s": "y", "b": 7}`, // does not decode (b is a bool)
	} {
		_, _ = d.Decode([]byte(rec))
	}
	if got, want := d.Absent(), []string{"s", "f", "b"}; !slices.Equal(got, want) {
		t.Errorf("Absent = %q, want %q", got, want)
	}
	for _, rec := range []string{`{"ts": 4, "s": "y", "b": true, "f": 1.5}`, `{"ts": 5}`} {
		if _, err := d.Decode([]byte(rec)); err != nil {
			t.Fatal(err)
		}
	}
	if got := d.Absent(); len(got) != 0 {
		t.Errorf("Absent = %q once every field came", got)
	}
}

// TestDecodeMixed: the fields of no declared kind that decoded records
// gave as a number and as a string, with how many gave each (the
// messy-data trial's producers, one of which sent amounts as strings); a
// null, a bool, a declared field and a record that did not decode count
// for nothing.
func TestDecodeMixed(t *testing.T) {
	schema := event.MustSchema(event.Field{Name: "a"}, event.Field{Name: "n"}, event.Field{Name: "s", Kind: event.KindString}, event.Field{Name: "t"})
	d := testDecoder(t, Config{Schema: schema, TimeField: "ts", TimeFields: []string{"t"}})
	for _, rec := range []string{
		`{"ts": 1, "a": 12.5, "n": 1, "t": 5}`,
		`{"ts": 2, "a": "12.50", "n": 2, "t": "1970-01-01T00:00:01Z"}`,
		`{"ts": 3, "a": 3, "n": null, "s": "x"}`,
		`{"ts": 4, "a": true, "n": "2"}`,
		`{"ts": 5, "a": "x", "s": 1}`, // does not decode (s is a string)
	} {
		_, _ = d.Decode([]byte(rec))
	}
	if got := d.Decoded(); got != 4 {
		t.Errorf("Decoded = %d, want 4", got)
	}
	want := []MixedField{{Name: "a", Numbers: 2, Strings: 1}, {Name: "n", Numbers: 2, Strings: 1}}
	if got := d.Mixed(); !slices.Equal(got, want) {
		t.Errorf("Mixed = %+v, want %+v", got, want)
	}
	d = testDecoder(t, Config{Schema: schema, TimeField: "ts"})
	_, _ = d.Decode([]byte(`{"ts": 1, "a": 1, "n": "x"}`))
	if got := d.Mixed(); len(got) != 0 {
		t.Errorf("Mixed = %+v, want none: each field came as one kind", got)
	}
}

func TestNewDecoderErrors(t *testing.T) {
	cases := []struct {
		cfg Config
		err string
	}{
		{Config{TimeField: "ts"}, "no schema"},
		{Config{Schema: testSchema}, "no time field"},
		{Config{Schema: testSchema, TimeField: "ts", TimeFormat: 9}, "unknown time format"},
		{Config{Schema: testSchema, TimeField: "ts", Required: []string{"nope"}}, `required field "nope" is not in the schema`},
		{Config{Schema: testSchema, TimeField: "ts", Required: []string{"ts"}}, `required field "ts" is not in the schema`},
		{Config{Schema: testSchema, TimeField: "s"}, `time field "s" is declared string, want int or any`},
		{Config{Schema: testSchema, TimeField: "ts", TimeFields: []string{"f"}}, `time field "f" is declared float`},
		{Config{Schema: testSchema, TimeField: "ts", TimeFields: []string{"zz"}}, `time field "zz" is not in the schema`},
	}
	for _, c := range cases {
		if _, err := NewDecoder(c.cfg); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("NewDecoder(%+v) = %v, want %q", c.cfg, err, c.err)
		}
	}
}

// TestDecodeNewEvents checks that each record decodes into an event of its
// own: the next records, a failed one included, leave it alone, and it
// shares nothing with the input.
func TestDecodeNewEvents(t *testing.T) {
	d := testDecoder(t, Config{})
	data := []byte(`{"s":"x","i":1,"a":"yz","ts":5}`)
	first, err := d.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	clear(data)
	if _, err := d.Decode([]byte(`{"s":"q","i":`)); err == nil {
		t.Fatal("a truncated record decoded")
	}
	second, err := d.Decode([]byte(`{"i":2,"ts":6,"k":"w"}`))
	if err != nil {
		t.Fatal(err)
	}
	if &first.Fields[0] == &second.Fields[0] {
		t.Error("two events share their fields")
	}
	if got := fieldsString(testSchema, first); got != `s=string:"x" i=int:1 a=string:"yz"` || first.Time != 5 {
		t.Errorf("first decode: %s at %d", got, first.Time)
	}
	if got := fieldsString(testSchema, second); got != `i=int:2 k=string:"w"` || second.Time != 6 {
		t.Errorf("second decode: %s at %d", got, second.Time)
	}
}

// TestDecodeDepth checks the nesting limit against encoding/json's.
func TestDecodeDepth(t *testing.T) {
	d := testDecoder(t, Config{})
	for _, depth := range []int{maxDepth - 1, maxDepth, maxDepth + 1} {
		// The record's object is depth 1; the value of x adds depth-1 more.
		in := `{"ts":1,"x":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`
		_, err := d.Decode([]byte(in))
		got := err == nil
		var m map[string]any
		want := json.Unmarshal([]byte(in), &m) == nil
		if got != want {
			t.Errorf("depth %d: decoded %v, encoding/json %v", depth, got, want)
		}
	}
}

func TestDecodeAllocs(t *testing.T) {
	d := testDecoder(t, Config{Schema: benchSchema, Required: []string{"card"}})
	data := []byte(benchEvent)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := d.Decode(data); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 2 {
		t.Errorf("Decode allocates %v times per event, want at most 2 (the event with its fields, and its strings)", allocs)
	}
}

// narrowSchema reads 3 of the 15 fields of benchEvent (plus the time
// field), none of them strings: decoding it allocates the event only, so
// every other allocation would come from the 11 skipped fields.
var narrowSchema = event.MustSchema(
	event.Field{Name: "amount", Kind: event.KindFloat},
	event.Field{Name: "mcc", Kind: event.KindInt},
	event.Field{Name: "ok", Kind: event.KindBool},
)

// unknownEvent is benchEvent with more fields outside every schema: a
// nested object, an array, escapes and non-ASCII text.
const unknownEvent = `{"id":"t81723","ts":1714564800123,"card":"4000123412341234","type":"buy",` +
	`"amount":123.45,"cur":"EUR","merchant":"m8812","mcc":5411,"country":"FR","channel":"web",` +
	`"ip":"10.1.2.3","device":"d77aa","ok":true,"risk":0.42,"n":1,` +
	`"geo":{"lat":48.85,"lon":2.35,"tags":["a","b",{"c":null}]},"note":"caf\u00e9 \"x\" é",` +
	`"hist":[1,2.5,-3e2,true,false,null]}`

// TestDecodeSkipsWithoutAllocating checks that fields outside the schema
// are skipped without allocating, in both modes (Strict with Open: an
// inferred schema).
func TestDecodeSkipsWithoutAllocating(t *testing.T) {
	for _, cfg := range []Config{
		{Schema: narrowSchema},
		{Schema: narrowSchema, Mode: Strict, Open: true},
	} {
		cfg.TimeField = "ts"
		d, err := NewDecoder(cfg)
		if err != nil {
			t.Fatal(err)
		}
		data := []byte(unknownEvent)
		var ev *event.Event
		allocs := testing.AllocsPerRun(100, func() {
			if ev, err = d.Decode(data); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 1 {
			t.Errorf("%v: Decode allocates %v times per event skipping unknown fields, want 1 (the event)", cfg.Mode, allocs)
		}
		if got := fieldsString(narrowSchema, ev); got != "amount=float:123.45 mcc=int:5411 ok=bool:true" {
			t.Errorf("%v: decoded %s", cfg.Mode, got)
		}
	}
}

// BenchmarkDecodeUnknownFields decodes unknownEvent (18 fields, about 330
// bytes) with a schema of 3 of them: 15 fields are skipped.
func BenchmarkDecodeUnknownFields(b *testing.B) {
	d := testDecoder(b, Config{Schema: narrowSchema})
	data := []byte(unknownEvent)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}

// benchSchema and benchEvent: a 15-field, ~200-byte payment event.
var benchSchema = event.MustSchema(
	event.Field{Name: "id", Kind: event.KindString},
	event.Field{Name: "card", Kind: event.KindString},
	event.Field{Name: "type", Kind: event.KindString},
	event.Field{Name: "amount", Kind: event.KindFloat},
	event.Field{Name: "cur", Kind: event.KindString},
	event.Field{Name: "merchant", Kind: event.KindString},
	event.Field{Name: "mcc", Kind: event.KindInt},
	event.Field{Name: "country", Kind: event.KindString},
	event.Field{Name: "channel", Kind: event.KindString},
	event.Field{Name: "ip", Kind: event.KindString},
	event.Field{Name: "device", Kind: event.KindString},
	event.Field{Name: "ok", Kind: event.KindBool},
	event.Field{Name: "risk", Kind: event.KindFloat},
	event.Field{Name: "n"},
)

const benchEvent = `{"id":"t81723","ts":1714564800123,"card":"4000123412341234","type":"buy",` +
	`"amount":123.45,"cur":"EUR","merchant":"m8812","mcc":5411,"country":"FR","channel":"web",` +
	`"ip":"10.1.2.3","device":"d77aa","ok":true,"risk":0.42,"n":1}`

// BenchmarkDecode decodes benchEvent, each time into a new event: 15 fields
// (14 in the schema plus the time field), about 200 bytes.
func BenchmarkDecode(b *testing.B) {
	d := testDecoder(b, Config{Schema: benchSchema, Required: []string{"card"}})
	data := []byte(benchEvent)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}

// cardsSchema and cardsEvent: the schema and a record of the cards
// backtest (rulesets/cards.cep on the events of `cepheus gen`), the main
// benchmark of the engine: 18 fields, an RFC 3339 time, about 340 bytes.
var cardsSchema = event.MustSchema(
	event.Field{Name: "ts", Kind: event.KindInt},
	event.Field{Name: "type", Kind: event.KindString},
	event.Field{Name: "event_id", Kind: event.KindString},
	event.Field{Name: "customer_id", Kind: event.KindString},
	event.Field{Name: "card_id", Kind: event.KindString},
	event.Field{Name: "amount", Kind: event.KindFloat},
	event.Field{Name: "currency", Kind: event.KindString},
	event.Field{Name: "merchant_id", Kind: event.KindString},
	event.Field{Name: "merchant_country", Kind: event.KindString},
	event.Field{Name: "mcc", Kind: event.KindString},
	event.Field{Name: "card_country", Kind: event.KindString},
	event.Field{Name: "device_id", Kind: event.KindString},
	event.Field{Name: "ip", Kind: event.KindString},
	event.Field{Name: "ip_country", Kind: event.KindString},
	event.Field{Name: "lat", Kind: event.KindFloat},
	event.Field{Name: "lon", Kind: event.KindFloat},
	event.Field{Name: "is_fraud", Kind: event.KindBool},
	event.Field{Name: "scenario", Kind: event.KindString},
)

const cardsEvent = `{"ts":"2026-01-01T00:01:13.497Z","type":"auth","event_id":"evt_1","customer_id":"cust_4230",` +
	`"card_id":"card_6982","amount":72.33,"currency":"USD","merchant_id":"merch_3170","merchant_country":"FR",` +
	`"mcc":"5541","card_country":"FR","device_id":"","ip":"","ip_country":"","lat":45.8387,"lon":4.8813,` +
	`"is_fraud":false,"scenario":""}`

// TestDecodeCards checks the record of BenchmarkDecodeCards field by field.
func TestDecodeCards(t *testing.T) {
	d := testDecoder(t, Config{Schema: cardsSchema, TimeField: "ts"})
	ev, err := decodeValue(d, []byte(cardsEvent))
	if err != nil {
		t.Fatal(err)
	}
	const want = `ts=int:1767225673497 type=string:"auth" event_id=string:"evt_1" customer_id=string:"cust_4230" ` +
		`card_id=string:"card_6982" amount=float:72.33 currency=string:"USD" merchant_id=string:"merch_3170" ` +
		`merchant_country=string:"FR" mcc=string:"5541" card_country=string:"FR" device_id=string:"" ip=string:"" ` +
		`ip_country=string:"" lat=float:45.8387 lon=float:4.8813 is_fraud=bool:false scenario=string:""`
	if got := fieldsString(cardsSchema, &ev); got != want {
		t.Errorf("decoded\n%s\nwant\n%s", got, want)
	}
	if ev.Time != 1767225673497 {
		t.Errorf("time %d, want 1767225673497", ev.Time)
	}
}

// BenchmarkDecodeCards decodes cardsEvent as the cards backtest does
// (Lenient, no required field), into a new event per record.
func BenchmarkDecodeCards(b *testing.B) {
	d := testDecoder(b, Config{Schema: cardsSchema, TimeField: "ts"})
	data := []byte(cardsEvent)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeEncodingJSON is the reference: encoding/json into a struct
// of the same fields.
func BenchmarkDecodeEncodingJSON(b *testing.B) {
	var v struct {
		ID       string  `json:"id"`
		TS       int64   `json:"ts"`
		Card     string  `json:"card"`
		Type     string  `json:"type"`
		Amount   float64 `json:"amount"`
		Cur      string  `json:"cur"`
		Merchant string  `json:"merchant"`
		MCC      int64   `json:"mcc"`
		Country  string  `json:"country"`
		Channel  string  `json:"channel"`
		IP       string  `json:"ip"`
		Device   string  `json:"device"`
		OK       bool    `json:"ok"`
		Risk     float64 `json:"risk"`
		N        any     `json:"n"`
	}
	data := []byte(benchEvent)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if err := json.Unmarshal(data, &v); err != nil {
			b.Fatal(err)
		}
	}
}

// ---- differential testing against encoding/json ----

// testSeeds returns the fixed seeds, or the one in CEPHEUS_SEED.
func testSeeds(t *testing.T) []uint64 {
	if s := os.Getenv("CEPHEUS_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CEPHEUS_SEED: %v", err)
		}
		return []uint64{seed}
	}
	return []uint64{1, 2, 3, 4, 5, 6, 7, 8, 42, 1234}
}

// oracleDecode computes what Decode must produce for data, from
// encoding/json and the documented conversion rules. It returns an error
// when Decode must fail; syntax reports whether that is a JSON syntax error.
func oracleDecode(cfg Config, data []byte) (t event.Time, fields []event.Value, syntax bool, err error) {
	if !json.Valid(data) {
		return 0, nil, true, errors.New("invalid JSON")
	}
	if trimmed := bytes.TrimLeft(data, " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '{' {
		return 0, nil, false, errors.New("not an object")
	}
	// Walk the members in order: every occurrence of a field must be valid
	// for it, and the last one wins.
	dec := json.NewDecoder(bytes.NewReader(data))
	if _, err := dec.Token(); err != nil { // '{'
		return 0, nil, true, err
	}
	fields = make([]event.Value, cfg.Schema.Len())
	present := map[string]any{}
	haveTime := false
	isTime := map[string]bool{cfg.TimeField: true}
	for _, name := range cfg.TimeFields {
		isTime[name] = true
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return 0, nil, true, err
		}
		name := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return 0, nil, true, err
		}
		vd := json.NewDecoder(bytes.NewReader(raw))
		vd.UseNumber()
		var v any
		if err := vd.Decode(&v); err != nil {
			return 0, nil, true, err
		}
		slot, inSchema := cfg.Schema.Slot(name)
		if cfg.Mode == Strict {
			if _, dup := present[name]; dup {
				return 0, nil, false, errors.New("duplicate")
			}
			if !inSchema && name != cfg.TimeField {
				return 0, nil, false, errors.New("unknown field")
			}
		}
		present[name] = v
		switch {
		case isTime[name]:
			var ms event.Time
			if v != nil || name == cfg.TimeField {
				if ms, err = oracleTime(cfg, v); err != nil {
					return 0, nil, false, err
				}
			}
			if name == cfg.TimeField {
				t, haveTime = ms, true
			}
			if inSchema {
				fields[slot] = event.Null
				if v != nil {
					fields[slot] = event.Int(int64(ms))
				}
			}
		case inSchema:
			fv, err := oracleValue(cfg.Schema.Field(slot).Kind, v)
			if err != nil {
				return 0, nil, false, fmt.Errorf("field %s: %w", name, err)
			}
			fields[slot] = fv
		}
	}
	if !haveTime {
		return 0, nil, false, errors.New("no time")
	}
	for _, name := range cfg.Required {
		if v, ok := present[name]; !ok || v == nil {
			return 0, nil, false, errors.New("required missing")
		}
	}
	return t, fields, false, nil
}

func oracleTime(cfg Config, raw any) (event.Time, error) {
	switch x := raw.(type) {
	case string:
		if cfg.TimeFormat == TimeEpochMillis {
			return 0, errors.New("string time")
		}
		tt, err := oracleRFC3339(x)
		if err != nil {
			return 0, err
		}
		return event.Time(tt.UnixMilli()), nil
	case json.Number:
		if cfg.TimeFormat == TimeRFC3339 {
			return 0, errors.New("number time")
		}
		ms, ok := oracleWhole(string(x))
		if !ok {
			return 0, errors.New("time not whole")
		}
		return event.Time(ms), nil
	}
	return 0, errors.New("time of wrong type")
}

func oracleValue(kind event.Kind, raw any) (event.Value, error) {
	switch x := raw.(type) {
	case nil:
		return event.Null, nil
	case string:
		if kind == event.KindNull || kind == event.KindString {
			return event.String(x), nil
		}
	case bool:
		if kind == event.KindNull || kind == event.KindBool {
			return event.Bool(x), nil
		}
	case json.Number:
		s := string(x)
		switch kind {
		case event.KindNull:
			if !strings.ContainsAny(s, ".eE") {
				i, err := strconv.ParseInt(s, 10, 64)
				if err != nil {
					return event.Null, err // beyond int64
				}
				return event.Int(i), nil
			}
			f, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return event.Null, err
			}
			return event.Float(f), nil
		case event.KindInt:
			if i, ok := oracleWhole(s); ok {
				return event.Int(i), nil
			}
			return event.Null, errors.New("not whole")
		case event.KindFloat:
			f, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return event.Null, err
			}
			return event.Float(f), nil
		}
	}
	return event.Null, fmt.Errorf("%T for %v", raw, kind)
}

// oracleWhole is the KindInt rule computed with math/big.
func oracleWhole(s string) (int64, bool) {
	if e := strings.IndexAny(s, "eE"); e >= 0 {
		// Keep big.Rat away from absurd exponents.
		if exp, err := strconv.Atoi(strings.TrimPrefix(s[e+1:], "+")); err != nil || exp > 400 || exp < -400 {
			mant := strings.Trim(strings.NewReplacer("-", "", ".", "").Replace(s[:e]), "0")
			if mant == "" {
				return 0, true
			}
			return 0, false
		}
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok || !r.IsInt() || !r.Num().IsInt64() {
		return 0, false
	}
	return r.Num().Int64(), true
}

var rfc3339Shape = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-](\d{2}):(\d{2}))$`)

// oracleRFC3339 is time.Parse restricted to the documented grammar.
func oracleRFC3339(s string) (time.Time, error) {
	m := rfc3339Shape.FindStringSubmatch(s)
	if m == nil {
		return time.Time{}, errors.New("not the RFC 3339 shape")
	}
	if m[3] != "" && (m[3] > "23" || m[4] > "59") {
		return time.Time{}, errors.New("offset out of range")
	}
	return time.Parse(time.RFC3339Nano, s)
}

// checkAgainstOracle decodes data and compares with oracleDecode.
func checkAgainstOracle(t *testing.T, d *Decoder, cfg Config, data []byte) error {
	ev, err := decodeValue(d, data)
	wt, wf, syntax, werr := oracleDecode(cfg, data)
	switch {
	case err != nil && werr != nil:
		var de *DecodeError
		if !errors.As(err, &de) {
			return fmt.Errorf("error %v is not a *DecodeError", err)
		}
		if syntax && de.Column <= 0 {
			return fmt.Errorf("syntax error %q without a column", de.Reason)
		}
		if de.Column > len(data)+1 {
			return fmt.Errorf("error column %d beyond the input (%d bytes)", de.Column, len(data))
		}
		return nil
	case err != nil:
		return fmt.Errorf("Decode failed (%v), encoding/json agrees on %v at %d", err, wf, wt)
	case werr != nil:
		return fmt.Errorf("Decode succeeded (%v at %d), want an error (%v)", ev.Fields, ev.Time, werr)
	}
	if ev.Time != wt {
		return fmt.Errorf("time %d, want %d", ev.Time, wt)
	}
	if len(ev.Fields) != len(wf) {
		return fmt.Errorf("%d fields, want %d", len(ev.Fields), len(wf))
	}
	for i := range wf {
		g, w := ev.Fields[i], wf[i]
		same := g.Kind() == w.Kind() && g.Equal(w)
		if gf, ok := g.AsFloat(); ok && g.Kind() == event.KindFloat {
			wf, _ := w.AsFloat()
			same = same && math.Signbit(gf) == math.Signbit(wf)
		}
		if !same {
			return fmt.Errorf("field %s = %v (%v), want %v (%v)", cfg.Schema.Field(i).Name, g, g.Kind(), w, w.Kind())
		}
	}
	return nil
}

func TestDecodeDifferential(t *testing.T) {
	n := 5000
	if testing.Short() {
		n = 1000
	}
	cfgs := []Config{
		{Schema: testSchema, TimeField: "ts", Required: []string{"k"}},
		{Schema: testSchema, TimeField: "a", TimeFields: []string{"i"}}, // time fields inside the schema
		{Schema: testSchema, TimeField: "a", TimeFormat: TimeEpochMillis},
		{Schema: testSchema, TimeField: "ts", TimeFormat: TimeRFC3339},
		{Schema: testSchema, TimeField: "ts", Mode: Strict},
	}
	for _, seed := range testSeeds(t) {
		rng := rand.New(rand.NewPCG(seed, 0xdec0de))
		// One decoder per configuration, reused across records as in
		// production (its key-order prediction sees varying orders).
		decs := make([]*Decoder, len(cfgs))
		for i, cfg := range cfgs {
			decs[i] = testDecoder(t, cfg)
		}
		failures := 0
		for range n {
			ci := rng.IntN(len(cfgs))
			cfg, d := cfgs[ci], decs[ci]
			data := genObject(rng, cfg.TimeField)
			if err := checkAgainstOracle(t, d, cfg, data); err != nil {
				t.Errorf("seed %d (CEPHEUS_SEED=%d), config %d, input %q:\n%v", seed, seed, ci, data, err)
				if failures++; failures > 5 {
					t.FailNow()
				}
			}
		}
	}
}

// genObject generates a random flat JSON object over testSchema's fields,
// unknown fields with nested values, and sometimes a corruption.
func genObject(rng *rand.Rand, timeField string) []byte {
	var b []byte
	ws := func() {
		if rng.IntN(6) == 0 {
			b = append(b, " \t\r\n"[rng.IntN(4)])
		}
	}
	ws()
	b = append(b, '{')
	names := []string{"s", "i", "f", "b", "a", "k", "ts", "x", "nested", "S"}
	nf := rng.IntN(9)
	first := true
	hasTime := false
	field := func(name string) {
		if !first {
			b = append(b, ',')
		}
		first = false
		ws()
		b = genString(rng, b, name, rng.IntN(8) == 0)
		ws()
		b = append(b, ':')
		ws()
		if name == timeField {
			hasTime = true
			b = genTime(rng, b)
		} else {
			b = genValue(rng, b, name, 0)
		}
		ws()
	}
	for range nf {
		field(names[rng.IntN(len(names))])
	}
	if !hasTime && rng.IntN(10) != 0 {
		field(timeField)
	}
	b = append(b, '}')
	ws()
	// Corrupt some inputs: drop, flip or insert a byte.
	if rng.IntN(8) == 0 && len(b) > 1 {
		p := rng.IntN(len(b))
		switch rng.IntN(3) {
		case 0:
			b = append(b[:p], b[p+1:]...)
		case 1:
			b[p] = `{}[]",:.-+eE0 \tx\\u`[rng.IntN(20)]
		default:
			b = append(b[:p], append([]byte{"{}[]\",:0\\"[rng.IntN(9)]}, b[p:]...)...)
		}
	}
	return b
}

// genValue writes a random value, mostly of the kind the field name
// suggests.
func genValue(rng *rand.Rand, b []byte, name string, depth int) []byte {
	if rng.IntN(10) == 0 {
		name = "?" // any kind
	}
	switch name {
	case "s", "k":
		return genString(rng, b, genText(rng), rng.IntN(3) == 0)
	case "i":
		return genNumber(rng, b, true)
	case "f":
		return genNumber(rng, b, rng.IntN(3) == 0)
	case "b":
		return strconv.AppendBool(b, rng.IntN(2) == 0)
	case "a":
		return genValue(rng, b, []string{"s", "i", "f", "b"}[rng.IntN(4)], depth)
	case "x", "nested", "S":
		if depth < 3 {
			return genNested(rng, b, depth+1)
		}
	}
	switch rng.IntN(7) {
	case 0:
		return append(b, "null"...)
	case 1:
		return strconv.AppendBool(b, rng.IntN(2) == 0)
	case 2, 3:
		return genNumber(rng, b, rng.IntN(2) == 0)
	case 4:
		if depth < 3 {
			return genNested(rng, b, depth+1)
		}
	}
	return genString(rng, b, genText(rng), rng.IntN(3) == 0)
}

func genNested(rng *rand.Rand, b []byte, depth int) []byte {
	n := rng.IntN(4)
	if rng.IntN(2) == 0 {
		b = append(b, '[')
		for i := range n {
			if i > 0 {
				b = append(b, ',')
			}
			b = genValue(rng, b, "?", depth)
		}
		return append(b, ']')
	}
	b = append(b, '{')
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = genString(rng, b, genText(rng), false)
		b = append(b, ':')
		b = genValue(rng, b, "x", depth)
	}
	return append(b, '}')
}

// genText returns random text: ASCII, multi-byte UTF-8, control
// characters and quotes, sometimes invalid UTF-8.
func genText(rng *rand.Rand) string {
	pool := []string{"a", "Z", "0", " ", "\"", "\\", "/", "\n", "\t", "\x01", "\x7f", "é", "日本", "€", "😀",
		"\u2028", "\ufffd", "ab", "key", "\xff", "\xe2\x82", "\xed\xa0\x80"}
	var s strings.Builder
	for range rng.IntN(12) {
		s.WriteString(pool[rng.IntN(len(pool))])
	}
	return s.String()
}

// genString writes s as a JSON string; with escape, it escapes every rune
// it can (\uXXXX, surrogate pairs, short escapes), otherwise only what JSON
// requires. It also writes lone surrogate escapes now and then.
func genString(rng *rand.Rand, b []byte, s string, escape bool) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		raw := s[i : i+size]
		i += size
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, raw...) // invalid UTF-8 stays raw
		case r == '"' || r == '\\' || r < 0x20 || (escape && rng.IntN(2) == 0):
			switch {
			case r == '"':
				b = append(b, `\"`...)
			case r == '\\':
				b = append(b, `\\`...)
			case r == '\n' && rng.IntN(2) == 0:
				b = append(b, `\n`...)
			case r == '/':
				b = append(b, `\/`...)
			case r > 0xffff:
				r1, r2 := utf16Pair(r)
				b = fmt.Appendf(b, `\u%04x\u%04X`, r1, r2)
			default:
				b = fmt.Appendf(b, `\u%04x`, r)
			}
		default:
			b = append(b, raw...)
		}
	}
	if escape && rng.IntN(10) == 0 {
		b = append(b, []string{`\ud800`, `\udc00`, `\ud83d\u0041`, `\ud83d`}[rng.IntN(4)]...)
	}
	return append(b, '"')
}

func utf16Pair(r rune) (rune, rune) {
	r -= 0x10000
	return 0xD800 + r>>10, 0xDC00 + r&0x3ff
}

// genNumber writes a random JSON number: an integer literal, or a float in
// one of several spellings.
func genNumber(rng *rand.Rand, b []byte, integer bool) []byte {
	if integer {
		switch rng.IntN(6) {
		case 0:
			return strconv.AppendInt(b, rng.Int64(), 10)
		case 1:
			return append(b, []string{"9223372036854775807", "-9223372036854775808", "9223372036854775808",
				"-9223372036854775809", "-0", "0", "18446744073709551616", "123456789012345678901234"}[rng.IntN(8)]...)
		case 2:
			return strconv.AppendInt(b, rng.Int64N(1<<53)-1<<52, 10)
		}
		return strconv.AppendInt(b, rng.Int64N(2000)-1000, 10)
	}
	switch rng.IntN(8) {
	case 0:
		return strconv.AppendFloat(b, rng.NormFloat64()*1e6, 'f', rng.IntN(5), 64)
	case 1:
		return strconv.AppendFloat(b, rng.NormFloat64()*math.Pow(10, float64(rng.IntN(600)-300)), 'e', -1, 64)
	case 2:
		return append(b, []string{"3.0", "1e3", "1.5e1", "1E+2", "-0.0", "0e99999", "1e400", "-1e-400", "2.50",
			"1.0000000000000000001", "9.223372036854775807e18", "9.223372036854775808e18", "1e-2", "100e-2"}[rng.IntN(14)]...)
	case 3:
		return strconv.AppendFloat(b, float64(rng.Int64N(1e6)), 'f', 1, 64)
	}
	return strconv.AppendFloat(b, rng.Float64()*1000, 'g', -1, 64)
}

// genTime writes a random time value: RFC 3339 in several spellings, epoch
// milliseconds, or something invalid.
func genTime(rng *rand.Rand, b []byte) []byte {
	ms := rng.Int64N(4e12) - 1e12
	switch rng.IntN(8) {
	case 0:
		return strconv.AppendInt(b, ms, 10)
	case 1:
		return append(b, []string{"null", "true", `"yesterday"`, `"2024-02-30T00:00:00Z"`, `"2024-01-01T24:00:00Z"`,
			`"2024-01-01T00:00:00+24:00"`, `"2024-01-01T00:00:00"`, `"2024-01-01 00:00:00Z"`, "1.5", `{}`,
			`"0000-01-01T00:00:00Z"`, `"9999-12-31T23:59:59.999999999Z"`, `"2024-01-01T00:00:60Z"`}[rng.IntN(13)]...)
	case 2:
		return strconv.AppendFloat(b, float64(ms), 'e', -1, 64)
	}
	t := time.UnixMilli(ms).Add(time.Duration(rng.IntN(1e6)))
	if rng.IntN(2) == 0 {
		t = t.In(time.FixedZone("", (rng.IntN(48)-24)*1800))
	}
	layouts := []string{time.RFC3339, time.RFC3339Nano, "2006-01-02T15:04:05.000Z07:00", "2006-01-02T15:04:05.0Z07:00"}
	return genString(rng, b, t.Format(layouts[rng.IntN(len(layouts))]), rng.IntN(10) == 0)
}

// TestParseRFC3339 compares the time parser with time.Parse on random
// instants over the whole supported range.
func TestParseRFC3339(t *testing.T) {
	for _, seed := range testSeeds(t) {
		rng := rand.New(rand.NewPCG(seed, 3339))
		lo, hi := time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC).Unix(), time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).Unix()
		for range 5000 {
			tt := time.Unix(lo+rng.Int64N(hi-lo), rng.Int64N(1e9)).UTC()
			if rng.IntN(2) == 0 {
				tt = tt.In(time.FixedZone("", (rng.IntN(48)-24)*1800+rng.IntN(2)*60*rng.IntN(30)))
			}
			s := tt.Format(time.RFC3339Nano)
			want, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				continue // a year or offset time.Format cannot round-trip
			}
			got, ok := parseRFC3339Millis([]byte(s))
			if !ok || got != event.Time(want.UnixMilli()) {
				t.Fatalf("seed %d (CEPHEUS_SEED=%d): parse %s = %d, %v; want %d", seed, seed, s, got, ok, want.UnixMilli())
			}
		}
	}
}

// FuzzDecode checks that Decode never panics and agrees with encoding/json
// (under the documented conversion rules) on every input.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"s":"x","i":1,"f":2.5,"b":true,"a":null,"k":"c","ts":1000}`,
		`{"ts":"2024-05-01T14:00:00.250+02:00","x":[{"y":[]}],"s":"\u00e9\ud83d\ude00"}`,
		`{"ts":1.5e3,"i":3.0,"a":12345678901234567890}`,
		`{"k":null,"ts":1}`,
		"{\"s\":\"\xff\",\"ts\":1}",
		`{"i":-9223372036854775808,"ts":-1}`,
		`[]`, `{`, `{"ts":1,}`, `{"ts":01}`, ` {"ts" : 1 } `,
		// The fast paths: plain numbers at the limits of the float fast
		// path (2^53, 19 digits, halfway cases), exponents, escaped and
		// non-ASCII keys and strings around eight-byte boundaries, RFC
		// 3339 times of the usual shape.
		`{"ts":1,"f":9007199254740993,"a":9007199254740992.5,"i":9223372036854775807}`,
		`{"ts":1,"f":0.1000000000000000055511151231257827,"a":1234567890123456789,"i":-9223372036854775808}`,
		`{"ts":1,"f":2.2250738585072011e-308,"a":-0.0,"i":1.0e1,"s":"12345678"}`,
		`{"ts":1,"f":123456789012345678.5,"a":0.30000000000000004,"i":12345678901234567890}`,
		`{"ts":"2026-01-01T00:01:13.497Z","s":"abcdefg\"","k":"\u00e9abcdefgh\u0000"}`,
		`{"ts":"2026-02-29T00:01:13.497Z","\u0073":"x","kk":"y"}`,
		"{\"ts\":\"2024-02-29T23:59:59.999Z\",\"s\":\"abcdefg\xc3\xa9\xff\",\"k\":\"\x7f\"}",
		`{"ts":"2024-05-01T14:00:00.250+02:00","s":"1234567\/","b":false,"a":true}`,
	} {
		f.Add([]byte(s))
	}
	cfgs := []Config{
		{Schema: testSchema, TimeField: "ts", Required: []string{"k"}},
		{Schema: testSchema, TimeField: "a", TimeFields: []string{"i"}, Mode: Strict},
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for i, cfg := range cfgs {
			d, err := NewDecoder(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := checkAgainstOracle(t, d, cfg, data); err != nil {
				t.Fatalf("config %d, input %q: %v", i, data, err)
			}
		}
	})
}

// TestParseFloat compares the fast float path with strconv.ParseFloat, bit
// for bit, on numbers in many spellings.
func TestParseFloat(t *testing.T) {
	for _, seed := range testSeeds(t) {
		rng := rand.New(rand.NewPCG(seed, 64))
		for range 20000 {
			var text []byte
			switch rng.IntN(4) {
			case 0:
				text = strconv.AppendFloat(nil, rng.NormFloat64()*math.Pow(10, float64(rng.IntN(60)-30)), 'f', rng.IntN(12), 64)
			case 1:
				text = strconv.AppendFloat(nil, rng.NormFloat64()*math.Pow(10, float64(rng.IntN(80)-40)), 'e', rng.IntN(20)-1, 64)
			case 2:
				text = genNumber(rng, nil, rng.IntN(2) == 0)
			default:
				text = fmt.Appendf(nil, "%d.%0*de%d", rng.Int64N(1e12)-5e11, rng.IntN(8)+1, rng.Int64N(1e6), rng.IntN(50)-25)
			}
			want, werr := strconv.ParseFloat(string(text), 64)
			got, err := parseFloat(text)
			if (err != nil) != (werr != nil) || math.Float64bits(got) != math.Float64bits(want) {
				t.Fatalf("seed %d (CEPHEUS_SEED=%d): parseFloat(%s) = %v, %v; strconv: %v, %v", seed, seed, text, got, err, want, werr)
			}
		}
	}
}

// TestPlainRun compares the eight-bytes-at-a-time scan of plainRun with a
// byte-by-byte scan by strSpecial, on random bytes from a set rich in the
// special ones, at every start index.
func TestPlainRun(t *testing.T) {
	const alphabet = "ab \"\\\x00\x1f\x7f\x80\xc3\xa9\xff!#[]"
	for _, seed := range testSeeds(t) {
		rng := rand.New(rand.NewPCG(seed, 8))
		for range 2000 {
			data := make([]byte, rng.IntN(40))
			for k := range data {
				if rng.IntN(4) == 0 {
					data[k] = alphabet[rng.IntN(len(alphabet))]
				} else {
					data[k] = 'a' + byte(rng.IntN(26))
				}
			}
			for j := range len(data) + 1 {
				want := j
				for want < len(data) && !strSpecial[data[want]] {
					want++
				}
				if got := plainRun(data, j); got != want {
					t.Fatalf("seed %d (CEPHEUS_SEED=%d): plainRun(%q, %d) = %d, want %d", seed, seed, data, j, got, want)
				}
			}
		}
	}
}

// TestPlainNumber checks the plain-number path against strconv: the
// numbers it accepts must parse (as floats, bit for bit, and as ints where
// they are whole and in range) to what strconv gives, and the shapes it
// must leave to scanNumber are refused. The random numbers sit around the
// limits of the fast path: 19 digits, mantissas near 2^53, and decimals
// halfway between two floats.
func TestPlainNumber(t *testing.T) {
	for _, s := range []string{"01", "-", "-x", "1.", "1.e5", "1e5", "1E5", "1.5e3", "00", "-01.5",
		"12345678901234567890", "1.2345678901234567890", "0.0000000000000000001"} {
		if p, ok := scanPlainNumber([]byte(s), 0); ok {
			t.Errorf("scanPlainNumber(%q) = %+v, want a refusal", s, p)
		}
	}
	for _, seed := range testSeeds(t) {
		rng := rand.New(rand.NewPCG(seed, 53))
		for range 20000 {
			var text []byte
			switch rng.IntN(6) {
			case 0: // a decimal of up to 19 digits
				text = fmt.Appendf(nil, "%d", rng.Uint64N(1e19))
				if k := rng.IntN(len(text) + 1); k < len(text) {
					text = append(text[:k:k], append([]byte{'.'}, text[k:]...)...)
				}
			case 1: // a mantissa near 2^53
				text = strconv.AppendUint(nil, 1<<53-50+rng.Uint64N(100), 10)
				if k := rng.IntN(len(text)); k > 0 {
					text = append(text[:k:k], append([]byte{'.'}, text[k:]...)...)
				}
			case 2: // halfway between two floats, rounded to 17 and 19 digits
				f := rng.NormFloat64() * math.Pow(10, float64(rng.IntN(10)))
				next := math.Nextafter(f, math.Inf(1))
				text = strconv.AppendFloat(nil, f/2+next/2, 'f', rng.IntN(19), 64)
			case 3: // short decimals, as in records
				text = strconv.AppendFloat(nil, rng.NormFloat64()*1000, 'f', rng.IntN(6), 64)
			case 4:
				text = genNumber(rng, nil, rng.IntN(2) == 0)
			default: // zeros and leading zeros of fractions
				text = fmt.Appendf(nil, "%s0.%0*d", []string{"", "-"}[rng.IntN(2)], rng.IntN(12)+1, rng.Int64N(1000))
			}
			if rng.IntN(2) == 0 && text[0] != '-' {
				text = append([]byte{'-'}, text...)
			}
			checkPlainNumber(t, seed, text)
		}
	}
}

// checkPlainNumber checks scanPlainNumber on text, followed by a comma as in
// a record, against strconv.
func checkPlainNumber(t *testing.T, seed uint64, text []byte) {
	t.Helper()
	p, ok := scanPlainNumber(append(text[:len(text):len(text)], ','), 0)
	digits := len(bytes.Trim(bytes.ReplaceAll(text, []byte("."), nil), "-"))
	if plain := plainShape.Match(text) && digits <= 19; ok != plain {
		t.Fatalf("seed %d (CEPHEUS_SEED=%d): scanPlainNumber(%s) says %v, want %v", seed, seed, text, ok, plain)
	}
	if !ok {
		return
	}
	if p.end != len(text) {
		t.Fatalf("seed %d (CEPHEUS_SEED=%d): scanPlainNumber(%s) ends at %d, want %d", seed, seed, text, p.end, len(text))
	}
	want, _ := strconv.ParseFloat(string(text), 64)
	if f, ok := p.float(); ok && math.Float64bits(f) != math.Float64bits(want) {
		t.Fatalf("seed %d (CEPHEUS_SEED=%d): float of %s = %v, strconv: %v", seed, seed, text, f, want)
	}
	wantInt, err := strconv.ParseInt(string(text), 10, 64)
	if v, ok := p.int(); ok != (err == nil) || (ok && v != wantInt) {
		t.Fatalf("seed %d (CEPHEUS_SEED=%d): int of %s = %v, %v; strconv: %v, %v", seed, seed, text, v, ok, wantInt, err)
	}
}

// plainShape is the shape of a plain number (its digit count aside).
var plainShape = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?$`)

// TestDecodeKeyPrediction decodes records whose keys vary around the
// predicted ones (escaped spellings of the same key, a longer or shorter
// key sharing its start, a key at the very end of the input) with one
// decoder, and compares every result with a fresh decoder.
func TestDecodeKeyPrediction(t *testing.T) {
	schema := event.MustSchema(
		event.Field{Name: "s", Kind: event.KindString},
		event.Field{Name: "a_rather_long_key_name", Kind: event.KindString},
		event.Field{Name: "fifteen_bytes_x", Kind: event.KindInt},
		event.Field{Name: "sixteen_bytes_xy", Kind: event.KindInt},
	)
	records := []string{
		`{"ts":1,"s":"x","a_rather_long_key_name":"y","fifteen_bytes_x":1,"sixteen_bytes_xy":2}`,
		`{"ts":1,"\u0073":"x","a_rather_long_key_nam\u0065":"y","fifteen_bytes_\u0078":1,"sixteen_bytes_x\u0079":2}`,
		`{"ts":1,"ss":"x","a_rather_long_key_name_":"y","fifteen_bytes_":1,"sixteen_bytes_xyz":2}`,
		`{"ts":1,"s":"x","a_rather_long_key_name":"y","fifteen_bytes_x":1,"sixteen_bytes_xy":2}`,
		`{"ts":1,"s" :"x", "a_rather_long_key_name" : "y" ,"fifteen_bytes_x":1,"sixteen_bytes_xy":2}`,
		`{"ts":1,"s":"x","a_rather_long_key_name":"y","fifteen_bytes_x":1,"sixteen_bytes_xy`,
		`{"ts":1,"s":"x","a_rather_long_key_name":"y","fifteen_bytes_x":1,"sixteen_bytes_xy":2}`,
		`{"ts":1,"s":"x","a_rather_long_key_name":"y","fifteen_bytes_x":1,"sixteen_bytes_x`,
		`{"ts":1,"s":"x","a_rather_long_key_name":"y","fifteen_bytes_x":1,"sixteen_bytes_xy"`,
	}
	for _, mode := range []Mode{Lenient, Strict} {
		cfg := Config{Schema: schema, TimeField: "ts", Mode: mode}
		d := testDecoder(t, cfg)
		for _, rec := range records {
			got, gerr := decodeValue(d, []byte(rec))
			want, werr := decodeValue(testDecoder(t, cfg), []byte(rec))
			if fmt.Sprint(gerr) != fmt.Sprint(werr) || fieldsString(schema, &got) != fieldsString(schema, &want) {
				t.Errorf("%v %s: decoded %s, %v; a fresh decoder: %s, %v", mode, rec,
					fieldsString(schema, &got), gerr, fieldsString(schema, &want), werr)
			}
		}
	}
}

// TestParseUTCMillis checks the shortcut of parseRFC3339Millis for times
// of the shape 2006-01-02T15:04:05.000Z against time.Parse (within the
// documented grammar, oracleRFC3339): random instants, and the same with
// one byte changed (a digit, a separator, a letter), which the shortcut
// must refuse or read as time.Parse does.
func TestParseUTCMillis(t *testing.T) {
	const swaps = "0123456789-:.TZz /+"
	for _, seed := range testSeeds(t) {
		rng := rand.New(rand.NewPCG(seed, 24))
		lo, hi := time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli(), time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).UnixMilli()
		for range 20000 {
			s := []byte(time.UnixMilli(lo + rng.Int64N(hi-lo)).UTC().Format("2006-01-02T15:04:05.000Z07:00"))
			if rng.IntN(2) == 0 {
				s[rng.IntN(len(s))] = swaps[rng.IntN(len(swaps))]
			}
			got, ok := parseRFC3339Millis(s)
			want, err := oracleRFC3339(string(s))
			if ok != (err == nil) || (ok && got != event.Time(want.UnixMilli())) {
				t.Fatalf("seed %d (CEPHEUS_SEED=%d): parse %s = %d, %v; time.Parse: %v, %v", seed, seed, s, got, ok, want.UnixMilli(), err)
			}
		}
	}
}

// TestRFC3339Hint: a time that is RFC 3339 but for its separator or its
// zone is said how to write; any other text gets no hint.
func TestRFC3339Hint(t *testing.T) {
	for in, want := range map[string]string{
		"2026-01-01T10:00:00":        ` (no time zone: write "2026-01-01T10:00:00Z" for UTC)`,
		"2026-01-01 10:00:00.250":    ` (no time zone: write "2026-01-01T10:00:00.250Z" for UTC)`,
		"2026-01-01 10:00:00Z":       ` (write "2026-01-01T10:00:00Z")`,
		"2026-01-01 10:00:00-05:00":  ` (write "2026-01-01T10:00:00-05:00")`,
		"2026-01-01T10:00:00+0530":   ` (write "2026-01-01T10:00:00+05:30")`,
		"2026-01-01 10:00:00.5-0800": ` (write "2026-01-01T10:00:00.5-08:00")`,
		"1772359231000":              ` (a number in quotes: write an epoch time as a JSON number, without them)`,
		"1772359231.25":              ` (a number in quotes: write an epoch time as a JSON number, without them)`,
		"-1":                         ` (a number in quotes: write an epoch time as a JSON number, without them)`,
		"2026-01-01T10:00:00+05":     "",
		"1772359231000Z":             "",
		"-":                          "",
		"2023-02-29T00:00:00Z":       "",
		"2023-02-29T00:00:00":        "",
		"yesterday":                  "",
		"2026-01-01":                 "",
		"2026-01-01 10:00":           "",
		"2026-01-01T10:00:00ZZ":      "",
		"":                           "",
	} {
		if got := rfc3339Hint([]byte(in), true); got != want {
			t.Errorf("rfc3339Hint(%q) = %q, want %q", in, got, want)
		}
	}
	// A decoder of RFC 3339 strings only (TimeRFC3339) refuses a number:
	// a number in quotes gets no hint to drop them.
	d := testDecoder(t, Config{TimeFormat: TimeRFC3339})
	_, err := decodeValue(d, []byte(`{"ts":"1772359231000"}`))
	var de *DecodeError
	if want := `time field "ts": "1772359231000" is not RFC 3339`; !errors.As(err, &de) || de.Reason != want {
		t.Errorf("a number in quotes under TimeRFC3339: %v, want %q", err, want)
	}
}
