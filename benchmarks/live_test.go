package benchmarks

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/cep"
	"github.com/cepheus-cep/cepheus/internal/gen"
)

// liveEvents writes a day of generated card events (every scenario but
// dormant_card, which needs history) to a file once per process.
var liveEvents = sync.OnceValues(func() (string, error) {
	cfg := gen.DefaultConfig()
	cfg.HistoryDays, cfg.EventsPerDay = 0, 150_000
	delete(cfg.Scenarios, "dormant_card")
	g, err := gen.New(cfg)
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "cepheus-live-bench")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "events.jsonl")
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := g.WriteTo(context.Background(), f); err != nil {
		return "", err
	}
	return path, f.Close()
})

// cardsSources are the bundled cards ruleset and a version of it with one
// rule's threshold changed.
func cardsSources(tb testing.TB) (v1, v2 []byte) {
	tb.Helper()
	v1, err := os.ReadFile(filepath.Join("..", "rulesets", "cards.cep"))
	if err != nil {
		tb.Fatal(err)
	}
	const from, to = `type == "auth" && amount >= 100`, `type == "auth" && amount >= 150`
	if !strings.Contains(string(v1), from) {
		tb.Fatalf("cards.cep has no %q", from)
	}
	return v1, []byte(strings.Replace(string(v1), from, to, 1))
}

// liveEngine returns the day of events and an engine of the bundled cards
// ruleset, as cepheus run builds it (5 s out of order).
func liveEngine(b *testing.B) (string, *cep.Engine) {
	b.Helper()
	events, err := liveEvents()
	if err != nil {
		b.Fatal(err)
	}
	v1, _ := cardsSources(b)
	rs, err := cep.CompileRuleset("cards.cep", v1)
	if err != nil {
		b.Fatal(err)
	}
	e, err := cep.New(cep.WithRuleset(rs), cep.WithOutOfOrderness(5*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	return events, e
}

// liveRun is one bounded cepheus run of the cards ruleset over the day of
// events, with a monitor when m is set (its snapshot read every 250 ms,
// as an exporter scraped that often would) and a shadow version of
// shadow's source deployed as soon as the job is ready.
func liveRun(b *testing.B, m *cep.StreamMonitor, shadow []byte) cep.StreamStats {
	b.Helper()
	events, e := liveEngine(b)
	dir := b.TempDir()
	cfg := cep.StreamConfig{
		Events: events, StateDir: filepath.Join(dir, "state"), AlertsDir: filepath.Join(dir, "alerts"),
		ShadowDir: filepath.Join(dir, "shadow"), Parallelism: 2, Monitor: m,
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	if m != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(250 * time.Millisecond)
			defer tick.Stop()
			deployed := shadow == nil
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				_ = m.Snapshot()
				if !deployed && m.Ready() {
					deployed = true
					if _, err := m.Deploy(ctx, cep.Deploy{Source: shadow, Shadow: true}); err != nil && ctx.Err() == nil {
						b.Error(err)
					}
				}
			}
		}()
	}
	res, err := e.Stream(ctx, cfg)
	cancel()
	wg.Wait()
	if err != nil {
		b.Fatal(err)
	}
	return res.Stats
}

// BenchmarkLive runs the whole cards ruleset over a day of events as a
// live job does (cep.Engine.Stream: checkpoints every second, exactly-once
// alert files), without a monitor, with one (the figures cepheus serve
// exports, read every 250 ms), and with a shadow version beside the
// active one. ns/op is one run; events/s the records over the run's wall
// time; cpu-s/op the process's CPU time per run (user and system, both
// subtasks and the coordinator).
func BenchmarkLive(b *testing.B) {
	if _, err := liveEvents(); err != nil {
		b.Fatal(err)
	}
	_, v2 := cardsSources(b)
	for _, c := range []struct {
		name    string
		monitor bool
		shadow  []byte
	}{{"plain", false, nil}, {"monitor", true, nil}, {"shadow", true, v2}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var records int64
			cpu0 := cpuTime()
			for b.Loop() {
				var m *cep.StreamMonitor
				if c.monitor {
					m = cep.NewStreamMonitor()
				}
				st := liveRun(b, m, c.shadow)
				records += st.RunRecords
			}
			b.ReportMetric(float64(records)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cpu-s/op")
		})
	}
}

// cpuTime is the process's CPU time so far (user and system).
func cpuTime() time.Duration { return time.Duration(cpuSeconds() * 1e9) }

// BenchmarkDeploySwitch measures the time from a deploy to the switch
// (the deploy call's return, the new version running) at the default
// checkpoint interval (1 s), under load: deploys alternate between the
// two cards versions, one every 1.5 s, while a job reads a day of events
// (followed, so it keeps running once read). ns/op is one deploy's time
// to switch.
func BenchmarkDeploySwitch(b *testing.B) {
	events, e := liveEngine(b)
	v1, v2 := cardsSources(b)
	dir := b.TempDir()
	m := cep.NewStreamMonitor()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := e.Stream(ctx, cep.StreamConfig{
			Events: events, Follow: true, StateDir: filepath.Join(dir, "state"), AlertsDir: filepath.Join(dir, "alerts"),
			Parallelism: 2, Monitor: m,
		})
		done <- err
	}()
	for !m.Ready() {
		time.Sleep(time.Millisecond)
	}
	srcs := [2][]byte{v2, v1}
	var took []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		res, err := m.Deploy(ctx, cep.Deploy{Source: srcs[i%2]})
		if err != nil {
			b.Fatal(err)
		}
		took = append(took, res.Took)
		b.StopTimer()
		time.Sleep(1500 * time.Millisecond)
		b.StartTimer()
	}
	b.StopTimer()
	cancel()
	if err := <-done; err != nil && err != context.Canceled {
		b.Fatal(err)
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Milliseconds()), "median-ms")
	b.ReportMetric(float64(took[len(took)-1].Milliseconds()), "max-ms")
}

// BenchmarkMonitorCost measures what a monitor costs a live job: runs
// without and with one alternate (so that the machine's drift hits both
// alike, in both orders), and monitor-cost-% is the CPU time of the runs with one over
// that of the runs without, minus 1. One op is one pair of runs.
func BenchmarkMonitorCost(b *testing.B) {
	if _, err := liveEvents(); err != nil {
		b.Fatal(err)
	}
	var plain, monitored time.Duration
	run := func(m *cep.StreamMonitor, into *time.Duration) {
		t := cpuTime()
		liveRun(b, m, nil)
		*into += cpuTime() - t
	}
	for i := 0; b.Loop(); i++ {
		// Each first in every other pair: the first run of a pair pays for
		// the garbage of the one before.
		if i%2 == 0 {
			run(nil, &plain)
			run(cep.NewStreamMonitor(), &monitored)
		} else {
			run(cep.NewStreamMonitor(), &monitored)
			run(nil, &plain)
		}
	}
	b.ReportMetric((monitored.Seconds()/plain.Seconds()-1)*100, "monitor-cost-%")
}
