package enrich

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Stats are the counters of a [Lookup] since it was made. A key counts once
// per Enrich call, however many events of the batch carry it.
type Stats struct {
	// Hits are keys served by the cache.
	Hits uint64
	// Misses are keys looked up at the source: not in the cache, or
	// expired there.
	Misses uint64
	// NotFound are keys the source had no record for.
	NotFound uint64
	// Requests are the attempts of requests sent to the source, retries
	// included.
	Requests uint64
	// Timeouts are attempts that hit the timeout.
	Timeouts uint64
	// Failures are attempts that failed, timeouts included: each counts,
	// whether or not a retry followed.
	Failures uint64
	// Unreadable are keys whose record the source answered but could not
	// read ([BadRecords]: a value not of its field's kind, a Redis key of
	// another type): each fails alone, its events getting the policy of a
	// failed request (not retried, not cached); the request is no failure.
	Unreadable uint64
	// Defaulted are events given the defaults because their request failed
	// for good, or their record did not read (fail open).
	Defaulted uint64
	// Rejected are events rejected because their request failed for good,
	// or their record did not read (fail closed).
	Rejected uint64
	// LastError is why the latest failed attempt failed, or the latest
	// record did not read ("" while none did): its error on one line, without the "enrich: " prefix, the
	// reason a summary gives for Failures. Like every error of a source
	// (see [Source]), it never shows a password.
	LastError string
	// Latency is the duration of every attempt, successful or failed, in
	// seconds.
	Latency Histogram
	// Delay is the time each event bound to a source spent in Enrich (the
	// duration of its batch's call: cache, requests, retries), one
	// observation per event, in seconds: what the lookup adds to an
	// event's latency.
	Delay Histogram
}

// Histogram is a distribution of observations.
type Histogram struct {
	// Bounds are the upper bounds of the buckets, increasing; the last
	// bucket, beyond them, is unbounded.
	Bounds []float64
	// Counts are the observations of each bucket (len(Bounds)+1), not
	// cumulative: Counts[i] counts those in (Bounds[i-1], Bounds[i]].
	Counts []uint64
	// Sum is the sum of the observations.
	Sum float64
	// Count is the number of observations.
	Count uint64
}

// latencyBounds are the buckets of [Stats.Latency], in seconds: 0.5ms to 5s.
var latencyBounds = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

// delayBounds are the buckets of [Stats.Delay], in seconds: 10us to 5s.
var delayBounds = []float64{
	0.00001, 0.00002, 0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5,
}

// stats are the live counters of a Lookup, updated by Enrich and its
// request goroutines and read by Stats at any time.
type stats struct {
	hits, misses, notFound       atomic.Uint64
	requests, timeouts, failures atomic.Uint64
	unreadable                   atomic.Uint64
	defaulted, rejected          atomic.Uint64

	// mu guards latency, observed by several request goroutines at once,
	// delay and lastErr.
	mu      sync.Mutex
	latency Histogram
	delay   Histogram
	// lastErr is the error of the latest failed attempt, made text only
	// when Stats is read: a source that is down fails many attempts.
	lastErr error
}

// failed notes err, the error of a failed attempt, as the latest.
func (s *stats) failed(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastErr = err
}

// errorText is err as [Stats.LastError] gives it: on one line, without
// enrich's prefix; "" for nil.
func errorText(err error) string {
	if err == nil {
		return ""
	}
	msg := oneLine(err)
	for strings.HasPrefix(msg, "enrich: ") {
		msg = strings.TrimPrefix(msg, "enrich: ")
	}
	return msg
}

// observeDelay adds the delay d of a call to each of its n events.
func (s *stats) observeDelay(d time.Duration, n int) {
	if n == 0 {
		return
	}
	sec := d.Seconds()
	i, _ := slices.BinarySearch(delayBounds, sec)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay.Counts[i] += uint64(n)
	s.delay.Sum += sec * float64(n)
	s.delay.Count += uint64(n)
}

// observe adds the latency of one attempt.
func (s *stats) observe(d time.Duration) {
	sec := d.Seconds()
	i, _ := slices.BinarySearch(latencyBounds, sec)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency.Counts[i]++
	s.latency.Sum += sec
	s.latency.Count++
}

// AddStats adds from, the counters of an earlier Lookup of the same
// name (its rules' lookups changed: a new Lookup serves them), to the
// lookup's: the counters of a process never go down. Histograms of other
// bounds than the lookup's are left out. The lookup's last error stays
// when it has one (it is the later), else it is from's.
func (l *Lookup) AddStats(from Stats) {
	s := &l.st
	s.hits.Add(from.Hits)
	s.misses.Add(from.Misses)
	s.notFound.Add(from.NotFound)
	s.requests.Add(from.Requests)
	s.timeouts.Add(from.Timeouts)
	s.failures.Add(from.Failures)
	s.unreadable.Add(from.Unreadable)
	s.defaulted.Add(from.Defaulted)
	s.rejected.Add(from.Rejected)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency.add(from.Latency)
	s.delay.add(from.Delay)
	if s.lastErr == nil && from.LastError != "" {
		s.lastErr = errors.New(from.LastError)
	}
}

// add adds the observations of o, of the same bounds, to h.
func (h *Histogram) add(o Histogram) {
	if !slices.Equal(h.Bounds, o.Bounds) || len(h.Counts) != len(o.Counts) {
		return
	}
	for i, n := range o.Counts {
		h.Counts[i] += n
	}
	h.Sum += o.Sum
	h.Count += o.Count
}

// Stats returns the lookup's counters so far. It may be called concurrently
// with Enrich; the counters are read one by one, not as one snapshot.
func (l *Lookup) Stats() Stats {
	s := &l.st
	out := Stats{
		Hits:       s.hits.Load(),
		Misses:     s.misses.Load(),
		NotFound:   s.notFound.Load(),
		Requests:   s.requests.Load(),
		Timeouts:   s.timeouts.Load(),
		Failures:   s.failures.Load(),
		Unreadable: s.unreadable.Load(),
		Defaulted:  s.defaulted.Load(),
		Rejected:   s.rejected.Load(),
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out.Latency = Histogram{
		Bounds: slices.Clone(s.latency.Bounds),
		Counts: slices.Clone(s.latency.Counts),
		Sum:    s.latency.Sum,
		Count:  s.latency.Count,
	}
	out.Delay = Histogram{
		Bounds: slices.Clone(s.delay.Bounds),
		Counts: slices.Clone(s.delay.Counts),
		Sum:    s.delay.Sum,
		Count:  s.delay.Count,
	}
	out.LastError = errorText(s.lastErr)
	return out
}
