//go:build linux

package main

import (
	"bufio"
	"bytes"
	"cmp"
	"compress/gzip"
	"fmt"
	"io"
	"net"
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

// redisAddr returns the Redis server of CEPHEUS_REDIS_ADDR (make test
// starts one), failing under CI without one.
func redisAddr(t *testing.T) string {
	t.Helper()
	a := os.Getenv("CEPHEUS_REDIS_ADDR")
	if a == "" {
		if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
			t.Fatal("CEPHEUS_REDIS_ADDR is not set and CI is: the lookup tests need Redis (make test starts one with scripts/redis.sh)")
		}
		t.Skip("no Redis: make test starts one; or run scripts/redis.sh start and set CEPHEUS_REDIS_ADDR to the address it prints")
	}
	return a
}

// ownRedis starts a Redis server of the test's own with scripts/redis.sh
// (one the test may stop) and returns its address and the function that
// stops it (also called at the end of the test).
func ownRedis(t *testing.T) (addr string, stop func()) {
	t.Helper()
	redisAddr(t) // Redis must be there in CI: the script installs it otherwise
	dir := t.TempDir()
	cmd := exec.Command("../../scripts/redis.sh", "start", "-dir", dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/redis.sh start: %v\n%s", err, stderr.Bytes())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	addr = lines[len(lines)-1]
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		if out, err := exec.Command("../../scripts/redis.sh", "stop", "-dir", dir).CombinedOutput(); err != nil {
			t.Errorf("scripts/redis.sh stop: %v\n%s", err, out)
		}
	}
	t.Cleanup(stop)
	return addr, stop
}

// TestRedisScriptTakenPort: scripts/redis.sh start, handed a port another
// process holds (REDIS_SH_FIRST_PORT), says so and starts on another port,
// and stop stops that server (its process gone, its port closed).
func TestRedisScriptTakenPort(t *testing.T) {
	redisAddr(t) // Redis must be there in CI: the script installs it otherwise
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().String()
	dir := t.TempDir()
	cmd := exec.Command("../../scripts/redis.sh", "start", "-dir", dir)
	cmd.Env = append(os.Environ(), "REDIS_SH_FIRST_PORT="+taken[strings.LastIndexByte(taken, ':')+1:])
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/redis.sh start: %v\n%s", err, stderr.Bytes())
	}
	stopped := false
	stop := func() {
		stopped = true
		if out, err := exec.Command("../../scripts/redis.sh", "stop", "-dir", dir).CombinedOutput(); err != nil {
			t.Errorf("scripts/redis.sh stop: %v\n%s", err, out)
		}
	}
	defer func() {
		if !stopped {
			stop()
		}
	}()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	addr := lines[len(lines)-1]
	if addr == taken || !strings.Contains(stderr.String(), "was taken at the server's start: trying another") {
		t.Fatalf("start with %s taken: address %q, stderr %q; want another address and the retry said", taken, addr, stderr.String())
	}
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatalf("the server at %s: %v", addr, err)
	}
	c.Close()
	pid := redisPID(t, dir)
	stop()
	redisGone(t, pid, addr)
}

// redisPID returns the PID scripts/redis.sh recorded in dir.
func redisPID(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		t.Fatalf("%s/pid holds %q: %v", dir, b, err)
	}
	return pid
}

// redisGone fails the test unless the server of pid, at addr, is gone:
// no such process (a zombie counts as gone: the script's server is not
// the test's child) and nothing answering at addr.
func redisGone(t *testing.T, pid int, addr string) {
	t.Helper()
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && !bytes.Contains(b, []byte(") Z ")) {
		t.Errorf("redis-server PID %d still runs after scripts/redis.sh stop: %s", pid, b)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Errorf("something still answers at %s after scripts/redis.sh stop", addr)
	}
}

// TestRedisScriptRestart: scripts/redis.sh start after a stop of the same
// directory starts the server on the port of the one before, so that a run
// whose lookup is bound to that address finds it again (docs/operations.md,
// "Lookups"): a new server, the one before gone at the stop.
func TestRedisScriptRestart(t *testing.T) {
	redisAddr(t) // Redis must be there in CI: the script installs it otherwise
	dir := t.TempDir()
	script := func(cmd string) string {
		t.Helper()
		var stderr bytes.Buffer
		c := exec.Command("../../scripts/redis.sh", cmd, "-dir", dir)
		c.Stderr = &stderr
		out, err := c.Output()
		if err != nil {
			t.Fatalf("scripts/redis.sh %s: %v\n%s", cmd, err, stderr.Bytes())
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return lines[len(lines)-1]
	}
	first := script("start")
	firstPID := redisPID(t, dir)
	script("stop")
	redisGone(t, firstPID, first)
	second := script("start")
	defer script("stop")
	if second != first {
		t.Fatalf("start after stop: %s, want the address before, %s", second, first)
	}
	if pid := redisPID(t, dir); pid == firstPID {
		t.Errorf("start after stop: PID %d, the stopped server's: no new server was started", pid)
	}
	c, err := net.DialTimeout("tcp", second, 2*time.Second)
	if err != nil {
		t.Fatalf("the server at %s: %v", second, err)
	}
	c.Close()
}

// TestRedisScriptRelativeDir: scripts/redis.sh start and stop with a
// relative -dir (and $CEPHEUS_REDIS_DIR) work: the server, which changes
// into the directory before it opens its log, was handed a log path
// relative to it, and exited at every start.
func TestRedisScriptRelativeDir(t *testing.T) {
	redisAddr(t) // Redis must be there in CI: the script installs it otherwise
	script, err := filepath.Abs("../../scripts/redis.sh")
	if err != nil {
		t.Fatal(err)
	}
	cwd := t.TempDir()
	run := func(t *testing.T, env, cmd string, args ...string) string {
		t.Helper()
		var stderr bytes.Buffer
		c := exec.Command(script, append([]string{cmd}, args...)...)
		c.Dir, c.Stderr = cwd, &stderr
		c.Env = append(os.Environ(), "CEPHEUS_REDIS_DIR="+env)
		out, err := c.Output()
		if err != nil {
			t.Fatalf("scripts/redis.sh %s %q (in %s, CEPHEUS_REDIS_DIR=%s): %v\n%s", cmd, args, cwd, env, err, stderr.Bytes())
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return lines[len(lines)-1]
	}
	for _, tc := range []struct{ name, env, dir string }{{"-dir", "", "rel/redis"}, {"CEPHEUS_REDIS_DIR", "env-redis", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			var args []string
			if tc.dir != "" {
				args = []string{"-dir", tc.dir}
			}
			addr := run(t, tc.env, "start", args...)
			c, err := net.DialTimeout("tcp", addr, 2*time.Second)
			if err != nil {
				run(t, tc.env, "stop", args...)
				t.Fatalf("the server at %s: %v", addr, err)
			}
			c.Close()
			dir := filepath.Join(cwd, cmp.Or(tc.dir, tc.env))
			if _, err := os.Stat(filepath.Join(dir, "pid")); err != nil {
				t.Errorf("the PID file under the relative directory: %v", err)
			}
			run(t, tc.env, "stop", args...)
			if _, err := os.Stat(filepath.Join(dir, "last-address")); err != nil {
				t.Errorf("stop kept no address: %v", err)
			}
		})
	}
}

// lookupData generates a day of card events with the profiles of their
// customers: events, profiles (customer.jsonl) and the number of lines.
func lookupData(t *testing.T, dir string) (events, profiles string, lines int) {
	t.Helper()
	events = filepath.Join(dir, "events.jsonl")
	code, _, stderr := cepheus(t, "gen", "-o", events, "-profiles", filepath.Join(dir, "profiles"), "-seed", "5",
		"-customers", "2000", "-merchants", "500", "-history-days", "0", "-days", "1", "-events-per-day", "60000",
		"-scenarios", "impossible_travel,large_then_foreign,auth_not_captured,refund_abuse")
	if code != 0 {
		t.Fatalf("gen: exit %d\n%s", code, stderr)
	}
	b, err := os.ReadFile(events)
	if err != nil {
		t.Fatal(err)
	}
	return events, filepath.Join(dir, "profiles", "customer.jsonl"), strings.Count(string(b), "\n")
}

// lookupAlerts counts the alerts of rule in an alerts file.
func lookupAlerts(t *testing.T, path, rule string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), `"rule":"`+rule+`"`)
}

