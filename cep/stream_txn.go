package cep

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/internal/failpoint"
	"github.com/cepheus-cep/cepheus/runtime"
	"github.com/cepheus-cep/cepheus/runtime/kafka"
	"github.com/cepheus-cep/cepheus/runtime/state"
)

// ErrTransaction marks the failure of a checkpoint's Kafka transaction
// (aborted, fenced, or of unknown outcome). [Engine.Stream] restarts the
// job from the last committed checkpoint a few times before it returns
// one. Use errors.Is(err, ErrTransaction).
var ErrTransaction = kafka.ErrTxn

// ErrFenced marks a Kafka job stopped because another instance with the
// same group and instance id took over its transactions (this one was a
// zombie: paused, partitioned off, or started twice), or, when nothing
// told that from the brokers' abort of its transaction at its timeout,
// may have ([kafka.ErrEpochOver] says both). Stream does not restart it.
// Errors that wrap it also wrap ErrTransaction. A transaction the brokers
// aborted at its timeout with no newer producer since
// ([kafka.ErrTimedOut]) is not fenced: Stream restarts the job.
var ErrFenced = kafka.ErrFenced

// countedPart reports whether the counters of part i of a restore by
// redistribution are summed into the job's.
func (j *job) countedPart(i int) bool {
	if j.kafka != nil && j.kafka.counted != nil {
		return j.kafka.counted[i]
	}
	return true
}

// instance is the instance's id (default "0").
func (k *KafkaInput) instance() string {
	if k.InstanceID == "" {
		return "0"
	}
	return k.InstanceID
}

// CheckInstanceID checks an instance id of [KafkaInput.InstanceID]: one
// to 100 letters, digits, '.', '_' or '-'. It names the instance in the
// transactional id, the group's static membership and the metadata of the
// committed offsets, which a space would make ambiguous.
func CheckInstanceID(id string) error {
	if id == "" || len(id) > 100 {
		return errors.New("want 1 to 100 characters")
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("letters, digits, '.', '_' and '-' only, not %q", c)
		}
	}
	return nil
}

// transactionalID is the instance's transactional id, and its static id
// in the group.
func (k *KafkaInput) transactionalID() string { return "cepheus-" + k.Group + "-" + k.instance() }

// transactional reports whether the job writes its outputs to Kafka
// topics, one transaction per checkpoint.
func (k *KafkaInput) transactional() bool { return k != nil && k.AlertsTopic != "" }

// kafkaOut is the transactional side of a Kafka job: the producer whose
// transaction each checkpoint ends, and the topics it writes.
type kafkaOut struct {
	in        *KafkaInput
	txn       *kafka.Txn
	direct    *kafka.Producer // the outputs' producer, at least once
	changelog string
	parts     int // of the input, and so of the changelog
	// clNext is where the changelog stands after the restored
	// checkpoint, and after the latest local copy since; lastLocal when
	// that copy was taken.
	clNext    map[int32]int64
	lastLocal time.Time
	// clParts are the state records read from the changelog when no
	// local checkpoint matched the group's offsets: one store per subtask
	// of each checkpoint restored (its headers; the keys go to their key
	// group's subtask, or all to the first when merged). merged: the
	// subtasks redistribute the key groups of clParts, summing the
	// counters of the parts counted says.
	clParts []*state.Mem
	clPlans []*plan // of each of clParts: the plan of its checkpoint
	merged  bool
	counted []bool
	// lowWatermark: the restored operators' watermarks go down to the
	// lowest (the job owns partitions that have not started).
	lowWatermark bool
	// instance is this instance's id; owned the input partitions the job
	// reads, sorted.
	instance string
	owned    []int32
	// local is the mask of the key specifications keyed by the record
	// key; reps the others, repartitioned.
	local uint64
	reps  []repartition
	// committed are the group's offsets of the owned partitions of the
	// input and the repartition topics, by partition name.
	committed map[string]int64
	// purgeFailed: the latest deletion of repartition records failed
	// (warned once until one succeeds).
	purgeFailed bool
}

// txnMetadata is the metadata of the offsets a checkpoint commits: the
// checkpoint's id and the instance that took it, which the markers in
// the changelog partitions of the same transaction name too, and
// " final" when the checkpoint is a bounded job's last (its partitions
// read to their ends and the final watermark passed): a bounded run of
// the group then has nothing more to do with them, even when the topic
// has grown since (txnFinal).
func txnMetadata(id int64, instance string, final bool) string {
	s := "cepheus chk=" + strconv.FormatInt(id, 10) + " inst=" + instance
	if final {
		s += txnFinalSuffix
	}
	return s
}

const txnFinalSuffix = " final"

// parseTxnMetadata reads metadata s as txnMetadata writes it (or as
// "cepheus chk=N", without an instance, as the first transactional
// builds did): ok only for a checkpoint id in canonical decimal, the one
// spelling txnMetadata gives it (no sign, no leading zero, above 0), so
// that no other string passes for a checkpoint's offsets.
func parseTxnMetadata(s string) (id int64, instance string, ok bool) {
	rest, ok := strings.CutPrefix(s, "cepheus chk=")
	n, instance, _ := strings.Cut(rest, " inst=")
	instance = strings.TrimSuffix(instance, txnFinalSuffix)
	if n == "" || n[0] < '1' || n[0] > '9' {
		return 0, instance, false
	}
	// Past a first digit of 1 to 9, ParseInt in base 10 takes digits
	// alone.
	id, err := strconv.ParseInt(n, 10, 64)
	return id, instance, ok && err == nil
}

// txnFinal reports whether metadata s is of the offsets of a bounded
// job's final checkpoint.
func txnFinal(s string) bool {
	_, _, ok := parseTxnMetadata(s)
	return ok && strings.HasSuffix(s, txnFinalSuffix)
}

