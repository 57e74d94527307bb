package cep

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cepheus-cep/cepheus/enrich"
	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/internal/failpoint"
	"github.com/cepheus-cep/cepheus/rules"
)

// This file binds a ruleset's lookups (docs/rules.md, "Lookups") to their
// sources and runs them as the enrichment stage before keying: the events
// of a backtest or of a live job pass through it in arrival order, in
// batches, before the far-ahead check and the routing, so every rule sees
// the same enriched events whatever its key.

// LookupOptions tunes the lookups of a run ([WithLookups]); zero fields
// take enrich's defaults.
type LookupOptions struct {
	// Batch is the number of events enriched together (default 256):
	// their distinct keys missing from the cache go to the source in
	// requests of at most Batch keys.
	Batch int
	// InFlight bounds the requests in flight at once, per lookup.
	InFlight int
	// Timeout bounds each request, for the lookups whose declaration
	// gives no timeout.
	Timeout time.Duration
	// CacheSize and CacheTTL bound the cache in front of each source
	// (CacheSize negative: no cache).
	CacheSize int
	CacheTTL  time.Duration
}

// WithLookups binds the ruleset's lookups to sources, by lookup name. A
// lookup that sources leaves out is unbound: every event gets its
// declared defaults ([Engine.UnboundLookups] names them, for a warning).
// A name the ruleset does not declare is an error of [New]. The engine
// does not close the sources.
func WithLookups(sources map[string]enrich.Source, opts LookupOptions) Option {
	return func(c *config) { c.lookupSources, c.lookupOpts = sources, opts }
}

// checkLookups reports the sources bound to no lookup of the ruleset.
func (c *config) checkLookups() error {
	if c.ruleset == nil {
		return nil
	}
	var errs []error
	names := make([]string, 0, len(c.lookupSources))
	for name := range c.lookupSources {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !slices.ContainsFunc(c.ruleset.Lookups, func(l *rules.Lookup) bool { return l.Name == name }) {
			errs = append(errs, fmt.Errorf("cep: lookup %s is bound, but ruleset %s declares no such lookup%s",
				name, c.ruleset.Name, declaredLookups(c.ruleset)))
		}
	}
	return errors.Join(errs...)
}

func declaredLookups(rs *rules.Ruleset) string {
	if len(rs.Lookups) == 0 {
		return " (it declares none)"
	}
	names := make([]string, len(rs.Lookups))
	for i, l := range rs.Lookups {
		names[i] = l.Name
	}
	return " (it declares " + strings.Join(names, ", ") + ")"
}

// Lookups returns the declarations of the lookups the engine runs: the
// ruleset's, and those of the other versions a live job holds (the first
// declaration of a name wins).
func (e *Engine) Lookups() []*rules.Lookup {
	var out []*rules.Lookup
	add := func(rs *rules.Ruleset) {
		for _, l := range rs.Lookups {
			if !slices.ContainsFunc(out, func(o *rules.Lookup) bool { return o.Name == l.Name }) {
				out = append(out, l)
			}
		}
	}
	add(e.cfg.ruleset)
	for _, cr := range e.rules {
		if cr.rs != nil {
			add(cr.rs)
		}
	}
	return out
}

// UnboundLookups returns the names of the lookups no source is bound to:
// their events get the declared defaults.
func (e *Engine) UnboundLookups() []string {
	var out []string
	for _, l := range e.Lookups() {
		if e.cfg.lookupSources[l.Name] == nil {
			out = append(out, l.Name)
		}
	}
	return out
}

// LookupStats are the counters of one lookup of a run, and why its
// latest failed request failed (LastError).
type LookupStats struct {
	Name  string
	Bound bool
	enrich.Stats
}

// HitRate is the share of keys served by the cache, in [0, 1] (0 when
// none was looked up).
func (s LookupStats) HitRate() float64 {
	if n := s.Hits + s.Misses; n > 0 {
		return float64(s.Hits) / float64(n)
	}
	return 0
}

