package runtime

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/runtime/state"
)

// PartitionWatermarksConfig configures [PartitionWatermarks].
type PartitionWatermarksConfig struct {
	// OutOfOrderness is the bound of every partition's
	// [WatermarkGenerator].
	OutOfOrderness time.Duration
	// IdleTimeout, when positive, marks a partition idle once no record of
	// it came for that long (a caught-up or quiet input, as Flink's
	// withIdleness): it stops holding the combined watermark back until
	// its next record. Measured at Tick, so with the resolution of the
	// caller's tick interval. Default (0): partitions are never idle.
	IdleTimeout time.Duration
	// IdleWhenCaughtUp makes a quiet partition idle only while it is
	// caught up to its end ([PartitionWatermarks.SetCaughtUp]; a Kafka
	// partition at its last stable offset): one that is silent because
	// its reader lags, or its broker is slow, goes on holding the
	// watermark back. And when an idle partition becomes active again,
	// every other idle one does too, until it is quiet for IdleTimeout
	// again: caught up as of its reader's last look, it may hold records
	// of the same burst that its reader has not handed over yet (a
	// producer catching up after a silence writes into every partition at
	// once), which the first partition's watermark alone would make late.
	// Default (false): silence alone.
	IdleWhenCaughtUp bool
	// WallClockAdvance, for live runs, moves the combined watermark on
	// while every partition that has not finished is idle and followed,
	// so that absence rules fire on a quiet stream: the watermark becomes
	// the largest one the partitions reached plus the wall time elapsed
	// since the last record arrived (as seen by Tick). It never goes
	// beyond what elapsed on the wall clock, and never jumps to the wall
	// clock itself: a replay of dated events goes on from its own time.
	// Default (false): the watermark comes from record timestamps only.
	WallClockAdvance bool
	// Now is the wall clock. Default (nil): time.Now. Tests inject theirs.
	Now func() time.Time
}

// PartitionWatermarks combines the watermarks of a source's partitions
// into the one the consumer forwards: each partition has its own
// bounded-out-of-orderness [WatermarkGenerator] over its own record
// timestamps; the combined watermark is the minimum over the partitions
// neither idle nor finished, or, when all are idle or finished, the
// maximum they reached. It only goes forward: a partition that becomes
// active again behind it (its next record ends its idleness) holds it
// where it is, and its records behind it are late.
//
// Records do not read the clock: OnEvent only marks the partition active,
// and Tick, which the consumer calls from a timer, turns marks into
// activity times and decides idleness and the wall-clock advance.
//
// PartitionWatermarks is not safe for concurrent use; its owner is the
// consumer's goroutine.
type PartitionWatermarks struct {
	cfg     PartitionWatermarksConfig
	parts   []*partWatermark // by Partition.Index; nil where none was added
	emitted event.Watermark
	// lastRecord is the time of the Tick that saw the latest record (the
	// construction time before any).
	lastRecord time.Time
	restored   map[string]event.Time // largest timestamp of a partition by name, from Restore
	carried    map[string]time.Time  // since of a partition by name, from Carry
}

type partWatermark struct {
	name     string
	followed bool
	gen      *WatermarkGenerator
	active   bool      // a record came since the last Tick
	since    time.Time // the last Tick that saw a record, or when added
	idle     bool
	finished bool
	removed  bool // its file is gone: left out of the checkpoints
	caughtUp bool // as the partition's last batch said (IdleWhenCaughtUp)
}

// current is the partition's own watermark.
func (pw *partWatermark) current() event.Watermark { return pw.gen.Current() }

