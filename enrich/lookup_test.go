package enrich

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cepheus-cep/cepheus/event"
)

func TestEnrichValuesAndDefaults(t *testing.T) {
	src := NewMemSource(customerSpec(), customers())
	l := newLookup(t, customerConfig(src))
	// C2's null risk tier gets the default; C9 has no record; the null key
	// gets the defaults without a request.
	evs := events("C1", "C2", "C9", "", "C3")
	reasons := enrich(t, l, evs)
	checkFields(t, evs, c1Want, c2Want, defaultsWant, defaultsWant, c3Want)
	if slices.ContainsFunc(reasons, func(r string) bool { return r != "" }) {
		t.Errorf("reasons %q, want none", reasons)
	}
	checkStats(t, l.Stats(), Stats{Misses: 4, NotFound: 1, Requests: 1})
	if n := src.Fetches(); n != 1 {
		t.Errorf("%d fetches, want 1", n)
	}
}

func TestEnrichNullKeyPart(t *testing.T) {
	spec := customerSpec()
	spec.KeyFields = []string{"region", "customer_id"}
	src := newRecordingSource(map[string][]event.Value{"EU|C1": customers()["C1"]})
	l := newLookup(t, LookupConfig{Spec: spec, KeySlots: []int{4, slotID}, Slots: customerSlots, Source: src})
	mk := func(region, id event.Value) *event.Event {
		return &event.Event{Fields: []event.Value{id, event.Null, event.Null, event.Null, region}}
	}
	evs := []*event.Event{
		mk(event.String("EU"), event.String("C1")),
		mk(event.Null, event.String("C1")),
		mk(event.String("EU"), event.Null),
	}
	enrich(t, l, evs)
	checkFields(t, evs, c1Want, defaultsWant, defaultsWant)
	if got, want := src.requested(), [][]string{{"EU|C1"}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("requests %q, want %q (no request for a null key part)", got, want)
	}
}

func TestEnrichUnbound(t *testing.T) {
	l := newLookup(t, customerConfig(nil))
	if l.Bound() {
		t.Error("Bound() with no source")
	}
	evs := events("C1", "")
	reasons := []string{"", "rejected before"}
	if err := l.Enrich(t.Context(), evs, reasons); err != nil {
		t.Fatal(err)
	}
	checkFields(t, evs[:1], defaultsWant)
	if got := lookupFields(evs[1]); !equalRecords(got, []event.Value{event.Null, event.Null, event.Null}) {
		t.Errorf("a rejected event was written: %s", fmtRecord(got))
	}
	checkStats(t, l.Stats(), Stats{})
}

func TestEnrichSkipsRejected(t *testing.T) {
	src := newRecordingSource(customers())
	l := newLookup(t, customerConfig(src))
	evs := events("C1", "C3")
	reasons := []string{"bad line", ""}
	if err := l.Enrich(t.Context(), evs, reasons); err != nil {
		t.Fatal(err)
	}
	if reasons[0] != "bad line" {
		t.Errorf("reason of the rejected event changed to %q", reasons[0])
	}
	if got := lookupFields(evs[0]); !equalRecords(got, []event.Value{event.Null, event.Null, event.Null}) {
		t.Errorf("a rejected event was written: %s", fmtRecord(got))
	}
	checkFields(t, evs[1:], c3Want)
	if got := src.requested(); len(got) != 1 || !slices.Equal(got[0], []string{"C3"}) {
		t.Errorf("requests %q, want [[C3]]", got)
	}
}

func TestEnrichCacheHitsAndNotFound(t *testing.T) {
	src := newRecordingSource(customers())
	l := newLookup(t, customerConfig(src))

	evs := events("C1", "C1", "C9")
	enrich(t, l, evs)
	checkFields(t, evs, c1Want, c1Want, defaultsWant)
	checkStats(t, l.Stats(), Stats{Misses: 2, NotFound: 1, Requests: 1})

	// C1 and the absent C9 come from the cache (each key counts once per
	// batch); C3 is fetched alone.
	evs = events("C9", "C1", "C3", "C1")
	enrich(t, l, evs)
	checkFields(t, evs, defaultsWant, c1Want, c3Want, c1Want)
	checkStats(t, l.Stats(), Stats{Hits: 2, Misses: 3, NotFound: 1, Requests: 2})
	want := [][]string{{"C1", "C9"}, {"C3"}}
	if got := src.requested(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("requests %q, want %q", got, want)
	}
}

