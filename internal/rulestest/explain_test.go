package rulestest

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/cep"
	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/rules"
)

// TestExplainSound: Explain never finds a fault in a match the operator
// produces. Random rules (contiguities, negations, quantifiers, until,
// where and or clauses reading earlier stages, windows, gaps, skip
// strategies) run over random events of two keys; for every match they
// produce, the reasons Explain gives a failing test would be false.
// It also checks that Explain finds a fault in most of the matches made
// from produced ones by dropping or moving an event that the operator
// does not produce (each kind of check must fire), so that a check that
// never fires does not pass for sound.
func TestExplainSound(t *testing.T) {
	budget := 3 * time.Second
	if testing.Short() {
		budget = 500 * time.Millisecond
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 7))
	rulesets, matches, altered, explained := 0, 0, 0, 0
	reasons := map[string]int{}
	for deadline := time.Now().Add(budget); time.Now().Before(deadline); {
		src := randomRuleset(r)
		rs, err := rules.Load("random.cep", []byte(src))
		if err != nil {
			continue // a pattern Flink refuses (not not, a trailing negation without a window...)
		}
		rulesets++
		test := rs.Tests[0]
		rule := rs.Rules[0]
		got := produce(t, rule, test.Events)
		seen := map[string]bool{}
		for _, m := range got {
			seen[stagesKey(m)] = true
		}
		for _, m := range got {
			matches++
			stream := keyStream(rule, test.Events, m)
			if why, _ := rule.Explain(m, stream, false); why != "" {
				t.Fatalf("Explain finds a fault in a produced match %s: %s\nseed %d, the ruleset:\n%s", stagesKey(m), why, seed, src)
			}
			for _, a := range alterations(m, stream, test.Events, r) {
				if seen[stagesKey(a)] {
					continue
				}
				altered++
				if why, _ := rule.Explain(a, stream, false); why != "" {
					explained++
					reasons[reasonKind(why)]++
				}
			}
		}
	}
	t.Logf("%d rulesets, %d matches, %d altered matches not produced, %d explained; reasons %v", rulesets, matches, altered, explained, reasons)
	if matches < 100 || altered < 100 {
		t.Fatalf("too few matches to judge: %d rulesets, %d matches, %d altered", rulesets, matches, altered)
	}
	if explained*2 < altered {
		t.Errorf("Explain finds a fault in %d of %d altered matches that are not produced: fewer than half", explained, altered)
	}
	// (The greedy reason, reached after every other check, comes a few
	// dozen times in a run: too few to require here; TestWhy makes it.)
	for _, kind := range []string{"keys", "order", "window", "condition", "until", "next", "followedBy", "loop", "negation"} {
		if reasons[kind] == 0 {
			t.Errorf("no altered match explained by a reason of kind %s: %v", kind, reasons)
		}
	}
}

// reasonKind classifies a reason of Explain by its wording.
func reasonKind(why string) string {
	for _, k := range []struct{ kind, text string }{
		{"keys", "of different keys"},
		{"greedy", "is a greedy loop"},
		{"order", "event-time order"},
		{"order", "in the test's order"},
		{"order", "taken twice"},
		{"count", "the expected match gives it"},
		{"window", "window"},
		{"gap", "of the event before it"},
		{"until", "until"},
		{"condition", "does not pass stage"},
		{"next", "with next"},
		{"followedBy", "with followedBy"},
		{"loop", "consecutive"},
		{"loop", "the loop of stage"},
		{"negation", "the partial match ends there"},
	} {
		if strings.Contains(why, k.text) {
			return k.kind
		}
	}
	return why
}

