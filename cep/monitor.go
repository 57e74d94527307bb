package cep

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/cepheus-cep/cepheus/event"
)

// StreamMonitor is how another goroutine (a metrics exporter, a health
// check) watches the jobs of [Engine.Stream] (StreamConfig.Monitor):
// the job publishes its figures into it on its coordinator's timer (every
// 50 ms or so, and at each checkpoint), so that reading them costs the
// job nothing per event. Its methods are safe for concurrent use; one
// monitor watches one Stream at a time.
type StreamMonitor struct {
	mu      sync.Mutex
	s       MonitorSnapshot
	plan    *plan // the running engine's (immutable)
	totals  ruleTotals
	commits func() int64 // the running job's outputsCommitted
	// running says that a run (an Engine.Stream call) goes on: a job
	// runs, restores, or follows another (a switch, a rebalance).
	running bool
	// readies counts the times a job turned ready, ends the Stream calls
	// that returned (WaitReady).
	readies, ends int
	recent        []switchDone
	// started is the id of the newest checkpoint the running job has
	// begun (at its start, the one it restored; 0: none).
	started int64
	ckReq   chan struct{}
	deploys chan *deployReq
}

// NewStreamMonitor returns a monitor whose snapshot is empty and not
// ready, with no watermark yet (event.MinTime, as a job's before its
// first): until a job publishes (while serve restores a checkpoint) the
// metrics and cepheus status said the watermark was the Unix epoch.
func NewStreamMonitor() *StreamMonitor {
	s := MonitorSnapshot{CheckpointBuckets: make([]uint64, len(CheckpointBucketBounds))}
	s.Progress.Watermark = event.MinTime
	return &StreamMonitor{s: s, ckReq: make(chan struct{}, 1), deploys: make(chan *deployReq)}
}

// RequestCheckpoint asks the running job for a checkpoint at its next
// tick (after the one in flight, if any). It returns the id of the newest
// checkpoint begun before the request: the first complete checkpoint of a
// larger id (LastCheckpoint in the snapshot tells) covers every record the
// job took before the request.
func (m *StreamMonitor) RequestCheckpoint() (after int64) {
	m.mu.Lock()
	after = m.started
	m.mu.Unlock()
	select {
	case m.ckReq <- struct{}{}:
	default: // one is asked for already
	}
	return after
}

// begun tells the monitor that the job begins checkpoint id. The state
// is not durable until it completes (checkpoint): one that fails leaves
// DurableAt as it was.
func (m *StreamMonitor) begun(id int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.started = id
}

// jobStarted tells the monitor that a job starts on the state of
// checkpoint id, which it restored (0: a fresh state): durable now, as
// the job has read nothing yet.
func (m *StreamMonitor) jobStarted(id int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.started = id
	m.s.DurableAt = time.Now()
}

// checkpointAsked reports (once) whether a checkpoint was asked for.
func (m *StreamMonitor) checkpointAsked() bool {
	select {
	case <-m.ckReq:
		return true
	default:
		return false
	}
}

