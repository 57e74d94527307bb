package cep

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	goruntime "runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cepheus-cep/cepheus/enrich"
	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/runtime"
	"github.com/cepheus-cep/cepheus/runtime/kafka"
	"github.com/cepheus-cep/cepheus/runtime/state"
)

// Backend names a state backend of [Engine.Stream].
type Backend string

// The state backends.
const (
	// BackendMemory keeps every subtask's state records in memory; each
	// checkpoint writes them to a file under the state directory.
	BackendMemory Backend = "memory"
	// BackendPebble keeps every subtask's state records in a Pebble
	// database of its own under the state directory (work/sub-N); a
	// checkpoint hard-links its files, so it is incremental.
	BackendPebble Backend = "pebble"
)

// StreamConfig configures [Engine.Stream]. An input (Events or Kafka)
// and StateDir are required; so is an alerts output (AlertsDir or Alerts,
// or KafkaInput.AlertsTopic). A default of cepheus run's flags may
// differ from a field's zero value: said at the field.
type StreamConfig struct {
	// Events is the input: a JSON-lines file (plain or gzip), a directory
	// of them (*.jsonl and *.jsonl.gz, each a partition, in name order),
	// or "-" for standard input (Stdin, default os.Stdin).
	Events string
	// Stdin is read in a goroutine of its own. A read that blocks cannot
	// be interrupted in general: unless Stdin takes a read deadline (an
	// *os.File made by os.Pipe, or a socket: unblocked at once; not an
	// inherited os.Stdin, whose pipe or terminal is in blocking mode), the
	// goroutine stays in its pending Read after Stream returns, and what
	// that Read returns is dropped (nothing more is read). A program that
	// goes on using the reader after Stream (a pipe it feeds) closes its
	// writing end first, or hands Stream the reading end of an os.Pipe.
	Stdin io.Reader
	// Kafka, instead of Events, reads a Kafka topic ([KafkaInput]).
	Kafka *KafkaInput
	// Follow keeps reading the files as they grow, and a directory's new
	// files, until the context is cancelled; PollInterval (default 100ms)
	// is how often a file at its end is looked at. CloseInactive, when
	// positive, closes a followed directory's file that has had nothing
	// new for that long, until it grows (runtime.ReaderConfig); its
	// partition keeps its position and watermark, and leaves the
	// monitor's PartitionWatermarks while closed. Default (0): files stay
	// open (cepheus run -close-inactive: 5m).
	Follow        bool
	PollInterval  time.Duration
	CloseInactive time.Duration
	// StateDir holds the checkpoints (chk-N) and the Pebble working
	// databases. A run on a state directory that has a complete
	// checkpoint resumes from it.
	StateDir string
	// AlertsDir receives the alerts exactly once: committed part files
	// alerts-S-N.jsonl (subtask S, checkpoint N). When it is empty, the
	// alerts go to Alerts when a checkpoint completes, at most once: a
	// crash, or a Write of Alerts that fails (the run then stops with its
	// error), loses the alerts of the checkpoints completed and not yet
	// written, which a restart resumes after.
	AlertsDir string
	Alerts    io.Writer
	// OnAlert, when set, is called with every alert of the active
	// version as its subtask emits it (besides the alerts output, which
	// it may stand in for: without AlertsDir and Alerts, the alerts go
	// only to it): at least once. The calls are never concurrent (one at
	// a time across the subtasks, on their goroutines), and a is valid
	// only during the call (keep a.Clone()). A call returning an error
	// stops the run with it, and no call follows it; a run resumed from the state directory (in
	// a Kafka group, also the instance that takes the partitions over)
	// calls again for every alert after its latest complete checkpoint,
	// with the same [Alert] ID (deduplicate by it): no alert whose call
	// failed, or that a crash interrupted, is skipped. A slow call slows
	// the run (the subtask waits for it, and the reader for the
	// subtask). The shadow version's alerts are not passed to it.
	OnAlert func(a *Alert) error
	// OnLate and OnDeadLetter, when set, are called with every late event
	// (at or behind the watermark when it arrived; read its fields by
	// [Engine.Schema]: events are never modified, and may be kept) and
	// with every dead letter (a record that did not become an event: its
	// Data is valid only during the call), as OnAlert is with alerts: at
	// least once, one call at a time with OnAlert's (a late event on its
	// subtask's goroutine, a dead letter on the reader's), a call that
	// returns an error stopping the run; besides LateDir and DeadDir, or
	// without them. An event refused for -max-buffered-events is not
	// passed to OnLate (it goes to LateDir alone, marked so).
	OnLate       func(ev *event.Event) error
	OnDeadLetter func(d DeadLetter) error
	// LateDir and DeadDir receive the late events (late-S-N.jsonl) and
	// the dead letters (dead-0-N.jsonl) exactly once; empty: only
	// counted.
	LateDir, DeadDir string
	// ShadowDir receives the alerts of a shadow version
	// ([Deploy].Shadow) exactly once (shadow-S-N.jsonl); without it (or
	// KafkaInput.ShadowTopic), a shadow deploy is refused.
	ShadowDir string
	// CheckpointInterval is the time between two checkpoint barriers
	// (default 1s); CheckpointTimeout aborts a checkpoint that takes
	// longer (default 1m; its transaction joins the next one), and is the
	// time a stopped run (ctx done) has to end before what still waits is
	// cancelled (a Kafka commit with the brokers unreachable);
	// MinPause is the least time from the end of a checkpoint to the next
	// barrier (default 0).
	CheckpointInterval, CheckpointTimeout, MinPause time.Duration
	// CheckpointRecords, when positive, also takes a checkpoint after
	// every that many records of the input (counted from its start, over
	// the runs of the state directory), once the one before is complete:
	// checkpoints that fall at the same records in every run, for tests
	// and reproducible replays. Default 0: by time only.
	CheckpointRecords int64
	// Keep is how many complete checkpoints are kept (default 3).
	Keep int
	// Parallelism is the number of subtasks, each owning a range of key
	// groups (default: the number of CPUs). It may change between runs
	// over one state directory.
	Parallelism int
	// AggregateWorkers is the workers of the velocity aggregates (default
	// 0: the engine's, WithAggregateWorkers; 1: one aggregator on the
	// coordinator): n > 1 spreads their windows over n goroutines and
	// salts hot keys over them (docs/rules.md, "Skew"); in a Kafka group's
	// job, each partition's aggregator has its own. It may change between
	// runs (the state is the same).
	AggregateWorkers int
	// Backend is the state backend (default BackendMemory). It may change
	// between runs.
	Backend Backend
	// Time is the notion of time of the rules: EventTime (the default:
	// the events' timestamps and the watermarks) or ProcessingTime (the
	// wall clock of the subtask when it processes an event; windows and
	// absence timeouts run on it, nothing is late, and the input's end
	// releases nothing).
	Time TimeMode
	// IdleTimeout marks a partition idle after that long without a record
	// (followed input only; default 0: never; cepheus run -idle-timeout:
	// 1m); WallClockAdvance moves the
	// watermark on by the wall time elapsed while every followed
	// partition is idle, so absence rules fire on a quiet stream.
	IdleTimeout      time.Duration
	WallClockAdvance bool
	// Progress, when set, is called every ProgressInterval (default 10s)
	// and once at the end, on the coordinator's goroutine.
	Progress         func(StreamProgress)
	ProgressInterval time.Duration
	// Monitor, when set (by [NewStreamMonitor]), receives the job's
	// figures as it runs (for a metrics exporter or health checks; see
	// [StreamMonitor]).
	Monitor *StreamMonitor
	// Logf, when set, receives one-line messages about the run (the
	// checkpoint restored, a checkpoint aborted).
	Logf func(format string, args ...any)

	// hooks are the tests' view into a run.
	hooks streamHooks
	// rules follows KafkaInput.RulesTopic, once Stream opened it.
	rules *rulesTopic
	// gate makes the calls of OnAlert, OnLate and OnDeadLetter one at a
	// time, and none after one failed.
	gate *callbackGate
}

// DeadLetter is a record of the input that did not become an event
// (StreamConfig.OnDeadLetter): where it was read, why, and its bytes.
type DeadLetter struct {
	File   string // the input partition: a file's name, a topic's partition
	Line   int64  // its line (a Kafka record's offset plus one)
	Offset int64  // its byte offset in the (decompressed) file; -1: not known
	Reason string
	Data   []byte // the raw record, valid only during the call
}

// callbackGate passes the calls of StreamConfig's OnAlert, OnLate and
// OnDeadLetter one at a time, for one Stream call. After a call failed it
// makes no more: every later call, on any goroutine, gets that call's
// error, so that the run stops at its first failure (a subtask went on
// through its batch, and the others through theirs, calling again a
// function that had just failed).
type callbackGate struct {
	mu  sync.Mutex
	err error
}