// NewPartitionWatermarks returns a combiner without partitions; its
// watermark is event.MinTime.
func NewPartitionWatermarks(cfg PartitionWatermarksConfig) (*PartitionWatermarks, error) {
	if cfg.OutOfOrderness < 0 || cfg.IdleTimeout < 0 {
		return nil, errors.New("runtime: partition watermarks: negative duration")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &PartitionWatermarks{cfg: cfg, emitted: event.MinTime, lastRecord: cfg.Now()}, nil
}

// Add registers a partition (at its Opened batch), active and with no
// timestamp yet, unless [PartitionWatermarks.Restore] gave one for its
// name. followed says whether it is a live input the wall-clock advance
// may count on. Adding an index twice is an error.
func (w *PartitionWatermarks) Add(p Partition, followed bool) error {
	if p.Index < 0 {
		return fmt.Errorf("runtime: partition watermarks: negative index %d", p.Index)
	}
	if p.Index < len(w.parts) && w.parts[p.Index] != nil {
		return fmt.Errorf("runtime: partition watermarks: partition %d added twice", p.Index)
	}
	gen, err := NewWatermarkGenerator(w.cfg.OutOfOrderness, 1)
	if err != nil {
		return err
	}
	if ts, ok := w.restored[p.Name]; ok {
		gen.seen, gen.max = true, ts
		gen.emitted = gen.Current()
	}
	for len(w.parts) <= p.Index {
		w.parts = append(w.parts, nil)
	}
	since := w.cfg.Now()
	if at, ok := w.carried[p.Name]; ok && at.Before(since) {
		since = at
	}
	w.parts[p.Index] = &partWatermark{name: p.Name, followed: followed, gen: gen, since: since}
	return nil
}

// Activity is what the combiner of one job hands the one of the next job
// of the same process (a ruleset switch ends a job at a checkpoint and
// starts another): when each partition last had a record, by name, and
// when the latest record of any came. Idleness and the wall-clock
// advance are of wall time, which no checkpoint holds.
type Activity struct {
	Since      map[string]time.Time
	LastRecord time.Time
}

// Activity returns when each partition last had a record (now for one
// with a record since the last Tick) and when the latest record came.
func (w *PartitionWatermarks) Activity() Activity {
	now := w.cfg.Now()
	a := Activity{Since: map[string]time.Time{}, LastRecord: w.lastRecord}
	for _, pw := range w.parts {
		switch {
		case pw == nil || pw.finished:
		case pw.active:
			a.Since[pw.name], a.LastRecord = now, now
		default:
			a.Since[pw.name] = pw.since
		}
	}
	return a
}

// Carry takes the activity of the previous job's combiner: a partition
// added since counts its quiet time from its last record then, not from
// its Add, so that one idle before a switch is idle again at the next
// Tick, and the wall-clock advance goes on from the latest record. Without
// it, every partition held the watermark back again for a whole
// IdleTimeout after each deploy. Call it before the partitions are added.
func (w *PartitionWatermarks) Carry(a Activity) {
	w.carried = a.Since
	if !a.LastRecord.IsZero() && a.LastRecord.Before(w.lastRecord) {
		w.lastRecord = a.LastRecord
	}
}

// OnEvent records a record timestamp of the partition with index p, which
// must have been added. It ends the partition's idleness. When the
// combined watermark advanced, it returns it and true: the caller forwards
// it after the record.
func (w *PartitionWatermarks) OnEvent(p int, ts event.Time) (event.Watermark, bool) {
	pw := w.parts[p]
	pw.active = true
	_, moved := pw.gen.OnEvent(ts)
	if pw.idle {
		pw.idle, moved = false, true
		w.wakeIdle(p)
	}
	if !moved {
		return 0, false
	}
	return w.advance(w.combined())
}

// SetCaughtUp records whether the partition with index p is caught up to
// its end, as its latest batch says: with IdleWhenCaughtUp, only a
// caught-up partition becomes idle, and one that is not ends its
// idleness (its watermark holds the others back again).
func (w *PartitionWatermarks) SetCaughtUp(p int, caughtUp bool) (event.Watermark, bool) {
	pw := w.parts[p]
	pw.caughtUp = caughtUp
	if !caughtUp && pw.idle && w.cfg.IdleWhenCaughtUp {
		pw.idle = false
		w.wakeIdle(p)
		return w.advance(w.combined())
	}
	return 0, false
}

// wakeIdle, with IdleWhenCaughtUp, ends the idleness of every idle
// partition but p, whose idleness just ended: each holds the watermark
// back again, at its own, until its records come or it is quiet for
// IdleTimeout (counted from the next Tick, as after a record).
func (w *PartitionWatermarks) wakeIdle(p int) {
	if !w.cfg.IdleWhenCaughtUp {
		return
	}
	for i, o := range w.parts {
		if i != p && o != nil && o.idle && !o.finished {
			o.idle, o.active = false, true
		}
	}
}

// Quiet tells that the partition with index p has had no record for at
// least d: a followed file closed for inactivity ([Batch.Closed], d the
// reader's CloseInactive). Its quiet time counts from then, unless a
// record came since the last Tick, so that the next Tick makes it idle
// when d reaches IdleTimeout, as if it had been watched that long. After
// a restart a file that starts closed (not modified for CloseInactive)
// held the watermark back at its restored time for a whole IdleTimeout.
func (w *PartitionWatermarks) Quiet(p int, d time.Duration) {
	pw := w.parts[p]
	if pw.active || pw.finished {
		return
	}
	if at := w.cfg.Now().Add(-d); at.Before(pw.since) {
		pw.since = at
	}
}

// Unmodified tells that the followed file of the partition with index p,
// caught up to its end, had not been modified for d ([Batch.Unmodified]):
// no record was written to it for d, however recently its records were
// read (a directory of finished files read when a run starts, or after an
// outage). Its quiet time counts from its modification time, so that the
// next Tick makes it idle when d reaches IdleTimeout, as if it had been
// watched that long: the files of a backlog no longer hold the watermark
// back, and their events in memory, for a whole IdleTimeout after they
// were read.
func (w *PartitionWatermarks) Unmodified(p int, d time.Duration) {
	pw := w.parts[p]
	if pw == nil || pw.finished || d <= 0 {
		return
	}
	now := w.cfg.Now()
	if at := now.Add(-d); pw.active || at.Before(pw.since) {
		pw.since = at
	}
	if pw.active {
		// The records were read now, as Tick would have seen them.
		pw.active, w.lastRecord = false, now
	}
}

// Finish marks the partition with index p ended (its Done batch): it no
// longer holds the combined watermark back. It returns the combined
// watermark and true when that advanced.
func (w *PartitionWatermarks) Finish(p int) (event.Watermark, bool) {
	w.parts[p].finished = true
	return w.advance(w.combined())
}

// Remove ends the partition with index p as Finish does, and leaves it out
// of the state AppendBinary encodes: its file is gone ([Batch.Gone]), and
// a file that takes its name later is a new partition, with no timestamp
// yet. It returns the combined watermark and true when that advanced.
func (w *PartitionWatermarks) Remove(p int) (event.Watermark, bool) {
	w.parts[p].removed = true
	delete(w.restored, w.parts[p].name)
	return w.Finish(p)
}

// Tick is the consumer's timer: it reads the clock once, marks the
// partitions quiet for IdleTimeout idle, and applies the wall-clock
// advance. It returns the combined watermark and true when that advanced.
func (w *PartitionWatermarks) Tick() (event.Watermark, bool) {
	now := w.cfg.Now()
	for _, pw := range w.parts {
		switch {
		case pw == nil || pw.finished:
		case pw.active:
			pw.active, pw.since = false, now
			w.lastRecord = now
		case !pw.idle && w.cfg.IdleTimeout > 0 && now.Sub(pw.since) >= w.cfg.IdleTimeout &&
			(pw.caughtUp || !w.cfg.IdleWhenCaughtUp):
			pw.idle = true
		}
	}
	wm := w.combined()
	if w.cfg.WallClockAdvance && w.allIdleFollowed() {
		reached := w.reached()
		elapsed := event.Millis(now.Sub(w.lastRecord))
		if reached > event.MinTime && elapsed > 0 && int64(reached) < int64(event.MaxTime)-elapsed {
			wm = max(wm, reached+event.Time(elapsed))
		}
	}
	return w.advance(wm)
}

// Current returns the combined watermark last returned (event.MinTime
// before the first; the restored one after Restore).
func (w *PartitionWatermarks) Current() event.Watermark { return w.emitted }

// Of returns the watermark of the partition with index p alone
// (event.MinTime before its first timestamp, or when it was not added).
func (w *PartitionWatermarks) Of(p int) event.Watermark {
	if p >= len(w.parts) || w.parts[p] == nil {
		return event.MinTime
	}
	return w.parts[p].current()
}

// Finished reports whether the partition with index p has finished.
func (w *PartitionWatermarks) Finished(p int) bool {
	return p < len(w.parts) && w.parts[p] != nil && w.parts[p].finished
}

// CaughtUp reports whether every partition that has neither finished
// nor been removed is caught up to its end, as its last batch said
// (SetCaughtUp; a partition whose reader never says is not).
func (w *PartitionWatermarks) CaughtUp() bool {
	for _, pw := range w.parts {
		if pw != nil && !pw.finished && !pw.removed && !pw.caughtUp {
			return false
		}
	}
	return true
}

// Idle reports whether the partition with index p is idle.
func (w *PartitionWatermarks) Idle(p int) bool {
	return p < len(w.parts) && w.parts[p] != nil && w.parts[p].idle
}

// combined is the minimum watermark over the partitions that are neither
// idle nor finished; when there is none, the maximum reached.
func (w *PartitionWatermarks) combined() event.Watermark {
	lo, some := event.MaxTime, false
	for _, pw := range w.parts {
		if pw != nil && !pw.idle && !pw.finished {
			lo, some = min(lo, pw.current()), true
		}
	}
	if !some {
		return w.reached()
	}
	return lo
}

// reached is the largest watermark of a partition (event.MinTime without
// partitions or timestamps).
func (w *PartitionWatermarks) reached() event.Watermark {
	hi := event.MinTime
	for _, pw := range w.parts {
		if pw != nil {
			hi = max(hi, pw.current())
		}
	}
	return hi
}

// allIdleFollowed reports whether some partition is unfinished and every
// unfinished one is idle and followed. A followed partition removed (its
// file deleted while closed, [PartitionWatermarks.Remove]) counts as an
// idle one: the directory is quiet, not ended, as while the file was
// closed.
func (w *PartitionWatermarks) allIdleFollowed() bool {
	some := false
	for _, pw := range w.parts {
		if pw != nil && pw.removed && pw.followed {
			some = true
			continue
		}
		if pw == nil || pw.finished {
			continue
		}
		if !pw.idle || !pw.followed {
			return false
		}
		some = true
	}
	return some
}

func (w *PartitionWatermarks) advance(wm event.Watermark) (event.Watermark, bool) {
	if wm <= w.emitted {
		return 0, false
	}
	w.emitted = wm
	return wm, true
}

// partitionWatermarksVersion is the first byte of their encoding.
const partitionWatermarksVersion = 1

// AppendBinary appends the state a checkpoint keeps (it implements
// encoding.BinaryAppender): the combined watermark and, per partition
// (but those removed), its name and largest timestamp. Idleness is not
// kept: after a restore every partition starts active.
func (w *PartitionWatermarks) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, partitionWatermarksVersion)
	b = binary.AppendVarint(b, int64(w.emitted))
	kept := func(pw *partWatermark) bool { return pw != nil && pw.gen.seen && !pw.removed }
	n := 0
	for _, pw := range w.parts {
		if kept(pw) {
			n++
		}
	}
	b = binary.AppendUvarint(b, uint64(n))
	for _, pw := range w.parts {
		if kept(pw) {
			b = binary.AppendUvarint(b, uint64(len(pw.name)))
			b = append(b, pw.name...)
			b = binary.AppendVarint(b, int64(pw.gen.max))
		}
	}
	return b, nil
}