// TestLookupRedisEqualsFile: the same backtest of rulesets/cards.cep with
// the customer lookup read from the lookup file and from Redis (filled by
// cepheus enrich load, as hashes and as JSON strings) gives byte-identical
// alerts, and the rule that reads the lookup fires.
func TestLookupRedisEqualsFile(t *testing.T) {
	addr := redisAddr(t)
	dir := t.TempDir()
	events, profiles, _ := lookupData(t, dir)
	const rules = "../../rulesets/cards.cep"
	backtest := func(name, lookup string) (string, string) {
		t.Helper()
		out := filepath.Join(dir, name+".jsonl")
		code, _, stderr := cepheus(t, "backtest", "-rules", rules, "-events", events, "-alerts", out, "-lookup", lookup)
		if code != 0 {
			t.Fatalf("backtest -lookup %s: exit %d\n%s", lookup, code, stderr)
		}
		return out, stderr
	}
	fileAlerts, stderr := backtest("file", "customer=file:"+profiles)
	if n := lookupAlerts(t, fileAlerts, "away_from_home"); n < 5 {
		t.Fatalf("the backtest with the lookup file has %d away_from_home alerts, want at least 5", n)
	}
	if !regexp.MustCompile(`lookup customer: [0-9,]+ key lookups \(one per key of a batch of events\), [0-9.]+% from the cache`).MatchString(stderr) {
		t.Errorf("the summary does not tell the lookup's figures:\n%s", stderr)
	}
	prefix := "test:" + t.Name() + ":" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
	for _, format := range []string{"hash", "json"} {
		url := fmt.Sprintf("redis://%s?format=%s&prefix=%s%s:", addr, format, prefix, format)
		code, _, stderr := cepheus(t, "enrich", "load", "-redis", url, "-rules", rules, "-lookup", "customer", "-file", profiles)
		if code != 0 || !strings.Contains(stderr, "2,000 records") {
			t.Fatalf("enrich load %s: exit %d\n%s", format, code, stderr)
		}
		redisAlerts, _ := backtest(format, "customer="+url)
		want, _ := os.ReadFile(fileAlerts)
		got, _ := os.ReadFile(redisAlerts)
		if string(got) != string(want) {
			t.Errorf("format %s: the alerts with Redis differ from those with the lookup file (%d and %d bytes)", format, len(got), len(want))
		}
	}
	// Unbound: a warning, the defaults, and the rule quiet.
	out := filepath.Join(dir, "unbound.jsonl")
	code, _, stderr := cepheus(t, "backtest", "-rules", rules, "-events", events, "-alerts", out)
	if code != 0 || !strings.Contains(stderr, "warning: lookup customer is not bound") {
		t.Fatalf("unbound: exit %d\n%s", code, stderr)
	}
	if n := lookupAlerts(t, out, "away_from_home"); n != 0 {
		t.Errorf("unbound: %d away_from_home alerts, want none", n)
	}
	// The warning names the rules it quiets; with -rule leaving them out,
	// there is none (the analyst trial's -rule card_testing warned).
	if !strings.Contains(stderr, "every event gets its defaults (read by away_from_home)") {
		t.Errorf("unbound: the warning does not name the rule reading the lookup\n%s", stderr)
	}
	if code, _, stderr = cepheus(t, "backtest", "-rules", rules, "-events", events, "-alerts", out, "-rule", "card_testing"); code != 0 || strings.Contains(stderr, "is not bound") {
		t.Errorf("unbound, -rule card_testing (no lookup read): exit %d, want 0 and no warning\n%s", code, stderr)
	}
	code, _, stderr = cepheus(t, "backtest", "-rules", rules, "-events", events, "-alerts", out, "-lookup", "merchant=file:"+profiles)
	if code != 2 || !strings.Contains(stderr, "-lookup merchant: no such lookup (the lookups declared: customer)") {
		t.Errorf("an undeclared lookup: exit %d\n%s", code, stderr)
	}
	code, _, stderr = cepheus(t, "backtest", "-rules", rules, "-events", events, "-alerts", out, "-lookup", "custmer=file:"+profiles)
	if code != 2 || !strings.Contains(stderr, "-lookup custmer: no such lookup (did you mean customer?)") {
		t.Errorf("a misspelt lookup: exit %d\n%s", code, stderr)
	}
}

