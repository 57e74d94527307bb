package enrich

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/cepheus-cep/cepheus/event"
)

// customerSpec is the lookup of the package doc: key customer_id, three
// fields with defaults.
func customerSpec() Spec {
	return Spec{
		Name:      "customer",
		KeyFields: []string{"customer_id"},
		Fields: []Field{
			{Name: "home_country", Kind: event.KindString, Default: event.String("")},
			{Name: "risk_tier", Kind: event.KindString, Default: event.String("unknown")},
			{Name: "tenure_days", Kind: event.KindInt, Default: event.Int(0)},
		},
	}
}

// The event layout of the customer tests: the key, then the lookup's three
// fields.
const (
	slotID = iota
	slotCountry
	slotTier
	slotTenure
	nSlots
)

var (
	customerKeySlots = []int{slotID}
	customerSlots    = []int{slotCountry, slotTier, slotTenure}
)

// customerConfig is a LookupConfig of customerSpec over src, the slots of
// the layout above.
func customerConfig(src Source) LookupConfig {
	return LookupConfig{Spec: customerSpec(), KeySlots: customerKeySlots, Slots: customerSlots, Source: src}
}

// customers are the records of the customer tests: C2 lacks its risk tier
// (null), C9 does not exist.
func customers() map[string][]event.Value {
	return map[string][]event.Value{
		"C1": {event.String("DE"), event.String("low"), event.Int(400)},
		"C2": {event.String("FR"), event.Null, event.Int(12)},
		"C3": {event.String("US"), event.String("high"), event.Int(3)},
	}
}

// newLookup returns the lookup of cfg, failing the test on an error, and
// closes it at the end of the test.
func newLookup(t testing.TB, cfg LookupConfig) *Lookup {
	t.Helper()
	l, err := NewLookup(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// events returns one event per key of the customer layout: a string key, or
// a null one for "".
func events(keys ...string) []*event.Event {
	evs := make([]*event.Event, len(keys))
	for i, k := range keys {
		ev := &event.Event{Seq: uint64(i), Fields: make([]event.Value, nSlots)}
		if k != "" {
			ev.Fields[slotID] = event.String(k)
		}
		evs[i] = ev
	}
	return evs
}

// enrich runs l.Enrich over evs with no event rejected beforehand, and
// returns the reasons; an error fails the test.
func enrich(t testing.TB, l *Lookup, evs []*event.Event) []string {
	t.Helper()
	reasons := make([]string, len(evs))
	if err := l.Enrich(t.Context(), evs, reasons); err != nil {
		t.Fatal(err)
	}
	return reasons
}

// lookupFields returns the lookup's three slots of ev.
func lookupFields(ev *event.Event) []event.Value {
	return []event.Value{ev.Fields[slotCountry], ev.Fields[slotTier], ev.Fields[slotTenure]}
}

// checkFields fails the test unless the lookup's slots of evs[i] hold
// want[i].
func checkFields(t *testing.T, evs []*event.Event, want ...[]event.Value) {
	t.Helper()
	for i, ev := range evs {
		if got := lookupFields(ev); !equalRecords(got, want[i]) {
			t.Errorf("event %d (key %s): fields %s, want %s", i, ev.Fields[slotID], fmtRecord(got), fmtRecord(want[i]))
		}
	}
}

// The values the customer tests expect.
var (
	defaultsWant = []event.Value{event.String(""), event.String("unknown"), event.Int(0)}
	c1Want       = []event.Value{event.String("DE"), event.String("low"), event.Int(400)}
	c2Want       = []event.Value{event.String("FR"), event.String("unknown"), event.Int(12)}
	c3Want       = []event.Value{event.String("US"), event.String("high"), event.Int(3)}
)

func equalRecords(a, b []event.Value) bool {
	if (a == nil) != (b == nil) || len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Equal(b[i]) {
			return false
		}
	}
	return true
}

func fmtRecord(rec []event.Value) string {
	if rec == nil {
		return "<no record>"
	}
	parts := make([]string, len(rec))
	for i, v := range rec {
		parts[i] = v.String()
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// recordingSource is a Source over a MemSource that records the keys of
// each Fetch and the most Fetch calls in flight at once, and can answer
// through a function instead.
type recordingSource struct {
	*MemSource
	// answer, when set, answers Fetch instead of the MemSource.
	answer func(ctx context.Context, call int, keys []string) ([][]event.Value, error)

	mu       sync.Mutex
	calls    [][]string
	inFlight int
	maxIn    int
}

func newRecordingSource(records map[string][]event.Value) *recordingSource {
	return &recordingSource{MemSource: NewMemSource(customerSpec(), records)}
}

func (r *recordingSource) Fetch(ctx context.Context, keys []string) ([][]event.Value, error) {
	r.mu.Lock()
	call := len(r.calls)
	r.calls = append(r.calls, append([]string(nil), keys...))
	r.inFlight++
	r.maxIn = max(r.maxIn, r.inFlight)
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.inFlight--
		r.mu.Unlock()
	}()
	if r.answer != nil {
		return r.answer(ctx, call, keys)
	}
	return r.MemSource.Fetch(ctx, keys)
}

// requested returns the keys of every Fetch so far, in call order.
func (r *recordingSource) requested() [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]string(nil), r.calls...)
}

func (r *recordingSource) maxInFlight() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.maxIn
}

// checkStats fails the test unless the counters of s (Latency and Delay
// aside) are want's.
func checkStats(t *testing.T, s Stats, want Stats) {
	t.Helper()
	s.Latency, want.Latency = Histogram{}, Histogram{}
	s.Delay, want.Delay = Histogram{}, Histogram{}
	if fmt.Sprint(s) != fmt.Sprint(want) {
		t.Errorf("stats\n got  %+v\n want %+v", s, want)
	}
}