// enrichStage is the lookups of one run.
type enrichStage struct {
	lookups []*enrich.Lookup
	sig     string // lookupSignature of the engine it was built for
	// fields are the fields (slots and defaults) of each lookup, in the
	// order of lookups; sigHash is a hash of sig, which a repartition
	// record carrying what the lookups gave its event names
	// (appendValues, stream_repartition.go).
	fields  [][]rules.LookupField
	sigHash uint64
	// With logf (a live job's log), health follows each lookup's source
	// (by index in lookups), at the times of now.
	logf   func(format string, args ...any)
	health []lookupHealth
	now    func() time.Time
}

// lookupSignature identifies the lookups of e: their declarations and
// slots.
func lookupSignature(e *Engine) string {
	var b strings.Builder
	for _, d := range e.Lookups() {
		b.WriteString(lookupID(d))
		b.WriteByte(0)
	}
	return b.String()
}

// lookupID identifies the lookup d: its declaration and slots. The events
// held at a switch are looked up again by the lookups of the new version
// whose id the version before had not (settleHeld).
func lookupID(d *rules.Lookup) string {
	var b strings.Builder
	b.WriteString(d.Source)
	for _, f := range d.Fields {
		fmt.Fprintf(&b, "%d,", f.Slot)
	}
	for _, s := range d.KeySlots {
		fmt.Fprintf(&b, "k%d,", s)
	}
	return b.String()
}

// serves reports whether st runs e's lookups (nil: e has none).
func (st *enrichStage) serves(e *Engine) bool {
	if st == nil {
		return len(e.Lookups()) == 0
	}
	return st.sig == lookupSignature(e)
}

// newEnrichStage builds the lookups of a run over the engine's schema;
// nil when the ruleset declares none. With logf, the stage logs when a
// lookup's source starts failing and when it answers again
// (lookupHealth).
func (e *Engine) newEnrichStage(logf func(format string, args ...any)) (*enrichStage, error) {
	decls := e.Lookups()
	if len(decls) == 0 {
		return nil, nil
	}
	o := e.cfg.lookupOpts
	st := &enrichStage{sig: lookupSignature(e), logf: logf, now: time.Now}
	h := fnv.New64a()
	h.Write([]byte(st.sig))
	st.sigHash = h.Sum64()
	for _, d := range decls {
		spec := specOf(d)
		slots := make([]int, len(d.Fields))
		for i, f := range d.Fields {
			slots[i] = f.Slot
		}
		policy := enrich.Policy{Mode: enrich.FailOpen, Retries: d.Retries}
		if d.Closed {
			policy.Mode = enrich.FailClosed
		}
		timeout := o.Timeout
		if d.Timeout > 0 {
			timeout = d.Timeout
		}
		src := e.cfg.lookupSources[d.Name]
		if src != nil && failpoint.Armed() {
			src = inFlightSource{src}
		}
		l, err := enrich.NewLookup(enrich.LookupConfig{
			Spec: spec, KeySlots: d.KeySlots, Slots: slots, Source: src, Policy: policy,
			Timeout: timeout, Batch: o.Batch, InFlight: o.InFlight, CacheSize: o.CacheSize, CacheTTL: o.CacheTTL,
		})
		if err != nil {
			return nil, fmt.Errorf("cep: lookup %s: %w", d.Name, err)
		}
		st.lookups = append(st.lookups, l)
		st.fields = append(st.fields, d.Fields)
		st.health = append(st.health, lookupHealth{name: d.Name, source: fmt.Sprint(src), policy: policy})
	}
	return st, nil
}

// enrich fills the lookup slots of evs (reasons[i] set: event i failed
// closed).
func (st *enrichStage) enrich(ctx context.Context, evs []*event.Event, reasons []string) error {
	return st.run(ctx, nil, evs, reasons)
}

