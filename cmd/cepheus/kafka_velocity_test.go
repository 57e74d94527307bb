//go:build linux

package main

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/runtime/kafka"
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

// velocityJob is the velocity ruleset over generated card events in a
// topic, and what the backtest of those events gives.
type velocityJob struct {
	rules, topic string
	want         []string // the backtest's alerts, velocityAlerts
}

// newVelocityJob writes the velocity ruleset (rulesets/velocity.cep, its
// thresholds lowered so that generated data gives alerts of all three
// rules) into dir, generates perDay card events, backtests them (at least
// 10 alerts of each rule, or the test fails) and produces them into a new
// 4-partition topic keyed by card_id.
func newVelocityJob(t *testing.T, dir, brokers string, perDay int) velocityJob {
	t.Helper()
	events := filepath.Join(dir, "events.jsonl")
	if code, _, errOut := cepheus(t, "gen", "-history-days", "0", "-days", "1", "-events-per-day", strconv.Itoa(perDay), "-customers", "800",
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
	job := velocityJob{rules: writeFile(t, dir, "velocity.cep", text), topic: kafkaTopic(t, "velocity")}
	bt := filepath.Join(dir, "backtest.jsonl")
	if code, _, errOut := cepheus(t, "backtest", "-q", "-rules", job.rules, "-events", events, "-alerts", bt); code != 0 {
		t.Fatalf("backtest: exit %d\n%s", code, errOut)
	}
	job.want = velocityAlerts(readLines(t, bt))
	for _, r := range []string{"merchant_card_burst", "card_spend_spree", "card_country_hopping"} {
		if n := strings.Count(strings.Join(job.want, "\n"), `"rule":"`+r+`"`); n < 10 {
			t.Fatalf("the backtest has %d alerts of %s: too few to tell", n, r)
		}
	}
	if code, _, errOut := cepheus(t, "produce", "-brokers", brokers, "-topic", job.topic, "-partitions", "4",
		"-key", "card_id", "-time-field", "ts", "-events", events); code != 0 {
		t.Fatalf("produce: exit %d\n%s", code, errOut)
	}
	return job
}

// velocityTest is what a test of the velocity job over Kafka starts with:
// the brokers (or the test skipped), the cepheus binary, one core for each
// instance it runs (GOMAXPROCS=1: the slower a run, the later its end), a
// temporary directory, and the job of perDay events (newVelocityJob).
func velocityTest(t *testing.T, perDay int) (brokers, bin, dir string, job velocityJob) {
	t.Helper()
	brokers = kafkaBrokers(t)
	bin = buildCepheus(t)
	t.Setenv("GOMAXPROCS", "1")
	dir = t.TempDir()
	return brokers, bin, dir, newVelocityJob(t, dir, brokers, perDay)
}

// velocityInstance is the command line of instance name of job's
// transactional run by group: bounded, its state under dir, a 2 s session
// timeout, a checkpoint every 5,000 records besides every 50 ms,
// parallelism 2, its partitions' aggregators on workers workers; more
// flags after them (a later one overrides).
func velocityInstance(job velocityJob, brokers, group, dir, name, workers string, more ...string) []string {
	args := []string{"run", "-rules", job.rules, "-brokers", brokers, "-input-topic", job.topic, "-bounded",
		"-alerts-topic", group + "-alerts", "-group", group, "-record-key", "card_id",
		"-instance-id", name, "-state", filepath.Join(dir, name+"-state"), "-session-timeout", "2s",
		"-checkpoint-interval", "50ms", "-checkpoint-records", "5000", "-parallelism", "2", "-aggregate-workers", workers}
	return append(args, more...)
}

// killAll kills the children still running (a deferred clean-up).
func killAll(cs ...*child) {
	for _, c := range cs {
		select {
		case <-c.done:
		default:
			c.kill()
		}
	}
}

// awaitEnd waits at most a minute for instance name's child to end.
func awaitEnd(t *testing.T, c *child, name string) crashExit {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(time.Minute):
		c.kill()
		t.Fatalf("instance %s still runs after a minute\n%s", name, c.out.String())
	}
	return c.exit()
}

