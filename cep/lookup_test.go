package cep

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/enrich"
	"github.com/cepheus-cep/cepheus/event"
)

// logProfiles binds the customer lookup of rulesets/cards.cep to the
// profiles of the generated log's customers (genCardLog): customer ci
// lives in the country of logCities[i%6], where nine in ten of its
// cards' events happen, so away_from_home fires on some.
func logProfiles(t testing.TB, rs *Ruleset) Option {
	t.Helper()
	spec, err := lookupSpec(rs, "customer")
	if err != nil {
		t.Fatal(err)
	}
	tiers := []string{"low", "medium", "high"}
	recs := map[string][]event.Value{}
	for i := range logCustomers {
		// The last customer has no profile: the defaults.
		if i == logCustomers-1 {
			continue
		}
		recs[fmt.Sprintf("c%d", i)] = []event.Value{
			event.String(logCities[i%len(logCities)].country), event.String(tiers[i%3]), event.Int(int64(100 * i)),
		}
	}
	return WithLookups(map[string]LookupSource{"customer": enrich.NewMemSource(spec, recs)}, LookupOptions{Batch: 64})
}

// lookupRules has a lookup with a failure policy of each kind.
const lookupRules = `ruleset lk
event time ts
schema {
  ts: time
  card: string
  amount: float
}
lookup holder {
  key card
  fields {
    country: string default "?"
    limit: int default 1000
  }
  on failure open
}
lookup strict {
  key card
  fields {
    ok: bool default false
  }
  on failure retry 2 then closed
}
rule over_limit {
  key card
  pattern {
    begin a where amount > holder.limit
  }
  emit {
    country: a.holder.country
    ok: a.strict.ok
  }
}
`

// flakySource fails its first fails requests, then answers from recs.
type flakySource struct {
	fails int
	calls int
	recs  map[string][]event.Value
}

func (f *flakySource) Fetch(_ context.Context, keys []string) ([][]event.Value, error) {
	f.calls++
	if f.calls <= f.fails {
		return nil, errors.New("connection refused")
	}
	out := make([][]event.Value, len(keys))
	for i, k := range keys {
		out[i] = f.recs[k]
	}
	return out, nil
}
func (f *flakySource) Close() error   { return nil }
func (f *flakySource) String() string { return "flaky" }

