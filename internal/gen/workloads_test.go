package gen

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestBenchWorkloadsDeterministic checks that each benchmark stream is a
// pure function of its config, and what the CSV looks like.
func TestBenchWorkloadsDeterministic(t *testing.T) {
	gens := map[string]func() ([]BenchRecord, error){
		"chain": func() ([]BenchRecord, error) {
			return ChainWorkload(ChainConfig{Seed: 3, Events: 5000, Keys: 200, Skew: 1.1, Span: time.Minute, MaxDelay: time.Second})
		},
		"chain-uniform": func() ([]BenchRecord, error) {
			return ChainWorkload(ChainConfig{Seed: 3, Events: 5000, Keys: 200, Span: time.Minute, MaxDelay: time.Second})
		},
		"sequence": func() ([]BenchRecord, error) {
			return SequenceWorkload(SequenceConfig{Seed: 3, Events: 5000, Length: 5, Noise: 6})
		},
		"velocity": func() ([]BenchRecord, error) {
			return VelocityWorkload(VelocityConfig{Seed: 3, Events: 5000, Keys: 200, Span: time.Hour, MaxDelay: time.Second})
		},
	}
	for name, g := range gens {
		a, err := g()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := g()
		if !slices.Equal(a, b) {
			t.Errorf("%s: two runs of one config differ", name)
		}
	}
	recs, _ := gens["velocity"]()
	var buf bytes.Buffer
	if err := WriteBenchCSV(&buf, []string{"ts", "customer", "kind", "amount"}, recs[:2]); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(buf.String(), "\n")
	if len(lines) != 4 || lines[0] != "ts,customer,kind,amount" || strings.Count(lines[1], ",") != 3 || lines[3] != "" {
		t.Errorf("CSV:\n%s", buf.String())
	}
	if err := WriteBenchCSV(&buf, []string{"kind", "ts"}, recs); err == nil {
		t.Error("columns out of order: no error")
	}
}

// TestChainWorkloadUniform checks that Skew 0 spreads the events evenly
// over the keys (W4's million customers), where a Zipf skew concentrates
// them on the first ranks.
func TestChainWorkloadUniform(t *testing.T) {
	recs, err := ChainWorkload(ChainConfig{Seed: 1, Events: 20_000, Keys: 100, Span: time.Minute, MaxDelay: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, r := range recs {
		count[r.Customer]++
	}
	if len(count) != 100 {
		t.Fatalf("%d keys, want 100", len(count))
	}
	for k, n := range count {
		if n < 120 || n > 280 { // 200 expected
			t.Errorf("key %s: %d events, want about 200", k, n)
		}
	}
	if _, err := ChainWorkload(ChainConfig{Seed: 1, Events: 10, Keys: 10, Skew: 0.5, Span: time.Minute}); err == nil {
		t.Error("skew 0.5: no error")
	}
}
