package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestGenConfigMessages: a bad value is reported in terms of its flag, as
// a usage error (exit 2), not in the generator's field names.
func TestGenConfigMessages(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-days", "-1"}, "cepheus: gen: -days -1 is outside 0..3660\n"},
		{[]string{"-history-days", "0", "-days", "1"}, "cepheus: gen: scenario dormant_card needs at least 61 days (-history-days and -days add up to 1); leave it out of -scenarios or add days\n"},
		{[]string{"-history-days", "0", "-days", "0", "-scenarios", "card_testing"}, "cepheus: gen: -history-days and -days add up to 0 days, want at least 1\n"},
		{[]string{"-max-delay", "2h", "-customers", "0"}, "cepheus: gen: -customers 0 is outside 1..10000000\ncepheus: gen: -max-delay 2h is outside 0..1h\n"},
		{[]string{"-fraud-rate", "-5"}, "cepheus: gen: -fraud-rate -5 is outside 0..100000 (instances per 100,000 normal events)\n"},
	} {
		code, out, errOut := cepheus(t, append([]string{"gen"}, c.args...)...)
		if code != 2 || out != "" || !strings.HasPrefix(errOut, c.want) || !strings.HasSuffix(errOut, "Run 'cepheus help gen' for usage.\n") {
			t.Errorf("gen %q: exit %d, stderr\n%s\nwant 2 and\n%s", c.args, code, errOut, c.want)
		}
	}
}

// TestGenWarnsOfMissingScenarios: a scenario asked for that gets no
// instance (its rate is per 100,000 normal events) is warned about.
func TestGenWarnsOfMissingScenarios(t *testing.T) {
	out := filepath.Join(t.TempDir(), "events.jsonl")
	code, _, errOut := cepheus(t, "gen", "-history-days", "0", "-days", "1", "-events-per-day", "1000", "-customers", "100",
		"-scenarios", "card_testing", "-o", out)
	want := "gen: warning: no instance of card_testing was injected: a rate of 10 per 100,000 normal events expects 0.1 in 1,000 normal events; raise -fraud-rate or -events-per-day\n"
	if code != 0 || !strings.Contains(errOut, "warning: no instance of card_testing was injected") {
		t.Errorf("gen of 1,000 events with card_testing: exit %d, stderr\n%s\nwant a warning like\n%s", code, errOut, want)
	}
	code, _, errOut = cepheus(t, "gen", "-history-days", "0", "-days", "1", "-events-per-day", "1000", "-customers", "100",
		"-scenarios", "card_testing", "-fraud-rate", "500", "-o", out)
	if code != 0 || strings.Contains(errOut, "warning") {
		t.Errorf("gen with card_testing at rate 500: exit %d, stderr\n%s\nwant no warning", code, errOut)
	}
}
