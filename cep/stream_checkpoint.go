package cep

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/internal/failpoint"
	"github.com/cepheus-cep/cepheus/runtime"
	"github.com/cepheus-cep/cepheus/runtime/state"
)

// inflight is the checkpoint whose barrier went out and whose subtasks
// have not all answered.
type inflight struct {
	id      int64
	w       *state.CheckpointWriter
	meta    jobMeta
	started time.Time
	got     int
	stall   time.Duration // the longest of the subtasks'
	keys    int64         // summed over the subtasks
	buf     int64
	// partials, stateBytes, written: summed over the subtasks
	partials, stateBytes, written int64
	headers                       [][]headerRecord // by subtask (a transactional Kafka job)
	// committed: the Kafka transaction of the checkpoint committed;
	// localGot the subtasks whose part of its local copy is written.
	committed bool
	localGot  int
	// upstream is the markers of the input partitions at the barrier
	// (repartitioning).
	upstream map[int32]repUpstream
}

// errStopped is the error of a send to a subtask once the job stopped (a
// subtask failed; its error is in job.failed).
var errStopped = errors.New("cep: stream: stopped")

// send hands m to subtask i, waiting while its channel is full (the
// backpressure), unless the job stopped. While it waits, the progress is
// still reported at its interval, and the monitor's figures published at
// the loop's cadence: a subtask in a long step (a key of many partial
// matches, an explosive pattern) held the coordinator here, and the run
// printed no line at all for minutes, and its metrics stood still.
func (j *job) send(i int, m msg) error {
	select {
	case j.subs[i].in <- m:
		return nil
	case <-j.sctx.Done():
		return errStopped
	default:
	}
	var tick <-chan time.Time
	if j.cfg.Progress != nil || j.cfg.Monitor != nil {
		t := time.NewTicker(tickEvery)
		defer t.Stop()
		tick = t.C
	}
	waiting := time.Now()
	for {
		select {
		case j.subs[i].in <- m:
			return nil
		case <-j.sctx.Done():
			return errStopped
		case now := <-tick:
			if now.Sub(waiting) >= stuckSend {
				j.reportProgress(now)
			}
			if j.cfg.Monitor != nil && !j.nextProgress.IsZero() {
				// The monitor's figures (the metrics) go out as at the
				// loop's ticks, once it has begun: a subtask in a long
				// step held them at their last values (the other
				// subtasks' alerts, the lookups, the partitions' lag).
				j.publish(true)
			}
		}
	}
}

// stuckSend is how long send waits for a subtask before it reports the
// progress: the backpressure's usual waits (a subtask writing its alerts)
// are far shorter, and the loop reports after them.
const stuckSend = time.Second

// reportProgress reports the progress (StreamConfig.Progress) when it is
// due at now, once the coordinator's loop has begun.
func (j *job) reportProgress(now time.Time) {
	if j.cfg.Progress != nil && !j.nextProgress.IsZero() && !now.Before(j.nextProgress) {
		j.nextProgress = now.Add(j.cfg.ProgressInterval)
		j.cfg.Progress(j.progress())
	}
}

// closedChan is always ready: a select case on it is taken at once.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// alignedStep is how many records of an aligned reading the coordinator
// routes between two looks at its timers and acks.
const alignedStep = 1024

// firstBarrierAfterRestart is the time from the start of a restored
// Kafka job to its first barrier, when the interval is longer.
const firstBarrierAfterRestart = 100 * time.Millisecond

// minTick is the shortest period of the coordinator's timer.
const minTick = 5 * time.Millisecond

// tickEvery is the period of the coordinator's timer: checkpoint
// barriers, timeouts, idleness and progress are looked at this often.
const tickEvery = 50 * time.Millisecond

