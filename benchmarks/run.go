package benchmarks

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cepheus-cep/cepheus/cep"
	"github.com/cepheus-cep/cepheus/event"
)

// RunConfig says how [Run] drives the operator.
type RunConfig struct {
	// Warmup events are processed before the clock starts.
	Warmup int
	// OutOfOrderness is the watermark bound: every WatermarkEvery events
	// (default [WatermarkEvery]) the watermark becomes the largest
	// timestamp seen - OutOfOrderness - 1 ms, as Flink's
	// forBoundedOutOfOrderness computes it.
	OutOfOrderness time.Duration
	WatermarkEvery int
	// Timeout caps the run (warm-up included, loading excluded); 0: none.
	// A run cut short reports Finished false and how far it got.
	Timeout time.Duration
}

// Result is the outcome of one engine run of one workload. Both engines
// print it as one JSON object per line (cepbench run; the Flink runner's
// bench command), with these field names.
type Result struct {
	Engine   string `json:"engine"` // cepheus or flink
	Workload string `json:"workload"`
	Events   int    `json:"events"` // events in the input
	Warmup   int    `json:"warmup"`
	// Finished is false when the run hit its time cap; Processed is then
	// how many events it had consumed.
	Finished  bool  `json:"finished"`
	Processed int64 `json:"processed"`
	// Matches over the whole run (warm-up included) and the hash of their
	// signatures (see [SignatureHash]).
	Matches int64  `json:"matches"`
	Hash    string `json:"hash"`
	// Seconds, EventsPerSec and CPUSeconds cover the timed part: from the
	// first event after the warm-up to the end of the final flush. A run
	// that hit its cap after the warm-up reports them (Cepheus) over the
	// events it consumed after the warm-up, without a final flush.
	Seconds      float64 `json:"seconds"`
	EventsPerSec float64 `json:"events_per_s"`
	CPUSeconds   float64 `json:"cpu_s"`
	// PeakRSSKiB is the process's VmHWM at the end (the input held in
	// memory included); LoadedRSSKiB its VmRSS once the input was loaded,
	// before the run.
	PeakRSSKiB   int64 `json:"vmhwm_kib"`
	LoadedRSSKiB int64 `json:"rss_loaded_kib"`
	// Runtime names the engine's runtime (Go version; JVM and Flink
	// versions).
	Runtime string `json:"runtime"`
	// Load1 is the machine's 1-minute load average when the run started
	// (/proc/loadavg): other work on the machine shows in the figures.
	Load1 float64 `json:"load1"`
}

// Run runs the events through a keyed operator for the rules, in event
// time: each event goes to ProcessElement with its timestamp, a watermark
// follows every cfg.WatermarkEvery events, and a final watermark of
// event.MaxTime flushes everything (the end of a bounded input). It counts
// the matches and hashes their signatures. One rule runs in a
// cep.Operator; several rules (they must have the same key) run in one
// cep.SharedOperator, as a backtest runs them.
func Run(workload string, rules []*cep.Rule, events []*event.Event, cfg RunConfig) (*Result, error) {
	if cfg.Warmup < 0 || cfg.Warmup >= len(events) {
		return nil, fmt.Errorf("warm-up %d: want 0 <= warm-up < %d events", cfg.Warmup, len(events))
	}
	every := cfg.WatermarkEvery
	if every <= 0 {
		every = WatermarkEvery
	}
	op, err := NewOperator(rules)
	if err != nil {
		return nil, err
	}
	res := &Result{
		Engine: "cepheus", Workload: workload, Events: len(events), Warmup: cfg.Warmup,
		Runtime: goruntime.Version(), LoadedRSSKiB: procStatus("VmRSS"), Load1: load1(),
	}
	var (
		out     cep.Output
		sigs    sigBuffer
		late    int
		bound   = event.Time(cfg.OutOfOrderness.Milliseconds())
		maxTs   = event.MinTime
		lastWm  = event.MinTime
		begin   = time.Now()
		t0      time.Time
		cpu0    float64
		stopErr error
	)
	consume := func() {
		for i := range out.Items {
			switch it := &out.Items[i]; it.Kind {
			case cep.ItemMatch:
				sigs.add(it.Rule, it.Match.Events)
			case cep.ItemLate:
				late++
			}
		}
		out.Reset()
	}
	for i, ev := range events {
		if i == cfg.Warmup {
			t0, cpu0 = time.Now(), cpuSeconds()
		}
		if cfg.Timeout > 0 && i&1023 == 0 && time.Since(begin) > cfg.Timeout {
			res.Processed = int64(i)
			if i > cfg.Warmup {
				// The rate so far, over the events after the warm-up.
				res.Seconds = time.Since(t0).Seconds()
				res.EventsPerSec = float64(i-cfg.Warmup) / res.Seconds
				res.CPUSeconds = cpuSeconds() - cpu0
			}
			res.PeakRSSKiB = procStatus("VmHWM")
			return res, nil
		}
		if err := op.ProcessElement(ev, ev.Time, &out); err != nil {
			stopErr = err
			break
		}
		if ev.Time > maxTs {
			maxTs = ev.Time
		}
		if (i+1)%every == 0 && maxTs != event.MinTime {
			if wm := maxTs - bound - 1; wm > lastWm {
				lastWm = wm
				if err := op.ProcessWatermark(wm, &out); err != nil {
					stopErr = err
					break
				}
			}
		}
		consume()
	}
	if stopErr == nil {
		stopErr = op.ProcessWatermark(event.MaxTime, &out)
	}
	if stopErr != nil {
		return nil, fmt.Errorf("run: %w", stopErr)
	}
	consume()
	elapsed := time.Since(t0)
	res.CPUSeconds = cpuSeconds() - cpu0
	if late > 0 {
		return nil, fmt.Errorf("run: %d late events: the data is more out of order than %v", late, cfg.OutOfOrderness)
	}
	res.Finished = true
	res.Processed = int64(len(events))
	res.Seconds = elapsed.Seconds()
	res.EventsPerSec = float64(len(events)-cfg.Warmup) / res.Seconds
	res.Matches = int64(sigs.n)
	res.Hash = SignatureHash(sigs.strings(rules))
	res.PeakRSSKiB = procStatus("VmHWM")
	return res, nil
}

