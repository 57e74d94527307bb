package cep

import (
	"cmp"
	"compress/gzip"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// This file generates the inputs of the stream tests: a seeded log of card
// events for rulesets/cards.cep (internal/gen is not importable from
// package cep, see internal/lint), with dead letters and late events, and
// its reorderings within the out-of-orderness bound.

// streamSeedEnv names the environment variable that sets the seed of the
// stream tests' random choices: the inputs, their shuffles, the
// configurations and the checkpoints a run stops at.
const streamSeedEnv = "CEPHEUS_STREAM_SEED"

// streamSeed returns the seed of CEPHEUS_STREAM_SEED (default 1) and makes
// a failing test print it.
func streamSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(1)
	if s := os.Getenv(streamSeedEnv); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", streamSeedEnv, s, err)
		}
		seed = v
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("random choices from seed %d: rerun with %s=%d", seed, streamSeedEnv, seed)
		}
	})
	return seed
}

// newStreamRand returns the random source of one use of seed, named so
// that adding a use does not change the others' choices.
func newStreamRand(seed uint64, use string) *rand.Rand {
	h := uint64(14695981039346656037)
	for i := range len(use) {
		h = (h ^ uint64(use[i])) * 1099511628211
	}
	return rand.New(rand.NewPCG(seed, h))
}

// logRecord is one line of a generated log and the time that places it in
// the log: the event's timestamp, or, for a late event and a dead letter,
// the time of the events around it.
type logRecord struct {
	at    int64 // milliseconds
	line  string
	dead  bool // the line cannot become an event (with a far-ahead check: an outlier)
	blank bool // an empty line, which is no record
}

// The generated log's start, and the time of its late events: an hour and
// more before it, behind any watermark after the first.
var (
	logStart = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	lateAt   = logStart - time.Hour.Milliseconds()
)

const (
	logCards     = 40
	logCustomers = 16
	logMerchants = 12
	// logMinLate is the number of records generated before the first late
	// event, so that a watermark of any cadence the tests use (at most
	// 64) has passed lateAt before it.
	logMinLate = 300
)

// logCity is where a merchant is: far enough apart for impossible_travel.
type logCity struct {
	country  string
	lat, lon float64
}

var logCities = []logCity{
	{"US", 40.7128, -74.006}, {"GB", 51.5074, -0.1278}, {"FR", 48.8566, 2.3522},
	{"JP", 35.6762, 139.6503}, {"BR", -23.5505, -46.6333}, {"AU", -33.8688, 151.2093},
}

// logGen builds a log: records in the order they are generated, sorted by
// time (stably, so records of one time keep that order) at the end.
type logGen struct {
	rnd    *rand.Rand
	t      int64 // the current time
	id     int
	recs   []logRecord
	padded bool
}

// padding is the field every event of a padded log carries for its
// length: 500 to 1,500 bytes that no rule reads, so that the partition
// reader's batches (at most 256 KiB) hold about 200 records, not 1,024,
// and a run over a few thousand records has many batches. The coordinator
// starts and completes checkpoints only between two batches (it is
// blocked sending to the subtasks while it routes one): with few batches,
// a run would read its whole input before its first checkpoint completes.
func (g *logGen) padding() string {
	if !g.padded {
		return ""
	}
	return `,"pad":"` + strings.Repeat("x", 500+g.rnd.IntN(1001)) + `"`
}

// logConfig says what log genCardLog generates.
type logConfig struct {
	// records is the number of records, about (a fraud script may end
	// past it).
	records int
	// padded adds a field of 500 to 1,500 bytes to every event (padding).
	padded bool
	// outliers adds about 0.3% events far ahead of the others (20 to 40
	// days), each alone among events of the stream's time: what
	// InputPolicy.MaxAhead sends to the dead letters. A log with outliers
	// is meant for engines with a MaxAhead under 20 days; without it, an
	// outlier moves the watermark on and makes the rest of the log late.
	outliers bool
}

