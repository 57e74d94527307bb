package cep

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/nfa"
	"github.com/cepheus-cep/cepheus/runtime/state"
)

// The state of a SharedOperator has two parts: a header (the watermark,
// the processing clock, the counters, the rule ids with their counters)
// and one record per key (its rank, its buffered elements and, for each
// rule, whether it holds state there, its rank and run, and which buffered
// elements it does not see). Snapshot writes both as one blob; SnapshotTo
// writes them as state records, the header under headerGroup and each key
// in its key group, only the keys changed since the previous SnapshotTo.

// sharedSnapshotVersion differs from snapshotVersion, so that neither
// kind of operator restores the other's snapshot.
const sharedSnapshotVersion = 4

// keyRecordVersion is the first byte of a key's state record.
const keyRecordVersion = 1

// headerGroup is the key group of an operator's header record: no key
// belongs to it (SharedConfig.KeyGroups is at most state.MaxKeyGroups).
const headerGroup = state.KeyGroup(state.MaxKeyGroups)

// Snapshot encodes the operator's whole state: the header, then every key
// in key order with its record. The bytes are deterministic. A failed rule
// makes it return that rule's *[RuleError].
func (o *SharedOperator) Snapshot() ([]byte, error) {
	if err := o.finishSnapshot(); err != nil {
		return nil, err
	}
	o.unghostAll()
	if err := o.snapshottable(); err != nil {
		return nil, err
	}
	b := make([]byte, 0, 64+32*len(o.keys)*(1+len(o.rules))+64*o.buffered)
	b = append(b, sharedSnapshotVersion)
	b = o.appendHeader(b)
	keys := make([]event.Key, 0, len(o.keys)+len(o.cold))
	for k := range o.keys {
		keys = append(keys, k)
	}
	for k := range o.cold {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		if ks := o.keys[k]; ks != nil {
			b = o.appendKey(b, ks)
		} else {
			n := len(b)
			b = o.record(b, k, o.cold[k])
			b = append(b[:n], b[n+1:]...) // the record without its version
		}
	}
	return b, nil
}

func (o *SharedOperator) snapshottable() error {
	for _, r := range o.rules {
		if r.err != nil {
			return &RuleError{Rule: r.id, Err: r.err}
		}
	}
	return nil
}

// SnapshotTo writes the operator's state to w as records of operator op:
// the header, a record for every key whose state changed since the
// previous SnapshotTo (all keys the first time, and after a rule was added
// or removed), and a deletion for every key dropped since. w must hold
// the records of the previous SnapshotTo (a store the checkpoints write
// into in turn, the one the operator was restored from included): what
// it then holds restores with [RestoreSharedOperatorFrom]. A failed rule
// makes it return that rule's *[RuleError] and write nothing.
//
// SnapshotTo is [SharedOperator.SnapshotBegin] and then every step at once.
func (o *SharedOperator) SnapshotTo(w state.Writer, op state.OperatorID) error {
	if err := o.SnapshotBegin(w, op); err != nil {
		return err
	}
	_, err := o.SnapshotStep(-1)
	return err
}

// SnapshotBegin starts a snapshot that [SharedOperator.SnapshotStep]
// writes a few keys at a time, so that the operator's owner goes on
// processing in between (an incremental snapshot, the subtask's part of a
// checkpoint without a long pause): it writes the header now and fixes
// the keys to write, those SnapshotTo would write now. Until the last step
// the operator keeps each of them as it is now: the first element or
// timer that would change one writes its record first. What w holds once
// the steps are done is what SnapshotTo would have written at
// SnapshotBegin, whatever came in between. A snapshot still in progress
// is finished first. A failed rule makes it return that rule's
// *[RuleError] and write nothing.
func (o *SharedOperator) SnapshotBegin(w state.Writer, op state.OperatorID) error {
	if err := o.finishSnapshot(); err != nil {
		return err
	}
	o.unghostAll()
	if err := o.snapshottable(); err != nil {
		return err
	}
	sn := &pendingSnapshot{w: w, op: op, groups: o.keyGroups(), set: map[event.Key]struct{}{}}
	// A key to write is marked: a live key by its flag (cheap), a cold or
	// dropped one in the set.
	add := func(k event.Key) {
		if ks := o.keys[k]; ks != nil {
			if !ks.snap {
				ks.snap = true
				sn.keys = append(sn.keys, k)
			}
		} else if _, ok := sn.set[k]; !ok {
			sn.set[k] = struct{}{}
			sn.keys = append(sn.keys, k)
		}
	}
	if o.allDirty {
		for k := range o.keys {
			add(k)
		}
		for k := range o.cold {
			add(k)
		}
	}
	for _, k := range o.dirty {
		add(k)
	}
	b := o.appendHeader(append([]byte(nil), sharedSnapshotVersion))
	if err := w.Put(state.Key{Operator: op, KeyGroup: headerGroup}, b); err != nil {
		return err
	}
	// Only the listed keys carry the flag (touch sets it while tracking):
	// a checkpoint costs the changed keys, not all of them.
	for _, k := range o.dirty {
		if ks := o.keys[k]; ks != nil {
			ks.dirty = false
		}
	}
	clear(o.dirty)
	o.dirty, o.allDirty, o.tracking = o.dirty[:0], false, true
	if len(sn.keys) > 0 {
		o.snap = sn
	}
	return nil
}