// call calls f, named what, unless a call failed before.
func (g *callbackGate) call(what string, f func() error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err == nil {
		if err := f(); err != nil {
			g.err = fmt.Errorf("cep: stream: %s: %w", what, err)
		}
	}
	return g.err
}

// streamHooks let the tests of package cep stop a run at a checkpoint and
// watch its queues.
type streamHooks struct {
	// afterCommit is called on the coordinator once checkpoint id is
	// complete and its commits are sent; true stops the run, as a
	// cancellation would, once the batch being routed is (a final
	// checkpoint follows).
	afterCommit func(id int64) bool
	// failCommit, when it returns an error for checkpoint id, aborts that
	// checkpoint's Kafka transaction instead of committing it.
	failCommit func(id int64) error
	// stopAtSwitch ends the run once a switch's checkpoint is complete,
	// before the job of the new version starts (as a crash there would).
	stopAtSwitch bool
	// beforeSinkCommit is called on subtask sub before it commits the
	// outputs of checkpoint id.
	beforeSinkCommit func(sub int, id int64)
	// betweenJobs is called after a switch's job ended, before the next
	// one starts.
	betweenJobs func()
	// afterBarrier is called on the coordinator once checkpoint id's
	// barrier is sent (the checkpoint in flight while it runs).
	afterBarrier func(id int64)
	// atBarrier is called on subtask sub when checkpoint id's barrier
	// reaches it, before it snapshots (a slow subtask).
	atBarrier func(sub int, id int64)
	// repWithoutLookups writes repartition records as a build before
	// repEnrichedByte did: without what the lookups gave their events.
	repWithoutLookups bool
	// reader wraps the reader of files (a reordering of its batches).
	reader func(batchSource) batchSource
}

// live reports whether the input is read as it grows: followed files, or
// an unbounded Kafka topic.
func (c *StreamConfig) live() bool { return c.Follow || c.Kafka != nil && !c.Kafka.Bounded }

// StreamProgress is what the progress callback of [Engine.Stream] sees.
type StreamProgress struct {
	StreamStats
	Elapsed time.Duration
}

// StreamStats are the counters of a streaming run, cumulative over the
// runs of one state directory.
type StreamStats struct {
	Records, Decoded, Dead int64
	Ahead                  int64 // of Dead, the events too far ahead (InputPolicy.MaxAhead)
	Late, Alerts           int64
	// Watermark is the last watermark forwarded; MaxEventTime the largest
	// event time read (their difference is the watermark lag).
	Watermark, MaxEventTime event.Time
	// Checkpoints and Aborted count this run's complete and aborted
	// checkpoints; LastCheckpoint is the id of the latest complete one
	// (restored or taken), LastDuration how long it took from barrier to
	// commit.
	Checkpoints, Aborted int64
	LastCheckpoint       int64
	// Skipped counts this run's checkpoints not taken because nothing
	// changed since the latest (no record read, the watermark unchanged):
	// an idle job checkpoints only every 10 minutes.
	Skipped      int64
	LastDuration time.Duration
	// Queued is the events routed to the subtasks and not yet processed
	// (an event for two subtasks counts twice): bounded by the channels,
	// it shows the backpressure. RunRecords is the records read by this
	// run (Records counts those of the runs before it too).
	Queued     int64
	RunRecords int64
	// LastStall is the longest time a subtask spent on its part of the
	// latest checkpoint (sinks' pre-commit, state records, the store into
	// the checkpoint), during which it processed nothing. FirstEvent is
	// the time from the start of this run (the restore included) to its
	// first event routed to the subtasks.
	LastStall  time.Duration
	FirstEvent time.Duration
	// MaxDuration and MaxStall are the largest LastDuration and
	// LastStall of this run. Keys is the keys holding state at the latest
	// checkpoint (over every key specification), Buffered the events they
	// buffer.
	MaxDuration, MaxStall time.Duration
	Keys, Buffered        int64
	// PartialMatches are the partial matches the rules held at the latest
	// checkpoint; StateBytes the size of the subtasks' stores (a memory
	// store's records, in Kafka mode as of the checkpoint before; a Pebble
	// database's files); CheckpointBytes the bytes of state records the latest
	// checkpoint wrote (the changed keys).
	PartialMatches, StateBytes, CheckpointBytes int64
}

// StreamResult is the outcome of [Engine.Stream].
type StreamResult struct {
	Summary
	Stats StreamStats
	// Restored is the checkpoint the run resumed from (0: a fresh start).
	Restored int64
	// AlreadyFinished says that the state directory's run had read its
	// input to the end: nothing was read or written.
	AlreadyFinished bool
	// Finished says that the run read its input to the end (its final
	// checkpoint says so); false after a cancellation.
	Finished bool
	// Partitions are the input partitions the instance's last job read
	// (a transactional Kafka job: the instance's share of its group).
	Partitions []int32
	// CommittedAlerts is, of Stats.Alerts, those of the latest complete
	// checkpoint (Stats.LastCheckpoint): with exactly-once outputs, those
	// written. A run that failed detected the others after it; the run
	// that resumes from that checkpoint detects and writes them again.
	CommittedAlerts int64
	// Unended are, of a followed run over files stopped before their
	// end, the plain files whose bytes after the last line read hold no
	// line end (a line its writer had not ended at the stop): read once
	// it is ended, by the run that resumes.
	Unended []UnendedFile
}

// UnendedFile is a followed file with a last line not ended yet:
// [StreamResult].Unended.
type UnendedFile struct {
	File  string // the partition's name
	Bytes int64  // the bytes after its last line end
}

// ErrRestore is wrapped by the errors of a checkpoint that cannot be
// restored with this engine and configuration.
var ErrRestore = errors.New("cep: cannot resume from the checkpoint")

// streamFormat is the version of the job metadata of a checkpoint.
const streamFormat = 1

// inputOf names the kind of input c reads, for the checkpoints: "files"
// (Events, a file or a directory: its files may come and go), "stdin" or
// "topic T".
func inputOf(c *StreamConfig) string {
	switch {
	case c.Kafka != nil:
		return "topic " + c.Kafka.Topic
	case c.Events == "-":
		return "stdin"
	}
	return "files"
}

// checkEvents fails, before any state is made, when the events path does
// not exist, or is a directory with no file to read while not followed:
// the job would read it to its end at once and mark its state finished.
func (c *StreamConfig) checkEvents() error {
	if c.Kafka != nil || c.Events == "-" {
		return nil
	}
	parts, err := runtime.OpenPartitions(c.Events, c.Follow)
	if err != nil {
		return fmt.Errorf("cep: stream: %w", err)
	}
	if len(parts) == 0 && !c.Follow {
		return fmt.Errorf("cep: stream: the directory %s has no file to read (names ending in .jsonl or .jsonl.gz); followed (run -follow), the run waits for them", c.Events)
	}
	return nil
}

