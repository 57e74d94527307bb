package gen

import (
	"cmp"
	"context"
	"io"
	"iter"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
)

// Generator generates the events of one [Config]. It is immutable after
// [New]: every run ([Generator.WriteTo], [Generator.Records]) starts from
// the seed and gives the same events, and runs may proceed concurrently.
type Generator struct {
	cfg Config
	pop *population

	start, dense, end int64 // ms: first possible ts, start of the dense days, end (exclusive)
	maxDelay          int64 // ms

	// normalFactor turns normal events per day into candidate normal
	// activities per day (before the daily-rhythm thinning).
	normalFactor float64
	// rates are the scenario rates, instances per normal event.
	rates [numScenarios]float64
}

// Stats counts what a run wrote.
type Stats struct {
	Events     int            // events written
	Fraud      int            // events with is_fraud true
	ByType     map[string]int // events per type (types with none are absent)
	ByScenario map[string]int // fraud events per scenario (scenarios with none are absent)
	Instances  map[string]int // scenario instances injected, per scenario
}

// New validates cfg and builds the population (customers, cards, devices,
// merchants), whose size is proportional to Customers and Merchants. The
// Generator keeps a copy of cfg.
func New(cfg Config) (*Generator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Scenarios = maps.Clone(cfg.Scenarios)
	g := &Generator{cfg: cfg, pop: buildPopulation(&cfg)}
	g.start = cfg.Start.UnixMilli()
	g.dense = g.start + int64(cfg.HistoryDays)*day
	g.end = g.dense + int64(cfg.Days)*day
	g.maxDelay = cfg.MaxDelay.Milliseconds()
	g.normalFactor = 1 / (meanEventsPerActivity() * meanAcceptance())
	for i := 1; i < numScenarios; i++ {
		g.rates[i] = cfg.Scenarios[scenarioNames[i]] / 100_000
	}
	return g, nil
}

// Config returns the generator's configuration. The caller may modify the
// result; the Generator keeps its own copy.
func (g *Generator) Config() Config {
	c := g.cfg
	c.Scenarios = maps.Clone(c.Scenarios)
	return c
}

// WriteTo generates every event and writes them to w as JSON lines (see
// docs/data.md), in the bounded out-of-order order of [Config.MaxDelay]. It
// buffers about 64 KiB between writes and checks ctx every few thousand
// events. On error (ctx's, or w's) it stops and returns the error and the
// counts so far, which may include events still in the buffer.
func (g *Generator) WriteTo(ctx context.Context, w io.Writer) (Stats, error) {
	const flushAt = 60 << 10
	buf := make([]byte, 0, flushAt+4<<10)
	var werr error
	st, err := g.run(ctx, func(r *Record) bool {
		buf = r.AppendJSON(buf)
		if len(buf) >= flushAt {
			if _, werr = w.Write(buf); werr != nil {
				return false
			}
			buf = buf[:0]
		}
		return true
	})
	if werr != nil {
		return st, werr
	}
	if err != nil {
		return st, err
	}
	if len(buf) > 0 {
		_, err = w.Write(buf)
	}
	return st, err
}

// Records returns the events in the order [Generator.WriteTo] writes them.
// When ctx is done the sequence ends early; check ctx.Err() after the loop.
func (g *Generator) Records(ctx context.Context) iter.Seq[Record] {
	return func(yield func(Record) bool) {
		g.run(ctx, func(r *Record) bool { return yield(*r) })
	}
}

// Sources of activity, in the order that breaks ties between them.
const (
	srcNormal = iota
	srcDormantUse
	srcDormantInstance
	srcScenario // + scenario index
)

// run is the state of one run.
type run struct {
	g    *Generator
	p    *population
	ctx  context.Context
	emit func(*Record) bool
	err  error

	normal     *rand.Rand
	custZipf   *rand.Zipf
	shopZipf   [len(cities)]*rand.Zipf
	onlineZipf [len(countries)]*rand.Zipf
	nextNormal float64

	scen [numScenarios]struct {
		rnd  *rand.Rand
		next float64
	}

	dormantRnd   *rand.Rand
	dormantUses  []dormantUse // normal last uses of dormant cards, by time
	dormantFraud []dormantUse // dormant_card instances, by time

	reorder *rand.Rand
	pending queue // generated events not yet released, by (ts, id)
	window  queue // released events, by (ts + delay, id)
	free    []*Record

	seq     uint64 // the last event id handed out
	devices int    // the last device number handed out

	stats struct {
		events    int
		byType    [numTypes]int
		byScen    [numScenarios]int
		instances [numScenarios]int
	}
}