var errCorruptWatermarks = errors.New("runtime: corrupt partition watermarks")

// Restore sets the combiner to the state [PartitionWatermarks.AppendBinary]
// encoded in b, before any partition is added: the combined watermark,
// and the largest timestamp of each partition, which Add gives to the
// partition of the same name.
func (w *PartitionWatermarks) Restore(b []byte) error {
	if len(w.parts) > 0 {
		return errors.New("runtime: partition watermarks: Restore after Add")
	}
	r := event.Reader{B: b, Corrupt: errCorruptWatermarks}
	if v := r.Byte(); r.Err == nil && v > partitionWatermarksVersion {
		return state.LaterRecord("the partition watermarks", uint64(v), partitionWatermarksVersion)
	} else if r.Err == nil && v != partitionWatermarksVersion {
		return fmt.Errorf("runtime: partition watermarks of an unknown version %d", v)
	}
	emitted := event.Watermark(r.Varint())
	n := r.Count()
	restored := make(map[string]event.Time, n)
	for range n {
		name := string(r.Bytes(r.Count()))
		restored[name] = event.Time(r.Varint())
	}
	if r.Err != nil || len(r.B) != 0 || len(restored) != n {
		return errCorruptWatermarks
	}
	w.emitted, w.restored = emitted, restored
	return nil
}