// MonitorSnapshot is what a [StreamMonitor] holds.
type MonitorSnapshot struct {
	// Ruleset and RulesetVersion name the rules running; Rules the
	// counters of the active version's rules, in ruleset order. Each
	// rule's counters (by name and severity) never go down while the
	// process runs: they start from the checkpoint the process restored
	// and go on across the switches (a changed rule's old version's
	// count in them while it drains, and after). Former are those of the
	// rules counted in this process that the active version has not (a
	// removed rule, the former severity of a rule, a draining version's
	// of another severity), in the order first seen: they keep their
	// last figures (a draining one's still grow) and go on if the rule
	// comes back.
	Ruleset, RulesetVersion string
	Rules                   []RuleCount
	Former                  []RuleCount
	// Ready says that a job has restored its state and reads its input
	// (in Kafka mode: its share of the group's partitions); false before,
	// between two jobs of a rebalance, and after the end.
	Ready bool
	// Standby says that the instance reads no partition of its Kafka
	// group (a standby: more instances than partitions, or its partitions
	// all went to another): it runs no job until the group gives it some,
	// so no deploy, rollback or promote can be taken there (ErrStandby).
	Standby bool
	// Progress is the job's figures as its progress lines have them, but
	// for its counters (Records, Decoded, Dead, Ahead, Late, Alerts),
	// which never go down while the process runs: after a job restored an
	// earlier checkpoint, they stay at the highest figures published
	// until its own pass them.
	Progress StreamProgress
	// CheckpointBuckets count the checkpoints completed by this process
	// whose duration (barrier to commit) is at most the bound of the
	// same index in CheckpointBucketBounds (not cumulative);
	// CheckpointSum is their total duration, CheckpointFailures the
	// checkpoints aborted or whose commit failed, CheckpointsSkipped those
	// not taken because nothing changed since the latest (an idle job).
	CheckpointBuckets  []uint64
	CheckpointSum      time.Duration
	CheckpointFailures int64
	CheckpointsSkipped int64
	// DurableAt is when the state was last known to be in a complete
	// checkpoint: one completed (the time of its barrier), one skipped
	// because nothing changed since the latest (an idle job skips them
	// for up to 10 minutes), or a job's start on its restored state; zero
	// before the first job. A checkpoint that fails leaves it.
	// Its age is how much of the input's time a crash would read again.
	DurableAt time.Time
	// Partitions is the number of input partitions the job reads;
	// PartitionWatermarks the watermark of each input partition by name
	// (a file, or TOPIC-P), as the job last saw it, but for a followed
	// directory's files closed for inactivity (StreamConfig.CloseInactive):
	// a closed file is left out until it grows and is opened again, so
	// that a directory of rotated files does not keep one entry (one
	// metric series) of each for ever. Partitions counts them.
	Partitions          int
	PartitionWatermarks map[string]int64
	// IdlePartitions are those of PartitionWatermarks that no longer hold
	// the watermark back: idle (no record for -idle-timeout; in Kafka
	// mode, caught up) or finished (read to the end of a bounded input).
	IdlePartitions map[string]bool
	// KafkaLag is each Kafka partition's lag (input and repartition: the
	// records between the job's position and the partition's end, as its
	// latest fetch saw it).
	KafkaLag map[string]int64
	// FileUnread is each followed file's backlog: the bytes it held past
	// the reader's position, as its latest batch saw it (0 once read to
	// its end; a file closed for quiet keeps its last figure).
	FileUnread map[string]int64
	// KafkaCommits and KafkaAborts count the checkpoint transactions of a
	// transactional Kafka job committed and failed in this process.
	KafkaCommits, KafkaAborts int64
	// ShadowVersion is the shadow version's hash ("" without one), Shadow
	// its rules compared with the active ones of their names, since it
	// was deployed. ShadowTotals are the same figures by rule name over
	// every shadow version of this process, in the order first seen:
	// they never go down (a new shadow version's go on from the last
	// one's of the name; a rule no shadow has any more keeps its last
	// figures).
	ShadowVersion string
	Shadow        []ShadowCount
	ShadowTotals  []ShadowCount
	// Draining are the rules of earlier versions that go on with their
	// partial matches of before a switch (a changed rule's old version),
	// in the engine's order: each is let go at the checkpoint after the
	// watermark passes its Until (the switch's watermark plus its window).
	Draining []DrainingRule
	// Switches counts the switches of the job's ruleset version
	// (deploys, rollbacks, promotes) in this process.
	Switches int64
	// Lookups are the counters of the job's lookups (docs/rules.md,
	// "Lookups"), in declaration order; Aggregates the figures of its
	// velocity aggregates, AggregateHeld the events they hold until the
	// watermark passes them.
	Lookups       []LookupStats
	Aggregates    []AggregateStats
	AggregateHeld int
}

// ShadowCount compares a rule of the shadow version with the active rule
// of its name (none: Active is 0) since the shadow was deployed: the
// alerts of each, and how many matches both raised (the same events at
// the same key); the others are only the active one's (Active - Overlap)
// or only the shadow's (Shadow - Overlap).
type ShadowCount struct {
	Rule                    string
	Active, Shadow, Overlap int64
	// Unchanged says that the shadow rule is the active one's content
	// (the same rule hash): its state began empty at the shadow's deploy,
	// so what it lacks is its windows filling (a rule reading 60 days of
	// history misses what the active one has), not a change. Set in
	// MonitorSnapshot.Shadow only.
	Unchanged bool
}