func TestEnrichCacheTTL(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	records := customers()
	src := newRecordingSource(nil)
	// The source answers with C1's current record, so that a refetch shows.
	var mu sync.Mutex
	src.answer = func(_ context.Context, _ int, keys []string) ([][]event.Value, error) {
		mu.Lock()
		defer mu.Unlock()
		return table(records).fetch(keys), nil
	}
	cfg := customerConfig(src)
	cfg.CacheTTL = time.Minute
	cfg.Now = func() time.Time { return now }
	l := newLookup(t, cfg)

	enrich(t, l, events("C1"))
	mu.Lock()
	records = map[string][]event.Value{"C1": customers()["C3"]}
	mu.Unlock()

	now = now.Add(time.Minute - time.Nanosecond)
	evs := events("C1")
	enrich(t, l, evs)
	checkFields(t, evs, c1Want)
	if n := len(src.requested()); n != 1 {
		t.Fatalf("%d requests before the TTL, want 1", n)
	}

	now = now.Add(time.Nanosecond)
	evs = events("C1")
	enrich(t, l, evs)
	checkFields(t, evs, c3Want)
	checkStats(t, l.Stats(), Stats{Hits: 1, Misses: 2, Requests: 2})
}

func TestEnrichCacheSizeBound(t *testing.T) {
	src := newRecordingSource(customers())
	cfg := customerConfig(src)
	cfg.CacheSize = 2
	l := newLookup(t, cfg)
	for _, batch := range [][]string{
		{"C1", "C2"}, // both fetched
		{"C1"},       // a hit: C2 is now the least recently used
		{"C3"},       // fetched, evicting C2
		{"C1", "C3"}, // hits
		{"C2"},       // fetched again, evicting C1
		{"C1"},       // fetched again
	} {
		enrich(t, l, events(batch...))
	}
	want := [][]string{{"C1", "C2"}, {"C3"}, {"C2"}, {"C1"}}
	if got := src.requested(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("requests %q, want %q", got, want)
	}
	if n := l.cache.len(); n != 2 {
		t.Errorf("cache holds %d entries, want 2", n)
	}
	checkStats(t, l.Stats(), Stats{Hits: 3, Misses: 5, Requests: 4})
}

func TestEnrichNoCache(t *testing.T) {
	src := newRecordingSource(customers())
	cfg := customerConfig(src)
	cfg.CacheSize = -1
	l := newLookup(t, cfg)
	for range 3 {
		evs := events("C1", "C1", "C9")
		enrich(t, l, evs)
		checkFields(t, evs, c1Want, c1Want, defaultsWant)
	}
	checkStats(t, l.Stats(), Stats{Misses: 6, NotFound: 3, Requests: 3})
}

func TestEnrichBatchesAndDedup(t *testing.T) {
	records := make(map[string][]event.Value)
	var keys []string
	for i := range 10 {
		k := fmt.Sprintf("K%d", i)
		records[k] = []event.Value{event.String(k), event.Null, event.Int(int64(i))}
		// Each key three times, spread over the batch.
		keys = append(keys, k)
	}
	keys = slices.Concat(keys, keys, keys)
	src := newRecordingSource(records)
	cfg := customerConfig(src)
	cfg.Batch = 3
	cfg.InFlight = 1
	l := newLookup(t, cfg)
	evs := events(keys...)
	enrich(t, l, evs)
	for i, ev := range evs {
		want := []event.Value{event.String(keys[i]), event.String("unknown"), event.Int(int64(i % 10))}
		if got := lookupFields(ev); !equalRecords(got, want) {
			t.Errorf("event %d: %s, want %s", i, fmtRecord(got), fmtRecord(want))
		}
	}
	var sizes []int
	var asked []string
	for _, c := range src.requested() {
		sizes = append(sizes, len(c))
		asked = append(asked, c...)
	}
	if want := []int{3, 3, 3, 1}; !slices.Equal(sizes, want) {
		t.Errorf("request sizes %v, want %v", sizes, want)
	}
	if want := keys[:10]; !slices.Equal(asked, want) {
		t.Errorf("keys asked %q, want each once: %q", asked, want)
	}
	checkStats(t, l.Stats(), Stats{Misses: 10, Requests: 4})
}