// loop is the coordinator: it routes the input's batches, injects the
// barriers, gathers the acks and commits the checkpoints, until the
// input ends (finished) or ctx is cancelled; both end with a final
// checkpoint.
func (j *job) loop(ctx context.Context) (finished bool, err error) {
	c := &j.cfg
	src := j.src
	defer func() {
		// A subtask's failure stops the job (j.stop), which ends what the
		// coordinator waited on: a send (errStopped), or a lookup's
		// request (its context's error, the job's being cancelled). The
		// run's error is the subtask's, which names what failed.
		if errors.Is(err, errStopped) || j.sctx != nil && j.sctx.Err() != nil && errors.Is(err, context.Canceled) {
			select {
			case err = <-j.failed:
			default:
			}
		}
	}()
	// A barrier waits for the tick after its time: with short intervals
	// the tick is a fifth of the interval, so a barrier is at most that
	// late (100ms: 20ms), but never below 5ms (or the interval).
	tick := time.NewTicker(min(c.CheckpointInterval, max(minTick, min(tickEvery, c.CheckpointInterval/5))))
	defer tick.Stop()
	lastDone := time.Now()
	nextBarrier := lastDone.Add(c.CheckpointInterval)
	if j.kafka != nil && j.meta != nil {
		// A restarted Kafka job commits its first transaction soon,
		// whatever the interval: the replayed input's alerts become
		// visible, and the instance is seen to be back, within a moment.
		nextBarrier = lastDone.Add(min(c.CheckpointInterval, firstBarrierAfterRestart))
	}
	j.nextProgress = lastDone.Add(c.ProgressInterval)
	if err := src.routeHeldOfNone(); err != nil {
		return false, err
	}
	// The rules topic before the first batch: a restarted instance (or
	// one that takes partitions over) reads a backlog whose first batch
	// would carry its watermark past the group's switch point of a record
	// it has not deployed yet, so that it switched where it was. Only the
	// hold starts here, also at a point the restored watermark is at (the
	// job before held there, and ended before its switch: a rebalance);
	// the switch waits for a tick, as ever.
	j.holdForRules(true)
	for {
		if j.stopAsked {
			if j.next != nil && src.guard != nil && src.guard.Holding() > 0 {
				// A switch needs its checkpoint: the far-ahead check
				// judges the events it holds now (as for a live input
				// whose checkpoints would wait too long).
				if err := src.guard.End(src); err != nil {
					return false, err
				}
			}
			return false, j.finish(false)
		}
		// What to wait for: the reader's next batch; with aligned
		// reading, the batch of the partition whose record comes next, or
		// nothing when its records are at hand (ready: a step of them).
		batches, part := src.reader.Batches(), -1
		var ready chan struct{}
		if src.cursors != nil {
			p, need, ok := src.pick()
			switch {
			case !ok && ctx.Err() != nil:
				return false, j.finish(false)
			case !ok:
				if err := src.reader.Err(); err != nil {
					return false, err
				}
				if src.rep.pending() {
					// The input is read to its end; the repartition
					// partitions wait for the final markers of every
					// upstream partition: this job's go out at once.
					batches = nil
					if j.flight == nil && src.markersDue() {
						if err := j.barrier(false); err != nil {
							return false, err
						}
					}
					break
				}
				return true, j.finish(true)
			case need:
				batches, part = src.cursors[p].ch, p
			default:
				batches, ready = nil, closedChan
			}
		}
		select {
		case <-ready:
			if err := src.step(alignedStep); err != nil {
				return false, err
			}
		case b, ok := <-batches:
			if !ok {
				if ctx.Err() != nil {
					return false, j.finish(false)
				}
				if err := src.reader.Err(); err != nil {
					return false, err
				}
				if part >= 0 {
					return false, fmt.Errorf("cep: stream: partition %s ended without its end", src.cursors[part].p.Name)
				}
				return true, j.finish(true)
			}
			var err error
			if part >= 0 {
				err = src.setBatch(part, b)
			} else {
				err = src.onBatch(b)
			}
			if err != nil {
				return false, err
			}
		case b := <-src.repChan():
			if err := src.onRepBatch(b); err != nil {
				return false, err
			}
		case now := <-tick.C:
			if err := src.repErr(); err != nil {
				return false, err
			}
			if c.Monitor != nil {
				j.publish(true)
				if j.flight == nil && c.Monitor.checkpointAsked() {
					nextBarrier, j.asked = now, true
				}
				if req := c.Monitor.takeDeploy(); req != nil && j.next == nil {
					j.askSwitch(req)
				} else if req != nil {
					req.done <- deployDone{err: ErrSwitching}
				}
			}
			if j.next == nil {
				j.takeRules()
			}
			if j.next == nil && j.e.expired(j.lowWatermark()) && inputOf(c) != "stdin" {
				// (Over standard input, which a job cannot read again from
				// a checkpoint, the drained rules stay: past their
				// windows, they hold nothing more.)
				j.askSwitch(nil)
			}
			if c.live() {
				// A live input: the watermark the events allow goes out
				// now, not at the next multiple of the cadence, which a
				// quiet stream may never reach.
				src.pw.Tick()
				if err := src.forward(src.pw.Current()); err != nil {
					return false, err
				}
				if src.wantBarrier && now.Sub(src.wantSince) > c.CheckpointInterval {
					// The far-ahead check has held events for a whole
					// interval of a live input: judge them now, so that
					// checkpoints go on.
					if err := src.guard.End(src); err != nil {
						return false, err
					}
					if err := src.barrier(); err != nil {
						return false, err
					}
				}
			}
			if f := j.flight; f != nil && now.Sub(f.started) > c.CheckpointTimeout && j.kafka != nil {
				return false, fmt.Errorf("cep: stream: checkpoint %d not complete after %v: %w", f.id, c.CheckpointTimeout, errCheckpointTimeout)
			}
			if f := j.flight; f != nil && now.Sub(f.started) > c.CheckpointTimeout {
				j.logf("checkpoint %d aborted: not complete after %v", f.id, c.CheckpointTimeout)
				if f.w != nil {
					_ = f.w.Abort()
				}
				j.flight = nil
				j.activity = nil // the next checkpoint is taken
				j.stats.Aborted++
				if c.Monitor != nil {
					c.Monitor.checkpoint(0, false)
				}
				lastDone = now
			}
			if j.flight == nil && !src.wantBarrier && !now.Before(nextBarrier) && now.Sub(lastDone) >= c.MinPause {
				nextBarrier = now.Add(c.CheckpointInterval)
				quiet, err := j.quiet(now)
				if err != nil {
					return false, err
				}
				if quiet {
					j.stats.Skipped++
					if c.Monitor != nil {
						c.Monitor.skipped()
					}
				} else if src.guard != nil && src.guard.Holding() > 0 {
					// The guard's held events belong to no checkpoint
					// yet: the barrier follows the record that settles
					// them.
					src.wantBarrier, src.wantSince = true, now
				} else if err := j.barrier(false); err != nil {
					return false, err
				}
			}
			j.reportProgress(now)
		case a := <-j.acks:
			done, err := j.onAck(a)
			if err != nil {
				return false, err
			}
			if done {
				lastDone = time.Now()
			}
		case err := <-j.failed:
			return false, err
		case <-ctx.Done():
			return false, j.finish(false)
		}
	}
}