// TestLookupRedisDown: a live run reads its events from stdin while its
// Redis server is stopped halfway. With the lookup failing open, every
// event still goes through (the defaults for those whose key was not in
// the cache), the rules that do not read the lookup raise exactly the
// backtest's alerts, the lookup rule a subset of them, and the summary
// counts the failures and says why; failing closed, the events whose
// lookup failed are dead letters with their line and the reason, and
// nothing else is lost.
func TestLookupRedisDown(t *testing.T) {
	bin := buildCepheus(t)
	dir := t.TempDir()
	events, profiles, lines := lookupData(t, dir)
	b, err := os.ReadFile("../../rulesets/cards.cep")
	if err != nil {
		t.Fatal(err)
	}
	closedRules := writeFile(t, dir, "closed.cep", strings.Replace(string(b), "on failure open", "on failure closed", 1))
	for _, policy := range []string{"open", "closed"} {
		t.Run(policy, func(t *testing.T) {
			rules := "../../rulesets/cards.cep"
			if policy == "closed" {
				rules = closedRules
			}
			ref := filepath.Join(dir, policy+"-backtest.jsonl")
			if code, _, stderr := cepheus(t, "backtest", "-q", "-rules", rules, "-events", events, "-alerts", ref,
				"-lookup", "customer=file:"+profiles); code != 0 {
				t.Fatalf("backtest: exit %d\n%s", code, stderr)
			}
			addr, stopRedis := ownRedis(t)
			if code, _, stderr := cepheus(t, "enrich", "load", "-redis", addr, "-rules", rules, "-lookup", "customer", "-file", profiles); code != 0 {
				t.Fatalf("enrich load: exit %d\n%s", code, stderr)
			}
			d := newCrashDirs(filepath.Join(dir, policy))
			cmd := exec.Command(bin, "run", "-rules", rules, "-events", "-", "-state", d.state, "-alerts", d.alerts,
				"-dead-letter", d.dead, "-checkpoint-interval", "100ms", "-progress", "50ms",
				"-lookup", "customer=redis://"+addr, "-lookup-timeout", "100ms", "-lookup-cache", "2000")
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stderr := &syncBuffer{}
			cmd.Stderr = stderr
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(events)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			in := bufio.NewReader(f)
			half := lines / 2
			for range half {
				l, err := in.ReadBytes('\n')
				if err != nil {
					t.Fatal(err)
				}
				if _, err := stdin.Write(l); err != nil {
					t.Fatalf("writing to the run: %v\n%s", err, stderr.String())
				}
			}
			// The first half read (a progress line counts it), Redis
			// goes away, and the second half follows.
			progress := regexp.MustCompile(`([0-9,]+) records`)
			deadline := time.Now().Add(30 * time.Second)
			for {
				seen := 0
				for _, m := range progress.FindAllStringSubmatch(stderr.String(), -1) {
					n, _ := strconv.Atoi(strings.ReplaceAll(m[1], ",", ""))
					seen = max(seen, n)
				}
				if seen >= half {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the run did not read the first %d lines in 30 s\n%s", half, stderr.String())
				}
				time.Sleep(20 * time.Millisecond)
			}
			stopRedis()
			if _, err := io.Copy(stdin, in); err != nil {
				t.Fatalf("writing to the run: %v", err)
			}
			stdin.Close()
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("run: %v\n%s", err, stderr.String())
				}
			case <-time.After(60 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatalf("run: not done 60 s after its input ended\n%s", stderr.String())
			}
			out := stderr.String()
			// "1 timeout", "1 event", "1 dead letter" too (CI met one
			// timeout; the regexp wanted "timeouts").
			m := regexp.MustCompile(`run: lookup customer: .* ([0-9,]+) failed \(([0-9,]+) timeouts?\): their events: ([0-9,]+) got the defaults, ([0-9,]+) went to the dead letters`).FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("no lookup summary:\n%s", out)
			}
			atoi := func(s string) int { n, _ := strconv.Atoi(strings.ReplaceAll(s, ",", "")); return n }
			failed, defaulted, rejected := atoi(m[1]), atoi(m[3]), atoi(m[4])
			if failed == 0 {
				t.Errorf("no request failed after Redis stopped:\n%s", out)
			}
			// It says why (a refused connection, a reset, a timeout).
			if why := regexp.MustCompile(`run: lookup customer: .* went to the dead letters; last error: (.+)`).FindStringSubmatch(out); why == nil {
				t.Errorf("the lookup summary does not say why its requests failed:\n%s", out)
			} else {
				t.Logf("the last error: %s", why[1])
			}
			// The log says once that the lookup fails, and what its events
			// get (a reminder would come only a minute on).
			if n := len(regexp.MustCompile(`run: warning: lookup customer: its source redis://`+regexp.QuoteMeta(addr)+`\S* fails: .*; on failure `+policy).FindAllString(out, -1)); n != 1 {
				t.Errorf("%d warnings that the lookup fails, want 1:\n%s", n, out)
			}
			if n := strings.Count(out, "lookup customer: its source"); n != 1 {
				t.Errorf("%d lines of the lookup's source, want the warning alone:\n%s", n, out)
			}
			got, others := d.committed(t, []string{"stdin"})
			if len(others) > 0 {
				t.Errorf("uncommitted files left: %v", others)
			}
			want := backtestOutputs(t, ref, filepath.Join(dir, "none"), filepath.Join(dir, "none"))
			// The records: every line an event or a dead letter.
			sm := regexp.MustCompile(`run: ruleset cards: ([0-9,]+) records?, ([0-9,]+) events?, [0-9,]+ alerts?, [0-9,]+ late, ([0-9,]+) dead letters?`).FindStringSubmatch(out)
			if sm == nil || atoi(sm[1]) != lines || atoi(sm[2])+atoi(sm[3]) != lines {
				t.Fatalf("run summary %q: want %d records, each an event or a dead letter", sm, lines)
			}
			switch policy {
			case "open":
				if defaulted == 0 || rejected != 0 || atoi(sm[3]) != 0 {
					t.Errorf("fail open: %d events with the defaults, %d rejected, %s dead letters; want some, none, none", defaulted, rejected, sm[3])
				}
				// The alerts of the rules that do not read the lookup are
				// the backtest's (the same ids: an id leaves the lookup's
				// fields out, though the matched events show them), and
				// the lookup rule's a subset.
				ids := func(alerts multiset) map[string]int {
					out := map[string]int{}
					for line, n := range alerts {
						m := regexp.MustCompile(`"alert_id":"([0-9a-f]+)","rule":"([a-z_]+)"`).FindStringSubmatch(line)
						if m == nil {
							t.Fatalf("no alert id and rule: %s", shorten(line))
						}
						out[m[2]+" "+m[1]] += n
					}
					return out
				}
				gotIDs, wantIDs := ids(got.alerts), ids(want.alerts)
				for id, n := range gotIDs {
					if wantIDs[id] != n {
						t.Errorf("alert %s: %d in the run, %d in the backtest", id, n, wantIDs[id])
					}
				}
				missing := 0
				for id, n := range wantIDs {
					if gotIDs[id] != n {
						if !strings.HasPrefix(id, "away_from_home ") {
							t.Errorf("alert %s of the backtest is missing", id)
						}
						missing++
					}
				}
				t.Logf("fail open: %d requests failed, %d events with the defaults, %d away_from_home alerts of the backtest missing", failed, defaulted, missing)
			case "closed":
				if rejected == 0 || atoi(sm[3]) != rejected {
					t.Errorf("fail closed: %d rejected, %s dead letters; want as many, and some", rejected, sm[3])
				}
				n := 0
				for l := range got.dead {
					if !strings.Contains(l, `reason "lookup customer: `) || !strings.HasPrefix(l, "line ") {
						t.Errorf("dead letter without its line or the lookup's reason: %s", shorten(l))
					}
					n++
				}
				if n == 0 {
					t.Errorf("fail closed: no dead letter committed")
				}
				t.Logf("fail closed: %d requests failed, %d events dead-lettered", failed, rejected)
			}
		})
	}
}

// TestLookupCrashInFlight: a run whose lookups read Redis is killed while
// a request is in flight (failpoint lookup.in-flight), then restarted: its
// committed outputs are the uninterrupted backtest's with the lookup
// file, each once.
func TestLookupCrashInFlight(t *testing.T) {
	addr := redisAddr(t)
	bin := buildCepheus(t)
	dir := t.TempDir()
	events, profiles, _ := lookupData(t, dir)
	const rules = "../../rulesets/cards.cep"
	ref := filepath.Join(dir, "backtest.jsonl")
	if code, _, stderr := cepheus(t, "backtest", "-q", "-rules", rules, "-events", events, "-alerts", ref,
		"-lookup", "customer=file:"+profiles); code != 0 {
		t.Fatalf("backtest: exit %d\n%s", code, stderr)
	}
	url := "redis://" + addr + "?prefix=test:" + t.Name() + ":" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
	if code, _, stderr := cepheus(t, "enrich", "load", "-redis", url, "-rules", rules, "-lookup", "customer", "-file", profiles); code != 0 {
		t.Fatalf("enrich load: exit %d\n%s", code, stderr)
	}
	want := backtestOutputs(t, ref, filepath.Join(dir, "none"), filepath.Join(dir, "none"))
	d := newCrashDirs(filepath.Join(dir, "run"))
	args := []string{"run", "-rules", rules, "-events", events, "-state", d.state, "-alerts", d.alerts, "-dead-letter", d.dead,
		"-checkpoint-records", "5000", "-checkpoint-interval", "1h", "-parallelism", "2",
		"-lookup", "customer=" + url, "-lookup-cache", "500"}
	for i, point := range []string{"lookup.in-flight@40", "lookup.in-flight@15", ""} {
		e := runChild(t, bin, args, point, 0)
		switch {
		case point != "" && !e.killed:
			t.Fatalf("run %d (%s): not killed: %s\n%s", i, point, e.describe(), e.tail())
		case point == "" && (e.killed || e.code != 0):
			t.Fatalf("the final run: %s\n%s", e.describe(), e.tail())
		}
	}
	got, others := d.committed(t, []string{filepath.Base(events)})
	if len(others) > 0 {
		t.Errorf("uncommitted files left: %v", others)
	}
	if diff := want.diff(got); diff != "" {
		t.Errorf("the committed outputs after two kills in flight differ from the backtest's: %s", diff)
	}
	if n := lookupAlerts(t, ref, "away_from_home"); n == 0 {
		t.Errorf("no away_from_home alert: the lookup played no part")
	}
}

