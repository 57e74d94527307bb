//go:build linux

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/rules"
)

// TestServeShadow runs cepheus serve over a followed file with -alerts
// and -shadow-alerts: cepheus rules deploy -shadow deploys a changed
// cards ruleset (a threshold changed, a rule renamed) beside the active
// one; rules list shows both; once more events came, cepheus status
// compares the two (the renamed rule only the shadow's); the main
// directory holds no alert of the shadow version and the shadow
// directory none of the active one; cepheus rules promote makes the
// shadow active, and the next events' alerts of its rules go to the main
// directory; SIGTERM exits 0.
func TestServeShadow(t *testing.T) {
	bin := buildCepheus(t)
	dir := t.TempDir()
	// gen writes a day of events from start (seed seed) to file.
	gen := func(file string, seed int, start string) {
		t.Helper()
		if out, err := exec.Command(bin, "gen", "-days", "1", "-events-per-day", "3000", "-history-days", "0", "-seed", fmt.Sprint(seed),
			"-start", start, "-fraud-rate", "300", "-scenarios", "card_testing,velocity_burst", "-o", file).CombinedOutput(); err != nil {
			t.Fatalf("cepheus gen: %v\n%s", err, out)
		}
	}
	events := filepath.Join(dir, "events.jsonl")
	gen(events, 1, "2026-01-01T00:00:00Z")
	// appendDay appends a generated day from start to the followed file,
	// in one write.
	appendDay := func(seed int, start string) {
		t.Helper()
		more := filepath.Join(dir, fmt.Sprintf("more-%d.jsonl", seed))
		gen(more, seed, start)
		f, err := os.OpenFile(events, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(mustRead(t, more)); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	v1 := mustRead(t, "../../rulesets/cards.cep")
	v2 := []byte(strings.ReplaceAll(strings.Replace(string(v1), "amount > 500", "amount > 400", 1), "velocity_burst", "velocity_burst_v2"))
	load := func(src []byte) *rules.Ruleset {
		rs, err := rules.Load("cards.cep", src)
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	rs1, rs2 := load(v1), load(v2)
	h1, h2 := rs1.Hash[:12], rs2.Hash[:12]
	shadowFile := filepath.Join(dir, "cards-v2.cep")
	if err := os.WriteFile(shadowFile, v2, 0o644); err != nil {
		t.Fatal(err)
	}
	alerts, shadow := filepath.Join(dir, "alerts"), filepath.Join(dir, "shadow")
	c := startChild(t, bin, []string{"serve", "-rules", "../../rulesets/cards.cep", "-events", events, "-follow",
		"-state", filepath.Join(dir, "state"), "-alerts", alerts, "-shadow-alerts", shadow, "-http", "127.0.0.1:0",
		"-grpc", "127.0.0.1:0", "-checkpoint-interval", "200ms", "-progress", "1s"}, "")
	defer func() {
		select {
		case <-c.done:
		default:
			c.kill()
		}
	}()
	// waitFor waits up to 20 s for cond, failing with what.
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("after 20s, %s:\n%s", what, c.out.String())
			}
		}
	}
	addrRe := regexp.MustCompile(`control API \(gRPC\) on ([0-9.:]+)`)
	waitFor("serve has not said where the control API is", func() bool { return addrRe.MatchString(c.out.String()) })
	server := addrRe.FindStringSubmatch(c.out.String())[1]
	lines := int64(strings.Count(string(mustRead(t, events)), "\n"))
	// eventsRead is the events count of cepheus status.
	eventsRead := func() int64 {
		_, out, _ := cepheus(t, "status", "-server", server)
		var n int64
		if m := regexp.MustCompile(`events ([\d,]+),`).FindStringSubmatch(out); m != nil {
			fmt.Sscan(strings.ReplaceAll(m[1], ",", ""), &n)
		}
		return n
	}
	waitFor("the first day is not read", func() bool { return eventsRead() == lines })
	code, out, errOut := cepheus(t, "rules", "deploy", "-shadow", "-server", server, shadowFile)
	if code != 0 || !strings.Contains(out, "deployed ruleset cards version "+h2+" as the shadow at checkpoint ") {
		t.Fatalf("cepheus rules deploy -shadow: exit %d; want %s deployed as the shadow\n%s%s", code, h2, out, errOut)
	}
	code, out, errOut = cepheus(t, "rules", "list", "-server", server)
	if code != 0 || !strings.HasPrefix(out, h1+"  active  ") || !strings.Contains(out, "\n"+h2+"  shadow  ") {
		t.Errorf("cepheus rules list with a shadow: exit %d; want %s active, %s shadow\n%s%s", code, h1, h2, out, errOut)
	}
	appendDay(2, "2026-01-02T00:00:00Z")
	// The comparison: card_testing in both versions, velocity_burst_v2
	// the shadow's alone (active 0, overlap 0, all only-shadow).
	unchanged := map[string]bool{} // of each rule's row: marked unchanged
	row := func(out, rule string) []int64 {
		m := regexp.MustCompile(`(?m)^  ` + rule + ` +([\d,]+) +([\d,]+) +([\d,]+) +([\d,]+) +([\d,]+)(  \[unchanged: its state began empty at the deploy\])?$`).FindStringSubmatch(out)
		if m == nil {
			return nil
		}
		unchanged[rule] = m[6] != ""
		var n [5]int64
		for i := range n {
			fmt.Sscan(strings.ReplaceAll(m[i+1], ",", ""), &n[i])
		}
		return n[:]
	}
	var status string
	waitFor("cepheus status shows no shadow alerts of card_testing and velocity_burst_v2", func() bool {
		_, status, _ = cepheus(t, "status", "-server", server)
		a, b := row(status, "card_testing"), row(status, "velocity_burst_v2")
		return a != nil && a[1] > 0 && b != nil && b[1] > 0
	})
	if !strings.Contains(status, "shadow version "+h2+",") || !regexp.MustCompile(`(?m)^  rule +active +shadow +overlap +only-active +only-shadow$`).MatchString(status) {
		t.Errorf("cepheus status with a shadow: want its version %s and the comparison's header\n%s", h2, status)
	}
	if b := row(status, "velocity_burst_v2"); b[0] != 0 || b[2] != 0 || b[3] != 0 || b[4] != b[1] {
		t.Errorf("the shadow's own rule velocity_burst_v2: %v; want no active alert, all the shadow's only\n%s", b, status)
	}
	if a := row(status, "card_testing"); a[0] == 0 || a[3] != a[0]-a[2] || a[4] != a[1]-a[2] {
		t.Errorf("card_testing: %v; want active alerts, only-active and only-shadow the differences with the overlap\n%s", a, status)
	}
	// A shadow rule the same as the active one is marked: what it lacks
	// is its windows filling since the deploy, not a change.
	hashOf := func(rs *rules.Ruleset, name string) string {
		for _, r := range rs.Rules {
			if r.Name == name {
				return r.Hash
			}
		}
		return ""
	}
	a := row(status, "card_testing")
	if want := hashOf(rs1, "card_testing") == hashOf(rs2, "card_testing") && (a[3] != 0 || a[4] != 0); unchanged["card_testing"] != want || unchanged["velocity_burst_v2"] {
		t.Errorf("marked unchanged: %v; want card_testing %v (its rule hash in both versions, and a difference), velocity_burst_v2 (no active twin) not\n%s", unchanged, want, status)
	}
	// versionLines counts the lines of every file of d (those being
	// written too) that carry version h (full hex) as ruleset_version. A
	// file listed and gone before it is read was renamed meanwhile (a part
	// committed): the directory is listed again, so that no line is missed.
	versionLines := func(d, h string) int {
		t.Helper()
	list:
		for {
			entries, err := os.ReadDir(d)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, e := range entries {
				if !e.Type().IsRegular() {
					continue
				}
				b, err := os.ReadFile(filepath.Join(d, e.Name()))
				if errors.Is(err, fs.ErrNotExist) {
					continue list
				}
				if err != nil {
					t.Fatal(err)
				}
				n += strings.Count(string(b), `"ruleset_version":"`+h+`"`)
			}
			return n
		}
	}
	waitFor("no committed alert of the shadow version in the shadow directory", func() bool { return versionLines(shadow, rs2.Hash) > 0 })
	if n := versionLines(alerts, rs2.Hash); n != 0 {
		t.Errorf("%d lines of the main alerts directory carry the shadow version %s", n, h2)
	}
	if n := versionLines(shadow, rs1.Hash); n != 0 {
		t.Errorf("%d lines of the shadow directory carry the active version %s", n, h1)
	}
	if n := versionLines(alerts, rs1.Hash); n == 0 {
		t.Errorf("no alert of the active version %s in the main alerts directory", h1)
	}
	// Promote.
	code, out, errOut = cepheus(t, "rules", "promote", "-server", server)
	if code != 0 || !strings.Contains(out, "promoted ruleset cards version "+h2+" (was "+h1+") at checkpoint ") {
		t.Fatalf("cepheus rules promote: exit %d; want %s after %s\n%s%s", code, h2, h1, out, errOut)
	}
	code, out, errOut = cepheus(t, "rules", "list", "-server", server)
	if code != 0 || !strings.HasPrefix(out, h2+"  active  ") || !strings.Contains(out, " promote ") ||
		!strings.Contains(out, "\n"+h1+"  previous  ") || strings.Contains(out, "  shadow  ") {
		t.Errorf("cepheus rules list after the promote: exit %d; want %s active from promote, %s previous, no shadow\n%s%s", code, h2, h1, out, errOut)
	}
	if code, _, errOut := cepheus(t, "rules", "promote", "-server", server); code != 1 || !strings.Contains(errOut, "no shadow version to promote") {
		t.Errorf("cepheus rules promote without a shadow: exit %d, want 1 saying there is no shadow\n%s", code, errOut)
	}
	appendDay(3, "2026-01-03T00:00:00Z")
	waitFor("no alert of the promoted version in the main alerts directory", func() bool { return versionLines(alerts, rs2.Hash) > 0 })
	if e := c.terminate(t, 20*time.Second); e.killed || e.code != 0 {
		t.Fatalf("serve on SIGTERM: %s, want exit 0\n%s", e.describe(), e.tail())
	}
}

