//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/cepheus-cep/cepheus/internal/failpoint"
	"github.com/cepheus-cep/cepheus/runtime/kafka"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/cep"
	"github.com/cepheus-cep/cepheus/internal/humanize"
	"github.com/cepheus-cep/cepheus/rules"
)

// TestServe runs cepheus serve over a followed file of generated events
// (its lookup bound to the generated profiles) with -http on a free port:
// it says where it serves, /readyz turns 200 once the job reads, /metrics
// counts the events and the alerts by rule, cepheus status shows the
// figures (the lookup's too), and SIGTERM stops it with a final
// checkpoint and exit 0.
func TestServe(t *testing.T) {
	bin := buildCepheus(t)
	dir := t.TempDir()
	events := filepath.Join(dir, "events.jsonl")
	profiles := filepath.Join(dir, "profiles")
	if out, err := exec.Command(bin, "gen", "-days", "1", "-events-per-day", "20000", "-history-days", "0", "-scenarios", "card_testing,velocity_burst", "-o", events, "-profiles", profiles).CombinedOutput(); err != nil {
		t.Fatalf("cepheus gen: %v\n%s", err, out)
	}
	c := startChild(t, bin, []string{"serve", "-rules", "../../rulesets/cards.cep", "-events", events, "-follow",
		"-lookup", "customer=file:" + filepath.Join(profiles, "customer.jsonl"),
		"-state", filepath.Join(dir, "state"), "-alerts", filepath.Join(dir, "alerts"), "-http", "127.0.0.1:0",
		"-grpc", "127.0.0.1:0", "-checkpoint-interval", "200ms", "-progress", "500ms", "-log-format", "json"}, "")
	defer func() {
		select {
		case <-c.done:
		default:
			c.kill()
		}
	}()
	addrRe := regexp.MustCompile(`metrics on http://([0-9.:]+)/metrics`)
	var addr string
	deadline := time.Now().Add(30 * time.Second)
	for addr == "" {
		if m := addrRe.FindStringSubmatch(c.out.String()); m != nil {
			addr = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("serve did not say where it serves:\n%s", c.out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for {
		code, _ := get("/readyz")
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d after 30s", code)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A second serve given the running one's directories says so before
	// it listens (it served metrics first, and said its ports were
	// taken when they were the same), and leaves no state directory of
	// its own behind.
	second := func(state string) crashExit {
		t.Helper()
		return runChild(t, bin, []string{"serve", "-rules", "../../rulesets/cards.cep", "-events", events, "-follow",
			"-state", state, "-alerts", filepath.Join(dir, "alerts"), "-http", "127.0.0.1:0", "-grpc", "127.0.0.1:0"}, "", 0)
	}
	if e := second(filepath.Join(dir, "state")); e.code != 1 || !strings.Contains(e.stderr, "state dir "+filepath.Join(dir, "state")+" is in use by another run") ||
		strings.Contains(e.stderr, "metrics on") {
		t.Errorf("a second serve on the same state: %s, want exit 1 saying the state dir is in use, before listening\n%s", e.describe(), e.stderr)
	}
	other := filepath.Join(dir, "state2")
	if e := second(other); e.code != 1 || !strings.Contains(e.stderr, "output directory "+filepath.Join(dir, "alerts")+" is in use by another run") ||
		strings.Contains(e.stderr, "metrics on") {
		t.Errorf("a second serve on the same alerts: %s, want exit 1 saying the output directory is in use, before listening\n%s", e.describe(), e.stderr)
	}
	if _, err := os.Stat(other); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the second serve left its state directory %s behind (%v)", other, err)
	}
	lines := strings.Count(string(mustRead(t, events)), "\n")
	var page string
	for {
		_, page = get("/metrics")
		if strings.Contains(page, "cepheus_events_decoded_total "+strconv.Itoa(lines)+"\n") && strings.Contains(page, `cepheus_rule_alerts_total{rule="card_testing",severity="critical"}`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics has not counted the %d events after 30s:\n%s", lines, grepLines(page, "cepheus_"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d", code)
	}
	// The control API, through the CLI.
	m := regexp.MustCompile(`control API \(gRPC\) on ([0-9.:]+)`).FindStringSubmatch(c.out.String())
	if m == nil {
		t.Fatalf("serve did not say where the control API is:\n%s", c.out.String())
	}
	code, out, errOut := cepheus(t, "status", "-server", m[1])
	if code != 0 || !strings.Contains(out, ": ready, ruleset cards") || !strings.Contains(out, "events "+humanize.Int(int64(lines))+",") || !strings.Contains(out, "rule card_testing") {
		t.Errorf("cepheus status: exit %d\n%s%s", code, out, errOut)
	}
	if !regexp.MustCompile(`\n  lookup customer: [0-9,]+ keys? from the cache \([0-9.]+%\), [1-9][0-9,]* looked up at the source \(`).MatchString(out) {
		t.Errorf("cepheus status does not show the lookup's figures:\n%s", out)
	}
	if code, out, errOut := cepheus(t, "rules", "validate", "-server", m[1], "../../rulesets/cards.cep"); code != 0 || !strings.Contains(out, "ruleset cards version") {
		t.Errorf("cepheus rules validate of cards.cep: exit %d\n%s%s", code, out, errOut)
	}
	bad := filepath.Join(dir, "bad.cep")
	if err := os.WriteFile(bad, []byte("ruleset b\nevent time ts\nrule r {\n  pattern {\n    begin a where amount > +\n  }\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The problems name the file as given (the server sees its base
	// name), so that an editor finds it.
	if code, _, errOut := cepheus(t, "rules", "validate", "-server", m[1], bad); code != 1 || !strings.Contains(errOut, bad+":5:") ||
		!strings.Contains(errOut, "\n        begin a where amount > +\n") {
		t.Errorf("cepheus rules validate of a bad ruleset: exit %d, want 1 with %s:5:col and the line, as check prints it\n%s", code, bad, errOut)
	}
	// A ruleset that compiles with a warning is valid, the warning said,
	// naming the file as given too (it said warn.cep until 2026-12-07).
	warn := filepath.Join(dir, "warn.cep")
	if err := os.WriteFile(warn, []byte("ruleset w\nevent time ts\nrule r {\n  pattern {\n    begin a where a.amount > 1\n  }\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = cepheus(t, "rules", "validate", "-server", m[1], warn)
	if want := warn + ":5:19: warning: stage a takes one event"; code != 0 || !strings.Contains(out, "ruleset w version") || !strings.HasPrefix(errOut, want) {
		t.Errorf("cepheus rules validate of a ruleset with a warning: exit %d, want 0 and a line starting %q on stderr\n%s%s", code, want, out, errOut)
	}
	e := c.terminate(t, 30*time.Second)
	if e.killed || e.code != 0 || !strings.Contains(e.stderr, "stopped at checkpoint") {
		t.Fatalf("serve on SIGTERM: %s, want exit 0 after a final checkpoint\n%s", e.describe(), e.tail())
	}
	// -log-format json: every line is an object with a level and a
	// message, the progress with its figures as fields.
	// The end: the totals, then a record per rule (its alerts adding up
	// to the total) and per lookup, as run's summary has them.
	progress := 0
	total, ruleAlerts := -1, 0
	var ruleNames, lookups []string
	totalRe := regexp.MustCompile(`^ruleset cards: .*, ([0-9,]+) alerts?, `)
	for _, l := range strings.Split(strings.TrimSpace(e.stderr), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil || rec["level"] == nil || rec["msg"] == nil {
			t.Fatalf("not a JSON log line: %q (%v)", l, err)
		}
		switch msg, _ := rec["msg"].(string); {
		case msg == "progress":
			progress++
			if _, ok := rec["records"].(float64); !ok {
				t.Errorf("a progress line without its records: %q", l)
			}
		case totalRe.MatchString(msg):
			total, _ = strconv.Atoi(strings.ReplaceAll(totalRe.FindStringSubmatch(msg)[1], ",", ""))
		case msg == "rule summary":
			n, ok := rec["alerts"].(float64)
			if !ok || rec["severity"] == nil {
				t.Errorf("a rule summary without its alerts or severity: %q", l)
			}
			ruleNames = append(ruleNames, fmt.Sprint(rec["rule"]))
			ruleAlerts += int(n)
		case msg == "lookup summary":
			lookups = append(lookups, fmt.Sprintf("%v bound=%v", rec["lookup"], rec["bound"]))
		}
	}
	if progress == 0 {
		t.Errorf("no progress line in %d s of serving (-progress 500ms)", int(e.elapsed.Seconds()))
	}
	rs, err := rules.Load("cards.cep", mustRead(t, "../../rulesets/cards.cep"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, r := range rs.Rules {
		want = append(want, r.Name)
	}
	if !slices.Equal(ruleNames, want) || total <= 0 || ruleAlerts != total ||
		!slices.Equal(lookups, []string{"customer bound=true"}) {
		t.Errorf("serve's end: rule summaries %q (want %q), their alerts %d, the total %d; lookups %q (want customer bound)",
			ruleNames, want, ruleAlerts, total, lookups)
	}
}

// serveInProcess runs cepheus serve with args (and -http, -grpc on free
// ports) in this process until the test ends, and returns its -grpc
// address, once it is ready, and its log.
func serveInProcess(t *testing.T, args ...string) (server string, logs *syncBuffer) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server = ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	logs = &syncBuffer{}
	go func() {
		done <- run(ctx, append([]string{"serve", "-http", "127.0.0.1:0", "-grpc", server}, args...), io.Discard, logs)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v\n%s", err, logs.String())
		}
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if code, out, _ := cepheus(t, "status", "-server", server); code == 0 && strings.Contains(out, ": ready,") {
			return server, logs
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve is not ready after 30s:\n%s", logs.String())
		}
	}
}

// waitStatus waits up to 30 s for cepheus status of server to say want,
// and returns what it said (ready is published before the first event is
// read: a test of a deploy after the first event waits for "events 1,").
func waitStatus(t *testing.T, server, want string, logs *syncBuffer) string {
	t.Helper()
	var out string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, out, _ = cepheus(t, "status", "-server", server); strings.Contains(out, want) {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("cepheus status does not say %q after 30s:\n%s\n%s", want, out, logs.String())
		}
	}
}

// TestStatusBeforeTheFirstEvent: cepheus status of a serve whose input
// is still empty says that there is no watermark yet, for the job and
// for each partition.
func TestStatusBeforeTheFirstEvent(t *testing.T) {
	dir := t.TempDir()
	server, logs := serveInProcess(t, "-rules", writeFile(t, dir, "r.cep", goodSrc), "-events", writeFile(t, dir, "e.jsonl", ""),
		"-follow", "-state", filepath.Join(dir, "state"), "-alerts", filepath.Join(dir, "alerts"))
	out := waitStatus(t, server, "partition e.jsonl", logs)
	if !strings.Contains(out, "\nwatermark none yet;") || !strings.Contains(out, "\n  partition e.jsonl watermark none yet\n") || strings.Contains(out, "MIN") {
		t.Errorf("cepheus status before the first event:\n%s\nwant no watermark yet, for the job and for e.jsonl", out)
	}
}

// TestServeDeployUnboundLookup: a deploy into serve of a version that
// declares a lookup no -lookup binds is logged as a warning, which says
// how to bind it: a restart with that version's file and its -lookup
// resumes with it bound. A restart with the first file and the -lookup
// is refused (that file declares no such lookup) with the same way out;
// the warning said "restart with its -lookup", which was this refusal.
func TestServeDeployUnboundLookup(t *testing.T) {
	dir := t.TempDir()
	v2 := writeFile(t, dir, "v2.cep", goodSrc+"lookup holder {\n  key k\n  fields {\n    tier: string default \"?\"\n  }\n}\n")
	holders := writeFile(t, dir, "holders.jsonl", `{"k": "x", "tier": "gold"}`+"\n")
	r := writeFile(t, dir, "r.cep", goodSrc)
	common := []string{"-events", writeFile(t, dir, "e.jsonl", `{"ts": "2026-01-01T00:00:00Z", "k": "x", "name": "a"}`+"\n"),
		"-follow", "-state", filepath.Join(dir, "state"), "-alerts", filepath.Join(dir, "alerts")}
	t.Run("deploy", func(t *testing.T) {
		server, logs := serveInProcess(t, append([]string{"-rules", r}, common...)...)
		waitStatus(t, server, "events 1,", logs) // the event read before the switch
		if code, out, errOut := cepheus(t, "rules", "deploy", "-server", server, v2); code != 0 {
			t.Fatalf("rules deploy: exit %d\n%s%s", code, out, errOut)
		}
		if !regexp.MustCompile(`level=WARN msg="lookup holder of version [0-9a-f]{12} is not bound \(the process was started without -lookup holder=...\): every event gets its defaults; to bind it, restart with this version's file as the rules file and -lookup holder=..."`).MatchString(logs.String()) {
			t.Errorf("no warning of the unbound lookup in the log:\n%s", logs.String())
		}
		// The event held at the switch got the lookup's defaults, not a
		// record: it was said to be looked up.
		if !regexp.MustCompile(`msg="the 1 events held at checkpoint \d+ got the defaults of holder \(not bound\), which the version before lacked`).MatchString(logs.String()) {
			t.Errorf("the log does not say that the held event got the unbound lookup's defaults:\n%s", logs.String())
		}
	})
	bind := []string{"-lookup", "holder=file:" + holders}
	code, _, errOut := cepheus(t, append(append([]string{"serve", "-rules", r, "-http", "127.0.0.1:0", "-grpc", "off"}, common...), bind...)...)
	if code != 2 || !strings.Contains(errOut, "-lookup holder: no such lookup (the rulesets declare no lookup); a lookup of a version deployed since the rules file was taken is bound by a restart with that version's file as -rules (or in -rules-dir)") {
		t.Errorf("a restart with the first file and -lookup holder: exit %d\n%s\nwant 2, and how to bind the deployed version's lookup", code, errOut)
	}
	// A slip of the name is only that.
	code, _, errOut = cepheus(t, append(append([]string{"serve", "-rules", v2, "-http", "127.0.0.1:0", "-grpc", "off"}, common...), "-lookup", "holdr=file:"+holders)...)
	if code != 2 || !strings.Contains(errOut, "-lookup holdr: no such lookup (did you mean holder?)\n") {
		t.Errorf("a restart with -lookup holdr: exit %d\n%s\nwant 2, and the name it is close to alone", code, errOut)
	}
	t.Run("bound", func(t *testing.T) {
		server, logs := serveInProcess(t, append(append([]string{"-rules", v2}, common...), bind...)...)
		_, list, _ := cepheus(t, "rules", "list", "-server", server)
		if !strings.Contains(logs.String(), "resuming from checkpoint") || strings.Contains(logs.String(), "not bound") || !strings.Contains(list, "  active  ") ||
			!strings.Contains(strings.SplitN(list, "\n", 2)[0], "  grpc ") {
			t.Errorf("the restart with the deployed version's file and -lookup holder: rules list\n%s\nlog:\n%s\nwant the deployed version resumed, its lookup bound", list, logs.String())
		}
	})
}

// TestServeDeployFailingStderr: a deploy whose ruleset has a warning,
// the deploying command's stderr unwritable (its reader gone), says on
// stdout that it deployed and exits 0: the version is deployed. It exited
// 1 without a word on stdout, which told a script that the deploy failed.
func TestServeDeployFailingStderr(t *testing.T) {
	dir := t.TempDir()
	server, _ := serveInProcess(t, "-rules", writeFile(t, dir, "r.cep", goodSrc), "-events", writeFile(t, dir, "e.jsonl", ""),
		"-follow", "-state", filepath.Join(dir, "state"), "-alerts", filepath.Join(dir, "alerts"))
	v2 := writeFile(t, dir, "v2.cep", goodSrc+"rule w {\n  key k\n  pattern {\n    begin x where x.name == \"a\"\n  }\n}\n")
	if code, _, errOut := cepheus(t, "rules", "validate", "-server", server, v2); code != 0 || !strings.Contains(errOut, "warning:") {
		t.Fatalf("rules validate: exit %d, want 0 and a warning:\n%s", code, errOut)
	}
	var stdout bytes.Buffer
	err := run(context.Background(), []string{"rules", "deploy", "-server", server, v2}, &stdout, failingWriter{&os.PathError{Op: "write", Path: "/dev/stderr", Err: syscall.EPIPE}})
	if code := exitCode(err, io.Discard); code != 0 || !strings.HasPrefix(stdout.String(), "deployed ruleset good version ") {
		t.Errorf("rules deploy with stderr failing: exit %d (%v), stdout %q; want 0 and the deploy", code, err, stdout.String())
	}
	if _, list, _ := cepheus(t, "rules", "list", "-server", server); !regexp.MustCompile(`(?m)^[0-9a-f]{12}  active .* good  2 rules$`).MatchString(list) {
		t.Errorf("rules list after the deploy:\n%s\nwant the version of 2 rules active", list)
	}
}

// TestServeDeployBeforeTheFirstWatermark: a deploy after events but
// before the first watermark says so, not that it came before the first
// event.
func TestServeDeployBeforeTheFirstWatermark(t *testing.T) {
	dir := t.TempDir()
	server, _ := serveInProcess(t, "-rules", writeFile(t, dir, "r.cep", goodSrc), "-events", writeFile(t, dir, "e.jsonl", `{"ts": "2026-01-01T00:00:00Z", "k": "x", "name": "a"}`+"\n"),
		"-follow", "-state", filepath.Join(dir, "state"), "-alerts", filepath.Join(dir, "alerts"))
	v2 := writeFile(t, dir, "v2.cep", strings.Replace(goodSrc, `name == "b"`, `name == "c"`, 1))
	code, out, errOut := cepheus(t, "rules", "deploy", "-server", server, v2)
	if code != 0 || !regexp.MustCompile(`^deployed ruleset good version [0-9a-f]{12} \(was [0-9a-f]{12}\) at checkpoint \d+ \(before the first watermark\) in `).MatchString(out) {
		t.Errorf("rules deploy: exit %d\n%s%s\nwant it deployed before the first watermark", code, out, errOut)
	}
	if _, status, _ := cepheus(t, "status", "-server", server); !strings.Contains(status, "events 1,") {
		t.Errorf("the event before the switch is not counted:\n%s", status)
	}
}

// TestStatusCheckpointRestored: cepheus status says when there is no
// checkpoint yet, and that the latest is the one restored after a switch
// (whose new job has taken none: no duration of its own); it printed
// "checkpoint 0 (0ms)" and "checkpoint 1 (0ms)".
func TestStatusCheckpointRestored(t *testing.T) {
	dir := t.TempDir()
	server, logs := serveInProcess(t, "-rules", writeFile(t, dir, "r.cep", goodSrc), "-events", writeFile(t, dir, "e.jsonl", `{"ts": "2026-01-01T00:00:00Z", "k": "x", "name": "a"}`+"\n"),
		"-follow", "-state", filepath.Join(dir, "state"), "-alerts", filepath.Join(dir, "alerts"), "-checkpoint-interval", "1h")
	if _, status, _ := cepheus(t, "status", "-server", server); !strings.Contains(status, "; no checkpoint yet, 0 failed;") {
		t.Errorf("cepheus status before the first checkpoint:\n%s\nwant no checkpoint yet", status)
	}
	v2 := writeFile(t, dir, "v2.cep", strings.Replace(goodSrc, `name == "b"`, `name == "c"`, 1))
	code, out, errOut := cepheus(t, "rules", "deploy", "-server", server, v2)
	m := regexp.MustCompile(`at checkpoint (\d+) `).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("rules deploy: exit %d\n%s%s\n%s", code, out, errOut, logs.String())
	}
	if _, status, _ := cepheus(t, "status", "-server", server); !strings.Contains(status, "; checkpoint "+m[1]+" (the job started from it), 0 failed;") {
		t.Errorf("cepheus status after a switch at checkpoint %s:\n%s\nwant it restored, without a duration", m[1], status)
	}
	for _, c := range []struct {
		id, ms int64
		want   string
	}{{0, 0, "no checkpoint yet"}, {3, 0, "checkpoint 3 (the job started from it)"}, {4, 1250, "checkpoint 4 (1,250ms)"}} {
		if got := checkpointText(c.id, c.ms); got != c.want {
			t.Errorf("checkpointText(%d, %d) = %q, want %q", c.id, c.ms, got, c.want)
		}
	}
}

// TestStatusHeader: status's first line says whether the job is ready
// and, when not, why and what to do; before a job has published (serve
// restoring its checkpoint) it printed "not ready, ruleset  version ".
func TestStatusHeader(t *testing.T) {
	for _, c := range []struct {
		ready, standby   bool
		ruleset, version string
		want             string
	}{
		{true, false, "cards", "5777ab63b83026fe", "s: ready, ruleset cards version 5777ab63b830"},
		{false, false, "", "", "s: not ready: no job has started yet (it restores its state; serve's log says from which checkpoint): ask again in a moment"},
		{false, false, "cards", "5777ab63b83026fe", "s: not ready (a ruleset switch, between two jobs of a rebalance, or the run has ended; ask again in a moment), ruleset cards version 5777ab63b830"},
		// A standby, never given a partition or left without its own.
		{false, true, "", "", "s: not ready: a standby, it reads no partition of its Kafka group (the others read them all); it takes partitions over when the group gives it some (an instance leaves or fails)"},
		{false, true, "cards", "5777ab63b83026fe", "s: not ready: a standby, it reads no partition of its Kafka group (the others read them all); it takes partitions over when the group gives it some (an instance leaves or fails)"},
	} {
		if got := statusHeader("s", c.ready, c.standby, c.ruleset, c.version); got != c.want {
			t.Errorf("statusHeader(%v, %v, %q, %q) =\n%s\nwant\n%s", c.ready, c.standby, c.ruleset, c.version, got, c.want)
		}
	}
}

// TestPrintDeployManyKept: a deploy's answer names at most ten kept
// rules and counts the others, and every changed, added and removed one
// (the rulesets trial: 299 kept rules on one line buried the one
// changed).
func TestPrintDeployManyKept(t *testing.T) {
	names := func(prefix string, n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("%s%02d", prefix, i))
		}
		return out
	}
	for _, c := range []struct {
		kept int
		want string
	}{
		{10, "  kept     r00, r01, r02, r03, r04, r05, r06, r07, r08, r09\n"},
		{299, "  kept     r00, r01, r02, r03, r04, r05, r06, r07, r08, r09, and 289 more\n"},
	} {
		var b bytes.Buffer
		printDeploy(&b, "deployed", &cep.DeployResult{Ruleset: "big", Version: "14fdbee476340000", Previous: "5777ab63b8300000",
			Kept: names("r", c.kept), Changed: names("c", 12), Added: []string{"new"}, Removed: []string{"old"}}, false)
		out := b.String()
		if !strings.Contains(out, c.want) {
			t.Errorf("%d kept: %s\nwant the line %q", c.kept, out, c.want)
		}
		for _, want := range []string{"  changed  " + strings.Join(names("c", 12), ", ") + " (their old versions drain: they finish the matches begun before the switch)\n", "  added    new\n", "  removed  old\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("%d kept: %s\nwant the line %q", c.kept, out, want)
			}
		}
	}
}

// TestDeployAnswerDropAndReplace: the answer of a deploy says whether the
// changed rules drain or were dropped (-drop-changed: they read alike),
// and warns when no rule of the version replaced is kept (another
// ruleset deployed by mistake went through as any deploy).
func TestDeployAnswerDropAndReplace(t *testing.T) {
	var b bytes.Buffer
	r := &cep.DeployResult{Ruleset: "cards", Version: "14fdbee476340000", Previous: "5777ab63b8300000", Kept: []string{"a"}, Changed: []string{"b"}}
	printDeploy(&b, "rolled back", r, true)
	if want := "  changed  b (their old versions' partial matches dropped: -drop-changed)\n"; !strings.Contains(b.String(), want) || strings.Contains(b.String(), "warning") {
		t.Errorf("a rollback with -drop-changed:\n%s\nwant the line %q and no warning", b.String(), want)
	}
	b.Reset()
	printDeploy(&b, "deployed", &cep.DeployResult{Ruleset: "mini", Version: "e6c4ad59afb00000", Previous: "14fdbee476340000",
		Added: []string{"ab", "other"}, Removed: []string{"card_testing", "velocity_burst"}}, false)
	if want := "warning: no rule of the version replaced is kept: its 2 rules and their state are gone (another ruleset deployed in its place?)\n"; !strings.HasSuffix(b.String(), want) {
		t.Errorf("a deploy that keeps no rule:\n%s\nwant it to end %q", b.String(), want)
	}
	b.Reset()
	printDeploy(&b, "deployed", &cep.DeployResult{Ruleset: "mini", Version: "e6c4ad59afb00000", Shadow: true, Added: []string{"ab"}}, false)
	if strings.Contains(b.String(), "warning") {
		t.Errorf("a shadow deploy:\n%s\nwant no warning", b.String())
	}
}

// TestStatusLookupsAggregates: status prints each lookup's figures as
// run's summary does, and each velocity aggregate's (it printed neither).
func TestStatusLookupsAggregates(t *testing.T) {
	var b bytes.Buffer
	customer := cep.LookupStats{Name: "customer", Bound: true}
	customer.Hits, customer.Misses, customer.NotFound, customer.Requests, customer.Failures, customer.Timeouts, customer.Defaulted =
		90, 10, 2, 4, 1, 1, 5
	customer.LastError = "no answer within 250ms"
	b.WriteString("\n")
	printStatusFigures(&b, []cep.LookupStats{customer, {Name: "device"}}, []cep.AggregateStats{{Name: "merchant_cards", Keys: 12, Dropped: 3, HotKeys: 1}})
	for _, want := range []string{
		"\n  lookup customer: 90 keys from the cache (90.0%), 10 looked up at the source (2 without a record, whose events got the defaults) in 4 requests; 1 failed (1 timeout): their events: 5 got the defaults, 0 went to the dead letters; last error: no answer within 250ms\n",
		"\n  lookup device: unbound, every event got its defaults\n",
		"\n  aggregate merchant_cards: 12 keys with events in their window, 3 events dropped at the bound, 1 key hot\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, b.String())
		}
	}
}

// TestPartitionLine: a partition's line of status says whether it is idle
// and a Kafka partition's lag (it gave the watermark alone).
func TestPartitionLine(t *testing.T) {
	lag := func(n int64) *int64 { return &n }
	wm := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC).UnixMilli()
	for _, c := range []struct {
		name string
		idle bool
		lag  *int64
		want string
	}{
		{"e.jsonl", false, nil, "  partition e.jsonl watermark 2026-03-01T10:00:00.000Z"},
		{"e.jsonl", true, nil, "  partition e.jsonl watermark 2026-03-01T10:00:00.000Z (idle)"},
		{"in-0", true, lag(0), "  partition in-0 watermark 2026-03-01T10:00:00.000Z (idle), lag 0 records"},
		{"in-1", false, lag(1), "  partition in-1 watermark 2026-03-01T10:00:00.000Z, lag 1 record"},
		{"in-10", false, lag(12345), "  partition in-10 watermark 2026-03-01T10:00:00.000Z, lag 12,345 records"},
	} {
		if got := partitionLine(c.name, wm, c.idle, c.lag); got != c.want {
			t.Errorf("partitionLine(%s, idle %v) = %q, want %q", c.name, c.idle, got, c.want)
		}
	}
}

