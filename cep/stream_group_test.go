package cep

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/runtime/kafka"
)

// TestGroupDoneOwnerPurges: an instance done with its own partitions
// asks whether the group is done while another instance still reads a
// repartition partition, and commits and deletes the records before its
// new offsets (purgeRepartitions) between this instance's listing of the
// group's offsets and its reading of the records past them (CI: exit 1,
// OFFSET_OUT_OF_RANGE). The check starts over from the new offsets: not
// done while records are past them, done once they are at the end. Records
// gone before offsets that no instance moved are an error, after a wait
// of movedWait (not for ever). Records gone before the owner's new offsets
// show (its commit's markers come after its deletion) are waited for.
func TestGroupDoneOwnerPurges(t *testing.T) {
	brokers := kafkaBrokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := fmt.Sprintf("group-done-purged-%d", time.Now().UnixNano())
	produceTopic(t, brokers, topic, 1, `{"card":"c1"}`+"\n"+`{"card":"c2"}`+"\n")
	group := topic + "-g"
	rep, changelog := repartitionTopic(group, []string{"country"}), group+"-changelog"
	conn := kafka.Conn{Brokers: brokers}
	if _, err := kafka.EnsureTopics(ctx, conn, []kafka.TopicSpec{{Name: rep, Partitions: 1, Purged: true}, {Name: changelog, Partitions: 1, Compact: true}}); err != nil {
		t.Fatal(err)
	}
	ends, err := kafka.EndOffsets(ctx, conn, topic)
	if err != nil {
		t.Fatal(err)
	}
	// The owner of input partition 0 and of repartition partition 0.
	txn, err := kafka.NewTxn(ctx, kafka.TxnConfig{Brokers: brokers, TransactionalID: "cepheus-" + group + "-a", Group: group, Manual: []string{rep, changelog}})
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	chk := int64(0)
	// write produces n repartition records, then commits the input at its
	// end and the repartition partition at at (none: < 0). Each of its
	// transactions has a record in the changelog, as a checkpoint's marker:
	// one of offsets alone would not end (the client sends no EndTxn).
	write := func(n int, at int64) {
		t.Helper()
		for i := range n {
			txn.ProduceTo(ctx, rep, 0, nil, fmt.Appendf(nil, "r%d", i))
		}
		txn.ProduceTo(ctx, changelog, 0, markerKey, []byte("marker"))
		offsets := map[string]kafka.Offsets{topic: {0: ends[0]}}
		if at >= 0 {
			offsets[rep] = kafka.Offsets{0: at}
		}
		chk++
		if err := txn.CommitTopics(ctx, offsets, txnMetadata(chk, "a", false)); err != nil {
			t.Fatal(err)
		}
	}
	// purge is the owner's next checkpoint and its purge: committed at
	// at, the records before it deleted.
	purge := func(at int64) {
		t.Helper()
		write(0, at)
		if err := txn.DeleteBefore(ctx, map[string]kafka.Offsets{rep: {0: at}}); err != nil {
			t.Fatal(err)
		}
	}
	write(100, 20) // records 0-99, the commit's marker at 100
	// The group's first offsets show once the broker has written the
	// transaction's markers (until then the group may not exist).
	for deadline := time.Now().Add(30 * time.Second); ; {
		c, err := kafka.GroupOffsets(ctx, conn, group, topic)
		if err != nil {
			t.Fatal(err)
		}
		if c[0].Offset == ends[0] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the group's offsets of %s: %v after 30s, want %d committed", topic, c, ends[0])
		}
		time.Sleep(20 * time.Millisecond)
	}

	reps := []repartition{{topic: rep}}
	k := &KafkaInput{Brokers: brokers, Topic: topic, Group: group}
	// check runs groupDone with the owner moving to at after the listing of
	// the first check; it returns the outcome and how many checks it took.
	check := func(at int64) (bool, error, int) {
		reads := 0
		k.beforeRepRead = func(string) {
			if reads++; reads == 1 && at > 0 {
				purge(at)
			}
		}
		done, err := groupDone(ctx, k, ends, reps, false)
		return done, err, reads
	}
	if done, err, reads := check(60); done || err != nil || reads != 2 {
		t.Fatalf("the owner at 60 amid the check, records 60-99 past it: done %v, %v, after %d reads; want not done, no error, after reading again", done, err, reads)
	}
	if done, err, reads := check(101); !done || err != nil || reads != 1 {
		t.Fatalf("the owner at the end (101) amid the check: done %v, %v, after %d reads; want done, no error, with nothing left to read once the offsets were read again", done, err, reads)
	}
	// Records 101-150 (a marker at 151), the group's offset still 101,
	// those before 130 deleted: by no instance of the group.
	write(50, -1)
	if err := txn.DeleteBefore(ctx, map[string]kafka.Offsets{rep: {0: 130}}); err != nil {
		t.Fatal(err)
	}
	done, err, _ := check(0)
	if done || err == nil || !kafka.OutOfRange(err) || !strings.Contains(err.Error(), "no instance committed past them") {
		t.Fatalf("records gone before offsets that did not move: done %v, %v; want an error saying so", done, err)
	}

	// The owner's purge before its commit shows: the broker writes a
	// transaction's markers after EndTxn answered, and the owner deletes
	// the records before its new offsets once it answered, so that the
	// check finds the records gone while the committed offsets (those
	// CommittedOffsets reads, without a transaction's) are still the old
	// ones. Here the owner deletes before 140 and commits 140 a second
	// later: not done (records 140-150 are past it), no error.
	committed := make(chan error, 1)
	reads := 0
	k.beforeRepRead = func(string) {
		if reads++; reads > 1 {
			return
		}
		if err := txn.DeleteBefore(ctx, map[string]kafka.Offsets{rep: {0: 140}}); err != nil {
			committed <- err
			return
		}
		go func() {
			time.Sleep(time.Second)
			txn.ProduceTo(ctx, changelog, 0, markerKey, []byte("marker"))
			committed <- txn.CommitTopics(ctx, map[string]kafka.Offsets{topic: {0: ends[0]}, rep: {0: 140}}, txnMetadata(chk+1, "a", false))
		}()
	}
	done, err = groupDone(ctx, k, ends, reps, false)
	if cerr := <-committed; cerr != nil {
		t.Fatal(cerr)
	}
	if done || err != nil || reads != 2 {
		t.Fatalf("the owner's records deleted before its commit at 140 shows: done %v, %v, after %d reads; want not done, no error, after reading again from 140", done, err, reads)
	}
}