// run is enrich by the lookups of st at the indexes idx only (nil: all).
func (st *enrichStage) run(ctx context.Context, idx []int, evs []*event.Event, reasons []string) error {
	ls := st.lookups
	if idx != nil {
		ls = make([]*enrich.Lookup, len(idx))
		for k, i := range idx {
			ls[k] = st.lookups[i]
		}
	}
	if err := enrich.EnrichAll(ctx, ls, evs, reasons); err != nil || st.logf == nil {
		return err
	}
	var now time.Time
	for i, l := range st.lookups {
		if idx != nil && !slices.Contains(idx, i) {
			continue
		}
		if o := l.LastOutcome(); o.Answered > 0 || o.Failed > 0 {
			if now.IsZero() {
				now = st.now()
			}
			st.health[i].observe(o, now, st.logf)
		}
	}
	return nil
}

// appendValues appends what st's lookups gave ev, for a repartition
// record (appendRepEnriched): per lookup, in the order of st.lookups, 0
// when each of its fields holds its default (the key has no record, is
// null, or the lookup failed open), else 1 and each field's value
// (event.Value.AppendBinary).
func (st *enrichStage) appendValues(b []byte, ev *event.Event) []byte {
	for _, fields := range st.fields {
		defaults := true
		for _, f := range fields {
			if !sameValue(ev.Field(f.Slot), f.Default) {
				defaults = false
				break
			}
		}
		if defaults {
			b = append(b, 0)
			continue
		}
		b = append(b, 1)
		for _, f := range fields {
			b = ev.Field(f.Slot).AppendBinary(b)
		}
	}
	return b
}

var errLookupValues = errors.New("corrupt lookup values")

// applyValues puts in ev's lookup slots the values b holds, written by
// appendValues of a stage of the same lookups (sigHash).
func (st *enrichStage) applyValues(ev *event.Event, b []byte) error {
	for _, fields := range st.fields {
		if len(b) == 0 {
			return errLookupValues
		}
		given := b[0] == 1
		if b[0] > 1 {
			return errLookupValues
		}
		b = b[1:]
		for _, f := range fields {
			v := f.Default
			if given {
				var err error
				// A value of another kind than the field's is no value
				// the lookup gave (a record of other lookups, damaged).
				if v, b, err = event.DecodeValue(b); err != nil || !v.IsNull() && v.Kind() != f.Kind {
					return errLookupValues
				}
			}
			ev.Fields[f.Slot] = v
		}
	}
	if len(b) != 0 {
		return errLookupValues
	}
	return nil
}

// sameValue reports whether v and w are the same value, floats by their
// bits (so that -0 is not taken for 0).
func sameValue(v, w event.Value) bool {
	if v.Kind() == event.KindFloat && w.Kind() == event.KindFloat {
		f, _ := v.AsFloat()
		g, _ := w.AsFloat()
		return math.Float64bits(f) == math.Float64bits(g)
	}
	return v.Equal(w)
}

// carry adds the counters of the lookups of from, the stage st replaces
// (either may be nil: no lookups), and of the retired ones (the lookups
// of earlier stages neither has, by name) to those of st's lookups of the
// same names, and returns the retired ones after it: a lookup's counters
// go on across the deploys that change the lookups, also across versions
// without it.
func (st *enrichStage) carry(from *enrichStage, retired map[string]enrich.Stats) map[string]enrich.Stats {
	last := maps.Clone(retired)
	if last == nil {
		last = map[string]enrich.Stats{}
	}
	if from != nil {
		for _, o := range from.lookups {
			last[o.Name()] = o.Stats()
		}
	}
	if st != nil {
		for _, l := range st.lookups {
			if s, ok := last[l.Name()]; ok {
				l.AddStats(s)
				delete(last, l.Name())
			}
		}
	}
	return last
}

// stats returns the counters of every lookup.
func (st *enrichStage) stats() []LookupStats {
	if st == nil {
		return nil
	}
	out := make([]LookupStats, len(st.lookups))
	for i, l := range st.lookups {
		out[i] = LookupStats{Name: l.Name(), Bound: l.Bound(), Stats: l.Stats()}
	}
	return out
}

