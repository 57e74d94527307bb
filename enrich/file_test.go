package enrich

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/event"
)

// fileSpec is a lookup with a field of each kind.
func fileSpec() Spec {
	return Spec{
		Name:      "customer",
		KeyFields: []string{"customer_id"},
		Fields: []Field{
			{Name: "country", Kind: event.KindString},
			{Name: "tenure", Kind: event.KindInt},
			{Name: "score", Kind: event.KindFloat},
			{Name: "vip", Kind: event.KindBool},
			{Name: "since", Kind: event.KindInt, Time: true},
		},
	}
}

// writeFile writes content to name in a temporary directory, gzipped when
// name ends in .gz, and returns its path.
func writeFile(t testing.TB, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	data := []byte(content)
	if strings.HasSuffix(name, ".gz") {
		var b strings.Builder
		zw := gzip.NewWriter(&b)
		zw.Write(data)
		zw.Close()
		data = []byte(b.String())
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestOpenFile(t *testing.T) {
	const content = `{"customer_id":"C1","country":"DE","tenure":400,"score":0.5,"vip":true,"since":"2024-01-02T03:04:05.678Z","other":{"x":[1]}}
{"customer_id":42,"tenure":"12","score":3,"since":1700000000000}

{"customer_id":1.50,"country":null,"tenure":-7}
  {"customer_id":true,"vip":false,"since":"2024-01-02T04:04:05.678+01:00"}
{"customer_id":"C1","country":"FR"}
{"customer_id":"","score":-1e-3}
`
	since := time.Date(2024, 1, 2, 3, 4, 5, 678e6, time.UTC).UnixMilli()
	want := map[string][]event.Value{
		// The later line of C1 replaces the first, whole.
		"C1":   {event.String("FR"), event.Null, event.Null, event.Null, event.Null},
		"42":   {event.Null, event.Int(12), event.Float(3), event.Null, event.Int(1_700_000_000_000)},
		"1.5":  {event.Null, event.Int(-7), event.Null, event.Null, event.Null},
		"true": {event.Null, event.Null, event.Null, event.Bool(false), event.Int(since)},
		"":     {event.Null, event.Null, event.Float(-0.001), event.Null, event.Null},
	}
	for _, name := range []string{"customers.jsonl", "customers.jsonl.gz"} {
		t.Run(name, func(t *testing.T) {
			fs, err := OpenFile(fileSpec(), writeFile(t, name, content))
			if err != nil {
				t.Fatal(err)
			}
			if fs.Len() != len(want) {
				t.Errorf("Len() = %d, want %d", fs.Len(), len(want))
			}
			keys := []string{"C1", "42", "1.5", "true", "", "C9"}
			got, err := fs.Fetch(t.Context(), keys)
			if err != nil {
				t.Fatal(err)
			}
			for i, k := range keys {
				if !equalRecords(got[i], want[k]) {
					t.Errorf("key %q: %s, want %s", k, fmtRecord(got[i]), fmtRecord(want[k]))
				}
			}
		})
	}
}

func TestOpenFileFirstRecordOfC1(t *testing.T) {
	// Without the second line of C1, the first line's every conversion
	// shows.
	path := writeFile(t, "c.jsonl", `{"customer_id":"C1","country":"DE","tenure":400,"score":0.5,"vip":true,"since":"2024-01-02T03:04:05.678Z"}`)
	fs, err := OpenFile(fileSpec(), path)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := fs.Fetch(t.Context(), []string{"C1"})
	want := []event.Value{event.String("DE"), event.Int(400), event.Float(0.5), event.Bool(true),
		event.Int(time.Date(2024, 1, 2, 3, 4, 5, 678e6, time.UTC).UnixMilli())}
	if !equalRecords(got[0], want) {
		t.Errorf("C1: %s, want %s", fmtRecord(got[0]), fmtRecord(want))
	}
}

// TestOpenFileByteOrderMark: a lookup file that starts with a UTF-8 byte
// order mark (Windows tools write one) is read as without it, plain and
// gzipped, as the event sources read theirs. It failed on line 1 with
// "not a JSON object", the error printing the invisible mark.
func TestOpenFileByteOrderMark(t *testing.T) {
	for _, name := range []string{"bom.jsonl", "bom.jsonl.gz"} {
		fs, err := OpenFile(fileSpec(), writeFile(t, name, "\ufeff"+`{"customer_id":"C1","country":"DE"}`+"\n"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := fs.Fetch(t.Context(), []string{"C1"})
		if err != nil || len(got[0]) == 0 {
			t.Fatalf("%s: C1 %v, %v; want its record", name, got, err)
		}
		if s, ok := got[0][0].AsString(); !ok || s != "DE" {
			t.Errorf("%s: C1 %v, %v; want its country DE", name, got, err)
		}
	}
	// Only at the start: elsewhere it is a line that is not JSON.
	_, err := OpenFile(fileSpec(), writeFile(t, "inner.jsonl", `{"customer_id":"C1"}`+"\n\ufeff"+`{"customer_id":"C2"}`+"\n"))
	if err == nil || !strings.Contains(err.Error(), "inner.jsonl:2:") {
		t.Errorf("a mark on line 2: %v, want an error of line 2", err)
	}
}

func TestOpenFileKeyOfSeveralFields(t *testing.T) {
	spec := fileSpec()
	spec.KeyFields = []string{"region", "customer_id"}
	path := writeFile(t, "c.jsonl", `{"region":"EU","customer_id":7,"country":"DE"}`+"\n")
	fs, err := OpenFile(spec, path)
	if err != nil {
		t.Fatal(err)
	}
	ev := &event.Event{Fields: []event.Value{event.String("EU"), event.Int(7)}}
	key, _ := KeyOf(ev, []int{0, 1}, nil)
	got, _ := fs.Fetch(t.Context(), []string{key})
	if got[0] == nil || !got[0][0].Equal(event.String("DE")) {
		t.Errorf("the event's key %q finds %s, want the file's record", key, fmtRecord(got[0]))
	}
}

// TestKeyPartsEscaped: the parts of a key of several fields are escaped,
// so that ("a|b", "c") and ("a", "b|c") are two keys, each finding its
// own record in a file; a part with neither "|" nor a backslash, and a key
// of one part, are as they were.
func TestKeyPartsEscaped(t *testing.T) {
	spec := fileSpec()
	spec.KeyFields = []string{"region", "customer_id"}
	path := writeFile(t, "c.jsonl", `{"region":"a|b","customer_id":"c","country":"DE"}
{"region":"a","customer_id":"b|c","country":"FR"}
{"region":"a\\","customer_id":"|c","country":"IT"}
{"region":"a","customer_id":"c","country":"ES"}
`)
	fs, err := OpenFile(spec, path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ region, id, key, country string }{
		{"a|b", "c", `a\|b|c`, "DE"},
		{"a", "b|c", `a|b\|c`, "FR"},
		{`a\`, "|c", `a\\|\|c`, "IT"},
		{"a", "c", "a|c", "ES"},
	} {
		ev := &event.Event{Fields: []event.Value{event.String(tc.region), event.String(tc.id)}}
		key, _ := KeyOf(ev, []int{0, 1}, nil)
		got, _ := fs.Fetch(t.Context(), []string{key})
		if key != tc.key || got[0] == nil || !got[0][0].Equal(event.String(tc.country)) {
			t.Errorf("(%q, %q): key %q finds %s; want key %q and the record of %s", tc.region, tc.id, key, fmtRecord(got[0]), tc.key, tc.country)
		}
	}
	ev := &event.Event{Fields: []event.Value{event.String("a|b")}}
	if key, _ := KeyOf(ev, []int{0}, nil); key != "a|b" {
		t.Errorf("a key of one part: %q, want it as it is", key)
	}
}

// TestOpenFileDuplicates: the lines that repeat the key of an earlier line
// are counted, the first named; the last record of a key is the one kept.
func TestOpenFileDuplicates(t *testing.T) {
	spec := fileSpec()
	spec.KeyFields = []string{"region", "customer_id"}
	path := writeFile(t, "c.jsonl", `{"region":"EU","customer_id":1,"country":"DE"}
{"region":"EU","customer_id":2}

{"region":"US","customer_id":1}
{"region":"EU","customer_id":1.0,"country":"FR"}
{"region":"EU","customer_id":2,"country":"IT"}
{"region":"EU","customer_id":1,"country":"ES"}
`)
	fs, err := OpenFile(spec, path)
	if err != nil {
		t.Fatal(err)
	}
	want := Duplicates{Count: 3, Path: path, Line: 5, Key: "EU|1"}
	if got := fs.Duplicates(); got != want {
		t.Errorf("Duplicates() = %+v, want %+v", got, want)
	}
	if fs.Len() != 3 {
		t.Errorf("Len() = %d, want 3", fs.Len())
	}
	got, _ := fs.Fetch(t.Context(), []string{"EU|1", "EU|2"})
	if !got[0][0].Equal(event.String("ES")) || !got[1][0].Equal(event.String("IT")) {
		t.Errorf("records %s and %s, want the last of each key (ES, IT)", fmtRecord(got[0]), fmtRecord(got[1]))
	}

	fs, err = OpenFile(spec, writeFile(t, "c.jsonl", `{"region":"EU","customer_id":1}`+"\n"+`{"region":"US","customer_id":1}`+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := fs.Duplicates(); got != (Duplicates{}) {
		t.Errorf("a file without duplicates: Duplicates() = %+v, want none", got)
	}
}

// TestOpenFileNumbers: a number for an int or time field follows the rule of
// events (docs/decisions.md, "JSON events"): any whole number in int64
// range, however it is written; an int field also takes a string of an
// integer.
func TestOpenFileNumbers(t *testing.T) {
	for _, tc := range []struct {
		tenure, since string // the members' JSON
		want          []event.Value
	}{
		{"3", "1700000000000", []event.Value{event.Int(3), event.Int(1_700_000_000_000)}},
		{"3.0", "1700000000000.0", []event.Value{event.Int(3), event.Int(1_700_000_000_000)}},
		{"3e0", "1.7e12", []event.Value{event.Int(3), event.Int(1_700_000_000_000)}},
		{"0.3e1", "17000000000000e-1", []event.Value{event.Int(3), event.Int(1_700_000_000_000)}},
		{"-0.0", "0.0", []event.Value{event.Int(0), event.Int(0)}},
		{"9.223372036854775807e18", "-1e3", []event.Value{event.Int(1<<63 - 1), event.Int(-1000)}},
		{`"12"`, `"1970-01-01T00:00:01Z"`, []event.Value{event.Int(12), event.Int(1000)}},
		{`"-12"`, "null", []event.Value{event.Int(-12), event.Null}},
	} {
		line := fmt.Sprintf(`{"customer_id":"C1","tenure":%s,"since":%s}`, tc.tenure, tc.since)
		fs, err := OpenFile(fileSpec(), writeFile(t, "c.jsonl", line))
		if err != nil {
			t.Errorf("%s: %v", line, err)
			continue
		}
		got, _ := fs.Fetch(t.Context(), []string{"C1"})
		if rec := got[0]; rec == nil || !rec[1].Equal(tc.want[0]) || !rec[4].Equal(tc.want[1]) {
			t.Errorf("%s: %s, want tenure %s and since %s", line, fmtRecord(rec), tc.want[0], tc.want[1])
		}
	}
}

// TestOpenFileKeyNumbers: a number in a key member makes the key part of
// the value the event decoder gives the key field of the declared kind
// (Spec.KeyKinds), which KeyOf builds: an int in decimal, a float as
// strconv 'g' -1 but a whole number in int64 range as that int; for an
// undeclared kind, an int when the number has no fraction or exponent and
// fits int64, else a float.
func TestOpenFileKeyNumbers(t *testing.T) {
	for _, tc := range []struct {
		kind   event.Kind
		member string
		want   string
	}{
		{event.KindInt, "3", "3"},
		{event.KindInt, "3.0", "3"},
		{event.KindInt, "0.3e1", "3"},
		{event.KindInt, "1e6", "1000000"},
		{event.KindInt, "1000000.0", "1000000"},
		{event.KindInt, "9007199254740993.0", "9007199254740993"},
		{event.KindInt, "-0.0", "0"},
		{event.KindInt, `"3.0"`, "3.0"}, // a string is the key part as it is
		{event.KindFloat, "3", "3"},
		{event.KindFloat, "1000000", "1000000"},
		{event.KindFloat, "1e6", "1000000"},
		{event.KindFloat, "9007199254740993", "9007199254740992"}, // the nearest float64
		{event.KindFloat, "1.50", "1.5"},
		{event.KindFloat, "1.5e-7", "1.5e-07"},
		{event.KindFloat, "1e19", "1e+19"}, // beyond int64
		{event.KindFloat, "-0", "0"},
		{event.KindNull, "1000000", "1000000"},
		{event.KindNull, "1e6", "1000000"},
		{event.KindNull, "3.0", "3"},
		{event.KindNull, "12345678901234567890.0", "1.2345678901234567e+19"},
		{event.KindString, "42", "42"},
		{event.KindNull, "true", "true"},
	} {
		spec := fileSpec()
		spec.KeyKinds = []event.Kind{tc.kind}
		line := `{"customer_id":` + tc.member + `,"country":"DE"}`
		fs, err := OpenFile(spec, writeFile(t, "c.jsonl", line))
		if err != nil {
			t.Errorf("key of kind %s, %s: %v", tc.kind, line, err)
			continue
		}
		got, _ := fs.Fetch(t.Context(), []string{tc.want})
		if got[0] == nil {
			t.Errorf("key of kind %s, %s: no record under key %q", tc.kind, line, tc.want)
		}
	}
	for _, tc := range []struct {
		kind   event.Kind
		member string
		want   string // the error after "PATH:1: "
	}{
		{event.KindInt, "1.5", "key field customer_id: want an integer (the event field is an int), got 1.5"},
		{event.KindInt, "1e19", "key field customer_id: want an integer (the event field is an int), got 1e19"},
		{event.KindFloat, "1e400", "key field customer_id: number 1e400 is out of range"},
	} {
		spec := fileSpec()
		spec.KeyKinds = []event.Kind{tc.kind}
		path := writeFile(t, "c.jsonl", `{"customer_id":`+tc.member+`}`)
		_, err := OpenFile(spec, path)
		if want := "enrich: lookup customer: " + path + ":1: " + tc.want; err == nil || err.Error() != want {
			t.Errorf("key of kind %s, member %s:\n got  %v\n want %s", tc.kind, tc.member, err, want)
		}
	}
}

func TestOpenFileErrors(t *testing.T) {
	for _, tc := range []struct {
		line string
		want string // after "enrich: lookup customer: PATH:3: "
	}{
		{`{"customer_id":"C1","tenure":1.5}`, "field tenure: want an integer, got 1.5"},
		{`{"customer_id":"C1","tenure":"x"}`, `field tenure: want an integer, got "x"`},
		{`{"customer_id":"C1","tenure":99999999999999999999}`, "field tenure: want an integer, got 99999999999999999999"},
		{`{"customer_id":"C1","tenure":1e19}`, "field tenure: want an integer, got 1e19"},
		{`{"customer_id":"C1","tenure":3.0000000000000000001}`, "field tenure: want an integer, got 3.0000000000000000001"},
		{`{"customer_id":"C1","tenure":"3.0"}`, `field tenure: want an integer, got "3.0"`},
		{`{"customer_id":"C1","tenure":true}`, "field tenure: want an integer, got true"},
		{`{"customer_id":"C1","score":"1"}`, `field score: want a number, got "1"`},
		{`{"customer_id":"C1","country":5}`, "field country: want a string, got 5"},
		{`{"customer_id":"C1","vip":"yes"}`, `field vip: want true or false, got "yes"`},
		{`{"customer_id":"C1","since":"yesterday"}`, `field since: want an RFC 3339 time, got "yesterday"`},
		{`{"customer_id":"C1","since":1.5}`, "field since: want an RFC 3339 string or an integer of epoch milliseconds, got 1.5"},
		{`{"customer_id":"C1","since":1e19}`, "field since: want an RFC 3339 string or an integer of epoch milliseconds, got 1e19"},
		{`{"customer_id":"C1","country":["` + strings.Repeat("x", 50) + `"]}`, "field country: want a string, got an array"},
		{`{"tenure":1}`, "key field customer_id: missing"},
		{`{"customer_id":null}`, "key field customer_id: null (a record needs its whole key)"},
		{`{"customer_id":12345678901234567890}`, "key field customer_id: the whole number 12345678901234567890 is beyond int64, and a float would not keep its digits: write it as a string (an id)"},
		{`{"customer_id":{"a":1}}`, `key field customer_id: want a string, number or bool, got {"a":1}`},
		{`[1,2]`, "not a JSON object: [1,2]"},
		{`{"customer_id":"C1"`, "not a JSON object: unexpected end of JSON input"},
		{`{"customer_id":"C1"} x`, "not a JSON object: invalid character 'x' after top-level value"},
	} {
		// A good line and a blank one before: the bad one is line 3.
		path := writeFile(t, "c.jsonl", `{"customer_id":"C0"}`+"\n\n"+tc.line+"\n")
		_, err := OpenFile(fileSpec(), path)
		want := "enrich: lookup customer: " + path + ":3: " + tc.want
		if err == nil || err.Error() != want {
			t.Errorf("line %s:\n got  %v\n want %s", tc.line, err, want)
		}
	}
}

// TestOpenFileTruncatedGzip: a .gz file cut in the middle of a line is
// reported as a truncated file, not as a bad line.
func TestOpenFileTruncatedGzip(t *testing.T) {
	var plain bytes.Buffer
	for i := range 2000 {
		fmt.Fprintf(&plain, `{"customer_id":"C%d","home_country":"DE","tenure_days":%d}`+"\n", i, i)
	}
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	zw.Write(plain.Bytes())
	zw.Close()
	path := filepath.Join(t.TempDir(), "c.jsonl.gz")
	if err := os.WriteFile(path, zb.Bytes()[:zb.Len()/2], 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := OpenFile(fileSpec(), path)
	if err == nil || !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "a truncated .gz file?") {
		t.Errorf("OpenFile of a truncated .gz file: %v, want an unexpected EOF that says so", err)
	}
	if strings.Contains(err.Error(), "not a JSON object") {
		t.Errorf("OpenFile of a truncated .gz file: %v, want no line blamed and one hint", err)
	}
}

func TestOpenFileMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "none.jsonl")
	_, err := OpenFile(fileSpec(), path)
	if err == nil || !strings.Contains(err.Error(), path) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("OpenFile of a missing file: %v, want a not-exist error naming %s", err, path)
	}
	spec := fileSpec()
	spec.Fields = nil
	if _, err := OpenFile(spec, path); err == nil || err.Error() != "enrich: lookup customer: no fields" {
		t.Errorf("OpenFile of a spec without fields: %v", err)
	}
}

func TestOpenFileLookup(t *testing.T) {
	// A Lookup over a file: the file's nulls get the defaults.
	path := writeFile(t, "c.jsonl", `{"customer_id":"C1","home_country":"DE","tenure_days":"30"}`+"\n"+
		`{"customer_id":"C2","risk_tier":"high","home_country":null}`+"\n")
	fs, err := OpenFile(customerSpec(), path)
	if err != nil {
		t.Fatal(err)
	}
	l := newLookup(t, customerConfig(fs))
	evs := events("C1", "C2", "C3")
	enrich(t, l, evs)
	checkFields(t, evs,
		[]event.Value{event.String("DE"), event.String("unknown"), event.Int(30)},
		[]event.Value{event.String(""), event.String("high"), event.Int(0)},
		defaultsWant)
	if got := fs.String(); got != "file "+path {
		t.Errorf("String() = %q", got)
	}
}

// TestOpenFileFieldsMissing: the fields no record gives (missing or null in
// every line) are named, in declaration order; a field one line gives is
// not, nor any of an empty file's.
func TestOpenFileFieldsMissing(t *testing.T) {
	path := writeFile(t, "c.jsonl", `{"customer_id":"C1","Country":"DE","tenure":4,"vip":null}
{"customer_id":"C2","score":0.5,"since":null}
`)
	f, err := OpenFile(fileSpec(), path)
	if err != nil {
		t.Fatal(err)
	}
	fields, members := f.Missing()
	if got := strings.Join(fields, ","); got != "country,vip,since" {
		t.Errorf("Missing() = %q, want country,vip,since", got)
	}
	// The first line's members, to find the one meant (Country).
	if got := strings.Join(members, ","); got != "Country,customer_id,tenure,vip" {
		t.Errorf("Missing()'s members = %q, want the first line's, sorted", got)
	}
	empty, err := OpenFile(fileSpec(), writeFile(t, "e.jsonl", "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := empty.Missing(); len(m) != 0 {
		t.Errorf("an empty file's Missing() = %q, want none", m)
	}
}