// produce runs events through rule's operator, as runRule does, and
// returns its matches' events by stage.
func produce(t *testing.T, rule *rules.Rule, events []*event.Event) [][][]*event.Event {
	t.Helper()
	op, err := cep.NewOperator(cep.OperatorConfig{NFA: rule.NFA, Key: rule.Key})
	if err != nil {
		t.Fatal(err)
	}
	var out cep.Output
	var got [][][]*event.Event
	collect := func() {
		for _, it := range out.Items {
			if it.Kind == cep.ItemMatch {
				m := make([][]*event.Event, len(it.Match.Events))
				for i, evs := range it.Match.Events {
					m[i] = slices.Clone(evs)
				}
				got = append(got, m)
			}
		}
		out.Reset()
	}
	for _, ev := range events {
		if err := op.ProcessElement(ev, ev.Time, &out); err != nil {
			t.Fatal(err)
		}
		collect()
	}
	if err := op.ProcessWatermark(event.MaxTime, &out); err != nil {
		t.Fatal(err)
	}
	collect()
	return got
}

// keyStream returns the events of m's key in the order the rule reads
// them.
func keyStream(rule *rules.Rule, events []*event.Event, m [][]*event.Event) []*event.Event {
	var first *event.Event
	for _, evs := range m {
		if len(evs) > 0 {
			first = evs[0]
			break
		}
	}
	key := rule.Key(first)
	var out []*event.Event
	for _, ev := range events {
		if rule.Key(ev) == key {
			out = append(out, ev)
		}
	}
	slices.SortStableFunc(out, func(a, b *event.Event) int { return cmp.Compare(a.Time, b.Time) })
	return out
}

func stagesKey(m [][]*event.Event) string {
	var b strings.Builder
	for i, evs := range m {
		fmt.Fprintf(&b, "%d:", i)
		for _, ev := range evs {
			fmt.Fprintf(&b, "%d,", ev.Seq)
		}
		b.WriteByte(' ')
	}
	return b.String()
}

// alterations returns matches made from m: one event dropped (from a
// stage keeping at least one), one event replaced by another of the
// stream, one replaced by any event (of either key), and one event added
// to a stage; kept in order of time.
func alterations(m [][]*event.Event, stream, events []*event.Event, r *rand.Rand) [][][]*event.Event {
	var out [][][]*event.Event
	clone := func() [][]*event.Event {
		c := make([][]*event.Event, len(m))
		for i, evs := range m {
			c[i] = slices.Clone(evs)
		}
		return c
	}
	var full []int
	for i, evs := range m {
		if len(evs) > 0 {
			full = append(full, i)
		}
	}
	if len(full) == 0 || len(stream) == 0 {
		return nil
	}
	// Replace one event by another of the stream.
	c := clone()
	i := full[r.IntN(len(full))]
	c[i][r.IntN(len(c[i]))] = stream[r.IntN(len(stream))]
	out = append(out, c)
	c = clone()
	i = full[r.IntN(len(full))]
	c[i][r.IntN(len(c[i]))] = events[r.IntN(len(events))]
	out = append(out, c)
	// Add an event to a stage holding some.
	c = clone()
	i = full[r.IntN(len(full))]
	c[i] = append(c[i], stream[r.IntN(len(stream))])
	slices.SortStableFunc(c[i], func(a, b *event.Event) int { return cmp.Compare(a.Time, b.Time) })
	out = append(out, c)
	// Drop one event of a stage holding two or more.
	for _, i := range full {
		if len(m[i]) > 1 {
			c = clone()
			j := r.IntN(len(c[i]))
			c[i] = slices.Delete(c[i], j, j+1)
			out = append(out, c)
			break
		}
	}
	return out
}

