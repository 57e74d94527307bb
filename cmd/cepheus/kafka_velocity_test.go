//go:build linux

package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// velocityWhere is what tells, in an alert line, where its events were
// read: a line of the file, a partition and offset of the topic.
var velocityWhere = regexp.MustCompile(`"line":[0-9]+(,"partition":[0-9]+)?,`)

// velocityAlerts is alert lines without velocityWhere, sorted: the rest,
// aggregates included, is the same wherever the events come from.
func velocityAlerts(lines []string) []string {
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, velocityWhere.ReplaceAllString(l, ""))
		}
	}
	slices.Sort(out)
	return out
}

// committedAlerts reads the committed part files of an alerts directory.
func committedAlerts(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, f := range files {
		lines = append(lines, readLines(t, f)...)
	}
	return lines
}

// sameAlerts fails unless got holds want's lines, each once.
func sameAlerts(t *testing.T, what string, got, want []string) {
	t.Helper()
	if slices.Equal(got, want) {
		t.Logf("%s: the backtest's %d alerts", what, len(got))
		return
	}
	t.Errorf("%s: %d alerts, the backtest %d (or they differ)", what, len(got), len(want))
	for _, l := range got {
		if _, found := slices.BinarySearch(want, l); !found {
			t.Logf("not in the backtest: %.400s", l)
			break
		}
	}
	for _, l := range want {
		if _, found := slices.BinarySearch(got, l); !found {
			t.Logf("only in the backtest: %.400s", l)
			break
		}
	}
}