// RuleCount is one rule's counters in a [MonitorSnapshot]: alerts,
// condition evaluations that failed (counted as false), emit fields that
// failed (each null in its alert), events or partial matches dropped at
// the limits (-max-partial-matches, -max-buffered-events), and events
// without one of its key fields (skipped). TimedOut counts, of Alerts,
// those of timed-out partial matches, whose severity is TimeoutSeverity
// (the rule's `timeout` block's; "" for a rule without one): the others
// have Severity. A rule's counters are by name, severity and timeout
// severity.
type RuleCount struct {
	Rule, Severity  string
	TimeoutSeverity string
	Alerts          int64
	TimedOut        int64
	ConditionErrors int64
	EmitErrors      int64
	Dropped         int64
	NoKey           int64
}

// CheckpointBucketBounds are the upper bounds of MonitorSnapshot's
// checkpoint duration buckets; the last is unbounded.
var CheckpointBucketBounds = []time.Duration{
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond,
	250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2500 * time.Millisecond,
	5 * time.Second, 10 * time.Second, 30 * time.Second, time.Duration(1<<63 - 1),
}

// DrainingRule is a rule of an earlier version draining
// (MonitorSnapshot.Draining): Version is that version's hash.
type DrainingRule struct {
	Rule, Version string
	Until         event.Time
}

// Snapshot returns a copy of what the monitor holds now.
func (m *StreamMonitor) Snapshot() MonitorSnapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.s
	s.Rules = append([]RuleCount(nil), s.Rules...)
	s.Former = append([]RuleCount(nil), s.Former...)
	s.ShadowTotals = append([]ShadowCount(nil), s.ShadowTotals...)
	s.CheckpointBuckets = append([]uint64(nil), s.CheckpointBuckets...)
	s.PartitionWatermarks = maps.Clone(s.PartitionWatermarks)
	s.KafkaLag = maps.Clone(s.KafkaLag)
	s.FileUnread = maps.Clone(s.FileUnread)
	s.IdlePartitions = maps.Clone(s.IdlePartitions)
	s.Shadow = append([]ShadowCount(nil), s.Shadow...)
	s.Draining = append([]DrainingRule(nil), s.Draining...)
	s.Lookups = append([]LookupStats(nil), s.Lookups...)
	s.Aggregates = append([]AggregateStats(nil), s.Aggregates...)
	return s
}

// Ready reports whether a job is running with its state restored.
func (m *StreamMonitor) Ready() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.s.Ready
}

// WaitReady returns nil once a run with the monitor is ready
// ([StreamMonitor.Ready]: a job runs with its state restored; also when it
// was ready only for a moment), ErrNoJob when a Stream call with the
// monitor returns before any was (it failed, or found its state directory
// finished), or ctx's error. A program that starts [Engine.Stream] in a
// goroutine waits with it before its first [StreamMonitor.Deploy], which
// returns ErrNoJob until the run has begun. Called after the run ended,
// it waits for ctx; so does a Kafka standby until it gets partitions.
func (m *StreamMonitor) WaitReady(ctx context.Context) error {
	r0, e0 := m.marks()
	return m.waitReady(ctx, r0, e0)
}

// marks returns the counts of readies and ends WaitReady waits past.
func (m *StreamMonitor) marks() (readies, ends int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.readies, m.ends
}

// waitReady is WaitReady past the counts r0 and e0.
func (m *StreamMonitor) waitReady(ctx context.Context, r0, e0 int) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		m.mu.Lock()
		ready, ended := m.s.Ready || m.readies > r0, m.ends > e0
		m.mu.Unlock()
		switch {
		case ready:
			return nil
		case ended:
			return ErrNoJob
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// streamEnded notes that a Stream call with the monitor returned.
func (m *StreamMonitor) streamEnded() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ends++
}

// setUnread sets the followed files' backlog (MonitorSnapshot.FileUnread).
func (m *StreamMonitor) setUnread(unread map[string]int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.s.FileUnread = unread
}