func TestEnrichInFlightBound(t *testing.T) {
	for _, tc := range []struct {
		inFlight, keys, want int
	}{
		{inFlight: 1, keys: 10, want: 1},
		{inFlight: 3, keys: 10, want: 3},
		{inFlight: 0, keys: 10, want: DefaultInFlight},
		{inFlight: 8, keys: 5, want: 5},
	} {
		t.Run(fmt.Sprintf("inflight=%d,keys=%d", tc.inFlight, tc.keys), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				src := newRecordingSource(nil)
				src.SetDelay(10 * time.Millisecond)
				cfg := customerConfig(src)
				cfg.Batch = 1
				cfg.InFlight = tc.inFlight
				l := newLookup(t, cfg)
				var keys []string
				for i := range tc.keys {
					keys = append(keys, fmt.Sprint(i))
				}
				start := time.Now()
				enrich(t, l, events(keys...))
				if got := src.maxInFlight(); got != tc.want {
					t.Errorf("at most %d fetches at once, want %d", got, tc.want)
				}
				// The requests go in waves of the limit.
				waves := (tc.keys + tc.want - 1) / tc.want
				if got, want := time.Since(start), time.Duration(waves)*10*time.Millisecond; got != want {
					t.Errorf("took %v, want %v", got, want)
				}
				checkStats(t, l.Stats(), Stats{Misses: uint64(tc.keys), NotFound: uint64(tc.keys), Requests: uint64(tc.keys)})
			})
		})
	}
}

func TestEnrichTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := NewMemSource(customerSpec(), customers())
		src.SetDelay(time.Second)
		cfg := customerConfig(src)
		cfg.Timeout = 50 * time.Millisecond
		cfg.Policy = Policy{Mode: FailClosed}
		l := newLookup(t, cfg)
		start := time.Now()
		evs := events("C1", "C2", "C1")
		reasons := enrich(t, l, evs)
		if d := time.Since(start); d != 50*time.Millisecond {
			t.Errorf("Enrich took %v, want the timeout, 50ms", d)
		}
		want := "lookup customer: mem: no answer within 50ms"
		for i, r := range reasons {
			if r != want {
				t.Errorf("reason %d %q, want %q", i, r, want)
			}
		}
		s := l.Stats()
		checkStats(t, s, Stats{Misses: 2, Requests: 1, Timeouts: 1, Failures: 1, Rejected: 3, LastError: "no answer within 50ms"})
		// 50ms is in the bucket (25ms, 50ms].
		i := slices.Index(s.Latency.Bounds, 0.05)
		if s.Latency.Count != 1 || s.Latency.Counts[i] != 1 || s.Latency.Sum != 0.05 {
			t.Errorf("latency %+v, want one observation of 0.05 s in bucket %d", s.Latency, i)
		}
		// Each of the 3 events waited the call's 50ms.
		if j := slices.Index(s.Delay.Bounds, 0.05); s.Delay.Count != 3 || s.Delay.Counts[j] != 3 || s.Delay.Sum < 0.1499999 || s.Delay.Sum > 0.1500001 {
			t.Errorf("delay %+v, want three observations of 0.05 s in bucket %d", s.Delay, j)
		}
	})
}

func TestEnrichRetriesThenOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := NewMemSource(customerSpec(), customers())
		src.SetFail(errors.New("connection refused"))
		cfg := customerConfig(src)
		cfg.Policy = Policy{Mode: FailOpen, Retries: 2}
		l := newLookup(t, cfg)
		start := time.Now()
		evs := events("C1", "C3", "C1", "")
		reasons := enrich(t, l, evs)
		// The backoffs: 10ms before the first retry, 20ms before the second.
		if d := time.Since(start); d != 30*time.Millisecond {
			t.Errorf("Enrich took %v, want the backoffs, 30ms", d)
		}
		checkFields(t, evs, defaultsWant, defaultsWant, defaultsWant, defaultsWant)
		if slices.ContainsFunc(reasons, func(r string) bool { return r != "" }) {
			t.Errorf("reasons %q, want none when failing open", reasons)
		}
		checkStats(t, l.Stats(), Stats{Misses: 2, Requests: 3, Failures: 3, Defaulted: 3, LastError: "connection refused"})
		if n := src.Fetches(); n != 3 {
			t.Errorf("%d fetches, want 3", n)
		}
		if o := l.LastOutcome(); o.Answered != 0 || o.Failed != 1 || o.Events != 3 || o.Err == nil || o.Err.Error() != "connection refused (3 attempts)" {
			t.Errorf("the outcome of the failed call: %+v, want 1 request failed for 3 events, with its error", o)
		}
		if p := l.Policy().String(); p != "retry 2 then open" {
			t.Errorf("policy %q", p)
		}

		// Nothing was cached: once the source works, the keys are fetched.
		src.SetFail(nil)
		evs = events("C1", "C3")
		enrich(t, l, evs)
		checkFields(t, evs, c1Want, c3Want)
		checkStats(t, l.Stats(), Stats{Misses: 4, Requests: 4, Failures: 3, Defaulted: 3, LastError: "connection refused"})
		if o := l.LastOutcome(); o != (Outcome{Answered: 1, Keys: 2}) {
			t.Errorf("the outcome of the answered call: %+v, want 1 request answered, of 2 keys with a record", o)
		}
		// A call the cache serves sends no request.
		enrich(t, l, events("C1"))
		if o := l.LastOutcome(); o != (Outcome{}) {
			t.Errorf("the outcome of a call the cache served: %+v, want none", o)
		}
		// A key the source has no record for: counted apart (the cache's
		// key is not).
		enrich(t, l, events("C1", "C9", "C9"))
		if o := l.LastOutcome(); o != (Outcome{Answered: 1, Keys: 1, NotFound: 1}) {
			t.Errorf("the outcome of a call of a key without a record: %+v, want 1 request answered, of 1 key without a record", o)
		}
	})
}

func TestEnrichRetriesThenClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := NewMemSource(customerSpec(), customers())
		// A multi-line error gives a one-line reason.
		src.SetFail(errors.New("dial tcp 10.0.0.1:6379:\n\tconnection refused"))
		cfg := customerConfig(src)
		cfg.Policy = Policy{Mode: FailClosed, Retries: 3}
		l := newLookup(t, cfg)
		evs := events("C1", "", "C3")
		reasons := enrich(t, l, evs)
		want := []string{
			"lookup customer: mem: dial tcp 10.0.0.1:6379: connection refused (4 attempts)",
			"", // a null key makes no request, so cannot fail
			"lookup customer: mem: dial tcp 10.0.0.1:6379: connection refused (4 attempts)",
		}
		if !slices.Equal(reasons, want) {
			t.Errorf("reasons\n got  %q\n want %q", reasons, want)
		}
		checkFields(t, evs[1:2], defaultsWant)
		// The rejected events' slots are left as they were.
		if got := lookupFields(evs[0]); !equalRecords(got, []event.Value{event.Null, event.Null, event.Null}) {
			t.Errorf("a rejected event was written: %s", fmtRecord(got))
		}
		checkStats(t, l.Stats(), Stats{Misses: 2, Requests: 4, Failures: 4, Rejected: 2,
			LastError: "dial tcp 10.0.0.1:6379: connection refused"})
	})
}

func TestEnrichRetrySucceeds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newRecordingSource(customers())
		src.answer = func(ctx context.Context, call int, keys []string) ([][]event.Value, error) {
			if call == 0 {
				return nil, errors.New("LOADING Redis is loading the dataset in memory")
			}
			return src.MemSource.Fetch(ctx, keys)
		}
		cfg := customerConfig(src)
		cfg.Policy = Policy{Mode: FailClosed, Retries: 1}
		l := newLookup(t, cfg)
		evs := events("C1")
		reasons := enrich(t, l, evs)
		if reasons[0] != "" {
			t.Errorf("reason %q after a successful retry", reasons[0])
		}
		checkFields(t, evs, c1Want)
		checkStats(t, l.Stats(), Stats{Misses: 1, Requests: 2, Failures: 1, LastError: "LOADING Redis is loading the dataset in memory"})
	})
}

// TestBadRecordsError: the error of records that do not read names the
// first and counts the others as its request's, so that a summary's "N
// records did not read" over many requests and the last error's count
// do not read as two counts of one thing.
func TestBadRecordsError(t *testing.T) {
	one := BadRecords{{Index: 0, Err: errors.New("key c1: WRONGTYPE")}}
	if got, want := one.Error(), "key c1: WRONGTYPE"; got != want {
		t.Errorf("one record: %q, want %q", got, want)
	}
	three := append(one, BadRecord{Index: 1, Err: errors.New("key c2: WRONGTYPE")}, BadRecord{Index: 2, Err: errors.New("key c3: WRONGTYPE")})
	if got, want := three.Error(), "key c1: WRONGTYPE (and 2 more records of its request that do not read)"; got != want {
		t.Errorf("three records: %q, want %q", got, want)
	}
}

