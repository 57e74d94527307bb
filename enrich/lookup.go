package enrich

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cepheus-cep/cepheus/event"
)

// Mode is what a request that failed for good does to its events.
type Mode uint8

const (
	// FailOpen gives the events the defaults, as if no record existed
	// (nothing is cached).
	FailOpen Mode = iota
	// FailClosed rejects the events: Enrich sets their reasons.
	FailClosed
)

// String returns "open" or "closed", as a ruleset writes the mode.
func (m Mode) String() string {
	switch m {
	case FailOpen:
		return "open"
	case FailClosed:
		return "closed"
	}
	return fmt.Sprintf("mode(%d)", m)
}

// Policy is what a failed request does. A request fails when Fetch returns
// an error (a timeout included) or a malformed answer. It is then tried
// again up to Retries more times, each attempt with its own timeout and a
// backoff of 10ms times the attempt's number before it; once all fail,
// Mode decides what its events get. The zero Policy fails open at once.
type Policy struct {
	Mode    Mode
	Retries int // extra attempts after the first; >= 0
}

// String returns the policy as a ruleset writes it after "on failure":
// "open", "closed", "retry 2 then open".
func (p Policy) String() string {
	if p.Retries > 0 {
		return fmt.Sprintf("retry %d then %s", p.Retries, p.Mode)
	}
	return p.Mode.String()
}

// The defaults of [LookupConfig].
const (
	DefaultTimeout   = 250 * time.Millisecond
	DefaultBatch     = 256
	DefaultInFlight  = 4
	DefaultCacheSize = 100_000
	DefaultCacheTTL  = 5 * time.Minute
)

// retryBackoff is the wait before retry n (1-based) of a request: n times
// it.
const retryBackoff = 10 * time.Millisecond

// LookupConfig configures a [Lookup].
type LookupConfig struct {
	// Spec is the lookup as the ruleset declares it.
	Spec Spec
	// KeySlots are the event slots of Spec.KeyFields, in order.
	KeySlots []int
	// Slots are the event slots Spec.Fields are written to, in order; they
	// are distinct and none is a key slot.
	Slots []int
	// Source fetches the records. nil leaves the lookup unbound: every
	// event gets the defaults and no request is made. The Lookup owns it:
	// [Lookup.Close] closes it.
	Source Source
	// Policy is what a failed request does.
	Policy Policy
	// Timeout bounds each attempt of a request. 0 means DefaultTimeout
	// (250ms).
	Timeout time.Duration
	// Batch is the most keys one request asks for. 0 means DefaultBatch
	// (256).
	Batch int
	// InFlight is the most requests of the lookup in flight at once. 0
	// means DefaultInFlight (4).
	InFlight int
	// CacheSize is the most entries (records and "no record") the cache
	// holds; the least recently used goes first. 0 means DefaultCacheSize
	// (100,000); negative disables the cache, so that every batch asks
	// the source for each of its distinct keys.
	CacheSize int
	// CacheTTL is how long an entry serves events after it was fetched. 0
	// means DefaultCacheTTL (5 minutes).
	CacheTTL time.Duration
	// Now is the clock of the cache's TTL. nil means time.Now; tests set
	// it. Request timeouts and latencies always use the real clock.
	Now func() time.Time
}

// Lookup enriches events with the fields of one lookup: the key of each
// event goes through a cache to a [Source], and the record found (or the
// defaults) goes to the event's slots. Enrich is called from one goroutine
// at a time; Stats, Name and Bound may be called concurrently with it.
type Lookup struct {
	spec     Spec
	keySlots []int
	slots    []int
	src      Source
	policy   Policy
	timeout  time.Duration
	batch    int
	inFlight int
	cache    *cache // nil: no cache
	now      func() time.Time
	defaults []event.Value

	// The scratch space of Enrich, owned by the goroutine running it and
	// reused between calls.
	keyBuf   []byte
	pending  map[string]int32 // key of a miss -> its index in missKeys
	missKeys []string         // the distinct keys of the batch to fetch
	waiting  []waiter         // the events waiting for a fetched key
	results  []result         // per miss key
	outs     []requestOut     // per request
	batchNo  uint64           // the Enrich call, for counting hits once per key
	last     Outcome          // of the latest Enrich call

	st stats
}