type dormantUse struct {
	t    int64
	card int32
}

// run generates the events and passes each, in output order, to emit until
// emit returns false or ctx is done. The *Record is valid only during the
// call.
func (g *Generator) run(ctx context.Context, emit func(*Record) bool) (Stats, error) {
	r := &run{g: g, p: g.pop, ctx: ctx, emit: emit}
	cfg := &g.cfg
	r.normal = newRand(cfg.Seed, streamNormal)
	r.custZipf = rand.NewZipf(r.normal, cfg.Skew, 10, uint64(cfg.Customers-1))
	for i, s := range r.p.shops {
		r.shopZipf[i] = rand.NewZipf(r.normal, cfg.Skew, 1, uint64(len(s)-1))
	}
	for i, s := range r.p.onlineShops {
		r.onlineZipf[i] = rand.NewZipf(r.normal, cfg.Skew, 1, uint64(len(s)-1))
	}
	r.reorder = newRand(cfg.Seed, streamReorder)
	r.devices = r.p.devices
	start := float64(g.start)
	r.nextNormal = g.nextArrival(r.normal, start, g.normalFactor)
	for i := 1; i < numScenarios; i++ {
		s := &r.scen[i]
		s.next = math.Inf(1)
		if i == scenDormantCard || g.rates[i] == 0 {
			continue
		}
		s.rnd = newRand(cfg.Seed, streamScenario+uint64(i))
		s.next = g.nextArrival(s.rnd, start, g.rates[i])
	}
	r.planDormant()

	if r.loop() && r.release(g.end-1) { // everything generated is before the end
		for r.window.len() > 0 && r.send(r.window.pop().r) {
		}
	}
	return r.result(), r.err
}

// loop generates activity in time order until the end. It returns false
// when the run stopped early.
func (r *run) loop() bool {
	g := r.g
	for {
		t, src := r.nextNormal, srcNormal
		if len(r.dormantUses) > 0 && float64(r.dormantUses[0].t) < t {
			t, src = float64(r.dormantUses[0].t), srcDormantUse
		}
		if len(r.dormantFraud) > 0 && float64(r.dormantFraud[0].t) < t {
			t, src = float64(r.dormantFraud[0].t), srcDormantInstance
		}
		for i := 1; i < numScenarios; i++ {
			if r.scen[i].next < t {
				t, src = r.scen[i].next, srcScenario+i
			}
		}
		if t >= float64(g.end) {
			return true
		}
		ts := int64(t)
		// Nothing generated from now on is before ts.
		if !r.release(ts) {
			return false
		}
		switch {
		case src == srcNormal:
			r.normalActivity(ts)
			r.nextNormal = g.nextArrival(r.normal, t, g.normalFactor)
		case src == srcDormantUse:
			r.dormantLastUse(ts, r.dormantUses[0].card)
			r.dormantUses = r.dormantUses[1:]
		case src == srcDormantInstance:
			r.instance(scenDormantCard, r.dormantRnd, ts, r.dormantFraud[0].card)
			r.dormantFraud = r.dormantFraud[1:]
		default:
			i := src - srcScenario
			s := &r.scen[i]
			if ts+scenarioSpan[i] < g.end { // else the instance would not fit: skip it
				r.instance(i, s.rnd, ts, -1)
			}
			s.next = g.nextArrival(s.rnd, t, g.rates[i])
		}
	}
}

// nextArrival returns the next arrival after t (ms) of a Poisson process
// with factor arrivals per normal event, whose rate follows the phase
// (history or dense days), or +Inf when there is none before the end.
func (g *Generator) nextArrival(rnd *rand.Rand, t, factor float64) float64 {
	for t < float64(g.end) {
		perDay, phaseEnd := float64(g.cfg.HistoryEventsPerDay), float64(g.dense)
		if t >= phaseEnd {
			perDay, phaseEnd = float64(g.cfg.EventsPerDay), float64(g.end)
		}
		perMs := perDay * factor / day
		if perMs <= 0 {
			t = phaseEnd
			continue
		}
		// The process is memoryless, so restarting it at a phase boundary
		// with the new rate is exact.
		if next := t + rnd.ExpFloat64()/perMs; next < phaseEnd {
			return next
		}
		t = phaseEnd
	}
	return math.Inf(1)
}