// quietEvery is the longest a job goes without a checkpoint while
// nothing changes ([job.quiet]): a transactional producer idle for days
// would lose its transactional id (the brokers'
// transactional.id.expiration.ms, 7 days by default), and the latest
// checkpoint's id and time show that the job is alive.
const quietEvery = 10 * time.Minute

// quiet reports whether the checkpoint due at now can be skipped because
// nothing changed since the latest barrier: no record read, no position
// moved, no followed file closed for inactivity or opened again, the watermarks unchanged (so no timer fired and no output is
// waiting for its commit; in processing time, no tick's timer wrote an
// output), no switch of the rules, no checkpoint asked for, no
// repartition marker to write (a partition's idleness changes one or the
// other). An idle job (a followed file or a Kafka topic with nothing new)
// then neither commits a transaction nor writes a checkpoint every
// interval, only every quietEvery. Skipping is always safe: a restore
// from the latest checkpoint reads on from the same positions.
func (j *job) quiet(now time.Time) (bool, error) {
	if j.activity == nil || j.asked || j.next != nil || now.Sub(j.barrierAt) >= quietEvery {
		return false, nil
	}
	if j.src.rep != nil && j.src.markersDue() {
		return false, nil
	}
	a, err := j.src.activity()
	if err != nil || !bytes.Equal(a, j.activity) {
		return false, err
	}
	// A Kafka job says so once its partitions are caught up: at the start,
	// before the first fetch came, nothing read yet is no quiet input (a
	// bounded run said it before its first records).
	if !j.quietSaid && (j.cfg.Kafka == nil || j.src.pw.CaughtUp()) {
		j.quietSaid = true
		wait := "input"
		if j.cfg.Time == ProcessingTime {
			wait = "input, or an alert of a window that ends on the wall clock"
		}
		j.logf("nothing new since checkpoint %d: while nothing is read, checkpoints wait for %s (one at least every %v)", j.nextID-1, wait, quietEvery)
	}
	return true, nil
}