// Outcome is what the requests of one Enrich call did: how many the
// source answered, how many failed for good (after their retries), the
// events of those (given the defaults under [FailOpen], rejected under
// [FailClosed]) and the error of the last of them, and the keys the
// answered requests read (a record that did not read not among them) and
// how many of those had no record. A call whose keys the cache served all
// sent no request: its Outcome is zero.
type Outcome struct {
	Answered, Failed int
	Events           int
	Err              error
	Keys, NotFound   int
}

// waiter is an event of a batch that waits for the fetch of a key.
type waiter struct {
	ev   int32 // index in the batch
	miss int32 // index in Lookup.missKeys
}

// result is what the events of one fetched key get: vals, or, when vals is
// nil, the request failed for good with reason.
type result struct {
	vals   []event.Value
	reason string
}

// requestOut is the outcome of one request.
type requestOut struct {
	recs [][]event.Value
	err  error
}

// NewLookup checks cfg (every problem reported, joined) and returns its
// Lookup: the spec, the slots' lengths, kinds and defaults' kinds, and the
// limits.
func NewLookup(cfg LookupConfig) (*Lookup, error) {
	if err := validateConfig(cfg); err != nil {
		return nil, err
	}
	l := &Lookup{
		spec:     cfg.Spec,
		keySlots: cfg.KeySlots,
		slots:    cfg.Slots,
		src:      cfg.Source,
		policy:   cfg.Policy,
		timeout:  orDefault(cfg.Timeout, DefaultTimeout),
		batch:    orDefault(cfg.Batch, DefaultBatch),
		inFlight: orDefault(cfg.InFlight, DefaultInFlight),
		now:      cfg.Now,
		defaults: cfg.Spec.defaults(),
		pending:  make(map[string]int32),
	}
	if l.now == nil {
		l.now = time.Now
	}
	if cfg.CacheSize >= 0 {
		ttl := orDefault(cfg.CacheTTL, DefaultCacheTTL)
		l.cache = newCache(orDefault(cfg.CacheSize, DefaultCacheSize), int64(ttl))
	}
	l.st.latency.Bounds = latencyBounds
	l.st.latency.Counts = make([]uint64, len(latencyBounds)+1)
	l.st.delay.Bounds = delayBounds
	l.st.delay.Counts = make([]uint64, len(delayBounds)+1)
	return l, nil
}

func orDefault[T int | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// validateConfig reports every problem of cfg, joined.
func validateConfig(cfg LookupConfig) error {
	errs := []error{cfg.Spec.validate()}
	add := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("enrich: lookup %s: "+format, append([]any{cfg.Spec.Name}, args...)...))
	}
	if len(cfg.KeySlots) != len(cfg.Spec.KeyFields) {
		add("%d key slots for %d key fields", len(cfg.KeySlots), len(cfg.Spec.KeyFields))
	}
	if len(cfg.Slots) != len(cfg.Spec.Fields) {
		add("%d slots for %d fields", len(cfg.Slots), len(cfg.Spec.Fields))
	}
	for i, s := range cfg.KeySlots {
		if s < 0 {
			add("key slot %d is negative (%d)", i, s)
		}
	}
	written := make(map[int]bool, len(cfg.Slots))
	for i, s := range cfg.Slots {
		switch {
		case s < 0:
			add("slot %d is negative (%d)", i, s)
		case written[s]:
			add("slot %d is written by two fields", s)
		}
		written[s] = true
	}
	for _, s := range cfg.KeySlots {
		if written[s] {
			add("slot %d is both a key slot and the slot of a field", s)
		}
	}
	if cfg.Policy.Mode != FailOpen && cfg.Policy.Mode != FailClosed {
		add("unknown failure mode %s", cfg.Policy.Mode)
	}
	if cfg.Policy.Retries < 0 {
		add("negative retries (%d)", cfg.Policy.Retries)
	}
	if cfg.Timeout < 0 {
		add("negative timeout (%v)", cfg.Timeout)
	}
	if cfg.Batch < 0 {
		add("negative batch (%d)", cfg.Batch)
	}
	if cfg.InFlight < 0 {
		add("negative in-flight limit (%d)", cfg.InFlight)
	}
	if cfg.CacheSize > math.MaxInt32 {
		add("cache size %d over %d", cfg.CacheSize, math.MaxInt32)
	}
	if cfg.CacheTTL < 0 {
		add("negative cache TTL (%v)", cfg.CacheTTL)
	}
	return errors.Join(errs...)
}

