package benchmarks

import (
	"embed"
	"fmt"
	"time"

	"github.com/cepheus-cep/cepheus/cep"
	"github.com/cepheus-cep/cepheus/internal/gen"
)

// rulesetFS holds the workload rulesets.
//
//go:embed workloads/*.cep
var rulesetFS embed.FS

// Seed is the generator seed of every workload's data.
const Seed = 1

// WatermarkEvery is how often (in events) the Cepheus runner offers a
// watermark. Flink emits its periodic watermark every 200 ms of processing
// time instead (its default auto-watermark interval); either cadence gives
// the same matches, since no event is ever late.
const WatermarkEvery = 1000

// Workload is one benchmark workload: a ruleset (of one rule, or W4's
// hundred with the same key), the data it
// runs over, and how it is run. Both engines run it with the same event
// count, warm-up and out-of-orderness bound.
type Workload struct {
	// Name is the row name in the results table: W1, W2-3, W2-5, W2-7, W3.
	Name string
	// File is the ruleset file under workloads/.
	File string
	// Events is the number of events; the first Warmup of them are
	// processed before the clock starts.
	Events int
	Warmup int
	// OutOfOrderness is the watermark bound: the data is never further
	// out of order, so no event is late.
	OutOfOrderness time.Duration
	// Columns are the CSV columns of the data file.
	Columns []string
	// Describe says what the data is, for the README and the report.
	Describe string
	// Rules is the number of rules of the ruleset: 0 for one (W1 to W3),
	// 100 for W4.
	Rules int
	// CepheusOnly workloads are not run on Flink (make bench-compare
	// skips it; Describe says why).
	CepheusOnly bool
	// Timeout, when set, is the cap on a run of this workload when it is
	// longer than make bench-compare's (BENCH_TIMEOUT, 120 s): W4-F's
	// Flink run took 40 s here (62 s with start-up), more under load.
	Timeout time.Duration

	generate func(events int) ([]gen.BenchRecord, error)
}

// Workloads are the workloads, in table order.
var Workloads = []*Workload{
	{
		Name: "W1", File: "w1.cep",
		Events: 2_400_000, Warmup: 400_000, OutOfOrderness: time.Second,
		Columns:  []string{"ts", "customer", "kind", "amount", "country", "home"},
		Describe: "100k string keys, Zipf 1.1; 20 min of event time (two 10-min windows, about 12 events per key per window); disorder up to 1 s",
		generate: func(n int) ([]gen.BenchRecord, error) {
			return gen.ChainWorkload(gen.ChainConfig{
				Seed: Seed, Events: n, Keys: scaled(100_000, n, 2_400_000), Skew: 1.1,
				Span: 20 * time.Minute, MaxDelay: time.Second,
			})
		},
	},
	// The W2 sizes keep Flink's runs under a minute on the 2-core dev
	// machine (about 25k, 17k and 1.7k events/s there); the window is 100
	// events, so even W2-7's 50,000 timed events are 500 windows.
	sequence("W2-3", "w2-3.cep", 3, 600_000, 100_000),
	sequence("W2-5", "w2-5.cep", 5, 400_000, 100_000),
	sequence("W2-7", "w2-7.cep", 7, 60_000, 10_000),
	{
		Name: "W3", File: "w3.cep",
		Events: 2_000_000, Warmup: 400_000, OutOfOrderness: time.Second,
		Columns:  []string{"ts", "customer", "kind", "amount"},
		Describe: "100k string keys, uniform; 2 h of event time (two 1-h windows, about 10 events per key per window); disorder up to 1 s",
		generate: func(n int) ([]gen.BenchRecord, error) {
			return gen.VelocityWorkload(gen.VelocityConfig{
				Seed: Seed, Events: n, Keys: scaled(100_000, n, 2_000_000),
				Span: 2 * time.Hour, MaxDelay: time.Second,
			})
		},
	},
	// W4 at 1M keys is Cepheus's alone: Flink's 100 heap-backed CEP
	// operators would each hold state for every key, and Flink manages
	// about 500 events/s on W4 here. W4-F is the same ruleset at the size
	// Flink finishes in a few minutes (capped at 300 s), on both engines. W4's 600,000
	// events (0.6 per key) are what Cepheus's memory allows here: it held
	// 12 to 18 KiB per event of W4 (7.1 GiB for 600,000 events, 16 GiB
	// after 940,000 in a longer trial).
	w4("W4", 1_000_000, W4Events, W4Warmup, true, "; Cepheus only (see W4-F)"),
	w4("W4-F", W4FKeys, W4FEvents, W4FWarmup, false, "; W4 at the size Flink finishes"),
}