// TestLookupPolicies: a backtest's lookups fill the events' fields (the
// defaults for an unknown key), and the failure policies apply: open
// gives the defaults, retry retries, closed sends the events to the dead
// letters with the reason and their lines.
func TestLookupPolicies(t *testing.T) {
	rs, err := CompileRuleset("lk.cep", []byte(lookupRules))
	if err != nil {
		t.Fatal(err)
	}
	input := `{"ts": 1000, "card": "k1", "amount": 600}
{"ts": 2000, "card": "k2", "amount": 600}
{"ts": 3000, "card": "k3", "amount": 1500}
`
	holderSpec, _ := lookupSpec(rs, "holder")
	holder := enrich.NewMemSource(holderSpec, map[string][]event.Value{
		"k1": {event.String("FR"), event.Int(500)},
		"k2": {event.String("DE"), event.Int(5000)},
	})
	run := func(strict LookupSource) (*Summary, string, string) {
		t.Helper()
		var alerts, dead bytes.Buffer
		dl := NewDeadLetterWriter(&dead)
		e, err := New(WithRuleset(rs), WithAlerts(&alerts), WithDeadLetters(dl),
			WithLookups(map[string]LookupSource{"holder": holder, "strict": strict}, LookupOptions{}))
		if err != nil {
			t.Fatal(err)
		}
		src, err := NewEventSource(strings.NewReader(input), "input")
		if err != nil {
			t.Fatal(err)
		}
		sum, err := e.Run(context.Background(), src)
		if err != nil {
			t.Fatal(err)
		}
		if err := dl.Close(); err != nil {
			t.Fatal(err)
		}
		return sum, alerts.String(), dead.String()
	}
	ok := map[string][]event.Value{"k1": {event.Bool(true)}, "k3": {event.Bool(true)}}

	// Two failures, two retries: the third attempt answers.
	sum, alerts, dead := run(&flakySource{fails: 2, recs: ok})
	if dead != "" || sum.Alerts != 2 ||
		!strings.Contains(alerts, `"key":{"card":"k1"}`) || !strings.Contains(alerts, `"emit":{"country":"FR","ok":true}`) ||
		!strings.Contains(alerts, `"key":{"card":"k3"}`) || !strings.Contains(alerts, `"emit":{"country":"?","ok":true}`) {
		t.Errorf("retried: %d alerts\n%s\ndead letters:\n%s", sum.Alerts, alerts, dead)
	}
	if len(sum.Lookups) != 2 || sum.Lookups[1].Failures != 2 || sum.Lookups[0].NotFound != 1 {
		t.Errorf("lookup stats %+v", sum.Lookups)
	}
	// The summary says why the attempts failed.
	if got := sum.Lookups[1].LastError; got != "connection refused" {
		t.Errorf("strict lookup's last error %q, want the source's", got)
	}

	// Every attempt fails: the strict lookup fails closed, each event a
	// dead letter at its line.
	sum, alerts, dead = run(&flakySource{fails: 100})
	if alerts != "" || sum.Dead != 3 || sum.Decoded != 0 {
		t.Errorf("failed closed: %d alerts, %d dead, %d decoded\n%s", sum.Alerts, sum.Dead, sum.Decoded, alerts)
	}
	for i, line := range strings.Split(strings.TrimSpace(dead), "\n") {
		if !strings.Contains(line, fmt.Sprintf(`"line":%d,`, i+1)) || !strings.Contains(line, `lookup strict`) || !strings.Contains(line, "connection refused") {
			t.Errorf("dead letter %d: %s", i+1, line)
		}
	}
	if st := sum.Lookups[1]; st.Rejected != 3 || st.Requests != 3 {
		t.Errorf("strict lookup stats %+v: want 3 rejected in 3 requests (one and two retries)", st)
	}

	// Unbound lookups: the defaults (the holder's limit of 1000 lets only
	// k3 through).
	e, err := New(WithRuleset(rs))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(e.UnboundLookups(), ","); got != "holder,strict" {
		t.Errorf("UnboundLookups = %q", got)
	}
	if _, err := New(WithRuleset(rs), WithLookups(map[string]LookupSource{"nope": holder}, LookupOptions{})); err == nil ||
		!strings.Contains(err.Error(), "lookup nope is bound, but ruleset lk declares no such lookup (it declares holder, strict)") {
		t.Errorf("a binding of an undeclared lookup: %v", err)
	}
}

// healthEngine is an engine of lookupRules with its two lookups (holder,
// strict) from memory sources, which the tests make fail.
func healthEngine(t *testing.T, o LookupOptions) (e *Engine, holder, strict *enrich.MemSource) {
	t.Helper()
	rs, err := CompileRuleset("lk.cep", []byte(lookupRules))
	if err != nil {
		t.Fatal(err)
	}
	holderSpec, _ := lookupSpec(rs, "holder")
	strictSpec, _ := lookupSpec(rs, "strict")
	holder = enrich.NewMemSource(holderSpec, map[string][]event.Value{"k1": {event.String("FR"), event.Int(500)}})
	strict = enrich.NewMemSource(strictSpec, map[string][]event.Value{"k1": {event.Bool(true)}})
	if e, err = New(WithRuleset(rs), WithLookups(map[string]LookupSource{"holder": holder, "strict": strict}, o)); err != nil {
		t.Fatal(err)
	}
	return e, holder, strict
}