// SnapshotStep writes up to n more keys of the snapshot in progress (all
// of them for n < 0) and reports whether it is done (also when there is
// none). An error of the writer ends the snapshot.
func (o *SharedOperator) SnapshotStep(n int) (done bool, err error) {
	sn := o.snap
	if sn == nil {
		return true, nil
	}
	for ; sn.next < len(sn.keys) && n != 0; sn.next++ {
		k := sn.keys[sn.next]
		if !o.takePending(sn, k) {
			continue // written before a change
		}
		if err := o.putKey(sn, k); err != nil {
			o.snap = nil
			return true, err
		}
		n--
	}
	if sn.next < len(sn.keys) {
		return false, nil
	}
	o.snap = nil
	return true, sn.err
}

// Snapshotting reports whether a snapshot is in progress.
func (o *SharedOperator) Snapshotting() bool { return o.snap != nil }

// pendingSnapshot is a snapshot between SnapshotBegin and its last step.
// A key not yet written is marked: a live key (in SharedOperator.keys) by
// its keyState's snap flag, a cold or dropped one by the set; freeze and
// thaw move the mark along with the key.
type pendingSnapshot struct {
	w      state.Writer
	op     state.OperatorID
	groups int
	keys   []event.Key            // to write, in order
	next   int                    // keys[:next] are done
	set    map[event.Key]struct{} // cold or dropped keys not yet written
	buf    []byte
	err    error // of a write before a change, reported by the last step
}

// putKey writes the record of k as the operator holds it now: its state,
// its cold record, or its deletion.
func (o *SharedOperator) putKey(sn *pendingSnapshot, k event.Key) error {
	rk := state.Key{Operator: sn.op, KeyGroup: state.GroupOf(k, sn.groups), Key: k}
	ks := o.keys[k]
	if ks == nil {
		if rec, ok := o.cold[k]; ok {
			sn.buf = o.record(sn.buf[:0], k, rec)
			return sn.w.Put(rk, sn.buf)
		}
		return sn.w.Delete(rk)
	}
	sn.buf = o.appendKey(append(sn.buf[:0], keyRecordVersion), ks)
	return sn.w.Put(rk, sn.buf)
}

// takePending reports whether the snapshot sn has yet to write k, and
// clears k's mark.
func (o *SharedOperator) takePending(sn *pendingSnapshot, k event.Key) bool {
	if ks := o.keys[k]; ks != nil {
		was := ks.snap
		ks.snap = false
		return was
	}
	if _, ok := sn.set[k]; ok {
		delete(sn.set, k)
		return true
	}
	return false
}

// beforeChange is called before the state of key k changes: while a
// snapshot is in progress and has not written k yet, k's record goes
// first, as it is. An error of the writer is kept for the last step.
func (o *SharedOperator) beforeChange(k event.Key) {
	sn := o.snap
	if sn == nil || !o.takePending(sn, k) {
		return
	}
	if err := o.putKey(sn, k); err != nil && sn.err == nil {
		sn.err = err
	}
}

// finishSnapshot writes what the snapshot in progress has left.
func (o *SharedOperator) finishSnapshot() error {
	if o.snap == nil {
		return nil
	}
	err := o.snap.err
	if _, serr := o.SnapshotStep(-1); err == nil {
		err = serr
	}
	return err
}

