package gen

import (
	"context"
	"io"
	"testing"
)

// benchConfig is one dense day of 200,000 normal events over 50,000
// customers, with every scenario at its default rate.
func benchConfig() Config {
	c := DefaultConfig()
	c.HistoryDays = 0
	delete(c.Scenarios, "dormant_card") // needs 61 days
	return c
}

// BenchmarkWriteTo measures a run of the whole generator, without building
// the population: activities, the event heap, the out-of-order window and
// JSON lines to io.Discard.
func BenchmarkWriteTo(b *testing.B) {
	g, err := New(benchConfig())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	var events int
	for b.Loop() {
		st, err := g.WriteTo(ctx, io.Discard)
		if err != nil {
			b.Fatal(err)
		}
		events += st.Events
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(events), "ns/event")
}

// BenchmarkAppendJSON measures the encoding of one record.
func BenchmarkAppendJSON(b *testing.B) {
	g, err := New(benchConfig())
	if err != nil {
		b.Fatal(err)
	}
	var recs []Record
	for r := range g.Records(context.Background()) {
		recs = append(recs, r)
		if len(recs) == 1024 {
			break
		}
	}
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		buf = recs[i%len(recs)].AppendJSON(buf[:0])
		i++
	}
}

// BenchmarkWriteToDefault runs the demo's configuration: 60 sparse days,
// then the dense day (about 325,000 events).
func BenchmarkWriteToDefault(b *testing.B) {
	g, err := New(DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	var events int
	for b.Loop() {
		st, err := g.WriteTo(ctx, io.Discard)
		if err != nil {
			b.Fatal(err)
		}
		events += st.Events
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
}
