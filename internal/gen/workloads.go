package gen

// Synthetic streams for the benchmark workloads of benchmarks/ (W1 to W3,
// make bench-compare). Unlike the card generator above, they model no
// behaviour: each is the smallest stream that exercises one kind of
// pattern at a known load. Like it, each is a pure function of its config.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"
)

// BenchRecord is one event of a benchmark workload. A workload uses only
// some of the fields (see [BenchColumns]); the others stay zero.
type BenchRecord struct {
	TS       int64 // event time, ms
	Customer string
	Kind     string
	Amount   int64 // whole units, so that sums are exact in every engine
	Country  string
	Home     string
}

// BenchColumns are the column names [WriteBenchCSV] knows, in the order it
// writes them when asked for several.
var BenchColumns = []string{"ts", "customer", "kind", "amount", "country", "home"}

// WriteBenchCSV writes recs as CSV with a header line naming cols (a
// subset of [BenchColumns], in that order). Values never contain commas,
// quotes or line breaks, so no field is quoted.
func WriteBenchCSV(w io.Writer, cols []string, recs []BenchRecord) error {
	idx := make([]int, len(cols))
	for i, c := range cols {
		j := slices.Index(BenchColumns, c)
		if j < 0 || (i > 0 && j <= idx[i-1]) {
			return fmt.Errorf("gen: bench columns %v: want a subset of %v in that order", cols, BenchColumns)
		}
		idx[i] = j
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	for i, c := range cols {
		if i > 0 {
			bw.WriteByte(',')
		}
		bw.WriteString(c)
	}
	bw.WriteByte('\n')
	var buf []byte
	for i := range recs {
		r := &recs[i]
		buf = buf[:0]
		for k, j := range idx {
			if k > 0 {
				buf = append(buf, ',')
			}
			switch j {
			case 0:
				buf = strconv.AppendInt(buf, r.TS, 10)
			case 1:
				buf = append(buf, r.Customer...)
			case 2:
				buf = append(buf, r.Kind...)
			case 3:
				buf = strconv.AppendInt(buf, r.Amount, 10)
			case 4:
				buf = append(buf, r.Country...)
			case 5:
				buf = append(buf, r.Home...)
			}
		}
		buf = append(buf, '\n')
		if _, err := bw.Write(buf); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// ChainConfig describes W1's stream: keyed events for a three-stage chain
// (also W4's, which runs 100 variants of W1's rule over it).
type ChainConfig struct {
	Seed   uint64
	Events int
	// Keys customers, "c000000" to ..., drawn from a Zipf distribution
	// with exponent Skew (P(rank k) ∝ (k+1)^-Skew; Skew in (1, 10]), or
	// uniformly when Skew is 0.
	Keys int
	Skew float64
	// Span is the event time the events cover, evenly spaced from 0.
	Span time.Duration
	// MaxDelay bounds the disorder (see [delayOrder]).
	MaxDelay time.Duration
}

// The countries of W1's customers.
var benchCountries = []string{"DE", "FR", "US", "GB", "ES", "IT", "NL", "PL", "SE", "BR"}

// ChainWorkload generates W1: per event, kind login_new_device (10 %),
// payment (20 %: amount 101..2000 for 90 % of them, else 1..100; from a
// country other than home for 20 % of them) or one of login, view, logout
// (70 %). Every event carries its customer's home country; country is
// home except on foreign payments.
func ChainWorkload(cfg ChainConfig) ([]BenchRecord, error) {
	if cfg.Events < 1 || cfg.Keys < 1 || cfg.Span <= 0 || cfg.MaxDelay < 0 || (cfg.Skew != 0 && (cfg.Skew <= 1 || cfg.Skew > 10)) {
		return nil, errors.New("gen: chain workload: want Events, Keys, Span > 0, MaxDelay >= 0, Skew 0 or in (1, 10]")
	}
	rnd := newRand(cfg.Seed, 101)
	var zipf *rand.Zipf
	if cfg.Skew != 0 {
		zipf = rand.NewZipf(rnd, cfg.Skew, 1, uint64(cfg.Keys-1))
	}
	names := make([]string, cfg.Keys) // built on first use, shared afterwards
	others := []string{"login", "view", "logout"}
	span := cfg.Span.Milliseconds()
	recs := make([]BenchRecord, cfg.Events)
	for i := range recs {
		var rank int
		if zipf != nil {
			rank = int(zipf.Uint64())
		} else {
			rank = rnd.IntN(cfg.Keys)
		}
		if names[rank] == "" {
			names[rank] = fmt.Sprintf("c%06d", rank)
		}
		home := benchCountries[(rank*7)%len(benchCountries)]
		r := BenchRecord{TS: int64(i) * span / int64(cfg.Events), Customer: names[rank], Home: home, Country: home}
		switch p := rnd.IntN(100); {
		case p < 10:
			r.Kind = "login_new_device"
		case p < 30:
			r.Kind = "payment"
			if rnd.IntN(10) < 9 {
				r.Amount = 101 + rnd.Int64N(1900)
			} else {
				r.Amount = 1 + rnd.Int64N(100)
			}
			if rnd.IntN(5) == 0 {
				r.Country = otherOf(rnd, home)
			}
		default:
			r.Kind = others[rnd.IntN(len(others))]
		}
		recs[i] = r
	}
	return delayOrder(recs, cfg.MaxDelay, newRand(cfg.Seed, 102)), nil
}

func otherOf(rnd *rand.Rand, home string) string {
	for {
		if c := benchCountries[rnd.IntN(len(benchCountries))]; c != home {
			return c
		}
	}
}

// SequenceConfig describes W2's stream: CORE's synthetic sequence
// benchmark (Bucchi et al., PVLDB 15(9), 2022).
type SequenceConfig struct {
	Seed   uint64
	Events int
	// Length pattern types T1..TLength and Noise noise types N1..NNoise
	// (CORE: 6), drawn uniformly.
	Length int
	Noise  int
}

// SequenceWorkload generates W2: unkeyed events of a uniformly drawn kind
// with timestamps 1, 2, 3, ...: one event per millisecond, so a window of
// n ms is a window of n events.
func SequenceWorkload(cfg SequenceConfig) ([]BenchRecord, error) {
	if cfg.Events < 1 || cfg.Length < 1 || cfg.Noise < 0 {
		return nil, errors.New("gen: sequence workload: want Events, Length > 0, Noise >= 0")
	}
	kinds := make([]string, 0, cfg.Length+cfg.Noise)
	for i := 1; i <= cfg.Length; i++ {
		kinds = append(kinds, "T"+strconv.Itoa(i))
	}
	for i := 1; i <= cfg.Noise; i++ {
		kinds = append(kinds, "N"+strconv.Itoa(i))
	}
	rnd := newRand(cfg.Seed, 201)
	recs := make([]BenchRecord, cfg.Events)
	for i := range recs {
		recs[i] = BenchRecord{TS: int64(i) + 1, Kind: kinds[rnd.IntN(len(kinds))]}
	}
	return recs, nil
}

// VelocityConfig describes W3's stream: keyed logins, payments and 2FA
// confirmations for a Kleene loop followed by an absence.
type VelocityConfig struct {
	Seed   uint64
	Events int
	// Keys customers, "c000000" to ..., drawn uniformly.
	Keys int
	// Span is the event time the events cover, evenly spaced from 0.
	Span time.Duration
	// MaxDelay bounds the disorder (see [delayOrder]).
	MaxDelay time.Duration
}

// VelocityWorkload generates W3: per event, kind login (5 %), payment
// (30 %, amount 1..600), 2fa (5 %) or view (60 %).
func VelocityWorkload(cfg VelocityConfig) ([]BenchRecord, error) {
	if cfg.Events < 1 || cfg.Keys < 1 || cfg.Span <= 0 || cfg.MaxDelay < 0 {
		return nil, errors.New("gen: velocity workload: want Events, Keys, Span > 0, MaxDelay >= 0")
	}
	rnd := newRand(cfg.Seed, 301)
	names := make([]string, cfg.Keys)
	span := cfg.Span.Milliseconds()
	recs := make([]BenchRecord, cfg.Events)
	for i := range recs {
		k := rnd.IntN(cfg.Keys)
		if names[k] == "" {
			names[k] = fmt.Sprintf("c%06d", k)
		}
		r := BenchRecord{TS: int64(i) * span / int64(cfg.Events), Customer: names[k]}
		switch p := rnd.IntN(100); {
		case p < 5:
			r.Kind = "login"
		case p < 35:
			r.Kind = "payment"
			r.Amount = 1 + rnd.Int64N(600)
		case p < 40:
			r.Kind = "2fa"
		default:
			r.Kind = "view"
		}
		recs[i] = r
	}
	return delayOrder(recs, cfg.MaxDelay, newRand(cfg.Seed, 302)), nil
}

// delayOrder puts recs (in ts order) in arrival order: a quarter of them,
// drawn at random, arrive up to maxDelay late, and the records are sorted
// by arrival time (ties keep ts order). Every record's ts is then at most
// maxDelay behind the largest ts before it, so a watermark of that
// largest ts - maxDelay - 1 (Flink's bounded out-of-orderness) never makes
// one late.
func delayOrder(recs []BenchRecord, maxDelay time.Duration, rnd *rand.Rand) []BenchRecord {
	d := maxDelay.Milliseconds()
	if d == 0 {
		return recs
	}
	arrive := make([]int64, len(recs))
	order := make([]int32, len(recs))
	for i := range recs {
		arrive[i] = recs[i].TS
		if rnd.IntN(4) == 0 {
			arrive[i] += rnd.Int64N(d + 1)
		}
		order[i] = int32(i)
	}
	slices.SortStableFunc(order, func(a, b int32) int {
		switch {
		case arrive[a] < arrive[b]:
			return -1
		case arrive[a] > arrive[b]:
			return 1
		}
		return 0
	})
	out := make([]BenchRecord, len(recs))
	for i, j := range order {
		out[i] = recs[j]
	}
	return out
}