// TestKafkaBoundedTopicGrown: a bounded group job finished, then its
// input topic grew. A bounded run of the group on its finished state, and
// one without the state (restored from the changelog), end at once as
// finished, as a run on a finished file does, and write nothing. Before,
// the first said "nothing to do" and waited forever for the group to
// commit the new records, and the second read them past the final
// watermark, wrote them into the repartition topic after the final
// markers, where no job read them, and waited forever for the group to
// commit them (crash soak, 2026-12-05: a bounded run over a topic
// produced twice never ended).
func TestKafkaBoundedTopicGrown(t *testing.T) {
	brokers := kafkaBrokers(t)
	topic := fmt.Sprintf("bounded-grown-%d", time.Now().UnixNano())
	lines := strings.SplitAfter(strings.TrimSpace(inOrderInput(600)), "\n")
	produceTopic(t, brokers, topic, 2, strings.Join(lines[:300], ""))
	state := t.TempDir()
	config := func() StreamConfig {
		return StreamConfig{
			Kafka: &KafkaInput{Brokers: brokers, Topic: topic, Bounded: true, batchRecords: 20,
				AlertsTopic: topic + "-alerts", Group: topic},
			StateDir: state, CheckpointInterval: 10 * time.Second, CheckpointRecords: 100, Parallelism: 1,
		}
	}
	// run runs the job with a deadline: a run that does not end is an
	// error, not a hung test.
	run := func(what string) *StreamResult {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		defer cancel()
		res, err := streamEngine(t, engineRules).Stream(ctx, config())
		if err != nil || res == nil || !res.Finished {
			t.Fatalf("%s: %v, %+v (want it finished)", what, err, res)
		}
		return res
	}
	if res := run("the first run"); res.AlreadyFinished || res.Records < 300 {
		t.Fatalf("the first run: %+v, want it to read the 300 records", res)
	}
	conn := kafka.Conn{Brokers: brokers}
	ctx := context.Background()
	rep := repartitionTopic(topic, []string{"country"})
	offsets := func() (map[int32]kafka.Committed, map[int32]int64) {
		t.Helper()
		c, err := kafka.GroupOffsets(ctx, conn, topic, topic)
		if err != nil {
			t.Fatal(err)
		}
		e, err := kafka.EndOffsets(ctx, conn, rep)
		if err != nil {
			t.Fatal(err)
		}
		return c, e
	}
	committed, repEnds := offsets()
	produceTopic(t, brokers, topic, 2, strings.Join(lines[300:], ""))
	if res := run("on the finished state"); !res.AlreadyFinished {
		t.Errorf("on the finished state: %+v, want it already finished", res)
	}
	if err := os.RemoveAll(state); err != nil {
		t.Fatal(err)
	}
	if res := run("without the state"); !res.AlreadyFinished || res.Records != 0 {
		t.Errorf("without the state: %+v, want it already finished, nothing read", res)
	}
	c, e := offsets()
	if !maps.Equal(c, committed) || !maps.Equal(e, repEnds) {
		t.Errorf("after the runs over the grown topic: the group's offsets %v, the repartition topic's ends %v; want them as the finished job left them: %v, %v", c, e, committed, repEnds)
	}
	if got := len(topicValues(t, brokers, topic+"-alerts")); got == 0 {
		t.Errorf("no alert in the topic: the job did nothing to tell")
	}
}

