package rulestest

import (
	"strings"
	"testing"

	"github.com/cepheus-cep/cepheus/rules"
)

const src = `ruleset t
event time ts
rule ab {
  key k
  pattern {
    begin a where name == "a"
    followedBy b where name == "b"
  }
}
rule fail {
  pattern {
    begin a where name == "a"
    next b optional where name == "b"
    next c where name == "c"
  }
  skip toFirst b orFail
}
test "pass" {
  rule ab
  events {
    {"ts": 2, "k": "x", "name": "b"}
    {"ts": 1, "k": "x", "name": "a"}
    {"ts": 3, "k": "y", "name": "a"}
    {"ts": 4, "k": "x", "name": "b"}
    {"ts": 5, "k": 7, "name": "a"}
    {"ts": 6, "k": 7, "name": "b"}
  }
  expect {
    ab key 7 { a: [5], b: [6] }
    ab key "x" { a: [2], b: [1] }
  }
}
test "mismatch" {
  rule ab
  events {
    {"ts": 1, "k": "x", "name": "a"}
    {"ts": 2, "k": "x", "name": "b"}
    {"ts": 3, "k": "x", "name": "b"}
  }
  expect {
    ab key "x" { a: [1], b: [3] }
  }
}
test "none expected" {
  events {
    {"ts": 1, "k": "x", "name": "a"}
    {"ts": 2, "k": "x", "name": "c"}
  }
  expect none
}
`