// markerKey is the changelog key of the checkpoint marker: no encoded
// state key is one byte long.
var markerKey = []byte{0}

// changelogMarker is the last record of each checkpoint's transaction in
// every changelog partition of the job (those of the input partitions it
// owns): the checkpoint, the instance, the job's metadata and every
// subtask's header records, which, with the keyed records, restore the
// partition's state without a local copy, into a job of any instance.
type changelogMarker struct {
	Checkpoint int64
	Instance   string
	Meta       json.RawMessage
	Headers    [][]headerRecord // by subtask
}

// headerRecord is a state record that belongs to no key (an operator's
// header, the engine's counters): it goes into the marker, by subtask.
type headerRecord struct {
	Key, Value []byte
}

// kafkaRestorePoint prepares a transactional Kafka job over the input
// partitions its instance owns: the topics it writes, the producer
// (whose start fences an instance it replaces and aborts that one's open
// transaction), then the state to restore, partition by partition: the
// checkpoint the group's committed offsets name for each (with the
// instance that took it). When every owned partition names the same
// checkpoint of this instance and its local copy holds just these
// partitions, that copy (the restart of an instance that kept its
// partitions); else the changelog's partitions (from the latest local
// copy's offsets where it has them) and their markers' headers and
// watermarks, merged (j.kafka.clParts, j.meta). Nil and no clParts: a
// fresh start.
func (j *job) kafkaRestorePoint(ctx context.Context) (*state.Checkpoint, error) {
	k := j.cfg.Kafka
	n, err := kafka.PartitionCount(ctx, k.conn(), k.Topic)
	if err != nil {
		return nil, fmt.Errorf("cep: stream: input: %w", err)
	}
	ko := &kafkaOut{in: k, changelog: k.ChangelogTopic, parts: n, instance: k.instance(), owned: k.partitions}
	if ko.owned == nil {
		for p := range n {
			ko.owned = append(ko.owned, int32(p))
		}
	}
	if ko.changelog == "" {
		ko.changelog = k.Group + "-changelog"
	}
	ko.local, ko.reps = j.e.kafkaSpecs(k, n)
	// The outputs made here get the input's partition count (the
	// broker's default, often 1, capped their consumers at one); existing
	// topics are used as they are.
	topics := []kafka.TopicSpec{{Name: k.AlertsTopic, Partitions: n, AnyCount: true}, {Name: ko.changelog, Partitions: n, Compact: true}}
	manual := []string{ko.changelog}
	for _, rp := range ko.reps {
		topics = append(topics, kafka.TopicSpec{Name: rp.topic, Partitions: n, Purged: true})
		manual = append(manual, rp.topic)
	}
	for _, t := range []string{k.LateTopic, k.DeadTopic, k.ShadowTopic} {
		if t != "" {
			topics = append(topics, kafka.TopicSpec{Name: t, Partitions: n, AnyCount: true})
		}
	}
	if _, err := kafka.EnsureTopics(ctx, k.conn(), topics); err != nil {
		return nil, fmt.Errorf("cep: stream: %w", err)
	}
	failpoint.Hit("kafka.before-fence")
	ko.txn, err = kafka.NewTxn(ctx, kafka.TxnConfig{
		Brokers: k.Brokers, Security: k.Security, TransactionalID: k.transactionalID(), Group: k.Group,
		Member: k.member, Timeout: k.TxnTimeout, Manual: manual, Logf: j.logf,
	})
	if err != nil {
		return nil, fmt.Errorf("cep: stream: %w", err)
	}
	j.kafka = ko
	if k.AtLeastOnce {
		if ko.direct, err = kafka.NewProducer(k.conn()); err != nil {
			return nil, fmt.Errorf("cep: stream: %w", err)
		}
	}
	committed, err := kafka.GroupOffsetsHeld(ctx, k.conn(), k.Group, k.Topic, offsetsHeldLog(j.logf, k.Group, k.Topic))
	if err != nil {
		return nil, fmt.Errorf("cep: stream: %w", err)
	}
	marks := map[int32]chkMark{} // of the owned partitions
	ko.committed = map[string]int64{}
	repMarks := map[int32]chkMark{} // of owned repartition partitions
	for _, rp := range ko.reps {
		rc, err := kafka.GroupOffsetsHeld(ctx, k.conn(), k.Group, rp.topic, offsetsHeldLog(j.logf, k.Group, rp.topic))
		if err != nil {
			return nil, fmt.Errorf("cep: stream: %w", err)
		}
		for p, c := range rc {
			if !slices.Contains(ko.owned, p) {
				continue
			}
			ko.committed[partitionName(rp.topic, p)] = c.Offset
			if id, inst, ok := parseTxnMetadata(c.Metadata); ok && id > repMarks[p].id {
				repMarks[p] = chkMark{id: id, instance: inst, offset: -1}
			}
		}
	}
	var fresh []int32
	var newest int64 // the newest checkpoint of this instance named anywhere
	for p, c := range committed {
		id, inst, ok := parseTxnMetadata(c.Metadata)
		if !ok {
			return nil, fmt.Errorf("%w: group %s has offsets on %s-%d not committed by cepheus (metadata %q): use another group, or delete its offsets", ErrRestore, k.Group, k.Topic, p, c.Metadata)
		}
		if inst == ko.instance {
			newest = max(newest, id)
		}
		if slices.Contains(ko.owned, p) {
			marks[p] = chkMark{id: id, instance: inst, offset: c.Offset}
			ko.committed[partitionName(k.Topic, p)] = c.Offset
		}
	}
	for _, m := range repMarks {
		if m.instance == ko.instance {
			newest = max(newest, m.id)
		}
	}
	for _, p := range ko.owned {
		if _, ok := marks[p]; ok {
			continue
		}
		if m, ok := repMarks[p]; ok {
			// Its repartition partition was read before the input
			// partition had a position: its state is in the changelog,
			// the input partition starts afresh.
			marks[p] = m
			fresh = append(fresh, p)
			continue
		}
		fresh = append(fresh, p)
	}
	var unmarked []int32 // fresh, and without state
	for _, p := range fresh {
		if _, ok := marks[p]; !ok {
			unmarked = append(unmarked, p)
		}
	}
	if len(unmarked) > 0 {
		// A partition starting afresh has an empty changelog partition:
		// one holding committed records of another job (a group whose
		// offsets were deleted, a changelog topic shared by mistake)
		// would bring that job's keys back in a later restore.
		found := errors.New("found")
		_, err := kafka.ReadPartitions(ctx, k.conn(), ko.changelog, unmarked, nil, func(int32, []byte, []byte) error { return found })
		switch {
		case errors.Is(err, found):
			return nil, fmt.Errorf("cep: stream: group %s has committed no offsets on topic %s for partitions %v, but changelog topic %s holds committed state there: it belongs to another job; use a new -group (and so a new changelog), or name another -changelog-topic", k.Group, k.Topic, unmarked, ko.changelog)
		case err != nil:
			return nil, fmt.Errorf("cep: stream: changelog %s: %w", ko.changelog, err)
		}
	}
	ids, err := j.dir.Complete()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRestore, err)
	}
	if len(committed) == 0 && len(repMarks) == 0 {
		// The group committed nothing: local copies are of another job.
		if len(ids) > 0 {
			j.logf("group %s has committed nothing on topic %s: the local checkpoints (%d to %d) are of another job; discarding them", k.Group, k.Topic, ids[0], ids[len(ids)-1])
		}
		return nil, j.dir.DiscardAfter(0)
	}
	// Checkpoint ids go on from the newest this instance took (local
	// copies are of committed checkpoints only).
	if len(ids) > 0 {
		newest = max(newest, int64(ids[len(ids)-1]))
	}
	if len(marks) == 0 {
		j.firstID = newest + 1
		return nil, nil
	}
	failpoint.Hit("kafka.restore")
	if id, ok := sameMark(marks, ko.instance); ok && len(fresh) == 0 {
		if chk, err := j.dir.Open(state.CheckpointID(id)); err == nil {
			m, merr := j.readMeta(chk)
			if merr != nil {
				return nil, merr
			}
			if err = positionsMatch(m.Source.Positions, ko.committed); err == nil {
				ko.clNext = m.Changelog
				j.firstID = newest + 1
				return chk, nil
			}
		}
	}
	t := time.Now()
	base, err := j.localBase(ctx)
	if err != nil {
		return nil, err
	}
	why := "" // a switch's job restores as any job does: say why
	if sw := j.switched; sw != nil {
		why = " for the switch to the new version"
		if sw.req == nil {
			why = " for the switch that lets the draining rules go"
		}
	}
	if base != nil {
		j.logf("restoring partitions %v of topic %s from the local copy of checkpoint %d and changelog topic %s%s", ko.owned, k.Topic, base.ID, ko.changelog, why)
	} else {
		j.logf("restoring partitions %v of topic %s from changelog topic %s%s", ko.owned, k.Topic, ko.changelog, why)
	}
	if err := j.restoreChangelog(ctx, marks, len(fresh) > 0, base); err != nil {
		return nil, err
	}
	j.restored = newest
	j.firstID = newest + 1
	if len(unmarked) > 0 {
		j.logf("restored %s in %v (partitions %v start afresh: the group has committed nothing there)", partitionsText(len(marks)), time.Since(t).Round(time.Millisecond), unmarked)
	} else {
		j.logf("restored %s in %v", partitionsText(len(marks)), time.Since(t).Round(time.Millisecond))
	}
	return nil, nil
}