// touch records that ks's state changed since the last SnapshotTo. Until
// the operator's records are in a store (the first SnapshotTo, or a
// restore from records) nothing is tracked: the first SnapshotTo writes
// every key.
func (o *SharedOperator) touch(ks *keyState) {
	if o.tracking && !ks.dirty {
		ks.dirty = true
		o.dirty = append(o.dirty, ks.key)
	}
}

func (o *SharedOperator) keyGroups() int {
	if o.cfg.KeyGroups > 0 {
		return o.cfg.KeyGroups
	}
	return state.DefaultKeyGroups
}

func (o *SharedOperator) appendHeader(b []byte) []byte {
	b = binary.AppendVarint(b, int64(o.watermark))
	b = binary.AppendVarint(b, int64(o.procTime))
	b = binary.AppendUvarint(b, o.late)
	b = binary.AppendUvarint(b, o.overflow)
	b = binary.AppendUvarint(b, uint64(len(o.rules)))
	for _, r := range o.rules {
		b = binary.AppendUvarint(b, uint64(r.id))
		b = binary.AppendUvarint(b, r.dropped)
		b = binary.AppendUvarint(b, r.matches)
		b = binary.AppendUvarint(b, r.timeouts)
	}
	return b
}

// appendKey appends the record of ks (without its version byte).
func (o *SharedOperator) appendKey(b []byte, ks *keyState) []byte {
	b, _ = o.appendKeyNotes(b, ks, false)
	return b
}

// appendKeyNotes is appendKey; with notes, a deferred start
// (ruleSlot.pend) is written as the note it is instead of the run it stands
// for (a cold record, cold.go), and noted reports whether one was. It
// leaves ks as it is: the slots of a uniform or quiet key, and the run of a
// deferred start, are made for the record alone (before, a checkpoint made
// them at every key it wrote, which then held runs and slots it did not
// need: in a live job with a million keys, most of its NFA runs).
func (o *SharedOperator) appendKeyNotes(b []byte, ks *keyState, notes bool) (_ []byte, noted bool) {
	b = binary.AppendUvarint(b, ks.order)
	b = appendBuffer(b, ks)
	uniform := o.uniform(ks)
	for i := range o.rules {
		var slot ruleSlot
		if uniform {
			slot = o.slotOf(i, ks.order, ks.quiet) // as materialize would make it
		} else {
			slot = ks.rules[i]
		}
		sl, made := &slot, false
		if sl.pend != nil && !notes {
			// A deferred start is written as the run it stands for.
			sl.run, sl.pend, made = o.pendingRun(i, sl), nil, true
		}
		var flags byte
		if sl.present {
			flags |= 1
		}
		if sl.run != nil {
			flags |= 2
		}
		if sl.pend != nil {
			flags |= 4
			noted = true
		}
		b = append(b, flags)
		if sl.present {
			b = binary.AppendUvarint(b, sl.order)
		}
		if sl.run != nil {
			b = sl.run.AppendBinary(b)
		}
		if made {
			o.recycleRun(i, sl)
		}
		if sl.pend != nil {
			b = binary.AppendVarint(b, int64(sl.pendTs))
			b = sl.pend.AppendBinary(b)
			if sl.pendAdv {
				b = append(b, 1)
				b = binary.AppendVarint(b, int64(sl.pendAt))
			} else {
				b = append(b, 0)
			}
		}
		b = binary.AppendUvarint(b, uint64(len(sl.hidden)))
		for _, h := range sl.hidden {
			bi, _ := slices.BinarySearchFunc(ks.buf, h.ts, func(bk bucket, ts event.Time) int { return compareTime(bk.ts, ts) })
			b = binary.AppendUvarint(b, uint64(bi))
			b = binary.AppendUvarint(b, uint64(slices.Index(ks.buf[bi].evs, h.ev)))
		}
	}
	return b, noted
}

func compareTime(a, b event.Time) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// RestoreSharedOperator returns an operator in the state encoded by
// snapshot, with its timers re-armed. cfg and rules (ids in the same
// order, the same compiled patterns) must describe the operator that took
// the snapshot; then every later output is the same as if it had never
// stopped. A snapshot that does not decode returns an error wrapping
// [ErrCorruptSnapshot]; rules that do not match it, [ErrInvalidConfig].
func RestoreSharedOperator(cfg SharedConfig, rules []SharedRule, snapshot []byte) (*SharedOperator, error) {
	o, err := NewSharedOperator(cfg, rules...)
	if err != nil {
		return nil, err
	}
	if err := o.decode(snapshot); err != nil {
		return nil, snapshotErr(err)
	}
	return o, nil
}

