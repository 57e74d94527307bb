package cep

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
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
// zombie: paused, partitioned off, or started twice). Stream does not
// restart it. Errors that wrap it also wrap ErrTransaction.
var ErrFenced = kafka.ErrFenced

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
	// of the checkpoint restored (its headers and its key groups' keys).
	clParts []*state.Mem
}

// txnMetadata is the metadata of the offsets a checkpoint commits: the
// checkpoint's id, by which a restore finds its local copy.
func txnMetadata(id int64) string { return "cepheus chk=" + strconv.FormatInt(id, 10) }

func parseTxnMetadata(s string) (int64, bool) {
	n, ok := strings.CutPrefix(s, "cepheus chk=")
	id, err := strconv.ParseInt(n, 10, 64)
	return id, ok && err == nil && id > 0
}

// markerKey is the changelog key of the checkpoint marker: no encoded
// state key is one byte long.
var markerKey = []byte{0}

// changelogMarker is the last record of each checkpoint's transaction in
// the changelog (partition 0): the job's metadata and every subtask's
// header records, which, with the keyed records, restore the job without
// its local state.
type changelogMarker struct {
	Checkpoint int64
	Meta       json.RawMessage
	Headers    [][]headerRecord // by subtask
}

// headerRecord is a state record that belongs to no key (an operator's
// header, the engine's counters): it goes into the marker, by subtask.
type headerRecord struct {
	Key, Value []byte
}

// checkRecordKeys refuses, in Kafka mode, a rule keyed by other fields
// than the input's record key: its keys would not follow the input's
// partitions (repartitioning is to come).
func (e *Engine) checkRecordKeys(k *KafkaInput) error {
	field := k.RecordKey
	for _, cr := range e.rules {
		r := cr.rule
		if len(r.KeyFields) == 0 {
			continue
		}
		if field == "" && len(r.KeyFields) == 1 {
			field = r.KeyFields[0]
		}
		if len(r.KeyFields) != 1 || r.KeyFields[0] != field {
			return fmt.Errorf("cep: stream: rule %q is keyed by (%s), not by the input's record key %s: in Kafka mode every keyed rule must be keyed by the field the records of topic %s are keyed by (-record-key); repartitioning by other fields is not built yet",
				r.Name, strings.Join(r.KeyFields, ", "), field, k.Topic)
		}
	}
	return nil
}