// TestLookupErrorsNameOnce: a lookup file that does not read fails
// backtest, run and enrich load with its path and line, the lookup named
// once; a Redis that does not answer is named once in the warning.
func TestLookupErrorsNameOnce(t *testing.T) {
	dir := t.TempDir()
	events := writeFile(t, dir, "e.jsonl", abEvents(10, 0, ""))
	bad := writeFile(t, dir, "customer.jsonl", `{"customer_id":"c1","home_country":"FR"}`+"\nnot json\n")
	const rules = "../../rulesets/cards.cep"
	want := "lookup customer: " + bad + ":2: not a JSON object: not json\n"
	for _, args := range [][]string{
		{"backtest", "-rules", rules, "-events", events, "-alerts", os.DevNull, "-lookup", "customer=file:" + bad},
		{"run", "-rules", rules, "-events", events, "-state", filepath.Join(dir, "state"), "-alerts", filepath.Join(dir, "alerts"), "-lookup", "customer=file:" + bad},
		{"enrich", "load", "-redis", "127.0.0.1:1", "-rules", rules, "-lookup", "customer", "-file", bad},
	} {
		code, _, stderr := cepheus(t, args...)
		if code != 1 || !strings.HasSuffix(stderr, want) || strings.Count(stderr, "lookup customer") != 1 || strings.Contains(stderr, "enrich:") {
			t.Errorf("%s with a bad lookup file: exit %d, stderr %q; want 1 ending in %q", args[0], code, stderr, want)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	code, _, stderr := cepheus(t, "backtest", "-q", "-rules", rules, "-events", events, "-alerts", os.DevNull, "-lookup", "customer=redis://"+addr)
	if code != 0 || !strings.Contains(stderr, "does not answer (dial tcp "+addr+": connect: connection refused): its 'on failure' policy applies") ||
		strings.Count(stderr, addr) != 2 || strings.Contains(stderr, "enrich:") {
		t.Errorf("backtest with a Redis that does not answer: exit %d, stderr %q; want 0, the source named once, then the dial's error", code, stderr)
	}
	// A server that takes the connection and never answers (paused, busy
	// in a script) is told by the time it was given.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			go io.Copy(io.Discard, c)
		}
	}()
	code, _, stderr = cepheus(t, "backtest", "-q", "-rules", rules, "-events", events, "-alerts", os.DevNull,
		"-lookup", "customer=redis://"+silent.Addr().String(), "-lookup-timeout", "50ms")
	if code != 0 || !strings.Contains(stderr, "does not answer (no answer within 2s): its 'on failure' policy applies") {
		t.Errorf("backtest with a Redis that never answers: exit %d, stderr %q; want 0, \"does not answer (no answer within 2s)\"", code, stderr)
	}
}

// TestLookupFileDuplicatesWarned: backtest and run warn once of a lookup
// file whose lines repeat keys, naming the first such line and saying that
// the last record of each key is used; a backtest of two rulesets binding
// the same file warns once too. A file without duplicates gets no warning.
func TestLookupFileDuplicatesWarned(t *testing.T) {
	dir := t.TempDir()
	events := writeFile(t, dir, "e.jsonl", abEvents(10, 0, ""))
	prof := writeFile(t, dir, "customer.jsonl", `{"customer_id":"c1","home_country":"FR"}
{"customer_id":"c2","home_country":"DE"}
{"customer_id":"c1","home_country":"IT"}
{"customer_id":"c2","home_country":"ES"}
{"customer_id":"c1","home_country":"PT"}
`)
	clean := writeFile(t, dir, "clean.jsonl", `{"customer_id":"c1","home_country":"FR"}`+"\n")
	src, err := os.ReadFile("../../rulesets/cards.cep")
	if err != nil {
		t.Fatal(err)
	}
	two := filepath.Join(dir, "two")
	if err := os.Mkdir(two, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, two, "a.cep", string(src))
	writeFile(t, two, "b.cep", strings.Replace(string(src), "ruleset cards", "ruleset cards_b", 1))
	const rules = "../../rulesets/cards.cep"
	want := "warning: lookup customer: " + prof + ": 3 lines repeating the key of an earlier line (the first: " + prof +
		`:3, key "c1"); the last record of each key is used` + "\n"
	for _, args := range [][]string{
		{"backtest", "-rules", rules, "-events", events, "-alerts", os.DevNull, "-lookup", "customer=file:" + prof},
		{"backtest", "-rules", two, "-events", events, "-alerts", filepath.Join(dir, "alerts2"), "-lookup", "customer=file:" + prof},
		{"run", "-rules", rules, "-events", events, "-state", filepath.Join(dir, "state"), "-alerts", filepath.Join(dir, "alerts"), "-lookup", "customer=file:" + prof},
	} {
		code, _, stderr := cepheus(t, args...)
		if code != 0 || strings.Count(stderr, want) != 1 || strings.Count(stderr, "repeating the key") != 1 {
			t.Errorf("%s -rules %s with duplicate keys: exit %d, stderr:\n%s\nwant 0 and one warning %q", args[0], args[2], code, stderr, want)
		}
	}
	code, _, stderr := cepheus(t, "backtest", "-rules", rules, "-events", events, "-alerts", os.DevNull, "-lookup", "customer=file:"+clean)
	if code != 0 || strings.Contains(stderr, "repeating the key") {
		t.Errorf("backtest with a lookup file without duplicates: exit %d, stderr:\n%s", code, stderr)
	}
}

// TestLookupFileFieldsMissing: a lookup file none of whose records gives
// a field of the lookup (a member named otherwise: homeCountry) is
// warned of, with the close member of its lines; every event got the
// field's default and the rules reading it went quiet, silently.
func TestLookupFileFieldsMissing(t *testing.T) {
	dir := t.TempDir()
	events := writeFile(t, dir, "e.jsonl", abEvents(10, 0, ""))
	prof := writeFile(t, dir, "customer.jsonl", `{"customer_id":"c1","homeCountry":"FR","risk_tier":"low","tenure_days":3}
{"customer_id":"c2","homeCountry":"DE","risk_tier":"high","tenure_days":null}
`)
	code, _, stderr := cepheus(t, "backtest", "-rules", "../../rulesets/cards.cep", "-events", events, "-alerts", os.DevNull, "-lookup", "customer=file:"+prof)
	want := "warning: lookup customer: no record of " + prof + " gives home_country: every event gets the default (its lines have homeCountry: is that home_country?)\n"
	if code != 0 || strings.Count(stderr, want) != 1 {
		t.Errorf("a lookup file without home_country: exit %d, stderr:\n%s\nwant 0 and one warning %q", code, stderr, want)
	}
}