// TestEnrichBadRecords: a record that does not read (BadRecords) fails
// its key alone, with its own reason, without a retry and without being
// cached; the other keys of the request get their records.
func TestEnrichBadRecords(t *testing.T) {
	for _, mode := range []Mode{FailClosed, FailOpen} {
		src := newRecordingSource(customers())
		src.answer = func(ctx context.Context, call int, keys []string) ([][]event.Value, error) {
			recs, err := src.MemSource.Fetch(ctx, keys)
			if err != nil {
				return nil, err
			}
			var bad BadRecords
			for i, k := range keys {
				if k == "C3" {
					recs[i] = nil
					bad = append(bad, BadRecord{Index: i, Err: errors.New("key C3: hash field tenure_days: want an integer")})
				}
			}
			return recs, bad
		}
		cfg := customerConfig(src)
		cfg.Policy = Policy{Mode: mode, Retries: 2}
		l := newLookup(t, cfg)
		evs := events("C1", "C3", "C1")
		reasons := enrich(t, l, evs)
		switch mode {
		case FailClosed:
			want := []string{"", "lookup customer: mem: key C3: hash field tenure_days: want an integer", ""}
			if !slices.Equal(reasons, want) {
				t.Errorf("closed: reasons\n got  %q\n want %q", reasons, want)
			}
			checkFields(t, evs[0:1], c1Want)
			checkFields(t, evs[2:3], c1Want)
		case FailOpen:
			if slices.ContainsFunc(reasons, func(r string) bool { return r != "" }) {
				t.Errorf("open: reasons %q, want none", reasons)
			}
			checkFields(t, evs, c1Want, defaultsWant, c1Want)
		}
		if n := src.Fetches(); n != 1 {
			t.Errorf("%v: %d fetches, want 1 (no retry of a record that does not read)", mode, n)
		}
		// Not cached: the next call asks for C3 again (and C1 comes from
		// the cache).
		enrich(t, l, events("C1", "C3"))
		if n := src.Fetches(); n != 2 {
			t.Errorf("%v: %d fetches after a second call, want 2", mode, n)
		}
		// Counted as records that did not read, not as failed requests;
		// the policy applied to C3's two events.
		st := l.Stats()
		want := Stats{Hits: 1, Misses: 3, Requests: 2, Unreadable: 2, LastError: "key C3: hash field tenure_days: want an integer"}
		if mode == FailOpen {
			want.Defaulted = 2
		} else {
			want.Rejected = 2
		}
		checkStats(t, st, want)
	}
}

func TestEnrichBadAnswer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer [][]event.Value
		reason string
	}{
		{"short", [][]event.Value{}, "lookup customer: mem: 0 entries for 1 keys"},
		{"length", [][]event.Value{{event.String("DE")}}, `lookup customer: mem: record of key "C1": 1 values for 3 fields`},
		{"kind", [][]event.Value{{event.String("DE"), event.Null, event.String("400")}},
			`lookup customer: mem: record of key "C1": field tenure_days is a string, want a int`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := newRecordingSource(nil)
			src.answer = func(context.Context, int, []string) ([][]event.Value, error) { return tc.answer, nil }
			cfg := customerConfig(src)
			cfg.Policy = Policy{Mode: FailClosed}
			l := newLookup(t, cfg)
			reasons := enrich(t, l, events("C1"))
			if reasons[0] != tc.reason {
				t.Errorf("reason %q, want %q", reasons[0], tc.reason)
			}
			lastErr := strings.TrimPrefix(tc.reason, "lookup customer: mem: ")
			checkStats(t, l.Stats(), Stats{Misses: 1, Requests: 1, Failures: 1, Rejected: 1, LastError: lastErr})
		})
	}
}

func TestEnrichContextDone(t *testing.T) {
	t.Run("before", func(t *testing.T) {
		src := NewMemSource(customerSpec(), customers())
		l := newLookup(t, customerConfig(src))
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := l.Enrich(ctx, events("C1"), []string{""}); !errors.Is(err, context.Canceled) {
			t.Errorf("Enrich: %v, want context.Canceled", err)
		}
		if src.Fetches() != 0 {
			t.Error("a fetch after ctx was done")
		}
	})
	t.Run("during", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			src := NewMemSource(customerSpec(), customers())
			src.SetDelay(time.Second)
			cfg := customerConfig(src)
			cfg.Timeout = 10 * time.Second
			cfg.Batch = 1
			cfg.Policy = Policy{Mode: FailClosed, Retries: 5}
			l := newLookup(t, cfg)
			ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
			defer cancel()
			reasons := make([]string, 6)
			start := time.Now()
			err := l.Enrich(ctx, events("C1", "C2", "C3", "C4", "C5", "C6"), reasons)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Enrich: %v, want context.DeadlineExceeded", err)
			}
			if d := time.Since(start); d != 100*time.Millisecond {
				t.Errorf("Enrich returned after %v, want 100ms, when ctx ended", d)
			}
			if slices.ContainsFunc(reasons, func(r string) bool { return r != "" }) {
				t.Errorf("reasons %q: the end of ctx is no failure of the source", reasons)
			}
			// The ctx's end is no failure, and the remaining requests are
			// not sent.
			checkStats(t, l.Stats(), Stats{Misses: 6, Requests: 4})
		})
	})
}