func (c *StreamConfig) withDefaults() (StreamConfig, error) {
	d := *c
	var errs []error
	switch {
	case d.Events == "" && d.Kafka == nil:
		errs = append(errs, errors.New("no input (Events or Kafka)"))
	case d.Events != "" && d.Kafka != nil:
		errs = append(errs, errors.New("two inputs (Events and Kafka)"))
	case d.Kafka != nil && d.Follow:
		errs = append(errs, errors.New("Follow is for files; an unbounded Kafka input is followed"))
	}
	if d.StateDir == "" {
		errs = append(errs, errors.New("no state directory"))
	}
	if d.Monitor != nil && d.Monitor.deploys == nil {
		errs = append(errs, errors.New("the Monitor was not made by NewStreamMonitor"))
	}
	if k := d.Kafka; k.transactional() {
		if d.AlertsDir != "" || d.Alerts != nil || d.LateDir != "" || d.DeadDir != "" || d.ShadowDir != "" {
			errs = append(errs, errors.New("a Kafka alerts topic and file outputs: a transactional job writes its late events and dead letters to topics too"))
		}
		if k.Group == "" {
			errs = append(errs, errors.New("a Kafka alerts topic needs a group (its offsets are committed in each transaction)"))
		}
		if k.TxnTimeout < 0 {
			errs = append(errs, errors.New("negative transaction timeout"))
		}
		if k.InstanceID != "" {
			if err := CheckInstanceID(k.InstanceID); err != nil {
				errs = append(errs, fmt.Errorf("instance id %q: %w", k.InstanceID, err))
			}
		}
	} else if d.Kafka != nil && (d.Kafka.LateTopic != "" || d.Kafka.DeadTopic != "" || d.Kafka.ShadowTopic != "" || d.Kafka.RulesTopic != "") {
		errs = append(errs, errors.New("a Kafka late, dead-letter, shadow or rules topic needs the alerts topic too"))
	} else if d.AlertsDir == "" && d.Alerts == nil && d.OnAlert == nil {
		errs = append(errs, errors.New("no alerts output (AlertsDir, Alerts or OnAlert)"))
	}
	if d.CheckpointInterval < 0 || d.CheckpointTimeout < 0 || d.MinPause < 0 || d.IdleTimeout < 0 ||
		d.ProgressInterval < 0 || d.PollInterval < 0 || d.CloseInactive < 0 || d.Keep < 0 || d.Parallelism < 0 || d.CheckpointRecords < 0 {
		errs = append(errs, errors.New("negative interval, count or parallelism"))
	}
	if d.Time > ProcessingTime {
		errs = append(errs, fmt.Errorf("unknown time mode %d", d.Time))
	}
	if d.AggregateWorkers < 0 || d.AggregateWorkers > MaxAggregateWorkers {
		errs = append(errs, fmt.Errorf("aggregate workers %d: from 0 to %d", d.AggregateWorkers, MaxAggregateWorkers))
	}
	if d.Parallelism > MaxParallelism {
		errs = append(errs, fmt.Errorf("parallelism %d: at most %d (the key groups)", d.Parallelism, MaxParallelism))
	}
	switch d.Backend {
	case "":
		d.Backend = BackendMemory
	case BackendMemory, BackendPebble:
	default:
		errs = append(errs, fmt.Errorf("unknown state backend %q (memory or pebble)", d.Backend))
	}
	if err := errors.Join(errs...); err != nil {
		return d, fmt.Errorf("cep: stream: %w", err)
	}
	if d.CheckpointInterval == 0 {
		d.CheckpointInterval = time.Second
	}
	if d.CheckpointTimeout == 0 {
		d.CheckpointTimeout = time.Minute
	}
	if d.Parallelism == 0 {
		d.Parallelism = min(goruntime.NumCPU(), keyGroups)
	}
	if k := d.Kafka; k.transactional() {
		// A transaction lasts from one commit to the next: an interval,
		// then the checkpoint (at most its timeout).
		least := d.CheckpointInterval + d.CheckpointTimeout
		kc := *k
		if kc.TxnTimeout == 0 {
			kc.TxnTimeout = least + 30*time.Second
		}
		if kc.LocalInterval == 0 {
			kc.LocalInterval = 10 * time.Second
		}
		if kc.TxnTimeout < least {
			return d, fmt.Errorf("cep: stream: transaction timeout %v is below the checkpoint interval plus the checkpoint timeout (%v): the broker would abort transactions that may still commit", kc.TxnTimeout, least)
		}
		d.Kafka = &kc
	}
	if d.OnAlert != nil || d.OnLate != nil || d.OnDeadLetter != nil {
		d.gate = new(callbackGate)
	}
	if d.OnAlert != nil {
		if !d.Kafka.transactional() && d.AlertsDir == "" && d.Alerts == nil {
			d.Alerts = io.Discard
		}
	}
	if d.ProgressInterval == 0 {
		d.ProgressInterval = 10 * time.Second
	}
	if d.Logf == nil {
		d.Logf = func(string, ...any) {}
	}
	return d, nil
}

// Stream runs the engine's rules as a live, checkpointed job (docs/
// operations.md; DESIGN.md, "Dataflow"): one goroutine reads the input's
// partitions and decodes, keys and routes each event to the subtasks
// that own its keys (key groups, [state.GroupOf], split into
// cfg.Parallelism ranges), each subtask a goroutine that solely owns its
// operators, state and sinks. Watermarks and checkpoint barriers travel
// in band over the bounded channels to the subtasks, so a slow subtask
// slows the reader and nothing is dropped. Every CheckpointInterval a
// barrier makes a checkpoint in StateDir: source positions, watermarks,
// the subtasks' state records and the sinks' pending transactions, then
// the sinks commit. A later Stream over the same StateDir resumes from
// the latest complete checkpoint.
//
// With bounded input (no Follow) the run ends as a backtest does: the
// final watermark, a final checkpoint marked finished, and nil; run again
// on that StateDir, it returns at once (AlreadyFinished). When ctx is
// cancelled it stops reading, takes a final checkpoint and returns
// ctx's error with the result. cfg names the outputs, and cfg.OnAlert
// hands the alerts to code, at least once; an engine built with Run's
// outputs (WithAlerts, WithLate, WithDeadLetters, WithObservers) is
// refused, as Stream would not use them.
func (e *Engine) Stream(ctx context.Context, cfg StreamConfig) (_ *StreamResult, err error) {
	if m := cfg.Monitor; m != nil {
		defer m.streamEnded() // (WaitReady)
	}
	switch {
	case e.encoder == nil:
		return nil, errNotNew
	case ctx == nil:
		return nil, errors.New("cep: Stream: nil Context")
	case e.cfg.alerts != nil || e.cfg.late != nil || e.cfg.dead != nil || len(e.cfg.observers) > 0:
		// Said, not ignored: a program that set them waited for
		// output that never came.
		return nil, errors.New("cep: Stream: the engine has outputs of Run (WithAlerts, WithLate, WithDeadLetters or WithObservers), which Stream does not use: give StreamConfig its outputs (AlertsDir or Alerts, OnAlert, LateDir, DeadDir) and build the engine without them")
	}
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if len(e.specs) > 64 {
		return nil, fmt.Errorf("cep: stream: %d key specifications, at most 64", len(e.specs))
	}
	if err := c.checkEvents(); err != nil {
		return nil, err
	}
	if e.cfg.gcSet {
		defer debug.SetGCPercent(debug.SetGCPercent(e.cfg.gcPercent))
	}
	if e.cfg.memoryLimit > 0 {
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(e.cfg.memoryLimit))
	}
	start := time.Now()
	if c.Kafka.transactional() {
		// A member of a group over a missing topic would wait for
		// partitions for ever, and the end offsets of a bounded one are
		// retried as if a broker were away: say it at once, as the source
		// of a job with file outputs does. Brokers that do not answer
		// (for the Kafka client's retries, 45 s) fail the start too,
		// rather than leave the member waiting for them.
		if _, err := kafka.PartitionCount(ctx, c.Kafka.conn(), c.Kafka.Topic); err != nil {
			return nil, fmt.Errorf("cep: stream: input: %w", err)
		}
	}
	// The state directory is the run's from here to its end: a second
	// process given it fails now, before it fences the first's Kafka
	// producer or takes its place in the group (and also between two of
	// the first's jobs, when no job holds the directory).
	release, made, err := c.takeDirs()
	if err != nil {
		return nil, err
	}
	defer func() {
		release()
		if made && err != nil {
			// A start that failed before its first checkpoint (a
			// restore refused: the group's state is of another topic)
			// leaves no empty state directory behind.
			state.UnmakeRunDir(c.StateDir)
		}
	}()
	if c.Kafka.transactional() && c.Kafka.RulesTopic != "" {
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		if c.rules, err = openRulesTopic(rctx, c.Kafka, c.Logf); err != nil {
			return nil, err
		}
	}
	if m := c.Monitor; m != nil {
		// Deploys wait between two jobs of the run (a switch, a
		// rebalance), not after it.
		m.setRunning(true)
		defer m.setRunning(false)
	}
	if c.Kafka.transactional() {
		return e.streamGroup(ctx, c, start)
	}
	return e.runJob(ctx, c, start, new(lookupCarry))
}

// CheckLocks says whether a Stream of cfg could take its state directory
// and its output directories now, as Stream does first: each lock taken
// and let go at once (a state directory it had to make is removed
// again). cepheus serve asks before it listens on its ports, so that a
// second serve given a running one's directories says that, rather than
// that its ports are taken, and serves nothing meanwhile.
func (cfg StreamConfig) CheckLocks() error {
	c, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	release, made, err := c.takeDirs()
	if err != nil {
		return err
	}
	release()
	if made {
		state.UnmakeRunDir(c.StateDir)
	}
	return nil
}

// CheckStateDir reports, without making anything, whether dir can be the
// StateDir of a new Stream: an error when another run holds it, or when it
// (or a directory above it) is a file. Stream checks the same as it
// starts; a caller with much to do before (lookups to load from a file)
// calls it first, so that a second run is refused at once.
func CheckStateDir(dir string) error {
	if err := state.CheckRunLock(dir); err != nil {
		return fmt.Errorf("cep: stream: %w", err)
	}
	return nil
}

// takeDirs takes the locks a Stream holds for its whole run: its state
// directory's (state.LockRun, making the directory when missing) and its
// output directories' (lockOutputs), after checkOutputs. release lets
// them go; made says the state directory was made here. A refusal lets
// go what was taken, and removes a state directory made here (nothing is
// in it but the lock: a start refused on another run's output directory
// left it behind).
func (c *StreamConfig) takeDirs() (release func(), made bool, err error) {
	if err := c.checkOutputs(); err != nil {
		return nil, false, err
	}
	_, statErr := os.Stat(c.StateDir)
	made = errors.Is(statErr, os.ErrNotExist)
	runLock, err := state.LockRun(c.StateDir)
	if err != nil {
		return nil, false, fmt.Errorf("cep: stream: %w", err)
	}
	outLocks, err := c.lockOutputs()
	if err != nil {
		runLock.Close()
		if made {
			state.UnmakeRunDir(c.StateDir)
		}
		return nil, false, err
	}
	return func() {
		for _, l := range outLocks {
			l.Close()
		}
		runLock.Close()
	}, made, nil
}