// lowWatermark is the lowest watermark the job's operators have: the
// input's, or the repartitioned rules' when it trails (a draining rule
// goes only once its own operator's watermark has passed its window, or
// its last timeouts would be lost).
func (j *job) lowWatermark() event.Time {
	w := j.stats.Watermark
	if r := j.src.rep; r != nil && r.forwarded < w {
		w = r.forwarded
	}
	return w
}

// publish hands the monitor the job's figures now.
func (j *job) publish(ready bool) {
	c := make([]ruleFigure, len(j.e.rules))
	var alerts int64 // of the same snapshots as c
	for _, s := range j.subs {
		s.cellsMu.Lock()
		for i := range s.ruleCells {
			s.ruleCells[i].addTo(&c[i])
		}
		alerts += s.alertCount.Load()
		s.cellsMu.Unlock()
	}
	parts := 0
	var wms, lag map[string]int64
	var idle map[string]bool
	if src := j.src; src != nil {
		lag = maps.Clone(src.backlog)
		parts = len(src.names)
		wms = make(map[string]int64, len(src.names))
		for idx, name := range src.names {
			if src.added[idx] && !src.closed[idx] {
				wms[name] = int64(src.pw.Of(idx))
				if src.pw.Idle(idx) || src.pw.Finished(idx) {
					if idle == nil {
						idle = map[string]bool{}
					}
					idle[name] = true
				}
			}
		}
	}
	var aggs []AggregateStats
	held := 0
	if j.src != nil {
		aggs, held = j.src.aggStats()
	}
	p := j.progress()
	p.Alerts = alerts
	j.cfg.Monitor.publish(j.e, p, c, j.retiredRules(), ready, parts, wms, lag, idle, j.enrich.stats(), aggs, held)
	if src := j.src; src != nil && src.unread != nil {
		j.cfg.Monitor.setUnread(maps.Clone(src.unread))
	}
}

// progress is the progress report of now.
func (j *job) progress() StreamProgress {
	st := j.stats
	st.Alerts, st.Late = 0, 0
	st.Queued = j.routed
	for _, s := range j.subs {
		st.Alerts += s.alertCount.Load()
		st.Late += s.lateCount.Load()
		st.Queued -= s.processed.Load()
	}
	st.RunRecords = st.Records - j.startRecs
	return StreamProgress{StreamStats: st, Elapsed: time.Since(j.start)}
}