// kafkaRestorePoint prepares a transactional Kafka job: the topics it
// writes, the producer (whose start fences an instance it replaces and
// aborts that one's open transaction), then the checkpoint to restore:
// the one whose id the group's committed offsets name. The local copy of
// it when the state directory has it (newer local checkpoints, whose
// transactions never committed, are discarded), else the changelog's
// (j.kafka.clParts, j.meta). Nil: a fresh start.
func (j *job) kafkaRestorePoint(ctx context.Context) (*state.Checkpoint, error) {
	k := j.cfg.Kafka
	if err := j.e.checkRecordKeys(k); err != nil {
		return nil, err
	}
	n, err := kafka.PartitionCount(ctx, k.conn(), k.Topic)
	if err != nil {
		return nil, fmt.Errorf("cep: stream: input: %w", err)
	}
	ko := &kafkaOut{in: k, changelog: k.ChangelogTopic, parts: n}
	if ko.changelog == "" {
		ko.changelog = k.Group + "-changelog"
	}
	topics := []kafka.TopicSpec{{Name: k.AlertsTopic}, {Name: ko.changelog, Partitions: n, Compact: true}}
	for _, t := range []string{k.LateTopic, k.DeadTopic} {
		if t != "" {
			topics = append(topics, kafka.TopicSpec{Name: t})
		}
	}
	if _, err := kafka.EnsureTopics(ctx, k.conn(), topics); err != nil {
		return nil, fmt.Errorf("cep: stream: %w", err)
	}
	instance := k.InstanceID
	if instance == "" {
		instance = "0"
	}
	failpoint.Hit("kafka.before-fence")
	ko.txn, err = kafka.NewTxn(ctx, kafka.TxnConfig{
		Brokers: k.Brokers, Security: k.Security, TransactionalID: "cepheus-" + k.Group + "-" + instance, Group: k.Group,
		Timeout: k.TxnTimeout, Manual: []string{ko.changelog},
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
	committed, err := kafka.GroupOffsets(ctx, k.conn(), k.Group, k.Topic)
	if err != nil {
		return nil, fmt.Errorf("cep: stream: %w", err)
	}
	if len(committed) == 0 {
		// A fresh start writes a new changelog: one holding committed
		// records of another job (a group whose offsets were deleted, a
		// changelog topic shared by mistake) would bring that job's keys
		// back in a later restore.
		found := errors.New("found")
		err := kafka.ReadTopic(ctx, k.conn(), ko.changelog, func(int32, []byte, []byte) error { return found })
		switch {
		case errors.Is(err, found):
			return nil, fmt.Errorf("cep: stream: group %s has committed no offsets on topic %s, but changelog topic %s holds committed state: it belongs to another job; use a new -group (and so a new changelog), or name another -changelog-topic", k.Group, k.Topic, ko.changelog)
		case err != nil:
			return nil, fmt.Errorf("cep: stream: changelog %s: %w", ko.changelog, err)
		}
		if ids, err := j.dir.Complete(); err == nil && len(ids) > 0 {
			j.logf("group %s has committed nothing on topic %s: the local checkpoints (%d to %d) are of transactions that never committed; discarding them", k.Group, k.Topic, ids[0], ids[len(ids)-1])
		}
		return nil, j.dir.DiscardAfter(0)
	}
	var id int64
	for p, c := range committed {
		cid, ok := parseTxnMetadata(c.Metadata)
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: group %s has offsets on %s-%d not committed by cepheus (metadata %q): use another group, or delete its offsets", ErrRestore, k.Group, k.Topic, p, c.Metadata)
		case id != 0 && cid != id:
			return nil, fmt.Errorf("%w: group %s: the offsets of topic %s name checkpoints %d and %d", ErrRestore, k.Group, k.Topic, id, cid)
		}
		id = cid
	}
	failpoint.Hit("kafka.restore")
	if err := j.dir.DiscardAfter(state.CheckpointID(id)); err != nil {
		return nil, fmt.Errorf("cep: stream: %w", err)
	}
	chk, err := j.dir.Open(state.CheckpointID(id))
	if err == nil {
		m, merr := j.readMeta(chk)
		if merr != nil {
			return nil, merr
		}
		if err = positionsMatch(m.Source.Positions, k.Topic, committed); err == nil {
			ko.clNext = m.Changelog
			return chk, nil
		}
	}
	t := time.Now()
	base, err := j.localBefore(id)
	if err != nil {
		return nil, err
	}
	if base != nil {
		j.logf("checkpoint %d, committed by group %s, is in Kafka only: restoring the local copy of checkpoint %d and the changes since from changelog topic %s", id, k.Group, base.ID, ko.changelog)
	} else {
		j.logf("checkpoint %d, committed by group %s, has no local copy in %s: restoring it from changelog topic %s", id, k.Group, j.cfg.StateDir, ko.changelog)
	}
	if err := j.restoreChangelog(ctx, id, base); err != nil {
		return nil, err
	}
	j.logf("restored checkpoint %d in %v", id, time.Since(t).Round(time.Millisecond))
	return nil, nil
}

// localBefore opens the newest complete local checkpoint before id that
// says where the changelog stood after it; nil when there is none.
func (j *job) localBefore(id int64) (*state.Checkpoint, error) {
	ids, err := j.dir.Complete()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRestore, err)
	}
	for _, l := range slices.Backward(ids) {
		if int64(l) >= id {
			continue
		}
		chk, err := j.dir.Open(l)
		if err != nil {
			continue
		}
		if m, err := j.readMeta(chk); err == nil && m.Changelog != nil {
			return chk, nil
		}
	}
	return nil, nil
}

// positionsMatch reports whether a checkpoint's positions are the
// group's committed offsets.
func positionsMatch(pos []runtime.Position, topic string, committed map[int32]kafka.Committed) error {
	if len(pos) != len(committed) {
		return fmt.Errorf("%d positions, %d committed offsets", len(pos), len(committed))
	}
	for _, p := range pos {
		n, named := partitionOf(topic, p.File)
		if c, ok := committed[n]; !named || !ok || c.Offset != p.Offset {
			return fmt.Errorf("position %s at %d, committed %d", p.File, p.Offset, c.Offset)
		}
	}
	return nil
}