// TestVersionLine: rules list keeps its columns whatever the origin,
// rules-topic (11 characters) the widest; a column 9 wide pushed such a
// version's ruleset and rules out of line.
func TestVersionLine(t *testing.T) {
	at := time.Date(2026, 3, 2, 10, 15, 12, 0, time.UTC)
	var starts []int
	for _, origin := range []string{"startup", "grpc", "rules-dir", "rollback", "promote", "rules-topic"} {
		v := cep.VersionInfo{Ruleset: "cards", Version: "14fdbee47634c75c", State: cep.VersionPrevious, Deployed: at, Origin: origin, Rules: []string{"a", "b"}}
		line := versionLine(v)
		if !strings.HasPrefix(line, "14fdbee47634  previous  2026-03-02T10:15:12Z  "+origin+" ") || !strings.HasSuffix(line, "  cards  2 rules") {
			t.Errorf("versionLine of origin %s: %q", origin, line)
		}
		starts = append(starts, strings.Index(line, "  cards  "))
	}
	for i, s := range starts {
		if s != starts[0] {
			t.Errorf("the ruleset's column starts at %d for origin %d, at %d for the first: %v", s, i, starts[0], starts)
		}
	}
}

// TestServeJSONLogEnd: with -log-format json every line serve writes on
// stderr is a JSON object, the error it ends with and a ruleset's
// problems at the start too (ERROR records, the problems with their file,
// line and column), with the exit status of old. They were plain lines
// ("cepheus: ...", a caret under the line), which a reader of the log's
// JSON lines could not take: why the process ended. Text logs keep them.
func TestServeJSONLogEnd(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	bad := writeFile(t, dir, "bad.cep", strings.Replace(goodSrc, `name == "b"`, `name ==`, 1))
	records := func(stderr string) []map[string]any {
		t.Helper()
		var out []map[string]any
		for _, l := range strings.Split(strings.TrimSuffix(stderr, "\n"), "\n") {
			var r map[string]any
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				t.Fatalf("a line of stderr is no JSON object: %q (%v)\n%s", l, err, stderr)
			}
			out = append(out, r)
		}
		return out
	}
	common := []string{"serve", "-state", filepath.Join(dir, "state"), "-alerts", filepath.Join(dir, "alerts"), "-http", "127.0.0.1:0", "-grpc", "off"}
	for _, c := range []struct {
		what      string
		args      []string
		want      string  // the last record's message
		problem   float64 // the line of a problem record before it, if any
		textFinal string  // the last line of stderr with -log-format text
	}{
		{"a directory with no file to read", []string{"-rules", writeFile(t, dir, "good.cep", goodSrc), "-events", empty},
			"the directory " + empty + " has no file to read", 0, "cepheus: the directory " + empty + " has no file to read"},
		{"a ruleset that does not compile", []string{"-rules", bad, "-events", empty},
			bad + ": 1 problem", 7, "^"},
	} {
		code, _, stderr := cepheus(t, append(append(common, c.args...), "-log-format", "json")...)
		rs := records(stderr)
		last := rs[len(rs)-1]
		if msg, _ := last["msg"].(string); code != 1 || last["level"] != "ERROR" || !strings.HasPrefix(msg, c.want) || last["exit_status"] != 1.0 {
			t.Errorf("%s: exit %d, last record %v; want exit 1 and an ERROR record %q..., exit_status 1", c.what, code, last, c.want)
		}
		if c.problem > 0 {
			p := rs[len(rs)-2]
			if p["level"] != "ERROR" || p["file"] != bad || p["line"] != c.problem || p["column"] == nil || !strings.HasPrefix(p["msg"].(string), bad+":") {
				t.Errorf("%s: the problem's record %v; want ERROR, file %s, line %v and a column", c.what, p, bad, c.problem)
			}
		}
		code, _, stderr = cepheus(t, append(common, c.args...)...)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if last := strings.TrimSpace(lines[len(lines)-1]); code != 1 || !strings.HasPrefix(last, c.textFinal) {
			t.Errorf("%s, text log: exit %d, last line %q; want 1 and %q...", c.what, code, last, c.textFinal)
		}
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// grepLines returns the lines of s that start with prefix.
func grepLines(s, prefix string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestServeConfig: -print-config shows each setting with its source:
// a flag wins over the environment, which wins over the config file,
// which wins over the default; an unknown key or a bad value in the file
// is refused with the file, line and column.
func TestServeConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "serve.yaml")
	if err := os.WriteFile(cfg, []byte("# settings\nrules: r.cep\nevents: e.jsonl\nparallelism: 2\ncheckpoint-interval: 2s\nkeep: 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CEPHEUS_CHECKPOINT_INTERVAL", "300ms")
	t.Setenv("CEPHEUS_KEEP", "")
	code, out, errOut := cepheus(t, "serve", "-config", cfg, "-print-config", "-parallelism", "1")
	if code != 0 {
		t.Fatalf("serve -print-config: exit %d\n%s", code, errOut)
	}
	for _, want := range []string{
		`parallelism: "1" # flag`, `checkpoint-interval: "300ms" # environment`, `rules: "r.cep" # config file`,
		`keep: "5" # config file`, `http: "localhost:9464" # default`, `rules-dir: "" # default`, `rules-dir-poll: "1s" # default`,
		`shadow-alerts: "" # default`, `shadow-topic: "" # default`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("-print-config lacks %q:\n%s", want, out)
		}
	}
	// What it prints is a config file of the same settings.
	again := filepath.Join(dir, "printed.yaml")
	if err := os.WriteFile(again, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CEPHEUS_CHECKPOINT_INTERVAL", "")
	if code, out2, errOut := cepheus(t, "serve", "-config", again, "-print-config"); code != 0 || !strings.Contains(out2, `checkpoint-interval: "300ms" # config file`) {
		t.Errorf("the printed config read back: exit %d\n%s%s", code, out2, errOut)
	}
	for _, c := range []struct{ file, want string }{
		{"rules: r.cep\nbogus: 1\n", `bad.yaml:2:1: unknown setting "bogus" (the settings are the flags of cepheus serve, without the dash)`},
		{"rules: r.cep\nchekpoint-interval: 1s\n", `bad.yaml:2:1: unknown setting "chekpoint-interval" (did you mean checkpoint-interval?)`},
		{"rules: r.cep\nprint-confg: true\n", `bad.yaml:2:1: unknown setting "print-confg" (the settings are the flags of cepheus serve, without the dash)`},
		{"rules: r.cep\nparallelism: many\n", `bad.yaml:2:14: parallelism "many": parse error (want a whole number)`},
		{"rules: r.cep\ncheckpoint-interval: 5 seconds\n", `bad.yaml:2:22: checkpoint-interval "5 seconds": parse error (want a duration such as 500ms, 10s or 5m: unknown unit " seconds" in duration "5 seconds")`},
		{"rules: r.cep\nfollow: maybe\n", `bad.yaml:2:9: follow "maybe": parse error (want true or false)`},
		{"rules: [a, b]\n", `bad.yaml:1:8: setting "rules": want a single value`},
		{"rules: r.cep\nlookup: [a=file:x, [b]]\n", `bad.yaml:2:20: setting "lookup": want a list of single values without commas`},
		{"rules: x.cep\nstate: st\nrules: y.cep\n", `bad.yaml:3:1: setting "rules" given twice (first at line 1)`},
	} {
		bad := filepath.Join(dir, "bad.yaml")
		if err := os.WriteFile(bad, []byte(c.file), 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, errOut := cepheus(t, "serve", "-config", bad, "-print-config")
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("config %q: exit %d, want 2 with %q\n%s", c.file, code, c.want, errOut)
		}
	}
}

// TestServeConfigHidesPassword: -print-config prints a Redis URL's
// password as *** (it printed the password), whether the URL came from
// the config file or the environment.
func TestServeConfigHidesPassword(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "serve.yaml")
	if err := os.WriteFile(cfg, []byte("rules: r.cep\nlookup: customer=redis://analyst:S3cret@10.0.0.5:6379/2,merchant=file:m.jsonl\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := cepheus(t, "serve", "-config", cfg, "-print-config")
	if want := `lookup: "customer=redis://analyst:***@10.0.0.5:6379/2,merchant=file:m.jsonl" # config file`; code != 0 || !strings.Contains(out, want+"\n") {
		t.Errorf("serve -print-config: exit %d, want 0 with %q\n%s%s", code, want, out, errOut)
	}
	// The same as a YAML list (refused as no single value before).
	list := filepath.Join(t.TempDir(), "serve.yaml")
	if err := os.WriteFile(list, []byte("rules: r.cep\nlookup:\n  - customer=redis://analyst:S3cret@10.0.0.5:6379/2\n  - merchant=file:m.jsonl\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = cepheus(t, "serve", "-config", list, "-print-config")
	if want := `lookup: "customer=redis://analyst:***@10.0.0.5:6379/2,merchant=file:m.jsonl" # config file`; code != 0 || !strings.Contains(out, want+"\n") {
		t.Errorf("serve -print-config of a YAML list: exit %d, want 0 with %q\n%s%s", code, want, out, errOut)
	}
	t.Setenv("CEPHEUS_LOOKUP", "a=rediss://:p@ss:w0rd@h:1?format=json")
	code, out, errOut = cepheus(t, "serve", "-config", cfg, "-print-config")
	if want := `lookup: "a=rediss://:***@h:1?format=json" # environment`; code != 0 || !strings.Contains(out, want+"\n") {
		t.Errorf("serve -print-config: exit %d, want 0 with %q\n%s%s", code, want, out, errOut)
	}
	for _, secret := range []string{"S3cret", "w0rd"} {
		if strings.Contains(out+errOut, secret) {
			t.Errorf("the output holds the password %q:\n%s%s", secret, out, errOut)
		}
	}
}

// TestServeConfigKafka: the Kafka settings of a config file reach the
// connection (the security settings were read from the command line
// only, so a file's sasl was not seen), and their own environment
// variables ($CEPHEUS_KAFKA_BROKERS, $CEPHEUS_KAFKA_SASL_USER) are
// printed as the environment's and win over the file.
func TestServeConfigKafka(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "serve.yaml")
	if err := os.WriteFile(cfg, []byte("rules: r.cep\ninput-topic: t\nstate: s\nalerts: a\nbrokers: file:1\nsasl: PLAIN\nsasl-user: bob\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(brokersEnv, "env:1")
	t.Setenv(saslUserEnv, "alice")
	code, out, errOut := cepheus(t, "serve", "-config", cfg, "-print-config")
	if code != 0 {
		t.Fatalf("serve -print-config: exit %d\n%s", code, errOut)
	}
	for _, want := range []string{`brokers: "env:1" # environment`, `sasl: "PLAIN" # config file`, `sasl-user: "alice" # environment`} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("-print-config lacks %q:\n%s", want, out)
		}
	}
	// Without a user anywhere, the file's mechanism is what the settings
	// are checked with.
	t.Setenv(saslUserEnv, "")
	t.Setenv(saslPasswordEnv, "secret")
	if err := os.WriteFile(cfg, []byte("rules: r.cep\ninput-topic: t\nstate: s\nalerts: a\nsasl: PLAIN\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = cepheus(t, "serve", "-config", cfg)
	if code != 2 || !strings.Contains(errOut, "SASL PLAIN needs a user and a password") {
		t.Errorf("a config file's sasl without a user: exit %d, want 2 saying the user is missing\n%s", code, errOut)
	}
}

// TestServeRulesDir runs cepheus serve -rules-dir over a followed file:
// a ruleset renamed into the directory becomes the active version; a
// rollback through the control API stays while the directory does not
// change; a ruleset that does not compile is logged at file:line:col and
// the engine keeps its version; cepheus rules deploy switches the engine
// and refuses a bad ruleset with its problems.
func TestServeRulesDir(t *testing.T) {
	bin := buildCepheus(t)
	dir := t.TempDir()
	events := filepath.Join(dir, "events.jsonl")
	if out, err := exec.Command(bin, "gen", "-days", "1", "-events-per-day", "2000", "-history-days", "0", "-scenarios", "card_testing", "-o", events).CombinedOutput(); err != nil {
		t.Fatalf("cepheus gen: %v\n%s", err, out)
	}
	v1 := mustRead(t, "../../rulesets/cards.cep")
	// v2 changes a rule, with a warning (cashout.amount in cashout's own
	// condition: always null, so the ?? makes the clause true).
	v2 := []byte(strings.Replace(string(v1), "amount > 500", "amount > 400 && (cashout.amount ?? 0) >= 0", 1))
	broken := []byte(strings.Replace(string(v1), "amount < 2", `amount < "x" +`, 1))
	load := func(src []byte) *rules.Ruleset {
		rs, err := rules.Load("cards.cep", src)
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	rs1 := load(v1)
	h1, h2 := rs1.Hash[:12], load(v2).Hash[:12]
	if h1 == h2 {
		t.Fatal("the changed ruleset has the same hash")
	}
	rulesDir, staging := filepath.Join(dir, "rules"), filepath.Join(dir, "staging")
	for _, d := range []string{rulesDir, staging} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// put writes src to the ruleset file of rulesDir at once (a rename).
	put := func(src []byte) {
		t.Helper()
		tmp := filepath.Join(staging, "cards.cep")
		if err := os.WriteFile(tmp, src, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(rulesDir, "cards.cep")); err != nil {
			t.Fatal(err)
		}
	}
	put(v1)
	if err := os.WriteFile(filepath.Join(rulesDir, "README"), []byte("not a ruleset\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := startChild(t, bin, []string{"serve", "-rules-dir", rulesDir, "-rules-dir-poll", "100ms", "-events", events, "-follow",
		"-state", filepath.Join(dir, "state"), "-alerts", filepath.Join(dir, "alerts"), "-http", "127.0.0.1:0",
		"-grpc", "127.0.0.1:0", "-checkpoint-interval", "200ms", "-progress", "1s"}, "")
	defer func() {
		select {
		case <-c.done:
		default:
			c.kill()
		}
	}()
	// waitFor waits up to 30 s for cond, failing with what.
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("after 30s, %s:\n%s", what, c.out.String())
			}
		}
	}
	addrRe := regexp.MustCompile(`control API \(gRPC\) on ([0-9.:]+)`)
	waitFor("serve has not said where the control API is", func() bool { return addrRe.MatchString(c.out.String()) })
	server := addrRe.FindStringSubmatch(c.out.String())[1]
	waitFor("not ready", func() bool {
		_, out, _ := cepheus(t, "status", "-server", server)
		return strings.Contains(out, ": ready, ruleset cards version "+h1)
	})
	// active is the first line of cepheus rules list: the active version.
	active := func() string {
		t.Helper()
		code, out, errOut := cepheus(t, "rules", "list", "-server", server)
		if code != 0 {
			t.Fatalf("cepheus rules list: exit %d\n%s", code, errOut)
		}
		first, _, _ := strings.Cut(out, "\n")
		return first
	}
	isActive := func(h string) func() bool {
		return func() bool { return strings.HasPrefix(active(), h+"  active  ") }
	}
	if l := active(); !strings.HasPrefix(l, h1+"  active  ") || !strings.Contains(l, " startup ") || !strings.HasSuffix(l, fmt.Sprintf(" cards  %d rules", len(rs1.Rules))) {
		t.Errorf("rules list at the start: %q; want %s active from startup, ruleset cards", l, h1)
	}
	put(v2)
	waitFor("the renamed ruleset "+h2+" is not active", isActive(h2))
	if l := active(); !strings.Contains(l, " rules-dir ") {
		t.Errorf("rules list after the rename: %q; want origin rules-dir", l)
	}
	// The watcher logs the deploy once its call returns, after the
	// switch shows: wait for its lines.
	waitFor("no log of the switch to "+h2, func() bool {
		out := c.out.String()
		return strings.Contains(out, "rules-dir: deployed") && strings.Contains(out, "version="+h2)
	})
	warn := "rules-dir: " + filepath.Join(rulesDir, "cards.cep") + ":53:"
	warnRe := regexp.MustCompile(regexp.QuoteMeta(warn) + `\d+: warning: stage cashout takes one event`)
	waitFor("no warning "+warn+"...: stage cashout takes one event in the log", func() bool { return warnRe.MatchString(c.out.String()) })
	// A rollback through the control API stays: the directory has not
	// changed since.
	if code, out, errOut := cepheus(t, "rules", "rollback", "-server", server); code != 0 || !strings.Contains(out, "rolled back ruleset cards version "+h1) {
		t.Fatalf("cepheus rules rollback: exit %d\n%s%s", code, out, errOut)
	}
	time.Sleep(500 * time.Millisecond) // five looks
	if !isActive(h1)() {
		t.Errorf("the rollback to %s was undone: %q", h1, active())
	}
	// The same rollback sent again, naming the version it rolled back
	// from, is refused: it does not toggle back to h2.
	want := "rollback on " + server + ": the version the call names is not the active one: version " + h1 + " is active, not " + h2 + ": nothing switched"
	if code, out, errOut := cepheus(t, "rules", "rollback", "-from", h2, "-server", server); code != 1 || !strings.Contains(errOut, want) {
		t.Errorf("cepheus rules rollback -from %s over %s: exit %d, stderr %q; want 1 and %q\n%s", h2, h1, code, errOut, want, out)
	}
	if !isActive(h1)() {
		t.Errorf("the refused rollback switched: %q, want %s active", active(), h1)
	}
	// A ruleset that does not compile is logged; the version stays.
	put(broken)
	problem := regexp.MustCompile(regexp.QuoteMeta(filepath.Join(rulesDir, "cards.cep")) + `:\d+:\d+: `)
	waitFor("no problem of the bad ruleset logged at file:line:col", func() bool { return problem.MatchString(c.out.String()) })
	if !isActive(h1)() {
		t.Errorf("the bad ruleset changed the active version: %q, want %s", active(), h1)
	}
	// cepheus rules deploy.
	bad := filepath.Join(staging, "bad.cep")
	if err := os.WriteFile(bad, broken, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := cepheus(t, "rules", "deploy", "-server", server, bad); code != 1 || !regexp.MustCompile(regexp.QuoteMeta(bad)+`:\d+:\d+: `).MatchString(errOut) {
		t.Errorf("cepheus rules deploy of a bad ruleset: exit %d, want 1 with bad.cep:line:col\n%s", code, errOut)
	}
	good := filepath.Join(staging, "v2.cep")
	if err := os.WriteFile(good, v2, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := cepheus(t, "rules", "deploy", "-server", server, good)
	if code != 0 || !strings.Contains(out, "deployed ruleset cards version "+h2+" (was "+h1+") at checkpoint ") || !regexp.MustCompile(`(?m)^  changed +card_testing \(their old versions drain: [^)]*\)$`).MatchString(out) {
		t.Errorf("cepheus rules deploy: exit %d; want %s after %s, card_testing changed\n%s%s", code, h2, h1, out, errOut)
	}
	if code, out, _ := cepheus(t, "rules", "list", "-server", server); code != 0 || !strings.HasPrefix(out, h2+"  active  ") || !strings.Contains(out, "\n"+h1+"  previous  ") {
		t.Errorf("cepheus rules list after the deploy: exit %d; want %s active, %s previous\n%s", code, h2, h1, out)
	}
	if e := c.terminate(t, 30*time.Second); e.killed || e.code != 0 {
		t.Fatalf("serve on SIGTERM: %s, want exit 0\n%s", e.describe(), e.tail())
	}
}

// TestServeRulesDirRefused: -rules-dir with no ruleset, or several, is an
// error naming the directory; -rules and -rules-dir together a usage error.
func TestServeRulesDirRefused(t *testing.T) {
	dir := t.TempDir()
	args := []string{"-events", filepath.Join(dir, "e.jsonl"), "-state", filepath.Join(dir, "state"), "-alerts", filepath.Join(dir, "alerts"), "-http", "127.0.0.1:0", "-grpc", ""}
	if code, _, errOut := cepheus(t, append([]string{"serve", "-rules-dir", dir}, args...)...); code != 1 || !strings.Contains(errOut, "-rules-dir "+dir+" holds no *.cep file") {
		t.Errorf("an empty -rules-dir: exit %d\n%s", code, errOut)
	}
	for _, n := range []string{"a.cep", "b.cep"} {
		if err := os.WriteFile(filepath.Join(dir, n), mustRead(t, "../../rulesets/cards.cep"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if code, _, errOut := cepheus(t, append([]string{"serve", "-rules-dir", dir}, args...)...); code != 1 || !strings.Contains(errOut, "-rules-dir "+dir+" holds 2 *.cep files (a.cep, b.cep)") {
		t.Errorf("two rulesets in -rules-dir: exit %d\n%s", code, errOut)
	}
	if code, _, errOut := cepheus(t, append([]string{"serve", "-rules-dir", dir, "-rules", filepath.Join(dir, "a.cep")}, args...)...); code != 2 || !strings.Contains(errOut, "-rules or -rules-dir (one of them)") {
		t.Errorf("-rules and -rules-dir: exit %d\n%s", code, errOut)
	}
}

// TestServeGRPCOff: CEPHEUS_GRPC=off serves no control API and says so
// (an empty variable counts as unset, so it cannot turn gRPC off).
func TestServeGRPCOff(t *testing.T) {
	bin := buildCepheus(t)
	dir := t.TempDir()
	events := filepath.Join(dir, "events.jsonl")
	if err := os.WriteFile(events, []byte(`{"ts":"2026-01-01T00:00:00Z","type":"auth","card_id":"c1","customer_id":"u1","amount":1}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CEPHEUS_GRPC", "off")
	c := startChild(t, bin, []string{"serve", "-rules", "../../rulesets/cards.cep", "-events", events, "-follow",
		"-state", filepath.Join(dir, "state"), "-alerts", filepath.Join(dir, "alerts"), "-http", "127.0.0.1:0"}, "")
	defer func() {
		select {
		case <-c.done:
		default:
			c.kill()
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(c.out.String(), "no control API (-grpc off)") {
		select {
		case <-c.done:
			t.Fatalf("serve with CEPHEUS_GRPC=off ended: %s\n%s", c.exit().describe(), c.out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve with CEPHEUS_GRPC=off did not say it serves no control API:\n%s", c.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if strings.Contains(c.out.String(), "control API (gRPC) on") {
		t.Errorf("serve with CEPHEUS_GRPC=off serves the control API:\n%s", c.out.String())
	}
	if e := c.terminate(t, 30*time.Second); e.killed || e.code != 0 {
		t.Fatalf("serve on SIGTERM: %s, want exit 0\n%s", e.describe(), e.tail())
	}
}

// TestServeDeployRefused: a deploy the job refuses says which file, which
// server and which version once, and why; it said "deploy of F on S:
// deploy of version V: ...".
func TestServeDeployRefused(t *testing.T) {
	dir := t.TempDir()
	server, _ := serveInProcess(t, "-rules", writeFile(t, dir, "r.cep", goodSrc), "-events", writeFile(t, dir, "e.jsonl", `{"ts": "2026-01-01T00:00:00Z", "t2": "2026-01-01T00:00:00Z", "k": "x", "name": "a"}`+"\n"),
		"-follow", "-state", filepath.Join(dir, "state"), "-alerts", filepath.Join(dir, "alerts"))
	v2src, _, _ := strings.Cut(goodSrc, "test ") // its tests' events have no t2
	v2 := writeFile(t, dir, "v2.cep", strings.Replace(v2src, "event time ts", "event time t2", 1))
	code, out, errOut := cepheus(t, "rules", "deploy", "-server", server, v2)
	want := regexp.MustCompile(`^cepheus: ` + regexp.QuoteMeta(v2+" on "+server) + `: deploy of version [0-9a-f]{12}: its event time is field t2, the job's is ts: `)
	if code != 1 || out != "" || !want.MatchString(errOut) || strings.Count(errOut, "deploy of") != 1 {
		t.Errorf("rules deploy of a ruleset with another event time: exit %d\n%s%s\nwant it refused, naming the version once", code, out, errOut)
	}
}

// TestServeAddrs: a -http or -grpc address that is no host:port is a bad
// command line (exit 2, before the state directory is made), from a flag
// or a config file alike. -http "" listened on every interface at a port
// the kernel chose, where -grpc "" means no control API; the others
// failed only at their listener (exit 1).
func TestServeAddrs(t *testing.T) {
	dir := t.TempDir()
	events := writeFile(t, dir, "e.jsonl", abEvents(4, 0, ""))
	rules := writeFile(t, dir, "r.cep", goodSrc)
	config := writeFile(t, dir, "serve.yaml", "http: \"\"\n")
	for i, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-http", "", "-grpc", "off"}, `-http "": want host:port`},
		{[]string{"-http", "off", "-grpc", "off"}, `-http "off": want host:port`},
		{[]string{"-http", "localhost", "-grpc", "off"}, `-http "localhost": want host:port`},
		{[]string{"-config", config, "-grpc", "off"}, `-http "": want host:port`},
		{[]string{"-http", "127.0.0.1:0", "-grpc", "localhost"}, `-grpc "localhost": want host:port (port 0 picks one), unix:PATH (a Unix socket), or off for none`},
		{[]string{"-http", "127.0.0.1:0", "-grpc", "unix:"}, `-grpc "unix:": want unix:PATH, the path of the socket`},
		// A port no listener takes (it failed at the listener, exit 1),
		// and every problem named as serve's.
		{[]string{"-http", "localhost:99999", "-grpc", "localhost:70000"}, `-http "localhost:99999": want host:port (port 0 picks one); /metrics, /healthz and /readyz are always served
cepheus: serve: -grpc "localhost:70000": want host:port`},
	} {
		state := filepath.Join(dir, fmt.Sprintf("state%d", i))
		args := append([]string{"serve", "-rules", rules, "-events", events, "-state", state, "-alerts", filepath.Join(dir, fmt.Sprintf("alerts%d", i))}, c.args...)
		code, _, errOut := cepheus(t, args...)
		if code != 2 || !strings.Contains(errOut, "cepheus: serve: "+c.want) || !strings.Contains(errOut, "cepheus help serve") {
			t.Errorf("%q: exit %d, want 2 and %q\n%s", c.args, code, c.want, errOut)
		}
		if _, err := os.Stat(state); !os.IsNotExist(err) {
			t.Errorf("%q: the state directory was made: %v", c.args, err)
		}
	}
}

// TestStatusFormerRules: after a deploy that removes a rule and changes
// another's severity, cepheus status has a line of each rule counted
// before that the active version has not (marked so), and the rules add
// up to the header's alerts; the lines were left out (the header said
// 3,832 alerts, the rules 3,786). A rule's line has its emit errors and
// events without the key.
func TestStatusFormerRules(t *testing.T) {
	dir := t.TempDir()
	v1 := `ruleset good
event time ts
rule r {
  key k
  pattern {
    begin a where name == "a"
    followedBy b where name == "b"
    within 1h
  }
}
rule g {
  key k
  pattern {
    begin a where name == "a"
    followedBy c where name == "c"
    within 1h
  }
}
`
	v2 := strings.Replace(v1[:strings.Index(v1, "rule g {")], "rule r {\n", "rule r {\n  severity high\n", 1)
	// events appends, for three keys from n, a, b and c a second apart,
	// then an event two hours later whose watermark passes them.
	events := filepath.Join(dir, "e.jsonl")
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	appendEvents := func(n int, at time.Time) {
		t.Helper()
		var b strings.Builder
		for i := n; i < n+3; i++ {
			for j, name := range []string{"a", "b", "c"} {
				fmt.Fprintf(&b, `{"ts": %q, "k": "k%d", "name": %q}`+"\n", at.Add(time.Duration(3*i+j)*time.Second).Format(time.RFC3339), i, name)
			}
		}
		fmt.Fprintf(&b, `{"ts": %q, "k": "z", "name": "z"}`+"\n", at.Add(2*time.Hour).Format(time.RFC3339))
		f, err := os.OpenFile(events, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(b.String()); err != nil {
			t.Fatal(err)
		}
	}
	appendEvents(0, base)
	server, logs := serveInProcess(t, "-rules", writeFile(t, dir, "r.cep", v1), "-events", events,
		"-follow", "-state", filepath.Join(dir, "state"), "-alerts", filepath.Join(dir, "alerts"))
	waitAlerts := func(n string) string {
		t.Helper()
		var out string
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if _, out, _ = cepheus(t, "status", "-server", server); strings.Contains(out, ", alerts "+n+"\n") {
				return out
			}
			if time.Now().After(deadline) {
				t.Fatalf("cepheus status has not %s alerts after 30s:\n%s\n%s", n, out, logs.String())
			}
		}
	}
	waitAlerts("6")
	code, out, errOut := cepheus(t, "rules", "deploy", "-server", server, writeFile(t, dir, "v2.cep", v2))
	was := regexp.MustCompile(`\(was ([0-9a-f]{12})\)`).FindStringSubmatch(out)
	if code != 0 || was == nil {
		t.Fatalf("rules deploy: exit %d\n%s%s", code, out, errOut)
	}
	// r of v1 drains (its severity changed) until the watermark passes
	// an hour after the switch's: status names it.
	if _, st, _ := cepheus(t, "status", "-server", server); !regexp.MustCompile(`(?m)^  draining: r of version ` + was[1] + `, its partial matches of before the switch, until the watermark passes 2026-01-01T0[23]:`).MatchString(st) {
		t.Errorf("cepheus status after the deploy:\n%s\nwant r of version %s draining", st, was[1])
	}
	appendEvents(3, base.Add(3*time.Hour))
	out = waitAlerts("9")
	row := regexp.MustCompile(`(?m)^  rule (\S+) +(\S+) +([0-9,]+) alerts +([0-9,]+) condition errors +([0-9,]+) emit errors +([0-9,]+) dropped +([0-9,]+) without key(  \[earlier version: not in the active one\])?$`)
	var got []string
	for _, m := range row.FindAllStringSubmatch(out, -1) {
		got = append(got, fmt.Sprintf("%s %s %s former=%v", m[1], m[2], m[3], m[8] != ""))
	}
	want := []string{"r high 3 former=false", "r medium 3 former=true", "g medium 3 former=true"}
	if !slices.Equal(got, want) {
		t.Errorf("cepheus status after the deploy:\n%s\nits rules %q, want %q (adding up to the 9 alerts)", out, got, want)
	}
	line := ruleLine(fakeRuleStatus{rule: "r", severity: "low", alerts: 1234, condErrs: 2, emitErrs: 5, dropped: 7, noKey: 3}, false)
	if want := "  rule r                            low         1,234 alerts      2 condition errors      5 emit errors      7 dropped      3 without key"; line != want {
		t.Errorf("ruleLine:\n%q\nwant\n%q", line, want)
	}
}

// TestStatusHelpNamesItsFigures: cepheus status -h names every figure of
// a rule's line of status, and the rules of earlier versions it lists. It
// named alerts, condition errors and drops alone, the line having emit
// errors, events without key, timed-out alerts and former rules too.
func TestStatusHelpNamesItsFigures(t *testing.T) {
	_, help, _ := cepheus(t, "help", "status")
	help = strings.Join(strings.Fields(help), " ")
	line := ruleLine(fakeRuleStatus{rule: "r", severity: "low", timeoutSeverity: "high"}, true)
	var figures []string
	for _, m := range regexp.MustCompile(`\b0 (?:of them )?([a-z][a-z ]*[a-z])`).FindAllStringSubmatch(line, -1) {
		figures = append(figures, m[1])
	}
	if len(figures) < 6 {
		t.Fatalf("ruleLine %q: figures %q, want the 6 it prints", line, figures)
	}
	if m := regexp.MustCompile(`\[([a-z ]+):`).FindStringSubmatch(line); m != nil {
		figures = append(figures, m[1])
	}
	for _, f := range figures {
		if !strings.Contains(help, f) {
			t.Errorf("cepheus status -h does not name %q, which its rule lines show (%q):\n%s", f, line, help)
		}
	}
}

// fakeRuleStatus is a ruleStatus (the control API's RuleStatus, which this
// package does not import).
type fakeRuleStatus struct {
	rule, severity, timeoutSeverity                      string
	alerts, condErrs, emitErrs, dropped, noKey, timedOut int64
}

func (f fakeRuleStatus) GetRule() string            { return f.rule }
func (f fakeRuleStatus) GetSeverity() string        { return f.severity }
func (f fakeRuleStatus) GetAlerts() int64           { return f.alerts }
func (f fakeRuleStatus) GetConditionErrors() int64  { return f.condErrs }
func (f fakeRuleStatus) GetEmitErrors() int64       { return f.emitErrs }
func (f fakeRuleStatus) GetDropped() int64          { return f.dropped }
func (f fakeRuleStatus) GetNoKey() int64            { return f.noKey }
func (f fakeRuleStatus) GetTimedOut() int64         { return f.timedOut }
func (f fakeRuleStatus) GetTimeoutSeverity() string { return f.timeoutSeverity }

// TestMisspeltEnv: a CEPHEUS_ variable close to a setting's, which serve
// would ignore, is warned of with the name it is close to; the settings'
// own, the program's other variables and names far from any setting are
// not (the SRE trial's CEPHEUS_CHEKPOINT_INTERVAL was ignored silently).
func TestMisspeltEnv(t *testing.T) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.Duration("checkpoint-interval", 0, "")
	fs.String("rules-dir", "", "")
	fs.String("brokers", "", "")
	fs.String("config", "", "")
	got := misspeltEnv(fs, []string{
		"CEPHEUS_CHEKPOINT_INTERVAL=1s",
		"CEPHEUS_RULES_DIRR=x",
		"CEPHEUS_CHECKPOINT_INTERVAL=1s",
		"CEPHEUS_KAFKA_BROKERS=localhost:9092",
		"CEPHEUS_FAILPOINT=x",
		"CEPHEUS_REDIS_ADDR=x",
		"CEPHEUS_SOMETHING_ELSE_ENTIRELY=1",
		"HOME=/root",
		"CEPHEUS_CONFIGG=x",
		"CEPHEUS_KAFKA_BROKER=x",
	}, "config")
	want := []string{
		"$CEPHEUS_CHEKPOINT_INTERVAL is no setting and is ignored (did you mean $CEPHEUS_CHECKPOINT_INTERVAL?)",
		"$CEPHEUS_CONFIGG is no setting and is ignored (did you mean $CEPHEUS_CONFIG?)",
		"$CEPHEUS_KAFKA_BROKER is no setting and is ignored (did you mean $CEPHEUS_KAFKA_BROKERS?)",
		"$CEPHEUS_RULES_DIRR is no setting and is ignored (did you mean $CEPHEUS_RULES_DIR?)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("misspeltEnv =\n%q\nwant\n%q", got, want)
	}
	if !slices.Contains(otherEnv, kafka.ClientLogEnv) || !slices.Contains(internalEnv, failpoint.EnvVar) {
		t.Errorf("otherEnv %q lacks %s, or internalEnv %q lacks %s", otherEnv, kafka.ClientLogEnv, internalEnv, failpoint.EnvVar)
	}
}
