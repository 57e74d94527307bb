package benchmarks

import (
	"fmt"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/cepheus-cep/cepheus/cep"
	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/rulesets"
)

// BenchmarkStatePerKey measures the heap one key's state costs in the
// shared operator of the card_id rules of rulesets/cards.cep (five rules),
// after a garbage collection, in B/key, the key's event included (about
// 760 bytes as a Go object):
//
//   - buffered: one event waiting for the watermark;
//   - partial: the event released, dormant_card holding its partial match
//     (the card's last event), the other rules idle, as a Go object graph;
//   - cold: the same key kept as its encoded record (cep/cold.go).
//
// A key whose rules all went idle holds no state: it is dropped.
//
//	go test ./benchmarks -run XXX -bench StatePerKey -benchtime 1x
func BenchmarkStatePerKey(b *testing.B) {
	src, err := rulesets.FS.ReadFile("cards.cep")
	if err != nil {
		b.Fatal(err)
	}
	rs, err := cep.CompileRuleset("cards.cep", src)
	if err != nil {
		b.Fatal(err)
	}
	var shared []cep.SharedRule
	var key func(*event.Event) event.Key
	for i, r := range rs.Rules {
		if strings.Join(r.KeyFields, ",") == "card_id" {
			shared = append(shared, cep.SharedRule{ID: i, NFA: r.NFA})
			key = r.Key
		}
	}
	const n = 50_000
	for _, stage := range []string{"buffered", "partial", "cold"} {
		b.Run(stage, func(b *testing.B) {
			for range b.N {
				perKey := measureKeys(b, rs, shared, key, n, stage)
				b.ReportMetric(perKey, "B/key")
			}
		})
	}
}

// measureKeys returns the heap per key of n keys brought to stage, their
// events included.
func measureKeys(b *testing.B, rs *cep.Ruleset, rules []cep.SharedRule, key func(*event.Event) event.Key, n int, stage string) float64 {
	b.Helper()
	cfg := cep.SharedConfig{Key: key, CompactEvery: -1}
	if stage == "cold" {
		cfg.CompactEvery = 1
	}
	op, err := cep.NewSharedOperator(cfg, rules...)
	if err != nil {
		b.Fatal(err)
	}
	before := heapInUse()
	evs := make([]*event.Event, n)
	for i := range evs {
		evs[i] = cardEvent(rs.Schema, i)
	}
	var out cep.Output
	for _, ev := range evs {
		if err := op.ProcessElement(ev, ev.Time, &out); err != nil {
			b.Fatal(err)
		}
	}
	keys := n
	if stage != "buffered" {
		if err := op.ProcessWatermark(1000, &out); err != nil {
			b.Fatal(err)
		}
	}
	if stage == "cold" {
		// The first sweep found the keys just fired (warm); one more
		// element lets the next watermark sweep again and freeze them.
		ev := cardEvent(rs.Schema, n)
		ev.Time = 2000
		if err := op.ProcessElement(ev, ev.Time, &out); err != nil {
			b.Fatal(err)
		}
		if err := op.ProcessWatermark(1500, &out); err != nil {
			b.Fatal(err)
		}
		keys++
	}
	out.Reset()
	evs = nil // what the operator holds stays reachable through it
	after := heapInUse()
	st := op.Stats()
	if st.Keys != keys {
		b.Fatalf("%d keys hold state, want %d", st.Keys, keys)
	}
	if buffered := stage == "buffered"; buffered != (st.BufferedEvents == n) {
		b.Fatalf("%d events buffered at stage %s", st.BufferedEvents, stage)
	}
	goruntime.KeepAlive(op)
	return float64(after-before) / float64(n)
}

// cardEvent is a capture on card i with the fields of the cards schema
// filled as cepheus gen fills them (about 330 bytes of JSON).
func cardEvent(s *event.Schema, i int) *event.Event {
	ev := &event.Event{Time: 10, Seq: uint64(i + 1), Fields: make([]event.Value, s.Len())}
	set := func(name string, v event.Value) {
		if slot, ok := s.Slot(name); ok {
			ev.Fields[slot] = v
		}
	}
	set("ts", event.Int(10))
	set("type", event.String("capture"))
	set("event_id", event.String(fmt.Sprint("evt_", i)))
	set("customer_id", event.String(fmt.Sprint("cust_", i/2)))
	set("card_id", event.String(fmt.Sprint("card_", i)))
	set("amount", event.Float(72.33))
	set("currency", event.String("USD"))
	set("merchant_id", event.String(fmt.Sprint("merch_", i%5000)))
	set("merchant_country", event.String("FR"))
	set("mcc", event.String("5541"))
	set("card_country", event.String("FR"))
	set("device_id", event.String(""))
	set("ip", event.String(""))
	set("ip_country", event.String(""))
	set("lat", event.Float(45.8387))
	set("lon", event.Float(4.8813))
	set("is_fraud", event.Bool(false))
	set("scenario", event.String(""))
	return ev
}

func heapInUse() uint64 {
	goruntime.GC()
	goruntime.GC()
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