// genCardLog returns a log over the cards, customers and merchants above,
// in time order: normal authorizations (some captured), captures, refunds,
// account events (no card: the card keys are null), scripted fraud for
// every rule of cards.cep, a jump of 61 days halfway (every card then
// wakes up dormant), about 0.4% dead letters, 0.4% late events and 0.3%
// blank lines. A third of the records share their time with the one
// before. No late event or outlier comes within 30 records after the jump
// (nor an outlier before it, nor at the start or the end), where a far-ahead check
// still holds events back: what it does then depends on the order of the
// records, which the shuffles must not change.
func genCardLog(rnd *rand.Rand, cfg logConfig) []logRecord {
	n := cfg.records
	g := &logGen{rnd: rnd, t: logStart, padded: cfg.padded}
	jumpAt := -1 // the record the jump came before
	burst := false
	for len(g.recs) < n {
		if !burst && len(g.recs) >= n/4 {
			// One merchant card burst (merchant_card_burst): every card
			// at merchant m0 within 6 minutes, in the order of the cards
			// (the log's random choices untouched).
			burst = true
			for c := range logCards {
				g.id++
				m := logCities[0]
				g.recs = append(g.recs, logRecord{at: g.t + int64(c)*9000, line: fmt.Sprintf(
					`{"ts":%q,"type":"auth","event_id":"e%d","customer_id":"c%d","card_id":"k%d","amount":3,"currency":"EUR","merchant_id":"m0","merchant_country":%q,"mcc":"5411","card_country":%q,"device_id":"d2","ip":"10.0.0.%d","ip_country":%q,"lat":%v,"lon":%v,"is_fraud":false,"scenario":""%s}`,
					logTime(g.t+int64(c)*9000), g.id, c%logCustomers, c, m.country, m.country, c, m.country, m.lat, m.lon, g.padding())})
			}
		}
		if jumpAt < 0 && len(g.recs) >= n/2 {
			g.t += 61 * 24 * time.Hour.Milliseconds()
			jumpAt = len(g.recs)
		}
		settled := jumpAt < 0 || len(g.recs) >= jumpAt+30
		calm := settled && len(g.recs) >= logMinLate && len(g.recs) < n-30 && (jumpAt >= 0 || len(g.recs) < n/2-30)
		switch r := rnd.Float64(); {
		case r < 0.004:
			g.dead()
		case r < 0.008 && len(g.recs) >= logMinLate && settled:
			g.late()
		case r < 0.011 && cfg.outliers && calm:
			g.outlier()
		case r < 0.014:
			g.recs = append(g.recs, logRecord{at: g.t, blank: true})
		case r < 0.04:
			g.script()
		case r < 0.12:
			g.account(g.t, []string{"login", "new_device", "password_reset", "transfer"}[rnd.IntN(4)], rnd.IntN(logCustomers), rnd.IntN(8))
		default:
			g.normal()
		}
		if rnd.Float64() >= 0.35 {
			g.t += int64(1+rnd.IntN(15)) * 1000
		}
	}
	slices.SortStableFunc(g.recs, func(a, b logRecord) int { return cmp.Compare(a.at, b.at) })
	return g.recs
}

func (g *logGen) pick(vs ...float64) float64 { return vs[g.rnd.IntN(len(vs))] }

// card appends a card event at ts; device "" is card-present.
func (g *logGen) card(ts int64, typ string, card, merchant int, amount float64, device string) {
	g.id++
	m := logCities[merchant%len(logCities)]
	home := logCities[(card%logCustomers)%len(logCities)]
	g.recs = append(g.recs, logRecord{at: ts, line: fmt.Sprintf(
		`{"ts":%q,"type":%q,"event_id":"e%d","customer_id":"c%d","card_id":"k%d","amount":%s,"currency":"EUR","merchant_id":"m%d","merchant_country":%q,"mcc":"5411","card_country":%q,"device_id":%q,"ip":"10.0.0.%d","ip_country":%q,"lat":%v,"lon":%v,"is_fraud":false,"scenario":""%s}`,
		logTime(ts), typ, g.id, card%logCustomers, card, strconv.FormatFloat(amount, 'f', -1, 64),
		merchant, m.country, home.country, device, card, m.country, m.lat, m.lon, g.padding())})
}

// account appends an account event (no card) at ts.
func (g *logGen) account(ts int64, typ string, customer, device int) {
	g.id++
	amount := 0.0
	if typ == "transfer" {
		amount = g.pick(50, 1500, 4000)
	}
	g.recs = append(g.recs, logRecord{at: ts, line: fmt.Sprintf(
		`{"ts":%q,"type":%q,"event_id":"e%d","customer_id":"c%d","amount":%v,"device_id":"d%d","ip_country":"NG"%s}`,
		logTime(ts), typ, g.id, customer, amount, device, g.padding())})
}

// normal appends a normal card event: an authorization (captured within
// 20 minutes, at the same amount, seven times in eight when it is 100 or
// more), a stray capture or a refund.
func (g *logGen) normal() {
	rnd := g.rnd
	// Nine in ten of a card's events are at one of the merchants of its
	// home city, so that impossible_travel and large_then_foreign fire on
	// some cards, not on every one.
	card := rnd.IntN(logCards)
	merchant := (card%logCustomers)%len(logCities) + len(logCities)*rnd.IntN(logMerchants/len(logCities))
	if rnd.IntN(10) == 0 {
		merchant = rnd.IntN(logMerchants)
	}
	device := ""
	if rnd.IntN(5) < 2 {
		device = "d" + strconv.Itoa(card%8)
	}
	switch r := rnd.Float64(); {
	case r < 0.7:
		amount := g.pick(0.5, 1.5, 1.9, 20, 35, 120, 150, 250, 600, 900, 2500)
		g.card(g.t, "auth", card, merchant, amount, device)
		if amount >= 100 && rnd.IntN(8) != 0 {
			g.card(g.t+int64(1+rnd.IntN(20))*time.Minute.Milliseconds(), "capture", card, merchant, amount, device)
		}
	case r < 0.9:
		g.card(g.t, "capture", card, merchant, g.pick(120, 150, 250, 600, 900), device)
	default:
		g.card(g.t, "refund", card, merchant, g.pick(30, 60), device)
	}
}