// TestLookupClosedDownNamesTheLookup: a backtest whose events all go to
// the dead letters because a lookup failing closed cannot reach its
// source says so, not that the lines could not be decoded, and points at
// the source rather than the schema.
func TestLookupClosedDownNamesTheLookup(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	for i := range 10 {
		fmt.Fprintf(&b, `{"ts":%d,"type":"auth","customer_id":"c%d","card_id":"k1","merchant_id":"m1","amount":1}`+"\n", 1767225600000+i*1000, i)
	}
	events := writeFile(t, dir, "e.jsonl", b.String())
	src, err := os.ReadFile("../../rulesets/cards.cep")
	if err != nil {
		t.Fatal(err)
	}
	rules := writeFile(t, dir, "closed.cep", strings.Replace(string(src), "on failure open", "on failure closed", 1))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	code, _, stderr := cepheus(t, "backtest", "-rules", rules, "-events", events, "-alerts", os.DevNull, "-lookup", "customer=redis://"+addr)
	if code != 1 || strings.Contains(stderr, "could not be decoded") || strings.Contains(stderr, "-time-unit") ||
		!strings.Contains(stderr, "10 lines went to the dead letters (first: line 1: lookup customer: ") ||
		!strings.Contains(stderr, "10 of 10 lines went to the dead letters") ||
		!strings.Contains(stderr, "10 events went there because a lookup failing closed (on failure closed) could not read its source") {
		t.Errorf("backtest with a lookup failing closed on a Redis that does not answer: exit %d, stderr:\n%s", code, stderr)
	}

	// Over more lines than a backtest reads without an event reaching the
	// rules, it stops there and says why: the lookup, not the decoding.
	b.Reset()
	for i := range 2 * giveUpAfter {
		fmt.Fprintf(&b, `{"ts":%d,"type":"auth","customer_id":"c%d","card_id":"k1","merchant_id":"m1","amount":1}`+"\n", 1767225600000+i*1000, i)
	}
	events = writeFile(t, dir, "long.jsonl", b.String())
	code, _, stderr = cepheus(t, "backtest", "-rules", rules, "-events", events, "-alerts", os.DevNull, "-lookup", "customer=redis://"+addr)
	gaveUp := regexp.MustCompile(`backtest: ruleset cards: none of the first [0-9,]+ lines reached the rules, so the run stopped there \(line 1: lookup customer: `)
	if code != 1 || strings.Contains(stderr, "could be decoded") || !gaveUp.MatchString(stderr) ||
		!strings.Contains(stderr, "because a lookup failing closed (on failure closed) could not read its source") {
		t.Errorf("backtest of %d lines with a lookup failing closed on a Redis that does not answer: exit %d, stderr:\n%s", 2*giveUpAfter, code, stderr)
	}
}

// TestCommandLinePasswordWarned: a Redis URL with a password given on the
// command line (-lookup, enrich's -redis), where every user of the machine
// can read it, is warned of, the password hidden; the same URL from
// serve's environment or config file is not; nor is a -redis-password-file
// of mode 0600, unlike one others may read. Nothing warned of either
// before.
func TestCommandLinePasswordWarned(t *testing.T) {
	dir := t.TempDir()
	events := writeFile(t, dir, "e.jsonl", `{"ts":1767225600000,"type":"auth","customer_id":"c1","card_id":"k1","merchant_id":"m1","amount":1}`+"\n")
	profiles := writeFile(t, dir, "p.jsonl", `{"customer_id":"c1","home_country":"FR"}`+"\n")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String() // no server there: the commands fail or warn after the warning
	ln.Close()
	url := "redis://analyst:S3cret@" + addr
	warning := func(cmd, flag string) string {
		return cmd + ": warning: " + flag + "redis://analyst:***@" + addr + ": a password on the command line is visible to every user of this machine (ps): give it with -redis-password-file or $CEPHEUS_REDIS_PASSWORD\n"
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"backtest", "-rules", "../../rulesets/cards.cep", "-events", events, "-alerts", os.DevNull, "-lookup", "customer=" + url}, warning("backtest", "-lookup customer=")},
		{[]string{"enrich", "load", "-redis", url, "-rules", "../../rulesets/cards.cep", "-lookup", "customer", "-file", profiles}, warning("enrich", "-redis ")},
		{[]string{"serve", "-rules", "../../rulesets/cards.cep", "-lookup", "customer=" + url, "-print-config"}, warning("serve", "-lookup customer=")},
		{[]string{"run", "-rules", "../../rulesets/cards.cep", "-events", events, "-state", filepath.Join(dir, "state"), "-alerts", filepath.Join(dir, "alerts"), "-lookup", "customer=" + url},
			warning("run", "-lookup customer=")},
	} {
		_, _, stderr := cepheus(t, c.args...)
		if !strings.Contains(stderr, c.want) || strings.Contains(stderr, "S3cret") {
			t.Errorf("cepheus %s: stderr lacks %q, or holds the password:\n%s", c.args[0], c.want, stderr)
		}
	}
	// A password file others may read is warned of; one of mode 0600 not.
	pwFile := writeFile(t, dir, "redis-password", "S3cret\n")
	for _, mode := range []os.FileMode{0o644, 0o600} {
		if err := os.Chmod(pwFile, mode); err != nil {
			t.Fatal(err)
		}
		_, _, stderr := cepheus(t, "backtest", "-rules", "../../rulesets/cards.cep", "-events", events, "-alerts", os.DevNull,
			"-lookup", "customer=redis://"+addr, "-redis-password-file", pwFile)
		want := "backtest: warning: -redis-password-file " + pwFile + ": others may read it (mode 0644): chmod 600 " + pwFile + "\n"
		if got := strings.Contains(stderr, want); got != (mode == 0o644) || strings.Contains(stderr, "S3cret") {
			t.Errorf("-redis-password-file of mode %04o: warned %v, want %v (%q), and no password:\n%s", mode, got, mode == 0o644, want, stderr)
		}
	}
	t.Setenv("CEPHEUS_LOOKUP", "customer="+url)
	code, _, stderr := cepheus(t, "serve", "-rules", "../../rulesets/cards.cep", "-print-config")
	if code != 0 || strings.Contains(stderr, "warning") {
		t.Errorf("serve -print-config with $CEPHEUS_LOOKUP: exit %d, want 0 without a warning:\n%s", code, stderr)
	}
}

