package main

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/internal/humanize"
)

// kafkaBrokers returns $CEPHEUS_KAFKA_BROKERS. When it is unset the test
// fails under CI (make test starts a broker and sets it; a test whose
// service is missing must fail there, never skip) and skips elsewhere,
// saying how to get a broker.
func kafkaBrokers(t *testing.T) string {
	t.Helper()
	b := os.Getenv(brokersEnv)
	if b == "" {
		if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
			t.Fatal(brokersEnv + " is not set and CI is: the Kafka tests need a broker (make test starts one with scripts/kafka.sh)")
		}
		t.Skip("no Kafka broker: make test starts one; or run scripts/kafka.sh start (make kafka-up) and set " + brokersEnv + " to the address it prints")
	}
	return b
}

// kafkaTopic returns a topic name no other test or run uses: topics on the
// test broker are never deleted.
func kafkaTopic(t *testing.T, name string) string {
	return fmt.Sprintf("cepheus-test-%s-%d", name, time.Now().UnixNano())
}

// readLines returns the lines of a file, gunzipped when its name ends in
// .gz.
func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r = bufio.NewReader(f)
	var sc *bufio.Scanner
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(r)
		if err != nil {
			t.Fatal(err)
		}
		sc = bufio.NewScanner(zr)
	} else {
		sc = bufio.NewScanner(r)
	}
	sc.Buffer(nil, 1<<20)
	var out []string
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// sameMultiset fails unless got and want hold the same lines, as multisets.
func sameMultiset(t *testing.T, what string, got, want []string) {
	t.Helper()
	got, want = slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))
	if slices.Equal(got, want) {
		return
	}
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			t.Errorf("%s: %d lines, want %d; first difference (sorted) at %d:\n got %s\nwant %s", what, len(got), len(want), i, got[i], want[i])
			return
		}
	}
	t.Errorf("%s: %d lines, want %d", what, len(got), len(want))
}