// lookupCarry is the lookups of a run (their caches and counters), kept
// across its jobs: the switches of one runJob, and the jobs of a group
// member's partitions after each rebalance, so that the lookups'
// counters count since the process started (they started again at 0
// after each rebalance).
type lookupCarry struct {
	stage   *enrichStage
	retired map[string]enrich.Stats // the counters of lookups a switch removed (enrichStage.carry)
}

// outputDirs lists the output directories of c's file sinks (none in
// Kafka mode, whose outputs are topics), each with the name errors give.
func (c *StreamConfig) outputDirs() []struct{ flag, dir string } {
	if c.Kafka.transactional() {
		return nil
	}
	var outs []struct{ flag, dir string }
	for _, out := range []struct{ flag, dir string }{
		{"alerts output", c.AlertsDir}, {"late events output", c.LateDir}, {"dead-letter output", c.DeadDir}, {"shadow alerts output", c.ShadowDir},
	} {
		if out.dir != "" {
			outs = append(outs, out)
		}
	}
	return outs
}

// checkOutputs fails a run whose output directory is a file (or a path
// through one) before the run makes its state directory or any output
// (runtime.CheckOutputDir).
func (c *StreamConfig) checkOutputs() error {
	for _, out := range c.outputDirs() {
		if _, err := runtime.CheckOutputDir(out.dir); err != nil {
			return fmt.Errorf("cep: stream: %s: %w", out.flag, err)
		}
	}
	return nil
}

// lockOutputs locks the output directories of the file sinks for the
// run (runtime.LockOutputDir), each once: a second run given one of them
// fails here, before its sinks delete or rename the first's files. The
// run's outputs may share a directory, by one path or by several (a
// symlink): a second lock of it, refused as another run's, is not taken.
func (c *StreamConfig) lockOutputs() ([]io.Closer, error) {
	var locks []io.Closer
	var locked []os.FileInfo
	for _, out := range c.outputDirs() {
		if st, err := os.Stat(out.dir); err == nil && slices.ContainsFunc(locked, func(l os.FileInfo) bool { return os.SameFile(l, st) }) {
			continue
		}
		l, err := runtime.LockOutputDir(out.dir)
		if err == nil {
			var st os.FileInfo
			if st, err = os.Stat(out.dir); err == nil {
				locked = append(locked, st)
			} else {
				l.Close()
			}
		}
		if err != nil {
			for _, l := range locks {
				l.Close()
			}
			return nil, fmt.Errorf("cep: stream: %s: %w", out.flag, err)
		}
		locks = append(locks, l)
	}
	return locks, nil
}

// runJob runs one job of c to its end. A hot-loading switch ends a job at
// a checkpoint whose metadata names the next version: a new job restores
// it, into the engine of that version, and goes on.
//
// lk holds the lookups the job starts with (kept across a switch that
// keeps them), and those it ended with when runJob returns.
func (e *Engine) runJob(ctx context.Context, c StreamConfig, start time.Time, lk *lookupCarry) (*StreamResult, error) {
	var switched *pendingSwitch
	var carried *runCarry     // the run's counters, going on across the switches
	totals := new(ruleTotals) // the rules' counters of the run, across the switches
	for {
		j := &job{e: e, base: e, cfg: c, start: start, begun: time.Now(), stats: StreamStats{Watermark: event.MinTime}, switched: switched, enrich: lk.stage, carried: carried, retired: lk.retired, totals: totals}
		res, err := j.run(ctx)
		carried = j.carry()
		lk.stage, lk.retired = j.enrich, j.retired
		if cerr := j.close(); err == nil && cerr != nil {
			err = cerr
		}
		if switched != nil && !switched.replied {
			switched.reply(nil, fmt.Errorf("cep: the job after the switch failed: %w", errors.Join(err, ctx.Err())))
		}
		switched = nil
		var nc notComplete
		if next := j.next; next != nil {
			switch {
			case errors.As(err, &nc) && j.kafka == nil && ctx.Err() == nil:
				// The switch's checkpoint (or the one in flight before
				// it) was not complete within the checkpoint timeout: as
				// a checkpoint the job aborts, not an end of the run. A
				// new job of the version restores the latest complete
				// checkpoint, as a restart would.
				why := fmt.Sprintf("checkpoint %d was not complete after %v (the checkpoint timeout)", nc.id, nc.after)
				j.logf("the switch to version %.12s did not happen: %s; the job goes on with its version from checkpoint %d", next.rs.Hash, why, j.stats.LastCheckpoint)
				next.reply(nil, fmt.Errorf("cep: the switch did not happen: %s; the job goes on with its version from checkpoint %d: deploy again", why, j.stats.LastCheckpoint))
				carried.restarts()
				continue
			case err == nil && ctx.Err() == nil && next.id > 0 && c.hooks.stopAtSwitch:
				next.reply(nil, fmt.Errorf("stopped at the switch's checkpoint %d (a test's hook)", next.id))
			case err == nil && ctx.Err() == nil && next.id > 0:
				switched = next
				if h := c.hooks.betweenJobs; h != nil {
					h()
				}
				continue
			case next.id == 0:
				next.reply(nil, errors.New("cep: the job stopped before the switch's checkpoint: deploy again"))
				if err == nil && ctx.Err() == nil {
					carried.restarts()
					continue // the job goes on with its version
				}
			case ctx.Err() != nil && (err == nil || errors.Is(err, ctx.Err())):
				// Stopped: its final checkpoint is the switch's, which a
				// restart restores into the new version.
				next.reply(nil, fmt.Errorf("cep: the run stopped at the switch's checkpoint %d: the version runs from the next start", next.id))
			default:
				next.reply(nil, fmt.Errorf("cep: the run failed at the switch's checkpoint %d: %w", next.id, err))
			}
		}
		return res, err
	}
}

// outputsCommitted is the newest checkpoint whose outputs every subtask
// has committed.
func (j *job) outputsCommitted() int64 {
	var n int64 = math.MaxInt64
	for _, s := range j.subs {
		n = min(n, s.committed.Load())
	}
	if n == math.MaxInt64 {
		return 0
	}
	return n
}

// runCarry is what a job hands the next job of the same run (after a
// switch, which ends a job at a checkpoint and restores it into another):
// the counters of the run (of the Stream call), which go on.
type runCarry struct {
	checkpoints, aborted, skipped int64
	maxDuration, maxStall         time.Duration
	firstEvent                    time.Duration
	eventSeen                     bool  // an event was routed: FirstEvent is set
	startRecs                     int64 // Records when the run started
	restored                      int64 // the checkpoint the run resumed from (0: a fresh start)
	taken                         *Ruleset
	dirAsked                      string
	// activity is the partitions' wall-clock activity (idleness and the
	// wall-clock advance go on across the switch).
	activity *runtime.Activity
}

// carry returns the counters of the run for the next job.
func (j *job) carry() *runCarry {
	return &runCarry{
		checkpoints: j.stats.Checkpoints, aborted: j.stats.Aborted, skipped: j.stats.Skipped,
		maxDuration: j.stats.MaxDuration, maxStall: j.stats.MaxStall,
		firstEvent: j.stats.FirstEvent, eventSeen: j.eventSeen,
		startRecs: j.startRecs, restored: j.runRestored(),
		taken: j.takenNext(), dirAsked: j.dirAsked,
		activity: j.partActivity(),
	}
}

// restarts says that the next job restores the latest complete
// checkpoint, not a switch's: it reads again what came after it, so its
// partitions start active, as a restart's do. A partition quiet before
// would be idle at its first tick, before its records came again, and
// the others' would carry the watermark past them: on time in the first
// reading, late in the second.
func (c *runCarry) restarts() { c.activity = nil }

// partActivity is the job's partitions' wall-clock activity for the next
// job: its source's, or what it was handed when it opened none.
func (j *job) partActivity() *runtime.Activity {
	if j.src != nil {
		a := j.src.pw.Activity()
		return &a
	}
	if j.carried != nil {
		return j.carried.activity
	}
	return nil
}

// takenNext is the ruleset the rules source holds for the next job: the
// switch's version when the switch brings it.
func (j *job) takenNext() *Ruleset {
	if sw := j.next; sw != nil && sw.source && sw.id > 0 {
		return sw.rs
	}
	return j.taken
}

// runRestored is the checkpoint the run (the Stream call) resumed from;
// j.restored is this job's, a switch's checkpoint after a switch.
func (j *job) runRestored() int64 {
	if j.carried != nil {
		return j.carried.restored
	}
	return j.restored
}

