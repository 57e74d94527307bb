package gen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/event"
)

// testConfig is small enough to generate in a few tens of milliseconds and
// big enough for every scenario to appear many times: 60 sparse days, then
// one dense day, every scenario at 100 instances per 100,000 normal events.
func testConfig() Config {
	c := DefaultConfig()
	c.HistoryEventsPerDay = 200
	c.EventsPerDay = 20_000
	c.Customers = 2000
	c.Merchants = 300
	for name := range c.Scenarios {
		c.Scenarios[name] = 100
	}
	return c
}

func generate(t testing.TB, cfg Config) ([]byte, Stats) {
	t.Helper()
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	st, err := g.WriteTo(context.Background(), &buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), st
}

// line is a decoded output line.
type line struct {
	TS              string  `json:"ts"`
	Type            string  `json:"type"`
	EventID         string  `json:"event_id"`
	CustomerID      string  `json:"customer_id"`
	CardID          string  `json:"card_id"`
	Amount          float64 `json:"amount"`
	Currency        string  `json:"currency"`
	MerchantID      string  `json:"merchant_id"`
	MerchantCountry string  `json:"merchant_country"`
	MCC             string  `json:"mcc"`
	CardCountry     string  `json:"card_country"`
	DeviceID        string  `json:"device_id"`
	IP              string  `json:"ip"`
	IPCountry       string  `json:"ip_country"`
	Lat             float64 `json:"lat"`
	Lon             float64 `json:"lon"`
	IsFraud         bool    `json:"is_fraud"`
	Scenario        string  `json:"scenario"`

	t time.Time
}

func decode(t testing.TB, out []byte) []line {
	t.Helper()
	lines, err := decodeLines(out)
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

func decodeLines(out []byte) ([]line, error) {
	var lines []line
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l line
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			return nil, fmt.Errorf("line %d: %v: %s", len(lines)+1, err, sc.Bytes())
		}
		ts, err := time.Parse("2006-01-02T15:04:05.000Z", l.TS)
		if err != nil {
			return nil, fmt.Errorf("line %d: ts: %v", len(lines)+1, err)
		}
		l.t = ts
		lines = append(lines, l)
	}
	return lines, sc.Err()
}

// shared caches the output of testConfig, which most tests read.
var shared = sync.OnceValues(func() ([]byte, Stats) {
	g, err := New(testConfig())
	if err != nil {
		panic(err)
	}
	var buf bytes.Buffer
	st, err := g.WriteTo(context.Background(), &buf)
	if err != nil {
		panic(err)
	}
	return buf.Bytes(), st
})

var sharedLines = sync.OnceValue(func() []line {
	out, _ := shared()
	lines, err := decodeLines(out)
	if err != nil {
		panic(err)
	}
	return lines
})