// RestoreSharedOperatorFrom is [RestoreSharedOperator] from the records
// of operator op in r (what [SharedOperator.SnapshotTo] wrote): the
// header and the keys of every key group. The operator's next SnapshotTo
// writes only what changes after the restore, so it must write into the
// store restored from.
func RestoreSharedOperatorFrom(cfg SharedConfig, rules []SharedRule, r state.Reader, op state.OperatorID) (*SharedOperator, error) {
	o, err := NewSharedOperator(cfg, rules...)
	if err != nil {
		return nil, err
	}
	if err := o.restoreFrom(r, op); err != nil {
		return nil, snapshotErr(err)
	}
	return o, nil
}

// checkSnapshotVersion checks version v of an operator snapshot (its
// header), read with error readErr (then the decoding fails later): one
// above this build's is a later build's checkpoint, refused as such
// (state.LaterRecord), not as a damaged one.
func checkSnapshotVersion(v byte, readErr error) error {
	switch {
	case readErr != nil || v == sharedSnapshotVersion:
		return nil
	case v > sharedSnapshotVersion:
		return state.LaterRecord("the rules' operator snapshot", uint64(v), sharedSnapshotVersion)
	}
	return fmt.Errorf("%w: unknown version %d", ErrCorruptSnapshot, v)
}

// snapshotErr is err of a restore, wrapping ErrCorruptSnapshot unless it
// says already what is wrong: a corrupt snapshot, other rules, or a later
// build's checkpoint (state.ErrCheckpointVersion).
func snapshotErr(err error) error {
	if errors.Is(err, ErrCorruptSnapshot) || errors.Is(err, ErrInvalidConfig) || errors.Is(err, state.ErrCheckpointVersion) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrCorruptSnapshot, err)
}

// RestoreSharedOperatorParts is [RestoreSharedOperatorFrom] for a change
// of parallelism or of the partitions a job owns: the records of operator
// op are spread over parts (the stores of the subtasks of one checkpoint,
// or of several), and the operator restored takes the keys of the key
// groups in groups only. Its watermark and processing time are the
// lowest of the parts' headers (subtasks of one checkpoint saw the same
// ones; the jobs of other instances may be behind or ahead), so that no
// key's pending timer is passed over. The counters of the parts counted
// says (nil: none) are summed, the others left out (so that the subtasks
// of a job count each event once). Its first SnapshotTo writes every key:
// it writes into a store of its own.
func RestoreSharedOperatorParts(cfg SharedConfig, rules []SharedRule, parts []state.Reader, op state.OperatorID, groups state.KeyGroupRange, counted func(part int) bool) (*SharedOperator, error) {
	o, err := NewSharedOperator(cfg, rules...)
	if err != nil {
		return nil, err
	}
	if err := o.restoreParts(parts, op, groups, counted); err != nil {
		return nil, snapshotErr(err)
	}
	o.allDirty = true
	return o, nil
}

// ruleMigration maps the rules of a snapshot to those of the operator
// restoring it (a hot-loading switch): old are the rules the snapshot
// hosts, as the operator that took it had them (ids and patterns); to[i]
// is the position among the operator's rules of the rule that takes the
// state of old[i], or -1 when that state is dropped. The operator's rules
// that no old rule maps to start empty, seeing the events the keys
// buffer. A nil migration: the snapshot hosts the operator's rules.
type ruleMigration struct {
	old []SharedRule
	to  []int
}

// restoreMigrated is RestoreSharedOperatorParts with each part's operator
// id and rules given: ops[i] is the operator whose records part i holds
// ("" for none), migs[i] how its rules map to these.
func restoreMigrated(cfg SharedConfig, rules []SharedRule, parts []state.Reader, ops []state.OperatorID, groups state.KeyGroupRange, counted func(part int) bool, migs []*ruleMigration) (*SharedOperator, error) {
	o, err := NewSharedOperator(cfg, rules...)
	if err != nil {
		return nil, err
	}
	o.ops, o.migs = ops, migs
	defer func() { o.ops, o.migs = nil, nil }()
	if err := o.restoreParts(parts, "", groups, counted); err != nil {
		return nil, snapshotErr(err)
	}
	o.allDirty = true
	return o, nil
}