// planDormant picks, ahead of time, the dormant cards that the dormant_card
// scenario wakes up and when, and when every dormant card was last used
// before going idle: a scenario instance at t needs a use of its card at
// least dormantIdle before t, and that use must be written first.
func (r *run) planDormant() {
	g := r.g
	r.dormantRnd = newRand(g.cfg.Seed, streamDormantPlan)
	rnd := r.dormantRnd
	cards := slices.Clone(r.p.dormant)
	rnd.Shuffle(len(cards), func(i, j int) { cards[i], cards[j] = cards[j], cards[i] })
	if rate := g.rates[scenDormantCard]; rate > 0 {
		lo := g.start + dormantIdle + hour
		hi := g.end - scenarioSpan[scenDormantCard]
		for t := g.nextArrival(rnd, float64(lo), rate); t < float64(hi) && len(cards) > 0; t = g.nextArrival(rnd, t, rate) {
			ts := int64(t)
			c := cards[0]
			cards = cards[1:]
			r.dormantFraud = append(r.dormantFraud, dormantUse{ts, c})
			last := g.start + rnd.Int64N(ts-dormantIdle-hour-g.start+1)
			r.dormantUses = append(r.dormantUses, dormantUse{last, c})
		}
	}
	// The other dormant cards went idle early enough to be idle at the end.
	if span := g.end - dormantIdle - hour - g.start; span > 0 {
		for _, c := range cards {
			r.dormantUses = append(r.dormantUses, dormantUse{g.start + rnd.Int64N(span), c})
		}
	}
	slices.SortFunc(r.dormantUses, func(a, b dormantUse) int {
		return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(a.card, b.card))
	})
}

// delayedShare is the share of events that the out-of-order window holds
// back, each by a uniform 1..MaxDelay ms.
const delayedShare = 0.25

// release moves the pending events with ts <= upTo into the out-of-order
// window, emitting what the window lets go. It returns false when the run
// must stop.
func (r *run) release(upTo int64) bool {
	for r.pending.len() > 0 && r.pending.min().key <= upTo {
		rec := r.pending.pop().r
		// Released events come in ts order and each one's window key is at
		// least its ts, so a key <= rec.Time can never be undercut: emit.
		for r.window.len() > 0 && r.window.min().key <= int64(rec.Time) {
			if !r.send(r.window.pop().r) {
				return false
			}
		}
		key := int64(rec.Time)
		if r.g.maxDelay > 0 && r.reorder.Float64() < delayedShare {
			key += 1 + r.reorder.Int64N(r.g.maxDelay)
		}
		if key == int64(rec.Time) {
			if !r.send(rec) {
				return false
			}
			continue
		}
		r.window.push(item{key: key, seq: rec.ID, r: rec})
	}
	return true
}

// send emits rec, counts it and recycles it.
func (r *run) send(rec *Record) bool {
	if r.stats.events&4095 == 0 {
		if err := r.ctx.Err(); err != nil {
			r.err = err
			return false
		}
	}
	r.stats.events++
	r.stats.byType[rec.typ]++
	r.stats.byScen[rec.scen]++
	ok := r.emit(rec)
	r.free = append(r.free, rec)
	return ok
}

// newRecord returns a zeroed record to fill and push.
func (r *run) newRecord() *Record {
	if n := len(r.free); n > 0 {
		rec := r.free[n-1]
		r.free = r.free[:n-1]
		*rec = Record{}
		return rec
	}
	return new(Record)
}

// push gives rec its id and queues it, or drops it when it is at or after
// the end.
func (r *run) push(rec *Record) {
	if int64(rec.Time) >= r.g.end {
		r.free = append(r.free, rec)
		return
	}
	r.seq++
	rec.ID = r.seq
	r.pending.push(item{key: int64(rec.Time), seq: rec.ID, r: rec})
}

func (r *run) result() Stats {
	s := Stats{
		Events:     r.stats.events,
		Fraud:      r.stats.events - r.stats.byScen[scenNone],
		ByType:     map[string]int{},
		ByScenario: map[string]int{},
		Instances:  map[string]int{},
	}
	for i, n := range r.stats.byType {
		if n > 0 {
			s.ByType[typeNames[i]] = n
		}
	}
	for i := 1; i < numScenarios; i++ {
		if n := r.stats.byScen[i]; n > 0 {
			s.ByScenario[scenarioNames[i]] = n
		}
		if n := r.stats.instances[i]; n > 0 {
			s.Instances[scenarioNames[i]] = n
		}
	}
	return s
}