// TestBacktestLookupLastError: the summary of a backtest whose lookup
// fails open says why its requests failed, besides how many: the
// connection refused by a Redis that is not there (without the password
// of its URL), and, with a Redis (CEPHEUS_REDIS_ADDR), the WRONGTYPE of
// records written as JSON strings read as hashes, a server that answers
// the start-up ping but no record: each key fails alone, counted as a
// record that did not read.
func TestBacktestLookupLastError(t *testing.T) {
	dir := t.TempDir()
	var b, profiles strings.Builder
	for i := range 10 {
		fmt.Fprintf(&b, `{"ts":%d,"type":"auth","customer_id":"c%d","card_id":"k1","merchant_id":"m1","amount":1}`+"\n", 1767225600000+i*1000, i)
		fmt.Fprintf(&profiles, `{"customer_id":"c%d","home_country":"FR"}`+"\n", i)
	}
	events := writeFile(t, dir, "e.jsonl", b.String())
	const rules = "../../rulesets/cards.cep"
	// summary returns the lookup's line of the summary of a backtest
	// (exit 0) with -lookup customer=target.
	summary := func(target string) string {
		t.Helper()
		code, _, stderr := cepheus(t, "backtest", "-rules", rules, "-events", events, "-alerts", os.DevNull, "-lookup", "customer="+target)
		line := regexp.MustCompile(`(?m)^  lookup customer: .*$`).FindString(stderr)
		if code != 0 || line == "" {
			t.Fatalf("backtest -lookup customer=%s: exit %d, no lookup line in the summary:\n%s", target, code, stderr)
		}
		if strings.Contains(stderr, "s3cret-pw") {
			t.Errorf("the backtest prints the Redis password:\n%s", stderr)
		}
		return line
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	want := "; 1 request failed (0 timeouts): 10 events got the defaults, 0 went to the dead letters; last error: dial tcp " + addr + ": connect: connection refused"
	if line := summary("redis://cep:s3cret-pw@" + addr); !strings.HasSuffix(line, want) {
		t.Errorf("a Redis that is not there: the summary's lookup line\n %s\nwant it to end\n %s", line, want)
	}

	addr = redisAddr(t)
	prefix := "test:" + t.Name() + ":" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
	file := writeFile(t, dir, "customer.jsonl", profiles.String())
	url := fmt.Sprintf("redis://%s?prefix=%s", addr, prefix)
	if code, _, stderr := cepheus(t, "enrich", "load", "-redis", url+"&format=json", "-rules", rules, "-lookup", "customer", "-file", file); code != 0 {
		t.Fatalf("enrich load: exit %d\n%s", code, stderr)
	}
	line := summary(url)
	want = "WRONGTYPE Operation against a key holding the wrong kind of value (not a hash: records written as JSON strings are read with ?format=json)"
	// Each key fails alone (the request is answered): ten records that
	// did not read, the request no failure.
	if !regexp.MustCompile(`: 10 key lookups \(one per key of a batch of events\), 0\.0% from the cache; 10 looked up at the source in 1 request \(0 without a record\); 10 records did not read: ` +
		`10 events got the defaults, 0 went to the dead letters; last error: key ` +
		regexp.QuoteMeta(prefix) + `c[0-9]: ` + regexp.QuoteMeta(want) + ` \(and 9 more records of its request that do not read\)$`).MatchString(line) {
		t.Errorf("JSON strings read as hashes: the summary's lookup line\n %s\nwant it to end with ten records that did not read and the last error, key %sc...: %s (and 9 more ...)", line, prefix, want)
	}
}

// TestLookupTruncatedGzip: a lookup file cut short in a compressed block
// fails backtest and enrich load as a truncated file, said once, not as a
// bad line.
func TestLookupTruncatedGzip(t *testing.T) {
	dir := t.TempDir()
	events := writeFile(t, dir, "e.jsonl", abEvents(10, 0, ""))
	var plain bytes.Buffer
	for i := range 2000 {
		fmt.Fprintf(&plain, `{"customer_id":"c%d","home_country":"FR"}`+"\n", i)
	}
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	zw.Write(plain.Bytes())
	zw.Close()
	prof := writeFile(t, dir, "customer.jsonl.gz", string(zb.Bytes()[:zb.Len()/2]))
	const rules = "../../rulesets/cards.cep"
	for _, args := range [][]string{
		{"backtest", "-rules", rules, "-events", events, "-alerts", os.DevNull, "-lookup", "customer=file:" + prof},
		{"enrich", "load", "-redis", "127.0.0.1:1", "-rules", rules, "-lookup", "customer", "-file", prof},
	} {
		code, _, stderr := cepheus(t, args...)
		if code != 1 || strings.Count(stderr, "a truncated .gz file?") != 1 || strings.Contains(stderr, "not a JSON object") {
			t.Errorf("%s with a truncated lookup file: exit %d, stderr %q; want 1 and one truncated-file hint", args[0], code, stderr)
		}
	}
}

// TestLookupGivenTwiceIsUsage: a lookup bound twice is a usage error of
// backtest and run (exit 2, a pointer to the help), before any input.
func TestLookupGivenTwiceIsUsage(t *testing.T) {
	dir := t.TempDir()
	events := writeFile(t, dir, "e.jsonl", abEvents(10, 0, ""))
	prof := writeFile(t, dir, "customer.jsonl", `{"customer_id":"c1","home_country":"FR"}`+"\n")
	const rules = "../../rulesets/cards.cep"
	for _, args := range [][]string{
		{"backtest", "-rules", rules, "-events", events, "-alerts", os.DevNull},
		{"run", "-rules", rules, "-events", events, "-state", filepath.Join(dir, "state"), "-alerts", filepath.Join(dir, "alerts")},
	} {
		args = append(args, "-lookup", "customer=file:"+prof, "-lookup", "customer=file:"+prof)
		code, _, stderr := cepheus(t, args...)
		if code != 2 || !strings.Contains(stderr, "-lookup customer is given twice") || !strings.Contains(stderr, "cepheus help "+args[0]) {
			t.Errorf("%s with -lookup customer twice: exit %d, stderr %q; want 2 and a pointer to the help", args[0], code, stderr)
		}
	}
}

// TestLookupBadSourceIsUsage: a -lookup (or enrich load -redis) whose
// Redis URL does not parse, or a file: without its path, is a usage
// error (exit 2) before anything is read, and never shows the password.
func TestLookupBadSourceIsUsage(t *testing.T) {
	dir := t.TempDir()
	events := writeFile(t, dir, "e.jsonl", abEvents(10, 0, ""))
	const rules = "../../rulesets/cards.cep"
	for _, c := range []struct{ source, want string }{
		{"redis://127.0.0.1:6379?format=xml", `-lookup customer: redis URL redis://127.0.0.1:6379?format=xml: format "xml", want hash or json`},
		{"redis://u:secretpw@127.0.0.1:6379/x", `-lookup customer: redis URL redis://u:***@127.0.0.1:6379/x: database "x" is not a number >= 0`},
		{"file:", "-lookup customer: the file's path is missing (file:PATH)"},
		{"redis:/u:secretpw@127.0.0.1:6379", "-lookup customer=***@127.0.0.1:6379: the source is file:PATH or redis://HOST:PORT"},
	} {
		code, _, stderr := cepheus(t, "backtest", "-rules", rules, "-events", events, "-alerts", os.DevNull, "-lookup", "customer="+c.source)
		if code != 2 || !strings.Contains(stderr, c.want) || strings.Contains(stderr, "secretpw") || !strings.Contains(stderr, "cepheus help backtest") {
			t.Errorf("backtest -lookup customer=%s: exit %d, stderr %q; want 2 and %q", c.source, code, stderr, c.want)
		}
	}
	code, _, stderr := cepheus(t, "enrich", "load", "-redis", "127.0.0.1:6379?format=xml", "-rules", rules, "-lookup", "customer", "-file", events)
	if code != 2 || !strings.Contains(stderr, `-redis: redis URL redis://127.0.0.1:6379?format=xml: format "xml", want hash or json`) {
		t.Errorf("enrich load -redis with a bad format: exit %d, stderr %q; want 2", code, stderr)
	}
}

// TestEnrichLoadUsage: enrich load of a lookup the ruleset does not
// declare is a usage error that names the lookups it does; -rules takes
// a directory holding one ruleset, as run's does, and names a directory
// of several.
func TestEnrichLoadUsage(t *testing.T) {
	dir := t.TempDir()
	profiles := writeFile(t, dir, "customer.jsonl", `{"customer_id":"c1","home_country":"FR"}`+"\n")
	cards := string(mustRead(t, "../../rulesets/cards.cep"))
	two, one := filepath.Join(dir, "two"), filepath.Join(dir, "one")
	for _, d := range []string{two, one} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, two, "a.cep", cards)
	writeFile(t, two, "b.cep", cards)
	writeFile(t, one, "cards.cep", cards)
	for _, c := range []struct {
		rules, lookup, want string
	}{
		{"../../rulesets/cards.cep", "custmer", "cepheus: enrich: -lookup custmer: ruleset cards has no such lookup (did you mean customer?)\nRun 'cepheus help enrich' for usage.\n"},
		{"../../rulesets/cards.cep", "merchant", "cepheus: enrich: -lookup merchant: ruleset cards has no such lookup (the lookups declared: customer)\nRun 'cepheus help enrich' for usage.\n"},
		{"../../rulesets/velocity.cep", "customer", "cepheus: enrich: -lookup customer: ruleset velocity has no such lookup (it declares no lookup)\nRun 'cepheus help enrich' for usage.\n"},
		{two, "customer", "cepheus: enrich: -rules " + two + " holds 2 rulesets; name the file\nRun 'cepheus help enrich' for usage.\n"},
	} {
		code, _, stderr := cepheus(t, "enrich", "load", "-redis", "127.0.0.1:1", "-rules", c.rules, "-lookup", c.lookup, "-file", profiles)
		if code != 2 || stderr != c.want {
			t.Errorf("enrich load -rules %s -lookup %s: exit %d, stderr %q; want 2 and %q", c.rules, c.lookup, code, stderr, c.want)
		}
	}
	code, _, stderr := cepheus(t, "enrich", "load", "-rules", "../../rulesets/cards.cep", "-lookup", "customer")
	if want := "-redis, -rules, -lookup and -file are required; missing: -redis, -file\n"; code != 2 || !strings.Contains(stderr, want) {
		t.Errorf("enrich load without -redis and -file: exit %d, stderr %q; want 2 and %q", code, stderr, want)
	}
	// A directory of one ruleset is its file: the load goes on to Redis
	// (none at that address).
	code, _, stderr = cepheus(t, "enrich", "load", "-redis", "127.0.0.1:1", "-rules", one, "-lookup", "customer", "-file", profiles)
	if code != 1 || !strings.Contains(stderr, "lookup customer: load "+profiles+" into redis://127.0.0.1:1/") {
		t.Errorf("enrich load -rules DIR: exit %d, stderr %q; want 1 failing at Redis", code, stderr)
	}
}