func TestDefaultConfigIsValid(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	if err := testConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestDeterministic(t *testing.T) {
	cfg := testConfig()
	cfg.HistoryDays, cfg.Scenarios["dormant_card"] = 0, 0
	a, sa := generate(t, cfg)
	b, sb := generate(t, cfg)
	if !bytes.Equal(a, b) {
		t.Fatal("two runs with the same config differ")
	}
	if sa.Events != sb.Events || !maps.Equal(sa.ByType, sb.ByType) {
		t.Fatalf("stats differ: %+v, %+v", sa, sb)
	}
	// The iterator gives the same records as WriteTo writes.
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var it []byte
	for r := range g.Records(context.Background()) {
		it = r.AppendJSON(it)
	}
	if !bytes.Equal(a, it) {
		t.Fatal("Records differs from WriteTo")
	}
	cfg.Seed++
	c, _ := generate(t, cfg)
	if bytes.Equal(a, c) {
		t.Fatal("different seeds give the same output")
	}
}

func TestJSONLines(t *testing.T) {
	out, st := shared()
	cfg := testConfig()
	lines := decode(t, out)
	if len(lines) != st.Events {
		t.Fatalf("%d lines, Stats.Events %d", len(lines), st.Events)
	}
	// Every line has exactly the documented fields, in order, with the
	// documented JSON types.
	want := Fields()
	kinds := map[string]event.Kind{}
	for _, f := range want {
		kinds[f.Name] = f.Kind
	}
	amount := regexp.MustCompile(`"amount":\d+\.\d\d,`)
	coords := regexp.MustCompile(`"lat":-?\d+\.\d{4},"lon":-?\d+\.\d{4},`)
	for i, raw := range bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n")) {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			t.Fatalf("line %d: does not start an object: %s", i+1, raw)
		}
		var names []string
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				t.Fatalf("line %d: %v", i+1, err)
			}
			name := tok.(string)
			names = append(names, name)
			v, err := dec.Token()
			if err != nil {
				t.Fatalf("line %d: %v", i+1, err)
			}
			var got event.Kind
			switch v.(type) {
			case string:
				got = event.KindString
			case json.Number:
				got = event.KindFloat
			case bool:
				got = event.KindBool
			}
			if got != kinds[name] {
				t.Fatalf("line %d: field %s is %v, want %v: %s", i+1, name, got, kinds[name], raw)
			}
		}
		if len(names) != len(want) {
			t.Fatalf("line %d: fields %v, want %v", i+1, names, want)
		}
		for j, f := range want {
			if names[j] != f.Name {
				t.Fatalf("line %d: field %d is %s, want %s", i+1, j, names[j], f.Name)
			}
		}
		if !amount.Match(raw) || !coords.Match(raw) {
			t.Fatalf("line %d: amount or coordinates not in fixed-point form: %s", i+1, raw)
		}
		if i > 2000 { // enough for the token-level check; the cheaper one below sees every line
			break
		}
	}
	// Every line has every field, in order (decode, with
	// DisallowUnknownFields, has refused any other field and wrong types).
	for i, raw := range bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n")) {
		at := 0
		for _, f := range want {
			j := bytes.Index(raw[at:], []byte(`"`+f.Name+`":`))
			if j < 0 {
				t.Fatalf("line %d: field %s missing or out of order: %s", i+1, f.Name, raw)
			}
			at += j + len(f.Name) + 3
		}
	}
	start := cfg.Start
	end := start.Add(time.Duration(cfg.HistoryDays+cfg.Days) * 24 * time.Hour)
	ids := map[string]bool{}
	types := map[string]bool{}
	for _, tt := range Types() {
		types[tt] = true
	}
	for i, l := range lines {
		if l.t.Before(start) || !l.t.Before(end) {
			t.Fatalf("line %d: ts %s outside [%s, %s)", i+1, l.TS, start, end)
		}
		if ids[l.EventID] {
			t.Fatalf("line %d: duplicate event_id %s", i+1, l.EventID)
		}
		ids[l.EventID] = true
		if !types[l.Type] {
			t.Fatalf("line %d: unknown type %q", i+1, l.Type)
		}
		if l.IsFraud != (l.Scenario != "") {
			t.Fatalf("line %d: is_fraud %v with scenario %q", i+1, l.IsFraud, l.Scenario)
		}
		card := l.Type == TypeAuth || l.Type == TypeCapture || l.Type == TypeRefund
		if card != (l.CardID != "") || card != (l.MerchantID != "") || card != (l.MCC != "") || card != (l.CardCountry != "") {
			t.Fatalf("line %d: card fields do not match type %s", i+1, l.Type)
		}
		money := card || l.Type == TypeTransfer
		if money != (l.Amount > 0) || money != (l.Currency == Currency) {
			t.Fatalf("line %d: amount %v %q for type %s", i+1, l.Amount, l.Currency, l.Type)
		}
		if (l.IP == "") != (l.DeviceID == "") || (l.IP == "") != (l.IPCountry == "") {
			t.Fatalf("line %d: device, ip and ip_country must be set together", i+1)
		}
		if !card && l.DeviceID == "" {
			t.Fatalf("line %d: account event without a device", i+1)
		}
		if math.Abs(l.Lat) > 90 || math.Abs(l.Lon) > 180 || l.Lat == 0 && l.Lon == 0 {
			t.Fatalf("line %d: bad location %v,%v", i+1, l.Lat, l.Lon)
		}
	}
}

