//go:build linux

package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cepheus-cep/cepheus/cep"
)

// TestVelocityAggregateWorkers: the velocity ruleset over events of which
// half are of one merchant (above the hot share of a release, so its
// window is salted) gives the same alerts with -aggregate-workers 1 and
// 2 in a backtest, and in a run killed after its third checkpoint with 2
// workers and resumed with 1 (and the other way round): the aggregators'
// state restores across the setting. A bad value is a usage error.
func TestVelocityAggregateWorkers(t *testing.T) {
	bin := buildCepheus(t)
	dir := t.TempDir()
	// Authorisations every 100 ms, half of them at merchant m0, the
	// others over 40 merchants; cards in bursts of a few hundred.
	rnd := rand.New(rand.NewPCG(15, 5))
	var b strings.Builder
	for i := range 12_000 {
		m := fmt.Sprintf("m%d", 1+rnd.IntN(40))
		if rnd.IntN(2) == 0 {
			m = "m0"
		}
		card := fmt.Sprintf("c%d", rnd.IntN(300)+i/500*100)
		device := ""
		if rnd.IntN(3) == 0 {
			device = "d1"
		}
		fmt.Fprintf(&b, `{"ts":%d,"type":"auth","event_id":"e%d","customer_id":"u%s","card_id":"%s","amount":%d,"currency":"EUR","merchant_id":"%s","merchant_country":"%s","device_id":"%s"}`+"\n",
			1_767_225_600_000+int64(i)*100+rnd.Int64N(2000), i, card, card, 10+rnd.IntN(3000), m, []string{"FR", "DE", "ES", "IT"}[rnd.IntN(4)], device)
	}
	events := writeFile(t, dir, "events.jsonl", b.String())
	rules := "../../rulesets/velocity.cep"
	backtest := func(workers string) []string {
		out := filepath.Join(dir, "backtest-"+workers+".jsonl")
		if code, _, errOut := cepheus(t, "backtest", "-q", "-rules", rules, "-events", events, "-alerts", out, "-aggregate-workers", workers); code != 0 {
			t.Fatalf("backtest -aggregate-workers %s: exit %d\n%s", workers, code, errOut)
		}
		return velocityAlerts(readLines(t, out))
	}
	want := backtest("1")
	if len(want) == 0 {
		t.Fatal("the backtest has no alert: nothing to compare")
	}
	sameAlerts(t, "backtest -aggregate-workers 2", backtest("2"), want)
	run := func(name, workers string) []string {
		return []string{"run", "-rules", rules, "-events", events, "-state", filepath.Join(dir, name+"-state"),
			"-alerts", filepath.Join(dir, name+"-alerts"), "-parallelism", "2", "-checkpoint-records", "1500",
			"-aggregate-workers", workers}
	}
	for _, w := range [][2]string{{"2", "1"}, {"1", "2"}} {
		name := "run-" + w[0] + "-" + w[1]
		if e := runChild(t, bin, run(name, w[0]), "checkpoint.complete@3", 0); !e.killed {
			t.Fatalf("%s: no kill after the third checkpoint: %s\n%s", name, e.describe(), e.tail())
		}
		if e := runChild(t, bin, run(name, w[1]), "", 0); e.killed || e.code != 0 || !strings.Contains(e.stderr, "checkpoint 3") {
			t.Fatalf("%s resumed: %s (want it resumed from checkpoint 3)\n%s", name, e.describe(), e.tail())
		}
		sameAlerts(t, name, velocityAlerts(committedAlerts(t, filepath.Join(dir, name+"-alerts"))), want)
	}
	if code, _, errOut := cepheus(t, "run", "-rules", rules, "-events", events, "-state", dir, "-alerts", "-", "-aggregate-workers", "0"); code != 2 || !strings.Contains(errOut, "-aggregate-workers 0") {
		t.Errorf("run -aggregate-workers 0: exit %d, stderr %q; want a usage error", code, errOut)
	}
}

// TestVelocityProcessingTimeIsUsage: run -time processing on a ruleset
// with velocity aggregates is a usage error that names them, before the
// state directory is made.
func TestVelocityProcessingTimeIsUsage(t *testing.T) {
	dir := t.TempDir()
	events := writeFile(t, dir, "e.jsonl", abEvents(10, 0, ""))
	state := filepath.Join(dir, "state")
	code, _, stderr := cepheus(t, "run", "-rules", "../../rulesets/velocity.cep", "-events", events, "-state", state,
		"-alerts", filepath.Join(dir, "alerts"), "-time", "processing")
	want := "cepheus: run: -time processing: ruleset velocity has velocity aggregates (merchant_cards, card_hour_spend, card_countries_today), whose windows are of event time; leave out -time processing\n"
	if code != 2 || !strings.HasPrefix(stderr, want) || !strings.Contains(stderr, "cepheus help run") {
		t.Errorf("run -time processing with aggregates: exit %d, stderr %q; want 2 and %q", code, stderr, want)
	}
	if _, err := os.Stat(state); err == nil {
		t.Errorf("the state directory was made")
	}
}

// TestAggregateWorkersHelp: the help of -aggregate-workers states its
// upper bound, which a larger value is refused with ("from 1 to 64"); it
// said only what 1 does.
func TestAggregateWorkersHelp(t *testing.T) {
	for _, name := range []string{"backtest", "run", "serve"} {
		_, help, _ := cepheus(t, "help", name)
		_, usage, _ := strings.Cut(help, "\n  -aggregate-workers int\n")
		usage, _, _ = strings.Cut(usage, "\n  -")
		if want := fmt.Sprintf("at most %d", cep.MaxAggregateWorkers); !strings.Contains(usage, want) {
			t.Errorf("%s -aggregate-workers: the help does not say %q:\n%s", name, want, usage)
		}
	}
}
