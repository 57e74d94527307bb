package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"

	"github.com/cepheus-cep/cepheus/cep"
	"github.com/cepheus-cep/cepheus/internal/humanize"
	"github.com/cepheus-cep/cepheus/rules"
)

// This file is backtest -baseline: the same events through a second
// ruleset, and each rule's alerts against that ruleset's.

// loadBaseline loads the ruleset file path of -baseline, printing its
// warnings to w, with only the rules named in only (all when only is
// empty; a name it lacks is no error: a rule -rules adds).
func loadBaseline(path string, only []string, w io.Writer) (*rules.Ruleset, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	rs, err := rules.LoadRules(path, src)
	if err != nil {
		if err := printErrors(w, err, true); err != nil {
			return nil, err
		}
		return nil, errFound
	}
	_ = rs.Warnings.Print(w, true)
	if len(only) > 0 {
		c := *rs
		c.Rules = slices.DeleteFunc(slices.Clone(rs.Rules), func(r *rules.Rule) bool { return !slices.Contains(only, r.Name) })
		rs = &c
	}
	return rs, nil
}

// alertSet is an observer that counts a run's alerts by rule and by the
// events they hold: the same events, by stage, are the same alert in two
// runs over the same input, whatever the rule's version (and so its ids
// and emitted values).
type alertSet struct {
	byRule map[string]map[string]int64
	// seqs are the events' numbers of each alert signature (by rule), and
	// events those of all the rule's alerts: whether an alert one run
	// alone gave shares events with the other run's.
	seqs   map[string][]uint64
	events map[string]map[uint64]bool
	buf    []byte
}

func newAlertSet() *alertSet {
	return &alertSet{byRule: map[string]map[string]int64{}, seqs: map[string][]uint64{}, events: map[string]map[uint64]bool{}}
}

// OnAlert counts a.
func (s *alertSet) OnAlert(a *cep.Alert) {
	b := s.buf[:0]
	if a.TimedOut {
		b = append(b, 't')
	}
	for i, evs := range a.Matched {
		b = strconv.AppendInt(append(b, ' '), int64(i), 10)
		b = append(b, ':')
		for _, ev := range evs {
			b = strconv.AppendUint(append(b, ','), ev.Seq, 10)
		}
	}
	s.buf = b
	m := s.byRule[a.Rule]
	if m == nil {
		m = map[string]int64{}
		s.byRule[a.Rule] = m
		s.events[a.Rule] = map[uint64]bool{}
	}
	sig := a.Rule + "\x00" + string(b)
	if m[string(b)]++; m[string(b)] == 1 {
		var seqs []uint64
		for _, evs := range a.Matched {
			for _, ev := range evs {
				seqs = append(seqs, ev.Seq)
				s.events[a.Rule][ev.Seq] = true
			}
		}
		s.seqs[sig] = seqs
	}
}

// overlapping returns how many of the alerts of rule that a gave and b
// did not share an event with an alert of b's of the rule: the same
// incidents, detected with other events.
func overlapping(a, b *alertSet, rule string) int64 {
	var n int64
	other := b.events[rule]
	for sig, k := range a.byRule[rule] {
		extra := k - min(k, b.byRule[rule][sig])
		if extra > 0 && slices.ContainsFunc(a.seqs[rule+"\x00"+sig], func(q uint64) bool { return other[q] }) {
			n += extra
		}
	}
	return n
}

// compareAlerts returns, for rule, the alerts of here and of base that
// hold the same events (both), and those of each side alone.
func compareAlerts(here, base *alertSet, rule string) (both, onlyHere, onlyBase int64) {
	h, b := here.byRule[rule], base.byRule[rule]
	for sig, n := range h {
		both += min(n, b[sig])
		onlyHere += n - min(n, b[sig])
	}
	for sig, n := range b {
		onlyBase += n - min(n, h[sig])
	}
	return both, onlyHere, onlyBase
}

// baselineRun is what the comparison reads of one side's run.
type baselineRun struct {
	rs     *rules.Ruleset
	sum    *cep.Summary
	labels *cep.LabelSummary // nil without -label
	alerts *alertSet
}