func TestStats(t *testing.T) {
	_, st := shared()
	lines := sharedLines()
	byType := map[string]int{}
	byScen := map[string]int{}
	fraud := 0
	for _, l := range lines {
		byType[l.Type]++
		if l.IsFraud {
			fraud++
			byScen[l.Scenario]++
		}
	}
	if st.Events != len(lines) || st.Fraud != fraud || !maps.Equal(st.ByType, byType) || !maps.Equal(st.ByScenario, byScen) {
		t.Fatalf("stats %+v\ncounted events %d, fraud %d, %v, %v", st, len(lines), fraud, byType, byScen)
	}
	for _, name := range ScenarioNames() {
		if st.Instances[name] == 0 {
			t.Errorf("scenario %s: no instances", name)
		}
	}
	// The normal volume is close to the configured rates.
	cfg := testConfig()
	normal := float64(len(lines) - fraud)
	want := float64(cfg.HistoryDays*cfg.HistoryEventsPerDay + cfg.Days*cfg.EventsPerDay)
	if math.Abs(normal-want) > 0.05*want {
		t.Errorf("%v normal events, want about %v", normal, want)
	}
}

// byKey groups a scenario's events by a key, in ts order.
func byKey(lines []line, scenario string, key func(line) string) map[string][]line {
	out := map[string][]line{}
	for _, l := range lines {
		if l.Scenario == scenario {
			out[key(l)] = append(out[key(l)], l)
		}
	}
	for _, ls := range out {
		slices.SortStableFunc(ls, func(a, b line) int { return a.t.Compare(b.t) })
	}
	return out
}

func cardOf(l line) string     { return l.CardID }
func customerOf(l line) string { return l.CustomerID }