func (o *SharedOperator) restoreFrom(r state.Reader, op state.OperatorID) error {
	return o.restoreParts([]state.Reader{r}, op, state.AllKeyGroups, func(int) bool { return true })
}

func (o *SharedOperator) restoreParts(parts []state.Reader, op state.OperatorID, groups state.KeyGroupRange, counted func(int) bool) error {
	// A migration names each part's operator and rules (a part with no
	// operator of these keys has none).
	opOf := func(i int) state.OperatorID {
		if o.migs != nil {
			o.mig = o.migs[i]
			return o.ops[i]
		}
		return op
	}
	first := true
	for i, r := range parts {
		if op := opOf(i); op != "" {
			if err := o.restoreHeader(r, op, first, counted != nil && counted(i)); err != nil {
				return err
			}
			first = false
		}
	}
	if first {
		o.mig, o.tracking = nil, true
		return nil // no part holds it: it starts empty
	}
	// Every key group but the header's: a record outside the operator's
	// groups means the store was written with other KeyGroups.
	n := o.keyGroups()
	keys := state.KeyGroupRange{First: groups.First, Last: min(groups.Last, headerGroup-1)}
	for i, r := range parts {
		op := opOf(i)
		if op == "" {
			continue
		}
		for rec, err := range r.Records(op, keys) {
			if err != nil {
				return err
			}
			k := rec.Key.Key
			if g := state.GroupOf(k, n); g != rec.Key.KeyGroup {
				return fmt.Errorf("%w: key %q in key group %d, want %d (another KeyGroups?)", ErrCorruptSnapshot, string(k), rec.Key.KeyGroup, g)
			}
			d := decoder{event.Reader{B: rec.Value, Corrupt: ErrCorruptSnapshot}}
			if v := d.Byte(); d.Err == nil && v > keyRecordVersion {
				return state.LaterRecord(fmt.Sprintf("the record of key %q", string(k)), uint64(v), keyRecordVersion)
			} else if d.Err == nil && v != keyRecordVersion {
				return fmt.Errorf("%w: key %q: unknown version %d", ErrCorruptSnapshot, string(k), v)
			}
			if o.mig != nil {
				err = o.decodeMigratedKey(&d, k)
			} else {
				err = o.decodeKey(&d, k)
			}
			if err != nil {
				return err
			}
			if err := d.end(); err != nil {
				return err
			}
		}
	}
	o.mig = nil
	o.rearm()
	o.allDirty, o.tracking = false, true
	return nil
}

// lowerWatermark lowers the operator's watermark to wm when it is ahead:
// a restored operator that takes on input partitions that have not
// started (their watermark is the lowest) must not judge their events
// late. Pending timers fire as the watermark passes them again.
func (o *SharedOperator) lowerWatermark(wm event.Time) { o.watermark = min(o.watermark, wm) }

// restoreHeader reads the header record of op in r: the first sets the
// operator's header, the others lower its clocks to theirs; the counters
// of r are added when counters is set.
func (o *SharedOperator) restoreHeader(r state.Reader, op state.OperatorID, first, counters bool) error {
	type counts struct{ dropped, matches, timeouts uint64 }
	wm, proc, late, overflow := o.watermark, o.procTime, o.late, o.overflow
	prevRules := make([]counts, len(o.rules))
	for i, r := range o.rules {
		prevRules[i] = counts{r.dropped, r.matches, r.timeouts}
	}
	header := false
	for rec, err := range r.Records(op, state.KeyGroupRange{First: headerGroup, Last: headerGroup}) {
		if err != nil {
			return err
		}
		if header || rec.Key.Key != "" {
			return fmt.Errorf("%w: operator %s: unexpected header record %v", ErrCorruptSnapshot, op, rec.Key)
		}
		header = true
		d := decoder{event.Reader{B: rec.Value, Corrupt: ErrCorruptSnapshot}}
		if err := checkSnapshotVersion(d.Byte(), d.Err); err != nil {
			return err
		}
		if err := o.decodeHeader(&d); err != nil {
			return err
		}
		if err := d.end(); err != nil {
			return err
		}
	}
	if !header {
		return fmt.Errorf("%w: operator %s has no header record", ErrCorruptSnapshot, op)
	}
	if !counters {
		o.late, o.overflow = 0, 0
		for _, r := range o.rules {
			r.dropped, r.matches, r.timeouts = 0, 0, 0
		}
	}
	if first {
		return nil
	}
	o.watermark, o.procTime = min(o.watermark, wm), min(o.procTime, proc)
	o.late += late
	o.overflow += overflow
	for i, r := range o.rules {
		r.dropped += prevRules[i].dropped
		r.matches += prevRules[i].matches
		r.timeouts += prevRules[i].timeouts
	}
	return nil
}