// baseMarker is the changelog marker of the local checkpoint base (of
// metadata bm): its metadata and its subtasks' header records.
func (j *job) baseMarker(base *state.Checkpoint, bm *jobMeta) (changelogMarker, error) {
	data, err := base.Meta("job")
	if err != nil {
		return changelogMarker{}, fmt.Errorf("%w: %w", ErrRestore, err)
	}
	m := changelogMarker{Checkpoint: int64(base.ID), Instance: j.kafka.instance, Meta: data}
	counter := j.e.counterKey()
	for i := range bm.Parallelism {
		r, done, err := openStore(base, subtaskStore(i), filepath.Join(j.cfg.StateDir, "work", "base-"+subtaskStore(i)))
		if err != nil {
			return changelogMarker{}, err
		}
		var hs []headerRecord
		for _, sp := range j.e.specs {
			for rec, err := range r.Records(sp.id, state.KeyGroupRange{First: headerGroup, Last: headerGroup}) {
				if err != nil {
					done()
					return changelogMarker{}, fmt.Errorf("%w: checkpoint %d: %w", ErrRestore, base.ID, err)
				}
				hs = append(hs, headerRecord{Key: state.AppendKey(nil, rec.Key), Value: slices.Clone(rec.Value)})
			}
		}
		v, err := oneRecord(r, counter)
		done()
		if err != nil {
			return changelogMarker{}, fmt.Errorf("%w: checkpoint %d: the counters: %w", ErrRestore, base.ID, err)
		}
		m.Headers = append(m.Headers, append(hs, headerRecord{Key: state.AppendKey(nil, counter), Value: slices.Clone(v)}))
	}
	return m, nil
}

// chkMark is what the group's committed offset of an input partition
// names: the checkpoint, the instance that took it, and the offset.
type chkMark struct {
	id       int64
	instance string
	offset   int64
}