// job is one [Engine.Stream]: the coordinator (the goroutine that called
// Stream, which also reads and routes) and its subtasks.
type job struct {
	// nextProgress is when the coordinator reports its progress next
	// (StreamConfig.Progress): at its ticks, and while it waits for a
	// subtask that is behind (send).
	nextProgress time.Time
	// e is the engine the job runs: base, the one Stream was called on,
	// or the one of the version its checkpoint names (hot-loading); prev,
	// when set, is the engine that took the checkpoint it restores (a
	// migration of the rules' state).
	e, base, prev *Engine
	prevs         []*Engine // a Kafka restore's: the engine of each changelog store (nil: e)
	// took are the engines that took the state the job restores (its
	// checkpoint's; in Kafka mode each changelog store's): the events it
	// holds were decoded and enriched under them (settleHeld).
	took []*Engine
	// next is the switch asked for (its checkpoint ends the job);
	// switched, the one this job restores (it replies to the deploy once
	// the job runs).
	next, switched *pendingSwitch
	carried        *runCarry // from the job before, in the same run (a switch)
	// totals are the rules' counters of the run (the Stream call), which
	// the job's result takes its figures into.
	totals *ruleTotals
	// taken is the ruleset the process's rules source holds as the run
	// last took it: the one it started with, or one its watcher deployed
	// since (Deploy.Origin); checkpoints record it as plan.Startup.
	taken *Ruleset
	// outIDs are the ids of the run's output directories by part file
	// prefix (outputIDs), for the checkpoints and the sinks' recovery.
	outIDs map[string]string
	// dirAsked is the version a watcher of the rules source put into the
	// rules topic, whose switch comes back from the topic.
	dirAsked  string
	eventSeen bool  // an event was routed in the run
	atSwitch  bool  // the final checkpoint is the switch's
	rulesSkip int64 // the rules topic's records before it are taken
	// holding: the watermark stops at holdAt, the rules topic's switch
	// point, until the switch (since holdSince).
	holding   bool
	holdAt    event.Time
	holdSince time.Time
	cfg       StreamConfig
	start     time.Time // the run's (the Stream call's)
	begun     time.Time // the job's: later than start after a rebalance
	dir       *state.CheckpointDir
	meta      *jobMeta // of the restored checkpoint; nil for a fresh start

	// enrich is the job's lookups (nil without), built with its source
	// unless the previous job's serve (runJob); retired the counters of
	// the lookups earlier jobs' versions had and its has not
	// (enrichStage.carry).
	enrich  *enrichStage
	retired map[string]enrich.Stats
	subs    []*streamSubtask
	owner   []int // subtask of each key group
	failed  chan error
	acks    chan ack
	wg      sync.WaitGroup
	stop    context.CancelFunc // stops the subtasks (on a failure)
	sctx    context.Context
	// ended is closed when the job closes: the end of the grace a stop
	// gives its final checkpoint (graceAfterStop); cutShort says that the
	// grace ran out.
	ended    chan struct{}
	cutShort atomic.Bool

	src    *streamSource
	dead   runtime.CommitSink // nil without DeadDir
	nextID int64
	flight *inflight

	stats     StreamStats
	committed int64 // the alerts of the latest complete checkpoint (restored or taken)
	routed    int64 // elements routed to the subtasks
	startRecs int64 // stats.Records when the run started
	restored  int64
	firstID   int64 // when set, the first checkpoint's id (a Kafka job's instance goes on from its newest)
	buf       []byte
	alertsOut *lockedWriter // the alerts without an alerts directory
	stopAsked bool          // by hooks.afterCommit
	kafka     *kafkaOut     // a transactional Kafka job's producer and topics

	// quiet skipping (job.quiet): the source's activity at the latest
	// barrier (nil: none yet, or its checkpoint aborted) and the time of
	// that barrier; asked, a checkpoint asked for and not yet begun;
	// quietSaid, the log said (once a job) that checkpoints wait.
	activity  []byte
	barrierAt time.Time
	asked     bool
	quietSaid bool
}

// jobMeta is the job's metadata blob of a checkpoint ("job"), JSON.
type jobMeta struct {
	Format         int
	Ruleset        string
	RulesetVersion string
	// Rules are the content hashes of the rules, in order: a restore
	// needs the same (a file whose tests or comments changed still
	// restores); Time the notion of time.
	Rules       []string
	Time        TimeMode
	KeyGroups   int
	Parallelism int
	Backend     Backend
	Finished    bool
	// Input is the kind of input the run reads (inputOf): a restore
	// reads the same kind ("" in the checkpoints of earlier builds).
	Input        string `json:",omitempty"`
	Source       sourceMeta
	Dead         runtime.PendingState
	Alerts, Late []runtime.PendingState // by subtask
	Shadow       []runtime.PendingState `json:",omitempty"` // the shadow alerts', by subtask
	// Outputs are the ids of the output directories the run wrote to
	// (runtime.OutputDirID), by part file prefix (alerts, late, shadow,
	// dead): a restore into the directory of the same id takes a
	// committed part file of the checkpoint missing there as taken by a
	// consumer (recoverFile).
	Outputs map[string]string `json:",omitempty"`
	Stats   StreamStats
	// Plan is what the engine that took the checkpoint runs (versions,
	// layout, rules); Next, at a hot-loading switch, what the job that
	// restores it runs.
	Plan *plan `json:",omitempty"`
	Next *plan `json:",omitempty"`
	// Changelog, of a transactional Kafka job's local checkpoint: the
	// changelog's offsets after its transaction, by partition, where a
	// restore from this copy reads the later checkpoints' changes.
	Changelog map[int32]int64 `json:",omitempty"`
}

// keyGroups is the number of key groups of a job's state.
const keyGroups = state.DefaultKeyGroups

// MaxParallelism is the most subtasks of a stream job
// (StreamConfig.Parallelism): each owns at least one key group.
const MaxParallelism = keyGroups

func (j *job) logf(format string, args ...any) { j.cfg.Logf(format, args...) }

