package cep

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/event"
)

// timeoutRules: auths that a capture follows within 10 minutes are
// matches; those the window drops first are timed-out alerts (the
// rule's timeout block), with the block's severity and emits.
const timeoutRules = `ruleset timeouts
event time ts
schema {
  ts: time
  card: string
  type: string
  amount: int
}
rule captured {
  severity medium
  key card
  pattern {
    begin auth where type == "auth"
    followedBy capture where type == "capture"
    within 10m
  }
  emit {
    amount: auth.amount
  }
  timeout {
    severity low
    emit {
      waited: auth.amount
      captured: capture.amount
    }
  }
}
`

// TestBacktestTimeoutAlerts: a rule with a timeout block alerts on each
// partial match its window drops: "timed_out": true, detected at the end
// of the window (the partial match's first event + 10m), the block's
// severity and emits (a stage not reached reads null), an id of the
// formula of docs/decisions.md with its timed-out mark, never a match's.
// A partial match still open when the input ends times out at the final
// watermark, as in Flink.
func TestBacktestTimeoutAlerts(t *testing.T) {
	rs := loadRules(t, timeoutRules)
	input := `{"ts":"2026-01-01T10:00:00Z","card":"a","type":"auth","amount":10}
{"ts":"2026-01-01T10:00:00Z","card":"b","type":"auth","amount":20}
{"ts":"2026-01-01T10:01:00Z","card":"c","type":"auth","amount":30}
{"ts":"2026-01-01T10:05:00Z","card":"a","type":"capture","amount":10}
{"ts":"2026-01-01T10:12:00Z","card":"c","type":"capture","amount":30}
{"ts":"2026-01-01T10:30:00Z","card":"d","type":"auth","amount":40}`
	sum, alerts := runBacktest(t, input, WithRuleset(rs))
	type want struct {
		key, severity, detected string
		timedOut                bool
		emit                    map[string]any
	}
	wants := []want{
		{"a", "medium", "2026-01-01T10:05:00.000Z", false, map[string]any{"amount": 10.0}},
		{"b", "low", "2026-01-01T10:10:00.000Z", true, map[string]any{"waited": 20.0, "captured": nil}},
		{"c", "low", "2026-01-01T10:11:00.000Z", true, map[string]any{"waited": 30.0, "captured": nil}},
		// Open at the end of the input: dropped by the final watermark.
		{"d", "low", "2026-01-01T10:40:00.000Z", true, map[string]any{"waited": 40.0, "captured": nil}},
	}
	got := map[string]map[string]any{}
	for _, a := range alerts {
		key := a["key"].(map[string]any)["card"].(string)
		if _, dup := got[key]; dup {
			t.Errorf("card %s: a second alert %v", key, a)
		}
		got[key] = a
	}
	if len(alerts) != len(wants) || sum.Alerts != int64(len(wants)) || sum.Rules[0].Alerts != int64(len(wants)) || sum.Rules[0].TimedOut != 3 {
		t.Errorf("%d alerts (summary %d, rule %d of which %d timed out), want %d of which 3 timed out: %v",
			len(alerts), sum.Alerts, sum.Rules[0].Alerts, sum.Rules[0].TimedOut, len(wants), alerts)
	}
	for _, w := range wants {
		a := got[w.key]
		if a == nil {
			t.Errorf("card %s: no alert", w.key)
			continue
		}
		timedOut, has := a["timed_out"]
		if a["severity"] != w.severity || a["detected_at"] != w.detected || has != w.timedOut || has && timedOut != true {
			t.Errorf("card %s: severity %v, detected %v, timed_out %v (%v); want %s, %s, %v", w.key, a["severity"], a["detected_at"], timedOut, has, w.severity, w.detected, w.timedOut)
		}
		emit := a["emit"].(map[string]any)
		if len(emit) != len(w.emit) {
			t.Errorf("card %s: emit %v, want %v", w.key, emit, w.emit)
		}
		for k, v := range w.emit {
			if got, ok := emit[k]; !ok || got != v {
				t.Errorf("card %s: emit %s = %v, want %v", w.key, k, got, v)
			}
		}
		matched := a["matched"].(map[string]any)
		if w.timedOut && (len(matched) != 1 || matched["auth"] == nil) {
			t.Errorf("card %s: matched %v, want the auth alone", w.key, matched)
		}
	}

	// Card b's id, from the formula: the hash of its auth, then the mark
	// and the events of each stage (auth 1, capture 0).
	r := rs.Rule("captured")
	h := sha256.New()
	h.Write([]byte(r.Hash))
	h.Write([]byte{0})
	h.Write(binary.LittleEndian.AppendUint64(nil, 1))
	h.Write([]byte("b"))
	const kindInt, kindString = 2, 4
	const ts = 1767261600000 // 2026-01-01T10:00:00Z
	var enc []byte
	enc = binary.AppendVarint(append(enc, kindInt), ts) // schema order: ts, card, type, amount
	enc = binary.AppendUvarint(append(enc, kindString), 1)
	enc = append(enc, "b"...)
	enc = binary.AppendUvarint(append(enc, kindString), 4)
	enc = append(enc, "auth"...)
	enc = binary.AppendVarint(append(enc, kindInt), 20)
	evSum := sha256.Sum256(enc)
	h.Write(binary.LittleEndian.AppendUint64(nil, ts))
	h.Write(evSum[:])
	h.Write(binary.LittleEndian.AppendUint32(nil, 0))
	plain := hex.EncodeToString(h.Sum(nil)[:16])
	h.Write([]byte("\xfftimed out"))
	h.Write(binary.LittleEndian.AppendUint32(nil, 1))
	h.Write(binary.LittleEndian.AppendUint32(nil, 0))
	if id := hex.EncodeToString(h.Sum(nil)[:16]); got["b"] != nil && got["b"]["alert_id"] != id {
		t.Errorf("card b: id %v, the formula gives %s", got["b"]["alert_id"], id)
	}
	if got["b"] != nil && got["b"]["alert_id"] == plain {
		t.Errorf("card b: the timed-out alert has the id of a match of its events")
	}
}