// restoreChangelog restores checkpoint id from the changelog: from the
// keyed records of the local checkpoint base and the changelog's records
// after it, or (base nil) from the whole changelog, up to its last stable
// offset; the last marker read is id's, with the job's metadata and the
// subtasks' headers.
func (j *job) restoreChangelog(ctx context.Context, id int64, base *state.Checkpoint) error {
	ko := j.kafka
	recs := map[string][]byte{}
	var from map[int32]int64
	if base != nil {
		bm, err := j.readMeta(base)
		if err != nil {
			return err
		}
		from = bm.Changelog
		keyed := state.KeyGroupRange{First: 0, Last: headerGroup - 1}
		for i := range bm.Parallelism {
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
					recs[string(state.AppendKey(nil, rec.Key))] = slices.Clone(rec.Value)
				}
			}
			done()
		}
	}
	tail := map[string][]byte{} // nil: a tombstone
	var marker []byte
	next, err := kafka.ReadTopicFrom(ctx, ko.in.conn(), ko.changelog, from, func(_ int32, k, v []byte) error {
		if bytes.Equal(k, markerKey) {
			marker = v
		} else {
			tail[string(k)] = v
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: changelog %s: %w", ErrRestore, ko.changelog, err)
	}
	ko.clNext = next
	var m changelogMarker
	if marker == nil {
		return fmt.Errorf("%w: changelog %s has no checkpoint marker, but group %s committed checkpoint %d", ErrRestore, ko.changelog, ko.in.Group, id)
	}
	if err := json.Unmarshal(marker, &m); err != nil {
		return fmt.Errorf("%w: changelog %s: checkpoint marker: %w", ErrRestore, ko.changelog, err)
	}
	if m.Checkpoint != id {
		return fmt.Errorf("%w: changelog %s ends with checkpoint %d, group %s committed checkpoint %d", ErrRestore, ko.changelog, m.Checkpoint, ko.in.Group, id)
	}
	if j.meta, err = j.checkMeta(m.Meta, id); err != nil {
		return err
	}
	if tail, err = joinChangelog(tail); err != nil {
		return err
	}
	for k, v := range tail {
		if v == nil {
			delete(recs, k)
		} else {
			recs[k] = v
		}
	}
	if len(m.Headers) != j.meta.Parallelism {
		return fmt.Errorf("%w: changelog %s: checkpoint %d has the headers of %d subtasks, not %d", ErrRestore, ko.changelog, id, len(m.Headers), j.meta.Parallelism)
	}
	// One store per subtask of the checkpoint: its headers and the keyed
	// records of its key groups, so that a job of the same parallelism
	// restores each as its own store.
	n := len(m.Headers)
	owner := make([]int, keyGroups)
	for i := range n {
		r := groupRange(i, n)
		for g := int(r.First); g <= int(r.Last); g++ {
			owner[g] = i
		}
	}
	parts := make([]*state.Mem, n)
	for i, hs := range m.Headers {
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
		parts[i] = mem
	}
	for ks, v := range recs {
		k, err := state.DecodeKey([]byte(ks))
		if err != nil {
			return fmt.Errorf("%w: changelog %s: %w", ErrRestore, ko.changelog, err)
		}
		if int(k.KeyGroup) >= keyGroups {
			return fmt.Errorf("%w: changelog %s: record %s in key group %d of %d", ErrRestore, ko.changelog, k, k.KeyGroup, keyGroups)
		}
		if err := parts[owner[k.KeyGroup]].Put(k, v); err != nil {
			return err
		}
	}
	ko.clParts = parts
	j.restored = id
	return nil
}

// commitKafka ends checkpoint f's transaction: the marker, then the
// input offsets and the commit. Its error wraps ErrTransaction.
func (j *job) commitKafka(f *inflight, meta []byte, headers [][]headerRecord) error {
	ko := j.kafka
	ctx := j.sctx
	m, err := json.Marshal(changelogMarker{Checkpoint: f.id, Meta: meta, Headers: headers})
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
	ko.txn.ProduceTo(ctx, ko.changelog, 0, markerKey, m)
	offsets := kafka.Offsets{}
	for _, p := range f.meta.Source.Positions {
		n, ok := partitionOf(ko.in.Topic, p.File)
		if !ok {
			return fmt.Errorf("cep: stream: position %s is not of topic %s", p.File, ko.in.Topic)
		}
		offsets[n] = p.Offset
	}
	failpoint.Hit("kafka.before-commit")
	if h := j.cfg.hooks.failCommit; h != nil {
		if err := h(f.id); err != nil {
			return fmt.Errorf("cep: stream: checkpoint %d: %w", f.id, ko.txn.Abort(ctx, err))
		}
	}
	if err := ko.txn.Commit(ctx, ko.in.Topic, offsets, txnMetadata(f.id)); err != nil {
		return fmt.Errorf("cep: stream: checkpoint %d: %w", f.id, err)
	}
	failpoint.Hit("kafka.after-commit")
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
	// A value too large for one record is cut into chunks: the chunks
	// after the first under keys of their own, in the same partition and
	// before the base record, which says how many there are.
	chunk := max(maxChangelogRecord-len(key)-16, 64)
	n := (len(v) + chunk - 1) / chunk
	if n <= 1 {
		ko.txn.ProduceTo(w.s.j.sctx, ko.changelog, p, key, append([]byte{changelogWhole}, v...))
		return nil
	}
	for i := 1; i < n; i++ {
		piece := v[i*chunk : min(len(v), (i+1)*chunk)]
		ko.txn.ProduceTo(w.s.j.sctx, ko.changelog, p, chunkKey(key, i), bytes.Clone(piece))
	}
	base := binary.AppendUvarint([]byte{changelogChunked}, uint64(n))
	ko.txn.ProduceTo(w.s.j.sctx, ko.changelog, p, key, append(base, v[:chunk]...))
	return nil
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
			n, m := binary.Uvarint(v[1:])
			if m <= 0 || n < 2 {
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