func TestNewLookupErrors(t *testing.T) {
	good := func() LookupConfig { return customerConfig(nil) }
	for _, tc := range []struct {
		name string
		edit func(*LookupConfig)
		want []string // one line each, every problem reported
	}{
		{"no name", func(c *LookupConfig) { c.Spec.Name = "" }, []string{"enrich: lookup (unnamed): no name"}},
		{"key slots", func(c *LookupConfig) { c.KeySlots = nil }, []string{"enrich: lookup customer: 0 key slots for 1 key fields"}},
		{"key kinds", func(c *LookupConfig) { c.Spec.KeyKinds = []event.Kind{event.KindInt, event.KindInt} }, []string{"enrich: lookup customer: 2 key kinds for 1 key fields"}},
		{"key kind", func(c *LookupConfig) { c.Spec.KeyKinds = []event.Kind{event.Kind(99)} }, []string{"enrich: lookup customer: key field customer_id: kind " + event.Kind(99).String() + " (want null, string, int, float or bool)"}},
		{"key times", func(c *LookupConfig) { c.Spec.KeyTimes = []bool{true, true} }, []string{"enrich: lookup customer: 2 key times for 1 key fields"}},
		{"key time", func(c *LookupConfig) {
			c.Spec.KeyKinds, c.Spec.KeyTimes = []event.Kind{event.KindString}, []bool{true}
		}, []string{"enrich: lookup customer: key field customer_id: a time must be of kind int (epoch ms), not string"}},
		{"kinds and defaults", func(c *LookupConfig) {
			c.Spec.Fields[0].Kind = event.KindNull
			c.Spec.Fields[1].Default = event.Int(1)
			c.Spec.Fields[2].Time = true
			c.Spec.Fields[2].Kind = event.KindString
			c.Spec.Fields[2].Default = event.Null
		}, []string{
			"enrich: lookup customer: field home_country: kind null (want string, int, float or bool)",
			"enrich: lookup customer: field risk_tier: default 1 is a int, the field a string",
			"enrich: lookup customer: field tenure_days: a time field must be of kind int (epoch ms), not string",
		}},
		{"fields", func(c *LookupConfig) {
			c.Spec.Fields = append(c.Spec.Fields, Field{Name: "home_country", Kind: event.KindBool})
		}, []string{
			"enrich: lookup customer: field home_country declared twice",
			"enrich: lookup customer: 3 slots for 4 fields",
		}},
		{"slots", func(c *LookupConfig) { c.Slots = []int{slotCountry, slotCountry, slotID} }, []string{
			"enrich: lookup customer: slot 1 is written by two fields",
			"enrich: lookup customer: slot 0 is both a key slot and the slot of a field",
		}},
		{"limits", func(c *LookupConfig) {
			c.Policy = Policy{Mode: 7, Retries: -1}
			c.Timeout, c.Batch, c.InFlight, c.CacheTTL = -1, -1, -1, -1
		}, []string{
			"enrich: lookup customer: unknown failure mode mode(7)",
			"enrich: lookup customer: negative retries (-1)",
			"enrich: lookup customer: negative timeout (-1ns)",
			"enrich: lookup customer: negative batch (-1)",
			"enrich: lookup customer: negative in-flight limit (-1)",
			"enrich: lookup customer: negative cache TTL (-1ns)",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good()
			tc.edit(&cfg)
			_, err := NewLookup(cfg)
			if err == nil {
				t.Fatal("no error")
			}
			if got := strings.Split(err.Error(), "\n"); !slices.Equal(got, tc.want) {
				t.Errorf("errors\n got  %q\n want %q", got, tc.want)
			}
		})
	}
	if _, err := NewLookup(good()); err != nil {
		t.Errorf("a good config: %v", err)
	}
}

func TestEnrichAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// customer over slots 1-3; account over slot 5, keyed by slot 4.
		accounts := Spec{Name: "account", KeyFields: []string{"account_id"},
			Fields: []Field{{Name: "opened", Kind: event.KindInt, Time: true, Default: event.Int(-1)}}}
		custSrc := NewMemSource(customerSpec(), customers())
		acctSrc := NewMemSource(accounts, map[string][]event.Value{"A1": {event.Int(1000)}})
		custSrc.SetDelay(100 * time.Millisecond)
		acctSrc.SetDelay(100 * time.Millisecond)
		cust := newLookup(t, customerConfig(custSrc))
		acct := newLookup(t, LookupConfig{Spec: accounts, KeySlots: []int{4}, Slots: []int{5}, Source: acctSrc,
			Policy: Policy{Mode: FailClosed}})
		// An empty id is a null key.
		mk := func(cust, acct string) *event.Event {
			ev := &event.Event{Fields: make([]event.Value, 6)}
			if cust != "" {
				ev.Fields[slotID] = event.String(cust)
			}
			ev.Fields[4] = event.String(acct)
			return ev
		}
		evs := []*event.Event{mk("C1", "A1"), mk("C3", "A2"), mk("C1", "A1")}
		reasons := []string{"", "", "rejected before"}
		start := time.Now()
		if err := EnrichAll(t.Context(), []*Lookup{cust, acct}, evs, reasons); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 100*time.Millisecond {
			t.Errorf("EnrichAll took %v, want 100ms (the lookups side by side)", d)
		}
		checkFields(t, evs[:2], c1Want, c3Want)
		for i, want := range []event.Value{event.Int(1000), event.Int(-1), event.Null} {
			if got := evs[i].Fields[5]; !got.Equal(want) {
				t.Errorf("event %d: account.opened %s, want %s", i, got, want)
			}
		}

		// A failure of each: the first lookup's reason wins.
		custSrc.SetFail(errors.New("down"))
		acctSrc.SetFail(errors.New("also down"))
		cust.policy.Mode = FailClosed
		reasons = []string{"", "", "rejected before"}
		if err := EnrichAll(t.Context(), []*Lookup{cust, acct}, []*event.Event{mk("C2", "A3"), mk("", "A4"), mk("C2", "A3")}, reasons); err != nil {
			t.Fatal(err)
		}
		want := []string{"lookup customer: mem: down", "lookup account: mem: also down", "rejected before"}
		if !slices.Equal(reasons, want) {
			t.Errorf("reasons\n got  %q\n want %q", reasons, want)
		}
	})
}

func TestEnrichAllOverlappingSlots(t *testing.T) {
	a := newLookup(t, customerConfig(nil))
	b := newLookup(t, customerConfig(nil))
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "both write slot 1") {
			t.Errorf("recovered %v, want a panic over slot 1", r)
		}
	}()
	EnrichAll(t.Context(), []*Lookup{a, b}, events("C1"), []string{""})
}

// TestEnrichCacheHitAllocs checks that an Enrich of which every event is
// served by the cache allocates nothing, with a key of one string and of
// several parts.
func TestEnrichCacheHitAllocs(t *testing.T) {
	spec := customerSpec()
	spec.KeyFields = []string{"customer_id", "n"}
	records := map[string][]event.Value{}
	evs := events("C1", "C2", "C3", "C1")
	for i, ev := range evs {
		ev.Fields = append(ev.Fields, event.Int(int64(i%3)))
		k, _ := KeyOf(ev, []int{slotID, nSlots}, nil)
		records[k] = customers()["C1"]
	}
	for _, tc := range []struct {
		name string
		cfg  LookupConfig
	}{
		{"string key", customerConfig(NewMemSource(customerSpec(), customers()))},
		{"two parts", LookupConfig{Spec: spec, KeySlots: []int{slotID, nSlots}, Slots: customerSlots,
			Source: NewMemSource(spec, records)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLookup(t, tc.cfg)
			reasons := make([]string, len(evs))
			ctx := t.Context()
			enrich(t, l, evs) // fills the cache
			allocs := testing.AllocsPerRun(100, func() {
				if err := l.Enrich(ctx, evs, reasons); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("%v allocations per Enrich served by the cache, want 0", allocs)
			}
			if s := l.Stats(); s.Requests != 1 || s.Hits == 0 {
				t.Errorf("stats %+v: the runs were not cache hits", s)
			}
		})
	}
}

// statsWhileEnriching enriches 50 batches of 4 events (C1, C2, C3, C9)
// with l while another goroutine reads its Stats again and again (for the
// race detector), and returns its Stats at the end.
func statsWhileEnriching(t *testing.T, l *Lookup) Stats {
	t.Helper()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
				_ = l.Stats()
			}
		}
	})
	for range 50 {
		enrich(t, l, events("C1", "C2", "C3", "C9"))
	}
	close(done)
	wg.Wait()
	return l.Stats()
}

// TestStatsConcurrent reads Stats while Enrich runs (for the race
// detector).
func TestStatsConcurrent(t *testing.T) {
	src := NewMemSource(customerSpec(), customers())
	cfg := customerConfig(src)
	cfg.CacheSize = -1
	cfg.Batch = 1
	if s := statsWhileEnriching(t, newLookup(t, cfg)); s.Requests != 200 || s.Latency.Count != 200 {
		t.Errorf("requests %d, latencies %d, want 200", s.Requests, s.Latency.Count)
	}
}