// TestLookupHealthLog: a live job's log says when a lookup's source
// starts failing (a warning naming the lookup, the source, the error, the
// policy and what happens to the events), reminds of it at most once a
// minute while it goes on failing, and says when it answers again (how
// long it failed, how many events' lookups failed); a failure that
// begins within a minute of the last warning is counted in the next one,
// not warned of apart, or, if it goes on past that minute, warned of then
// with how long it has failed. No other line: at most one a state change.
func TestLookupHealthLog(t *testing.T) {
	e, holder, strict := healthEngine(t, LookupOptions{CacheSize: -1})
	var lines []string
	st, err := e.newEnrichStage(func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) })
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	var now time.Time
	st.now = func() time.Time { return now }
	card, _ := e.schema.Slot("card")
	// batch enriches two events at t0+at, the holder's source failing or
	// not, and returns the lines it logged.
	batch := func(at time.Duration, fail bool) []string {
		t.Helper()
		now = t0.Add(at)
		var err error
		if fail {
			err = errors.New("dial tcp 10.0.0.7:6379: connect: connection refused")
		}
		holder.SetFail(err)
		evs := make([]*event.Event, 2)
		for i := range evs {
			evs[i] = &event.Event{Fields: make([]event.Value, e.schema.Len())}
			evs[i].Fields[card] = event.String("k1")
		}
		n := len(lines)
		if err := st.enrich(context.Background(), evs, make([]string, len(evs))); err != nil {
			t.Fatal(err)
		}
		return lines[n:]
	}
	want := func(when string, got []string, prefixes ...string) {
		t.Helper()
		if len(got) != len(prefixes) {
			t.Fatalf("%s: lines %q, want %d", when, got, len(prefixes))
		}
		for i, p := range prefixes {
			if !strings.HasPrefix(got[i], p) {
				t.Errorf("%s: line %q, want %q...", when, got[i], p)
			}
		}
	}
	want("answering", batch(0, false))
	want("failing", batch(time.Second, true),
		"warning: lookup holder: its source mem fails: dial tcp 10.0.0.7:6379: connect: connection refused; on failure open: the events get the lookup's defaults until it answers again")
	for s := 2; s < 60; s++ {
		want("still failing", batch(time.Duration(s)*time.Second, true))
	}
	want("failing a minute on", batch(61*time.Second, true),
		"warning: lookup holder: its source mem still fails, for 1m0s: 120 events' lookups failed (they got the defaults); last error: dial tcp")
	want("answering again", batch(62*time.Second, false),
		"lookup holder: its source mem answers again, after 1m1s of failures: 120 events' lookups failed meanwhile (they got the defaults)")
	want("answering", batch(63*time.Second, false))
	// A short failure within a minute of the last warning: no line.
	want("failing shortly", batch(70*time.Second, true))
	want("answering after it", batch(71*time.Second, false))
	// A failure after the minute: warned of, with the short one.
	want("failing again", batch(130*time.Second, true),
		"warning: lookup holder: its source mem fails: dial tcp 10.0.0.7:6379: connect: connection refused; on failure open: the events get the lookup's defaults until it answers again; 2 events' lookups failed in shorter failures since the last warning")
	want("answering again", batch(131*time.Second, false),
		"lookup holder: its source mem answers again, after 1s of failures: 2 events' lookups failed meanwhile (they got the defaults)")
	// A lookup failing closed says so.
	strict.SetFail(errors.New("timeout"))
	want("strict failing", batch(200*time.Second, false),
		"warning: lookup strict: its source mem fails: timeout (3 attempts); on failure retry 2 then closed: the events go to the dead letters until it answers again")
	strict.SetFail(nil)
	want("strict answering", batch(201*time.Second, false),
		"lookup strict: its source mem answers again, after 1s of failures: 2 events' lookups failed meanwhile (they went to the dead letters)")
	// A failure that begins within a minute of the last warning and goes
	// on past that minute: its warning, a minute after the last, says
	// since when it fails and what it did meanwhile, not only that it
	// fails (as if it began then).
	want("failing", batch(300*time.Second, true), "warning: lookup holder: its source mem fails: dial tcp")
	want("answering again", batch(301*time.Second, false), "lookup holder: its source mem answers again, after 1s")
	want("failing within the minute", batch(310*time.Second, true))
	want("still failing within the minute", batch(330*time.Second, true))
	want("failing past the minute", batch(361*time.Second, true),
		"warning: lookup holder: its source mem fails, for 51s: 6 events' lookups failed (they got the defaults); last error: dial tcp 10.0.0.7:6379: connect: connection refused; on failure open: the events get the lookup's defaults until it answers again")
	want("answering after it", batch(362*time.Second, false),
		"lookup holder: its source mem answers again, after 52s of failures: 6 events' lookups failed meanwhile (they got the defaults)")
}