// TestKafkaProduceConsume: a generated file (gzip) produced into a
// 6-partition topic keyed by card_id comes back from consume as the same
// multiset of lines; producing again, with the brokers from the
// environment, uses the topic as it is; another partition count is refused.
func TestKafkaProduceConsume(t *testing.T) {
	brokers := kafkaBrokers(t)
	t.Parallel()
	dir := t.TempDir()
	events := filepath.Join(dir, "events.jsonl.gz")
	if code, _, errOut := cepheus(t, "gen", "-history-days", "0", "-days", "1", "-events-per-day", "5000", "-customers", "300",
		"-scenarios", "card_testing,account_takeover,auth_not_captured", "-fraud-rate", "200", "-o", events); code != 0 {
		t.Fatalf("gen: exit %d\n%s", code, errOut)
	}
	lines := readLines(t, events)
	topic := kafkaTopic(t, "roundtrip")

	code, out, errOut := cepheus(t, "produce", "-brokers", brokers, "-topic", topic, "-partitions", "6",
		"-key", "card_id", "-time-field", "ts", "-events", events)
	wantSummary := fmt.Sprintf("produce: %s (", plural(int64(len(lines)), "record", "records"))
	if code != 0 || out != "" || !strings.HasPrefix(errOut, wantSummary) || !strings.Contains(errOut, " (6 partitions, created)\n") {
		t.Fatalf("produce: exit %d, stdout %q, stderr\n%s\nwant exit 0, nothing on stdout, a summary starting %q", code, out, errOut, wantSummary)
	}
	if strings.Contains(errOut, "null key") || strings.Contains(errOut, "append time") {
		// Account events have card_id "" (an empty key, not a null one).
		t.Errorf("produce of gen's events reports null keys or untimed records:\n%s", errOut)
	}
	code, out, errOut = cepheus(t, "consume", "-brokers", brokers, "-topic", topic, "-idle", "1s")
	if code != 0 || !strings.HasPrefix(errOut, "consume: "+plural(int64(len(lines)), "record", "records")) {
		t.Fatalf("consume: exit %d, stderr\n%s", code, errOut)
	}
	sameMultiset(t, "consume after one produce", strings.Split(strings.TrimSuffix(out, "\n"), "\n"), lines)

	// The brokers from the environment (kafkaBrokers read them there);
	// the topic exists, so nothing is created.
	plain := filepath.Join(dir, "some.jsonl")
	some := lines[:100]
	if err := os.WriteFile(plain, []byte(strings.Join(some, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = cepheus(t, "produce", "-topic", topic, "-key", "card_id", "-events", plain)
	if code != 0 || !strings.Contains(errOut, "produce: 100 records (") || !strings.Contains(errOut, " (6 partitions)\n") {
		t.Fatalf("second produce: exit %d, stderr\n%s", code, errOut)
	}
	// -q: no summary, its warnings alone (two lines keyed by no_such
	// field, the first line not JSON).
	quiet := filepath.Join(dir, "quiet.jsonl")
	if err := os.WriteFile(quiet, []byte("not json\n"+some[0]+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = cepheus(t, "produce", "-q", "-topic", topic, "-key", "no_such", "-events", quiet)
	if want := "produce: warning: 2 records without no_such: null key\nproduce: warning: 1 line not a JSON object, written as it is\n"; code != 0 || errOut != want {
		t.Fatalf("produce -q: exit %d, stderr\n%s\nwant 0 and\n%s", code, errOut, want)
	}
	some = append(slices.Clip(some), "not json", some[0])
	code, out, errOut = cepheus(t, "consume", "-topic", topic, "-idle", "1s", "-q")
	if code != 0 || errOut != "" {
		t.Fatalf("consume -q: exit %d, stderr\n%s", code, errOut)
	}
	sameMultiset(t, "consume after two produces", strings.Split(strings.TrimSuffix(out, "\n"), "\n"), append(slices.Clone(lines), some...))

	code, _, errOut = cepheus(t, "produce", "-topic", topic, "-partitions", "3", "-events", plain)
	if code != 1 || !strings.Contains(errOut, "has 6 partitions, not 3") {
		t.Errorf("produce -partitions 3 to a 6-partition topic: exit %d, stderr\n%s\nwant exit 1 saying so", code, errOut)
	}
	code, _, errOut = cepheus(t, "consume", "-topic", kafkaTopic(t, "missing"), "-idle", "1s")
	if code != 1 || !strings.Contains(errOut, "no such topic") {
		t.Errorf("consume of a missing topic: exit %d, stderr\n%s\nwant exit 1 saying so", code, errOut)
	}
	// A group over a missing input topic says how to make it.
	missing, dir := kafkaTopic(t, "missing-input"), t.TempDir()
	code, _, errOut = cepheus(t, "run", "-rules", writeFile(t, dir, "r.cep", goodSrc), "-input-topic", missing, "-alerts-topic", missing+"-alerts",
		"-group", missing, "-state", filepath.Join(dir, "state"))
	if want := "no such topic (is -input-topic " + missing + " spelt as the producers write it? The input topic must exist: create it first"; code != 1 || !strings.Contains(errOut, want) {
		t.Errorf("run over a missing input topic: exit %d, stderr\n%s\nwant exit 1 and %q", code, errOut, want)
	}
}

// TestKafkaUsage: the command lines produce and consume refuse, without a
// broker.
func TestKafkaUsage(t *testing.T) {
	t.Setenv(brokersEnv, "")
	tmp := t.TempDir() // for the runs that would make their directories
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"produce", "-topic", "t", "-events", "x"}, "produce: no brokers: give -brokers host:port or set $CEPHEUS_KAFKA_BROKERS"},
		{[]string{"produce", "-brokers", "b:1", "-events", "x"}, "produce: -topic and -events are required"},
		{[]string{"produce", "-brokers", "b:1", "-topic", "t", "-events", "x", "-partitions", "-2"}, "-partitions -2: want a positive count"},
		{[]string{"produce", "-brokers", "b:1", "-topic", "t", "-events", "x", "-compression", "brotli"}, `-compression "brotli": want snappy, lz4, zstd, gzip or none`},
		{[]string{"produce", "-brokers", "b:1", "-topic", "t", "-events", "x", "extra"}, `unexpected arguments ["extra"]`},
		{[]string{"consume", "-topic", "t"}, "consume: no brokers"},
		{[]string{"consume", "-brokers", "b:1"}, "consume: -topic is required"},
		{[]string{"consume", "-brokers", "b:1", "-topic", "t", "-idle", "0s"}, "-idle 0s: want a positive duration"},
		{[]string{"consume", "-brokers", "b:1", "-topic", "t", "-isolation", "dirty"}, `-isolation "dirty": want read_committed or read_uncommitted`},
		// The instance id is in the offsets' metadata after " inst=" and
		// before an optional " final": a space would make it ambiguous.
		{[]string{"run", "-rules", "../../rulesets/cards.cep", "-brokers", "b:1", "-input-topic", "t", "-alerts-topic", "a", "-group", "g", "-state", "s", "-instance-id", "a final"},
			`-instance-id "a final": letters, digits, '.', '_' and '-' only, not ' '`},
		{[]string{"run", "-rules", "../../rulesets/cards.cep", "-brokers", "b:1", "-input-topic", "t", "-alerts-topic", "a", "-group", "g", "-state", "s", "-instance-id", ""},
			`-instance-id "": want 1 to 100 characters`},
		// The flags of the transactional job, given to a job that writes
		// directories: they were ignored (-delivery at-least-once ran
		// exactly once, -record-key keyed nothing).
		{[]string{"run", "-rules", "../../rulesets/cards.cep", "-brokers", "b:1", "-input-topic", "t", "-alerts", filepath.Join(tmp, "a"), "-state", filepath.Join(tmp, "s"),
			"-changelog-topic", "c", "-record-key", "card_id", "-delivery", "at-least-once", "-session-timeout", "3s"},
			"run: -changelog-topic, -record-key, -delivery, -session-timeout: with -alerts-topic (its transactions and group), not with -alerts DIR\n"},
		{[]string{"run", "-rules", "../../rulesets/cards.cep", "-brokers", "b:1", "-input-topic", "t", "-alerts", filepath.Join(tmp, "a"), "-state", filepath.Join(tmp, "s"),
			"-trust-record-keys", "-instance-id", "b", "-local-checkpoint-interval", "0s", "-transaction-timeout", "5m"},
			"run: -trust-record-keys, -instance-id, -local-checkpoint-interval, -transaction-timeout: with -alerts-topic"},
	} {
		code, out, errOut := cepheus(t, c.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("cepheus %s: exit %d, stdout %q, stderr\n%s\nwant exit 2 saying %q", strings.Join(c.args, " "), code, out, errOut, c.want)
		}
	}
	code, _, errOut := cepheus(t, "produce", "-brokers", "b:1", "-topic", "t", "-events", filepath.Join(t.TempDir(), "missing.jsonl"))
	if code != 1 || !strings.Contains(errOut, "missing.jsonl: no such file") {
		t.Errorf("produce of a missing file: exit %d, stderr\n%s", code, errOut)
	}
}

// TestBacktestTopic: a generated file produced into a 6-partition topic
// keyed by card_id (record timestamps from the events' ts) and backtested
// with -topic gives the file's alerts; -from and -to replay a time range,
// which gives the alerts of a backtest over the file's lines in that range.
func TestBacktestTopic(t *testing.T) {
	brokers := kafkaBrokers(t)
	t.Parallel()
	dir := t.TempDir()
	events := filepath.Join(dir, "events.jsonl")
	if code, _, errOut := cepheus(t, "gen", "-history-days", "0", "-days", "1", "-events-per-day", "30000", "-customers", "800",
		"-fraud-rate", "100", "-scenarios", "card_testing,account_takeover,impossible_travel,velocity_burst,auth_not_captured", "-o", events); code != 0 {
		t.Fatalf("gen: exit %d\n%s", code, errOut)
	}
	topic := kafkaTopic(t, "backtest")
	if code, _, errOut := cepheus(t, "produce", "-brokers", brokers, "-topic", topic, "-partitions", "6",
		"-key", "card_id", "-time-field", "ts", "-events", events); code != 0 {
		t.Fatalf("produce: exit %d\n%s", code, errOut)
	}
	ids := func(path string) []string {
		var out []string
		for _, l := range readLines(t, path) {
			if i := strings.Index(l, `"alert_id":"`); i >= 0 {
				out = append(out, l[i+12:i+12+32])
			}
		}
		return out
	}
	backtest := func(name string, args ...string) []string {
		t.Helper()
		out := filepath.Join(dir, name+".jsonl")
		args = append([]string{"backtest", "-q", "-rules", "../../rulesets/cards.cep", "-alerts", out}, args...)
		if code, _, errOut := cepheus(t, args...); code != 0 {
			t.Fatalf("backtest %s: exit %d\n%s", name, code, errOut)
		}
		return ids(out)
	}
	file := backtest("file", "-events", events)
	if len(file) < 30 {
		t.Fatalf("the file's backtest has %d alerts: too few to tell", len(file))
	}
	sameMultiset(t, "the alerts of the topic against the file's", backtest("topic", "-brokers", brokers, "-topic", topic), file)

	// A time range: [06:00, 18:00) of the generated day.
	from, to := "2026-01-01T06:00:00Z", "2026-01-01T18:00:00Z"
	lo, _ := time.Parse(time.RFC3339, from)
	hi, _ := time.Parse(time.RFC3339, to)
	var part []string
	for _, l := range readLines(t, events) {
		i := strings.Index(l, `"ts":"`)
		if i < 0 {
			t.Fatalf("no ts in %q", l)
		}
		ts, err := time.Parse(time.RFC3339Nano, l[i+6:i+6+strings.IndexByte(l[i+6:], '"')])
		if err != nil {
			t.Fatalf("ts of %q: %v", l, err)
		}
		if !ts.Before(lo) && ts.Before(hi) {
			part = append(part, l)
		}
	}
	if len(part) == 0 || len(part) == len(readLines(t, events)) {
		t.Fatalf("the range holds %d events: want some, not all", len(part))
	}
	rangeFile := filepath.Join(dir, "range.jsonl")
	if err := os.WriteFile(rangeFile, []byte(strings.Join(part, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := backtest("range-file", "-events", rangeFile)
	if len(want) == 0 {
		t.Fatal("no alert in the range: too few to tell")
	}
	sameMultiset(t, "the alerts of the topic's range against the file's lines in it",
		backtest("range-topic", "-brokers", brokers, "-topic", topic, "-from", from, "-to", to), want)
	if code, _, errOut := cepheus(t, "backtest", "-rules", "../../rulesets/cards.cep", "-topic", topic, "-brokers", brokers, "-from", to, "-to", from); code != 2 || !strings.Contains(errOut, "is not before") {
		t.Errorf("-from after -to: exit %d\n%s", code, errOut)
	}
}

// TestProduceTimeUnit: produce -time-unit s stamps records with their
// epoch seconds (a fraction too), which a backtest of a time range then
// finds; without it the seconds were read as milliseconds, January 1970,
// silently (the time trial), and the summary now says so.
func TestProduceTimeUnit(t *testing.T) {
	brokers := kafkaBrokers(t)
	t.Parallel()
	dir := t.TempDir()
	events := writeFile(t, dir, "events.jsonl", `{"ts": 1767225600.5, "k": "x", "name": "a"}
{"ts": 1767225601, "k": "x", "name": "b"}
{"ts": 1767225602.25, "k": "y", "name": "a"}
`)
	rulesFile := writeFile(t, dir, "good.cep", goodSrc)
	ms := kafkaTopic(t, "unit-ms")
	code, _, errOut := cepheus(t, "produce", "-brokers", brokers, "-topic", ms, "-partitions", "1", "-time-field", "ts", "-events", events)
	// The fractions are no milliseconds (untimed); the whole second is,
	// of January 1970.
	want := "  1 record has a numeric ts before 2000 or from 2100 on, written so: is -time-unit ms right?"
	if code != 0 || !strings.Contains(errOut, want) {
		t.Errorf("produce of epoch seconds as milliseconds: exit %d, want 0 and %q\n%s", code, want, errOut)
	}
	s := kafkaTopic(t, "unit-s")
	code, _, errOut = cepheus(t, "produce", "-brokers", brokers, "-topic", s, "-partitions", "1", "-time-field", "ts", "-time-unit", "s", "-events", events)
	if code != 0 || strings.Contains(errOut, "before 2000") || strings.Contains(errOut, "without a usable") {
		t.Errorf("produce -time-unit s: exit %d, want 0 and every time taken\n%s", code, errOut)
	}
	// The range of the first second of 2026 holds the first two records
	// (the range ends at the first record stamped at or after -to).
	code, _, errOut = cepheus(t, "backtest", "-rules", rulesFile, "-alerts", filepath.Join(dir, "alerts.jsonl"), "-time-unit", "s",
		"-brokers", brokers, "-topic", s, "-from", "2026-01-01T00:00:00Z", "-to", "2026-01-01T00:00:02Z")
	if want := "2 records, 2 events"; code != 0 || !strings.Contains(errOut, want) {
		t.Errorf("backtest of the range: exit %d, want %q\n%s", code, want, errOut)
	}
	// Under -time-unit s a time before 2000 is no slip of epoch seconds
	// read as milliseconds: the summary asks about the unit without that
	// reason (it gave it whatever the unit).
	oldEvents := writeFile(t, dir, "events-1999.jsonl", `{"ts": 946684799, "k": "x", "name": "a"}`+"\n")
	code, _, errOut = cepheus(t, "produce", "-brokers", brokers, "-topic", kafkaTopic(t, "unit-s-1999"), "-partitions", "1", "-time-field", "ts", "-time-unit", "s", "-events", oldEvents)
	want = "  1 record has a numeric ts before 2000 or from 2100 on, written so: is -time-unit s right?\n"
	if code != 0 || !strings.Contains(errOut, want) {
		t.Errorf("produce -time-unit s of a time of 1999: exit %d, want 0 and %q\n%s", code, want, errOut)
	}
	// A time the broker refuses (Kafka 4: more than an hour ahead of its
	// clock) fails the batch it came in: the error gives the lines refused
	// and the time farthest from the clock, line 2's, not only the
	// batch's first line, whose time is good.
	farEvents := writeFile(t, dir, "events-2100.jsonl", `{"ts": 1767225600000, "k": "x", "name": "a"}`+"\n"+`{"ts": 4102444800001, "k": "x", "name": "b"}`+"\n")
	code, _, errOut = cepheus(t, "produce", "-brokers", brokers, "-topic", kafkaTopic(t, "unit-2100"), "-partitions", "1", "-time-field", "ts", "-events", farEvents)
	if want := "refused for a timestamp: a broker takes none more than the topic's message.timestamp.after.max.ms ahead of its clock (an hour by default since Kafka 4.0) or its message.timestamp.before.max.ms behind; the farthest from the clock is line 2's, 2100-01-01T00:00:00.001Z"; code != 1 || !strings.Contains(errOut, want) {
		t.Errorf("produce of a line of 2100: exit %d, want 1 and %q\n%s", code, want, errOut)
	}
	// Epoch milliseconds under -time-unit s are times after 2262, which a
	// record cannot be stamped with: the command fails at the line (they
	// were written as times of the 1850s).
	msEvents := writeFile(t, dir, "events-ms.jsonl", `{"ts": 1767225600, "k": "x", "name": "a"}`+"\n"+`{"ts": 1767225600500, "k": "x", "name": "b"}`+"\n")
	code, _, errOut = cepheus(t, "produce", "-brokers", brokers, "-topic", kafkaTopic(t, "unit-s-of-ms"), "-partitions", "1", "-time-field", "ts", "-time-unit", "s", "-events", msEvents)
	if want := "line 2: ts 1767225600500 is 57971-02-25T00:08:20Z, after 2262-04-11T23:47:16.854Z"; code != 1 || !strings.Contains(errOut, want) {
		t.Errorf("produce -time-unit s of epoch milliseconds: exit %d, want 1 and %q\n%s", code, want, errOut)
	}
	if code, _, errOut := cepheus(t, "produce", "-brokers", brokers, "-topic", s, "-time-field", "ts", "-time-unit", "us", "-events", events); code != 2 || !strings.Contains(errOut, `-time-unit "us": want ms or s`) {
		t.Errorf("produce -time-unit us: exit %d, want 2 and the refusal\n%s", code, errOut)
	}
}

// TestBacktestTopicUntimedLine produces a file with a line that has no time
// in its middle (with -time-field) into one partition, then backtests a
// range of the topic that holds every event: every record is replayed, the
// line a dead letter. The line used to get the append time (today), after
// every event's: the range, which ends at the first record stamped at or
// after -to, ended there, and the records after it were left out unsaid.
func TestBacktestTopicUntimedLine(t *testing.T) {
	brokers := kafkaBrokers(t)
	t.Parallel()
	dir := t.TempDir()
	events := filepath.Join(dir, "events.jsonl")
	if code, _, errOut := cepheus(t, "gen", "-history-days", "0", "-days", "1", "-events-per-day", "3000", "-customers", "200",
		"-scenarios", "card_testing", "-o", events); code != 0 {
		t.Fatalf("gen: exit %d\n%s", code, errOut)
	}
	lines := readLines(t, events)
	lines = slices.Insert(lines, len(lines)/2, "not json")
	if err := os.WriteFile(events, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	topic := kafkaTopic(t, "untimed")
	if code, _, errOut := cepheus(t, "produce", "-brokers", brokers, "-topic", topic, "-partitions", "1",
		"-key", "card_id", "-time-field", "ts", "-events", events); code != 0 {
		t.Fatalf("produce: exit %d\n%s", code, errOut)
	}
	dead := filepath.Join(dir, "dead.jsonl")
	code, _, errOut := cepheus(t, "backtest", "-rules", "../../rulesets/cards.cep", "-alerts", filepath.Join(dir, "alerts.jsonl"),
		"-dead-letter", dead, "-brokers", brokers, "-topic", topic, "-from", "2025-12-31T00:00:00Z", "-to", "2026-01-03T00:00:00Z")
	// A topic's summary counts records, not lines (it said "lines").
	want := fmt.Sprintf("%s records, %s events", humanize.Int(int64(len(lines))), humanize.Int(int64(len(lines)-1)))
	if code != 0 || !strings.Contains(errOut, want) || !strings.Contains(errOut, "  1 record could not be decoded (first: ") {
		t.Fatalf("backtest of the range: exit %d, want %q and the record not decoded in its summary\n%s", code, want, errOut)
	}
	if got := readLines(t, dead); len(got) != 1 || !strings.Contains(got[0], `"line":`+strconv.Itoa(len(lines)/2+1)) {
		t.Errorf("dead letters %q, want the line %d", got, len(lines)/2+1)
	}
	// A range after every record: the topic is not empty, the range is
	// (it was said to be empty, or only blank lines).
	code, _, errOut = cepheus(t, "backtest", "-rules", "../../rulesets/cards.cep", "-alerts", filepath.Join(dir, "none.jsonl"),
		"-brokers", brokers, "-topic", topic, "-from", "2026-01-05T00:00:00Z")
	want = "backtest: warning: the range of topic " + topic + " holds no events (no record is stamped in [2026-01-05T00:00:00Z, its end): the range is by record timestamp"
	if code != 0 || !strings.Contains(errOut, want) {
		t.Errorf("backtest of a range after the records: exit %d, want 0 and %q\n%s", code, want, errOut)
	}
}
