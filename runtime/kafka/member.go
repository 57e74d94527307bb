package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// MemberConfig configures [NewMember]. Brokers, Group, Topic and
// InstanceID are required.
type MemberConfig struct {
	Conn
	// Group is the consumer group; Topic the topic whose partitions its
	// members share.
	Group, Topic string
	// InstanceID is the member's static id (static membership): a member
	// restarted with the same id within SessionTimeout gets its partitions
	// back without a rebalance of the others.
	InstanceID string
	// SessionTimeout is how long the group waits for a silent member
	// before it moves its partitions (default 10s).
	SessionTimeout time.Duration
}

// Change is a change of a [Member]'s partitions. Changes come in order.
// For revoked or lost partitions the group waits until Done is called
// (up to its rebalance timeout), so that the owner finishes with them
// (commits, or stops) before another member takes them over.
type Change struct {
	Assigned []int32 // partitions the member now owns too
	Revoked  []int32 // partitions it hands over
	Lost     bool    // Revoked were lost (the member was kicked): nothing can commit for them
	// Seq numbers the member's changes from 1: what OwnedSeq returns once
	// this change is part of its partitions.
	Seq  uint64
	done chan struct{}
}

// Done acknowledges the change; for a revocation it lets the group go on.
func (c Change) Done() {
	if c.done != nil {
		close(c.done)
	}
}

// Member is one member of a consumer group over one topic that consumes
// nothing itself: it learns which partitions it owns (its [Change]s) and
// the group's generation, for a job that reads those partitions with its
// own [Source] and commits their offsets in its transactions
// ([TxnConfig.Member]). The classic group protocol with the cooperative
// sticky balancer: a rebalance moves only the partitions that must move.
type Member struct {
	cl      *kgo.Client
	adm     *kadm.Client
	cfg     MemberConfig
	changes chan Change
	ctx     context.Context
	cancel  context.CancelFunc

	mu    sync.Mutex
	owned []int32
	seq   uint64 // of the last change to owned (Change.Seq)
	// memberID and generation are those of the latest join that
	// confirmed the member's partitions.
	memberID   string
	generation int32
	// lostGen is the generation under which the member last lost its
	// partitions (-1: never): what it did under it must not commit.
	lostGen int32
}

// NewMember joins the group. The first Change (the first assignment)
// comes once the group has settled.
func NewMember(ctx context.Context, c MemberConfig) (*Member, error) {
	switch {
	case c.Group == "" || c.Topic == "" || c.InstanceID == "":
		return nil, errors.New("kafka: a group member needs a group, a topic and an instance id")
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = 10 * time.Second
	}
	m := &Member{cfg: c, changes: make(chan Change, 16), lostGen: -1}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	send := func(ch Change, wait bool) {
		if wait {
			ch.done = make(chan struct{})
		}
		select {
		case m.changes <- ch:
		case <-m.ctx.Done():
			return
		}
		if wait {
			select {
			case <-ch.done:
			case <-m.ctx.Done():
			}
		}
	}
	cl, err := c.newClient(
		kgo.ConsumerGroup(c.Group),
		kgo.ConsumeTopics(c.Topic),
		kgo.InstanceID(c.InstanceID),
		kgo.SessionTimeout(c.SessionTimeout),
		kgo.HeartbeatInterval(min(3*time.Second, max(100*time.Millisecond, c.SessionTimeout/3))),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(func(_ context.Context, cl *kgo.Client, ps map[string][]int32) {
			// Called at the end of every join, also with nothing new: the
			// member owns its partitions in this generation.
			got := slices.Sorted(slices.Values(ps[c.Topic]))
			id, gen := cl.GroupMetadata()
			m.mu.Lock()
			m.memberID, m.generation = id, gen
			if len(got) == 0 {
				m.mu.Unlock()
				return
			}
			m.owned = slices.Sorted(slices.Values(append(m.owned, got...)))
			m.seq++
			seq := m.seq
			m.mu.Unlock()
			send(Change{Assigned: got, Seq: seq}, false)
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, cl *kgo.Client, ps map[string][]int32) {
			if len(ps[c.Topic]) > 0 {
				// A rebalance's revocation comes once the member has
				// joined the next generation (the cooperative protocol's
				// first join), which gives the revoked partitions to no
				// one before the member gives them up: their final
				// offsets are committed under it (the group refuses the
				// old one's). Not so for a loss (OnPartitionsLost).
				id, gen := cl.GroupMetadata()
				m.mu.Lock()
				m.memberID, m.generation = id, gen
				m.mu.Unlock()
			}
			m.revoke(ps[c.Topic], false, send)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			m.mu.Lock()
			m.lostGen = max(m.lostGen, m.generation)
			m.mu.Unlock()
			m.revoke(ps[c.Topic], true, send)
		}),
	)
	if err != nil {
		m.cancel()
		return nil, err
	}
	// The member fetches nothing: the job reads its partitions itself.
	cl.PauseFetchTopics(c.Topic)
	m.cl, m.adm = cl, kadm.NewClient(cl)
	return m, nil
}