// TestScenarios checks that every scenario appears, labelled, with the
// shape docs/data.md promises, so that the rule described there catches
// it. Two instances may hit the same card; the checks allow for that.
func TestScenarios(t *testing.T) {
	lines := sharedLines()
	auths := func(ls []line) []line {
		return slices.DeleteFunc(slices.Clone(ls), func(l line) bool { return l.Type != TypeAuth })
	}
	captured := map[string]bool{} // card|merchant|amount of every capture
	key := txnKey
	for _, l := range lines {
		if l.Type == TypeCapture {
			captured[key(l)] = true
		}
	}
	check := func(name string, keyf func(line) string, ok func([]line) bool) {
		t.Helper()
		groups := byKey(lines, name, keyf)
		if len(groups) == 0 {
			t.Errorf("%s: no events", name)
			return
		}
		for k, ls := range groups {
			if !ok(ls) {
				t.Errorf("%s: key %s: unexpected shape:", name, k)
				for _, l := range ls {
					t.Logf("  %s %s %.2f %s/%s %v,%v", l.TS, l.Type, l.Amount, l.MerchantCountry, l.CardCountry, l.Lat, l.Lon)
				}
				return
			}
		}
	}

	check("card_testing", cardOf, func(ls []line) bool {
		small := 0
		for _, l := range auths(ls) {
			switch {
			case l.Amount < 2:
				small++
				if captured[key(l)] {
					return false
				}
			case l.Amount > 500 && small >= 5:
				return true
			}
		}
		return false
	})
	check("account_takeover", customerOf, func(ls []line) bool {
		order := []string{TypePasswordReset, TypeNewDevice, TypeLogin, TypeTransfer}
		for i := 0; i+len(order) <= len(ls); i += len(order) {
			for j, typ := range order {
				if ls[i+j].Type != typ || ls[i+j].DeviceID != ls[i].DeviceID {
					return false
				}
			}
			if ls[i+3].t.Sub(ls[i].t) > time.Hour || ls[i+3].Amount < 1000 {
				return false
			}
		}
		return len(ls)%len(order) == 0
	})
	check("impossible_travel", cardOf, func(ls []line) bool {
		a := auths(ls)
		for i := range a {
			for j := i + 1; j < len(a); j++ {
				if a[j].t.Sub(a[i].t) < time.Hour && a[i].DeviceID == "" && a[j].DeviceID == "" &&
					distanceKM(a[i].Lat, a[i].Lon, a[j].Lat, a[j].Lon) > 2000 {
					return true
				}
			}
		}
		return false
	})
	check("large_then_foreign", cardOf, func(ls []line) bool {
		a := auths(ls)
		for i := range a {
			for j := i + 1; j < len(a); j++ {
				if a[i].Amount > 2000 && a[j].t.Sub(a[i].t) < 10*time.Minute && a[j].MerchantCountry != a[j].CardCountry {
					return true
				}
			}
		}
		return false
	})
	check("refund_abuse", func(l line) string { return l.CardID + "|" + l.MerchantID }, func(ls []line) bool {
		var refunds []line
		maxAuth := 0.0
		for _, l := range ls {
			switch l.Type {
			case TypeRefund:
				refunds = append(refunds, l)
			case TypeAuth:
				maxAuth = max(maxAuth, l.Amount)
			}
		}
		for _, r := range refunds {
			if r.Amount <= maxAuth {
				return false
			}
		}
		return len(refunds) >= 3 && refunds[2].t.Sub(refunds[0].t) < 24*time.Hour
	})
	check("velocity_burst", cardOf, func(ls []line) bool {
		a := auths(ls)
		for i := 0; i+9 < len(a); i++ {
			if a[i+9].t.Sub(a[i].t) <= 5*time.Minute {
				return true
			}
		}
		return false
	})
	// dormant_card: the card's previous event, of any kind, is 60+ days
	// before the first fraud event.
	last := map[string]time.Time{}
	woken := map[string]bool{}
	for _, l := range slices.SortedStableFunc(slices.Values(lines), func(a, b line) int { return a.t.Compare(b.t) }) {
		if l.CardID == "" {
			continue
		}
		if l.Scenario == "dormant_card" && !woken[l.CardID] {
			woken[l.CardID] = true
			if prev, ok := last[l.CardID]; !ok || l.t.Sub(prev) < 60*24*time.Hour {
				t.Errorf("dormant_card: card %s woke at %s, previous event %s", l.CardID, l.TS, prev)
			}
		}
		last[l.CardID] = l.t
	}
	if len(woken) == 0 {
		t.Error("dormant_card: no events")
	}
	check("auth_not_captured", cardOf, func(ls []line) bool {
		for _, l := range ls {
			if l.Type != TypeAuth || captured[key(l)] {
				return false
			}
		}
		return true
	})
}

// txnKey identifies a card transaction: an auth and its capture share it.
func txnKey(l line) string { return fmt.Sprintf("%s|%s|%.2f", l.CardID, l.MerchantID, l.Amount) }

// TestNormalTraffic checks the shapes normal events keep, which the rules
// of docs/data.md rely on for their precision.
func TestNormalTraffic(t *testing.T) {
	lines := sharedLines()
	var normal, foreign, cardPresent, late int
	capturedAt := map[string]time.Time{}
	for _, l := range lines {
		if l.Type == TypeCapture && !l.IsFraud {
			capturedAt[txnKey(l)] = l.t
		}
	}
	for _, l := range lines {
		if l.IsFraud || l.Type != TypeAuth {
			continue
		}
		normal++
		if l.DeviceID == "" {
			cardPresent++
		}
		if l.MerchantCountry != l.CardCountry {
			foreign++
		}
		at, ok := capturedAt[txnKey(l)]
		if !ok || at.Sub(l.t) > 30*time.Minute {
			late++
		}
	}
	if share := float64(foreign) / float64(normal); share > 0.1 {
		t.Errorf("%.1f%% of normal auths are foreign", 100*share)
	}
	if share := float64(cardPresent) / float64(normal); share < 0.6 || share > 0.9 {
		t.Errorf("%.1f%% of normal auths are card present", 100*share)
	}
	if share := float64(late) / float64(normal); share > 0.01 {
		t.Errorf("%.2f%% of normal auths are not captured within 30 minutes", 100*share)
	}
}