func (o *SharedOperator) decode(b []byte) error {
	d := decoder{event.Reader{B: b, Corrupt: ErrCorruptSnapshot}}
	if err := checkSnapshotVersion(d.Byte(), d.Err); err != nil {
		return err
	}
	if err := o.decodeHeader(&d); err != nil {
		return err
	}
	nkeys := d.Count()
	var prev event.Key
	for i := range nkeys {
		if d.Err != nil {
			return d.Err
		}
		k := event.Key(d.Bytes(d.Count()))
		if d.Err == nil && i > 0 && k <= prev {
			return fmt.Errorf("%w: key %q out of order", ErrCorruptSnapshot, string(k))
		}
		if err := o.decodeKey(&d, k); err != nil {
			return err
		}
		prev = k
	}
	if err := d.end(); err != nil {
		return err
	}
	o.rearm()
	return nil
}

// rearm arms the timers of the restored keys (decoding and settling them
// marks none dirty). The heap breaks ties by the keys'
// ranks and then the keys, a total order, and each rule's order comes from
// its own ranks: the order of arming is free.
func (o *SharedOperator) rearm() {
	for _, ks := range o.keys {
		o.settle(ks)
	}
}

func (d *decoder) end() error {
	if d.Err != nil {
		return d.Err
	}
	if len(d.B) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrCorruptSnapshot, len(d.B))
	}
	return nil
}

func (o *SharedOperator) decodeHeader(d *decoder) error {
	o.watermark = event.Time(d.Varint())
	o.procTime = event.Time(d.Varint())
	o.late, o.overflow = d.Uvarint(), d.Uvarint()
	if mig := o.mig; mig != nil {
		if n := d.Count(); d.Err == nil && n != len(mig.old) {
			return fmt.Errorf("%w: the snapshot hosts %d rules, the migration %d", ErrInvalidConfig, n, len(mig.old))
		}
		for _, r := range o.rules {
			r.dropped, r.matches, r.timeouts = 0, 0, 0
		}
		for i, old := range mig.old {
			if id := d.Uvarint(); d.Err == nil && id != uint64(old.ID) {
				return fmt.Errorf("%w: the snapshot hosts rule %d where the migration has rule %d", ErrInvalidConfig, id, old.ID)
			}
			dropped, matches, timeouts := d.Uvarint(), d.Uvarint(), d.Uvarint()
			if t := mig.to[i]; t >= 0 {
				r := o.rules[t]
				r.dropped, r.matches, r.timeouts = dropped, matches, timeouts
			}
		}
		return d.Err
	}
	if n := d.Count(); d.Err == nil && n != len(o.rules) {
		return fmt.Errorf("%w: the snapshot hosts %d rules, the config %d", ErrInvalidConfig, n, len(o.rules))
	}
	for _, r := range o.rules {
		if id := d.Uvarint(); d.Err == nil && id != uint64(r.id) {
			return fmt.Errorf("%w: the snapshot hosts rule %d where the config has rule %d", ErrInvalidConfig, id, r.id)
		}
		r.dropped, r.matches, r.timeouts = d.Uvarint(), d.Uvarint(), d.Uvarint()
	}
	return d.Err
}

// decodeKey reads the record of key k and adds the key to o.
func (o *SharedOperator) decodeKey(d *decoder, k event.Key) error {
	if o.keys[k] != nil {
		return fmt.Errorf("%w: key %q twice", ErrCorruptSnapshot, string(k))
	}
	ks, err := o.decodeKeyState(d, k, false)
	if err != nil {
		return err
	}
	o.keys[k] = ks
	o.buffered += ks.n
	return nil
}

// decodeKeyState reads the record of key k, with notes if written with
// them (appendKeyNotes), into a new keyState that it does not add to o.
func (o *SharedOperator) decodeKeyState(d *decoder, k event.Key, notes bool) (*keyState, error) {
	ks := &keyState{key: k, rules: make([]ruleSlot, len(o.rules))}
	ks.order = d.Uvarint()
	if err := decodeBuffer(d, ks); err != nil {
		return nil, err
	}
	held := ks.n > 0
	for i := range ks.rules {
		r := o.rules[i]
		if err := decodeSlotOf(d, ks, &ks.rules[i], r.nfa, r.maxPartial, r.id, notes); err != nil {
			return nil, err
		}
		held = held || ks.rules[i].present
	}
	if d.Err != nil {
		return nil, d.Err
	}
	if !held {
		return nil, fmt.Errorf("%w: key %q holds no state", ErrCorruptSnapshot, string(k))
	}
	return ks, nil
}