// TestEnrichLoadDuplicates: enrich load of a lookup file whose lines
// repeat keys reports the records written and their distinct keys, naming
// the first repeating line; a file without duplicates reports its records
// alone. With -q only the former is written, as a warning.
func TestEnrichLoadDuplicates(t *testing.T) {
	addr := redisAddr(t)
	dir := t.TempDir()
	prof := writeFile(t, dir, "customer.jsonl", `{"customer_id":"c1","home_country":"FR"}
{"customer_id":"c2","home_country":"DE"}

{"customer_id":"c1","home_country":"IT"}
{"customer_id":"c2","home_country":"ES"}
{"customer_id":"c1","home_country":"PT"}
`)
	clean := writeFile(t, dir, "clean.jsonl", `{"customer_id":"c1","home_country":"FR"}`+"\n")
	url := fmt.Sprintf("redis://%s?prefix=test:%s:%s:", addr, t.Name(), strconv.FormatInt(time.Now().UnixNano(), 36))
	load := func(file string, flags ...string) string {
		t.Helper()
		code, _, stderr := cepheus(t, append(append([]string{"enrich", "load"}, flags...), "-redis", url, "-rules", "../../rulesets/cards.cep", "-lookup", "customer", "-file", file)...)
		if code != 0 {
			t.Fatalf("enrich load %s: exit %d\n%s", file, code, stderr)
		}
		return regexp.MustCompile(` written in [0-9.]+m?s`).ReplaceAllString(stderr, " written in T")
	}
	want := "enrich: lookup customer: 5 records from " + prof + " written in T, of 2 distinct keys: 3 lines repeating the key of an earlier line (the first: " +
		prof + `:4, key "c1") replaced its record, so Redis holds the last record of each key` + "\n"
	if got := load(prof); got != want {
		t.Errorf("enrich load of a file with duplicate keys:\n got  %q\n want %q", got, want)
	}
	if got, want := load(clean), "enrich: lookup customer: 1 record from "+clean+" written in T\n"; got != want {
		t.Errorf("enrich load of a file without duplicates:\n got  %q\n want %q", got, want)
	}
	// -q: nothing, unless keys repeat: then the line, as a warning.
	if got, want := load(prof, "-q"), "enrich: warning: "+strings.TrimPrefix(want, "enrich: "); got != want {
		t.Errorf("enrich load -q of a file with duplicate keys:\n got  %q\n want %q", got, want)
	}
	if got := load(clean, "-q"); got != "" {
		t.Errorf("enrich load -q of a file without duplicates: %q, want nothing", got)
	}
}

// TestLookupFlagsOutOfRange: a negative lookup setting is a usage error
// (exit 2) that names the flag, in backtest and in run, before anything is
// read or created; -lookup-cache -1 (no cache) is the one negative value
// allowed.
func TestLookupFlagsOutOfRange(t *testing.T) {
	dir := t.TempDir()
	events := writeFile(t, dir, "e.jsonl", abEvents(10, 0, ""))
	const rules = "../../rulesets/cards.cep"
	for _, c := range []struct{ flag, value, want string }{
		{"-lookup-batch", "-1", "-lookup-batch -1 is negative"},
		{"-lookup-in-flight", "-2", "-lookup-in-flight -2 is negative"},
		{"-lookup-timeout", "-1s", "-lookup-timeout -1s is negative"},
		{"-lookup-cache-ttl", "-5m", "-lookup-cache-ttl -5m is negative"},
		{"-lookup-cache", "-5", "-lookup-cache -5: -1 (no cache), 0 (the default) or a number of records"},
	} {
		code, _, stderr := cepheus(t, "backtest", "-rules", rules, "-events", events, "-alerts", os.DevNull, c.flag, c.value)
		if code != 2 || !strings.Contains(stderr, "cepheus: backtest: "+c.want+"\n") {
			t.Errorf("backtest %s %s: exit %d\n%s", c.flag, c.value, code, stderr)
		}
		state := filepath.Join(dir, "state")
		code, _, stderr = cepheus(t, "run", "-rules", rules, "-events", events, "-state", state, "-alerts", filepath.Join(dir, "alerts"), c.flag, c.value)
		if code != 2 || !strings.Contains(stderr, "cepheus: run: "+c.want+"\n") {
			t.Errorf("run %s %s: exit %d\n%s", c.flag, c.value, code, stderr)
		}
		if _, err := os.Stat(state); !os.IsNotExist(err) {
			t.Errorf("run %s %s: the state directory was created: %v", c.flag, c.value, err)
			os.RemoveAll(state)
		}
	}
	code, _, stderr := cepheus(t, "backtest", "-rules", rules, "-events", events, "-alerts", os.DevNull, "-lookup-cache", "-1", "-q")
	if code != 0 {
		t.Errorf("-lookup-cache -1: exit %d\n%s", code, stderr)
	}
}

