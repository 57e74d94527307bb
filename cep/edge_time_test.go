package cep

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/rules"
)

// edgeRules: an absence (a trailing notFollowedBy), and a match with a
// timeout block, both within 30 days.
const edgeRules = `ruleset edges
event time ts
schema {
  ts: time
  k: string
  kind: string
}
rule no_b {
  key k
  pattern {
    begin a where kind == "a"
    notFollowedBy n where kind == "b"
    within 30d
  }
}
rule a_then_b {
  key k
  pattern {
    begin a where kind == "a"
    followedBy b where kind == "b"
    within 30d
  }
  timeout {
    severity low
  }
}
`

// TestWindowPastMaxTime: with -time-unit ms any number is a time, so a
// window may end past the largest one. It ends at MaxTime, the final
// watermark, as every window left open at the end of the input does: key
// y's a is matched by its b 800 ms later (the window end used to wrap to
// a time 292 million years before, which timed the partial match out at
// once, at that time), and key x's a, with no b, is an absence and a
// timed-out partial match at the end (both used to be lost). The same
// input 292 million years earlier gives the same alerts, at their times.
//
// Near MinTime, the time since a partial match's first event overflowed
// when the watermark reached a time 2^63 ms later: key z's absence,
// started a millisecond after MinTime, never fired.
func TestWindowPastMaxTime(t *testing.T) {
	rs := loadRules(t, edgeRules)
	for _, base := range []int64{math.MaxInt64 - 1000, 1767225600000} {
		input := fmt.Sprintf(`{"ts":%d,"k":"x","kind":"a"}
{"ts":%d,"k":"y","kind":"a"}
{"ts":%d,"k":"y","kind":"b"}
`, base, base+1, base+801)
		_, alerts := runBacktest(t, input, WithRuleset(rs), WithInputPolicy(InputPolicy{TimeUnit: Millis}))
		var got []string
		for _, a := range alerts {
			got = append(got, fmt.Sprintf("%s %s timed_out=%v", a["rule"], a["key"].(map[string]any)["k"], a["timed_out"] == true))
		}
		slices.Sort(got)
		want := []string{"a_then_b x timed_out=true", "a_then_b y timed_out=false", "no_b x timed_out=false"}
		if !slices.Equal(got, want) {
			t.Errorf("times from %d: alerts %q, want %q", base, got, want)
		}
		for _, a := range alerts {
			if at := a["detected_at"].(string); base > 0 && strings.HasPrefix(at, "-") {
				t.Errorf("times from %d: %s detected at %s, before its events", base, a["rule"], at)
			}
		}
	}
	input := fmt.Sprintf(`{"ts":%d,"k":"z","kind":"a"}
{"ts":1767225600000,"k":"z","kind":"c"}
`, math.MinInt64+1)
	_, alerts := runBacktest(t, input, WithRuleset(rs), WithInputPolicy(InputPolicy{TimeUnit: Millis}))
	var got []string
	for _, a := range alerts {
		got = append(got, fmt.Sprintf("%s %s %s", a["rule"], a["key"].(map[string]any)["k"], a["detected_at"]))
	}
	slices.Sort(got)
	// The end of the window: MinTime + 1 + 30 days.
	end := "-292275055-06-15T16:47:04.193Z"
	if want := []string{"a_then_b z " + end, "no_b z " + end}; !slices.Equal(got, want) {
		t.Errorf("a window from MinTime+1: alerts %q, want %q", got, want)
	}
}

// TestDrainPastMaxTime: a deploy that changes a rule with a window at a
// watermark less than the window before event.MaxTime (-time-unit ms
// takes any number) keeps the old version draining until MaxTime, which
// the final watermark reaches: its end wrapped to a time before the
// switch, so that the old version, and the matches it had begun, went at
// the switch at once.
func TestDrainPastMaxTime(t *testing.T) {
	e := streamEngine(t, deployV1)
	e.plan = e.ownPlan(time.Now())
	src := strings.Replace(deployV1, "amount > 500", "amount > 501", 1)
	rs, err := rules.LoadLayout("v.cep", []byte(src), e.schema)
	if err != nil {
		t.Fatal(err)
	}
	w := event.MaxTime - 1000
	q, res := e.planDeploy(rs, false, w, "test", time.Now())
	if len(res.Changed) != 1 {
		t.Fatalf("changed %v, want one rule", res.Changed)
	}
	i := slices.IndexFunc(q.Rules, func(r planRule) bool { return r.Drain })
	if i < 0 {
		t.Fatalf("no draining rule in %+v", q.Rules)
	}
	if d := q.Rules[i]; d.From != w || d.Until != event.MaxTime {
		t.Errorf("the changed rule's old version drains from %v until %v, want from %v until MaxTime %v", d.From, d.Until, w, event.MaxTime)
	}
	e2, err := e.derive(q)
	if err != nil {
		t.Fatal(err)
	}
	if e2.expired(w) || e2.expired(event.MaxTime-1) {
		t.Errorf("the draining version has passed its window at the switch")
	}
	if !e2.expired(event.MaxTime) {
		t.Errorf("the draining version has not passed its window at the final watermark")
	}
}