// awaitTakeover waits until instance c, still running, restores
// partitions from group's changelog once more than the before times it
// had (its restores at its start): it took over those of an instance
// killed and away past its session timeout. Waited for, not slept: on a
// busy machine the group may notice the death late, and an instance
// restarted within it would get its partitions back from its own state.
func awaitTakeover(t *testing.T, c *child, group string, before int) {
	t.Helper()
	taken := "changelog topic " + group + "-changelog"
	for deadline := time.Now().Add(time.Minute); strings.Count(c.out.String(), taken) == before; {
		select {
		case <-c.done:
			t.Fatalf("the surviving instance ended before taking the killed one's partitions over: %s\n%s", c.exit().describe(), c.exit().tail())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the surviving instance has not taken the killed one's partitions over a minute after the kill\n%s", c.out.String())
		}
	}
}

// consumeAlerts is the alerts of topic, read_committed, as velocityAlerts.
func consumeAlerts(t *testing.T, bin, brokers, topic string) []string {
	t.Helper()
	var got []string
	for _, l := range consumeTopic(t, bin, brokers, topic) {
		got = append(got, string(l))
	}
	return velocityAlerts(got)
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
	// 75,000 events: a run lasts long enough to be killed midway (with
	// 30,000, once the engine got faster, instance a of the group
	// sometimes committed the end of its partitions by its third
	// transaction, and b found nothing to take over).
	brokers, bin, dir, job := velocityTest(t, 75000)
	rules, topic, want := job.rules, job.topic, job.want

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
		return velocityInstance(job, brokers, group, dir, name, workers)
	}
	a := startChild(t, bin, instance("a"), "kafka.after-commit@3")
	b := startChild(t, bin, instance("b"), "")
	defer func() { killAll(a, b) }()
	if e := awaitEnd(t, a, "a"); !e.killed {
		t.Fatalf("instance a, to be killed after its third transaction: %s\n%s", e.describe(), e.tail())
	}
	// Away past its session timeout: b takes a's partitions over,
	// restoring them from the changelog.
	awaitTakeover(t, b, group, strings.Count(b.out.String(), "changelog topic "+group+"-changelog"))
	a = startChild(t, bin, instance("a"), "")
	restored := false
	for _, in := range []struct {
		c    *child
		name string
	}{{a, "a"}, {b, "b"}} {
		e := awaitEnd(t, in.c, in.name)
		if e.killed || e.code != 0 {
			t.Fatalf("instance %s: %s\n%s", in.name, e.describe(), e.tail())
		}
		restored = restored || strings.Contains(e.stderr, "changelog topic "+group+"-changelog")
	}
	if !restored {
		t.Errorf("no instance restored partitions from the changelog")
	}
	sameAlerts(t, "two instances, one killed (read_committed)", consumeAlerts(t, bin, brokers, group+"-alerts"), want)
}

// TestKafkaVelocityEndsCommitted kills an instance of a group of two
// (velocity.cep: merchant_cards is computed on the repartition topic of
// merchant_id) right after the transaction that commits its input
// partitions at their ends, with their final markers, while its
// repartition partitions are not complete: failpoint kafka.ends-committed,
// whose own final markers, at least, are still to be read back there. At
// once, before anyone can take the partitions over (the session timeout),
// the test checks that the group's offsets say so (leftOver). Then:
//   - taken over: the killed instance stays away; the other takes its
//     partitions over past the session timeout, restoring them from the
//     changelog (their input finished, their final markers sent), reads
//     their last records and finishes the job alone;
//   - restarted: the killed instance comes back at once (within its
//     session timeout of 10 s), restores from its local state (its
//     local copy and the changelog, or its own local checkpoint; which
//     partitions it gets back is the group's choice), and finishes.
//
// Both times every instance ends with exit status 0, and the alerts
// topic, read read_committed, holds the backtest's alerts, each once.
func TestKafkaVelocityEndsCommitted(t *testing.T) {
	brokers, bin, dir, job := velocityTest(t, 30000)
	for _, restart := range []bool{false, true} {
		name := map[bool]string{false: "taken over", true: "restarted"}[restart]
		t.Run(name, func(t *testing.T) {
			group := job.topic + "-" + strings.ReplaceAll(name, " ", "-")
			dir := filepath.Join(dir, group)
			var more []string
			if restart {
				more = []string{"-session-timeout", "10s"}
			}
			a := startChild(t, bin, velocityInstance(job, brokers, group, dir, "a", "1", more...), "kafka.ends-committed")
			b := startChild(t, bin, velocityInstance(job, brokers, group, dir, "b", "1"), "")
			defer func() { killAll(a, b) }()
			if e := awaitEnd(t, a, "a"); !e.killed {
				t.Fatalf("instance a, to be killed once its input partitions are committed at their ends, its repartition partitions not complete (failpoint kafka.ends-committed): %s\n%s", e.describe(), e.tail())
			}
			restores := strings.Count(b.out.String(), "changelog topic "+group+"-changelog")
			parts := leftOver(t, brokers, group, job.topic, group+"-repartition-merchant_id", "a")
			t.Logf("instance a killed with partitions %v committed at their ends, records of their repartition partitions unread", parts)
			ins := map[string]*child{"b": b}
			if restart {
				a = startChild(t, bin, velocityInstance(job, brokers, group, dir, "a", "1", more...), "")
				ins["a"] = a
			} else {
				awaitTakeover(t, b, group, restores)
			}
			for name, c := range ins {
				if e := awaitEnd(t, c, name); e.killed || e.code != 0 {
					t.Fatalf("instance %s: %s\n%s", name, e.describe(), e.tail())
				}
			}
			if restart {
				// From its local copy and the changelog, or from its
				// own local checkpoint as it is (when the one killed
				// after was a local copy). Which partitions it gets
				// back is the group's choice: it joins as a new member
				// (CI: [0 3] where it had [0 1]).
				merged := regexp.MustCompile(`restoring partitions \[[0-9 ]+\] of topic ` + regexp.QuoteMeta(job.topic) + ` from the local copy`)
				own := regexp.MustCompile(`resuming from checkpoint [0-9]+ \(` + regexp.QuoteMeta(filepath.Join(dir, "a-state")))
				if e := a.exit(); !merged.MatchString(e.stderr) && !own.MatchString(e.stderr) {
					t.Errorf("instance a, restarted (it had partitions %v), did not restore from its local state\n%s", parts, e.tail())
				}
			}
			sameAlerts(t, "two instances, one killed with its input committed at its ends (read_committed)", consumeAlerts(t, bin, brokers, group+"-alerts"), job.want)
		})
	}
}

