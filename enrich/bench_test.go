package enrich

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/event"
)

// benchBatch is the number of events per Enrich in the benchmarks.
const benchBatch = 256

// benchEvents returns rounds batches of benchBatch customer events whose
// keys are drawn (fixed seed) from nKeys keys K0..K{nKeys-1}, and the
// records of those keys.
func benchEvents(rounds, nKeys int) ([][]*event.Event, map[string][]event.Value) {
	records := make(map[string][]event.Value, nKeys)
	for i := range nKeys {
		records[fmt.Sprintf("K%d", i)] = []event.Value{event.String("DE"), event.Null, event.Int(int64(i))}
	}
	rng := rand.New(rand.NewPCG(1, 1))
	batches := make([][]*event.Event, rounds)
	for r := range batches {
		keys := make([]string, benchBatch)
		for i := range keys {
			keys[i] = fmt.Sprintf("K%d", rng.IntN(nKeys))
		}
		batches[r] = events(keys...)
	}
	return batches, records
}

// BenchmarkEnrichCacheHit enriches batches of 256 events whose 1,000 keys
// are all in the cache.
func BenchmarkEnrichCacheHit(b *testing.B) {
	batches, records := benchEvents(16, 1000)
	l := newLookup(b, customerConfig(NewMemSource(customerSpec(), records)))
	reasons := make([]string, benchBatch)
	ctx := b.Context()
	all := make([]string, 0, len(records))
	for k := range records {
		all = append(all, k)
	}
	enrich(b, l, events(all...))
	if l.cache.len() != len(records) {
		b.Fatalf("cache holds %d keys, want %d", l.cache.len(), len(records))
	}
	before := l.Stats().Requests
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := l.Enrich(ctx, batches[i%len(batches)], reasons); err != nil {
			b.Fatal(err)
		}
		i++
	}
	if l.Stats().Requests != before {
		b.Fatal("a request in the timed loop: not all hits")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(i*benchBatch), "ns/event")
}

// BenchmarkEnrichRedis enriches batches of 256 events of distinct keys (no
// cache: every key goes to Redis) over the Redis of CEPHEUS_REDIS_ADDR, in
// each format. It skips without CEPHEUS_REDIS_ADDR, under CI too
// (benchmarks are not part of make test).
func BenchmarkEnrichRedis(b *testing.B) {
	addr := os.Getenv("CEPHEUS_REDIS_ADDR")
	if addr == "" {
		b.Skip("no Redis: run scripts/redis.sh start and set CEPHEUS_REDIS_ADDR to the host:port it prints")
	}
	const nKeys = 10_000
	batches, _ := benchEvents(64, nKeys)
	// A quarter of the keys have no record.
	var lines strings.Builder
	for i := range nKeys {
		if i%4 == 3 {
			continue
		}
		fmt.Fprintf(&lines, `{"customer_id":"K%d","home_country":"DE","tenure_days":%d}`+"\n", i, i)
	}
	path := writeFile(b, "bench.jsonl", lines.String())
	for _, format := range []string{FormatHash, FormatJSON} {
		b.Run(format, func(b *testing.B) {
			cfg := RedisConfig{Addr: addr, Format: format, Prefix: testPrefix(b, addr)}
			if _, err := Load(b.Context(), customerSpec(), path, cfg); err != nil {
				b.Fatal(err)
			}
			rs, err := OpenRedis(customerSpec(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			lc := customerConfig(rs)
			lc.CacheSize = -1
			lc.Batch = 64
			lc.Timeout = 5 * time.Second
			lc.Policy = Policy{Mode: FailClosed}
			l := newLookup(b, lc)
			reasons := make([]string, benchBatch)
			ctx := b.Context()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if err := l.Enrich(ctx, batches[i%len(batches)], reasons); err != nil {
					b.Fatal(err)
				}
				i++
			}
			if s := l.Stats(); s.Failures != 0 || s.Rejected != 0 {
				b.Fatalf("failures: %+v", s)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(i*benchBatch), "ns/event")
		})
	}
}