// TestTimeoutOnly: a timeout block that says only makes the rule alert
// for its timed-out partial matches alone (Flink's timeout side output
// without the main one: an auth without capture, not every captured
// one); those alerts are those of the timed-out matches without only
// (their keys and times; the ids differ, the rule's text does).
func TestTimeoutOnly(t *testing.T) {
	input := `{"ts":"2026-01-01T10:00:00Z","card":"a","type":"auth","amount":10}
{"ts":"2026-01-01T10:00:00Z","card":"b","type":"auth","amount":20}
{"ts":"2026-01-01T10:05:00Z","card":"a","type":"capture","amount":10}
{"ts":"2026-01-01T10:30:00Z","card":"d","type":"auth","amount":40}`
	_, all := runBacktest(t, input, WithRuleset(loadRules(t, timeoutRules)))
	only := strings.Replace(strings.Replace(timeoutRules, "    severity low\n", "    only\n    severity low\n", 1), `  emit {
    amount: auth.amount
  }
`, "", 1)
	sum, got := runBacktest(t, input, WithRuleset(loadRules(t, only)))
	var want []string
	of := func(a map[string]any) string {
		return fmt.Sprint(a["key"], " ", a["detected_at"], " ", a["emit"])
	}
	for _, a := range all {
		if a["timed_out"] == true {
			want = append(want, of(a))
		}
	}
	var ids []string
	for _, a := range got {
		if a["timed_out"] != true {
			t.Errorf("an alert of a completed match, with only: %v", a)
		}
		ids = append(ids, of(a))
	}
	if len(all) != 3 || len(want) != 2 || !slices.Equal(ids, want) || sum.Alerts != 2 || sum.Rules[0].Alerts != 2 || sum.Rules[0].TimedOut != 2 {
		t.Errorf("with only: alerts %v (summary %d, rule %d, timed out %d); want the 2 timed-out of the 3 without it: %v",
			ids, sum.Alerts, sum.Rules[0].Alerts, sum.Rules[0].TimedOut, want)
	}
}