// randomRuleset returns a ruleset of one rule of random stages and a test
// of random events of two keys, expecting none.
func randomRuleset(r *rand.Rand) string {
	var b strings.Builder
	b.WriteString("ruleset random\nevent time ts\nschema {\n  ts: time\n  card: string\n  kind: string\n  amount: int\n}\n")
	b.WriteString("rule r {\n  key card\n  pattern {\n")
	n := 1 + r.IntN(4)
	var names []string
	for i := range n {
		name := fmt.Sprintf("s%d", i)
		cont := "begin"
		not := false
		if i > 0 {
			cont = []string{"next", "followedBy", "followedBy", "followedByAny", "notNext", "notFollowedBy"}[r.IntN(6)]
			not = strings.HasPrefix(cont, "not")
		}
		if i > 0 && !not && r.IntN(6) == 0 {
			// A group of two stages.
			fmt.Fprintf(&b, "    %s (\n", cont)
			fmt.Fprintf(&b, "      begin %sa where %s\n", name, randomCondition(r, names))
			names = append(names, name+"a")
			fmt.Fprintf(&b, "      %s %sb where %s\n", []string{"next", "followedBy", "followedByAny"}[r.IntN(3)], name, randomCondition(r, names))
			names = append(names, name+"b")
			fmt.Fprintf(&b, "    )%s\n", []string{"", " times 2", " oneOrMore", " optional", " timesOrMore 2 greedy"}[r.IntN(5)])
			continue
		}
		fmt.Fprintf(&b, "    %s %s", cont, name)
		loop := false
		if !not {
			if q := r.IntN(8); q < 6 {
				b.WriteString([]string{" oneOrMore", " times 2", " times 1..3", " timesOrMore 2", " times 0..2", " times 0..1"}[q])
				loop = true
			}
			if loop && r.IntN(3) == 0 {
				b.WriteString([]string{" consecutive", " allowCombinations"}[r.IntN(2)])
			}
			if i > 0 && r.IntN(5) == 0 {
				b.WriteString(" optional")
			}
			if loop && r.IntN(2) == 0 {
				b.WriteString(" greedy")
			}
		}
		fmt.Fprintf(&b, " where %s\n", randomCondition(r, names))
		if r.IntN(5) == 0 {
			fmt.Fprintf(&b, "      or %s\n", randomCondition(r, names))
		}
		if r.IntN(5) == 0 {
			fmt.Fprintf(&b, "      where %s\n", randomCondition(r, names))
		}
		if loop && r.IntN(3) == 0 {
			fmt.Fprintf(&b, "      until %s\n", randomCondition(r, nil))
		}
		if i > 0 && r.IntN(6) == 0 {
			fmt.Fprintf(&b, "      within %ds of previous\n", 2+r.IntN(6))
		}
		if !not {
			names = append(names, name)
		}
	}
	if r.IntN(2) == 0 {
		fmt.Fprintf(&b, "    within %ds\n", 3+r.IntN(15))
	}
	b.WriteString("  }\n")
	if r.IntN(3) == 0 {
		b.WriteString([]string{"  skip toNext\n", "  skip pastLastEvent\n", "  skip toFirst s0\n", "  skip toLast s0\n"}[r.IntN(4)])
	}
	b.WriteString("}\n")
	b.WriteString("test \"random\" {\n  events {\n")
	ts := 0
	for range 8 + r.IntN(14) {
		if r.IntN(5) > 0 {
			ts += 1000 * r.IntN(3)
		}
		fmt.Fprintf(&b, "    {\"ts\": %d, \"card\": %q, \"kind\": %q, \"amount\": %d}\n",
			ts, []string{"c1", "c2"}[r.IntN(2)], []string{"a", "b", "c"}[r.IntN(3)], 1+r.IntN(9))
	}
	b.WriteString("  }\n  expect none\n}\n")
	return b.String()
}

// randomCondition returns a condition on the event's kind and amount,
// sometimes reading a stage of earlier (names).
func randomCondition(r *rand.Rand, earlier []string) string {
	kind := fmt.Sprintf("kind == %q", []string{"a", "b", "c"}[r.IntN(3)])
	amount := fmt.Sprintf("amount %s %d", []string{"<", ">", ">=", "!="}[r.IntN(4)], 1+r.IntN(9))
	switch r.IntN(6) {
	case 0:
		return kind
	case 1:
		return amount
	case 2:
		return kind + " && " + amount
	case 3:
		return fmt.Sprintf("kind != %q", []string{"a", "b", "c"}[r.IntN(3)])
	case 4:
		if len(earlier) > 0 {
			return fmt.Sprintf("amount > (%s.amount ?? 0)", earlier[r.IntN(len(earlier))])
		}
		return amount
	}
	return "true"
}