// script appends the events of one fraud instance, from now on.
func (g *logGen) script() {
	rnd := g.rnd
	card, merchant := rnd.IntN(logCards), rnd.IntN(logMerchants)
	sec := int64(1000)
	switch rnd.IntN(5) {
	case 0: // card testing: probes, then a cash-out
		n := 5 + rnd.IntN(2)
		for i := range n {
			g.card(g.t+int64(i)*20*sec, "auth", card, merchant, g.pick(0.5, 1, 1.5, 1.9), "d1")
		}
		g.card(g.t+int64(n)*20*sec+30*sec, "auth", card, merchant, 900, "d1")
	case 1: // velocity burst
		for i := range 11 {
			g.card(g.t+int64(i)*15*sec, "auth", card, merchant, 10, "")
		}
	case 2: // account takeover
		customer, device := rnd.IntN(logCustomers), 8+rnd.IntN(4)
		g.account(g.t, "password_reset", customer, device)
		g.account(g.t+5*60*sec, "new_device", customer, device)
		g.account(g.t+20*60*sec, "transfer", customer, device)
	case 3: // refund abuse
		for i := range 3 {
			g.card(g.t+int64(i)*3600*sec, "refund", card, merchant, 30, "")
		}
	case 4: // large, then foreign
		g.card(g.t, "auth", card, merchant, 3000, "")
		g.card(g.t+180*sec, "auth", card, merchant+1, 250, "")
	}
}

// dead appends a record that cannot become an event.
func (g *logGen) dead() {
	g.id++
	line := []string{
		`not json`,
		fmt.Sprintf(`{"type":"auth","event_id":"e%d","card_id":"k1","amount":5}`, g.id),
		fmt.Sprintf(`{"ts":"yesterday","type":"auth","event_id":"e%d","card_id":"k1"}`, g.id),
		fmt.Sprintf(`{"ts":%q,"type":"auth","card_id":`, logTime(g.t)),
	}[g.rnd.IntN(4)]
	g.recs = append(g.recs, logRecord{at: g.t, line: line, dead: true})
}

// late appends a card event an hour or more behind the log's start, placed
// at the current time: late wherever the shuffles move it.
func (g *logGen) late() {
	n := len(g.recs)
	g.card(lateAt-int64(g.rnd.IntN(3600))*1000, "auth", g.rnd.IntN(logCards), g.rnd.IntN(logMerchants), 150, "")
	g.recs[n].at = g.t
}

// outlier appends a card event 20 to 40 days ahead of the stream, placed
// at the current time, then a normal event at the same time: the far-ahead
// check holds the outlier back until that event and sends it to the dead
// letters, wherever the shuffles move the two (together).
func (g *logGen) outlier() {
	n := len(g.recs)
	g.card(g.t+int64(20+g.rnd.IntN(20))*24*time.Hour.Milliseconds(), "auth", g.rnd.IntN(logCards), g.rnd.IntN(logMerchants), 150, "")
	g.recs[n].at, g.recs[n].dead = g.t, true
	g.normal()
}

func logTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// shuffleLog reorders log within maxShift milliseconds: every distinct
// time moves later by its own random delay in [0, maxShift], and the log
// is sorted by the delayed times, stably. The records of one time stay
// together and in their order (so equal-timestamp events of a key keep
// theirs), and an event is preceded only by events at most maxShift later
// than it: with maxShift below the out-of-orderness bound, no event
// becomes late, and the late ones, an hour behind, stay late. from[i] is
// the index in log of the record at position i.
func shuffleLog(rnd *rand.Rand, log []logRecord, maxShift int64) (lines []string, from []int) {
	delay := map[int64]int64{}
	from = make([]int, len(log))
	for i, r := range log {
		from[i] = i
		if _, ok := delay[r.at]; !ok {
			delay[r.at] = rnd.Int64N(maxShift + 1)
		}
	}
	slices.SortStableFunc(from, func(a, b int) int {
		return cmp.Compare(log[a].at+delay[log[a].at], log[b].at+delay[log[b].at])
	})
	lines = make([]string, len(log))
	for i, j := range from {
		lines[i] = log[j].line
	}
	return lines, from
}

// writeLogFile writes lines as a JSON-lines file at path, gzip-compressed
// when gz is set.
func writeLogFile(t *testing.T, path string, lines []string, gz bool) {
	t.Helper()
	data := []byte(strings.Join(lines, "\n") + "\n")
	if gz {
		var b strings.Builder
		zw := gzip.NewWriter(&b)
		if _, err := zw.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		data = []byte(b.String())
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
