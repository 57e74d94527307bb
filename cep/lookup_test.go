package cep

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cepheus-cep/cepheus/enrich"
	"github.com/cepheus-cep/cepheus/event"
)

// logProfiles binds the customer lookup of rulesets/cards.cep to the
// profiles of the generated log's customers (genCardLog): customer ci
// lives in the country of logCities[i%6], where nine in ten of its
// cards' events happen, so away_from_home fires on some.
func logProfiles(t testing.TB, rs *Ruleset) Option {
	t.Helper()
	spec, err := lookupSpec(rs, "customer")
	if err != nil {
		t.Fatal(err)
	}
	tiers := []string{"low", "medium", "high"}
	recs := map[string][]event.Value{}
	for i := range logCustomers {
		// The last customer has no profile: the defaults.
		if i == logCustomers-1 {
			continue
		}
		recs[fmt.Sprintf("c%d", i)] = []event.Value{
			event.String(logCities[i%len(logCities)].country), event.String(tiers[i%3]), event.Int(int64(100 * i)),
		}
	}
	return WithLookups(map[string]LookupSource{"customer": enrich.NewMemSource(spec, recs)}, LookupOptions{Batch: 64})
}

// lookupRules has a lookup with a failure policy of each kind.
const lookupRules = `ruleset lk
event time ts
schema {
  ts: time
  card: string
  amount: float
}
lookup holder {
  key card
  fields {
    country: string default "?"
    limit: int default 1000
  }
  on failure open
}
lookup strict {
  key card
  fields {
    ok: bool default false
  }
  on failure retry 2 then closed
}
rule over_limit {
  key card
  pattern {
    begin a where amount > holder.limit
  }
  emit {
    country: a.holder.country
    ok: a.strict.ok
  }
}
`

// flakySource fails its first fails requests, then answers from recs.
type flakySource struct {
	fails int
	calls int
	recs  map[string][]event.Value
}

func (f *flakySource) Fetch(_ context.Context, keys []string) ([][]event.Value, error) {
	f.calls++
	if f.calls <= f.fails {
		return nil, errors.New("connection refused")
	}
	out := make([][]event.Value, len(keys))
	for i, k := range keys {
		out[i] = f.recs[k]
	}
	return out, nil
}
func (f *flakySource) Close() error   { return nil }
func (f *flakySource) String() string { return "flaky" }

// TestLookupPolicies: a backtest's lookups fill the events' fields (the
// defaults for an unknown key), and the failure policies apply: open
// gives the defaults, retry retries, closed sends the events to the dead
// letters with the reason and their lines.
func TestLookupPolicies(t *testing.T) {
	rs, err := CompileRuleset("lk.cep", []byte(lookupRules))
	if err != nil {
		t.Fatal(err)
	}
	input := `{"ts": 1000, "card": "k1", "amount": 600}
{"ts": 2000, "card": "k2", "amount": 600}
{"ts": 3000, "card": "k3", "amount": 1500}
`
	holderSpec, _ := lookupSpec(rs, "holder")
	holder := enrich.NewMemSource(holderSpec, map[string][]event.Value{
		"k1": {event.String("FR"), event.Int(500)},
		"k2": {event.String("DE"), event.Int(5000)},
	})
	run := func(strict LookupSource) (*Summary, string, string) {
		t.Helper()
		var alerts, dead bytes.Buffer
		dl := NewDeadLetterWriter(&dead)
		e, err := New(WithRuleset(rs), WithAlerts(&alerts), WithDeadLetters(dl),
			WithLookups(map[string]LookupSource{"holder": holder, "strict": strict}, LookupOptions{}))
		if err != nil {
			t.Fatal(err)
		}
		src, err := NewEventSource(strings.NewReader(input), "input")
		if err != nil {
			t.Fatal(err)
		}
		sum, err := e.Run(context.Background(), src)
		if err != nil {
			t.Fatal(err)
		}
		if err := dl.Close(); err != nil {
			t.Fatal(err)
		}
		return sum, alerts.String(), dead.String()
	}
	ok := map[string][]event.Value{"k1": {event.Bool(true)}, "k3": {event.Bool(true)}}

	// Two failures, two retries: the third attempt answers.
	sum, alerts, dead := run(&flakySource{fails: 2, recs: ok})
	if dead != "" || sum.Alerts != 2 ||
		!strings.Contains(alerts, `"key":{"card":"k1"}`) || !strings.Contains(alerts, `"emit":{"country":"FR","ok":true}`) ||
		!strings.Contains(alerts, `"key":{"card":"k3"}`) || !strings.Contains(alerts, `"emit":{"country":"?","ok":true}`) {
		t.Errorf("retried: %d alerts\n%s\ndead letters:\n%s", sum.Alerts, alerts, dead)
	}
	if len(sum.Lookups) != 2 || sum.Lookups[1].Failures != 2 || sum.Lookups[0].NotFound != 1 {
		t.Errorf("lookup stats %+v", sum.Lookups)
	}

	// Every attempt fails: the strict lookup fails closed, each event a
	// dead letter at its line.
	sum, alerts, dead = run(&flakySource{fails: 100})
	if alerts != "" || sum.Dead != 3 || sum.Decoded != 0 {
		t.Errorf("failed closed: %d alerts, %d dead, %d decoded\n%s", sum.Alerts, sum.Dead, sum.Decoded, alerts)
	}
	for i, line := range strings.Split(strings.TrimSpace(dead), "\n") {
		if !strings.Contains(line, fmt.Sprintf(`"line":%d,`, i+1)) || !strings.Contains(line, `lookup strict`) || !strings.Contains(line, "connection refused") {
			t.Errorf("dead letter %d: %s", i+1, line)
		}
	}
	if st := sum.Lookups[1]; st.Rejected != 3 || st.Requests != 3 {
		t.Errorf("strict lookup stats %+v: want 3 rejected in 3 requests (one and two retries)", st)
	}

	// Unbound lookups: the defaults (the holder's limit of 1000 lets only
	// k3 through).
	e, err := New(WithRuleset(rs))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(e.UnboundLookups(), ","); got != "holder,strict" {
		t.Errorf("UnboundLookups = %q", got)
	}
	if _, err := New(WithRuleset(rs), WithLookups(map[string]LookupSource{"nope": holder}, LookupOptions{})); err == nil ||
		!strings.Contains(err.Error(), "lookup nope is bound, but ruleset lk declares no such lookup (it declares holder, strict)") {
		t.Errorf("a binding of an undeclared lookup: %v", err)
	}
}
