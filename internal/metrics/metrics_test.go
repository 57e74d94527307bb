package metrics

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/cep"
	"github.com/cepheus-cep/cepheus/rules"
)

const testRules = `
ruleset m
event time ts

rule big_then_foreign {
  severity high
  key card
  pattern {
    begin big where type == "auth" && amount > 100
    followedBy foreign where country != big.country
    within 10m
  }
}
`

// events returns n events from the minute from on: every card's big
// authorization is followed by a foreign one (an alert each).
func events(from, n int) string {
	var b strings.Builder
	base := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	for i := from; i < from+n; i++ {
		ts := base.Add(time.Duration(i) * time.Minute).Format(time.RFC3339)
		country := "US"
		if i%2 == 1 {
			country = "FR"
		}
		fmt.Fprintf(&b, `{"ts":%q,"card":"c%d","type":"auth","amount":500,"country":%q}`+"\n", ts, i/2, country)
	}
	return b.String()
}

// scrape returns the samples of the metrics page: name{labels} -> value.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		l := sc.Text()
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		v, err := strconv.ParseFloat(l[i+1:], 64)
		if err != nil {
			t.Fatalf("sample %q: %v", l, err)
		}
		out[l[:i]] = v
	}
	return out
}

func status(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestMetricsOfALiveJob runs a followed file through Engine.Stream with a
// monitor served by Handler: /readyz is 503 until the job reads, then
// 200; the counters and the alerts by rule move as events are appended;
// after the job, /readyz is 503 again and /healthz still 200.
func TestMetricsOfALiveJob(t *testing.T) {
	dir := t.TempDir()
	rs, err := rules.Load("m.cep", []byte(testRules))
	if err != nil {
		t.Fatal(err)
	}
	e, err := cep.New(cep.WithRuleset(rs))
	if err != nil {
		t.Fatal(err)
	}
	input := filepath.Join(dir, "events.jsonl")
	if err := os.WriteFile(input, []byte(events(0, 10)), 0o644); err != nil {
		t.Fatal(err)
	}
	m := cep.NewStreamMonitor()
	srv := httptest.NewServer(Handler(m))
	defer srv.Close()
	if got := status(t, srv.URL+"/readyz"); got != http.StatusServiceUnavailable {
		t.Fatalf("/readyz before the job: %d, want 503", got)
	}
	if got := status(t, srv.URL+"/healthz"); got != http.StatusOK {
		t.Fatalf("/healthz: %d", got)
	}
	// Before a job publishes (serve restoring a checkpoint): no
	// watermark yet, not the Unix epoch.
	before := scrape(t, srv.URL)
	if wm, lag := before["cepheus_watermark_seconds"], before["cepheus_watermark_lag_seconds"]; !math.IsInf(wm, -1) || lag != 0 {
		t.Errorf("before the job: watermark %v, lag %v; want -Inf and 0", wm, lag)
	}
	if at, ok := before["cepheus_state_durable_timestamp_seconds"]; ok {
		t.Errorf("before the job: the state durable at %v, want no such series", at)
	}
	started := time.Now().Truncate(time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := e.Stream(ctx, cep.StreamConfig{
			Events: input, Follow: true, PollInterval: 10 * time.Millisecond, StateDir: filepath.Join(dir, "state"),
			AlertsDir: filepath.Join(dir, "alerts"), ShadowDir: filepath.Join(dir, "shadow"),
			CheckpointInterval: 50 * time.Millisecond, Parallelism: 2, Monitor: m,
		})
		done <- err
	}()
	// waitFor polls the metrics until ok says so.
	waitFor := func(what string, ok func(map[string]float64) bool) map[string]float64 {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			s := scrape(t, srv.URL)
			if ok(s) {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after 20s; the metrics: %v", what, s)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	alerts := `cepheus_rule_alerts_total{rule="big_then_foreign",severity="high"}`
	s := waitFor("ready, 10 records", func(s map[string]float64) bool {
		return s["cepheus_ready"] == 1 && s["cepheus_records_total"] == 10
	})
	if got := status(t, srv.URL+"/readyz"); got != http.StatusOK {
		t.Fatalf("/readyz of the running job: %d, want 200", got)
	}
	if s[`cepheus_ruleset_info{ruleset="m",version="`+rs.Hash+`"}`] != 1 {
		t.Errorf("no ruleset_info of m %s: %v", rs.Hash, s)
	}
	// More events: the counters move, and the alerts come once the
	// watermark passes their events.
	f, err := os.OpenFile(input, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(events(10, 30)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s = waitFor("40 records, alerts, checkpoints", func(s map[string]float64) bool {
		return s["cepheus_records_total"] == 40 && s["cepheus_events_decoded_total"] == 40 && s[alerts] >= 10 &&
			s["cepheus_checkpoint_duration_seconds_count"] >= 1
	})
	if s["cepheus_alerts_total"] != s[alerts] {
		t.Errorf("alerts_total %v, the rule's %v", s["cepheus_alerts_total"], s[alerts])
	}
	if s["cepheus_watermark_seconds"] < float64(time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC).Unix()) {
		t.Errorf("watermark %v: not at the events' time", s["cepheus_watermark_seconds"])
	}
	// The state was durable at the latest checkpoint (or skipped one):
	// since the job started, and now at the latest.
	if at := s["cepheus_state_durable_timestamp_seconds"]; at < float64(started.Unix()) || at > float64(time.Now().Unix()+1) {
		t.Errorf("state durable at %v: not between the job's start (%v) and now", at, started.Unix())
	}
	// The followed file read to its end: its backlog series says 0 bytes.
	waitFor("the file's unread bytes", func(s map[string]float64) bool {
		n, ok := s[`cepheus_input_unread_bytes{partition="`+filepath.Base(input)+`"}`]
		return ok && n == 0
	})
	// The file just read from is not idle: its series says 0.
	idleSeries := 0
	for name, v := range s {
		if strings.HasPrefix(name, "cepheus_partition_idle{") {
			idleSeries++
			if v != 0 {
				t.Errorf("%s = %v while the file is read, want 0", name, v)
			}
		}
	}
	if idleSeries != 1 {
		t.Errorf("%d cepheus_partition_idle series, want the file's", idleSeries)
	}
	if s["cepheus_state_bytes"] <= 0 || s["cepheus_checkpoint_bytes"] <= 0 {
		t.Errorf("state bytes %v, checkpoint bytes %v: want some", s["cepheus_state_bytes"], s["cepheus_checkpoint_bytes"])
	}
	// A shadow version (the same rule, another threshold): its series
	// come, and move as events flow.
	shadow := strings.Replace(testRules, "amount > 100", "amount > 50", 1)
	res, err := m.Deploy(ctx, cep.Deploy{Source: []byte(shadow), Shadow: true})
	if err != nil {
		t.Fatal(err)
	}
	if f, err = os.OpenFile(input, os.O_APPEND|os.O_WRONLY, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(events(40, 30)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	shadowAlerts := `cepheus_shadow_rule_alerts_total{rule="big_then_foreign"}`
	s = waitFor("a shadow version's alerts", func(s map[string]float64) bool {
		return s[`cepheus_shadow_ruleset_info{version="`+res.Version+`"}`] == 1 && s[shadowAlerts] >= 10 &&
			s["cepheus_ruleset_switches_total"] == 1 && s["cepheus_records_total"] == 70
	})
	if a, o := s[`cepheus_shadow_rule_active_alerts_total{rule="big_then_foreign"}`], s[`cepheus_shadow_rule_overlap_total{rule="big_then_foreign"}`]; a == 0 || o == 0 || o > a || o > s[shadowAlerts] {
		t.Errorf("shadow comparison: %v shadow, %v active, %v both", s[shadowAlerts], a, o)
	}
	// A deploy that changes the rule's severity (its old version dropped
	// at once): the series of the old severity keeps its value, the new
	// one's counts on, and the rule's other counters stay one series.
	high := s[alerts]
	critical := strings.Replace(testRules, "severity high", "severity critical", 1)
	if _, err := m.Deploy(ctx, cep.Deploy{Source: []byte(critical), DropChanged: true}); err != nil {
		t.Fatal(err)
	}
	if f, err = os.OpenFile(input, os.O_APPEND|os.O_WRONLY, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(events(70, 30)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s = waitFor("the new severity's alerts", func(s map[string]float64) bool {
		return s[`cepheus_rule_alerts_total{rule="big_then_foreign",severity="critical"}`] >= 10 && s["cepheus_records_total"] == 100
	})
	if s[alerts] < high {
		t.Errorf("the old severity's alerts went down: %v -> %v", high, s[alerts])
	}
	if got := s[`cepheus_rule_alerts_total{rule="big_then_foreign",severity="critical"}`] + s[alerts]; got != s["cepheus_alerts_total"] {
		t.Errorf("the rule's alerts by severity sum to %v, alerts_total %v", got, s["cepheus_alerts_total"])
	}
	if _, ok := s[`cepheus_rule_dropped_total{rule="big_then_foreign"}`]; !ok {
		t.Errorf("no dropped_total of the rule: %v", s)
	}
	for name := range s {
		if strings.Contains(name, `card=`) || strings.Contains(name, `"c1"`) {
			t.Errorf("a sample names an event value: %s", name)
		}
	}
	cancel()
	if err := <-done; err != nil && err != context.Canceled {
		t.Fatalf("the job: %v", err)
	}
	if got := status(t, srv.URL+"/readyz"); got != http.StatusServiceUnavailable {
		t.Errorf("/readyz after the job: %d, want 503", got)
	}
	if got := status(t, srv.URL+"/healthz"); got != http.StatusOK {
		t.Errorf("/healthz after the job: %d", got)
	}
}

// TestNamesExported: every name of Names is on the metrics page of a
// monitor that saw a job, and every cepheus_ family on it is in Names.
func TestNamesExported(t *testing.T) {
	m := cep.NewStreamMonitor()
	srv := httptest.NewServer(Handler(m))
	defer srv.Close()
	// With a lookup, bound to a file that knows half the cards.
	rs, err := rules.Load("m.cep", []byte(testRules+`
lookup holder {
  key card
  fields {
    tier: string default "none"
  }
}

aggregate cards_per_country {
  key country
  distinct card
  window 1h
}
`))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var holders strings.Builder
	for i := 0; i < 10; i += 2 {
		fmt.Fprintf(&holders, `{"card":"c%d","tier":"gold"}`+"\n", i)
	}
	holdersFile := filepath.Join(dir, "holders.jsonl")
	if err := os.WriteFile(holdersFile, []byte(holders.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := cep.OpenLookupSource(rs, "holder", "file:"+holdersFile, cep.RedisAuth{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := cep.New(cep.WithRuleset(rs), cep.WithLookups(map[string]cep.LookupSource{"holder": src}, cep.LookupOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	input := filepath.Join(dir, "events.jsonl")
	if err := os.WriteFile(input, []byte(events(0, 20)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Stream(context.Background(), cep.StreamConfig{Events: input, StateDir: filepath.Join(dir, "state"),
		AlertsDir: filepath.Join(dir, "alerts"), Monitor: m}); err != nil {
		t.Fatal(err)
	}
	s := scrape(t, srv.URL)
	families := map[string]bool{}
	for name := range s {
		name, _, _ = strings.Cut(name, "{")
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if f, ok := strings.CutSuffix(name, suffix); ok && (f == "cepheus_checkpoint_duration_seconds" || f == "cepheus_lookup_request_duration_seconds" || f == "cepheus_lookup_event_delay_seconds") {
				name = f
			}
		}
		if strings.HasPrefix(name, "cepheus_") {
			families[name] = true
		}
	}
	for _, n := range Names {
		// The consumer lag has a series per Kafka partition: none for a
		// file (cep's Kafka tests check the monitor's lag), and the
		// unread bytes one per followed file: none for a file read to
		// its end (TestMetricsOfALiveJob follows one); the shadow series
		// exist only with a shadow version (TestMetricsOfALiveJob deploys
		// one).
		if !families[n] && n != "cepheus_kafka_consumer_lag_records" && n != "cepheus_input_unread_bytes" && !strings.HasPrefix(n, "cepheus_shadow_") {
			t.Errorf("%s is not exported", n)
		}
		delete(families, n)
	}
	for n := range families {
		t.Errorf("%s is exported but not in Names", n)
	}
	// 20 events of 10 cards, 5 of them known.
	if hit, miss, nf := s[`cepheus_lookup_keys_total{lookup="holder",result="hit"}`], s[`cepheus_lookup_keys_total{lookup="holder",result="miss"}`],
		s[`cepheus_lookup_not_found_total{lookup="holder"}`]; miss != 10 || nf != 5 || hit != 0 {
		t.Errorf("lookup keys: %v hits, %v misses, %v not found; want 0, 10, 5 (the 20 events in one batch)", hit, miss, nf)
	}
	if n, ok := s[`cepheus_aggregate_keys{aggregate="cards_per_country"}`]; n != 0 || !ok {
		t.Errorf("aggregate keys %v (exported %v), want 0: the file's final watermark is past every window (runtime's TestAggregateKeyCounts checks the counts)", n, ok)
	}
	if n := s[`cepheus_lookup_request_duration_seconds_count{lookup="holder"}`]; n != s[`cepheus_lookup_requests_total{lookup="holder"}`] || n == 0 {
		t.Errorf("lookup request durations: %v, requests %v", n, s[`cepheus_lookup_requests_total{lookup="holder"}`])
	}
}

// TestDashboard: every query of the Grafana dashboard (docs/grafana)
// names metrics the exporter exports, and every metric is on a panel.
func TestDashboard(t *testing.T) {
	d := readDashboard(t)
	exported := map[string]bool{}
	for _, n := range Names {
		exported[n] = true
	}
	shown := map[string]bool{}
	name := regexp.MustCompile(`\bcepheus_[a-z_]+`)
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			found := name.FindAllString(q.Expr, -1)
			if len(found) == 0 {
				t.Errorf("panel %q: query %q names no cepheus metric", p.Title, q.Expr)
			}
			for _, n := range found {
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if f, ok := strings.CutSuffix(n, suffix); ok && exported[f] {
						n = f
					}
				}
				if !exported[n] {
					t.Errorf("panel %q: query %q names %s, which the engine does not export", p.Title, q.Expr, n)
				}
				shown[n] = true
			}
		}
	}
	for _, n := range Names {
		if !shown[n] && n != "cepheus_last_checkpoint" {
			t.Errorf("%s is on no panel", n)
		}
	}
}

// dashboard is what the tests read of docs/grafana/cepheus.json.
type dashboard struct {
	Panels []struct {
		Title       string
		FieldConfig struct {
			Overrides []struct {
				Matcher    struct{ ID, Options string }
				Properties []struct{ ID string }
			}
		}
		Targets []struct{ RefID, Expr string }
	}
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile("../../docs/grafana/cepheus.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestDashboardUnits: a panel's queries share the panel's unit, or the
// ones of another kind (per second, a plain value, a ratio, a quantile)
// have a unit of their own (an override by query): a panel that draws
// consumer lag in records on an axis of operations per second misleads.
func TestDashboardUnits(t *testing.T) {
	d := readDashboard(t)
	for _, p := range d.Panels {
		own := map[string]bool{}
		for _, o := range p.FieldConfig.Overrides {
			for _, prop := range o.Properties {
				if o.Matcher.ID == "byFrameRefID" && prop.ID == "unit" {
					own[o.Matcher.Options] = true
				}
			}
		}
		kinds := map[string][]string{}
		for _, q := range p.Targets {
			if !own[q.RefID] {
				k := queryKind(q.Expr)
				kinds[k] = append(kinds[k], q.RefID)
			}
		}
		if len(kinds) > 1 {
			t.Errorf("panel %q mixes kinds of values on one unit: %v; give all but one kind a unit of its own (an override by query)", p.Title, kinds)
		}
	}
	for expr, want := range map[string]string{
		"sum by (partition) (cepheus_kafka_consumer_lag_records)":       "value",
		"sum by (outcome) (rate(cepheus_kafka_transactions_total[5m]))": "per second",
		"increase(cepheus_ruleset_switches_total[1h])":                  "value",
		"rate(x[1m]) / rate(y[1m])":                                     "ratio",
		"histogram_quantile(0.5, sum by (le) (rate(x_bucket[5m])))":     "quantile",
	} {
		if got := queryKind(expr); got != want {
			t.Errorf("queryKind(%q) = %q, want %q", expr, got, want)
		}
	}
}

// queryKind is what kind of value a dashboard query gives.
func queryKind(expr string) string {
	switch {
	case strings.Contains(expr, "histogram_quantile("):
		return "quantile"
	case strings.Contains(expr, " / "):
		return "ratio"
	case strings.Contains(expr, "rate("):
		return "per second"
	}
	return "value"
}

// TestDashboardMatching: the two sides of a query's binary operator keep
// the same labels, or say how they match (on), or one is a number or a
// scalar, so that the query finds its pairs of series: max(x) - x, whose
// left side has no labels and whose right side has the series' (instance,
// job, ...), or rate(x) / ignoring(result) sum by (lookup) (y), whose left
// side keeps instance, is empty in Prometheus.
func TestDashboardMatching(t *testing.T) {
	d := readDashboard(t)
	for _, p := range d.Panels {
		for _, q := range p.Targets {
			if msg := matchProblem(q.Expr); msg != "" {
				t.Errorf("panel %q: query %q: %s", p.Title, q.Expr, msg)
			}
		}
	}
	for expr, bad := range map[string]bool{
		"max(x) - x": true,
		"rate(x[5m]) / ignoring(result) sum by (l) (y)":  true,
		"sum by (l) (x) / sum by (a) (y)":                true,
		"sum by (l) (x) / sum by (l) (y)":                false,
		"max by (job) (x) - on (job) group_right x":      false,
		"max by (job) (x) - on (instance) group_right x": true,
		"scalar(max(x)) - x":                             false,
		"x * 1000":                                       false,
		"rate(x{a=\"-\"}[5m])":                           false,
	} {
		if got := matchProblem(expr) != ""; got != bad {
			t.Errorf("matchProblem(%q) = %q, want a problem: %v", expr, matchProblem(expr), bad)
		}
	}
}

// matchProblem is what is wrong with the label matching of expr's first
// top-level binary operator (+ - * /), or "".
func matchProblem(expr string) string {
	depth, quoted := 0, false
	for i, c := range expr {
		switch {
		case quoted:
			quoted = c != '"'
		case c == '"':
			quoted = true
		case c == '(' || c == '{' || c == '[':
			depth++
		case c == ')' || c == '}' || c == ']':
			depth--
		case depth == 0 && strings.ContainsRune("+-*/", c):
			return sidesProblem(strings.TrimSpace(expr[:i]), strings.TrimSpace(expr[i+1:]))
		}
	}
	return ""
}

var (
	aggBy    = regexp.MustCompile(`^(?:sum|max|min|avg|count) by \(([^)]*)\)`)
	aggAll   = regexp.MustCompile(`^(?:sum|max|min|avg|count) ?\(`)
	matching = regexp.MustCompile(`^(on|ignoring) ?\(([^)]*)\) ?(?:group_left|group_right)? ?`)
	number   = regexp.MustCompile(`^[0-9.]+$`)
)

// sidesProblem compares the labels of the two sides of a binary operator
// (the right one with its matching modifier, if any).
func sidesProblem(left, right string) string {
	mod := matching.FindStringSubmatch(right)
	if mod != nil {
		right = right[len(mod[0]):]
	}
	// labels is the labels a side keeps: nil for every label of its
	// series, none for a number or a scalar.
	labels := func(side string) (set []string, scalar bool) {
		switch {
		case number.MatchString(side), strings.HasPrefix(side, "scalar("):
			return nil, true
		case aggBy.MatchString(side):
			for _, l := range strings.Split(aggBy.FindStringSubmatch(side)[1], ",") {
				set = append(set, strings.TrimSpace(l))
			}
			return set, false
		case aggAll.MatchString(side):
			return []string{}, false
		}
		return nil, false
	}
	l, lScalar := labels(left)
	r, rScalar := labels(right)
	if lScalar || rScalar {
		return ""
	}
	if mod != nil && mod[1] == "on" {
		for _, on := range strings.Split(mod[2], ",") {
			for _, set := range [][]string{l, r} {
				if set != nil && !slices.Contains(set, strings.TrimSpace(on)) {
					return fmt.Sprintf("a side does not keep %s, which on () matches on", on)
				}
			}
		}
		return ""
	}
	if l == nil && r == nil || l != nil && r != nil && slices.Equal(l, r) {
		return ""
	}
	say := func(set []string) string {
		if set == nil {
			return "every label of its series"
		}
		return fmt.Sprintf("(%s)", strings.Join(set, ", "))
	}
	return fmt.Sprintf("its left side keeps %s, its right side %s: no series pair up", say(l), say(r))
}

// TestDocsListMetrics: the metrics table of docs/operations.md lists
// exactly the metrics of Names.
func TestDocsListMetrics(t *testing.T) {
	b, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	row := regexp.MustCompile("(?m)^\\| `(cepheus_[a-z_]+)` \\|")
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		if listed[m[1]] {
			t.Errorf("docs/operations.md lists %s twice", m[1])
		}
		listed[m[1]] = true
	}
	for _, n := range Names {
		if !listed[n] {
			t.Errorf("docs/operations.md does not list %s", n)
		}
		delete(listed, n)
	}
	for n := range listed {
		t.Errorf("docs/operations.md lists %s, which is not exported", n)
	}
}

// TestTimedOutAlertsBySeverity: a rule's timed-out partial matches count
// in cepheus_rule_alerts_total under its timeout block's severity, its
// matches under its own; a later job whose rule has another timeout
// severity counts under that one, and the former series keeps its value.
func TestTimedOutAlertsBySeverity(t *testing.T) {
	m := cep.NewStreamMonitor()
	srv := httptest.NewServer(Handler(m))
	defer srv.Close()
	dir := t.TempDir()
	// Ten cards, each with a large authorization: the even ones go on
	// with a small one abroad a minute later (a match), the odd ones
	// with nothing (a partial match that the end of the input times out).
	var b strings.Builder
	base := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	for i := range 10 {
		at := func(min int) string { return base.Add(time.Duration(min) * time.Minute).Format(time.RFC3339) }
		fmt.Fprintf(&b, `{"ts":%q,"card":"c%d","type":"auth","amount":500,"country":"US"}`+"\n", at(2*i), i)
		if i%2 == 0 {
			fmt.Fprintf(&b, `{"ts":%q,"card":"c%d","type":"auth","amount":5,"country":"FR"}`+"\n", at(2*i+1), i)
		}
	}
	input := filepath.Join(dir, "events.jsonl")
	if err := os.WriteFile(input, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	job := func(n int, timeoutSeverity string) map[string]float64 {
		t.Helper()
		src := strings.Replace(testRules, "    within 10m\n  }\n", "    within 10m\n  }\n  timeout {\n    severity "+timeoutSeverity+"\n  }\n", 1)
		rs, err := rules.Load("m.cep", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		if rs.Rules[0].Timeout == nil {
			t.Fatalf("the rule has no timeout block:\n%s", src)
		}
		e, err := cep.New(cep.WithRuleset(rs))
		if err != nil {
			t.Fatal(err)
		}
		sub := filepath.Join(dir, strconv.Itoa(n))
		if _, err := e.Stream(context.Background(), cep.StreamConfig{Events: input, StateDir: filepath.Join(sub, "state"),
			AlertsDir: filepath.Join(sub, "alerts"), Monitor: m}); err != nil {
			t.Fatal(err)
		}
		return scrape(t, srv.URL)
	}
	series := func(severity string) string {
		return `cepheus_rule_alerts_total{rule="big_then_foreign",severity="` + severity + `"}`
	}
	s := job(1, "low")
	if high, low := s[series("high")], s[series("low")]; high != 5 || low != 5 || s["cepheus_alerts_total"] != 10 {
		t.Errorf("first job: %v high, %v low, %v in all; want 5 matches (high), 5 timed out (low), 10", high, low, s["cepheus_alerts_total"])
	}
	s = job(2, "medium")
	if high, low, medium := s[series("high")], s[series("low")], s[series("medium")]; high != 10 || low != 5 || medium != 5 {
		t.Errorf("after a job with the timeout severity medium: %v high, %v low, %v medium; want 10, 5 (kept), 5", high, low, medium)
	}
	// The snapshot (cepheus status) lists the active rule's counts, the
	// former timeout severity's apart.
	sn := m.Snapshot()
	if len(sn.Rules) != 1 || sn.Rules[0].Alerts != 10 || sn.Rules[0].TimedOut != 5 || sn.Rules[0].TimeoutSeverity != "medium" {
		t.Errorf("the snapshot's rules: %+v; want one of 10 alerts, 5 timed out, medium", sn.Rules)
	}
	if len(sn.Former) != 1 || sn.Former[0].TimedOut != 5 || sn.Former[0].TimeoutSeverity != "low" {
		t.Errorf("the snapshot's former rules: %+v; want one of 5 timed out, low", sn.Former)
	}
}

// TestEmitErrorsAndEventsWithoutKey: an emit field that fails (null in
// its alert) and an event without the rule's key field count in
// cepheus_rule_emit_errors_total and cepheus_rule_events_without_key_total
// of the rule, and in the snapshot (cepheus status); only the end of run's
// summary had them.
func TestEmitErrorsAndEventsWithoutKey(t *testing.T) {
	m := cep.NewStreamMonitor()
	srv := httptest.NewServer(Handler(m))
	defer srv.Close()
	dir := t.TempDir()
	// The emit field fails on a match whose foreign authorization's
	// amount is even (an integer % by zero).
	src := strings.Replace(testRules, "    within 10m\n  }\n", "    within 10m\n  }\n  emit {\n    odd: int(big.amount) % (int(foreign.amount) % 2)\n  }\n", 1)
	// A rule of another key: without it the card would be required, an
	// event without it a dead letter.
	src += "\nrule by_country {\n  key country\n  pattern {\n    begin a where amount > 100000\n  }\n}\n"
	rs, err := rules.Load("m.cep", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs.Rules[0].Emits) != 1 {
		t.Fatalf("the rule has no emit field:\n%s", src)
	}
	// Ten cards, each with a large authorization then one abroad (a
	// match): the even cards' second amount is even (an emit error);
	// three events lack the card.
	var b strings.Builder
	base := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	at := func(min int) string { return base.Add(time.Duration(min) * time.Minute).Format(time.RFC3339) }
	for i := range 10 {
		fmt.Fprintf(&b, `{"ts":%q,"card":"c%d","type":"auth","amount":500,"country":"US"}`+"\n", at(2*i), i)
		fmt.Fprintf(&b, `{"ts":%q,"card":"c%d","type":"auth","amount":%d,"country":"FR"}`+"\n", at(2*i+1), i, 20+i)
	}
	for i := range 3 {
		fmt.Fprintf(&b, `{"ts":%q,"type":"auth","amount":500,"country":"US"}`+"\n", at(30+i))
	}
	input := filepath.Join(dir, "events.jsonl")
	if err := os.WriteFile(input, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := cep.New(cep.WithRuleset(rs))
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Stream(context.Background(), cep.StreamConfig{Events: input, StateDir: filepath.Join(dir, "state"),
		AlertsDir: filepath.Join(dir, "alerts"), Parallelism: 2, Monitor: m})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Rules[0]; r.Alerts != 10 || r.EmitErrors != 5 || r.NoKey != 3 {
		t.Fatalf("the run's summary: %+v; want 10 alerts, 5 emit errors, 3 events without the key", r)
	}
	s := scrape(t, srv.URL)
	emit, noKey := s[`cepheus_rule_emit_errors_total{rule="big_then_foreign"}`], s[`cepheus_rule_events_without_key_total{rule="big_then_foreign"}`]
	if emit != 5 || noKey != 3 {
		t.Errorf("cepheus_rule_emit_errors_total %v, cepheus_rule_events_without_key_total %v; want 5 and 3 (the run's summary)", emit, noKey)
	}
	if sn := m.Snapshot(); len(sn.Rules) != 2 || sn.Rules[0].EmitErrors != 5 || sn.Rules[0].NoKey != 3 || sn.Rules[1].NoKey != 0 {
		t.Errorf("the snapshot's rules: %+v; want 5 emit errors, 3 events without the key", sn.Rules)
	}
}