func (j *job) run(ctx context.Context) (_ *StreamResult, err error) {
	c := &j.cfg
	var restoring int64 // the checkpoint being restored, once known
	defer func() {
		if errors.Is(err, state.ErrCorruptCheckpoint) && !c.Kafka.transactional() {
			err = fmt.Errorf("%w (%s)", err, corruptHint(restoring))
		}
	}()
	j.taken = j.base.cfg.ruleset
	if p := j.carried; p != nil {
		j.taken, j.dirAsked = p.taken, p.dirAsked
	}
	if j.dir, err = state.OpenCheckpointDir(c.StateDir, state.WithKeep(c.Keep)); err != nil {
		return nil, fmt.Errorf("cep: stream: %w", err)
	}
	var chk *state.Checkpoint
	if c.Kafka.transactional() {
		chk, err = j.kafkaRestorePoint(ctx)
		if err != nil {
			return nil, err
		}
	} else {
		chk, err = j.dir.Latest()
		switch {
		case errors.Is(err, state.ErrNoCheckpoint):
			chk = nil
		case err != nil:
			return nil, fmt.Errorf("%w: %w", ErrRestore, err)
		}
	}
	if chk != nil {
		restoring = int64(chk.ID)
		if j.meta, err = j.readMeta(chk); err != nil {
			return nil, err
		}
		j.restored = int64(chk.ID)
	}
	if in := inputOf(c); j.meta != nil && j.meta.Input != "" && j.meta.Input != in {
		if c.Kafka.transactional() {
			// Restored from the group's changelog, whatever the state
			// directory holds.
			return nil, fmt.Errorf("%w: group %s holds the state of a run over %s (in changelog topic %s), and this run reads %s: give the run a group of its own (-group), or read %s", ErrRestore, c.Kafka.Group, j.meta.Input, j.kafka.changelog, in, j.meta.Input)
		}
		return nil, fmt.Errorf("%w: %s holds the state of a run over %s, and this run reads %s: give it a state directory of its own", ErrRestore, c.StateDir, j.meta.Input, in)
	}
	if err := j.choosePlan(); err != nil {
		return nil, err
	}
	if j.outIDs, err = outputIDs(c); err != nil {
		return nil, err
	}
	if j.meta != nil {
		j.stats = j.meta.Stats
		j.stats.Checkpoints, j.stats.Aborted, j.stats.Skipped = 0, 0, 0
		j.stats.MaxDuration, j.stats.MaxStall = 0, 0
		j.stats.LastCheckpoint = j.restored
		j.stats.LastDuration, j.stats.LastStall = 0, 0
		j.committed = j.meta.Stats.Alerts
		if j.meta.Finished {
			// The final checkpoint is complete, but a crash may have
			// come before every sink committed it: finish that first.
			if err := j.openSinks(0); err != nil {
				return nil, err
			}
			j.logf("the run of %s finished at checkpoint %d: nothing to do", c.StateDir, j.restored)
			return j.result(true, true), nil
		}
		// The version resumed with is said: after a deploy, a rollback or
		// a stop at a switch it need not be the rules file's.
		name, version := j.e.cfg.ruleset.Name, j.e.cfg.ruleset.Hash
		if p := j.e.plan; p != nil && len(p.Versions) > 0 {
			version = p.Versions[0].Version
		}
		switch {
		case j.switched != nil:
			// A switch in the same run, not a restart: "switched to"
			// says it once the job goes on.
		case chk != nil:
			j.logf("resuming from checkpoint %d (%s; ruleset %s version %.12s; parallelism %d, %s backend)", j.restored, chk.Dir, name, version, j.meta.Parallelism, j.meta.Backend)
		case j.kafka.merged:
			j.logf("resuming partitions %v from the changelog (ruleset %s version %.12s)", j.kafka.owned, name, version)
		default:
			j.logf("resuming from checkpoint %d (the changelog; ruleset %s version %.12s; parallelism %d, %s backend)", j.restored, name, version, j.meta.Parallelism, j.meta.Backend)
		}
		if t := j.taken; j.switched == nil && j.carried == nil && version != t.Hash {
			// The rules given are those the job last took (a restart with
			// others deploys them at the restore): a version made active
			// since goes on, which an operator who restarts with the old
			// file to go back would not know.
			j.logf("the rules given (%s version %.12s) are those the job was started with; it runs version %.12s, made active since (a deploy, rollback or promote), and goes on with it: rules rollback or deploy change it",
				t.Name, t.Hash, version)
		}
	}
	j.nextID = max(j.restored, j.firstID-1) + 1
	j.startRecs = j.stats.Records
	if p := j.carried; p != nil {
		// After a switch: the run goes on, and so do its counters.
		j.stats.Checkpoints, j.stats.Aborted, j.stats.Skipped = p.checkpoints, p.aborted, p.skipped
		j.stats.MaxDuration, j.stats.MaxStall = p.maxDuration, p.maxStall
		j.stats.FirstEvent, j.eventSeen = p.firstEvent, p.eventSeen
		j.startRecs = p.startRecs
	}
	if err := j.openSinks(c.Parallelism); err != nil {
		return nil, err
	}
	restoreStart := time.Now()
	if err := j.restoreSubtasks(chk); err != nil {
		return nil, err
	}
	if took := time.Since(restoreStart); chk != nil && took >= time.Second {
		// A large state takes seconds to read, said nothing of meanwhile.
		j.logf("restored the state of checkpoint %d in %v", j.restored, took.Round(time.Millisecond))
	}
	j.graceAfterStop(ctx)
	if j.src, err = j.openSource(ctx); err != nil {
		return nil, err
	}
	if err := j.settleHeld(j.sctx); err != nil {
		return nil, fmt.Errorf("%w: the events held at checkpoint %d: %w", ErrRestore, j.restored, err)
	}
	j.startSubtasks()
	// The switch's line before the monitor shows the switch (a caller
	// that sees the new version finds the line written).
	j.logSwitch()
	if c.Monitor != nil {
		if j.meta == nil {
			c.Monitor.freshState()
		}
		c.Monitor.watchCommits(j.outputsCommitted)
		c.Monitor.jobStarted(j.nextID - 1)
		j.publish(true)
	}
	if sw := j.switched; sw != nil && sw.req != nil {
		if !sw.res.Unchanged && sw.rs != nil {
			// The version's own (not those of the rules still
			// draining, nor of a shadow beside it).
			for _, l := range sw.rs.Lookups {
				if j.e.cfg.lookupSources[l.Name] == nil {
					sw.res.Unbound = append(sw.res.Unbound, l.Name)
				}
			}
		}
		if c.Monitor != nil {
			c.Monitor.switched(sw.res)
		}
		sw.reply(sw.res, nil)
	}
	finished, err := j.loop(ctx)
	if c.Monitor != nil {
		j.publish(false) // the figures at the end, not ready
	}
	if err != nil {
		// The subtasks stop before their hosts' counters are read.
		j.stop()
		j.wg.Wait()
		return j.result(false, false), err
	}
	res := j.result(false, finished)
	if !finished {
		if c.Follow && j.src != nil {
			res.Unended = j.src.unended(c.Events)
		}
		return res, ctx.Err()
	}
	return res, nil
}

// logSwitch logs the switch the job started with, if any.
func (j *job) logSwitch() {
	sw := j.switched
	switch {
	case sw == nil:
		return
	case sw.req == nil:
		j.logf("the draining rules of earlier versions have passed their windows: let go at checkpoint %d", sw.res.Checkpoint)
		return
	}
	sw.res.Took = time.Since(sw.start)
	as := "" // the active version's
	if sw.res.Shadow {
		as = " as the shadow"
	}
	if sw.dropShadow {
		j.logf("dropped shadow version %.12s at checkpoint %d (%s) in %v", sw.res.Version, sw.res.Checkpoint, switchPoint(sw.req, sw.res.Watermark), sw.res.Took.Round(time.Millisecond))
		return
	}
	changed := "changed"
	if sw.req.d.DropChanged && len(sw.res.Changed) > 0 && !sw.res.Shadow {
		changed = "changed, their partial matches dropped," // a drain reads alike otherwise
	}
	j.logf("switched to ruleset %s version %.12s%s at checkpoint %d (%s) in %v (kept %v, %s %v, added %v, removed %v)",
		sw.res.Ruleset, sw.res.Version, as, sw.res.Checkpoint, switchPoint(sw.req, sw.res.Watermark), sw.res.Took.Round(time.Millisecond), sw.res.Kept, changed, sw.res.Changed, sw.res.Added, sw.res.Removed)
	if !sw.source && sw.rs != nil {
		// The rules directory's watcher logs the warnings of what it
		// deploys; a call's or the rules topic's are logged here.
		for _, w := range sw.rs.Warnings {
			j.logf("warning: %v (version %.12s)", w, sw.res.Version)
		}
	}
}

// corruptHint says what to do with damaged checkpoint id (0: not known),
// which a restore never skips (the output holds its part files: resuming
// from the one before would refuse them as ahead).
func corruptHint(id int64) string {
	dir, parts := "chk-N directory", "checkpoint N"
	if id > 0 {
		dir, parts = fmt.Sprintf("directory chk-%d", id), fmt.Sprintf("checkpoint %d", id)
	}
	return "a damaged checkpoint, which is never skipped: to resume from the one before, move its " + dir + " out of the state directory and the part files of " + parts + " out of the output directories (the run writes their lines again: a reader that took them sees them twice); or start over with a new state directory and empty output directories"
}

func (j *job) readMeta(chk *state.Checkpoint) (*jobMeta, error) {
	b, err := chk.Meta("job")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRestore, err)
	}
	return j.checkMeta(b, int64(chk.ID))
}

// checkMeta decodes the job metadata b of checkpoint id and checks that
// this job can restore it.
func (j *job) checkMeta(b []byte, id int64) (*jobMeta, error) {
	var m jobMeta
	if err := unmarshalMeta(b, &m); err != nil {
		return nil, fmt.Errorf("%w: checkpoint %d: job metadata: %w", ErrRestore, id, err)
	}
	rs := j.e.cfg.ruleset
	switch {
	case m.Format != streamFormat:
		return nil, fmt.Errorf("%w: checkpoint %d is of job format %d, this build reads %d", ErrRestore, id, m.Format, streamFormat)
	case m.Plan == nil && !slices.Equal(m.Rules, ruleHashes(rs)):
		return nil, fmt.Errorf("%w: checkpoint %d was taken by an earlier build (it has no version history) with ruleset %s version %.12s, and its rules' hashes are not those of %s version %.12s (rule hashes of rulesets with a declared schema changed in this build): resume it with the build and rules that took it, or start over with a new state directory",
			ErrRestore, id, m.Ruleset, m.RulesetVersion, rs.Name, rs.Hash)
	case m.Time != j.cfg.Time:
		return nil, fmt.Errorf("%w: checkpoint %d was taken in %s, this run is in %s", ErrRestore, id, m.Time, j.cfg.Time)
	case m.KeyGroups != keyGroups:
		return nil, fmt.Errorf("%w: checkpoint %d has %d key groups, this build %d", ErrRestore, id, m.KeyGroups, keyGroups)
	case m.Parallelism < 1 || len(m.Alerts) != m.Parallelism || len(m.Late) != m.Parallelism:
		return nil, fmt.Errorf("%w: checkpoint %d: job metadata: %d subtasks with %d and %d sink states", ErrRestore, id, m.Parallelism, len(m.Alerts), len(m.Late))
	}
	return &m, nil
}

// ruleHashes are the content hashes of the rules of rs, in order.
func ruleHashes(rs *Ruleset) []string {
	hs := make([]string, len(rs.Rules))
	for i, r := range rs.Rules {
		hs[i] = r.Hash
	}
	return hs
}