func TestOutOfOrderBound(t *testing.T) {
	for _, maxDelay := range []time.Duration{0, 5 * time.Second, 40 * time.Millisecond} {
		cfg := testConfig()
		cfg.HistoryDays, cfg.Scenarios["dormant_card"] = 0, 0
		cfg.MaxDelay = maxDelay
		out, _ := generate(t, cfg)
		var maxTS time.Time
		behind := 0
		for i, raw := range bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n")) {
			// Every line starts {"ts":"2026-01-01T00:00:00.000Z"
			ts, err := time.Parse("2006-01-02T15:04:05.000Z", string(raw[7:31]))
			if err != nil {
				t.Fatalf("line %d: %v", i+1, err)
			}
			if lag := maxTS.Sub(ts); lag > maxDelay {
				t.Fatalf("MaxDelay %v: line %d is %v behind the running max", maxDelay, i+1, lag)
			} else if lag > 0 {
				behind++
			}
			if ts.After(maxTS) {
				maxTS = ts
			}
		}
		if maxDelay == 0 && behind != 0 || maxDelay >= time.Second && behind == 0 {
			t.Errorf("MaxDelay %v: %d events behind the running max", maxDelay, behind)
		}
	}
}

func TestZipfSkew(t *testing.T) {
	cfg := testConfig()
	counts := map[string]int{}
	total := 0
	for _, l := range sharedLines() {
		if !l.IsFraud {
			counts[l.CustomerID]++
			total++
		}
	}
	top := slices.Max(slices.Collect(maps.Values(counts)))
	share := float64(top) / float64(total)
	if uniform := 1 / float64(cfg.Customers); share < 20*uniform {
		t.Errorf("top customer has %.3f%% of normal events; uniform is %.3f%%", 100*share, 100*uniform)
	}
}

func TestValidate(t *testing.T) {
	good := DefaultConfig()
	tests := []struct {
		name   string
		change func(*Config)
		want   []string
	}{
		{"zero", func(c *Config) { *c = Config{} }, []string{
			"Start is not set", "HistoryDays and Days add up to 0 days", "Customers 0", "Merchants 0", "Skew 0",
		}},
		{"negatives", func(c *Config) {
			c.HistoryDays, c.Days, c.EventsPerDay, c.HistoryEventsPerDay, c.MaxDelay = -1, -2, -3, -4, -time.Second
		}, []string{"HistoryDays -1", "Days -2", "EventsPerDay -3", "HistoryEventsPerDay -4", "MaxDelay -1s"}},
		{"no days", func(c *Config) {
			c.HistoryDays, c.Days, c.Scenarios = 0, 0, nil
		}, []string{"HistoryDays and Days add up to 0 days"}},
		{"scenarios", func(c *Config) {
			c.Scenarios = map[string]float64{"card_testin": 1, "velocity_burst": -1, "refund_abuse": math.NaN()}
		}, []string{`unknown scenario "card_testin"`, "velocity_burst: rate -1", "refund_abuse: rate NaN"}},
		{"dormant needs 61 days", func(c *Config) { c.HistoryDays = 59 }, []string{"dormant_card needs at least 61 days"}},
		{"skew", func(c *Config) { c.Skew = 1 }, []string{"Skew 1 is outside"}},
		{"merchants", func(c *Config) { c.Merchants = MinMerchants - 1 }, []string{"Merchants 44"}},
		{"delay", func(c *Config) { c.MaxDelay = 2 * time.Hour }, []string{"MaxDelay 2h is outside 0..1h"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			c.Scenarios = maps.Clone(good.Scenarios)
			tt.change(&c)
			err := c.Validate()
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not mention %q", err, w)
				}
			}
			if n := strings.Count(err.Error(), "\n") + 1; n != len(tt.want) {
				t.Errorf("%d problems reported, want %d:\n%v", n, len(tt.want), err)
			}
			if _, err := New(c); err == nil {
				t.Error("New accepted the config")
			}
		})
	}
	// dormant_card off: 59 days are fine.
	c := good
	c.Scenarios = maps.Clone(good.Scenarios)
	c.HistoryDays, c.Scenarios["dormant_card"] = 59, 0
	if err := c.Validate(); err != nil {
		t.Error(err)
	}
}