// publish sets the job's figures: its progress, its rules' counters and
// whether it is ready.
func (m *StreamMonitor) publish(e *Engine, p StreamProgress, c []ruleFigure, retired []retiredCount, ready bool, partitions int, wms, lag map[string]int64, idle map[string]bool, lookups []LookupStats, aggs []AggregateStats, held int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rs := e.cfg.ruleset
	m.s.Ruleset, m.s.RulesetVersion = rs.Name, rs.Hash
	m.plan = e.plan
	t := &m.totals
	t.add(e, c, retired)
	m.s.Rules, m.s.Former = t.counts(m.s.Rules[:0], m.s.Former[:0])
	m.s.ShadowTotals = append(m.s.ShadowTotals[:0], t.shadow...)
	// The shadow comparison since the shadow's deploy (cepheus status).
	m.s.ShadowVersion, m.s.Shadow = "", m.s.Shadow[:0]
	m.s.Draining = m.s.Draining[:0]
	if e.plan != nil {
		m.s.ShadowVersion = e.plan.Shadow
		for _, r := range e.plan.Rules {
			if r.Drain && !r.Shadow {
				m.s.Draining = append(m.s.Draining, DrainingRule{Rule: r.Rule, Version: r.Version, Until: r.Until})
			}
		}
	}
	for i, cr := range e.rules {
		if i >= len(c) {
			break
		}
		if cr.shadow {
			// Compared with the active rule of its name since the later
			// of the two rules' switches (sameTwin), or its alerts
			// since the shadow's without one.
			sc := ShadowCount{Rule: cr.rule.Name, Shadow: c[i].alerts}
			if cr.twin >= 0 {
				sc.Active, sc.Shadow, sc.Overlap = c[cr.twin].compared, c[i].compared, c[i].overlap
				sc.Unchanged = e.rules[cr.twin].rule.Hash == cr.rule.Hash
			}
			m.s.Shadow = append(m.s.Shadow, sc)
		}
	}
	p.StreamStats = highest(m.s.Progress.StreamStats, p.StreamStats)
	if ready && !m.s.Ready {
		m.readies++
	}
	m.s.Progress, m.s.Ready, m.s.Partitions, m.s.PartitionWatermarks, m.s.KafkaLag = p, ready, partitions, wms, lag
	m.s.Standby = false
	m.s.IdlePartitions = idle
	m.s.Lookups = lookups
	m.s.Aggregates, m.s.AggregateHeld = droppedNeverDown(m.s.Aggregates, aggs), held
}

// droppedNeverDown returns aggs, the job's figures, with each aggregate's
// Dropped (a counter, cepheus_aggregate_dropped_total) no lower than
// was's: a job that restores a checkpoint, or holds fewer partitions
// after a rebalance, counts from its own state's figure, which can be
// lower. aggs is new at each publish; it is changed in place.
func droppedNeverDown(was, aggs []AggregateStats) []AggregateStats {
	for i := range aggs {
		for _, w := range was {
			if w.Name == aggs[i].Name {
				aggs[i].Dropped = max(aggs[i].Dropped, w.Dropped)
				break
			}
		}
	}
	return aggs
}

// highest returns p with its counters (records, decoded, dead letters and
// those too far ahead, late events, alerts) no lower than was's, so that
// they never go down while the process runs. A job that restores an
// earlier checkpoint in the same process (a Kafka job after a rebalance or
// a failed transaction, a switch that did not happen) counts again from
// that checkpoint's figures and reads again what came after it: the
// counters stay where they were until it has passed them, so that nothing
// read again is counted twice. (They went back to the checkpoint's, which
// Prometheus takes for a counter reset: rate() showed the whole count
// read again at once.)
func highest(was, p StreamStats) StreamStats {
	p.Records, p.Decoded = max(p.Records, was.Records), max(p.Decoded, was.Decoded)
	p.Dead, p.Ahead = max(p.Dead, was.Dead), max(p.Ahead, was.Ahead)
	p.Late, p.Alerts = max(p.Late, was.Late), max(p.Alerts, was.Alerts)
	return p
}