// Operator is what [Run] drives: a cep.Operator or a cep.SharedOperator.
type Operator interface {
	ProcessElement(ev *event.Event, ts event.Time, out *cep.Output) error
	ProcessWatermark(w event.Time, out *cep.Output) error
}

// NewOperator returns the keyed operator of the rules: a cep.Operator for
// one rule, else a cep.SharedOperator in which rule i has id i (the
// Item.Rule of its matches). Several rules must have the same key fields.
func NewOperator(rules []*cep.Rule) (Operator, error) {
	switch len(rules) {
	case 0:
		return nil, errors.New("no rules")
	case 1:
		return cep.NewOperator(cep.OperatorConfig{NFA: rules[0].NFA, Key: rules[0].Key})
	}
	shared := make([]cep.SharedRule, len(rules))
	for i, r := range rules {
		if !slices.Equal(r.KeyFields, rules[0].KeyFields) {
			return nil, fmt.Errorf("rule %s keys by %v, rule %s by %v: one operator needs one key",
				r.Name, r.KeyFields, rules[0].Name, rules[0].KeyFields)
		}
		shared[i] = cep.SharedRule{ID: i, NFA: r.NFA}
	}
	return cep.NewSharedOperator(cep.SharedConfig{Key: rules[0].Key}, shared...)
}

// sigBuffer records the matches compactly while the clock runs: per match,
// its rule (the Item.Rule of a shared operator's match, 0 from an
// operator of one rule), then per stage the number of events and their
// Seq numbers.
type sigBuffer struct {
	n    int
	data []uint64
}

func (b *sigBuffer) add(rule int, stages [][]*event.Event) {
	b.n++
	b.data = append(b.data, uint64(rule))
	for _, evs := range stages {
		b.data = append(b.data, uint64(len(evs)))
		for _, e := range evs {
			b.data = append(b.data, e.Seq)
		}
	}
}

// strings returns the signature of every match of the rules (see
// [SignatureHash]).
func (b *sigBuffer) strings(rules []*cep.Rule) []string {
	out := make([]string, 0, b.n)
	var s []byte
	d := b.data
	for range b.n {
		s = s[:0]
		r := rules[d[0]]
		d = d[1:]
		if len(rules) > 1 {
			s = append(s, r.Name...)
			s = append(s, ':')
		}
		start := len(s)
		for _, name := range r.NFA.Stages() {
			n := int(d[0])
			d = d[1:]
			if n == 0 {
				continue
			}
			if len(s) > start {
				s = append(s, ';')
			}
			s = append(s, name...)
			s = append(s, '=')
			for k := range n {
				if k > 0 {
					s = append(s, ',')
				}
				s = strconv.AppendUint(s, d[k], 10)
			}
			d = d[n:]
		}
		out = append(out, string(s))
	}
	return out
}

// SignatureHash is the hash both engines compute over their matches. The
// signature of a match lists, in pattern stage order, each stage that took
// events as name=seq,seq,... (seq: the event's 1-based row in the data
// file, in the order the stage took them), joined by ';', e.g.
// "login=12;large=40;foreign=77". In a workload of several rules (W4) the
// signature starts with the rule's name and a colon:
// "chain_07:login=12;large=40;foreign=77". The hash is the SHA-256 of the
// signatures sorted bytewise, each followed by '\n', in hex, cut to 16
// digits. A multiset of matches gives one hash whatever the emission
// order.
func SignatureHash(sigs []string) string {
	slices.Sort(sigs)
	h := sha256.New()
	for _, s := range sigs {
		h.Write([]byte(s))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// procStatus returns a kB field of /proc/self/status (VmHWM, VmRSS), or 0.
func procStatus(field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Bytes()
		if rest, ok := bytes.CutPrefix(line, []byte(field+":")); ok {
			v, err := strconv.ParseInt(string(bytes.TrimSuffix(bytes.TrimSpace(rest), []byte(" kB"))), 10, 64)
			if err != nil {
				return 0
			}
			return v
		}
	}
	return 0
}

// load1 is the 1-minute load average, or 0.
func load1() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, _, _ := strings.Cut(string(data), " ")
	v, _ := strconv.ParseFloat(f, 64)
	return v
}

// ErrMismatch marks a report whose engines disagree.
var ErrMismatch = errors.New("the engines disagree")