// leftOver returns the partitions of topic whose offsets group's
// instance inst committed at their ends, not as final (a bounded job's
// last checkpoint), and fails the test unless there are some and
// repartition topic rep has records past the group's offsets of the same
// partitions, also committed by inst: the last records of the partitions
// it left to the others. The instance is dead and no other can own its
// partitions until its session timeout has passed.
//
// The records are read read_committed: a transaction of another
// instance open since before inst's last one holds that read's end, until
// it commits (within a checkpoint interval); the read is made again until
// it finds a record, or another instance has taken the partitions over.
func leftOver(t *testing.T, brokers, group, topic, rep, inst string) []int32 {
	t.Helper()
	conn := kafka.Conn{Brokers: strings.Split(brokers, ",")}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ends, err := kafka.EndOffsets(ctx, conn, topic)
	if err != nil {
		t.Fatal(err)
	}
	byInst := func(c kafka.Committed) bool {
		return strings.HasSuffix(strings.TrimSuffix(c.Metadata, " final"), " inst="+inst)
	}
	for {
		committed, err := kafka.CommittedOffsets(ctx, conn, group, topic)
		if err != nil {
			t.Fatal(err)
		}
		repCommitted, err := kafka.CommittedOffsets(ctx, conn, group, rep)
		if err != nil {
			t.Fatal(err)
		}
		var parts []int32
		from := map[int32]int64{}
		for _, p := range slices.Sorted(maps.Keys(ends)) {
			c := committed[p]
			if !byInst(c) || c.Offset != ends[p] || strings.HasSuffix(c.Metadata, " final") {
				continue
			}
			if rc := repCommitted[p]; !byInst(rc) {
				t.Fatalf("partition %d of %s: committed by instance %s at its end, but its offset of %s is %d %q: another instance has taken it over, and no record past %s's offset was found before", p, topic, inst, rep, rc.Offset, rc.Metadata, inst)
			}
			parts = append(parts, p)
			from[p] = repCommitted[p].Offset
		}
		if len(parts) == 0 {
			t.Fatalf("no partition of %s committed by instance %s at its end (not final): ends %v, offsets %v", topic, inst, ends, committed)
		}
		unread := 0
		if _, err := kafka.ReadPartitions(ctx, conn, rep, parts, from, func(int32, []byte, []byte) error { unread++; return nil }); err != nil {
			t.Fatal(err)
		}
		if unread > 0 {
			return parts
		}
		select {
		case <-ctx.Done():
			t.Fatalf("partitions %v of %s: no record past the offsets %v instance %s committed (complete) within a minute", parts, rep, from, inst)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