// TestKafkaBoundedFinalKept: a partition committed as final stays final
// when a later bounded job of the group owns it with a partition not yet
// read to its end (another instance's, unfinished, taken over): that
// job's checkpoints commit its offset again, and did so without
// " final", so a bounded run after that job stopped read the partition's
// new records, past the final watermark its first job had passed (with
// repartitioned rules, into the repartition topics after the final
// markers, where no job reads them, and waited forever).
func TestKafkaBoundedFinalKept(t *testing.T) {
	brokers := kafkaBrokers(t)
	topic := fmt.Sprintf("bounded-final-kept-%d", time.Now().UnixNano())
	conn := kafka.Conn{Brokers: brokers}
	ctx := context.Background()
	lines := strings.SplitAfter(strings.TrimSpace(inOrderInput(600)), "\n")
	// Which partition each line goes to (its card's): a topic of as many
	// partitions tells.
	produceTopic(t, brokers, topic+"-probe", 2, strings.Join(lines, ""))
	part := map[string]int32{}
	if err := kafka.ReadTopic(ctx, conn, topic+"-probe", func(p int32, _, v []byte) error {
		part[strings.TrimSpace(string(v))] = p
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The first job reads partition 0 alone; then both grow.
	var first, more []string
	for i, l := range lines {
		if p, ok := part[strings.TrimSpace(l)]; !ok {
			t.Fatalf("line %d is not in the probe topic", i)
		} else if p == 0 && i < 300 {
			first = append(first, l)
		} else {
			more = append(more, l)
		}
	}
	produceTopic(t, brokers, topic, 2, strings.Join(first, ""))
	state := t.TempDir()
	config := func() StreamConfig {
		return StreamConfig{
			Kafka: &KafkaInput{Brokers: brokers, Topic: topic, Bounded: true, batchRecords: 20,
				AlertsTopic: topic + "-alerts", Group: topic},
			StateDir: state, CheckpointInterval: 10 * time.Second, CheckpointRecords: 100, Parallelism: 1,
		}
	}
	committed := func() map[int32]kafka.Committed {
		t.Helper()
		c, err := kafka.GroupOffsets(ctx, conn, topic, topic)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	stream := func(what string, cfg StreamConfig) *StreamResult {
		t.Helper()
		rctx, cancel := context.WithTimeout(ctx, 40*time.Second)
		defer cancel()
		res, err := streamEngine(t, backtestRules).Stream(rctx, cfg)
		if err != nil || res == nil {
			t.Fatalf("%s: %v, %+v", what, err, res)
		}
		return res
	}
	if res := stream("the first run", config()); !res.Finished || int(res.Records) != len(first) {
		t.Fatalf("the first run: %+v, want it finished, %d records read", res, len(first))
	}
	c := committed()
	final := c[0]
	id, inst, _ := parseTxnMetadata(final.Metadata)
	if !txnFinal(final.Metadata) || final.Offset != int64(len(first)) || c[1].Offset != 0 {
		t.Fatalf("the first run committed %v, want partition 0 at %d as final, the empty partition 1 at 0", c, len(first))
	}
	// Partition 1 not finished, as another instance's job that read
	// nothing of it yet would leave it: the same checkpoint, not final.
	// (A transaction of offsets alone does not end: it writes a record.)
	// The jobs after restore from the changelog: the local copy says the
	// run finished, which it did not.
	if err := os.RemoveAll(state); err != nil {
		t.Fatal(err)
	}
	txn, err := kafka.NewTxn(ctx, kafka.TxnConfig{Brokers: brokers, TransactionalID: topic + "-other", Group: topic})
	if err != nil {
		t.Fatal(err)
	}
	txn.ProduceTo(ctx, topic+"-probe", 0, nil, []byte("x"))
	err = txn.CommitTopics(ctx, map[string]kafka.Offsets{topic: {1: 0}}, txnMetadata(id, inst, false))
	txn.Close()
	if err != nil {
		t.Fatal(err)
	}
	produceTopic(t, brokers, topic, 2, strings.Join(more, ""))
	// A job over both partitions, stopped after its first checkpoint:
	// partition 1 read in part, partition 0 not at all.
	cfg := config()
	cfg.hooks.afterCommit = func(int64) bool { return true }
	if res := stream("the run stopped", cfg); res.Finished || res.Records == 0 {
		t.Fatalf("the run stopped at its first checkpoint: %+v, want records read, unfinished", res)
	}
	if c := committed()[0]; c.Offset != final.Offset || !txnFinal(c.Metadata) {
		t.Errorf("after a job stopped over partitions 0 and 1, partition 0 is committed at %+v, want offset %d, final", c, final.Offset)
	}
	if res := stream("the run resumed", config()); !res.Finished {
		t.Fatalf("the run resumed: %+v, want it finished", res)
	}
	c = committed()
	if c[0].Offset != final.Offset {
		t.Errorf("the run resumed read partition 0 to %d, past its final offset %d", c[0].Offset, final.Offset)
	}
	if !txnFinal(c[0].Metadata) || !txnFinal(c[1].Metadata) {
		t.Errorf("the run resumed finished, and committed %v: want both partitions final", c)
	}
}

// TestKafkaUnboundedAfterBounded: an unbounded run of a group whose
// bounded job finished, or finished some partitions, is refused, with its state directory and without:
// the final watermark passed, every new record would be late. Before, on
// the finished state it said "nothing to do" and waited forever reading
// nothing, and without it read every new record as late.
func TestKafkaUnboundedAfterBounded(t *testing.T) {
	brokers := kafkaBrokers(t)
	topic := fmt.Sprintf("unbounded-after-%d", time.Now().UnixNano())
	lines := strings.SplitAfter(strings.TrimSpace(inOrderInput(600)), "\n")
	produceTopic(t, brokers, topic, 2, strings.Join(lines[:300], ""))
	state := t.TempDir()
	config := func(bounded bool) StreamConfig {
		return StreamConfig{
			Kafka: &KafkaInput{Brokers: brokers, Topic: topic, Bounded: bounded, batchRecords: 20,
				AlertsTopic: topic + "-alerts", Group: topic},
			StateDir: state, CheckpointInterval: time.Second, CheckpointRecords: 100, Parallelism: 1,
		}
	}
	run := func(bounded bool) (*StreamResult, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		return streamEngine(t, engineRules).Stream(ctx, config(bounded))
	}
	if res, err := run(true); err != nil || !res.Finished {
		t.Fatalf("the bounded run: %v, %+v", err, res)
	}
	produceTopic(t, brokers, topic, 2, strings.Join(lines[300:], ""))
	for _, what := range []string{"on the finished state", "without the state"} {
		if what == "without the state" {
			if err := os.RemoveAll(state); err != nil {
				t.Fatal(err)
			}
		}
		if res, err := run(false); !errors.Is(err, ErrRestore) || !strings.Contains(err.Error(), "new -group") {
			t.Errorf("an unbounded run %s: %v, %+v; want it refused, a new -group named", what, err, res)
		}
	}
	// Partition 1 not finished, as another instance's bounded job that
	// had not ended would leave it: partition 0 is final all the same.
	// The unbounded run was not refused, and read partition 0's new
	// records after its final watermark.
	ctx := context.Background()
	c, err := kafka.GroupOffsets(ctx, kafka.Conn{Brokers: brokers}, topic, topic)
	if err != nil {
		t.Fatal(err)
	}
	id, inst, _ := parseTxnMetadata(c[1].Metadata)
	txn, err := kafka.NewTxn(ctx, kafka.TxnConfig{Brokers: brokers, TransactionalID: topic + "-other", Group: topic})
	if err != nil {
		t.Fatal(err)
	}
	txn.ProduceTo(ctx, topic+"-alerts", 0, nil, []byte("x"))
	err = txn.CommitTopics(ctx, map[string]kafka.Offsets{topic: {1: c[1].Offset}}, txnMetadata(id, inst, false))
	txn.Close()
	if err != nil {
		t.Fatal(err)
	}
	if res, err := run(false); !errors.Is(err, ErrRestore) || !strings.Contains(err.Error(), "over partitions [0] of topic") {
		t.Errorf("an unbounded run with partition 0 final, 1 not: %v, %+v; want it refused, partition 0 named", err, res)
	}
	// A group with partition 0 committed as final and partition 1 never
	// committed (its instance's bounded job had not committed yet): it
	// was said to have finished the whole topic.
	other := topic + "-other-group"
	txn, err = kafka.NewTxn(ctx, kafka.TxnConfig{Brokers: brokers, TransactionalID: other + "-t", Group: other})
	if err != nil {
		t.Fatal(err)
	}
	txn.ProduceTo(ctx, topic+"-alerts", 0, nil, []byte("x"))
	err = txn.CommitTopics(ctx, map[string]kafka.Offsets{topic: {0: c[0].Offset}}, txnMetadata(id, inst, true))
	txn.Close()
	if err != nil {
		t.Fatal(err)
	}
	cfg := config(false)
	cfg.Kafka.Group, cfg.StateDir = other, t.TempDir()
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if res, err := streamEngine(t, engineRules).Stream(rctx, cfg); !errors.Is(err, ErrRestore) || !strings.Contains(err.Error(), "over partitions [0] of topic") {
		t.Errorf("an unbounded run with partition 0 final, 1 never committed: %v, %+v; want it refused, partition 0 named", err, res)
	}
}

// TestKafkaBoundedAfterLive: a bounded run of a group whose unbounded run
// read the whole topic and was stopped (its offsets at the ends, not
// final) runs a job that reads nothing and sends the final watermark: the
// alerts the live run held for later (windows still open at its end) come
// out, and the alerts topic holds those of a bounded run of a fresh group,
// each once. A bounded run after that has nothing to do. Before, the
// first bounded run said "nothing to do" and the held alerts never came.
func TestKafkaBoundedAfterLive(t *testing.T) {
	brokers := kafkaBrokers(t)
	topic := fmt.Sprintf("bounded-after-live-%d", time.Now().UnixNano())
	produceTopic(t, brokers, topic, 2, inOrderInput(300))
	conn := kafka.Conn{Brokers: brokers}
	state := t.TempDir()
	config := func(group string, bounded bool) StreamConfig {
		return StreamConfig{
			Kafka:    &KafkaInput{Brokers: brokers, Topic: topic, Bounded: bounded, AlertsTopic: group + "-alerts", Group: group},
			StateDir: filepath.Join(state, group), CheckpointInterval: 20 * time.Millisecond, Parallelism: 1,
		}
	}
	run := func(what string, cfg StreamConfig) *StreamResult {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		res, err := streamEngine(t, engineRules).Stream(ctx, cfg)
		if err != nil || res == nil || !res.Finished {
			t.Fatalf("%s: %v, %+v (want it finished)", what, err, res)
		}
		return res
	}
	if res := run("the reference run", config(topic+"-ref", true)); res.AlreadyFinished {
		t.Fatalf("the reference run: %+v", res)
	}
	want := alertIDsOf(topicValues(t, brokers, topic+"-ref-alerts"))

	// The live run, stopped once the group has committed every partition
	// at its end, the repartition topic's (two_big_in_country's) too: a
	// bounded run then had nothing to do.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := streamEngine(t, engineRules).Stream(ctx, config(topic, false))
		done <- err
	}()
	ends, err := kafka.EndOffsets(ctx, conn, topic)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		c, err := kafka.GroupOffsets(ctx, conn, topic, topic)
		if err != nil {
			t.Fatal(err)
		}
		caughtUp := true
		for p, end := range ends {
			caughtUp = caughtUp && c[p].Offset == end
		}
		rep := repartitionTopic(topic, []string{"country"})
		rc, err := kafka.GroupOffsets(ctx, conn, topic, rep)
		if err != nil {
			t.Fatal(err)
		}
		rends, err := kafka.EndOffsets(ctx, conn, rep)
		if err != nil && !errors.Is(err, kafka.ErrNoTopic) {
			t.Fatal(err)
		}
		for p, end := range rends {
			caughtUp = caughtUp && rc[p].Offset == end
		}
		if caughtUp {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the live run ended: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the live run did not commit the ends %v in 60 s: %v", ends, c)
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the live run, cancelled: %v", err)
	}
	live := alertIDsOf(topicValues(t, brokers, topic+"-alerts"))
	if len(live) >= len(want) {
		t.Fatalf("the live run raised %d alerts, the reference %d: none held for a final watermark, nothing to check", len(live), len(want))
	}
	if res := run("the bounded run after the live one", config(topic, true)); res.AlreadyFinished || res.Stats.RunRecords != 0 {
		t.Errorf("the bounded run after the live one: %+v, want a job that reads nothing and finishes", res)
	}
	if got := alertIDsOf(topicValues(t, brokers, topic+"-alerts")); !slices.Equal(got, want) {
		t.Errorf("after the bounded run: %d alerts (the live run's %d), the reference %d (or they differ)", len(got), len(live), len(want))
	}
	if res := run("a second bounded run", config(topic, true)); !res.AlreadyFinished {
		t.Errorf("a second bounded run: %+v, want nothing to do", res)
	}
}

// TestKafkaStandbyInstance: an instance of a group that gets no partition
// (one more instance than the topic has partitions) shows none, holds no
// keys, and has its state durable now, as nothing a crash would read
// again is left: its durable time was zero (no metric), and an instance
// whose partitions all went to another kept their gauges and a durable
// time that aged (an alert on its age fired; TestMonitorUnassigned).
// A deploy, a rollback or a promote sent to the standby is refused at
// once (ErrStandby): a deploy waited for a job until its deadline, a
// rollback said there was no previous version (a trial).
// Once the owner stops, the standby takes the partition over, at its
// watermark (it had none until new records came).
func TestKafkaStandbyInstance(t *testing.T) {
	brokers := kafkaBrokers(t)
	topic := fmt.Sprintf("standby-%d", time.Now().UnixNano())
	produceTopic(t, brokers, topic, 1, deployInput(30))
	a := startRulesTopicInstance(t, brokers, topic, "a", filepath.Join(t.TempDir(), "a"))
	waitFor(t, 60*time.Second, "a reads the partition", func() bool { return a.m.Ready() && a.m.Snapshot().Partitions == 1 })
	b := startRulesTopicInstance(t, brokers, topic, "b", filepath.Join(t.TempDir(), "b"))
	// b joins, the group rebalances, a keeps its partition (sticky).
	waitFor(t, 60*time.Second, "b standing by with its state durable", func() bool {
		s := b.m.Snapshot()
		return !s.DurableAt.IsZero() && a.m.Ready()
	})
	time.Sleep(1500 * time.Millisecond) // three looks at b's assignment
	s := b.m.Snapshot()
	if s.Partitions != 0 || len(s.PartitionWatermarks) != 0 || s.Ready || s.Progress.Keys != 0 {
		t.Errorf("standby b: %d partitions %v, ready %v, %d keys; want none, not ready", s.Partitions, s.PartitionWatermarks, s.Ready, s.Progress.Keys)
	}
	if age := time.Since(s.DurableAt); age > time.Second {
		t.Errorf("standby b's state durable %v ago; want under 1s: it has none to lose", age)
	}
	if !s.Standby {
		t.Errorf("standby b's snapshot says it is no standby: %+v", s)
	}
	// A call sent to the standby is refused at once: it waited for a job
	// until its deadline (a rollback said there was no previous version).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, errDeploy := b.m.Deploy(ctx, Deploy{Name: "v2.cep", Source: []byte(deployV2Kafka)})
	_, errRollback := b.m.Rollback(ctx, SwitchOptions{})
	_, errPromote := b.m.Promote(ctx, SwitchOptions{})
	for what, err := range map[string]error{"deploy": errDeploy, "rollback": errRollback, "promote": errPromote} {
		if !errors.Is(err, ErrStandby) {
			t.Errorf("a %s sent to standby b: %v; want ErrStandby", what, err)
		}
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the calls to standby b took %v; want an answer at once", took)
	}
	if s := a.m.Snapshot(); s.Partitions != 1 || s.Progress.Keys == 0 {
		t.Errorf("a: %d partitions, %d keys; want the partition and its keys", s.Partitions, s.Progress.Keys)
	}
	aWM := a.m.Snapshot().Progress.Watermark
	a.stop()
	waitFor(t, 60*time.Second, "b takes the partition over", func() bool {
		s := b.m.Snapshot()
		return s.Ready && s.Partitions == 1 && s.Progress.Keys > 0
	})
	// Its watermark is a's, restored with the partition, though no record
	// came since: it was MinTime (-Inf, status "none yet") until one did.
	if got := b.m.Snapshot().Progress.Watermark; got != aWM {
		t.Errorf("b took the partition over at watermark %v; want a's, %v", got, aWM)
	}
	if b.m.Snapshot().Standby {
		t.Errorf("b reads the partition and says it is a standby")
	}
}

// TestMonitorUnassigned: an instance whose partitions all went to
// another (paused past its session timeout) drops their gauges and those
// of the state it held, and keeps its counters.
func TestMonitorUnassigned(t *testing.T) {
	m := NewStreamMonitor()
	m.s.Partitions, m.s.PartitionWatermarks, m.s.IdlePartitions = 2, map[string]int64{"t-0": 5, "t-1": 7}, map[string]bool{"t-1": true}
	m.s.KafkaLag = map[string]int64{"t-0": 3}
	m.s.Progress.Keys, m.s.Progress.Buffered, m.s.Progress.PartialMatches, m.s.Progress.StateBytes = 10, 4, 2, 900
	m.s.Progress.Records, m.s.Progress.Alerts, m.s.DurableAt = 100, 7, time.Now().Add(-time.Hour)
	m.s.Aggregates, m.s.AggregateHeld = []AggregateStats{{Name: "card_spend", Keys: 6, Dropped: 3, HotKeys: 1}}, 12
	m.unassigned()
	s := m.Snapshot()
	if s.Partitions != 0 || s.PartitionWatermarks != nil || s.IdlePartitions != nil || s.KafkaLag != nil {
		t.Errorf("partitions after unassigned: %d %v %v %v; want none", s.Partitions, s.PartitionWatermarks, s.IdlePartitions, s.KafkaLag)
	}
	if p := s.Progress; p.Keys != 0 || p.Buffered != 0 || p.PartialMatches != 0 || p.StateBytes != 0 {
		t.Errorf("state gauges after unassigned: %+v; want 0", p)
	}
	if p := s.Progress; p.Records != 100 || p.Alerts != 7 {
		t.Errorf("counters after unassigned: %d records, %d alerts; want 100 and 7 kept", p.Records, p.Alerts)
	}
	// The aggregates' keys and held events are state of the partitions
	// gone too; the events they dropped are a counter.
	if want := []AggregateStats{{Name: "card_spend", Dropped: 3}}; !slices.Equal(s.Aggregates, want) || s.AggregateHeld != 0 {
		t.Errorf("aggregates after unassigned: %+v, %d held; want %+v, 0 held", s.Aggregates, s.AggregateHeld, want)
	}
	if age := time.Since(s.DurableAt); age > time.Minute {
		t.Errorf("durable %v ago after unassigned; want now", age)
	}
}

// TestMonitorCountersNeverGoDown: a job that restores an earlier
// checkpoint in the same process (a Kafka job after a rebalance: the
// soak trial paused an instance past its session timeout, and
// cepheus_records_total went from 217,692 back to 209,100) publishes the
// checkpoint's counters; the monitor keeps the highest until the job's
// pass them, and its gauges follow the job.
func TestMonitorCountersNeverGoDown(t *testing.T) {
	e, err := New(WithRuleset(loadCardsRuleset(t)))
	if err != nil {
		t.Fatal(err)
	}
	e.plan = e.ownPlan(time.Now())
	c := make([]ruleFigure, len(e.rules))
	m := NewStreamMonitor()
	progress := func(records, dead, late, alerts, keys int64) StreamProgress {
		var p StreamProgress
		p.Records, p.Decoded, p.Dead, p.Ahead = records, records-dead, dead, dead/2
		p.Late, p.Alerts, p.Keys = late, alerts, keys
		return p
	}
	type figures struct{ records, decoded, dead, ahead, late, alerts, keys int64 }
	check := func(when string, want figures) {
		t.Helper()
		p := m.Snapshot().Progress
		got := figures{p.Records, p.Decoded, p.Dead, p.Ahead, p.Late, p.Alerts, p.Keys}
		if got != want {
			t.Errorf("%s: %+v; want %+v", when, got, want)
		}
	}
	m.publish(e, progress(1000, 10, 4, 7, 50), c, nil, true, 1, nil, nil, nil, nil, nil, 0)
	check("first job", figures{1000, 990, 10, 5, 4, 7, 50})
	// The next job restored a checkpoint taken at record 900.
	m.publish(e, progress(900, 8, 3, 6, 40), c, nil, true, 1, nil, nil, nil, nil, nil, 0)
	check("after the restore", figures{1000, 990, 10, 5, 4, 7, 40})
	m.publish(e, progress(1100, 9, 5, 8, 45), c, nil, true, 1, nil, nil, nil, nil, nil, 0)
	check("past the highest", figures{1100, 1091, 10, 5, 5, 8, 45})

	// An aggregate's dropped events are a counter too
	// (cepheus_aggregate_dropped_total); its keys are a gauge.
	aggs := func(keys int, dropped uint64) []AggregateStats {
		return []AggregateStats{{Name: "other", Keys: 1, Dropped: 9}, {Name: "velocity", Keys: keys, Dropped: dropped}}
	}
	checkAgg := func(when string, keys int, dropped uint64) {
		t.Helper()
		got := m.Snapshot().Aggregates
		if len(got) != 2 || got[1].Keys != keys || got[1].Dropped != dropped || got[0].Dropped != 9 {
			t.Errorf("%s: aggregates %+v; want velocity's keys %d, dropped %d", when, got, keys, dropped)
		}
	}
	m.publish(e, progress(1200, 9, 5, 8, 45), c, nil, true, 2, nil, nil, nil, nil, aggs(30, 12), 0)
	checkAgg("two partitions", 30, 12)
	// A rebalance left the instance one partition, whose state dropped 5.
	m.publish(e, progress(1200, 9, 5, 8, 45), c, nil, true, 1, nil, nil, nil, nil, aggs(14, 5), 0)
	checkAgg("after the rebalance", 14, 12)
	m.unassigned()
	if got := m.Snapshot().Aggregates; len(got) != 2 || got[1].Dropped != 12 || got[1].Keys != 0 {
		t.Errorf("unassigned: aggregates %+v; want velocity's dropped 12, no keys", got)
	}
	m.publish(e, progress(1200, 9, 5, 8, 45), c, nil, true, 1, nil, nil, nil, nil, aggs(14, 13), 0)
	checkAgg("past the highest", 14, 13)
}

// TestKafkaLookupCountersAcrossRebalance: a group member's lookups (their
// counters and caches) go on across the jobs of its partitions: after a
// rebalance its job restores a checkpoint and reads on, and the lookups'
// counters, counted since the process started, started again at 0 (an
// outage before the rebalance vanished from the metrics, status and the
// end summary).
func TestKafkaLookupCountersAcrossRebalance(t *testing.T) {
	brokers := kafkaBrokers(t)
	const n = 300
	topic, _ := produceIDEvents(t, brokers, "lookup-rebalance", n)
	rs := enrichedOnceRules(t, "open")
	type instance struct {
		m    *StreamMonitor
		mu   sync.Mutex
		log  []string
		done chan struct{}
	}
	start := func(name string) (*instance, context.CancelFunc) {
		in := &instance{m: NewStreamMonitor(), done: make(chan struct{})}
		ctx, cancel := context.WithCancel(context.Background())
		cfg := StreamConfig{
			Kafka: &KafkaInput{Brokers: brokers, Topic: topic, AlertsTopic: topic + "-alerts", Group: topic,
				InstanceID: name, SessionTimeout: 2 * time.Second},
			StateDir: filepath.Join(t.TempDir(), name), CheckpointInterval: 100 * time.Millisecond, Parallelism: 1, Monitor: in.m,
			Logf: func(format string, args ...any) {
				in.mu.Lock()
				in.log = append(in.log, fmt.Sprintf(format, args...))
				in.mu.Unlock()
			},
		}
		e := enrichedOnceEngine(t, rs, newChangingSource(func(string, int) bool { return false }))
		go func() {
			defer close(in.done)
			if _, err := e.Stream(ctx, cfg); err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("instance %s: %v", name, err)
			}
		}()
		stop := func() { cancel(); <-in.done }
		t.Cleanup(stop)
		return in, stop
	}
	looked := func(in *instance) uint64 {
		if ls := in.m.Snapshot().Lookups; len(ls) == 1 {
			return ls[0].Misses
		}
		return 0
	}
	a, _ := start("a")
	waitFor(t, 60*time.Second, "a looks every event up", func() bool { return looked(a) == n })
	rebalanced := func(times int) bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		k := 0
		for _, l := range a.log {
			if strings.Contains(l, "this instance now reads partitions") {
				k++
			}
		}
		return k >= times && a.m.Ready()
	}
	b, stopB := start("b")
	waitFor(t, 60*time.Second, "the group shares the partitions out", func() bool {
		return rebalanced(1) && b.m.Ready() && b.m.Snapshot().Partitions > 0
	})
	if got := looked(a); got != n {
		t.Errorf("a's lookups after the rebalance: %d keys looked up, want the %d before it (nothing new came)", got, n)
	}
	stopB()
	waitFor(t, 60*time.Second, "a takes every partition again", func() bool { return rebalanced(2) })
	if got := looked(a); got != n {
		t.Errorf("a's lookups after b left: %d keys looked up, want %d", got, n)
	}
}