// TestConfigErrorMessage: each problem is a *ConfigError naming its fields,
// and Message names them as the caller does (the command line: its flags).
func TestConfigErrorMessage(t *testing.T) {
	c := DefaultConfig()
	c.Scenarios = maps.Clone(c.Scenarios)
	c.HistoryDays, c.Days, c.MaxDelay = 0, -1, 90*time.Minute
	flags := map[string]string{"HistoryDays": "-history-days", "Days": "-days", "MaxDelay": "-max-delay", "Scenarios": "-scenarios"}
	name := func(f string) string { return flags[f] }
	var got []string
	for _, e := range flattenJoined(c.Validate()) {
		var ce *ConfigError
		if !errors.As(e, &ce) {
			t.Fatalf("%v is not a *ConfigError", e)
		}
		got = append(got, ce.Message(name))
	}
	want := []string{"-days -1 is outside 0..3660", "-max-delay 1h30m is outside 0..1h"}
	if !slices.Equal(got, want) {
		t.Errorf("messages %q, want %q", got, want)
	}
	c.Days = 1
	var ce *ConfigError
	if err := c.Validate(); !errors.As(err, &ce) || ce.Message(name) != "scenario dormant_card needs at least 61 days (-history-days and -days add up to 1); leave it out of -scenarios (-scenarios card_testing,account_takeover,impossible_travel,large_then_foreign,refund_abuse,velocity_burst,auth_not_captured) or add days" ||
		!slices.Equal(ce.Fields, []string{"HistoryDays", "Days", "Scenarios"}) {
		t.Errorf("dormant_card: %v (fields %v)", err, ce)
	}
	if got := formatDuration(-5 * time.Second); got != "-5s" {
		t.Errorf("formatDuration(-5s) = %q", got)
	}
}

// flattenJoined returns the errors joined in err.
func flattenJoined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err == nil {
		return nil
	}
	return []error{err}
}