// TestAddStats: a lookup's counters and histograms add those of an
// earlier lookup it replaces, on top of its own.
func TestAddStats(t *testing.T) {
	src := NewMemSource(customerSpec(), customers())
	cfg := customerConfig(src)
	cfg.CacheSize = -1
	earlier, later := newLookup(t, cfg), newLookup(t, cfg)
	enrich(t, earlier, events("C1", "C2", "C9"))
	enrich(t, later, events("C3"))
	a, b := earlier.Stats(), later.Stats()
	later.AddStats(a)
	got := later.Stats()
	if got.Misses != a.Misses+b.Misses || got.NotFound != a.NotFound+b.NotFound || got.Requests != a.Requests+b.Requests ||
		got.Latency.Count != a.Latency.Count+b.Latency.Count || got.Delay.Count != a.Delay.Count+b.Delay.Count ||
		got.Latency.Sum != a.Latency.Sum+b.Latency.Sum {
		t.Errorf("after AddStats: %+v\nwant the sums of %+v\nand %+v", got, a, b)
	}
	for i := range got.Delay.Counts {
		if got.Delay.Counts[i] != a.Delay.Counts[i]+b.Delay.Counts[i] {
			t.Errorf("delay bucket %d: %d, want %d + %d", i, got.Delay.Counts[i], a.Delay.Counts[i], b.Delay.Counts[i])
		}
	}
	if a.Misses == 0 || b.Misses == 0 || a.NotFound == 0 {
		t.Errorf("the test's lookups counted nothing: %+v, %+v", a, b)
	}
}

// TestStatsLastError: the stats say why the latest failed attempt failed,
// on one line and without enrich's prefix; a retry's error is the
// attempt's own, without the count of attempts; an answered request after
// it leaves it; a lookup that replaces another takes it on unless it has
// its own.
func TestStatsLastError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newRecordingSource(customers())
		src.answer = func(ctx context.Context, call int, keys []string) ([][]event.Value, error) {
			switch call {
			case 0:
				return nil, errors.New("key cepheus:lookup:customer:C1: WRONGTYPE Operation against a key\n\tholding the wrong kind of value")
			case 1:
				return nil, errors.New("enrich: dial tcp 127.0.0.1:6379: connect: connection refused")
			}
			return src.MemSource.Fetch(ctx, keys)
		}
		cfg := customerConfig(src)
		cfg.Policy = Policy{Mode: FailOpen, Retries: 1}
		l := newLookup(t, cfg)
		if s := l.Stats(); s.LastError != "" {
			t.Errorf("LastError %q before any request", s.LastError)
		}
		enrich(t, l, events("C1"))
		const want = "dial tcp 127.0.0.1:6379: connect: connection refused"
		checkStats(t, l.Stats(), Stats{Misses: 1, Requests: 2, Failures: 2, Defaulted: 1, LastError: want})
		enrich(t, l, events("C3"))
		checkStats(t, l.Stats(), Stats{Misses: 2, Requests: 3, Failures: 2, Defaulted: 1, LastError: want})

		later := newLookup(t, customerConfig(NewMemSource(customerSpec(), customers())))
		later.AddStats(l.Stats())
		if got := later.Stats().LastError; got != want {
			t.Errorf("LastError %q after AddStats, want the earlier lookup's %q", got, want)
		}
		src.answer = func(context.Context, int, []string) ([][]event.Value, error) {
			return nil, errors.New("LOADING Redis is loading the dataset in memory")
		}
		first := newLookup(t, customerConfig(src))
		enrich(t, first, events("C2"))
		first.AddStats(l.Stats())
		if got := first.Stats().LastError; got != "LOADING Redis is loading the dataset in memory" {
			t.Errorf("LastError %q after AddStats, want the lookup's own", got)
		}
	})
}

// TestStatsLastErrorConcurrent reads Stats while requests in flight at
// once fail (for the race detector).
func TestStatsLastErrorConcurrent(t *testing.T) {
	src := NewMemSource(customerSpec(), customers())
	src.SetFail(errors.New("connection reset by peer"))
	cfg := customerConfig(src)
	cfg.CacheSize, cfg.Batch, cfg.InFlight = -1, 1, 4
	if s := statsWhileEnriching(t, newLookup(t, cfg)); s.Failures != 200 || s.LastError != "connection reset by peer" {
		t.Errorf("failures %d, last error %q; want 200, the source's error", s.Failures, s.LastError)
	}
}