// unassigned tells the monitor that the instance reads no partition: a
// Kafka group gave it none, or took away all it had (it was paused past
// its session timeout). The last job's partitions and the state it held
// are another instance's now: their gauges go (they stayed at their last
// figures, and summed over the group's instances counted keys twice),
// and the state is durable, as there is none a crash would read again.
// The counters stay.
func (m *StreamMonitor) unassigned() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.s.Partitions, m.s.PartitionWatermarks, m.s.IdlePartitions, m.s.KafkaLag = 0, nil, nil, nil
	m.s.Standby = true
	p := &m.s.Progress
	p.Keys, p.Buffered, p.PartialMatches, p.StateBytes, p.Queued = 0, 0, 0, 0, 0
	// The velocity aggregates' keys and held events are that state too
	// (cepheus_aggregate_keys, _hot_keys, _held_events); what they
	// dropped is a counter. A new slice: the job's may still be read.
	aggs := make([]AggregateStats, len(m.s.Aggregates))
	for i, a := range m.s.Aggregates {
		aggs[i] = AggregateStats{Name: a.Name, Dropped: a.Dropped}
	}
	m.s.Aggregates, m.s.AggregateHeld = aggs, 0
	m.s.DurableAt = time.Now()
}

// setRunning notes that a run starts (true) or has ended.
func (m *StreamMonitor) setRunning(r bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.running = r
}

// runs reports whether a run goes on.
func (m *StreamMonitor) runs() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.running
}

// watchCommits makes f, a job's, tell [StreamMonitor.Committed].
func (m *StreamMonitor) watchCommits(f func() int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.commits = f
}

// Committed is the newest checkpoint whose outputs (alerts, late events,
// shadow alerts) every subtask of the job has committed: in the files of
// an alerts directory, renamed into place. It follows
// MonitorSnapshot.Progress.LastCheckpoint, which a checkpoint reaches
// once it is durable, a moment before (0 before any job).
func (m *StreamMonitor) Committed() int64 {
	m.mu.Lock()
	f := m.commits
	m.mu.Unlock()
	if f == nil {
		return 0
	}
	return f()
}

// freshState tells the monitor that a job starts without a checkpoint:
// the rule ids its rules' counters are of start again (the totals go on).
func (m *StreamMonitor) freshState() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.totals.forgetIDs()
}

// switched counts a switch of the ruleset version and keeps what it did.
func (m *StreamMonitor) switched(res *DeployResult) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.s.Switches++
	r := *res
	m.recent = append(m.recent, switchDone{at: time.Now(), res: &r})
	if len(m.recent) > 16 {
		m.recent = m.recent[1:]
	}
}

// switchDone is a switch the monitor saw.
type switchDone struct {
	at  time.Time
	res *DeployResult
}

// switchOf returns the result of a switch to version (as the shadow
// when shadow) after since, if the job made one.
func (m *StreamMonitor) switchOf(version string, shadow bool, since time.Time) *DeployResult {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range slices.Backward(m.recent) {
		if s.at.After(since) && s.res.Version == version && s.res.Shadow == shadow {
			r := *s.res
			return &r
		}
	}
	return nil
}

// standby reports whether the instance reads no partition of its group
// (MonitorSnapshot.Standby).
func (m *StreamMonitor) standby() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.s.Standby
}

// rulesNext is the offset of the Kafka rules topic from which the
// running job's plan has yet to take records (0 before a job).
func (m *StreamMonitor) rulesNext() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.plan == nil {
		return 0
	}
	return m.plan.RulesNext
}

// kafkaTxn counts a checkpoint's transaction: committed, or failed.
func (m *StreamMonitor) kafkaTxn(ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ok {
		m.s.KafkaCommits++
	} else {
		m.s.KafkaAborts++
	}
}

// skipped counts a checkpoint not taken: nothing changed since the latest.
func (m *StreamMonitor) skipped() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.s.CheckpointsSkipped++
	m.s.DurableAt = time.Now()
}

// checkpoint counts a checkpoint: completed in d (since its barrier), or
// failed. A completed one holds the state as of its barrier, not of now:
// what the job read since is in none.
func (m *StreamMonitor) checkpoint(d time.Duration, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !ok {
		m.s.CheckpointFailures++
		return
	}
	for i, b := range CheckpointBucketBounds {
		if d <= b {
			m.s.CheckpointBuckets[i]++
			break
		}
	}
	m.s.CheckpointSum += d
	m.s.DurableAt = time.Now().Add(-d)
}