func TestRun(t *testing.T) {
	rs, err := rules.Load("t.cep", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	results := RunAll(rs)
	if len(results) != 3 {
		t.Fatalf("%d results, want 3", len(results))
	}
	pass, mismatch, fail := results[0], results[1], results[2]
	if !pass.Pass() || pass.Diff() != "" {
		t.Errorf("test pass fails:\n%s", pass.Diff())
	}
	// Events of a key reach the NFA in timestamp order: event 2 (ts 1)
	// comes before event 1 (ts 2), which completes the match.
	if want := []string{`ab key "x" { a: [2], b: [1] }`, `ab key 7 { a: [5], b: [6] }`}; strings.Join(pass.Got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Got = %q, want %q", pass.Got, want)
	}

	if mismatch.Pass() {
		t.Fatalf("test mismatch passes")
	}
	for _, want := range []string{
		"missing (expected, not produced):\n  ab key \"x\" { a: [1], b: [3] }\n",
		"unexpected (produced, not expected):\n  ab key \"x\" { a: [1], b: [2] }\n",
		"produced:\n  ab key \"x\" { a: [1], b: [2] }\n",
		// The events of the missing and the unexpected match, each
		// once, with its place in the file and its text.
		"events of the missing and unexpected matches:\n" +
			"  1  t.cep:36:5: {\"ts\": 1, \"k\": \"x\", \"name\": \"a\"}\n" +
			"  2  t.cep:37:5: {\"ts\": 2, \"k\": \"x\", \"name\": \"b\"}\n" +
			"  3  t.cep:38:5: {\"ts\": 3, \"k\": \"x\", \"name\": \"b\"}\n",
	} {
		if !strings.Contains(mismatch.Diff(), want) {
			t.Errorf("Diff does not contain %q:\n%s", want, mismatch.Diff())
		}
	}

	// Rule fail's skip target b is absent from the match a c: orFail makes
	// the run fail, which fails the test although no match was expected.
	if fail.Pass() || fail.Err == nil {
		t.Fatalf("test none expected: Pass %v, Err %v; want a run error", fail.Pass(), fail.Err)
	}
	if d := fail.Diff(); !strings.Contains(d, "run failed: rule fail:") || !strings.Contains(d, "produced: none") {
		t.Errorf("Diff =\n%s", d)
	}
}

// TestDiffEvents: a failure lists the events of its missing and
// unexpected matches only (not the others of the test, nor those of the
// matches produced as expected), an event written over several lines on
// one; an emit field that fails shows its message without the offset in
// its expression.
func TestDiffEvents(t *testing.T) {
	rs, err := rules.Load("t.cep", []byte(`ruleset t
event time ts
rule r {
  key k
  pattern {
    begin a where name == "a"
    followedBy c where name == "c"
  }
  emit {
    d: c.n - a.m
  }
}
test "t" {
  events {
    {"ts": 1, "k": "x", "name": "a"}
    {"ts": 2, "k": "x", "name": "c", "n": 5}
    {"ts": 3, "k": "y", "name": "a", "m": 1}
    {"ts": 4, "k": "y", "name": "c",
       "n": 7}
  }
  expect {
    r key "x" { a: [1], c: [2] } emit { d: 4 }
    r key "y" { a: [3], c: [4] } emit { d: 6 }
  }
}
`))
	if err != nil {
		t.Fatal(err)
	}
	d := RunAll(rs)[0].Diff()
	want := "missing (expected, not produced):\n" +
		"  r key \"x\" { a: [1], c: [2] } emit { d: 4 }\n" +
		"    why: its events are a match, produced with other emitted values: d \"error: a.m is null (in c.n - a.m)\", not 4\n" +
		"unexpected (produced, not expected):\n" +
		"  r key \"x\" { a: [1], c: [2] } emit { d: \"error: a.m is null (in c.n - a.m)\" }\n" +
		"produced:\n" +
		"  r key \"x\" { a: [1], c: [2] } emit { d: \"error: a.m is null (in c.n - a.m)\" }\n" +
		"  r key \"y\" { a: [3], c: [4] } emit { d: 6 }\n" +
		"events of the missing and unexpected matches:\n" +
		"  1  t.cep:15:5: {\"ts\": 1, \"k\": \"x\", \"name\": \"a\"}\n" +
		"  2  t.cep:16:5: {\"ts\": 2, \"k\": \"x\", \"name\": \"c\", \"n\": 5}\n"
	if d != want {
		t.Errorf("Diff =\n%s\nwant\n%s", d, want)
	}
	if src := rs.Tests[0].Sources[3]; src.Text != `{"ts": 4, "k": "y", "name": "c", "n": 7}` || src.Pos.String() != "t.cep:18:5" {
		t.Errorf("event 4, written on two lines: %s: %s", src.Pos, src.Text)
	}
}

// TestDiffEventsAggregates: the events of a failed test are listed with
// the values at each of the velocity aggregates its rules read (which their
// lines do not hold; n, which no rule reads, is left out): an average that counts the current event in reads
// there as it does in the condition (the trial's spike over the average
// that never fired: 20, 30, 1000 average 350).
func TestDiffEventsAggregates(t *testing.T) {
	rs, err := rules.Load("t.cep", []byte(`ruleset t
event time ts
schema {
  ts: time
  k: string
  amount: float
}
aggregate avg_amount {
  key k
  avg amount
  window 1h
}
aggregate n {
  key k
  count
  window 1h
}
rule spike {
  key k
  pattern {
    begin a where amount > 5 * avg_amount
  }
}
test "t" {
  events {
    {"ts": 1, "k": "x", "amount": 20}
    {"ts": 2, "k": "x", "amount": 30}
    {"ts": 3, "k": "x", "amount": 1000}
  }
  expect {
    spike key "x" { a: [3] }
  }
}
`))
	if err != nil {
		t.Fatal(err)
	}
	d := RunAll(rs)[0].Diff()
	want := "events of the missing and unexpected matches:\n" +
		"  3  t.cep:28:5: {\"ts\": 3, \"k\": \"x\", \"amount\": 1000}  (avg_amount 350)\n"
	if !strings.HasSuffix(d, want) {
		t.Errorf("Diff =\n%s\nwant it to end\n%s", d, want)
	}
}

func TestSurplus(t *testing.T) {
	got := surplus([]string{"a", "a", "b", "d"}, []string{"a", "c", "d", "d"})
	if strings.Join(got, ",") != "a,b" {
		t.Errorf("surplus = %q, want [a b]", got)
	}
}

// TestConditionErrors: a failed test says how many condition evaluations
// of each rule failed at run time in it (counted as false), and the last
// error: a condition that reads its own stage reads null there.
func TestConditionErrors(t *testing.T) {
	rs, err := rules.Load("t.cep", []byte(`ruleset t
event time ts
schema {
  ts: time
  k: string
  amount: float
}
rule self {
  key k
  pattern {
    begin a where a.amount > 10
  }
}
test "first" {
  events {
    {"ts": 1, "k": "x", "amount": 50}
    {"ts": 2, "k": "x", "amount": 60}
  }
  expect {
    self key "x" { a: [1] }
  }
}
test "second" {
  events {
    {"ts": 1, "k": "x", "amount": 50}
  }
  expect {
    self key "x" { a: [1] }
  }
}
`))
	if err != nil {
		t.Fatal(err)
	}
	results := RunAll(rs)
	// The counts are the test's own, not the rule's since it was compiled.
	for i, want := range []string{
		"condition errors (each counted as false):\n  rule self: 2, the last: a.amount is null (in a.amount > 10)\n",
		"condition errors (each counted as false):\n  rule self: 1, the last: a.amount is null (in a.amount > 10)\n",
	} {
		if d := results[i].Diff(); !strings.Contains(d, want) {
			t.Errorf("test %d: Diff =\n%s\nwant it to contain\n%s", i+1, d, want)
		}
	}
}

// TestRunTimeouts: a rule with a timeout block gives its timed-out
// partial matches to its tests, marked timedOut and with the block's
// emits; a test that does not expect them fails on them.
func TestRunTimeouts(t *testing.T) {
	const src = `ruleset t
event time ts
rule paid {
  key k
  pattern {
    begin order where name == "order"
    followedBy pay where name == "pay"
    within 10ms
  }
  emit {
    n: order.n
  }
  timeout {
    emit {
      unpaid: order.n
    }
  }
}
test "timeouts" {
  events {
    {"ts": 1, "k": "x", "name": "order", "n": 1}
    {"ts": 5, "k": "x", "name": "pay", "n": 0}
    {"ts": 2, "k": "y", "name": "order", "n": 2}
    {"ts": 12, "k": "y", "name": "pay", "n": 0}
    {"ts": 20, "k": "z", "name": "order", "n": 3}
  }
  expect {
    paid key "x" { order: [1], pay: [2] } emit { n: 1 }
    paid timedOut key "y" { order: [3] } emit { unpaid: 2 }
    paid timedOut key "z" { order: [5] } emit { unpaid: 3 }
  }
}
test "unexpected timeout" {
  events {
    {"ts": 1, "k": "x", "name": "order", "n": 1}
  }
  expect none
}
`
	rs, err := rules.Load("t.cep", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	results := RunAll(rs)
	if len(results) != 2 {
		t.Fatalf("%d results, want 2", len(results))
	}
	if r := results[0]; !r.Pass() {
		t.Errorf("test timeouts fails:\n%s", r.Diff())
	}
	r := results[1]
	if want := "unexpected (produced, not expected):\n  paid timedOut key \"x\" { order: [1] }\n"; r.Pass() || !strings.Contains(r.Diff(), want) {
		t.Errorf("test unexpected timeout: Pass %v, Diff\n%s\nwant it to contain %q", r.Pass(), r.Diff(), want)
	}
}

// TestRunTimeoutsOnly: a rule whose timeout block says only produces no
// completed match in a test: the timed-out ones alone (the same events
// as TestRunTimeouts's, without x's paid order).
func TestRunTimeoutsOnly(t *testing.T) {
	const src = `ruleset t
event time ts
rule paid {
  key k
  pattern {
    begin order where name == "order"
    followedBy pay where name == "pay"
    within 10ms
  }
  timeout {
    only
    emit {
      unpaid: order.n
    }
  }
}
test "timeouts only" {
  events {
    {"ts": 1, "k": "x", "name": "order", "n": 1}
    {"ts": 5, "k": "x", "name": "pay", "n": 0}
    {"ts": 2, "k": "y", "name": "order", "n": 2}
    {"ts": 12, "k": "y", "name": "pay", "n": 0}
  }
  expect {
    paid timedOut key "y" { order: [3] } emit { unpaid: 2 }
  }
}
`
	rs, err := rules.Load("t.cep", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if r := RunAll(rs)[0]; !r.Pass() || len(r.Got) != 1 {
		t.Errorf("test timeouts only: %d produced, want the timed-out one alone:\n%s", len(r.Got), r.Diff())
	}
}

// TestRunTimeoutsStepped: a rule with a timeout block and a skip strategy
// gives in its tests what a backtest gives (cep's TestTimeoutSkipCadence,
// the same events): the partial match [1] times out at its deadline, the
// match held back behind it comes out, and its skip prunes [3], which a
// single advance to the end would have timed out too.
func TestRunTimeoutsStepped(t *testing.T) {
	const src = `ruleset t
event time ts
rule captured {
  key k
  pattern {
    begin auth where type == "auth"
    followedBy capture where type == "capture" && amount == auth.amount
    within 10m
  }
  skip pastLastEvent
  timeout {
    severity low
  }
}
test "stepped" {
  events {
    {"ts": "2026-01-01T10:00:00Z", "k": "k", "type": "auth", "amount": 1}
    {"ts": "2026-01-01T10:01:00Z", "k": "k", "type": "auth", "amount": 2}
    {"ts": "2026-01-01T10:01:30Z", "k": "k", "type": "auth", "amount": 3}
    {"ts": "2026-01-01T10:02:00Z", "k": "k", "type": "capture", "amount": 2}
  }
  expect {
    captured key "k" { auth: [2], capture: [4] }
    captured timedOut key "k" { auth: [1] }
  }
}
`
	rs, err := rules.Load("t.cep", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	results := RunAll(rs)
	if len(results) != 1 {
		t.Fatalf("%d results, want the one test's", len(results))
	}
	for _, r := range results {
		if !r.Pass() {
			t.Errorf("test %s fails:\n%s", r.Test.Name, r.Diff())
		}
	}
}