// TestWhy: each missing match of testdata/why.cep's tests (each test
// fails on purpose, for one reason) gets its reason.
func TestWhy(t *testing.T) {
	src, err := os.ReadFile("testdata/why.cep")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := rules.Load("why.cep", src)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"condition":       `event 1 does not pass stage big: where country == "FR" is false (country = "DE")`,
		"window":          `events 1 and 2 are 11m39s apart: the pattern's window (within 10m) drops a partial match when an event comes that long or longer after its first`,
		"key":             `events 1 and 2 are of different keys (card: "c1" and "c2"): a match holds the events of one key`,
		"order":           `event 2 (1970-01-01T00:00:02.000Z) is earlier than event 1 (1970-01-01T00:00:03.000Z), and the expected match takes it after: a match takes its events in event-time order`,
		"first match":     `stage small follows stage big with followedBy, which takes the first event after event 1 that passes its condition: event 2 passes it, before event 3 (followedByAny would let the match skip it)`,
		"strict":          `stage b follows stage a with next (strict contiguity), but event 2 comes between event 1 and event 3`,
		"loop skip":       `the loop of stage probes takes each event that passes its condition (allowCombinations would let it skip some), and event 2 passes it between the stage's events 1 and 3`,
		"until":           `event 2 passes the until of stage probes (kind == "stop"): its loop ends at that event, without taking it`,
		"negation":        `event 2 passes the notFollowedBy stage n between event 1 (stage a) and event 3 (stage b): the partial match ends there`,
		"notNext":         `event 2 comes right after event 1 (stage a) and passes the notNext stage n: the partial match ends there`,
		"consecutive":     `stage a is consecutive, but event 2 comes between its events 1 and 3`,
		"greedy":          `stage a is a greedy loop, and event 4 passes its condition after its last event 2, before event 5 (stage b): greedy lets no event the loop's condition accepts pass the stage after the loop, so the loop takes it or, when it can take no more (its count reached, a consecutive loop broken), the partial match ends there`,
		"greedy takes":    `stage a is a greedy loop, and event 3, which stage b would take, passes the loop's condition: greedy gives such an event to the loop (or, when the loop can take no more, ends the partial match), never to the stage after it`,
		"emitted":         `its events are a match, produced with other emitted values: total 3, not 4`,
		"run-time error":  `event 2 does not pass stage c: its condition kind == "c" && amount > b.amount fails at run time, which counts as false: b.amount is null (in amount > b.amount)`,
		"skip":            `no reason found by the checks test makes; the after-match skip (skip pastLastEvent) may have dropped it: the match produced skipping key "c1" { a: [1], b: [3] } shares its events`,
		"expected key":    `its events are of key "c1" (event 1), not "c2"`,
		"expected twice":  `it is expected twice and produced once`,
		"gap not checked": `no reason found by the checks test makes; not checked: the gaps (within d of previous)`,
	}
	for _, r := range RunAll(rs) {
		name := r.Test.Name
		w, ok := want[name]
		if !ok {
			t.Errorf("test %q: no reason expected of it", name)
			continue
		}
		delete(want, name)
		if r.Pass() || len(r.Missing) == 0 {
			t.Errorf("test %q passed or misses nothing: it fails on purpose", name)
			continue
		}
		if r.Why[0] != w {
			t.Errorf("test %q: why\n%s\nwant\n%s", name, r.Why[0], w)
		}
		if !strings.Contains(r.Diff(), "    why: "+w+"\n") {
			t.Errorf("test %q: the failure does not print the reason:\n%s", name, r.Diff())
		}
	}
	for name := range want {
		t.Errorf("test %q of the table is not in testdata/why.cep", name)
	}
}