// defaultLookupBatch is the default of LookupOptions.Batch.
const defaultLookupBatch = 256

// inFlightSource is a source with the failpoint lookup.in-flight in its
// requests, for the crash tests: a kill while a request is in flight
// (used only when a failpoint is armed).
type inFlightSource struct{ enrich.Source }

func (s inFlightSource) Fetch(ctx context.Context, keys []string) ([][]event.Value, error) {
	failpoint.Hit("lookup.in-flight")
	return s.Source.Fetch(ctx, keys)
}

// LookupSource is where a lookup's records come from: a lookup file, a
// Redis server, or any implementation of enrich.Source.
type LookupSource = enrich.Source

// RedisAuth is what a Redis address given without them is opened with:
// credentials and TLS from flags or the environment (never printed).
type RedisAuth struct {
	Username, Password string
	TLS                bool
	CAFile             string // a PEM CA to trust (implies TLS)
}

// ParseLookupBinding splits a -lookup value, NAME=file:PATH or
// NAME=redis://HOST:PORT (rediss:// for TLS; ?format=json for JSON
// strings, ?prefix=P for other keys).
func ParseLookupBinding(s string) (name, target string, err error) {
	name, target, ok := strings.Cut(s, "=")
	switch {
	case !ok || name == "" || target == "":
		return "", "", fmt.Errorf("-lookup %q: want NAME=file:PATH or NAME=redis://HOST:PORT", hideUserinfo(s))
	case strings.HasPrefix(target, "file:"), strings.HasPrefix(target, "redis://"), strings.HasPrefix(target, "rediss://"):
		return name, target, nil
	}
	return "", "", fmt.Errorf("-lookup %s=%s: the source is file:PATH or redis://HOST:PORT", name, hideUserinfo(target))
}

// hideUserinfo replaces what comes before the last '@' of a source (a
// user and a password, in a URL) with ***, for an error message.
func hideUserinfo(s string) string {
	if i := strings.LastIndex(s, "@"); i >= 0 {
		return "***" + s[i:]
	}
	return s
}

// CheckLookupTarget checks the source of a lookup binding (file:PATH,
// redis://..., rediss://...) without opening it: a file needs its path,
// a Redis URL must parse. The error never shows a password.
func CheckLookupTarget(target string) error {
	if target == "file:" {
		return errors.New("the file's path is missing (file:PATH)")
	}
	if strings.HasPrefix(target, "redis://") || strings.HasPrefix(target, "rediss://") {
		if _, err := enrich.ParseRedisURL(target); err != nil {
			return errors.New(strings.TrimPrefix(err.Error(), "enrich: "))
		}
	}
	return nil
}