func (m *Member) revoke(ps []int32, lost bool, send func(Change, bool)) {
	if len(ps) == 0 {
		return
	}
	ps = slices.Sorted(slices.Values(ps))
	m.mu.Lock()
	m.owned = slices.DeleteFunc(m.owned, func(p int32) bool { return slices.Contains(ps, p) })
	m.seq++
	seq := m.seq
	m.mu.Unlock()
	send(Change{Revoked: ps, Lost: lost, Seq: seq}, true)
}

// Changes are the member's partition changes, in order.
func (m *Member) Changes() <-chan Change { return m.changes }

// Owned returns the partitions the member owns now, sorted.
func (m *Member) Owned() []int32 {
	owned, _ := m.OwnedSeq()
	return owned
}

// OwnedSeq returns the partitions the member owns now, sorted, and the Seq
// of the last change they include. A change is made part of them before
// it is sent: one whose Seq is at most seq, still to come on Changes, is
// already in owned.
func (m *Member) OwnedSeq() (owned []int32, seq uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.owned), m.seq
}

// Metadata returns the member id and the group generation of the latest
// join that confirmed the member's partitions (its assignment) or revoked
// some of them: what a transactional offset commit names, so that the
// group refuses the commits of a member whose partitions moved on (a
// zombie's). A revocation's join (the cooperative protocol's first join
// of a rebalance) hands the revoked partitions to no one until the
// member gives them up, so their final checkpoint commits under it. A
// loss keeps the join before it while it waits for Done, so that a member
// kicked out of the group and joining again cannot commit, under its new
// generation, what it did under the old one.
func (m *Member) Metadata() (memberID string, generation int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.memberID, m.generation
}

// newerThan waits, for at most d, until the member learns of a join
// newer than generation gen (a rebalance's revocation or assignment) and
// returns its member id and generation; false when the member lost its
// partitions under gen or later (it was cut off from the group), or when
// d or ctx ends first.
func (m *Member) newerThan(ctx context.Context, gen int32, d time.Duration) (string, int32, bool) {
	deadline := time.Now().Add(d)
	for {
		m.mu.Lock()
		id, g, lost := m.memberID, m.generation, m.lostGen >= gen
		m.mu.Unlock()
		switch {
		case lost:
			return "", 0, false
		case g > gen:
			return id, g, true
		case time.Now().After(deadline) || ctx.Err() != nil:
			return "", 0, false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Leave leaves the group for good (a static member's Close does not: its
// partitions would wait SessionTimeout for it), so that the others take
// its partitions at once. The member is of no use afterwards; Close it.
func (m *Member) Leave(ctx context.Context) error {
	resp, err := m.adm.LeaveGroup(ctx, kadm.LeaveGroup(m.cfg.Group).InstanceIDs(m.cfg.InstanceID).Reason("cepheus: the instance stops"))
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Errorf("kafka: leave group %s: %w", m.cfg.Group, err)
	}
	return nil
}

// Close stops the member without leaving the group (static membership:
// a restart with the same instance id within SessionTimeout gets the same
// partitions back).
func (m *Member) Close() {
	m.cancel()
	m.cl.CloseAllowingRebalance()
}
