//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// startSecureKafka starts a broker of its own with scripts/kafka.sh start
// -secure (a SASL_SSL listener with a CA made for it) and stops it when
// the test ends; it returns the secure address and the broker's
// directory (tls/, client.properties).
func startSecureKafka(t *testing.T) (string, string) {
	t.Helper()
	return startOwnKafka(t, "-secure")
}

// startOwnKafka starts a Kafka of the test's own with scripts/kafka.sh
// start and its flags args (-n 3, -secure), in a directory of the test,
// stopped when the test ends; it returns the brokers' address and the
// directory (pids, logs).
func startOwnKafka(t *testing.T, args ...string) (string, string) {
	t.Helper()
	return startOwnKafkaEnv(t, nil, args...)
}

// startOwnKafkaEnv is startOwnKafka with env added to the script's
// environment. When the test fails and $CEPHEUS_KEEP_KAFKA_LOGS names a
// directory, the brokers' logs are copied under it before they stop.
func startOwnKafkaEnv(t *testing.T, env []string, args ...string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("../../scripts/kafka.sh", append(append([]string{"start"}, args...), "-dir", dir)...)
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	t.Cleanup(func() {
		if out, err := exec.Command("../../scripts/kafka.sh", "stop", "-dir", dir).CombinedOutput(); err != nil {
			t.Errorf("scripts/kafka.sh stop: %v\n%s", err, out)
		}
	})
	t.Cleanup(func() { // before the stop
		keep := os.Getenv("CEPHEUS_KEEP_KAFKA_LOGS")
		if !t.Failed() || keep == "" {
			return
		}
		to := filepath.Join(keep, fmt.Sprintf("%s-%d", strings.ReplaceAll(t.Name(), "/", "_"), time.Now().UnixNano()))
		if out, err := exec.Command("cp", "-r", filepath.Join(dir, "logs"), to).CombinedOutput(); err != nil {
			t.Logf("keeping the brokers' logs: %v\n%s", err, out)
			return
		}
		t.Logf("the brokers' logs are kept in %s", to)
	})
	if err != nil {
		t.Fatalf("scripts/kafka.sh start %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1], dir
}

// TestKafkaSecure runs the Kafka commands against a broker that takes
// only TLS with SASL: produce with the settings of a -kafka-config file
// (SCRAM-SHA-512), consume with flags and the password in the environment
// (PLAIN) and with a client certificate, a transactional run and a
// backtest over the topic; a wrong password and a plaintext client fail
// with clear errors, and the password is never printed.
func TestKafkaSecure(t *testing.T) {
	kafkaBrokers(t) // a broker is expected here: the same skip or failure as the other Kafka tests
	// Not parallel: the password goes through the environment (t.Setenv).
	addr, kdir := startSecureKafka(t)
	config := filepath.Join(kdir, "client.properties")
	pw, err := os.ReadFile(filepath.Join(kdir, "tls", "password"))
	if err != nil || len(pw) < 10 {
		t.Fatalf("the broker's password: %q, %v", pw, err)
	}
	secret := string(pw)
	noSecret := func(what, s string) {
		t.Helper()
		if strings.Contains(s, secret) {
			t.Errorf("%s prints the SASL password:\n%s", what, s)
		}
	}
	dir := t.TempDir()
	events := filepath.Join(dir, "events.jsonl")
	if code, _, errOut := cepheus(t, "gen", "-history-days", "0", "-days", "1", "-events-per-day", "4000", "-customers", "200",
		"-scenarios", "card_testing,velocity_burst", "-fraud-rate", "300", "-o", events); code != 0 {
		t.Fatalf("gen: exit %d\n%s", code, errOut)
	}
	lines := readLines(t, events)
	topic := kafkaTopic(t, "secure")
	code, out, errOut := cepheus(t, "produce", "-brokers", addr, "-kafka-config", config, "-topic", topic, "-partitions", "3",
		"-key", "card_id", "-events", events)
	noSecret("produce", out+errOut)
	if code != 0 {
		t.Fatalf("produce over SASL_SSL (SCRAM-SHA-512, -kafka-config): exit %d\n%s", code, errOut)
	}
	t.Setenv(saslPasswordEnv, secret)
	ca := filepath.Join(kdir, "tls", "ca.pem")
	for _, extra := range [][]string{nil, {"-tls-cert", filepath.Join(kdir, "tls", "client.pem"), "-tls-key", filepath.Join(kdir, "tls", "client.key")}} {
		args := append([]string{"consume", "-brokers", addr, "-tls", "-tls-ca", ca, "-sasl", "PLAIN", "-sasl-user", "cepheus", "-topic", topic, "-idle", "1s"}, extra...)
		code, out, errOut = cepheus(t, args...)
		noSecret("consume", errOut)
		if code != 0 {
			t.Fatalf("consume over SASL_SSL (PLAIN, flags %q): exit %d\n%s", extra, code, errOut)
		}
		sameMultiset(t, "consume over SASL_SSL", strings.Split(strings.TrimSuffix(out, "\n"), "\n"), lines)
	}
	t.Setenv(saslPasswordEnv, "")

	// A transactional run and a backtest over the topic, by the config
	// file: the whole cards ruleset, so its repartition topics go over
	// SASL_SSL too.
	alerts := topic + "-alerts"
	rules := "../../rulesets/cards.cep"
	code, out, errOut = cepheus(t, "run", "-q", "-rules", rules, "-brokers", addr, "-kafka-config", config,
		"-input-topic", topic, "-bounded", "-alerts-topic", alerts, "-group", topic, "-record-key", "card_id",
		"-state", filepath.Join(dir, "state"))
	noSecret("run", out+errOut)
	if code != 0 {
		t.Fatalf("run over SASL_SSL: exit %d\n%s", code, errOut)
	}
	btFile := filepath.Join(dir, "bt.jsonl")
	if code, _, errOut := cepheus(t, "backtest", "-q", "-rules", rules, "-events", events, "-alerts", btFile); code != 0 {
		t.Fatalf("backtest of the file: exit %d\n%s", code, errOut)
	}
	btTopic := filepath.Join(dir, "bt-topic.jsonl")
	code, _, errOut = cepheus(t, "backtest", "-q", "-rules", rules, "-brokers", addr, "-kafka-config", config, "-topic", topic, "-alerts", btTopic)
	noSecret("backtest", errOut)
	if code != 0 {
		t.Fatalf("backtest over SASL_SSL: exit %d\n%s", code, errOut)
	}
	idsOf := func(ls []string) []string {
		var ids []string
		for _, l := range ls {
			if i := strings.Index(l, `"alert_id":"`); i >= 0 {
				ids = append(ids, l[i+12:i+12+32])
			}
		}
		return ids
	}
	want := readLines(t, btFile)
	if len(want) == 0 {
		t.Fatal("the backtest has no alerts: too few to tell")
	}
	// The alert ids: the "line" of matched events is the merged order's.
	sameMultiset(t, "the backtest over the topic", idsOf(readLines(t, btTopic)), idsOf(want))
	code, out, errOut = cepheus(t, "consume", "-brokers", addr, "-kafka-config", config, "-topic", alerts, "-idle", "1s")
	if code != 0 {
		t.Fatalf("consume of the alerts: exit %d\n%s", code, errOut)
	}
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	sameMultiset(t, "the alerts topic of the run over SASL_SSL", idsOf(got), idsOf(want))

	// Failures: a wrong password, plaintext against the TLS listener.
	t.Setenv(saslPasswordEnv, "not-the-password")
	code, _, errOut = cepheus(t, "consume", "-brokers", addr, "-tls", "-tls-ca", ca, "-sasl", "SCRAM-SHA-512", "-sasl-user", "cepheus", "-topic", topic, "-idle", "1s")
	refused := `the brokers refused SASL SCRAM-SHA-512 as user "cepheus"`
	if code != 1 || !strings.Contains(errOut, "SASL_AUTHENTICATION_FAILED") || !strings.Contains(errOut, refused) || strings.Contains(errOut, "not-the-password") {
		t.Errorf("a wrong password: exit %d, want 1 with SASL_AUTHENTICATION_FAILED, the user and no password\n%s", code, errOut)
	}
	// The user named wherever it came from (here the environment), by
	// every command (backtest's errors pass through its own wording).
	t.Setenv(saslUserEnv, "cepheus")
	code, _, errOut = cepheus(t, "backtest", "-brokers", addr, "-tls", "-tls-ca", ca, "-sasl", "PLAIN", "-topic", topic, "-rules", writeFile(t, t.TempDir(), "r.cep", goodSrc))
	if code != 1 || !strings.Contains(errOut, `the brokers refused SASL PLAIN as user "cepheus"`) || strings.Contains(errOut, "not-the-password") {
		t.Errorf("backtest with a wrong password: exit %d, want 1 naming the user and no password\n%s", code, errOut)
	}
	t.Setenv(saslUserEnv, "")
	t.Setenv(saslPasswordEnv, "")
	code, _, errOut = cepheus(t, "consume", "-brokers", addr, "-topic", topic, "-idle", "1s")
	if code != 1 || !strings.Contains(errOut, "tls") {
		t.Errorf("plaintext against the TLS listener: exit %d, want 1 saying so\n%s", code, errOut)
	}
	// A run says it at once too: a setting's fault, not brokers away to
	// wait for (45 s and "no answer" when taken for that).
	began := time.Now()
	code, _, errOut = cepheus(t, "run", "-brokers", addr, "-input-topic", topic, "-rules", writeFile(t, t.TempDir(), "r.cep", goodSrc),
		"-state", filepath.Join(t.TempDir(), "state"), "-alerts", filepath.Join(t.TempDir(), "alerts"))
	if took := time.Since(began); code != 1 || !strings.Contains(errOut, "tls") || took > 20*time.Second {
		t.Errorf("run, plaintext against the TLS listener: exit %d after %v, want 1 at once saying so\n%s", code, took.Round(time.Millisecond), errOut)
	}
	code, _, errOut = cepheus(t, "consume", "-brokers", addr, "-sasl", "PLAIN", "-topic", topic)
	if code != 2 || !strings.Contains(errOut, "needs a user and a password") {
		t.Errorf("-sasl without a user: exit %d\n%s", code, errOut)
	}
}

// TestKafkaConfigReadableWarned: a -kafka-config file that holds a
// password and that others may read is warned of (its mode, chmod 600);
// one readable by its owner only, or without a password, is not.
func TestKafkaConfigReadableWarned(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		src  string
		mode os.FileMode
		warn bool
	}{
		{"sasl.mechanism=PLAIN\nsasl.username=u\nsasl.password=secretpw\n", 0o644, true},
		{"sasl.mechanism=PLAIN\nsasl.username=u\nsasl.password=secretpw\n", 0o600, false},
		{"tls=true\n", 0o644, false},
	} {
		path := filepath.Join(dir, fmt.Sprintf("client-%o.properties", c.mode))
		if err := os.WriteFile(path, []byte(c.src), c.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, c.mode); err != nil { // whatever the umask
			t.Fatal(err)
		}
		// No -topic: a usage error once the settings are read, before any
		// broker is asked.
		code, _, stderr := cepheus(t, "consume", "-brokers", "127.0.0.1:1", "-kafka-config", path)
		want := fmt.Sprintf("consume: warning: %s holds a password and others may read it (mode %04o): chmod 600 %s", path, c.mode, path)
		if code != 2 || strings.Contains(stderr, want) != c.warn || strings.Contains(stderr, "secretpw") {
			t.Errorf("%q, mode %o: exit %d, warned %v, want exit 2, warned %v\n%s", c.src, c.mode, code, !c.warn, c.warn, stderr)
		}
	}
}

// TestKafkaPlainWithCARefused: -tls=false with a CA or a client
// certificate set (by a flag, the environment or a config file) is a
// usage error naming both, not TLS taken silently; without -tls=false
// the CA turns TLS on (the command then goes on to its next check).
func TestKafkaPlainWithCARefused(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "client.properties")
	if err := os.WriteFile(conf, []byte("tls.ca=/nonexistent/ca.pem\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"consume", "-brokers", "127.0.0.1:1", "-topic", "t", "-idle", "1s"}
	for _, c := range []struct {
		name string
		args []string
		env  bool
	}{
		{"flag", []string{"-tls=false", "-tls-ca", "/nonexistent/ca.pem"}, false},
		{"client certificate", []string{"-tls=false", "-tls-cert", "c.pem", "-tls-key", "k.pem"}, false},
		{"environment", []string{"-tls=false"}, true},
		{"config file", []string{"-tls=false", "-kafka-config", conf}, false},
	} {
		if c.env {
			t.Setenv(tlsCAEnv, "/nonexistent/ca.pem")
		}
		code, _, stderr := cepheus(t, append(slices.Clone(base), c.args...)...)
		if code != 2 || !strings.Contains(stderr, "-tls=false, but a CA (-tls-ca, $"+tlsCAEnv+" or tls.ca) or a client certificate (-tls-cert or tls.cert) is set, which only TLS uses") {
			t.Errorf("%s: exit %d, want 2 refusing -tls=false with a CA\n%s", c.name, code, stderr)
		}
		os.Unsetenv(tlsCAEnv)
	}
	// Without -tls=false the CA is taken, TLS on: the missing file is what fails.
	code, _, stderr := cepheus(t, append(slices.Clone(base), "-tls-ca", "/nonexistent/ca.pem")...)
	if code == 0 || strings.Contains(stderr, "-tls=false") || !strings.Contains(stderr, "/nonexistent/ca.pem") {
		t.Errorf("-tls-ca alone: exit %d, want a failure naming the CA file, not the refusal\n%s", code, stderr)
	}
}

// TestBrokerAddressRefused: a broker address with a listener's scheme or
// without a port is a bad command line at once (exit 2, saying what to
// give); each waited for the brokers' 45 s, then asked whether they were
// up.
func TestBrokerAddressRefused(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.cep", goodSrc)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"consume", "-brokers", "PLAINTEXT://127.0.0.1:9092", "-topic", "t"}, "broker PLAINTEXT://127.0.0.1:9092: give host:port, without the listener's scheme PLAINTEXT:// (127.0.0.1:9092;"},
		{[]string{"produce", "-brokers", "localhost:9092,127.0.0.1", "-topic", "t", "-events", rules}, "broker 127.0.0.1: give host:port (Kafka listens on 9092 by default: 127.0.0.1:9092)"},
		{[]string{"run", "-rules", rules, "-brokers", "kafka1:", "-input-topic", "t", "-alerts-topic", "a", "-group", "g", "-state", filepath.Join(dir, "state")}, "broker kafka1:: give host:port (Kafka listens on 9092 by default: kafka1:9092)"},
	} {
		code, _, errOut := cepheus(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("cepheus %v: exit %d\n%s\nwant exit 2 and %q", c.args, code, errOut, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "state")); !os.IsNotExist(err) {
		t.Errorf("a refused run made its state directory: %v", err)
	}
	// An address where nothing listens (port 1 of the loopback) fails
	// produce, consume and a topic's backtest at once, saying so; they
	// waited the client's 45 s.
	for _, args := range [][]string{
		{"consume", "-brokers", "127.0.0.1:1", "-topic", "t"},
		{"produce", "-brokers", "127.0.0.1:1", "-topic", "t", "-events", rules},
		{"backtest", "-rules", rules, "-brokers", "127.0.0.1:1", "-topic", "t"},
	} {
		begin := time.Now()
		code, _, errOut := cepheus(t, args...)
		if want := "no broker at 127.0.0.1:1: dial tcp 127.0.0.1:1: connect: connection refused (is Kafka up"; code != 1 || !strings.Contains(errOut, want) || time.Since(begin) > 10*time.Second {
			t.Errorf("cepheus %v: exit %d after %v\n%s\nwant exit 1 at once and %q", args, code, time.Since(begin).Round(time.Millisecond), errOut, want)
		}
	}
}