// finish ends the run: with the final watermark when the input is
// exhausted, then (once the checkpoint in flight, if any, is done) a
// final checkpoint, then the subtasks' end.
func (j *job) finish(exhausted bool) error {
	src := j.src
	src.wantBarrier = false
	if exhausted {
		if src.guard != nil {
			if err := src.guard.End(src); err != nil {
				return err
			}
		}
		if err := src.forward(event.MaxTime); err != nil {
			return err
		}
	} else if j.next == nil && j.cfg.live() {
		// A stop of a live input: the watermark the events read allow
		// goes out first (as at a tick), so that the final checkpoint's
		// alerts are all those of the input read, not those of the last
		// tick's watermark. A switch stops at the watermark it was asked
		// at.
		if err := src.forward(src.pw.Current()); err != nil {
			return err
		}
	}
	if err := src.flush(); err != nil {
		return err
	}
	if err := j.drain(); err != nil {
		return err
	}
	if src.guard != nil && src.guard.Holding() > 0 {
		// Stopped while the far-ahead check holds events: they belong to
		// no checkpoint, so none is taken; a restart goes on from the
		// last one and reads them again.
		j.logf("stopped while %d events wait for the far-ahead check: no final checkpoint, the next run resumes from checkpoint %d", src.guard.Holding(), j.stats.LastCheckpoint)
	} else {
		j.atSwitch = j.next != nil && !exhausted
		if err := j.barrier(exhausted); err != nil {
			return err
		}
		if err := j.drain(); err != nil {
			return err
		}
	}
	for i := range j.subs {
		if err := j.send(i, msg{kind: msgEnd}); err != nil {
			return err
		}
	}
	j.wg.Wait()
	select {
	case err := <-j.failed:
		return err
	default:
	}
	if j.cfg.Progress != nil {
		j.cfg.Progress(j.progress())
	}
	return nil
}

// drain waits until no checkpoint is in flight.
func (j *job) drain() error {
	timeout := time.NewTimer(j.cfg.CheckpointTimeout)
	defer timeout.Stop()
	for j.flight != nil {
		select {
		case a := <-j.acks:
			if _, err := j.onAck(a); err != nil {
				return err
			}
		case err := <-j.failed:
			return err
		case <-timeout.C:
			return notComplete{id: j.flight.id, after: j.cfg.CheckpointTimeout}
		}
	}
	return nil
}

// notComplete is the error of a checkpoint waited for (drain) and not
// complete within the checkpoint timeout.
type notComplete struct {
	id    int64
	after time.Duration
}

func (e notComplete) Error() string {
	return fmt.Sprintf("cep: stream: checkpoint %d not complete after %v", e.id, e.after)
}

