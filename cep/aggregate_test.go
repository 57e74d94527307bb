package cep

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestStreamAggregates runs the velocity ruleset (rulesets/velocity.cep)
// over a generated log with a card burst at one merchant, shuffled within
// the out-of-orderness bound, through Engine.Stream at several
// parallelisms and backends, stopped at checkpoints and resumed (the
// events the aggregates held and their windows restored): every way gives
// Engine.Run's alerts over the log in order, each once. The aggregates'
// values are exact at each event's time, so a shuffle within the bound
// changes none. The aggregates spread over workers with hot keys salted
// (StreamConfig.AggregateWorkers, WithAggregateWorkers) give the same
// alerts, and a checkpoint of one setting resumes with the other.
func TestStreamAggregates(t *testing.T) {
	seed := streamSeed(t)
	src, err := os.ReadFile(filepath.Join("..", "rulesets", "velocity.cep"))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := CompileRuleset("velocity.cep", src)
	if err != nil {
		t.Fatal(err)
	}
	log := genCardLog(newStreamRand(seed, "aggregates"), logConfig{records: 3000, padded: true})
	lines := make([]string, len(log))
	for i, r := range log {
		lines[i] = r.line
	}
	sum, alerts, late, dead := batchRun(t, rs, 16, lines)
	want := makeOutputs(t, identityLayout(len(lines)), alerts, late, dead)
	if r := sum.Rules[0]; r.Rule != "merchant_card_burst" || r.Alerts == 0 {
		t.Fatalf("Engine.Run: %+v, want alerts of merchant_card_burst (the log's burst)", r)
	}
	// Small releases (a watermark every 16 events) salt keys too.
	defer func(least int) { aggHotMin = least }(aggHotMin)
	aggHotMin = 2
	if _, salted, _, _ := batchRun(t, rs, 16, lines, WithAggregateWorkers(2)); !slices.Equal(salted, alerts) {
		t.Errorf("Engine.Run with 2 aggregate workers: %d alerts, want the %d of one", len(salted), len(alerts))
	}
	for i, legs := range [][]streamLeg{
		{{parallelism: 1, backend: BackendMemory}},
		{{parallelism: 2, backend: BackendPebble, stopAfter: 1}, {parallelism: 4, backend: BackendMemory}},
		{{parallelism: 3, backend: BackendMemory, stopAfter: 2}, {parallelism: 1, backend: BackendPebble, stopAfter: 1}, {parallelism: 2, backend: BackendMemory}},
		// Salted and not, one resuming the other's checkpoint.
		{{parallelism: 2, backend: BackendMemory, stopAfter: 1, aggWorkers: 2}, {parallelism: 1, backend: BackendPebble, aggWorkers: 1}},
		{{parallelism: 1, backend: BackendPebble, stopAfter: 2, aggWorkers: 1}, {parallelism: 2, backend: BackendMemory, stopAfter: 1, aggWorkers: 2}, {parallelism: 2, backend: BackendMemory, aggWorkers: 3}},
	} {
		name := fmt.Sprintf("chain%d", i)
		shuffled, from := shuffleLog(newStreamRand(seed, "aggregates/"+name), log, streamShift)
		path := filepath.Join(t.TempDir(), "events.jsonl")
		writeLogFile(t, path, shuffled, false)
		d := newOutDirs(t)
		cfg := d.config(path)
		cfg.CheckpointRecords = 700
		res := runLegs(t, newStreamEngine(t, rs, 16), cfg, legs)
		compareOutputs(t, name, want, d.outputs(t, singleLayout("events.jsonl", from)))
		if last := res[len(res)-1]; last.Alerts != sum.Alerts && len(res) == 1 {
			t.Errorf("%s: %d alerts, Engine.Run %d", name, last.Alerts, sum.Alerts)
		}
	}
}

// TestAlertAggregateNulls: an alert's matched events show the aggregates
// keyed by the rule's key and those the rule reads; the others are null
// (in a Kafka job they are not computed on the rule's events).
func TestAlertAggregateNulls(t *testing.T) {
	rs, err := CompileRuleset("nulls.cep", []byte(`ruleset nulls
event time ts
schema {
  ts: time
  card: string
  shop: string
  amount: float
}
aggregate card_sum {
  key card
  sum amount
  window 1h
}
aggregate shop_count {
  key shop
  count
  window 1h
}
aggregate shop_sum {
  key shop
  sum amount
  window 1h
}
rule card_big {
  key card
  pattern {
    begin a where amount > 100
  }
}
rule card_busy_shop {
  key card
  pattern {
    begin a where shop_sum > 150
  }
}
`))
	if err != nil {
		t.Fatal(err)
	}
	_, alerts, _, _ := batchRun(t, rs, 1, []string{
		`{"ts":"2026-01-01T10:00:00Z","card":"c1","shop":"s1","amount":50}`,
		`{"ts":"2026-01-01T10:01:00.000Z","card":"c1","shop":"s1","amount":120}`,
	})
	want := []string{
		`"rule":"card_big",.*"matched":{"a":\[{"line":2,"ts":"2026-01-01T10:01:00.000Z","card":"c1","shop":"s1","amount":120,"card_sum":170,"shop_count":null,"shop_sum":null}\]}`,
		`"rule":"card_busy_shop",.*"matched":{"a":\[{"line":2,"ts":"2026-01-01T10:01:00.000Z","card":"c1","shop":"s1","amount":120,"card_sum":170,"shop_count":null,"shop_sum":170}\]}`,
	}
	if len(alerts) != len(want) {
		t.Fatalf("%d alerts, want %d:\n%s", len(alerts), len(want), strings.Join(alerts, "\n"))
	}
	for i, rx := range want {
		if !regexp.MustCompile(rx).MatchString(alerts[i]) {
			t.Errorf("alert %d:\n%s\nwant it to match %s", i, alerts[i], rx)
		}
	}
}

// TestKafkaAggregateKeys: in Kafka mode a rule reads only the aggregates
// keyed by its own key fields (in any order); the refusal names the rule,
// the aggregate and both keys.
func TestKafkaAggregateKeys(t *testing.T) {
	const head = `ruleset keys
event time ts
schema {
  ts: time
  card: string
  shop: string
  amount: float
}
aggregate shop_card_sum {
  key shop, card
  sum amount
  window 1h
}
aggregate shop_count {
  key shop
  count
  window 1h
}
`
	for _, c := range []struct {
		rule, want string
	}{
		{"rule r {\n key card, shop\n pattern {\n begin a where shop_card_sum > 1\n }\n}\nrule s {\n key shop\n pattern {\n begin a where shop_count > 1\n }\n}\n", ""},
		{"rule r {\n key card\n pattern {\n begin a where amount > 1\n }\n}\n", ""},
		{"rule r {\n key card\n pattern {\n begin a where shop_count > 1\n }\n}\n",
			"rule r (key card) reads aggregate shop_count (key shop): in Kafka mode a rule reads only the aggregates keyed by its own key fields"},
		{"rule r {\n key shop\n pattern {\n begin a where shop_card_sum > 1\n }\n}\n",
			"rule r (key shop) reads aggregate shop_card_sum (key shop, card)"},
	} {
		rs, err := CompileRuleset("keys.cep", []byte(head+c.rule))
		if err != nil {
			t.Fatal(err)
		}
		e, err := New(WithRuleset(rs))
		if err != nil {
			t.Fatal(err)
		}
		err = e.checkKafkaAggregates()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want none", c.rule, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", c.rule, err, c.want)
		}
	}
}