// TestRunLookupBindingErrors: run's refusal of a -lookup tells how to bind
// a deployed version's lookup only when the name is unknown and not a slip
// of a declared one; a malformed binding or one given twice is only that
// (the hint was appended to every refusal).
func TestRunLookupBindingErrors(t *testing.T) {
	dir := t.TempDir()
	events := writeFile(t, dir, "e.jsonl", abEvents(10, 0, ""))
	const hint = "; a lookup of a version deployed since the rules file was taken is bound by a restart with that version's file as -rules\n"
	for _, c := range []struct{ bind, want string }{
		{"customer=bogus://x", "-lookup customer=bogus://x: the source is file:PATH or redis://HOST:PORT\n"},
		{"customer", `-lookup "customer": want NAME=file:PATH or NAME=redis://HOST:PORT` + "\n"},
		{"customer=file:/a,customer=file:/b", "-lookup customer is given twice\n"},
		{"custmer=file:/a", "-lookup custmer: no such lookup (did you mean customer?)\n"},
		{"holder=file:/a", "-lookup holder: no such lookup (the lookups declared: customer)" + hint},
	} {
		code, _, stderr := cepheus(t, "run", "-rules", "../../rulesets/cards.cep", "-events", events, "-state", filepath.Join(dir, "state"),
			"-alerts", filepath.Join(dir, "alerts"), "-lookup", c.bind)
		if code != 2 || !strings.Contains(stderr, "cepheus: run: "+c.want) {
			t.Errorf("run -lookup %s: exit %d\n%s\nwant 2 and %q", c.bind, code, stderr, c.want)
		}
	}
}

// redisCommand sends one command to the Redis server at addr over RESP and
// fails the test unless the server answers with a simple string or a
// number (an error reply starts with '-').
func redisCommand(t *testing.T, addr string, args ...string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(c, b.String()); err != nil {
		t.Fatal(err)
	}
	reply, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.HasPrefix(reply, "+") && !strings.HasPrefix(reply, ":") {
		t.Fatalf("redis %q: %q, %v", args, reply, err)
	}
}

// TestLookupLoginRefused: a Redis server that answers and refuses a
// lookup's login (WRONGPASS: a wrong password; NOAUTH: none given to a
// server that wants one) stops backtest and run before they read an event
// (exit 1), naming the lookup, the server's answer and what to check, never
// the password. It was a warning like that of a server that does not
// answer, and every event then got the lookup's defaults (fail open) or
// was a dead letter (fail closed). The right password runs.
func TestLookupLoginRefused(t *testing.T) {
	addr, _ := ownRedis(t)
	dir := t.TempDir()
	events := writeFile(t, dir, "e.jsonl", `{"ts":"2026-01-01T00:01:13.497Z","type":"auth","event_id":"evt_1","customer_id":"cust_1","card_id":"card_1","amount":72.33,"currency":"USD","merchant_id":"merch_1","merchant_country":"FR","mcc":"5541","card_country":"FR","lat":45.8,"lon":4.8}`+"\n")
	const rules = "../../rulesets/cards.cep"
	redisCommand(t, addr, "ACL", "SETUSER", "analyst", "on", ">right-password", "~*", "+@all")
	wrong := writeFile(t, dir, "wrong", "wrong-password\n")
	right := writeFile(t, dir, "right", "right-password\n")
	lookup := func(cmd string, extra ...string) []string {
		args := []string{cmd, "-rules", rules, "-events", events, "-lookup", "customer=redis://" + addr}
		if cmd == "backtest" {
			args = append(args, "-alerts", filepath.Join(dir, "alerts.jsonl"))
		} else {
			args = append(args, "-state", filepath.Join(dir, "state-"+strconv.Itoa(len(extra))), "-alerts", filepath.Join(dir, "run-alerts"))
		}
		return append(args, extra...)
	}
	for _, cmd := range []string{"backtest", "run"} {
		code, _, stderr := cepheus(t, lookup(cmd, "-redis-user", "analyst", "-redis-password-file", wrong)...)
		want := "lookup customer: redis://analyst:***@" + addr + "/0?format=hash: the server refused the login: WRONGPASS"
		if code != 1 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "\n  check the user and the password of its URL, or -redis-user") ||
			strings.Contains(stderr, "wrong-password") || strings.Contains(stderr, "does not answer") {
			t.Errorf("%s with a wrong password: exit %d, want 1 and %q, the password unsaid\n%s", cmd, code, want, stderr)
		}
		if cmd == "run" {
			if _, err := os.Stat(filepath.Join(dir, "state-4")); !os.IsNotExist(err) {
				t.Errorf("run with a wrong password made its state directory: %v", err)
			}
		}
	}
	if code, _, stderr := cepheus(t, lookup("backtest", "-redis-user", "analyst", "-redis-password-file", right)...); code != 0 || strings.Contains(stderr, "refused") {
		t.Errorf("backtest with the right password: exit %d\n%s", code, stderr)
	}
	redisCommand(t, addr, "CONFIG", "SET", "requirepass", "server-password")
	code, _, stderr := cepheus(t, lookup("backtest")...)
	if code != 1 || !strings.Contains(stderr, "the server refused the login: NOAUTH") {
		t.Errorf("backtest without the password a server wants: exit %d, want 1 and NOAUTH\n%s", code, stderr)
	}
}

// TestLookupNoDatabase: a Redis URL whose database number the server has
// not (redis://HOST:PORT/99; 16 databases by default) stops backtest and
// run before they read an event (exit 1), saying what the number is: the
// server answers "ERR DB index is out of range", a setting to fix. It was
// the warning of a server that does not answer, and every lookup failed.
func TestLookupNoDatabase(t *testing.T) {
	addr := redisAddr(t)
	dir := t.TempDir()
	events := writeFile(t, dir, "e.jsonl", `{"ts":"2026-01-01T00:01:13.497Z","type":"auth","event_id":"evt_1","customer_id":"cust_1","card_id":"card_1","amount":72.33,"currency":"USD","merchant_id":"merch_1","merchant_country":"FR","mcc":"5541","card_country":"FR","lat":45.8,"lon":4.8}`+"\n")
	for _, cmd := range []string{"backtest", "run"} {
		state := filepath.Join(dir, "state")
		args := []string{cmd, "-rules", "../../rulesets/cards.cep", "-events", events, "-lookup", "customer=redis://" + addr + "/99"}
		if cmd == "backtest" {
			args = append(args, "-alerts", filepath.Join(dir, "alerts.jsonl"))
		} else {
			args = append(args, "-state", state, "-alerts", filepath.Join(dir, "run-alerts"))
		}
		code, _, stderr := cepheus(t, args...)
		want := "lookup customer: redis://" + addr + "/99?format=hash: the server has no database of that number: ERR DB index is out of range\n  the number after the address in its URL picks one of the server's databases"
		if code != 1 || !strings.Contains(stderr, want) || strings.Contains(stderr, "does not answer") {
			t.Errorf("%s with database 99: exit %d, want 1 and %q\n%s", cmd, code, want, stderr)
		}
		if _, err := os.Stat(state); !os.IsNotExist(err) {
			t.Errorf("%s with database 99 made the state directory: %v", cmd, err)
		}
	}
}