// TestLookupHealthRecords: a live job's log warns once when the keys a
// lookup's source answers stop having records (a source emptied while the
// job runs: its events get the defaults, and no request fails), after a
// run of keys whose length the rate of records seen before sets (a sparse
// lookup is not warned of by chance), and says when records come back; a
// source that has had no record from the start is warned of after the
// first 1,000 keys. Failures do not end such a run.
func TestLookupHealthRecords(t *testing.T) {
	var lines []string
	logf := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	now := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	// call observes a call that answered keys keys, notFound of them
	// without a record, and returns the lines it logged.
	call := func(h *lookupHealth, keys, notFound int) []string {
		n := len(lines)
		h.observe(enrich.Outcome{Answered: 1, Keys: keys, NotFound: notFound}, now, logf)
		return lines[n:]
	}
	want := func(when string, got []string, lines ...string) {
		t.Helper()
		if !slices.Equal(got, lines) {
			t.Errorf("%s: lines %q, want %q", when, got, lines)
		}
	}

	full := &lookupHealth{name: "user", source: "redis://127.0.0.1:6379"}
	want("records", call(full, 500, 10))
	want("no record for 99 keys", call(full, 99, 99))
	want("the 100th", call(full, 1, 1),
		"warning: lookup user: the last 100 keys looked up at its source redis://127.0.0.1:6379 had no record, where 98.0% of those before had one: their events get the lookup's defaults; was the source emptied, or its records moved (another Redis database, another file)?")
	want("still none", call(full, 5000, 5000))
	// A failure, then answers without a record: the same run.
	full.observe(enrich.Outcome{Failed: 1, Events: 3, Err: errors.New("connection refused")}, now, func(string, ...any) {})
	want("none after a failure", call(full, 10, 10),
		"lookup user: its source redis://127.0.0.1:6379 answers again, after 0s of failures: 3 events' lookups failed meanwhile (they got the defaults)")
	want("a record again", call(full, 3, 2),
		"lookup user: its source redis://127.0.0.1:6379 has records again, after 5,110 keys without one")
	want("records", call(full, 50, 0))

	// One key in 100 with a record: a run of 20 times that, 2,000, is
	// warned of, not one of 1,000.
	sparse := &lookupHealth{name: "addr", source: "mem"}
	want("sparse records", call(sparse, 10_000, 9_900))
	want("a sparse run", call(sparse, 1_999, 1_999))
	want("a sparse run's end", call(sparse, 1, 1),
		"warning: lookup addr: the last 2,000 keys looked up at its source mem had no record, where 1.0% of those before had one: their events get the lookup's defaults; was the source emptied, or its records moved (another Redis database, another file)?")

	never := &lookupHealth{name: "device", source: "file:devices.jsonl"}
	want("none yet", call(never, 999, 999))
	want("none of the first 1,000", call(never, 1, 1),
		"warning: lookup device: none of the 1,000 keys looked up at its source file:devices.jsonl had a record, and their events got the lookup's defaults: does the source hold this lookup's records (the file, the Redis database, ?format=json)? (A lookup most of whose keys have none by design, a list of known bad keys, may say so.)")
	want("still none", call(never, 2000, 2000))
	want("a first record", call(never, 1, 0),
		"lookup device: a key looked up at its source file:devices.jsonl had a record, the first after 3,000 keys without one")
}