// Name returns the lookup's name (Spec.Name).
func (l *Lookup) Name() string { return l.spec.Name }

// Bound reports whether the lookup has a source; an unbound lookup gives
// every event the defaults.
func (l *Lookup) Bound() bool { return l.src != nil }

// Policy returns the lookup's failure policy.
func (l *Lookup) Policy() Policy { return l.policy }

// LastOutcome returns what the requests of the latest Enrich call did.
// It is called by the goroutine that calls Enrich, after it.
func (l *Lookup) LastOutcome() Outcome { return l.last }

// Close closes the lookup's source, if any. Enrich must not be called
// after it.
func (l *Lookup) Close() error {
	if l.src == nil {
		return nil
	}
	return l.src.Close()
}

// Enrich fills the lookup's slots of every event evs[i] whose reasons[i] is
// "": the values of its key's record (a null one replaced by the field's
// default), or the defaults when the key is null or has no record.
//
// Keys are served from the cache when it holds them; the others are
// deduplicated and fetched in requests of at most Batch keys, at most
// InFlight of them at once, each attempt bounded by Timeout and retried per
// the Policy. Records and "no record" are cached. When a request fails for
// good, its events get the defaults under [FailOpen] (nothing is cached),
// or, under [FailClosed], reasons[i] is set to "lookup NAME: SOURCE: ERROR"
// (one line) for each of its events, whose slots are left as they are.
//
// REQUIRES: len(reasons) == len(evs); every event's Fields covers the
// lookup's slots.
//
// Enrich returns an error only when ctx is done, ctx.Err(); the events are
// then not all enriched. It does not allocate for events served by the
// cache.
func (l *Lookup) Enrich(ctx context.Context, evs []*event.Event, reasons []string) error {
	if len(reasons) != len(evs) {
		panic(fmt.Sprintf("enrich: lookup %s: %d reasons for %d events", l.spec.Name, len(reasons), len(evs)))
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if l.src == nil {
		for i, ev := range evs {
			if reasons[i] == "" {
				l.write(ev, l.defaults)
			}
		}
		return nil
	}
	l.last = Outcome{}
	began, n := time.Now(), 0
	for _, r := range reasons {
		if r == "" {
			n++
		}
	}
	defer func() { l.st.observeDelay(time.Since(began), n) }()
	var now int64
	if l.cache != nil {
		now = l.now().UnixNano()
	}
	l.batchNo++
	clear(l.pending)
	l.missKeys, l.waiting = l.missKeys[:0], l.waiting[:0]
	var hits uint64
	for i, ev := range evs {
		if reasons[i] != "" {
			continue
		}
		key, ok := appendKey(l.keyBuf[:0], ev, l.keySlots)
		l.keyBuf = key
		if !ok {
			l.write(ev, l.defaults)
			continue
		}
		if l.cache != nil {
			if e := l.cache.get(key, now); e != nil {
				if e.batch != l.batchNo {
					e.batch = l.batchNo
					hits++
				}
				l.write(ev, e.vals)
				continue
			}
		}
		m, ok := l.pending[string(key)]
		if !ok {
			k := string(key)
			m = int32(len(l.missKeys))
			l.missKeys = append(l.missKeys, k)
			l.pending[k] = m
		}
		l.waiting = append(l.waiting, waiter{ev: int32(i), miss: m})
	}
	l.st.hits.Add(hits)
	if len(l.missKeys) == 0 {
		return nil
	}
	l.st.misses.Add(uint64(len(l.missKeys)))
	if err := l.fetchMisses(ctx, now); err != nil {
		return err
	}
	var defaulted, rejected uint64
	for _, w := range l.waiting {
		r := &l.results[w.miss]
		switch {
		case r.vals != nil:
			l.write(evs[w.ev], r.vals)
		case l.policy.Mode == FailOpen:
			l.write(evs[w.ev], l.defaults)
			defaulted++
		default:
			reasons[w.ev] = r.reason
			rejected++
		}
	}
	l.st.defaulted.Add(defaulted)
	l.st.rejected.Add(rejected)
	l.last.Events = int(defaulted + rejected)
	return nil
}

// write puts vals, one per field, in ev's slots.
func (l *Lookup) write(ev *event.Event, vals []event.Value) {
	for j, s := range l.slots {
		ev.Fields[s] = vals[j]
	}
}

// fetchMisses fetches l.missKeys in requests, filling l.results and the
// cache (at now). It returns ctx.Err() when ctx ends first.
func (l *Lookup) fetchMisses(ctx context.Context, now int64) error {
	n := len(l.missKeys)
	nreq := (n + l.batch - 1) / l.batch
	l.outs = resize(l.outs, nreq)
	keysOf := func(r int) []string { return l.missKeys[r*l.batch : min((r+1)*l.batch, n)] }
	if workers := min(l.inFlight, nreq); workers == 1 {
		for r := range nreq {
			if ctx.Err() != nil {
				break
			}
			l.outs[r].recs, l.outs[r].err = l.request(ctx, keysOf(r))
		}
	} else {
		var next atomic.Int32
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for ctx.Err() == nil {
					r := int(next.Add(1)) - 1
					if r >= nreq {
						return
					}
					l.outs[r].recs, l.outs[r].err = l.request(ctx, keysOf(r))
				}
			})
		}
		wg.Wait()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	l.results = resize(l.results, n)
	var notFound uint64
	for r := range nreq {
		lo, keys, out := r*l.batch, keysOf(r), l.outs[r]
		var bad BadRecords
		if errors.As(out.err, &bad) {
			// Some records did not read: their keys fail alone (not
			// cached, so that a record put right is read next time).
			l.last.Err = out.err
			l.st.unreadable.Add(uint64(len(bad)))
			for _, b := range bad {
				l.results[lo+b.Index] = result{reason: l.reason(b.Err)}
			}
		} else if out.err != nil {
			l.last.Failed++
			l.last.Err = out.err
			reason := l.reason(out.err)
			for j := range keys {
				l.results[lo+j] = result{reason: reason}
			}
			continue
		}
		l.last.Answered++
		for j, key := range keys {
			if l.results[lo+j].reason != "" {
				continue // a record that did not read
			}
			vals, found := l.resolve(out.recs[j])
			if !found {
				notFound++
			}
			l.last.Keys++
			l.results[lo+j] = result{vals: vals}
			if l.cache != nil {
				l.cache.put(key, vals, found, now)
			}
		}
		l.outs[r] = requestOut{} // drop the records: the cache keeps its own
	}
	l.st.notFound.Add(notFound)
	l.last.NotFound = int(notFound)
	return nil
}