// result gathers the counters of the run. It reads the subtasks' hosts:
// call it only once they stopped.
func (j *job) result(already, finished bool) *StreamResult {
	rs := j.e.cfg.ruleset
	r := &StreamResult{
		Summary:         Summary{Ruleset: rs.Name, RulesetVersion: rs.Hash},
		Restored:        j.runRestored(),
		AlreadyFinished: already,
		Finished:        finished,
	}
	st := j.stats
	if len(j.subs) > 0 && !already {
		st.Late, st.Alerts = 0, 0
		for _, s := range j.subs {
			st.Late += s.host.late
			st.Alerts += s.host.alerts
		}
		// The rules' figures go on from those of the jobs before in the
		// run (its switches), as the monitor's do: a switch compiles the
		// rules again, their expression errors from 0, and lets the rule
		// states of removed and changed rules go with their counters.
		j.totals.add(j.e, j.figures(), j.retiredRules())
		j.totals.takeLastErrors()
	}
	if !already && j.totals.e != nil {
		// (Also a job that failed before its subtasks ran: those of the
		// jobs before it in the run.)
		r.Rules = j.totals.summaries()
	}
	if !already {
		st.RunRecords = st.Records - j.startRecs
	}
	r.Stats = st
	r.Lookups = j.enrich.stats()
	if j.src != nil {
		r.Aggregates, _ = j.src.aggStats()
		r.Mixed = mixedFields(rs, j.src.dec.Mixed())
		if j.src.dec.Decoded() > 0 && j.restored == 0 && j.carried == nil {
			// The decoder is the job's: a run resumed, or a job after a
			// switch, has not seen the events before it (a field they
			// had would be said absent).
			r.Absent = absentFields(rs, j.src.dec.Absent())
		}
	}
	r.Late, r.Alerts = st.Late, st.Alerts
	r.CommittedAlerts = j.committed
	r.Records, r.Decoded, r.Dead, r.Ahead = st.Records, st.Decoded, st.Dead, st.Ahead
	r.Watermark = st.Watermark
	r.BytesRead, r.TotalBytes = -1, -1
	if j.src != nil {
		r.FirstDeadLine, r.FirstDeadReason, r.FirstDeadFile = j.src.firstDeadLine, j.src.firstDeadReason, j.src.firstDeadFile
	}
	return r
}

// retiredRules are the counters of the rule states let go before the job,
// summed over its subtasks (set at their restore, constant after).
func (j *job) retiredRules() []retiredCount {
	var out []retiredCount
	for _, s := range j.subs {
		for _, r := range s.host.retired {
			out = addRetired(out, r.key, r)
		}
	}
	return out
}

// figures are the counters of the job's rules as its subtasks' hosts
// have them: call it only once they stopped.
func (j *job) figures() []ruleFigure {
	c := make([]ruleFigure, len(j.e.rules))
	for _, s := range j.subs {
		h := s.host
		for i, cr := range j.e.rules {
			rc, f := &h.rules[i], &c[i]
			counts, _ := h.keyOps[cr.spec].op.RuleCounts(i) // the summary reads counters only
			f.alerts += rc.alerts
			f.timedOut += rc.timedOut
			f.overflow += rc.overflow
			f.partials += int64(counts.DroppedPartialMatches)
			f.dropKeys = append(f.dropKeys, droppedKeys(h.keyOps[cr.spec].op, i, cr.rule)...)
			f.noKey += rc.noKey
			f.compared += rc.compared
			f.overlap += rc.overlap
			f.late += int64(counts.Late)
		}
	}
	for i := range c {
		// A key is at one subtask: its count is that subtask's.
		f := &c[i]
		slices.SortStableFunc(f.dropKeys, func(a, b KeyCount) int { return cmp.Compare(b.Count, a.Count) })
		f.dropKeys = f.dropKeys[:min(len(f.dropKeys), maxDropKeys)]
	}
	return c
}

// graceAfterStop gives a job stopped by ctx CheckpointTimeout to end
// (its final checkpoint included), then stops what still waits, as a
// crash would: the job's context ends the calls to Kafka that wait for
// brokers (a commit, a flush, a produce into a full buffer), which a stop
// does not end by itself, so that a final checkpoint runs to its end.
// With every broker unreachable, one signal stops the process within the
// timeout; the next run resumes from the last committed checkpoint.
func (j *job) graceAfterStop(ctx context.Context) {
	j.ended = make(chan struct{})
	timeout, stop, ended := j.cfg.CheckpointTimeout, j.stop, j.ended
	go func() {
		select {
		case <-ctx.Done():
		case <-ended:
			return
		}
		t := time.NewTimer(timeout)
		defer t.Stop()
		select {
		case <-t.C:
			j.cutShort.Store(true)
			stop()
		case <-ended:
		}
	}()
}

// close stops whatever still runs and releases the state directory.
func (j *job) close() error {
	if j.ended != nil {
		close(j.ended)
		switch {
		case !j.cutShort.Load():
		case j.cfg.Kafka != nil:
			// A warning: the Kafka trial's broker restarts showed only
			// this line, at INFO, of a job a rebalance stopped.
			j.logf("warning: stopped (by a signal, or by a rebalance of the group), and still not ended %v later (the checkpoint timeout; Kafka unreachable?): what waited was cancelled, and the next job resumes from checkpoint %d", j.cfg.CheckpointTimeout, j.stats.LastCheckpoint)
		default:
			// No broker to wait for: a subtask's step (an event's
			// matches, which a stop does not cut short: a key of many
			// partial matches, an explosive pattern) or an output that
			// takes no writes. It said "Kafka unreachable?" of a file
			// run, then went on for minutes.
			j.logf("stopped, and still not ended %v later (the checkpoint timeout): the final checkpoint is given up, and the run ends once its subtasks end what they are in (an event's step, which a stop does not cut short: a key of many partial matches, an explosive pattern; or a write to an output); the next run resumes from checkpoint %d", j.cfg.CheckpointTimeout, j.stats.LastCheckpoint)
		}
	}
	if j.stop != nil {
		j.stop()
	}
	if j.src != nil {
		_ = j.src.reader.Close()
		j.src.closeRepartitions()
	}
	j.wg.Wait()
	if j.src != nil {
		j.src.closeAggregates()
	}
	var errs []error
	for _, s := range j.subs {
		errs = append(errs, s.close())
	}
	if j.dead != nil {
		errs = append(errs, j.dead.Close())
	}
	if j.flight != nil && j.flight.w != nil {
		_ = j.flight.w.Abort()
	}
	if j.kafka != nil && j.kafka.txn != nil {
		j.kafka.txn.Close()
	}
	if j.kafka != nil && j.kafka.direct != nil {
		j.kafka.direct.Close()
	}
	if j.dir != nil {
		errs = append(errs, j.dir.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cep: stream: %w", err)
	}
	return nil
}

// openSinks recovers the dead-letter sink (the coordinator's) and the
// file sinks of the subtasks from first on that the restored checkpoint
// or the output directories have (those this run does not open itself).
func (j *job) openSinks(first int) error {
	if ko := j.kafka; ko != nil {
		if ko.in.DeadTopic != "" {
			j.dead = j.newTxnSink(ko.in.DeadTopic)
		}
		return nil
	}
	if j.cfg.DeadDir != "" {
		s, err := runtime.NewFileSink(j.cfg.DeadDir, "dead", 0)
		if err != nil {
			return err
		}
		j.dead = s
		if err := j.recoverFile(s, "dead", j.cfg.DeadDir, j.restoredSink(func(m *jobMeta, _ int) (runtime.PendingState, bool) { return m.Dead, true }, 0)); err != nil {
			return fmt.Errorf("cep: stream: dead letters: %w", err)
		}
	}
	// The sinks of subtasks beyond this run's parallelism: finish what the
	// checkpoint committed, delete the rest, close.
	for _, out := range []struct {
		dir, prefix string
		of          func(*jobMeta) []runtime.PendingState
	}{
		{j.cfg.AlertsDir, "alerts", func(m *jobMeta) []runtime.PendingState { return m.Alerts }},
		{j.cfg.LateDir, "late", func(m *jobMeta) []runtime.PendingState { return m.Late }},
		{j.cfg.ShadowDir, "shadow", func(m *jobMeta) []runtime.PendingState { return m.Shadow }},
	} {
		if out.dir == "" {
			continue
		}
		n, err := runtime.FileSinkSubtasks(out.dir, out.prefix)
		if err != nil {
			return err
		}
		if j.meta != nil {
			n = max(n, j.meta.Parallelism)
		}
		for s := first; s < n; s++ {
			fs, err := runtime.NewFileSink(out.dir, out.prefix, s)
			if err != nil {
				return err
			}
			err = j.recoverFile(fs, out.prefix, out.dir, j.restoredSink(func(m *jobMeta, s int) (runtime.PendingState, bool) {
				if st := out.of(m); s < len(st) {
					return st[s], true
				}
				return runtime.PendingState{}, false
			}, s))
			if cerr := fs.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("cep: stream: %s of subtask %d: %w", out.prefix, s, err)
			}
		}
	}
	return nil
}