// sameMark reports the checkpoint every mark names when they all name
// one of instance.
func sameMark(marks map[int32]chkMark, instance string) (int64, bool) {
	var id int64
	for _, m := range marks {
		if m.instance != instance || id != 0 && m.id != id {
			return 0, false
		}
		id = m.id
	}
	return id, id != 0
}

// localBase opens the newest complete local checkpoint that says where
// the changelog stood after it; nil when there is none.
func (j *job) localBase(ctx context.Context) (*state.Checkpoint, error) {
	ids, err := j.dir.Complete()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRestore, err)
	}
	for _, l := range slices.Backward(ids) {
		chk, err := j.dir.Open(l)
		if err != nil {
			continue
		}
		if m, err := j.readMeta(chk); err == nil && m.Changelog != nil {
			if j.localTooOld(ctx, chk) {
				return nil, nil
			}
			return chk, nil
		}
	}
	return nil, nil
}

// localTooOld reports (and logs) that local copy chk is too old to be
// brought up to date by the changelog's records after it: the brokers
// drop a compacted topic's tombstones delete.retention.ms after they
// were written (once its cleaner has passed them), so a deletion written
// since the copy may be gone from the changelog, and the key it deleted
// would come back from the copy. A copy older than three quarters of it
// is not used (the whole changelog is read instead); when the topic's
// setting cannot be read, the brokers' default of 24 h is assumed.
func (j *job) localTooOld(ctx context.Context, chk *state.Checkpoint) bool {
	ko := j.kafka
	at, err := chk.Completed()
	if err != nil {
		return false // Open read its marker: not expected
	}
	retention, err := kafka.DeleteRetention(ctx, j.cfg.Kafka.conn(), ko.changelog)
	if err != nil {
		j.logf("warning: %v; taking the brokers' default of 24h", err)
		retention = 24 * time.Hour
	}
	age := time.Since(at)
	if age <= retention*3/4 {
		return false
	}
	j.logf("the local copy of checkpoint %d is %v old, more than three quarters of changelog topic %s's delete.retention.ms (%v), after which a deletion may be gone from it: not used", chk.ID, age.Round(time.Second), ko.changelog, retention)
	return true
}

// positionsMatch reports whether a checkpoint's positions are the
// group's committed offsets of the owned partitions (by name).
func positionsMatch(pos []runtime.Position, committed map[string]int64) error {
	if len(pos) != len(committed) {
		return fmt.Errorf("%d positions, %d committed offsets", len(pos), len(committed))
	}
	for _, p := range pos {
		if o, ok := committed[p.File]; !ok || o != p.Offset {
			return fmt.Errorf("position %s at %d, committed %d", p.File, p.Offset, o)
		}
	}
	return nil
}