// barrier starts checkpoint nextID: the source's state and the dead
// letters' transaction now, then a barrier to every subtask after what is
// queued for it. final marks the checkpoint of a run whose input ended.
func (j *job) barrier(final bool) error {
	src := j.src
	if m := j.cfg.Monitor; m != nil {
		// Before the flush, which places the barrier in the stream: a
		// request that finds an older id gets a checkpoint after it.
		m.begun(j.nextID)
	}
	if err := src.flush(); err != nil {
		return err
	}
	var err error
	if j.activity, err = src.activity(); err != nil {
		return err
	}
	j.barrierAt, j.asked = time.Now(), false
	id := j.nextID
	j.nextID++
	failpoint.Hit("barrier.before")
	// A transactional Kafka job's checkpoint lives in Kafka; its local
	// copy is taken only every LocalInterval (and at the first and the
	// final checkpoint): the others have no writer.
	var w *state.CheckpointWriter
	if ko := j.kafka; ko == nil || final || ko.lastLocal.IsZero() || time.Since(ko.lastLocal) >= ko.in.LocalInterval {
		var err error
		if w, err = j.dir.Begin(state.CheckpointID(id)); err != nil {
			return fmt.Errorf("cep: stream: %w", err)
		}
	}
	f := &inflight{id: id, w: w, started: time.Now()}
	j.flight = f
	rs := j.e.cfg.ruleset
	f.meta = jobMeta{
		Format: streamFormat, Ruleset: rs.Name, RulesetVersion: rs.Hash, Rules: ruleHashes(rs), Time: j.cfg.Time,
		KeyGroups: keyGroups, Parallelism: len(j.subs), Backend: j.cfg.Backend, Finished: final, Input: inputOf(&j.cfg),
		Alerts:  make([]runtime.PendingState, len(j.subs)),
		Late:    make([]runtime.PendingState, len(j.subs)),
		Shadow:  make([]runtime.PendingState, len(j.subs)),
		Outputs: j.outIDs,
		Stats:   j.stats,
		Plan:    j.e.plan,
	}
	if t := j.taken.Hash; j.e.plan.Startup != t {
		// The rules source holds the active version now (a watcher's
		// deploy found it unchanged).
		p := *j.e.plan
		p.Startup = t
		f.meta.Plan = &p
	}
	if sw := j.next; sw != nil && j.atSwitch {
		// The switch's checkpoint: the job that restores it runs the
		// next plan, at this watermark.
		f.meta.Next, sw.res = j.nextPlan(sw)
		sw.id = id
		sw.res.Checkpoint = id
	}
	f.meta.Stats.Alerts, f.meta.Stats.Late = 0, 0 // summed from the acks
	if src.rep != nil {
		f.upstream = src.repUpstreams()
	}
	if f.meta.Source, err = src.meta(); err != nil {
		return err
	}
	if src.rep != nil {
		f.meta.Source.RepSent = src.repSent(f.upstream)
	}
	if j.dead != nil {
		if f.meta.Dead, err = j.dead.PreCommit(id); err != nil {
			return fmt.Errorf("cep: stream: dead letters: %w", err)
		}
	}
	for i := range j.subs {
		if err := j.send(i, msg{kind: msgBarrier, id: id, w: w}); err != nil {
			return err
		}
	}
	failpoint.Hit("barrier.after")
	if h := j.cfg.hooks.afterBarrier; h != nil {
		h(id)
	}
	return nil
}