// restoredSink is the state a sink of subtask s recovers. On a fresh
// start it is the zero state. Otherwise it is what the restored checkpoint
// holds for the sink, unless the checkpoint holds nothing for it: a
// subtask the checkpoint did not have, or an output its run was started
// without (stored as the zero state, where a sink's own state names its
// checkpoint). Such a sink recovers the restored checkpoint without
// parts, so that its part files up to that checkpoint, earlier runs'
// output, stay and later ones are still refused as ahead
// (runtime.FileSink.Recover); recovered as a fresh start, it would refuse
// its own earlier files.
func (j *job) restoredSink(of func(*jobMeta, int) (runtime.PendingState, bool), s int) runtime.PendingState {
	if j.meta == nil {
		return runtime.PendingState{}
	}
	if st, ok := of(j.meta, s); ok && st.Checkpoint != 0 {
		return st
	}
	return runtime.PendingState{Subtask: s, Checkpoint: j.restored}
}

// outputIDs are the ids of c's output directories by part file prefix
// (jobMeta.Outputs), each written at the directory's first use. The
// directories are the run's, locked (takeDirs).
func outputIDs(c *StreamConfig) (map[string]string, error) {
	m := map[string]string{}
	for prefix, dir := range map[string]string{"alerts": c.AlertsDir, "late": c.LateDir, "shadow": c.ShadowDir, "dead": c.DeadDir} {
		if dir == "" {
			continue
		}
		id, err := runtime.OutputDirID(dir)
		if err != nil {
			return nil, fmt.Errorf("cep: stream: %s: %w", dir, err)
		}
		m[prefix] = id
	}
	return m, nil
}

// recoverFile recovers the file sink fs, writing part files named after
// prefix into dir, from restored. In the directory the restored
// checkpoint's run wrote to (its id the checkpoint's), a part file of the
// checkpoint neither pending nor committed was committed and taken by a
// consumer (moved or deleted): said, not refused. Elsewhere, the same
// path or not, it is refused (another directory, whose lines a resume
// would lose).
func (j *job) recoverFile(fs *runtime.FileSink, prefix, dir string, restored runtime.PendingState) error {
	if m := j.meta; m != nil && m.Outputs[prefix] != "" && m.Outputs[prefix] == j.outIDs[prefix] {
		fs.TakenOK()
	}
	if err := fs.Recover(restored); err != nil {
		return err
	}
	for _, name := range fs.Consumed() {
		j.logf("%s of checkpoint %d: not in %s, taken by a consumer after its commit (the run that took the checkpoint wrote to this directory)",
			name, restored.Checkpoint, dir)
	}
	return nil
}

// groupRange is the key groups subtask i of n owns.
func groupRange(i, n int) state.KeyGroupRange {
	return state.KeyGroupRange{First: state.KeyGroup(i * keyGroups / n), Last: state.KeyGroup((i+1)*keyGroups/n - 1)}
}

// restoreSubtasks makes the job's subtasks and restores their state from
// chk (nil: a fresh start); startSubtasks starts them.
func (j *job) restoreSubtasks(chk *state.Checkpoint) error {
	c := &j.cfg
	n := c.Parallelism
	j.owner = make([]int, keyGroups)
	for i := range n {
		r := groupRange(i, n)
		for g := int(r.First); g <= int(r.Last); g++ {
			j.owner[g] = i
		}
	}
	// The working databases are disposable: whatever an earlier run left
	// there (another backend's, a crashed restore's) goes.
	if err := os.RemoveAll(filepath.Join(c.StateDir, "work")); err != nil {
		return fmt.Errorf("cep: stream: %w", err)
	}
	var parts []state.Reader // the old subtasks' stores, on a change of layout
	var cleanup []func()
	defer func() {
		for _, f := range cleanup {
			f()
		}
	}()
	// A migration (a hot-loading switch) restores into stores of their
	// own, as a change of parallelism does.
	same := chk != nil && j.meta.Parallelism == n && j.meta.Backend == c.Backend && j.prev == nil
	// A checkpoint rebuilt from the changelog: at the same parallelism
	// each subtask takes its own store (and its next checkpoint writes
	// only what changes), else the key groups are redistributed.
	var rebuilt []*state.Mem
	if j.kafka != nil && j.kafka.clParts != nil {
		if j.meta.Parallelism == n && !j.kafka.merged && j.prev == nil {
			rebuilt = j.kafka.clParts
		} else {
			from := fmt.Sprintf("parallelism %d", j.meta.Parallelism)
			if j.kafka.merged {
				// The stores of the partitions' checkpoints, perhaps
				// several instances' or jobs': not a parallelism.
				from = fmt.Sprintf("%d subtask stores of the partitions' checkpoints", j.meta.Parallelism)
			}
			if j.prev != nil {
				// A switch's job (a deploy, or the draining rules let
				// go): the stores move to the new version's rules.
				j.logf("moving the rules' state to version %.12s (from the changelog: %s -> parallelism %d, %s backend)", j.e.cfg.ruleset.Hash, from, n, c.Backend)
			} else {
				j.logf("redistributing the key groups of the changelog: %s -> parallelism %d, %s backend", from, n, c.Backend)
			}
			for _, p := range j.kafka.clParts {
				parts = append(parts, p)
			}
		}
	} else if j.meta != nil && !same {
		if j.prev != nil {
			j.logf("moving the rules' state to version %.12s (parallelism %d, %s backend -> parallelism %d, %s backend)", j.e.cfg.ruleset.Hash, j.meta.Parallelism, j.meta.Backend, n, c.Backend)
		} else {
			j.logf("redistributing the key groups: parallelism %d, %s backend -> parallelism %d, %s backend", j.meta.Parallelism, j.meta.Backend, n, c.Backend)
		}
		for i := range j.meta.Parallelism {
			r, done, err := openStore(chk, subtaskStore(i), filepath.Join(c.StateDir, "work", "restore-"+subtaskStore(i)))
			if err != nil {
				return err
			}
			parts = append(parts, r)
			cleanup = append(cleanup, done)
		}
	}
	j.failed = make(chan error, n)
	// A subtask sends at most two acks per checkpoint (a Kafka checkpoint
	// with a local copy), and one checkpoint is in flight: the acks never
	// block a subtask while the coordinator sends to it.
	j.acks = make(chan ack, 2*n)
	j.sctx, j.stop = context.WithCancel(context.Background())
	for i := range n {
		s, err := j.newSubtask(i)
		if err != nil {
			return err
		}
		j.subs = append(j.subs, s)
	}
	// The subtasks restore their state side by side (each decodes its own
	// keys; the old stores are only read).
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, s := range j.subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var from *state.Mem
			if rebuilt != nil {
				from = rebuilt[i]
			}
			if err := s.openStore(chk, same, from); err != nil {
				errs[i] = err
				return
			}
			if j.meta == nil {
				return
			}
			var err error
			if same || from != nil {
				err = s.host.Restore(s.store)
			} else {
				var counted func(int) bool
				if i == 0 {
					counted = j.countedPart
				}
				err = s.host.restoreParts(parts, groupRange(i, n), counted, j.partEngines(len(parts)))
			}
			if err != nil {
				errs[i] = fmt.Errorf("%w: subtask %d: %w", ErrRestore, i, err)
				return
			}
			if j.kafka != nil && j.kafka.lowWatermark {
				for k := range s.host.keyOps {
					s.host.keyOps[k].op.lowerWatermark(event.MinTime)
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// startSubtasks starts the subtasks restoreSubtasks made: from here on
// only their goroutines touch their state.
func (j *job) startSubtasks() {
	for _, s := range j.subs {
		s.storeCounters() // the restored ones, before the first message
		if s.mem != nil {
			s.mem.start()
		}
	}
	for _, s := range j.subs {
		j.wg.Add(1)
		go func() {
			defer j.wg.Done()
			if err := s.run(j.sctx, j.acks); err != nil {
				j.failed <- fmt.Errorf("subtask %d: %w", s.index, err)
				j.stop()
			}
		}()
	}
}

func subtaskStore(i int) string { return fmt.Sprintf("sub-%d", i) }

// openStore opens the store name of chk to read from, whatever its kind;
// done releases it.
func openStore(chk *state.Checkpoint, name, workDir string) (state.Reader, func(), error) {
	for _, si := range chk.Stores() {
		if si.Name != name {
			continue
		}
		switch si.Kind {
		case state.KindMem:
			m, err := chk.OpenMem(name)
			if err != nil {
				return nil, nil, fmt.Errorf("%w: %w", ErrRestore, err)
			}
			return m, func() {}, nil
		case state.KindPebble:
			if err := os.RemoveAll(workDir); err != nil {
				return nil, nil, err
			}
			p, err := chk.OpenPebble(name, workDir)
			if err != nil {
				return nil, nil, fmt.Errorf("%w: %w", ErrRestore, err)
			}
			return p, func() { _ = p.Close(); _ = os.RemoveAll(workDir) }, nil
		}
	}
	return nil, nil, fmt.Errorf("%w: checkpoint %d has no store %s", ErrRestore, chk.ID, name)
}