func TestCancel(t *testing.T) {
	g, err := New(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g.WriteTo(ctx, &bytes.Buffer{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	n := 0
	for range g.Records(ctx) {
		n++
	}
	if n != 0 {
		t.Errorf("Records yielded %d records after cancel", n)
	}
}

type failWriter struct{}

var errWrite = errors.New("disk full")

func (failWriter) Write([]byte) (int, error) { return 0, errWrite }

func TestWriteError(t *testing.T) {
	g, err := New(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.WriteTo(context.Background(), failWriter{}); !errors.Is(err, errWrite) {
		t.Fatalf("err = %v, want %v", err, errWrite)
	}
}

func TestAppendTime(t *testing.T) {
	r := newRand(1, 1)
	lo := time.Date(-5, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	hi := time.Date(10010, 12, 31, 23, 59, 59, 999e6, time.UTC).UnixMilli()
	edges := []int64{lo, hi, 0, -1, 951782400000 /* 2000-02-29 */, -62167219200000, -62167219200001, 253402300799999, 253402300800000}
	for _, ms := range append(edges, func() (s []int64) {
		for range 10000 {
			s = append(s, lo+r.Int64N(hi-lo))
		}
		return s
	}()...) {
		got := string(appendTime(nil, event.Time(ms)))
		if want := event.Time(ms).String(); got != want {
			t.Fatalf("appendTime(%d) = %s, want %s", ms, got, want)
		}
	}
}

func TestAppendJSONEscapes(t *testing.T) {
	r := newRand(1, 2)
	alphabet := []rune("ab\"\\\n\t\r\x00\x1fé€ 01234567")
	for range 2000 {
		var b strings.Builder
		for range r.IntN(30) {
			b.WriteRune(alphabet[r.IntN(len(alphabet))])
		}
		s := b.String()
		rec := Record{Type: s, Scenario: s + s, Lat: -12.34567, Lon: 181, Cents: 1205}
		out := rec.AppendJSON(nil)
		var l line
		if err := json.Unmarshal(out, &l); err != nil {
			t.Fatalf("%q: %v: %s", s, err, out)
		}
		if l.Type != s || l.Scenario != s+s || l.Lat != -12.3457 || l.Lon != 181 || l.Amount != 12.05 {
			t.Fatalf("%q: round trip gave %+v", s, l)
		}
	}
}

// TestDocsListFields fails when docs/data.md and the field set drift apart:
// the schema table must list every field, in output order.
func TestDocsListFields(t *testing.T) {
	doc, err := os.ReadFile("../../docs/data.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| (string|number|bool) \\|")
	var names []string
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		names = append(names, m[1])
		f := fields[len(names)-1]
		want := map[event.Kind]string{event.KindString: "string", event.KindFloat: "number", event.KindBool: "bool"}[f.Kind]
		if m[1] != f.Name || m[2] != want {
			t.Errorf("docs/data.md row %d: %s %s, want %s %s", len(names), m[1], m[2], f.Name, want)
		}
		if len(names) == len(fields) {
			break
		}
	}
	if len(names) != len(fields) {
		t.Errorf("docs/data.md lists %d fields, want %d", len(names), len(fields))
	}
	for _, name := range ScenarioNames() {
		if !strings.Contains(string(doc), "### `"+name+"`") {
			t.Errorf("docs/data.md has no section for scenario %s", name)
		}
	}
}

func TestWorld(t *testing.T) {
	for i, far := range farCities {
		if len(far) == 0 {
			t.Errorf("%s has no city further than %d km", cities[i].name, farKM)
		}
	}
	for i := range countries {
		if len(testPopulation().countryCities[i]) == 0 {
			t.Errorf("country %s has no city", countries[i].code)
		}
	}
	if got := meanEventsPerActivity(); got < 1 || got > 3 {
		t.Errorf("meanEventsPerActivity = %v", got)
	}
	if p := pPurchase + pLogin + pTransfer + pNewDevice + pPasswordReset; math.Abs(p-1) > 1e-9 {
		t.Errorf("activity shares sum to %v", p)
	}
}

func testPopulation() *population {
	cfg := testConfig()
	return buildPopulation(&cfg)
}

// TestSmallest runs the smallest valid world: one customer, one shop per
// city and one online shop per country (Zipf over a single item).
func TestSmallest(t *testing.T) {
	cfg := testConfig()
	cfg.Customers, cfg.Merchants = 1, MinMerchants
	cfg.HistoryEventsPerDay, cfg.EventsPerDay = 20, 2000
	out, st := generate(t, cfg)
	lines := decode(t, out)
	if len(lines) == 0 || st.Events != len(lines) {
		t.Fatalf("%d lines, stats %+v", len(lines), st)
	}
	for _, l := range lines {
		if l.CustomerID != "cust_1" {
			t.Fatalf("customer %s", l.CustomerID)
		}
	}
	// No traffic at all is valid too.
	cfg.HistoryEventsPerDay, cfg.EventsPerDay = 0, 0
	if out, st := generate(t, cfg); len(out) != 0 || st.Events != 0 {
		t.Fatalf("empty run wrote %d bytes, %+v", len(out), st)
	}
}

// TestConcurrentRuns shares one Generator between goroutines (run it with
// -race).
func TestConcurrentRuns(t *testing.T) {
	cfg := testConfig()
	cfg.HistoryDays, cfg.Scenarios["dormant_card"], cfg.EventsPerDay = 0, 0, 5000
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	outs := make([]bytes.Buffer, 3)
	var wg sync.WaitGroup
	for i := range outs {
		wg.Go(func() {
			if _, err := g.WriteTo(context.Background(), &outs[i]); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for i := range outs {
		if !bytes.Equal(outs[0].Bytes(), outs[i].Bytes()) {
			t.Fatal("concurrent runs differ")
		}
	}
}