// TestTimeoutAlertOrder: the timed-out alerts of one key come in the
// order of their times (then of their ids) whether they time out one
// watermark at a time or many in one advance (the automaton gives those
// of one advance in its queue's order).
func TestTimeoutAlertOrder(t *testing.T) {
	rs := loadRules(t, timeoutRules)
	var b strings.Builder
	for i, s := range []int{9, 3, 7, 1, 8, 2, 6, 4, 5, 0} {
		// Out of order within the bound, most at times of their own.
		fmt.Fprintf(&b, `{"ts":"2026-01-01T10:00:%02dZ","card":"a","type":"auth","amount":%d}`+"\n", s, i)
	}
	fmt.Fprintf(&b, `{"ts":"2026-01-01T11:00:00Z","card":"b","type":"auth","amount":1}`+"\n")
	order := func(every int) ([]string, []string) {
		_, alerts := runBacktest(t, b.String(), WithRuleset(rs), WithWatermarkEvery(every), WithOutOfOrderness(10*time.Second))
		var ids, at []string
		for _, a := range alerts {
			if a["key"].(map[string]any)["card"] == "a" && a["timed_out"] == true {
				ids = append(ids, a["alert_id"].(string))
				at = append(at, a["detected_at"].(string))
			}
		}
		return ids, at
	}
	ids1, at1 := order(1)
	ids2, at2 := order(1000) // all of card a's at the end of the input
	if len(ids1) != 10 || !slices.Equal(ids1, ids2) {
		t.Errorf("a watermark every event: %v; one at the end: %v; want the same 10", ids1, ids2)
	}
	if !slices.IsSorted(at1) || !slices.IsSorted(at2) {
		t.Errorf("detection times not in order: %v, %v", at1, at2)
	}
}

// TestTimeoutSkipCadence: with a skip strategy, a match held back behind
// an older partial match is released when that one times out, and its
// skip prunes the partial matches that started before its end. Which of
// those had timed out first must not depend on how far one time advance
// went: the engine advances such a rule's runs deadline by deadline
// (SharedRule.StepDeadlines), so a watermark every event and one at the
// end give the same alerts. Q (auth 1) times out at 10:10; M (auth 2,
// capture 2) completes at 10:02, held behind Q; P (auth 3, started
// before M's end) would time out at 10:11:30, but M's skip prunes it at
// 10:10. A single advance past both deadlines (Flink's, and the old
// code's at the end of the input) timed P out too.
func TestTimeoutSkipCadence(t *testing.T) {
	src := strings.Replace(timeoutRules, "    within 10m\n  }\n", "    within 10m\n  }\n  skip pastLastEvent\n", 1)
	src = strings.Replace(src, `followedBy capture where type == "capture"`, `followedBy capture where type == "capture" && amount == auth.amount`, 1)
	rs := loadRules(t, src)
	input := `{"ts":"2026-01-01T10:00:00Z","card":"k","type":"auth","amount":1}
{"ts":"2026-01-01T10:01:00Z","card":"k","type":"auth","amount":2}
{"ts":"2026-01-01T10:01:30Z","card":"k","type":"auth","amount":3}
{"ts":"2026-01-01T10:02:00Z","card":"k","type":"capture","amount":2}
{"ts":"2026-01-01T10:10:30Z","card":"z","type":"refund","amount":9}`
	alertsOf := func(every int) []string {
		_, alerts := runBacktest(t, input, WithRuleset(rs), WithWatermarkEvery(every), WithOutOfOrderness(0))
		var out []string
		for _, a := range alerts {
			m := a["matched"].(map[string]any)
			auth := m["auth"].([]any)[0].(map[string]any)["amount"]
			out = append(out, fmt.Sprintf("auth %v timed out %v", auth, a["timed_out"] == true))
		}
		slices.Sort(out)
		return out
	}
	want := []string{"auth 1 timed out true", "auth 2 timed out false"}
	for _, every := range []int{1, 1000} {
		if got := alertsOf(every); !slices.Equal(got, want) {
			t.Errorf("a watermark every %d events: %q, want %q", every, got, want)
		}
	}
}

