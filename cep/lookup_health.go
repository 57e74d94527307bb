package cep

import (
	"fmt"
	"time"

	"github.com/cepheus-cep/cepheus/enrich"
	"github.com/cepheus-cep/cepheus/internal/humanize"
)

// lookupHealth follows whether the source of one lookup of a live job
// answers, for the job's log (docs/operations.md, "Lookups"): a warning
// when its requests start failing for good (naming the lookup, the
// source, the error, the policy and what it does to the events), a
// reminder at most once a minute while they go on failing, and a line
// when it answers again (how long it failed, how many events' lookups
// failed meanwhile), and a warning when the keys it answers stop having
// records (records). Never a line per batch: the source counts as
// answering again only once a whole Enrich call's requests were all
// answered, and a failure that begins less than a minute after the last
// warning (a source that comes and goes) is warned of once that minute
// has passed, if it still fails (saying for how long it has failed and
// how many events' lookups failed meanwhile), else counted in the next
// warning.
type lookupHealth struct {
	name, source string
	policy       enrich.Policy
	failing      bool
	warned       bool      // the failure going on was warned of
	since        time.Time // when the failure going on began
	events       int64     // events whose lookup failed since then
	short        int64     // events of the failures not warned of, since the last warning
	warnedAt     time.Time // the last warning (zero: none yet)

	// Records: the keys the source answered since the start, those of
	// them it had a record for, and those answered without one since the
	// last with one (dry: their run was warned of).
	keys, found, since0 int64
	dry                 bool
}

// The least run of keys answered without a record that is warned of:
// neverFound while the source has had no record yet, else dryFloor or
// dryGaps times the mean run between two keys with a record so far,
// whichever is more (a run that long has odds of about e^-20 at the rate
// seen before, so a sparse lookup, most of whose keys have no record, is
// not warned of by chance).
const (
	neverFound = 1000
	dryFloor   = 100
	dryGaps    = 20
)

// records follows whether the keys the source answers have records: a
// source emptied while the job runs (a Redis restarted without its data,
// a flush) answers every key without one, and its events get the
// defaults without a failure to warn of. It warns once of such a run of
// keys (or of a source that has had no record from the start), and says
// when records come back.
func (h *lookupHealth) records(o enrich.Outcome, logf func(string, ...any)) {
	if o.NotFound < o.Keys {
		switch {
		case h.dry && h.found == 0:
			logf("lookup %s: a key looked up at its source %s had a record, the first after %s without one",
				h.name, h.source, quantity(h.since0, "key", "keys"))
		case h.dry:
			logf("lookup %s: its source %s has records again, after %s without one",
				h.name, h.source, quantity(h.since0, "key", "keys"))
		}
		h.keys += int64(o.Keys)
		h.found += int64(o.Keys - o.NotFound)
		h.since0, h.dry = 0, false
		return
	}
	least := int64(neverFound)
	if h.found > 0 {
		least = max(dryFloor, dryGaps*(h.keys-h.since0)/h.found) // the rate before the run
	}
	h.keys += int64(o.Keys)
	h.since0 += int64(o.Keys)
	if h.dry || h.since0 < least {
		return
	}
	h.dry = true
	if h.found == 0 {
		logf("warning: lookup %s: none of the %s looked up at its source %s had a record, and their events got the lookup's defaults: does the source hold this lookup's records (the file, the Redis database, ?format=json)? (A lookup most of whose keys have none by design, a list of known bad keys, may say so.)",
			h.name, quantity(h.since0, "key", "keys"), h.source)
		return
	}
	logf("warning: lookup %s: the last %s looked up at its source %s had no record, where %.1f%% of those before had one: their events get the lookup's defaults; was the source emptied, or its records moved (another Redis database, another file)?",
		h.name, quantity(h.since0, "key", "keys"), h.source, 100*float64(h.found)/float64(h.keys-h.since0))
}

// lookupReminder is the least time between two warnings of a lookup.
const lookupReminder = time.Minute

// observe takes the outcome of an Enrich call at now and logs what
// changed.
func (h *lookupHealth) observe(o enrich.Outcome, now time.Time, logf func(string, ...any)) {
	if o.Keys > 0 {
		defer h.records(o, logf)
	}
	switch {
	case o.Failed > 0:
		if !h.failing {
			h.failing, h.warned, h.since, h.events = true, false, now, 0
		}
		h.events += int64(o.Events)
		if !h.warnedAt.IsZero() && now.Sub(h.warnedAt) < lookupReminder {
			return
		}
		short := ""
		if h.short > 0 {
			short = "; " + quantity(h.short, "event's lookup", "events' lookups") + " failed in shorter failures since the last warning"
		}
		if !h.warned {
			// A failure that began within the minute after the last
			// warning is warned of late: say since when, and what it did
			// meanwhile.
			already := ""
			if h.events > int64(o.Events) {
				already = fmt.Sprintf(", for %v: %s failed (%s); last error", failingFor(now.Sub(h.since)),
					quantity(h.events, "event's lookup", "events' lookups"), h.did())
			}
			logf("warning: lookup %s: its source %s fails%s: %v; on failure %s: %s until it answers again%s",
				h.name, h.source, already, o.Err, h.policy, h.does(), short)
		} else {
			logf("warning: lookup %s: its source %s still fails, for %v: %s failed (%s); last error: %v%s",
				h.name, h.source, failingFor(now.Sub(h.since)), quantity(h.events, "event's lookup", "events' lookups"), h.did(), o.Err, short)
		}
		h.warned, h.warnedAt, h.short = true, now, 0
	case o.Answered > 0 && h.failing:
		h.failing = false
		if !h.warned {
			h.short += h.events
			return
		}
		logf("lookup %s: its source %s answers again, after %v of failures: %s failed meanwhile (%s)",
			h.name, h.source, failingFor(now.Sub(h.since)), quantity(h.events, "event's lookup", "events' lookups"), h.did())
	}
}

// failingFor rounds how long a source has failed for its lines: to the
// second from 10 seconds on (the reminders come a minute apart: "1m0s",
// not "1m0.087s"), to the millisecond below.
func failingFor(d time.Duration) time.Duration {
	if d >= 10*time.Second {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

// does says what the policy does to the events of a failed request.
func (h *lookupHealth) does() string {
	if h.policy.Mode == enrich.FailClosed {
		return "the events go to the dead letters"
	}
	return "the events get the lookup's defaults"
}

// did says what the policy did to them.
func (h *lookupHealth) did() string {
	if h.policy.Mode == enrich.FailClosed {
		return "they went to the dead letters"
	}
	return "they got the defaults"
}

// quantity writes n, its thousands separated by commas, and the noun:
// one when n is 1, else many.
func quantity(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return humanize.Int(n) + " " + many
}
