package cep

import (
	"context"
	"fmt"
	"maps"
	"os"
	"strings"
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
// gone before offsets that no instance moved are an error, not a wait.
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
		done, err := groupDone(ctx, k, ends, reps)
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