// WatermarkState is the decoded state of [PartitionWatermarks]
// ([PartitionWatermarks.AppendBinary]): the combined watermark emitted and
// the largest timestamp of each partition by name. Jobs that split or
// join the partitions of their input (instances of one Kafka group
// taking over each other's partitions) build the state of a new set of
// partitions from the states of earlier ones.
type WatermarkState struct {
	Emitted event.Watermark
	Max     map[string]event.Time
}

// DecodeWatermarkState decodes what AppendBinary encoded.
func DecodeWatermarkState(b []byte) (WatermarkState, error) {
	var w PartitionWatermarks
	if err := w.Restore(b); err != nil {
		return WatermarkState{}, err
	}
	return WatermarkState{Emitted: w.emitted, Max: w.restored}, nil
}

// AppendBinary encodes the state as [PartitionWatermarks.AppendBinary]
// does, for [PartitionWatermarks.Restore].
func (s WatermarkState) AppendBinary(b []byte) ([]byte, error) {
	w := PartitionWatermarks{emitted: s.Emitted}
	names := make([]string, 0, len(s.Max))
	for n := range s.Max {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		gen := &WatermarkGenerator{seen: true, max: s.Max[n]}
		w.parts = append(w.parts, &partWatermark{name: n, gen: gen})
	}
	return w.AppendBinary(b)
}
