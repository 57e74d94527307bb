//go:build linux

package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServe runs cepheus serve over a followed file of generated events
// with -http on a free port: it says where it serves, /readyz turns 200
// once the job reads, /metrics counts the events and the alerts by rule,
// and SIGTERM stops it with a final checkpoint and exit 0.
func TestServe(t *testing.T) {
	bin := buildCepheus(t)
	dir := t.TempDir()
	events := filepath.Join(dir, "events.jsonl")
	if out, err := exec.Command(bin, "gen", "-days", "1", "-events-per-day", "20000", "-history-days", "0", "-scenarios", "card_testing,velocity_burst", "-o", events).CombinedOutput(); err != nil {
		t.Fatalf("cepheus gen: %v\n%s", err, out)
	}
	c := startChild(t, bin, []string{"serve", "-rules", "../../rulesets/cards.cep", "-events", events, "-follow",
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
	if code != 0 || !strings.Contains(out, ": ready, ruleset cards") || !strings.Contains(out, "events "+strconv.Itoa(lines)) || !strings.Contains(out, "rule card_testing") {
		t.Errorf("cepheus status: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := cepheus(t, "rules", "validate", "-server", m[1], "../../rulesets/cards.cep"); code != 0 || !strings.Contains(out, "ruleset cards version") {
		t.Errorf("cepheus rules validate of cards.cep: exit %d\n%s%s", code, out, errOut)
	}
	bad := filepath.Join(dir, "bad.cep")
	if err := os.WriteFile(bad, []byte("ruleset b\nevent time ts\nrule r {\n  pattern {\n    begin a where amount > +\n  }\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := cepheus(t, "rules", "validate", "-server", m[1], bad); code != 1 || !strings.Contains(errOut, "bad.cep:5:") {
		t.Errorf("cepheus rules validate of a bad ruleset: exit %d, want 1 with bad.cep:5:col\n%s", code, errOut)
	}
	if err := syscall.Kill(c.pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		t.Fatal("serve still runs 30s after SIGTERM")
	}
	e := c.exit()
	if e.killed || e.code != 0 || !strings.Contains(e.stderr, "stopped at checkpoint") {
		t.Fatalf("serve on SIGTERM: %s, want exit 0 after a final checkpoint\n%s", e.describe(), e.tail())
	}
	// -log-format json: every line is an object with a level and a
	// message, the progress with its figures as fields.
	progress := 0
	for _, l := range strings.Split(strings.TrimSpace(e.stderr), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil || rec["level"] == nil || rec["msg"] == nil {
			t.Fatalf("not a JSON log line: %q (%v)", l, err)
		}
		if rec["msg"] == "progress" {
			progress++
			if _, ok := rec["records"].(float64); !ok {
				t.Errorf("a progress line without its records: %q", l)
			}
		}
	}
	if progress == 0 {
		t.Errorf("no progress line in %d s of serving (-progress 500ms)", int(e.elapsed.Seconds()))
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
		`keep: "5" # config file`, `http: "localhost:9464" # default`,
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
		{"rules: r.cep\nbogus: 1\n", `bad.yaml:2:1: unknown setting "bogus"`},
		{"rules: r.cep\nparallelism: many\n", `bad.yaml:2:14: parallelism`},
		{"rules: [a, b]\n", `bad.yaml:1:8: setting "rules": want a single value`},
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