// TestKafkaVelocity runs the velocity ruleset (rulesets/velocity.cep, its
// thresholds lowered so that generated data gives alerts of all three
// rules) over generated card events produced into a 4-partition topic
// keyed by card_id. Every run gives the backtest's alerts, each once,
// aggregate values included (alerts compared whole, but for where their
// events were read):
//   - run -input-topic -bounded with file outputs;
//   - the same killed after its third checkpoint and resumed with another
//     parallelism and -aggregate-workers 2 (the aggregates' held events
//     and windows restored into a salting aggregator);
//   - a transactional job of two instances of one group (merchant_cards
//     computed on the repartition topic of merchant_id, the card
//     aggregates on the input partitions; instance a's aggregators on 2
//     workers, b's serial), one killed after its third
//     transaction and restarted only after its session timeout: its
//     partitions, their aggregators' held events and windows with them,
//     are restored from the changelog (by the other instance, or by it
//     back); the alerts topic read read_committed.
func TestKafkaVelocity(t *testing.T) {
	brokers := kafkaBrokers(t)
	bin := buildCepheus(t)
	// One core per instance and 75,000 events: a run lasts long enough to
	// be killed midway (with 30,000, once the engine got faster, instance
	// a of the group sometimes committed the end of its partitions by its
	// third transaction, and b found nothing to take over).
	t.Setenv("GOMAXPROCS", "1")
	dir := t.TempDir()
	events := filepath.Join(dir, "events.jsonl")
	if code, _, errOut := cepheus(t, "gen", "-history-days", "0", "-days", "1", "-events-per-day", "75000", "-customers", "800",
		"-merchants", "200", "-fraud-rate", "100", "-scenarios", "card_testing,account_takeover,impossible_travel,large_then_foreign,velocity_burst",
		"-o", events); code != 0 {
		t.Fatalf("gen: exit %d\n%s", code, errOut)
	}
	src, err := os.ReadFile("../../rulesets/velocity.cep")
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)
	for _, r := range [][2]string{
		{"merchant_cards == 30", "merchant_cards == 6"}, {"merchant_cards > 30", "merchant_cards > 6"},
		{"card_hour_spend > 10000 && card_hour_spend - amount <= 10000", "card_hour_spend > 1500 && card_hour_spend - amount <= 1500"},
		{"card_countries_today == 3", "card_countries_today == 2"},
	} {
		if !strings.Contains(text, r[0]) {
			t.Fatalf("rulesets/velocity.cep has no %q", r[0])
		}
		text = strings.Replace(text, r[0], r[1], 1)
	}
	rules := writeFile(t, dir, "velocity.cep", text)
	bt := filepath.Join(dir, "backtest.jsonl")
	if code, _, errOut := cepheus(t, "backtest", "-q", "-rules", rules, "-events", events, "-alerts", bt); code != 0 {
		t.Fatalf("backtest: exit %d\n%s", code, errOut)
	}
	want := velocityAlerts(readLines(t, bt))
	for _, r := range []string{"merchant_card_burst", "card_spend_spree", "card_country_hopping"} {
		if n := strings.Count(strings.Join(want, "\n"), `"rule":"`+r+`"`); n < 10 {
			t.Fatalf("the backtest has %d alerts of %s: too few to tell", n, r)
		}
	}
	topic := kafkaTopic(t, "velocity")
	if code, _, errOut := cepheus(t, "produce", "-brokers", brokers, "-topic", topic, "-partitions", "4",
		"-key", "card_id", "-time-field", "ts", "-events", events); code != 0 {
		t.Fatalf("produce: exit %d\n%s", code, errOut)
	}

	// File outputs: one run, then one killed after its third checkpoint
	// and resumed with another parallelism. A checkpoint every 5,000
	// records besides every 20 ms (-checkpoint-records): the third comes
	// within the first 15,000 of the 75,000 events however fast the host.
	fileRun := func(name string, parallelism string, workers string) []string {
		return []string{"run", "-rules", rules, "-brokers", brokers, "-input-topic", topic, "-bounded",
			"-state", filepath.Join(dir, name+"-state"), "-alerts", filepath.Join(dir, name+"-alerts"),
			"-parallelism", parallelism, "-checkpoint-interval", "20ms", "-checkpoint-records", "5000", "-aggregate-workers", workers}
	}
	if e := runChild(t, bin, fileRun("whole", "2", "1"), "", 0); e.killed || e.code != 0 {
		t.Fatalf("run: %s\n%s", e.describe(), e.tail())
	}
	sameAlerts(t, "run -input-topic", velocityAlerts(committedAlerts(t, filepath.Join(dir, "whole-alerts"))), want)
	if e := runChild(t, bin, fileRun("resumed", "2", "1"), "checkpoint.complete@3", 0); !e.killed {
		t.Fatalf("run with a kill after its third checkpoint: %s (it ended first)\n%s", e.describe(), e.tail())
	}
	if e := runChild(t, bin, fileRun("resumed", "3", "2"), "", 0); e.killed || e.code != 0 || !strings.Contains(e.stderr, "checkpoint 3") {
		t.Fatalf("resumed run: %s (want it resumed from checkpoint 3)\n%s", e.describe(), e.tail())
	}
	sameAlerts(t, "run -input-topic killed and resumed", velocityAlerts(committedAlerts(t, filepath.Join(dir, "resumed-alerts"))), want)

	// Exactly once: two instances of a group.
	group := topic + "-g"
	// Instance a's partitions' aggregators on 2 workers each (salting
	// hot keys), b's serial: a partition restored by the other instance
	// changes setting. A checkpoint every 5,000 records besides every
	// 50 ms: a's third transaction commits at most 15,000 of the records
	// it reads (about half of the 75,000 events), so it is killed with
	// its partitions unfinished however fast the host.
	instance := func(name string) []string {
		workers := map[string]string{"a": "2"}[name]
		if workers == "" {
			workers = "1"
		}
		return []string{"run", "-rules", rules, "-brokers", brokers, "-input-topic", topic, "-bounded",
			"-alerts-topic", group + "-alerts", "-group", group, "-record-key", "card_id",
			"-instance-id", name, "-state", filepath.Join(dir, name+"-state"), "-session-timeout", "2s",
			"-checkpoint-interval", "50ms", "-checkpoint-records", "5000", "-parallelism", "2", "-aggregate-workers", workers}
	}
	a := startChild(t, bin, instance("a"), "kafka.after-commit@3")
	b := startChild(t, bin, instance("b"), "")
	defer func() {
		for _, c := range []*child{a, b} {
			select {
			case <-c.done:
			default:
				c.kill()
			}
		}
	}()
	wait := func(c *child, name string) crashExit {
		t.Helper()
		select {
		case <-c.done:
		case <-time.After(time.Minute):
			c.kill()
			t.Fatalf("instance %s still runs after a minute\n%s", name, c.out.String())
		}
		return c.exit()
	}
	if e := wait(a, "a"); !e.killed {
		t.Fatalf("instance a, to be killed after its third transaction: %s\n%s", e.describe(), e.tail())
	}
	// Away past its session timeout: b takes a's partitions over,
	// restoring them from the changelog. Waited for, not slept: on a busy
	// machine the group may notice a's death late, and a restarted
	// within it would get its partitions back from its own state.
	taken := "changelog topic " + group + "-changelog"
	before := strings.Count(b.out.String(), taken) // restores at the start, if any
	for deadline := time.Now().Add(time.Minute); strings.Count(b.out.String(), taken) == before; {
		select {
		case <-b.done:
			t.Fatalf("instance b ended before taking a's partitions over: %s\n%s", b.exit().describe(), b.exit().tail())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance b has not taken a's partitions over a minute after a was killed\n%s", b.out.String())
		}
	}
	a = startChild(t, bin, instance("a"), "")
	restored := false
	for _, in := range []struct {
		c    *child
		name string
	}{{a, "a"}, {b, "b"}} {
		e := wait(in.c, in.name)
		if e.killed || e.code != 0 {
			t.Fatalf("instance %s: %s\n%s", in.name, e.describe(), e.tail())
		}
		restored = restored || strings.Contains(e.stderr, "changelog topic "+group+"-changelog")
	}
	if !restored {
		t.Errorf("no instance restored partitions from the changelog")
	}
	var got []string
	for _, l := range consumeTopic(t, bin, brokers, group+"-alerts") {
		got = append(got, string(l))
	}
	sameAlerts(t, "two instances, one killed (read_committed)", velocityAlerts(got), want)
}
