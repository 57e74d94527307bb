package cep

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/cepheus-cep/cepheus/enrich"
)

// TestBacktestSkipsEventsWithoutTheKey: a key field that only one rule
// uses may be missing (it is not required); that rule skips such events
// and counts them, the other rule still sees them, and no alert is keyed
// by null.
func TestBacktestSkipsEventsWithoutTheKey(t *testing.T) {
	rs := loadRules(t, `
ruleset keys
event time ts
rule by_customer {
  key customer
  pattern {
    begin a where kind == "login"
    followedBy b where kind == "login"
  }
}
rule by_card {
  key customer, card
  pattern {
    begin a where kind == "login"
    followedBy b where kind == "login"
  }
}
`)
	input := `{"ts":"2026-01-01T10:00:00Z","customer":"u1","kind":"login"}
{"ts":"2026-01-01T10:00:01Z","customer":"u1","kind":"login"}
{"ts":"2026-01-01T10:00:02Z","customer":"u1","card":null,"kind":"login"}
`
	sum, alerts := runBacktest(t, input, WithRuleset(rs))
	if got := sum.Rules[1]; got.Rule != "by_card" || got.NoKey != 3 || got.Alerts != 0 {
		t.Errorf("by_card: %+v, want 3 events without the key and no alert", got)
	}
	if got := sum.Rules[0]; got.NoKey != 0 || got.Alerts == 0 {
		t.Errorf("by_customer: %+v, want alerts", got)
	}
	for _, a := range alerts {
		if a["rule"] == "by_card" {
			t.Errorf("alert keyed by null: %v", a)
		}
	}
}

// TestBacktestInputPolicy: the policy's checks reach the run: numbers in
// seconds refused with a unit hint, then a run of dead letters failing with
// an *InputError that names the ruleset and still comes with its summary;
// dead letters name the ruleset; Seconds reads the same input.
func TestBacktestInputPolicy(t *testing.T) {
	rs := loadRules(t, backtestRules)
	var in strings.Builder
	for i := range 10 {
		in.WriteString(`{"ts":` + strconv.Itoa(1714564800+10*i) + `,"card":"c1","type":"auth","amount":1,"country":"US"}` + "\n")
	}
	run := func(p InputPolicy) (*Summary, string, error) {
		src, _ := NewEventSource(strings.NewReader(in.String()), "input")
		var dead bytes.Buffer
		dl := NewDeadLetterWriter(&dead)
		e, err := New(WithRuleset(rs), WithDeadLetters(dl), WithInputPolicy(p))
		if err != nil {
			t.Fatal(err)
		}
		sum, err := e.Run(context.Background(), src)
		dl.Close()
		return sum, dead.String(), err
	}
	sum, dead, err := run(InputPolicy{CheckNumericTimes: true, MaxDeadFraction: 0.5})
	var ie *InputError
	if !errors.As(err, &ie) || ie.Ruleset != "bt" || ie.Dead != 10 || ie.FirstLine != 1 || ie.GaveUp {
		t.Fatalf("err = %v, want an *InputError for ruleset bt, 10 dead from line 1", err)
	}
	if !strings.Contains(err.Error(), "10 of 10 lines could not be decoded") || !strings.Contains(err.Error(), "as epoch seconds it is") {
		t.Errorf("message: %v", err)
	}
	if sum == nil || sum.Dead != 10 {
		t.Errorf("summary %+v, want one with the 10 dead letters", sum)
	}
	if !strings.HasPrefix(dead, `{"ruleset":"bt","line":1,`) {
		t.Errorf("dead letters do not name the ruleset:\n%s", dead)
	}
	_, _, err = run(InputPolicy{CheckNumericTimes: true, GiveUpAfter: 4})
	if !errors.As(err, &ie) || !ie.GaveUp || ie.Records != 4 || !strings.Contains(err.Error(), "none of the first 4 lines") {
		t.Errorf("give up: %v", err)
	}
	sum, _, err = run(InputPolicy{TimeUnit: Seconds, CheckNumericTimes: true, MaxDeadFraction: 0.5})
	if err != nil || sum.Decoded != 10 {
		t.Errorf("seconds: %v, %+v", err, sum)
	}
}

// TestBacktestSummaryOnCancel: a cancelled backtest returns the summary of
// what it read with the error.
func TestBacktestSummaryOnCancel(t *testing.T) {
	rs := loadRules(t, backtestRules)
	src, _ := NewEventSource(strings.NewReader(`{"ts":1,"card":"c1","type":"auth","amount":1,"country":"US"}`+"\n"), "input")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	e, err := New(WithRuleset(rs))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := e.Run(ctx, src)
	if !errors.Is(err, context.Canceled) || sum == nil || sum.Ruleset != "bt" {
		t.Errorf("Backtest = %+v, %v; want a summary and context.Canceled", sum, err)
	}
}

// TestInputErrorLookupRejected: a run whose events a lookup failing
// closed sent to the dead letters fails with an *InputError that counts
// them and says that the lines went to the dead letters, not that they
// could not be decoded.
func TestInputErrorLookupRejected(t *testing.T) {
	rs, err := CompileRuleset("lk.cep", []byte(lookupRules))
	if err != nil {
		t.Fatal(err)
	}
	input := `{"ts": 1000, "card": "k1", "amount": 600}
{"ts": 2000, "card": "k2", "amount": 600}
not json
{"ts": 3000, "card": "k3", "amount": 1500}
`
	holderSpec, _ := lookupSpec(rs, "holder")
	holder := enrich.NewMemSource(holderSpec, nil)
	e, err := New(WithRuleset(rs), WithInputPolicy(InputPolicy{MaxDeadFraction: 0.5}),
		WithLookups(map[string]LookupSource{"holder": holder, "strict": &flakySource{fails: 100}}, LookupOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	src, err := NewEventSource(strings.NewReader(input), "input")
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Run(context.Background(), src)
	var ie *InputError
	if !errors.As(err, &ie) || ie.Dead != 4 || ie.Rejected != 3 {
		t.Fatalf("err = %#v, want an *InputError of 4 dead records, 3 of them rejected by the lookup", err)
	}
	const want = "cep: backtest: ruleset lk: 4 of 4 lines went to the dead letters, 3 of them rejected by a lookup failing closed (line 3: column 1: want a JSON object, found 'n')"
	if err.Error() != want {
		t.Errorf("message\n got  %s\n want %s", err, want)
	}

	// Without lookups, and a run that gave up.
	for _, c := range []struct {
		ie   InputError
		want string
	}{
		{InputError{Ruleset: "r", Records: 10, Dead: 9, FirstLine: 2, FirstReason: "bad"},
			"cep: backtest: ruleset r: 9 of 10 lines could not be decoded (line 2: bad)"},
		{InputError{Ruleset: "r", Records: 4, Dead: 4, FirstLine: 1, FirstReason: "bad", GaveUp: true},
			"cep: backtest: ruleset r: none of the first 4 lines could be decoded, so the run stopped there (line 1: bad)"},
		{InputError{Ruleset: "r", Records: 4, Dead: 4, Rejected: 4, FirstLine: 1, FirstReason: "lookup x: down", GaveUp: true},
			"cep: backtest: ruleset r: none of the first 4 lines reached the rules, 4 of them rejected by a lookup failing closed, so the run stopped there (line 1: lookup x: down)"},
	} {
		if got := c.ie.Error(); got != c.want {
			t.Errorf("message\n got  %s\n want %s", got, c.want)
		}
	}
}
