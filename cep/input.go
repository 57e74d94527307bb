package cep

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/event/jsonev"
	"github.com/cepheus-cep/cepheus/rules"
	"github.com/cepheus-cep/cepheus/runtime"
)

// TimeUnit is the unit of event times written in JSON as numbers.
type TimeUnit uint8

// The time units.
const (
	// Millis: milliseconds since the Unix epoch (the default).
	Millis TimeUnit = iota
	// Seconds: seconds since the Unix epoch, perhaps with a fraction.
	Seconds
)

// InputPolicy is what a backtest does with input that would spoil a run
// (docs/decisions.md, "Bad times"). The zero value checks nothing, as the
// runs of conformance and differential tests need (their times are a few
// milliseconds from the epoch); `cepheus backtest` turns every check on
// unless told otherwise. [Engine.Stream] applies TimeUnit,
// CheckNumericTimes and MaxAhead; MaxDeadFraction and GiveUpAfter are
// [Engine.Run]'s alone: a live job sends the records to the dead letters
// and goes on, as `cepheus run` does.
type InputPolicy struct {
	// TimeUnit is the unit of time fields written as numbers.
	TimeUnit TimeUnit
	// CheckNumericTimes refuses (sends to the dead letters, with a reason
	// naming the likely unit) a time written as a number that is no time
	// between 2000 and 2100 in TimeUnit: epoch seconds read as
	// milliseconds land in January 1970. For inputs whose unit nobody
	// stated.
	CheckNumericTimes bool
	// MaxAhead, when positive, sends to the dead letters an event whose
	// time is more than MaxAhead after the stream's (the newest time let
	// through so far), unless the next events confirm the jump (see
	// runtime.SubtaskConfig.MaxAhead), so that one bad time cannot move
	// the watermark and make the rest of the input late.
	MaxAhead time.Duration
	// MaxDeadFraction, when positive, fails a run in which more than this
	// fraction of the records went to the dead letters, with an
	// [*InputError] (the summary is still returned). 0: never.
	MaxDeadFraction float64
	// GiveUpAfter, when positive, stops a run once that many records were
	// read and none became an event, with an [*InputError]. 0: read on.
	GiveUpAfter int64
}

func (p InputPolicy) validate() error {
	if p.TimeUnit > Seconds || p.MaxAhead < 0 || p.MaxDeadFraction < 0 || p.MaxDeadFraction > 1 || p.GiveUpAfter < 0 {
		return fmt.Errorf("cep: backtest: invalid input policy %+v", p)
	}
	return nil
}

// decoder applies the policy to the decoder's configuration.
func (p InputPolicy) decoder(dc *jsonev.Config) {
	dc.TimeUnit = jsonev.Millis
	if p.TimeUnit == Seconds {
		dc.TimeUnit = jsonev.Seconds
	}
	dc.CheckNumericTimes = p.CheckNumericTimes
}

// InputError is a backtest whose input (nearly) all went to the dead
// letters: a schema, a key field or a time unit that does not match the
// events, or a lookup failing closed that cannot read its source.
type InputError struct {
	Ruleset       string
	Records, Dead int64
	// Rejected are the dead records that decoded, but that a lookup
	// failing closed (on failure closed) rejected: its source failed.
	Rejected int64
	// FirstLine and FirstReason are the first dead record's line and why;
	// FirstFile the file (or partition) of its line in a backtest of
	// several ("" for one file).
	FirstLine   int64
	FirstReason string
	FirstFile   string
	// GaveUp says the run stopped early: nothing decoded in the first
	// Records records.
	GaveUp bool
}

// Error says how many lines went to the dead letters and the first's
// reason. When a lookup failing closed rejected some, it says that they
// went to the dead letters (or did not reach the rules), not that they
// could not be decoded.
func (e *InputError) Error() string {
	rejected := ""
	if e.Rejected > 0 {
		rejected = ", " + strconv.FormatInt(e.Rejected, 10) + " of them rejected by a lookup failing closed"
	}
	var what string
	switch {
	case e.GaveUp && e.Rejected > 0:
		what = fmt.Sprintf("none of the first %d lines reached the rules%s, so the run stopped there", e.Records, rejected)
	case e.GaveUp:
		what = fmt.Sprintf("none of the first %d lines could be decoded, so the run stopped there", e.Records)
	case e.Rejected > 0:
		what = fmt.Sprintf("%d of %d lines went to the dead letters%s", e.Dead, e.Records, rejected)
	default:
		what = fmt.Sprintf("%d of %d lines could not be decoded", e.Dead, e.Records)
	}
	return fmt.Sprintf("cep: backtest: ruleset %s: %s (%s: %s)", e.Ruleset, what, e.FirstWhere(), e.FirstReason)
}

// FirstWhere says where the first dead record is: "line 12", or "a.jsonl
// line 12" when the input had several files.
func (e *InputError) FirstWhere() string {
	where := "line " + strconv.FormatInt(e.FirstLine, 10)
	if e.FirstFile != "" {
		where = e.FirstFile + " " + where
	}
	return where
}

// inputError returns the *InputError of a finished run, or nil; rejected
// are the events its lookups failing closed rejected.
func (p InputPolicy) inputError(rs string, st runtime.Stats, rejected int64, runErr error) error {
	ie := &InputError{Ruleset: rs, Records: st.Records, Dead: st.Dead, Rejected: rejected, FirstLine: st.FirstDeadLine, FirstReason: st.FirstDeadReason, FirstFile: st.FirstDeadFile}
	if errors.Is(runErr, runtime.ErrNothingDecoded) {
		ie.GaveUp = true
		return ie
	}
	if runErr == nil && p.MaxDeadFraction > 0 && st.Records > 0 && float64(st.Dead) > p.MaxDeadFraction*float64(st.Records) {
		return ie
	}
	return nil
}

// namedDeadLetter stamps the ruleset's name on every dead record.
type namedDeadLetter struct {
	ruleset string
	d       runtime.DeadLetter
}

func (n namedDeadLetter) DeadLetter(rec runtime.DeadRecord) error {
	rec.Ruleset = n.ruleset
	return n.d.DeadLetter(rec)
}

// hasNullKey reports whether ev lacks (holds null in) one of the key slots.
// Such an event cannot be keyed by the rule: it is skipped for that rule.
func hasNullKey(ev *event.Event, slots []int) bool {
	for _, s := range slots {
		if ev.Field(s).IsNull() {
			return true
		}
	}
	return false
}

// hasEmptyKey reports whether one of ev's key fields in slots is the
// empty string.
func hasEmptyKey(ev *event.Event, slots []int) bool {
	for _, s := range slots {
		if v, ok := ev.Field(s).AsString(); ok && v == "" {
			return true
		}
	}
	return false
}

// nullableKeys returns the key slots of r that the decoder does not
// require, so that an event may hold null there (a key field of only some
// rules of rs).
func nullableKeys(r *rules.Rule, rs *rules.Ruleset) []int {
	required := rs.DecoderConfig(jsonev.Lenient).Required
	var out []int
	for i, f := range r.KeyFields {
		if !slices.Contains(required, f) {
			out = append(out, r.KeySlots[i])
		}
	}
	return out
}
