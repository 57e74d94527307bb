package benchmarks

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/cep"
	"github.com/cepheus-cep/cepheus/internal/gen"
)

// lookupDay is a day of generated events (as liveEvents) with the
// profiles of its population, once per process: the events file and the
// customer lookup file.
var lookupDay = sync.OnceValues(func() ([2]string, error) {
	events, err := liveEvents()
	if err != nil {
		return [2]string{}, err
	}
	cfg := gen.DefaultConfig()
	cfg.HistoryDays, cfg.EventsPerDay = 0, 150_000
	delete(cfg.Scenarios, "dormant_card")
	g, err := gen.New(cfg)
	if err != nil {
		return [2]string{}, err
	}
	files, err := g.WriteProfiles(context.Background(), filepath.Join(filepath.Dir(events), "profiles"))
	if err != nil {
		return [2]string{}, err
	}
	return [2]string{events, files[0]}, nil
})

// lookupSources returns the bound source of the customer lookup of rs for
// kind (unbound, file, redis: CEPHEUS_REDIS_ADDR, filled once under a
// prefix of this process).
func lookupSources(b *testing.B, rs *cep.Ruleset, kind, profiles string) map[string]cep.LookupSource {
	b.Helper()
	var target string
	switch kind {
	case "unbound":
		return nil
	case "file":
		target = "file:" + profiles
	case "redis":
		addr := os.Getenv("CEPHEUS_REDIS_ADDR")
		if addr == "" {
			b.Skip("CEPHEUS_REDIS_ADDR is not set: start Redis with scripts/redis.sh")
		}
		target = fmt.Sprintf("redis://%s?prefix=bench:%d:", addr, os.Getpid())
		redisLoaded.Do(func() {
			_, redisLoadErr = cep.LoadLookup(context.Background(), rs, "customer", profiles, target, cep.RedisAuth{})
		})
		if redisLoadErr != nil {
			b.Fatal(redisLoadErr)
		}
	}
	src, err := cep.OpenLookupSource(rs, "customer", target, cep.RedisAuth{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { src.Close() })
	return map[string]cep.LookupSource{"customer": src}
}

var (
	redisLoaded  sync.Once
	redisLoadErr error
)

// BenchmarkLookupBacktest backtests the cards ruleset over a day of events
// (150,000 normal events a day, 150,826 records) with its customer lookup
// unbound (the defaults: the baseline), read from the lookup file, and
// read from Redis (hashes, as cepheus enrich load writes them). ns/op is
// one backtest; events/s the records over its time; hit% the keys served
// by the cache.
func BenchmarkLookupBacktest(b *testing.B) {
	for _, kind := range []string{"unbound", "file", "redis"} {
		b.Run(kind, func(b *testing.B) {
			files, err := lookupDay()
			if err != nil {
				b.Fatal(err)
			}
			v1, _ := cardsSources(b)
			rs, err := cep.CompileRuleset("cards.cep", v1)
			if err != nil {
				b.Fatal(err)
			}
			sources := lookupSources(b, rs, kind, files[1])
			b.ReportAllocs()
			var records int64
			var st []cep.LookupStats
			start := time.Now()
			for b.Loop() {
				e, err := cep.New(cep.WithRuleset(rs), cep.WithOutOfOrderness(5*time.Second), cep.WithLookups(sources, cep.LookupOptions{}))
				if err != nil {
					b.Fatal(err)
				}
				src, err := cep.OpenEventSource(files[0])
				if err != nil {
					b.Fatal(err)
				}
				sum, err := e.Run(context.Background(), src)
				src.Close()
				if err != nil {
					b.Fatal(err)
				}
				records += sum.Records
				st = sum.Lookups
			}
			b.ReportMetric(float64(records)/time.Since(start).Seconds(), "events/s")
			if len(st) == 1 && st[0].Bound {
				b.ReportMetric(100*st[0].HitRate(), "hit%")
			}
		})
	}
}

// BenchmarkLookupLive runs the cards ruleset over the day as a live job
// (cep.Engine.Stream, parallelism 2, checkpoints every second) with the
// customer lookup from Redis and from the file, and reports the delay the
// lookup adds to an event (the time its batch's lookup call took, one
// observation per event): p50 and p99, to the bucket of
// cepheus_lookup_event_delay_seconds (10 us .. 5 s, 1-2-5 steps).
func BenchmarkLookupLive(b *testing.B) {
	for _, kind := range []string{"file", "redis"} {
		b.Run(kind, func(b *testing.B) {
			files, err := lookupDay()
			if err != nil {
				b.Fatal(err)
			}
			v1, _ := cardsSources(b)
			rs, err := cep.CompileRuleset("cards.cep", v1)
			if err != nil {
				b.Fatal(err)
			}
			sources := lookupSources(b, rs, kind, files[1])
			var st cep.LookupStats
			for b.Loop() {
				e, err := cep.New(cep.WithRuleset(rs), cep.WithOutOfOrderness(5*time.Second), cep.WithLookups(sources, cep.LookupOptions{}))
				if err != nil {
					b.Fatal(err)
				}
				dir := b.TempDir()
				res, err := e.Stream(context.Background(), cep.StreamConfig{
					Events: files[0], StateDir: filepath.Join(dir, "state"), AlertsDir: filepath.Join(dir, "alerts"), Parallelism: 2,
				})
				if err != nil {
					b.Fatal(err)
				}
				st = res.Lookups[0]
			}
			b.ReportMetric(quantile(st.Delay.Bounds, st.Delay.Counts, 0.5)*1e6, "p50-us")
			b.ReportMetric(quantile(st.Delay.Bounds, st.Delay.Counts, 0.99)*1e6, "p99-us")
			b.ReportMetric(100*st.HitRate(), "hit%")
		})
	}
}

// quantile is the upper bound of the bucket that holds quantile q of a
// histogram (its last bound for the unbounded bucket).
func quantile(bounds []float64, counts []uint64, q float64) float64 {
	var total uint64
	for _, c := range counts {
		total += c
	}
	var n uint64
	for i, c := range counts {
		n += c
		if float64(n) >= q*float64(total) {
			if i < len(bounds) {
				return bounds[i]
			}
			break
		}
	}
	return bounds[len(bounds)-1]
}