// restoreChangelog restores the owned partitions that marks names from
// the changelog: the keyed records of the local checkpoint base of the
// partitions it had, and the changelog's records after it, or (base nil,
// or a partition base did not have) the whole changelog partition, up to
// its last stable offset. The last marker read in each partition is the
// checkpoint marks names for it; from the markers come the subtasks'
// headers (the lowest clocks; the counters of this instance's newest
// checkpoint among them) and the partitions' watermarks.
// With fresh (owned partitions without a checkpoint, which start at the
// lowest watermark) the restored watermarks are lowered to the lowest.
func (j *job) restoreChangelog(ctx context.Context, marks map[int32]chkMark, fresh bool, base *state.Checkpoint) error {
	ko := j.kafka
	parts := slices.Sorted(maps.Keys(marks))
	recs := map[string][]byte{}
	from := map[int32]int64{}
	var bm *jobMeta
	if base != nil {
		var err error
		if bm, err = j.readMeta(base); err != nil {
			return err
		}
		had := map[int32]bool{}
		for _, pos := range bm.Source.Positions {
			p, ok := partitionOf(ko.in.Topic, pos.File)
			if o, logged := bm.Changelog[p]; ok && logged && marks[p].id != 0 {
				had[p], from[p] = true, o
			}
		}
		part := kafka.NewKeyPartitioner()
		keyed := state.KeyGroupRange{First: 0, Last: headerGroup - 1}
		for i := range bm.Parallelism {
			if len(had) == 0 {
				break
			}
			r, done, err := openStore(base, subtaskStore(i), filepath.Join(j.cfg.StateDir, "work", "base-"+subtaskStore(i)))
			if err != nil {
				return err
			}
			for _, sp := range j.e.specs {
				for rec, err := range r.Records(sp.id, keyed) {
					if err != nil {
						done()
						return fmt.Errorf("%w: checkpoint %d: %w", ErrRestore, base.ID, err)
					}
					if had[part(recordKey(rec.Key.Key), ko.parts)] {
						recs[string(state.AppendKey(nil, rec.Key))] = slices.Clone(rec.Value)
					}
				}
			}
			done()
		}
	}
	tail := map[string][]byte{} // nil: a tombstone
	markers := map[int32][]byte{}
	next, err := kafka.ReadPartitions(ctx, ko.in.conn(), ko.changelog, parts, from, func(p int32, k, v []byte) error {
		if bytes.Equal(k, markerKey) {
			markers[p] = v
		} else {
			tail[string(k)] = v
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: changelog %s: %w", ErrRestore, ko.changelog, err)
	}
	ko.clNext = next
	// The markers, one per checkpoint named.
	type named struct {
		m    changelogMarker
		meta *jobMeta
		wm   runtime.WatermarkState
	}
	byMark := map[chkMark]*named{}
	var order []chkMark
	for _, p := range parts {
		mk := marks[p]
		b := markers[p]
		var m changelogMarker
		switch {
		case b != nil:
			if err := json.Unmarshal(b, &m); err != nil {
				return fmt.Errorf("%w: changelog %s: checkpoint marker of partition %d: %w", ErrRestore, ko.changelog, p, err)
			}
		case base != nil && int64(base.ID) == mk.id && mk.instance == ko.instance && from[p] > 0:
			// Nothing after the local copy: the partition's checkpoint
			// is that copy, and its marker what the copy holds.
			if m, err = j.baseMarker(base, bm); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%w: changelog %s has no checkpoint marker in partition %d, but group %s committed checkpoint %d of instance %s for %s-%d", ErrRestore, ko.changelog, p, ko.in.Group, mk.id, mk.instance, ko.in.Topic, p)
		}
		if m.Checkpoint != mk.id || m.Instance != mk.instance {
			return fmt.Errorf("%w: changelog %s partition %d ends with checkpoint %d of instance %q, group %s committed checkpoint %d of instance %q", ErrRestore, ko.changelog, p, m.Checkpoint, m.Instance, ko.in.Group, mk.id, mk.instance)
		}
		key := chkMark{id: mk.id, instance: mk.instance}
		if byMark[key] != nil {
			continue
		}
		meta, err := j.checkMeta(m.Meta, m.Checkpoint)
		if err != nil {
			return err
		}
		if len(m.Headers) != meta.Parallelism {
			return fmt.Errorf("%w: changelog %s: checkpoint %d of instance %q has the headers of %d subtasks, not %d", ErrRestore, ko.changelog, m.Checkpoint, m.Instance, len(m.Headers), meta.Parallelism)
		}
		wm, err := runtime.DecodeWatermarkState(meta.Source.Watermarks)
		if err != nil {
			return fmt.Errorf("%w: checkpoint %d of instance %q: %w", ErrRestore, m.Checkpoint, m.Instance, err)
		}
		byMark[key] = &named{m: m, meta: meta, wm: wm}
		order = append(order, key)
	}
	if tail, err = joinChangelog(tail); err != nil {
		return err
	}
	aggs, err := takeAggStates(tail)
	if err != nil {
		return err
	}
	for k, v := range tail {
		if v == nil {
			delete(recs, k)
		} else {
			recs[k] = v
		}
	}
	// The counted checkpoint: this instance's newest among them.
	counted := -1
	for i, mk := range order {
		if mk.instance == ko.instance && (counted < 0 || mk.id > order[counted].id) {
			counted = i
		}
	}
	// One store per subtask of each checkpoint, with its headers; the
	// keyed records go to the owner of their key group when one
	// checkpoint of the same partitions is restored (so that a job of its
	// parallelism restores each store as its own), else to the first.
	first := byMark[order[0]]
	single := !fresh && len(order) == 1 && positionsMatch(first.meta.Source.Positions, ko.committed) == nil
	var stores []*state.Mem
	var countedParts []bool
	var plans []*plan
	firstStore := map[chkMark]int{} // of each checkpoint, its first store's index
	for i, mk := range order {
		firstStore[mk] = len(stores)
		for _, hs := range byMark[mk].m.Headers {
			plans = append(plans, byMark[mk].meta.Plan)
			mem := state.NewMem()
			for _, h := range hs {
				k, err := state.DecodeKey(h.Key)
				if err != nil {
					return fmt.Errorf("%w: changelog %s: %w", ErrRestore, ko.changelog, err)
				}
				if err := mem.Put(k, h.Value); err != nil {
					return err
				}
			}
			stores = append(stores, mem)
			countedParts = append(countedParts, i == counted)
		}
	}
	owner := make([]int, keyGroups)
	if single {
		for i := range len(stores) {
			r := groupRange(i, len(stores))
			for g := int(r.First); g <= int(r.Last); g++ {
				owner[g] = i
			}
		}
	}
	part := kafka.NewKeyPartitioner()
	for ks, v := range recs {
		k, err := state.DecodeKey([]byte(ks))
		if err != nil {
			return fmt.Errorf("%w: changelog %s: %w", ErrRestore, ko.changelog, err)
		}
		if int(k.KeyGroup) >= keyGroups {
			return fmt.Errorf("%w: changelog %s: record %s in key group %d of %d", ErrRestore, ko.changelog, k, k.KeyGroup, keyGroups)
		}
		to := owner[k.KeyGroup]
		if !single {
			// A store of the checkpoint of the record's partition (the
			// changelog is partitioned as the input, by the record key),
			// which the engine that wrote it reads: instances of a group
			// may run two versions, around a deploy (the Kafka trial's
			// group, whose every instance failed on the other version's
			// keys: "encoded for another pattern").
			if mk, ok := marks[part(recordKey(k.Key), ko.parts)]; ok {
				if i, ok := firstStore[chkMark{id: mk.id, instance: mk.instance}]; ok {
					to = i
				}
			}
		}
		if err := stores[to].Put(k, v); err != nil {
			return err
		}
	}
	// The job's metadata: the first checkpoint's, with the partitions'
	// positions (the committed offsets), their watermarks, the lowest
	// clocks, and the counted checkpoint's counters.
	meta := *first.meta
	meta.Finished, meta.Changelog = false, nil
	if !single {
		meta.Parallelism = len(stores)
		meta.Alerts = make([]runtime.PendingState, len(stores))
		meta.Late = make([]runtime.PendingState, len(stores))
		meta.Shadow = make([]runtime.PendingState, len(stores))
		meta.Dead = runtime.PendingState{}
		meta.Source = sourceMeta{Forwarded: int64(event.MaxTime)}
		wm := runtime.WatermarkState{Emitted: event.MaxTime, Max: map[string]event.Time{}}
		for _, mk := range order {
			nm := byMark[mk]
			wm.Emitted = min(wm.Emitted, nm.wm.Emitted)
			meta.Source.Forwarded = min(meta.Source.Forwarded, nm.meta.Source.Forwarded)
		}
		if fresh {
			wm.Emitted, meta.Source.Forwarded = event.MinTime, int64(event.MinTime)
		}
		for _, p := range parts {
			name := partitionName(ko.in.Topic, p)
			nm := byMark[chkMark{id: marks[p].id, instance: marks[p].instance}]
			if t, ok := nm.wm.Max[name]; ok {
				wm.Max[name] = t
			}
			if marks[p].offset >= 0 {
				meta.Source.Positions = append(meta.Source.Positions, runtime.Position{File: name, Offset: marks[p].offset, Line: marks[p].offset})
			}
			if u, ok := nm.meta.Source.RepSent[name]; ok {
				if meta.Source.RepSent == nil {
					meta.Source.RepSent = map[string]repUpstream{}
				}
				meta.Source.RepSent[name] = u
			}
			// The repartition partitions p: their offsets, and their
			// upstream markers as the same checkpoint saw them.
			for _, rp := range ko.reps {
				rname := partitionName(rp.topic, p)
				if o, ok := ko.committed[rname]; ok {
					meta.Source.Positions = append(meta.Source.Positions, runtime.Position{File: rname, Offset: o, Line: o})
				}
				if ups := nm.meta.Source.Repartition[rname]; ups != nil {
					if meta.Source.Repartition == nil {
						meta.Source.Repartition = map[string][]repUpstream{}
					}
					meta.Source.Repartition[rname] = ups
				}
			}
		}
		if meta.Source.Watermarks, err = wm.AppendBinary(nil); err != nil {
			return err
		}
		if counted >= 0 {
			c := byMark[order[counted]].meta
			meta.Stats = c.Stats
			meta.Source.Ahead = c.Source.Ahead
			meta.Source.FirstDeadLine, meta.Source.FirstDeadReason, meta.Source.FirstDeadFile = c.Source.FirstDeadLine, c.Source.FirstDeadReason, c.Source.FirstDeadFile
		}
	}
	// Each partition's aggregator state, of its own checkpoint: the
	// changelog's record of that checkpoint, or the local copy's when
	// that is the partition's checkpoint.
	meta.Source.PartAggregates, meta.Source.AggregatesOf = nil, first.meta.Source.AggregatesOf
	for _, p := range parts {
		nm := byMark[chkMark{id: marks[p].id, instance: marks[p].instance}]
		if nm.meta.Source.AggregatesOf != meta.Source.AggregatesOf {
			// Checkpoints of other aggregates: the windows start empty,
			// the events held go on (addPartAgg).
			meta.Source.AggregatesOf = ""
		}
		names := []string{partitionName(ko.in.Topic, p)}
		for _, rp := range ko.reps {
			names = append(names, partitionName(rp.topic, p))
		}
		for _, name := range names {
			st := nm.meta.Source.PartAggregates[name]
			if a, ok := aggs[name]; ok && a.mark.id == nm.m.Checkpoint && a.mark.instance == nm.m.Instance {
				st = a.state
			}
			if st == nil {
				continue
			}
			if meta.Source.PartAggregates == nil {
				meta.Source.PartAggregates = map[string][]byte{}
			}
			meta.Source.PartAggregates[name] = st
		}
	}
	if counted < 0 {
		meta.Stats = StreamStats{Watermark: event.MinTime}
	} else {
		// The rules this instance ran last (hot-loading): its newest
		// checkpoint's; each store is restored from its own's.
		c := byMark[order[counted]].meta
		meta.Plan, meta.Next = c.Plan, c.Next
	}
	// The job's watermark is the one its source forwarded, the lowest of
	// the checkpoints': the counters above are this instance's, and an
	// instance with no checkpoint among them (a standby that took the
	// partitions over) had none, -Inf in the metrics and "none yet" in
	// status until new records came, its partitions' watermarks restored.
	meta.Stats.Watermark = event.Time(meta.Source.Forwarded)
	j.meta = &meta
	ko.clPlans = plans
	// Each subtask takes its own store only from one checkpoint of this
	// instance of the same partitions; else the key groups are
	// redistributed, with the counters of the counted parts.
	ko.clParts, ko.merged, ko.counted, ko.lowWatermark = stores, !single || counted != 0, countedParts, fresh
	return nil
}

// commitKafka ends checkpoint f's transaction: the marker, then the
// input offsets and the commit. Its error wraps ErrTransaction.
func (j *job) commitKafka(f *inflight, meta []byte, headers [][]headerRecord) error {
	ko := j.kafka
	ctx := j.sctx
	m, err := json.Marshal(changelogMarker{Checkpoint: f.id, Instance: ko.instance, Meta: meta, Headers: headers})
	if err != nil {
		return err
	}
	if ko.direct != nil {
		// At least once: every output before the barrier is acknowledged
		// before the offsets past its input commit.
		if err := ko.direct.Flush(ctx); err != nil {
			return fmt.Errorf("cep: stream: checkpoint %d: the outputs: %w", f.id, err)
		}
	}
	// The offsets of the partitions read so far (a partition whose
	// first batch has not come yet has neither position nor state), and
	// in each of their changelog partitions the marker.
	offsets := map[string]kafka.Offsets{ko.in.Topic: {}}
	marked := map[int32]bool{} // the changelog partitions that get the marker
	for _, rp := range ko.reps {
		offsets[rp.topic] = kafka.Offsets{}
	}
	for _, p := range f.meta.Source.Positions {
		topic := ko.in.Topic
		n, ok := partitionOf(topic, p.File)
		for _, rp := range ko.reps {
			if !ok {
				topic = rp.topic
				n, ok = partitionOf(topic, p.File)
			}
		}
		if !ok || !slices.Contains(ko.owned, n) {
			return fmt.Errorf("cep: stream: position %s is not of an owned partition of topic %s", p.File, ko.in.Topic)
		}
		offsets[topic][n] = p.Offset
		marked[n] = true
	}
	j.writeAggStates(ctx, f.id, f.meta.Source.PartAggregates, marked)
	for _, n := range slices.Sorted(maps.Keys(marked)) {
		ko.txn.ProduceTo(ctx, ko.changelog, n, markerKey, m)
	}
	ends := false // for the failpoint only
	if f.upstream != nil {
		j.writeRepMarkers(f.upstream)
		ends = failpoint.Armed() && j.src.endsFinal(f.upstream)
	}
	failpoint.Hit("kafka.before-commit")
	if h := j.cfg.hooks.failCommit; h != nil {
		if err := h(f.id); err != nil {
			return fmt.Errorf("cep: stream: checkpoint %d: %w", f.id, ko.txn.Abort(ctx, err))
		}
	}
	metadata := func(topic string, p int32) string {
		// A partition the group committed as final stays so.
		final := f.meta.Finished || topic == ko.in.Topic && ko.in.final[p]
		return txnMetadata(f.id, ko.instance, final)
	}
	if err := ko.txn.CommitTopicsWith(ctx, offsets, metadata); err != nil {
		if m := j.cfg.Monitor; m != nil {
			m.kafkaTxn(false)
		}
		return fmt.Errorf("cep: stream: checkpoint %d: %w", f.id, err)
	}
	if m := j.cfg.Monitor; m != nil {
		m.kafkaTxn(true)
	}
	if f.upstream != nil {
		j.repCommitted(f.upstream)
	}
	failpoint.Hit("kafka.after-commit")
	if ends && j.src.rep.pending() {
		// The input is committed at its ends, with its final markers;
		// the repartition partitions are not complete (those markers, at
		// least, are still to be read): an instance that dies now leaves
		// their last records to the partitions' next owner.
		failpoint.Hit("kafka.ends-committed")
	}
	return nil
}

// txnSink is a sink of a transactional Kafka job: its records go into
// the open transaction, except between its barrier (PreCommit) and the
// commit of that checkpoint's transaction, when they are held and then
// produced into the next one.
type txnSink struct {
	txn    *kafka.Txn
	direct *kafka.Producer // at least once: every record at once, never held
	j      *job            // its sctx, once the subtasks start, ends the produces
	topic  string
	hold   bool
	held   [][2][]byte // key, value
}

func (j *job) newTxnSink(topic string) *txnSink {
	return &txnSink{txn: j.kafka.txn, direct: j.kafka.direct, j: j, topic: topic}
}

func (s *txnSink) Write(line []byte) error { return s.WriteKeyed(nil, line) }

// WriteKeyed writes line's JSON lines, each a record of key.
func (s *txnSink) WriteKeyed(key, line []byte) error {
	if len(line) == 0 || line[len(line)-1] != '\n' {
		return runtime.ErrNotLine
	}
	for v := range bytes.Lines(line) {
		if len(v)+len(key) > maxOutputRecord {
			// Not a transaction's failure: a restart would hit it again.
			return fmt.Errorf("%w: a record of %d bytes for topic %s is over the largest record the producer sends (%d): %.120s...", ErrOutputTooLarge, len(v), s.topic, maxOutputRecord, v)
		}
		v = bytes.Clone(v[:len(v)-1])
		k := bytes.Clone(key)
		if s.direct != nil {
			s.direct.Produce(s.j.sctx, s.topic, k, v)
			continue
		}
		if s.hold {
			s.held = append(s.held, [2][]byte{k, v})
			continue
		}
		s.txn.Produce(s.j.sctx, s.topic, k, v)
	}
	return nil
}

func (s *txnSink) PreCommit(checkpoint int64) (runtime.PendingState, error) {
	s.hold = true
	return runtime.PendingState{Checkpoint: checkpoint}, nil
}

func (s *txnSink) Commit(int64) error {
	for _, r := range s.held {
		s.txn.Produce(s.j.sctx, s.topic, r[0], r[1])
	}
	s.held, s.hold = nil, false
	return nil
}

func (s *txnSink) Recover(runtime.PendingState) error { return nil }
func (s *txnSink) Close() error                       { return nil }

// maxOutputRecord is the largest output record (alert, late event, dead
// letter): under the producer's batch limit (1 MiB, the broker's default
// message.max.bytes) with room for the batch's overhead.
const maxOutputRecord = 1<<20 - 4096

// ErrOutputTooLarge marks an output record (an alert with very many
// matched events, say) larger than a Kafka record may be: the job stops
// with it rather than fail every transaction.
var ErrOutputTooLarge = errors.New("cep: stream: output record too large for Kafka")

// keyedWriter is a sink whose records carry a key: the Kafka sinks.
type keyedWriter interface {
	WriteKeyed(key, line []byte) error
}

// alertKey is the record key of an alert: its key's value as the input's
// record key holds it (a string as it is, another value as JSON writes
// it; several fields joined by 0x1f); nil without key fields.
func alertKey(a *Alert) []byte {
	var b []byte
	for i, v := range a.Key {
		if i > 0 {
			b = append(b, 0x1f)
		}
		if s, ok := v.AsString(); ok {
			b = append(b, s...)
		} else {
			b = append(b, v.String()...)
		}
	}
	return b
}

// recordKey is the input record key of a state key: a single string key
// is itself; another value lost its 0 byte prefix.
func recordKey(k event.Key) []byte {
	return []byte(strings.TrimPrefix(string(k), "\x00"))
}

// maxChangelogRecord is the largest changelog record: under the broker's
// default message.max.bytes (1 MiB), with room for the batch's overhead.
// A variable, for the tests of chunking.
var maxChangelogRecord = 1<<20 - 4096

// changelogWriter writes a subtask's checkpoint into its store and, into
// the open transaction, its keyed records to the changelog (partitioned
// as the input: by the record key) and its other records (headers) into
// the ack, for the checkpoint's marker.
type changelogWriter struct {
	store   state.Writer
	s       *streamSubtask
	headers []headerRecord
}

func (w *changelogWriter) Put(k state.Key, v []byte) error {
	if err := w.store.Put(k, v); err != nil {
		return err
	}
	return w.log(k, v)
}

func (w *changelogWriter) Delete(k state.Key) error {
	if err := w.store.Delete(k); err != nil {
		return err
	}
	return w.log(k, nil)
}

func (w *changelogWriter) log(k state.Key, v []byte) error {
	key := state.AppendKey(nil, k)
	if k.KeyGroup == headerGroup || k == w.s.host.counterRecord {
		if v != nil {
			w.headers = append(w.headers, headerRecord{Key: key, Value: slices.Clone(v)})
		}
		return nil
	}
	ko := w.s.j.kafka
	if w.s.partition == nil {
		w.s.partition = kafka.NewKeyPartitioner()
	}
	p := w.s.partition(recordKey(k.Key), ko.parts)
	if v == nil {
		ko.txn.ProduceTo(w.s.j.sctx, ko.changelog, p, key, nil)
		return nil
	}
	ko.produceChangelog(w.s.j.sctx, p, key, v)
	return nil
}

// produceChangelog produces the value v of key into changelog partition
// p of the open transaction. A value too large for one record is cut
// into chunks: the chunks after the first under keys of their own, in
// the same partition and before the base record, which says how many
// there are (joinChangelog).
func (ko *kafkaOut) produceChangelog(ctx context.Context, p int32, key, v []byte) {
	chunk := max(maxChangelogRecord-len(key)-16, 64)
	n := (len(v) + chunk - 1) / chunk
	if n <= 1 {
		ko.txn.ProduceTo(ctx, ko.changelog, p, key, append([]byte{changelogWhole}, v...))
		return
	}
	for i := 1; i < n; i++ {
		piece := v[i*chunk : min(len(v), (i+1)*chunk)]
		ko.txn.ProduceTo(ctx, ko.changelog, p, chunkKey(key, i), bytes.Clone(piece))
	}
	base := binary.AppendUvarint([]byte{changelogChunked}, uint64(n))
	ko.txn.ProduceTo(ctx, ko.changelog, p, key, append(base, v[:chunk]...))
}

// The first byte of a changelog value: the whole state record follows,
// or (chunked) the number of chunks and the first one.
const (
	changelogWhole   = 0
	changelogChunked = 1
)

// chunkKey is the changelog key of chunk i of the record of encoded key
// key: 0x00 0x01, key, i. No encoded state key starts so (no operator
// id is empty), and the marker is one byte.
func chunkKey(key []byte, i int) []byte {
	return binary.AppendUvarint(append([]byte{0, 1}, key...), uint64(i))
}

// joinChangelog turns the changelog's records (by key, the latest value
// of each) into state records: chunked values joined, chunk records
// dropped. Chunks of a value written at an older checkpoint, when a
// value shrank, are ignored.
func joinChangelog(recs map[string][]byte) (map[string][]byte, error) {
	out := make(map[string][]byte, len(recs))
	for k, v := range recs {
		if strings.HasPrefix(k, "\x00\x01") {
			continue
		}
		if v == nil {
			out[k] = nil // a tombstone
			continue
		}
		if len(v) == 0 {
			return nil, fmt.Errorf("%w: changelog record %q: empty value", ErrRestore, k)
		}
		switch v[0] {
		case changelogWhole:
			out[k] = v[1:]
		case changelogChunked:
			// A value's chunks are records of the changelog: no more
			// than it holds (a count past int's range skipped the loop
			// below, and the value was its first chunk alone).
			n, m := binary.Uvarint(v[1:])
			if m <= 0 || n < 2 || n > uint64(len(recs)) {
				return nil, fmt.Errorf("%w: changelog record %q: bad chunk count", ErrRestore, k)
			}
			whole := slices.Clone(v[1+m:])
			for i := 1; i < int(n); i++ {
				c, ok := recs[string(chunkKey([]byte(k), i))]
				if !ok {
					return nil, fmt.Errorf("%w: changelog record %q: chunk %d of %d missing", ErrRestore, k, i, n)
				}
				whole = append(whole, c...)
			}
			out[k] = whole
		default:
			return nil, fmt.Errorf("%w: changelog record %q: unknown kind %d", ErrRestore, k, v[0])
		}
	}
	return out, nil
}

// errCheckpointTimeout ends a transactional job whose checkpoint did not
// complete in time: the records held for the next transaction cannot
// wait for another checkpoint (they would commit after the state that
// produced them), so the job restarts from the last committed one.
var errCheckpointTimeout = fmt.Errorf("%w: a checkpoint timed out", ErrTransaction)

// streamTxnRetries is how many times in a row Stream restarts a
// transactional job after a failed transaction.
const streamTxnRetries = 3

// isTxnFailure reports whether err is one Stream restarts after: a
// failed transaction, unless another instance fenced this one.
func isTxnFailure(err error) bool {
	return errors.Is(err, ErrTransaction) && !errors.Is(err, ErrFenced)
}

// partitionsText is "1 partition" or "N partitions".
func partitionsText(n int) string {
	if n == 1 {
		return "1 partition"
	}
	return fmt.Sprintf("%d partitions", n)
}