// onAck takes a subtask's ack; the last one of the checkpoint in flight
// completes it: the job's metadata, the commit of the checkpoint
// directory, then the sinks' commits. An ack of an aborted checkpoint is
// dropped (its transactions join the next checkpoint's).
func (j *job) onAck(a ack) (done bool, err error) {
	f := j.flight
	if f == nil || a.id != f.id {
		return false, nil
	}
	if a.err != nil {
		return false, fmt.Errorf("cep: stream: checkpoint %d: subtask %d: %w", a.id, a.sub, a.err)
	}
	if a.phase == ackLocal {
		// A subtask's local copy of a committed (or committing) Kafka
		// checkpoint.
		if f.localGot++; f.localGot < len(j.subs) || !f.committed {
			return false, nil
		}
		return true, j.completeLocal(f)
	}
	f.meta.Alerts[a.sub], f.meta.Late[a.sub], f.meta.Shadow[a.sub] = a.alerts, a.late, a.shadow
	f.stall = max(f.stall, a.stall)
	f.keys += a.keys
	f.buf += a.buf
	f.partials += a.partials
	f.stateBytes += a.stateBytes
	f.written += a.written
	f.meta.Stats.Alerts += a.nAlerts
	f.meta.Stats.Late += a.nLate
	if j.kafka != nil {
		if f.headers == nil {
			f.headers = make([][]headerRecord, len(j.subs))
		}
		f.headers[a.sub] = a.headers
	}
	if f.got++; f.got < len(j.subs) {
		return false, nil
	}
	data, err := json.Marshal(&f.meta)
	if err != nil {
		return false, err
	}
	if ko := j.kafka; ko != nil {
		// The checkpoint is its transaction: committed first (a restore
		// goes by the group's offsets), then the sinks go on into the
		// next one; its local copy, if it has one, completes when the
		// subtasks' parts are written, with where the changelog stands
		// after this transaction (read now: nothing of the next one is
		// produced before the commits below). The partitions'
		// aggregator states go into the changelog on their own, not into
		// the marker of every partition.
		if f.meta.Source.PartAggregates != nil {
			m := f.meta
			m.Source.PartAggregates = nil
			if data, err = json.Marshal(&m); err != nil {
				return false, err
			}
		}
		if err := j.commitKafka(f, data, f.headers); err != nil {
			if m := j.cfg.Monitor; m != nil {
				m.checkpoint(0, false)
			}
			return false, err
		}
		f.committed = true
		ko.clNext = ko.txn.Next(ko.changelog, ko.clNext)
		f.meta.Changelog = ko.clNext
		if f.w == nil {
			j.flight = nil
		}
	} else {
		if err := f.w.PutMeta("job", data); err != nil {
			return false, fmt.Errorf("cep: stream: %w", err)
		}
		if err := f.w.Commit(); err != nil {
			return false, fmt.Errorf("cep: stream: %w", err)
		}
		j.flight = nil
	}
	failpoint.Hit("commit.before-sinks")
	if j.dead != nil {
		if err := j.dead.Commit(f.id); err != nil {
			return false, fmt.Errorf("cep: stream: dead letters: %w", err)
		}
	}
	for i := range j.subs {
		if err := j.send(i, msg{kind: msgCommit, id: f.id}); err != nil {
			return false, err
		}
	}
	j.stats.Checkpoints++
	j.stats.LastCheckpoint = f.id
	j.committed = f.meta.Stats.Alerts
	if j.kafka != nil && j.stats.Checkpoints == 1 {
		if j.begun.Sub(j.start) > time.Second {
			// A later job of the run (after a rebalance or a switch),
			// as the first event's line says.
			j.logf("the job's first transaction committed: checkpoint %d, %v after the job's start", f.id, time.Since(j.begun).Round(time.Millisecond))
		} else {
			j.logf("first transaction committed: checkpoint %d, %v after the start", f.id, time.Since(j.start).Round(time.Millisecond))
		}
	}
	if h := j.cfg.hooks.afterCommit; h != nil && h(f.id) {
		j.stopAsked = true // the loop stops at its next turn
	}
	j.stats.LastDuration = time.Since(f.started)
	j.stats.LastStall = f.stall
	j.stats.MaxDuration = max(j.stats.MaxDuration, j.stats.LastDuration)
	j.stats.MaxStall = max(j.stats.MaxStall, f.stall)
	j.stats.Keys, j.stats.Buffered = f.keys, f.buf
	j.stats.PartialMatches, j.stats.StateBytes, j.stats.CheckpointBytes = f.partials, f.stateBytes, f.written
	if m := j.cfg.Monitor; m != nil {
		// The checkpoint and the figures it took go out together.
		m.checkpoint(j.stats.LastDuration, true)
		j.publish(true)
	}
	if j.flight != nil {
		// A Kafka checkpoint's local copy: done once every subtask's part
		// is written (perhaps already).
		if f.localGot < len(j.subs) {
			return false, nil
		}
		return true, j.completeLocal(f)
	}
	return true, nil
}

// completeLocal commits the local copy of the Kafka checkpoint f, once its
// transaction committed and every subtask wrote its part: the next
// barrier waits for it.
func (j *job) completeLocal(f *inflight) error {
	data, err := json.Marshal(&f.meta)
	if err != nil {
		return err
	}
	if err := f.w.PutMeta("job", data); err != nil {
		return fmt.Errorf("cep: stream: %w", err)
	}
	if err := f.w.Commit(); err != nil {
		return fmt.Errorf("cep: stream: %w", err)
	}
	j.kafka.lastLocal = time.Now()
	j.flight = nil
	j.purgeRepartitions(f)
	return nil
}

func unmarshalMeta(b []byte, m *jobMeta) error { return json.Unmarshal(b, m) }