func init() {
	Lookup("W4-F").Timeout = 300 * time.Second
}

// W4's sizes.
const (
	W4Events  = 600_000
	W4Warmup  = 100_000
	W4FKeys   = 800
	W4FEvents = 20_000
	W4FWarmup = 4_000
)

// w4 is a W4 workload: W4's 100 rules over the chain stream with keys
// uniform customers and events events (W1's kinds and amounts) in 20 minutes
// of event time, disorder up to 1 s.
func w4(name string, keys, events, warmup int, cepheusOnly bool, why string) *Workload {
	return &Workload{
		Name: name, File: "w4.cep", Rules: W4Rules, CepheusOnly: cepheusOnly,
		Events: events, Warmup: warmup, OutOfOrderness: time.Second,
		Columns: []string{"ts", "customer", "kind", "amount", "country", "home"},
		Describe: fmt.Sprintf("100 rules (W1's, with different constants) in one ruleset; %s string keys, uniform; 20 min of event time (about %.0f events per key per 10-min window); disorder up to 1 s%s",
			groupKeys(keys), float64(events)/float64(keys)/2, why),
		generate: func(n int) ([]gen.BenchRecord, error) {
			return gen.ChainWorkload(gen.ChainConfig{
				Seed: Seed, Events: n, Keys: scaled(keys, n, events),
				Span: 20 * time.Minute, MaxDelay: time.Second,
			})
		},
	}
}

func groupKeys(n int) string {
	switch {
	case n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

// scaled is keys scaled down with a smaller event count (n of full), so
// that a workload generated small keeps its events per key and window.
func scaled(keys, n, full int) int {
	return max(1, int(int64(keys)*int64(min(n, full))/int64(full)))
}

func sequence(name, file string, length, events, warmup int) *Workload {
	return &Workload{
		Name: name, File: file, Events: events, Warmup: warmup,
		Columns:  []string{"ts", "kind"},
		Describe: fmt.Sprintf("Unkeyed; %d sequence types and 6 noise types, uniform; one event per ms", length),
		generate: func(n int) ([]gen.BenchRecord, error) {
			return gen.SequenceWorkload(gen.SequenceConfig{Seed: Seed, Events: n, Length: length, Noise: 6})
		},
	}
}

// Lookup returns the workload with the given name, or nil.
func Lookup(name string) *Workload {
	for _, w := range Workloads {
		if w.Name == name {
			return w
		}
	}
	return nil
}

// Source returns the workload's ruleset file.
func (w *Workload) Source() ([]byte, error) {
	return rulesetFS.ReadFile("workloads/" + w.File)
}

// Compile compiles the workload's ruleset through the public API and
// returns its rules: one, or W4's hundred.
func (w *Workload) Compile() (*cep.Ruleset, []*cep.Rule, error) {
	src, err := w.Source()
	if err != nil {
		return nil, nil, err
	}
	rs, err := cep.CompileRuleset("benchmarks/workloads/"+w.File, src)
	if err != nil {
		return nil, nil, err
	}
	if want := max(1, w.Rules); len(rs.Rules) != want {
		return nil, nil, fmt.Errorf("%s: workload %s has %d rules, the ruleset %d", w.File, w.Name, want, len(rs.Rules))
	}
	return rs, rs.Rules, nil
}

// Generate returns the workload's data (n <= 0: Events events). A smaller
// n gives a smaller stream of the same shape: W2's first n events; for W1
// and W3 the same event time span over proportionally fewer keys.
func (w *Workload) Generate(n int) ([]gen.BenchRecord, error) {
	if n <= 0 {
		n = w.Events
	}
	return w.generate(n)
}