// printComparison prints the rules of here (the -rules run) against those
// of base (the -baseline run of file), over the same events.
func printComparison(w io.Writer, here, base baselineRun, file string) {
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	version := base.rs.Hash
	if len(version) > 12 {
		version = version[:12]
	}
	fmt.Fprintf(bw, "\nAgainst the baseline %s (ruleset %s, version %s), over the same events:\n", file, base.rs.Name, version)
	labels := here.labels != nil && base.labels != nil
	baseRules := map[string]*rules.Rule{}
	for _, r := range base.rs.Rules {
		baseRules[r.Name] = r
	}
	// The name column is as wide as the longest rule name, at least 22,
	// as in the summary.
	width := 22
	for _, r := range slices.Concat(here.rs.Rules, base.rs.Rules) {
		width = max(width, len(r.Name))
	}
	fmt.Fprintf(bw, "  %-*s %-8s %8s %8s %8s %7s %7s", width, "rule", "change", "alerts", "baseline", "same", "new", "gone")
	if labels {
		fmt.Fprintf(bw, " %9s %9s %8s %8s", "precision", "baseline", "caught", "baseline")
	}
	fmt.Fprintln(bw)
	row := func(name, change string, inHere, inBase bool) {
		both, onlyHere, onlyBase := compareAlerts(here.alerts, base.alerts, name)
		cell := func(in bool, n int64) string {
			if !in {
				return "-"
			}
			return humanize.Int(n)
		}
		fmt.Fprintf(bw, "  %-*s %-8s %8s %8s %8s %7s %7s", width, name, change,
			cell(inHere, both+onlyHere), cell(inBase, both+onlyBase), humanize.Int(both), humanize.Int(onlyHere), humanize.Int(onlyBase))
		if labels {
			h, b := here.labels.Rule(name), base.labels.Rule(name)
			prec := func(in bool, r cep.RuleLabels) string {
				if !in || r.Alerts == 0 {
					return "-"
				}
				return fmt.Sprintf("%.1f%%", 100*r.Precision())
			}
			fmt.Fprintf(bw, " %9s %9s %8s %8s", prec(inHere, h), prec(inBase, b), cell(inHere, h.Caught), cell(inBase, b.Caught))
		}
		fmt.Fprintln(bw)
	}
	hereRules := map[string]bool{}
	for _, r := range here.rs.Rules {
		hereRules[r.Name] = true
		change := "new"
		if br := baseRules[r.Name]; br != nil {
			change = "changed"
			if br.Hash == r.Hash {
				change = ""
			}
		}
		row(r.Name, change, true, baseRules[r.Name] != nil)
	}
	for _, r := range base.rs.Rules {
		if !hereRules[r.Name] {
			row(r.Name, "removed", false, true)
		}
	}
	fmt.Fprintf(bw, "  (same: alerts of the same events, by stage, in both runs; new: only in this run; gone: only in the baseline's)\n")
	// The new and gone alerts of a rule in both runs that overlap: the
	// same incidents, with other events (a count threshold moved).
	for _, r := range here.rs.Rules {
		if baseRules[r.Name] == nil {
			continue
		}
		_, onlyHere, onlyBase := compareAlerts(here.alerts, base.alerts, r.Name)
		if onlyHere == 0 || onlyBase == 0 {
			continue
		}
		nh, nb := overlapping(here.alerts, base.alerts, r.Name), overlapping(base.alerts, here.alerts, r.Name)
		if nh > 0 || nb > 0 {
			fmt.Fprintf(bw, "  %s: %s of the %s new share events with a gone one, %s of the %s gone with a new one (the same incidents, other events)\n",
				r.Name, humanize.Int(nh), humanize.Int(onlyHere), humanize.Int(nb), humanize.Int(onlyBase))
		}
	}
	if labels && here.labels.Labelled > 0 {
		fmt.Fprintf(bw, "  Labelled events caught by some alert: %s, recall %.1f%% (baseline %s, %.1f%%)\n",
			humanize.Int(here.labels.Caught), 100*here.labels.Recall(), humanize.Int(base.labels.Caught), 100*base.labels.Recall())
	}
}