// TestServeShadowRefused: the shadow outputs' flags are refused where
// they do not apply, saying what to use instead.
func TestServeShadowRefused(t *testing.T) {
	dir := t.TempDir()
	base := []string{"serve", "-rules", "../../rulesets/cards.cep", "-state", filepath.Join(dir, "state"), "-http", "127.0.0.1:0", "-grpc", ""}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-events", "e.jsonl", "-alerts", "a", "-shadow-topic", "s"}, "-shadow-topic is for Kafka mode (-input-topic and -alerts-topic): with files, use -shadow-alerts DIR"},
		{[]string{"-input-topic", "t", "-brokers", "b:1", "-alerts-topic", "a", "-group", "g", "-shadow-alerts", "s"}, "use -shadow-topic, not -shadow-alerts"},
		{[]string{"-input-topic", "t", "-brokers", "b:1", "-alerts", "a", "-shadow-topic", "s"}, "-shadow-topic and -rules-topic go with -alerts-topic"},
		{[]string{"-input-topic", "t", "-brokers", "b:1", "-alerts", "a", "-rules-topic", "r"}, "-shadow-topic and -rules-topic go with -alerts-topic"},
		{[]string{"-events", "e.jsonl", "-alerts", "a", "-shadow-alerts", "a/"}, "-shadow-alerts is -alerts' directory"},
	} {
		code, _, errOut := cepheus(t, append(base, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("cepheus serve %s: exit %d, want 2 saying %q\n%s", strings.Join(c.args, " "), code, c.want, errOut)
		}
	}
	if code, _, errOut := cepheus(t, "rules", "list", "-shadow"); code != 2 || !strings.Contains(errOut, "-shadow goes with deploy") {
		t.Errorf("cepheus rules list -shadow: exit %d, want 2\n%s", code, errOut)
	}
}