// OpenLookupSource opens target (file:PATH, redis://..., rediss://...;
// anything else is an error) as the source of rs's lookup name, reading
// records as that lookup declares them. A Redis source does not need the
// server up: a request to a server that is down fails, and the lookup's
// failure policy applies.
func OpenLookupSource(rs *rules.Ruleset, name, target string, auth RedisAuth) (LookupSource, error) {
	spec, err := lookupSpec(rs, name)
	if err != nil {
		return nil, err
	}
	// enrich's errors name the lookup already.
	if path, ok := strings.CutPrefix(target, "file:"); ok {
		f, err := enrich.OpenFile(spec, path)
		if err != nil {
			return nil, err
		}
		return f, nil
	}
	if !strings.HasPrefix(target, "redis://") && !strings.HasPrefix(target, "rediss://") {
		// A path without file: was read as a Redis URL with no scheme.
		return nil, fmt.Errorf("cep: lookup %s: source %s: want file:PATH, redis://HOST:PORT or rediss://HOST:PORT", name, hideUserinfo(target))
	}
	cfg, err := redisConfig(target, auth)
	if err != nil {
		return nil, fmt.Errorf("cep: lookup %s: %w", name, err)
	}
	r, err := enrich.OpenRedis(spec, cfg)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// ErrLookupLogin is what the error of [PingLookupSource] is (errors.Is)
// when the Redis server answered and refused the source's credentials.
var ErrLookupLogin = enrich.ErrLoginRefused

// ErrLookupDatabase is what the error of [PingLookupSource] is
// (errors.Is) when the Redis server answered that it has no database of
// the source's number.
var ErrLookupDatabase = enrich.ErrNoDatabase

// PingLookupSource checks that a Redis source answers (nil for other
// sources).
func PingLookupSource(ctx context.Context, src LookupSource) error {
	if r, ok := src.(*enrich.RedisSource); ok {
		return r.Ping(ctx)
	}
	return nil
}

// LookupDuplicates tells of the lines of a lookup file that repeat the key
// of an earlier line, the first of them named (path:line, key); the last
// record of each key is the one used.
type LookupDuplicates = enrich.Duplicates

// LookupFileDuplicates returns the lines of a lookup file source that
// repeated the key of an earlier line; none for other sources.
func LookupFileDuplicates(src LookupSource) LookupDuplicates {
	if f, ok := src.(*enrich.FileSource); ok {
		return f.Duplicates()
	}
	return LookupDuplicates{}
}

// LookupFileMissing returns the fields of a lookup file source's lookup
// that no record of the file gives, and then the member names of its first
// line (enrich.FileSource.Missing); none for other sources.
func LookupFileMissing(src LookupSource) (fields, members []string) {
	if f, ok := src.(*enrich.FileSource); ok {
		return f.Missing()
	}
	return nil, nil
}

// LookupLoaded is what [LoadLookup] wrote: records, distinct keys, and
// the lines that repeated a key (enrich.Loaded).
type LookupLoaded = enrich.Loaded

// LoadLookup writes the records of the lookup file at path into the
// Redis server at target (HOST:PORT or a redis:// URL), the way a
// source of rs's lookup name opened on the same target reads them (under
// keys namespaced per lookup), and returns how many it wrote and how many
// distinct keys they have (a later record of a key replaces the earlier).
func LoadLookup(ctx context.Context, rs *rules.Ruleset, name, path, target string, auth RedisAuth) (LookupLoaded, error) {
	spec, err := lookupSpec(rs, name)
	if err != nil {
		return LookupLoaded{}, err
	}
	if !strings.Contains(target, "://") {
		target = "redis://" + target
	}
	cfg, err := redisConfig(target, auth)
	if err != nil {
		return LookupLoaded{}, fmt.Errorf("cep: lookup %s: %w", name, err)
	}
	return enrich.Load(ctx, spec, path, cfg) // its errors name the lookup
}

func redisConfig(target string, auth RedisAuth) (enrich.RedisConfig, error) {
	cfg, err := enrich.ParseRedisURL(target)
	if err != nil {
		return cfg, err
	}
	if cfg.Username == "" {
		cfg.Username = auth.Username
	}
	if cfg.Password == "" {
		cfg.Password = auth.Password
	}
	cfg.TLS = cfg.TLS || auth.TLS || auth.CAFile != ""
	if cfg.CAFile == "" {
		cfg.CAFile = auth.CAFile
	}
	return cfg, nil
}

// lookupSpec is the enrich spec of rs's lookup name.
func lookupSpec(rs *rules.Ruleset, name string) (enrich.Spec, error) {
	for _, d := range rs.Lookups {
		if d.Name == name {
			return specOf(d), nil
		}
	}
	return enrich.Spec{}, fmt.Errorf("cep: ruleset %s declares no lookup %s%s", rs.Name, name, declaredLookups(rs))
}

// specOf is the enrich spec of the lookup declaration d.
func specOf(d *rules.Lookup) enrich.Spec {
	spec := enrich.Spec{Name: d.Name, KeyFields: d.KeyFields, KeyKinds: d.KeyKinds, KeyTimes: d.KeyTimes}
	for _, f := range d.Fields {
		spec.Fields = append(spec.Fields, enrich.Field{Name: f.Name, Kind: f.Kind, Time: f.Time, Default: f.Default})
	}
	return spec
}