// resize returns s with length n, its elements zero.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// resolve returns the values an event gets from rec, a record of the source
// (nil: no record): rec with each null replaced by its field's default, or
// the defaults.
func (l *Lookup) resolve(rec []event.Value) (vals []event.Value, found bool) {
	if rec == nil {
		return l.defaults, false
	}
	vals = make([]event.Value, len(rec))
	for j, v := range rec {
		if v.IsNull() {
			v = l.defaults[j]
		}
		vals[j] = v
	}
	return vals, true
}

// reason is the reason of the events of a request that failed for good
// with err: one line, naming the lookup and the source.
func (l *Lookup) reason(err error) string {
	return fmt.Sprintf("lookup %s: %s: %s", l.spec.Name, l.src, oneLine(err))
}

// oneLine is err's message on one line, each run of white space (line
// breaks and tabs included) one space.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// request fetches keys from the source per the policy: up to 1+Retries
// attempts, each bounded by the timeout. It returns the records, or the
// error of the last attempt, or ctx.Err() once ctx is done.
func (l *Lookup) request(ctx context.Context, keys []string) ([][]event.Value, error) {
	for attempt := 0; ; attempt++ {
		if attempt > 0 && !sleep(ctx, time.Duration(attempt)*retryBackoff) {
			return nil, ctx.Err()
		}
		recs, err := l.attempt(ctx, keys)
		var bad BadRecords
		if err == nil || errors.As(err, &bad) {
			return recs, err // records that did not read would not read again
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if attempt == l.policy.Retries {
			if attempt > 0 {
				err = fmt.Errorf("%w (%d attempts)", err, attempt+1)
			}
			return nil, err
		}
	}
}

// attempt is one attempt of a request, counted in the stats.
func (l *Lookup) attempt(ctx context.Context, keys []string) ([][]event.Value, error) {
	actx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	start := time.Now()
	recs, err := l.src.Fetch(actx, keys)
	var bad BadRecords
	partial := errors.As(err, &bad) // an answer, but for some records
	if err == nil || partial {
		if cerr := l.checkAnswer(keys, recs); cerr != nil {
			err, partial = cerr, false
		}
	}
	l.st.observe(time.Since(start))
	l.st.requests.Add(1)
	if partial {
		// Their keys fail alone; the request is no failure.
		l.st.failed(err)
		return recs, err
	}
	if err == nil || ctx.Err() != nil {
		// The caller's ctx ending is no failure of the source.
		return recs, err
	}
	l.st.failures.Add(1)
	if deadlinePassed(actx) {
		l.st.timeouts.Add(1)
		err = fmt.Errorf("no answer within %v", l.timeout)
	}
	l.st.failed(err)
	return nil, err
}

// deadlinePassed reports whether ctx's deadline has passed. A source's
// connection reads up to the attempt's deadline (go-redis sets it from the
// context) and may fail with its own "i/o timeout" before the context's
// timer has marked it done: both are the attempt's timeout.
func deadlinePassed(ctx context.Context) bool {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// checkAnswer reports whether recs is a well-formed answer to keys: one
// entry per key, each nil or a record of the spec.
func (l *Lookup) checkAnswer(keys []string, recs [][]event.Value) error {
	if len(recs) != len(keys) {
		return fmt.Errorf("%d entries for %d keys", len(recs), len(keys))
	}
	for i, rec := range recs {
		if rec == nil {
			continue
		}
		if err := l.spec.checkRecord(rec); err != nil {
			return fmt.Errorf("record of key %q: %w", keys[i], err)
		}
	}
	return nil
}

// sleep waits d or until ctx is done; it reports whether it waited d.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// EnrichAll runs [Lookup.Enrich] of each lookup of ls over the same batch,
// concurrently when there are several, and returns the first ctx error. An
// event rejected by several lookups gets the reason of the first of them in
// ls.
//
// REQUIRES: no two lookups write the same slot, and none reads a key slot
// another writes.
func EnrichAll(ctx context.Context, ls []*Lookup, evs []*event.Event, reasons []string) error {
	switch len(ls) {
	case 0:
		return ctx.Err()
	case 1:
		return ls[0].Enrich(ctx, evs, reasons)
	}
	checkDisjoint(ls)
	// Several lookups may reject one event: the first writes reasons, each
	// other a copy of it taken before any starts, merged in the order of ls.
	own := make([][]string, len(ls))
	errs := make([]error, len(ls))
	for i := 1; i < len(ls); i++ {
		own[i] = append([]string(nil), reasons...)
	}
	var wg sync.WaitGroup
	for i := 1; i < len(ls); i++ {
		wg.Go(func() { errs[i] = ls[i].Enrich(ctx, evs, own[i]) })
	}
	errs[0] = ls[0].Enrich(ctx, evs, reasons)
	wg.Wait()
	for i := range reasons {
		for _, r := range own[1:] {
			if reasons[i] != "" {
				break
			}
			reasons[i] = r[i]
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// checkDisjoint panics when two lookups of ls write the same slot, or one
// reads a key slot that another writes: EnrichAll would race on it.
func checkDisjoint(ls []*Lookup) {
	for i, a := range ls {
		for _, b := range ls[i+1:] {
			for _, s := range a.slots {
				for _, t := range b.slots {
					if s == t {
						panic(fmt.Sprintf("enrich: lookups %s and %s both write slot %d", a.Name(), b.Name(), s))
					}
				}
				for _, t := range b.keySlots {
					if s == t {
						panic(fmt.Sprintf("enrich: lookup %s writes slot %d, a key slot of lookup %s", a.Name(), s, b.Name()))
					}
				}
			}
			for _, s := range b.slots {
				for _, t := range a.keySlots {
					if s == t {
						panic(fmt.Sprintf("enrich: lookup %s writes slot %d, a key slot of lookup %s", b.Name(), s, a.Name()))
					}
				}
			}
		}
	}
}