// TestStreamLookupHealthLog: a live job whose lookup's source fails for
// a while, then answers, logs one warning and one line when it answers
// again, whatever the number of batches in between.
func TestStreamLookupHealthLog(t *testing.T) {
	e, holder, _ := healthEngine(t, LookupOptions{Batch: 4})
	events := filepath.Join(t.TempDir(), "events.jsonl")
	write := func(from, n int) int64 {
		t.Helper()
		f, err := os.OpenFile(events, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for i := from; i < from+n; i++ {
			fmt.Fprintf(f, `{"ts": %d, "card": "k%d", "amount": 600}`+"\n", 1000*(i+1), i%7)
		}
		return int64(from + n)
	}
	holder.SetFail(errors.New("connection refused"))
	read := write(0, 40)
	f := follow(t, e, newStreamDirs(t).config(events))
	m := f.m
	waitMonitor(t, m, read)
	for i := 0; i < 5; i++ { // more batches failing
		read = write(int(read), 8)
		waitMonitor(t, m, read)
	}
	holder.SetFail(nil)
	read = write(int(read), 40)
	waitMonitor(t, m, read)
	f.stop()
	var got []string
	for _, l := range f.lines() {
		if strings.Contains(l, "lookup ") {
			got = append(got, l)
		}
	}
	t.Logf("the lookup's lines:\n%s", strings.Join(got, "\n"))
	if len(got) != 2 || !strings.HasPrefix(got[0], "warning: lookup holder: its source mem fails: connection refused; on failure open") ||
		!strings.HasPrefix(got[1], "lookup holder: its source mem answers again, after ") {
		t.Errorf("the lookup's lines: %q, want a warning and a line when it answers again", got)
	}
	if st := m.Snapshot().Lookups; len(st) != 2 || st[0].Defaulted == 0 || st[0].LastError != "connection refused" {
		t.Errorf("lookup counters %+v: want events defaulted, and why", st)
	}
}

// TestLookupFileKeyNumbers: a number in a lookup file's key member gives
// the record the key of the events that carry the same number in the key
// field, whatever the field's declared type (int, float, none) and however
// the number is written; a number that an int key field refuses is an
// error of the file.
func TestLookupFileKeyNumbers(t *testing.T) {
	nums := []string{"3", "3.0", "3e0", "0.3e1", "-0", "-0.0", "1000000", "1e6", "1000000.0", "1234567", "1.5",
		"9007199254740993", "9007199254740993.0", "1e21", "12345678901234567890", "-9223372036854775808"}
	for _, typ := range []string{"int", "float", ""} {
		schema := "schema {\n  ts: time\n  id: " + typ + "\n}\n"
		if typ == "" {
			schema = "" // inferred: id has no declared type
		}
		rs, err := CompileRuleset("k.cep", []byte("ruleset k\nevent time ts\n"+schema+
			"lookup acct {\n  key id\n  fields {\n    v: int default 0\n  }\n}\n"+
			"rule r {\n  key id\n  pattern {\n    begin a where acct.v > 0\n  }\n}\n"))
		if err != nil {
			t.Fatal(err)
		}
		slots := rs.Lookups[0].KeySlots
		for _, num := range nums {
			path := filepath.Join(t.TempDir(), "acct.jsonl")
			if err := os.WriteFile(path, []byte(`{"id":`+num+`,"v":1}`+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			src, fileErr := OpenLookupSource(rs, "acct", "file:"+path, RedisAuth{})
			ev, evErr := rs.DecodeEvent([]byte(`{"ts":1,"id":` + num + `}`))
			switch {
			case evErr != nil && fileErr != nil:
				continue // refused by both
			case evErr != nil || fileErr != nil:
				t.Errorf("id %s %s: the event's error %v, the file's %v; want both or neither", typ, num, evErr, fileErr)
				continue
			}
			key, _ := enrich.KeyOf(ev, slots, nil)
			recs, err := src.Fetch(t.Context(), []string{key})
			if err != nil {
				t.Fatal(err)
			}
			if recs[0] == nil {
				t.Errorf("id %s %s: the event's key %q finds no record of the file", typ, num, key)
			}
		}
	}
}

// TestLookupFileKeyTimes: a lookup keyed by a time field finds, from a
// record whose key member is an RFC 3339 string or a number of epoch
// milliseconds, the events that carry that instant however they write it.
func TestLookupFileKeyTimes(t *testing.T) {
	rs, err := CompileRuleset("k.cep", []byte("ruleset k\nevent time ts\nschema {\n  ts: time\n  day: time\n}\n"+
		"lookup cal {\n  key day\n  fields {\n    v: int default 0\n  }\n}\n"+
		"rule r {\n  pattern {\n    begin a where cal.v > 0\n  }\n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	l := rs.Lookups[0]
	if !slices.Equal(l.KeyTimes, []bool{true}) {
		t.Fatalf("KeyTimes %v, want [true]", l.KeyTimes)
	}
	same := []string{`"2026-03-01T00:00:00Z"`, `"2026-03-01T01:00:00+01:00"`, `"2026-03-01T00:00:00.000Z"`, `1772323200000`, `1772323200000.0`}
	for _, member := range same {
		path := filepath.Join(t.TempDir(), "cal.jsonl")
		if err := os.WriteFile(path, []byte(`{"day":`+member+`,"v":1}`+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		src, err := OpenLookupSource(rs, "cal", "file:"+path, RedisAuth{})
		if err != nil {
			t.Fatalf("day %s: %v", member, err)
		}
		for _, other := range same {
			ev, err := rs.DecodeEvent([]byte(`{"ts":1,"day":` + other + `}`))
			if err != nil {
				t.Fatalf("event with day %s: %v", other, err)
			}
			key, _ := enrich.KeyOf(ev, l.KeySlots, nil)
			recs, err := src.Fetch(t.Context(), []string{key})
			if err != nil {
				t.Fatal(err)
			}
			if recs[0] == nil {
				t.Errorf("a record of day %s: the event of day %s (key %q) finds none", member, other, key)
			}
		}
	}
	path := filepath.Join(t.TempDir(), "cal.jsonl")
	if err := os.WriteFile(path, []byte(`{"day":"March 1st","v":1}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenLookupSource(rs, "cal", "file:"+path, RedisAuth{}); err == nil || !strings.Contains(err.Error(), `key field day: want an RFC 3339 time, got "March 1st"`) {
		t.Errorf("a key member that is no time: %v, want an error naming the key field", err)
	}
}

// TestQuantity: a count in a lookup's log line has its thousands
// separated, and the noun agrees with it.
func TestQuantity(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 events", 1: "1 event", 999: "999 events", 1000: "1,000 events", 300000: "300,000 events",
		1234567: "1,234,567 events", -1500: "-1,500 events",
	} {
		if got := quantity(n, "event", "events"); got != want {
			t.Errorf("quantity(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestFailingFor: how long a source has failed reads in seconds from 10
// seconds on (a reminder a minute on said "1m0.087s"), in milliseconds
// below.
func TestFailingFor(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{60*time.Second + 87*time.Millisecond, "1m0s"},
		{3*time.Minute + 700*time.Millisecond, "3m1s"},
		{10 * time.Second, "10s"},
		{9*time.Second + 870400*time.Microsecond, "9.87s"},
		{350*time.Millisecond + 400*time.Microsecond, "350ms"},
	} {
		if got := failingFor(c.d).String(); got != c.want {
			t.Errorf("failingFor(%v) = %s, want %s", c.d, got, c.want)
		}
	}
}

// TestOpenLookupSourceTarget: a source that is neither file:PATH nor a
// Redis URL (a bare path, forgetting file:) is refused with what a source
// is; it was read as a Redis URL, and the error said "redis URL: scheme
// "", want redis or rediss".
func TestOpenLookupSourceTarget(t *testing.T) {
	rs := loadRules(t, `ruleset t
event time ts
lookup customer {
  key customer_id
  fields {
    home_country: string default ""
  }
}
rule r {
  key customer_id
  pattern {
    begin a where customer.home_country == "FR"
  }
}
`)
	path := filepath.Join(t.TempDir(), "customer.jsonl")
	if err := os.WriteFile(path, []byte(`{"customer_id":"u1","home_country":"FR"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{path, "localhost:6379", "http://u:secret@localhost"} {
		_, err := OpenLookupSource(rs, "customer", target, RedisAuth{})
		if err == nil || !strings.Contains(err.Error(), "want file:PATH, redis://HOST:PORT or rediss://HOST:PORT") || strings.Contains(err.Error(), "secret") {
			t.Errorf("source %s: %v, want an error saying what a source is (no password)", target, err)
		}
	}
	src, err := OpenLookupSource(rs, "customer", "file:"+path, RedisAuth{})
	if err != nil {
		t.Fatal(err)
	}
	src.Close()
}