// TestTimeoutDetectedAtCadence: a partial match past two of its
// deadlines (the pattern window, 9 s, and within 6s of previous, 9.5 s) is
// detected at the earlier, 9 s, however often watermarks come. Advanced
// once past both, the automaton reports the one Flink checks first (the
// previous event's): with a watermark every 50 events the alert said
// 9.5 s, with one at every event 9 s.
func TestTimeoutDetectedAtCadence(t *testing.T) {
	rs := loadRules(t, `ruleset c
event time ts
rule abc {
  key k
  pattern {
    begin a where kind == "a"
    followedBy b where kind == "b"
      within 3s of previous
    followedBy c where kind == "c"
      within 6s of previous
    within 8s
  }
  timeout {
    severity low
  }
}
`)
	var in strings.Builder
	at := func(ms int) string {
		return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(ms) * time.Millisecond).Format(time.RFC3339Nano)
	}
	fmt.Fprintf(&in, "{\"ts\":%q,\"k\":\"y\",\"kind\":\"a\"}\n", at(1000))
	fmt.Fprintf(&in, "{\"ts\":%q,\"k\":\"y\",\"kind\":\"b\"}\n", at(3500))
	for ms := 5000; ms <= 20000; ms += 500 {
		fmt.Fprintf(&in, "{\"ts\":%q,\"k\":\"w\",\"kind\":\"d\"}\n", at(ms))
	}
	for _, every := range []int{1, 2, 50, 1000} {
		_, alerts := runBacktest(t, in.String(), WithRuleset(rs), WithWatermarkEvery(every), WithOutOfOrderness(0))
		var at time.Time
		if len(alerts) == 1 {
			at, _ = time.Parse(time.RFC3339Nano, fmt.Sprint(alerts[0]["detected_at"]))
		}
		if len(alerts) != 1 || alerts[0]["timed_out"] != true || !at.Equal(time.Date(2026, 1, 1, 0, 0, 9, 0, time.UTC)) {
			t.Errorf("a watermark every %d events: %v; want one timed-out alert detected at 00:00:09", every, alerts)
		}
	}
}

// TestTimeoutAlertsOnePerPartialMatch: a partial match the automaton
// holds in two branches (a loop that ignored an event, beside the branch
// that proceeded to the next stage) is one alert, not two of one id; and
// two partial matches of the same events split otherwise between stages
// have two ids.
func TestTimeoutAlertsOnePerPartialMatch(t *testing.T) {
	const head = `ruleset o
event time ts
schema {
  ts: time
  k: string
  kind: string
}
`
	at := func(ms int) string {
		return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(ms) * time.Millisecond).Format(time.RFC3339Nano)
	}
	line := func(ms int, kind string) string {
		return fmt.Sprintf("{\"ts\":%q,\"k\":\"x\",\"kind\":%q}\n", at(ms), kind)
	}
	rs := loadRules(t, head+`
rule loop {
  key k
  pattern {
    begin a oneOrMore where kind == "a"
    followedBy b where kind == "b"
    within 8s
  }
  timeout {
    emit {
      n: count(a)
    }
  }
}
`)
	sum, alerts := runBacktest(t, line(1000, "a")+line(1001, "d"), WithRuleset(rs))
	if len(alerts) != 1 || sum.Rules[0].Alerts != 1 || sum.Rules[0].TimedOut != 1 {
		t.Errorf("a loop's partial match [1] with an event ignored: %d alerts (summary %d, %d timed out), want 1: %v",
			len(alerts), sum.Rules[0].Alerts, sum.Rules[0].TimedOut, alerts)
	}

	rs = loadRules(t, head+`
rule split {
  key k
  pattern {
    begin a oneOrMore where kind == "a"
    next b where kind == "a"
    followedBy c where kind == "c"
    within 10s
  }
  timeout {
    severity low
  }
}
`)
	_, alerts = runBacktest(t, line(1000, "a")+line(2000, "a"), WithRuleset(rs))
	ids := map[string]string{} // stages -> id
	for _, a := range alerts {
		m := a["matched"].(map[string]any)
		n := func(stage string) int { evs, _ := m[stage].([]any); return len(evs) }
		stages := fmt.Sprintf("a%d b%d", n("a"), n("b"))
		if prev, ok := ids[stages]; ok {
			t.Errorf("partial match %s raised twice (%s, %v)", stages, prev, a["alert_id"])
		}
		ids[stages] = a["alert_id"].(string)
	}
	if ids["a2 b0"] == "" || ids["a1 b1"] == "" || ids["a2 b0"] == ids["a1 b1"] {
		t.Errorf("the partial matches [1, 2] and [1] [2]: ids %v, want two distinct", ids)
	}
}