// decodeMigratedKey is decodeKey through the migration o.mig: each of the
// snapshot's rule slots goes to the rule that takes it over, or is read
// and dropped; the rules that take over none start with the key's
// buffered events (a key left with no state is skipped).
func (o *SharedOperator) decodeMigratedKey(d *decoder, k event.Key) error {
	if o.keys[k] != nil {
		return fmt.Errorf("%w: key %q twice", ErrCorruptSnapshot, string(k))
	}
	mig := o.mig
	ks := &keyState{key: k, rules: make([]ruleSlot, len(o.rules))}
	ks.order = d.Uvarint()
	if err := decodeBuffer(d, ks); err != nil {
		return err
	}
	taken := make([]bool, len(o.rules))
	held := ks.n > 0
	for i, old := range mig.old {
		t := mig.to[i]
		var sl ruleSlot
		pat, maxPartial := old.NFA, old.MaxPartialMatches
		if t >= 0 {
			pat, maxPartial = o.rules[t].nfa, o.rules[t].maxPartial
		}
		if err := decodeSlotOf(d, ks, &sl, pat, maxPartial, old.ID, false); err != nil {
			return err
		}
		if t >= 0 {
			ks.rules[t], taken[t] = sl, true
			held = held || sl.present
		}
	}
	if d.Err != nil {
		return d.Err
	}
	if !held {
		// Its record must go (from a changelog, which keeps it).
		o.dirty = append(o.dirty, k)
		return nil
	}
	if ks.n > 0 {
		first := ^uint64(0)
		for _, b := range ks.buf {
			for _, ev := range b.evs {
				first = min(first, ev.Seq)
			}
		}
		for t := range ks.rules {
			if !taken[t] {
				ks.rules[t].present, ks.rules[t].order = true, first
			}
		}
	}
	o.keys[k] = ks
	o.buffered += ks.n
	return nil
}

// decodeSlotOf reads one rule slot of key ks into sl, its run decoded
// with pattern n; with notes, the slot may hold a note (appendKeyNotes).
func decodeSlotOf(d *decoder, ks *keyState, sl *ruleSlot, n *nfa.NFA, maxPartial, id int, notes bool) error {
	flags := d.Byte()
	if d.Err == nil && (flags > 3 && !notes || flags > 5) {
		d.Fail()
	}
	if sl.present = flags&1 != 0; sl.present {
		sl.order = d.Uvarint()
	}
	if flags&2 != 0 {
		if d.Err != nil {
			return d.Err
		}
		run, rest, err := n.DecodeRun(d.B)
		if err != nil {
			return fmt.Errorf("%w: key %q, rule %d: %w", ErrCorruptSnapshot, string(ks.key), id, err)
		}
		run.SetMaxPartialMatches(maxPartial)
		sl.run, d.B = run, rest
	}
	if flags&4 != 0 {
		sl.pendTs = event.Time(d.Varint())
		if d.Err != nil {
			return d.Err
		}
		ev, rest, err := event.DecodeEvent(d.B)
		if err != nil {
			return fmt.Errorf("%w: key %q, rule %d: %w", ErrCorruptSnapshot, string(ks.key), id, err)
		}
		sl.pend, d.B = ev, rest
		if sl.pendAdv = d.Byte() != 0; sl.pendAdv {
			sl.pendAt = event.Time(d.Varint())
		}
	}
	nh := d.Count()
	for range nh {
		bi, ei := d.Uvarint(), d.Uvarint()
		if d.Err != nil {
			return d.Err
		}
		if bi >= uint64(len(ks.buf)) || ei >= uint64(len(ks.buf[bi].evs)) {
			return fmt.Errorf("%w: key %q: bad hidden element", ErrCorruptSnapshot, string(ks.key))
		}
		bk := &ks.buf[bi]
		sl.hidden = append(sl.hidden, hiddenElem{ts: bk.ts, ev: bk.evs[ei]})
	}
	return d.Err
}
