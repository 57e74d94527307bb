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
// failed meanwhile). Never a line per batch: the source counts as
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
}

// lookupReminder is the least time between two warnings of a lookup.
const lookupReminder = time.Minute

// observe takes the outcome of an Enrich call at now and logs what
// changed.
func (h *lookupHealth) observe(o enrich.Outcome, now time.Time, logf func(string, ...any)) {
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