// TestSortTimeouts: each run of one rule and key's timed-out partial
// matches is sorted by time, then by id, with the repeats of one (the same
// id at the same time) dropped; matches, other keys' and other rules'
// items keep their places.
func TestSortTimeouts(t *testing.T) {
	to := func(rule int, key string, at event.Time, id string) Item {
		return Item{Kind: ItemTimeout, Rule: rule, Key: event.Key(key), At: at, Event: &event.Event{Fields: []event.Value{event.String(id)}}}
	}
	match := func(rule int, key string, at event.Time) Item {
		return Item{Kind: ItemMatch, Rule: rule, Key: event.Key(key), At: at}
	}
	items := []Item{
		to(0, "a", 9, "x"), to(0, "a", 5, "z"), to(0, "a", 5, "y"), to(0, "a", 5, "z"), // one run, a repeat
		match(0, "a", 1),
		to(0, "a", 3, "w"), to(0, "b", 1, "v"), // runs of one
		to(1, "b", 8, "u"), to(1, "b", 2, "t"), to(1, "b", 9, "u"), // another rule's run: u twice, at two times
	}
	items = sortTimeouts(items, func(it *Item) string { return it.Event.Fields[0].String() })
	var got []string
	for _, it := range items {
		s := fmt.Sprintf("%d/%s/%d", it.Rule, it.Key, it.At)
		if it.Kind == ItemTimeout {
			s += "/" + it.Event.Fields[0].String()
		}
		got = append(got, s)
	}
	want := []string{`0/a/5/"y"`, `0/a/5/"z"`, `0/a/9/"x"`, "0/a/1", `0/a/3/"w"`, `0/b/1/"v"`, `1/b/2/"t"`, `1/b/8/"u"`, `1/b/9/"u"`}
	if !slices.Equal(got, want) {
		t.Errorf("sorted %q, want %q", got, want)
	}
}

// TestBacktestEmptyKey: events whose key is the empty string are matched
// together as one key, as Flink does, and counted per rule for the
// summary (the marketplace trial's web clients without a device id made
// one large partition without a word).
func TestBacktestEmptyKey(t *testing.T) {
	input := `{"ts":"2026-01-01T10:00:00Z","card":"","type":"auth","amount":10}
{"ts":"2026-01-01T10:01:00Z","card":"","type":"capture","amount":20}
{"ts":"2026-01-01T10:02:00Z","card":"a","type":"auth","amount":30}`
	sum, alerts := runBacktest(t, input, WithRuleset(loadRules(t, timeoutRules)))
	r := sum.Rules[0]
	if r.EmptyKey != 2 {
		t.Errorf("empty keys %d, want 2", r.EmptyKey)
	}
	var emptyMatch bool
	for _, a := range alerts {
		if a["key"].(map[string]any)["card"] == "" && a["timed_out"] == nil {
			emptyMatch = true
		}
	}
	if !emptyMatch {
		t.Errorf("no match of the empty key's auth and capture: %v", alerts)
	}
}
