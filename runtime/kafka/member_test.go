package kafka

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// nextChange waits for m's next change.
func nextChange(t *testing.T, m *Member, what string) Change {
	t.Helper()
	select {
	case c := <-m.Changes():
		return c
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: no change after 30s (owned %v)", what, m.Owned())
	}
	return Change{}
}

// TestMemberGroup: two static members of one group share a 6-partition
// topic; the first hands over its revoked partitions only once it says
// Done; a transaction commits offsets under the member's generation, and
// one under a generation the group left behind is refused; a member that
// leaves gives its partitions back at once, and one restarted with the
// same instance id within the session timeout gets its partitions back.
func TestMemberGroup(t *testing.T) {
	brokers := realBrokers(t)
	t.Parallel()
	ctx := testContext(t)
	topic, group := topicName(t), topicName(t)+"-g"
	if _, err := EnsureTopics(ctx, Conn{Brokers: brokers}, []TopicSpec{{Name: topic, Partitions: 6}}); err != nil {
		t.Fatal(err)
	}
	cfg := func(id string) MemberConfig {
		return MemberConfig{Conn: Conn{Brokers: brokers}, Group: group, Topic: topic, InstanceID: id, SessionTimeout: 6 * time.Second}
	}
	a, err := NewMember(ctx, cfg("a"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ca := nextChange(t, a, "a's first assignment")
	if !slices.Equal(ca.Assigned, []int32{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("a alone: assigned %v, want all six", ca.Assigned)
	}
	ca.Done()
	if owned, seq := a.OwnedSeq(); ca.Seq != 1 || seq != 1 || !slices.Equal(owned, ca.Assigned) {
		t.Fatalf("a's first change has Seq %d; OwnedSeq %v, %d: want 1, and the change in it", ca.Seq, owned, seq)
	}
	_, oldGen := a.Metadata()

	b, err := NewMember(ctx, cfg("b"))
	if err != nil {
		t.Fatal(err)
	}
	rev := nextChange(t, a, "a's revocation")
	if len(rev.Revoked) != 3 || rev.Lost {
		t.Fatalf("a's revocation: %+v, want three partitions revoked", rev)
	}
	// The revocation is in a's partitions before it comes (the group's
	// job, reading them now, takes it as seen, see cep.runMember).
	if owned, seq := a.OwnedSeq(); rev.Seq != 2 || seq < rev.Seq || len(owned) != 3 || slices.ContainsFunc(owned, func(p int32) bool { return slices.Contains(rev.Revoked, p) }) {
		t.Fatalf("a's revocation has Seq %d; OwnedSeq %v, %d: want 2, and the revoked partitions gone", rev.Seq, owned, seq)
	}
	// b gets nothing until a is done with the revoked partitions.
	select {
	case c := <-b.Changes():
		t.Fatalf("b was assigned %v before a let its partitions go", c.Assigned)
	case <-time.After(500 * time.Millisecond):
	}
	rev.Done()
	cb := nextChange(t, b, "b's assignment")
	cb.Done()
	if !slices.Equal(cb.Assigned, rev.Revoked) {
		t.Fatalf("b assigned %v, a revoked %v", cb.Assigned, rev.Revoked)
	}
	if got := slices.Sorted(slices.Values(append(a.Owned(), b.Owned()...))); !slices.Equal(got, []int32{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("a owns %v, b %v: want the six partitions between them", a.Owned(), b.Owned())
	}

	// b's transaction commits b's offsets under its generation.
	txn, err := NewTxn(ctx, TxnConfig{Brokers: brokers, TransactionalID: topic + "-b", Group: group, Member: b})
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	// The partitions b was assigned (Owned, read again now, may be
	// amid a later round of the cooperative rebalance).
	offsets := Offsets{}
	for _, p := range cb.Assigned {
		offsets[p] = 10
	}
	txn.Produce(ctx, topic, []byte("k"), []byte("v"))
	if err := txn.Commit(ctx, topic, offsets, "chk=1"); err != nil {
		t.Fatalf("b's commit under its generation: %v", err)
	}
	// The offsets show once the coordinator has written the
	// transaction's markers (a moment after the commit returns, on a
	// loaded machine).
	var got map[int32]Committed
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got, err = GroupOffsets(ctx, Conn{Brokers: brokers}, group, topic)
		if err != nil || len(got) == 3 || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || len(got) != 3 {
		t.Fatalf("the group's offsets: %v, %v; want b's three", got, err)
	}
	// A commit under the generation before b joined is refused.
	zombie, err := NewTxn(ctx, TxnConfig{Brokers: brokers, TransactionalID: topic + "-a", Group: group})
	if err != nil {
		t.Fatal(err)
	}
	defer zombie.Close()
	zombie.Produce(ctx, topic, []byte("k"), []byte("zombie"))
	err = zombie.commitOffsetsAs(ctx, topic, Offsets{rev.Revoked[0]: 99}, "chk=9", "a-old", oldGen, "a")
	if !errors.Is(err, kerr.IllegalGeneration) && !errors.Is(err, kerr.UnknownMemberID) && !errors.Is(err, kerr.FencedInstanceID) {
		t.Errorf("a commit under the old generation %d: %v, want ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID", oldGen, err)
	}

	// b leaves: a gets everything back at once.
	if err := b.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	b.Close()
	left := time.Now()
	ca = nextChange(t, a, "a after b left")
	ca.Done()
	if !slices.Equal(a.Owned(), []int32{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("a after b left owns %v, want all six", a.Owned())
	}
	t.Logf("a took b's partitions %v after b left", time.Since(left).Round(time.Millisecond))

	// a restarts (closed, not left) with its instance id: its partitions
	// come back.
	a.Close()
	a2, err := NewMember(ctx, cfg("a"))
	if err != nil {
		t.Fatal(err)
	}
	defer a2.Close()
	restarted := time.Now()
	c := nextChange(t, a2, "a restarted")
	c.Done()
	if !slices.Equal(c.Assigned, []int32{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("a restarted: assigned %v, want all six", c.Assigned)
	}
	t.Logf("a restarted got its partitions back in %v", time.Since(restarted).Round(time.Millisecond))
}

// TestMemberNewerThan: a commit refused amid a rebalance waits for the
// member to learn the newer generation, unless the member lost its
// partitions under the refused one or later (then, or at the deadline,
// it is not retried).
func TestMemberNewerThan(t *testing.T) {
	m := &Member{memberID: "m-1", generation: 4, lostGen: -1}
	set := func(f func()) {
		go func() {
			time.Sleep(30 * time.Millisecond)
			m.mu.Lock()
			defer m.mu.Unlock()
			f()
		}()
	}
	set(func() { m.memberID, m.generation = "m-2", 5 })
	if id, gen, ok := m.newerThan(context.Background(), 4, 5*time.Second); !ok || id != "m-2" || gen != 5 {
		t.Errorf("a revocation's join: %q, %d, %v; want m-2, 5, true", id, gen, ok)
	}
	set(func() { m.lostGen = m.generation; m.memberID, m.generation = "m-3", 7 })
	if _, _, ok := m.newerThan(context.Background(), 5, 5*time.Second); ok {
		t.Error("a loss under the refused generation, then a join: retried")
	}
	begin := time.Now()
	if _, _, ok := m.newerThan(context.Background(), 7, 50*time.Millisecond); ok || time.Since(begin) > 2*time.Second {
		t.Errorf("no newer join: %v after %v; want false at the deadline", ok, time.Since(begin))
	}
	if _, _, ok := m.newerThan(context.Background(), 5, time.Second); ok {
		t.Error("work of generation 5, lost under 5: retried")
	}
}
