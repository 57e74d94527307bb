package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cepheus-cep/cepheus/cep"
	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/internal/control"
	"github.com/cepheus-cep/cepheus/internal/humanize"
	"github.com/cepheus-cep/cepheus/internal/metrics"
	"github.com/cepheus-cep/cepheus/rules"
)

var runCommand = &command{
	name:  "run",
	short: "run a ruleset as a live engine: checkpointed, exactly-once alerts, files or Kafka",
	usage: "cepheus run -rules file|dir -events file|dir|- | -input-topic T -state dir -alerts dir|- | -alerts-topic A -group G [flags]",
	help: `Run runs a ruleset as a live engine: it reads events, detects, and
writes alerts, taking a checkpoint every -checkpoint-interval, so that a
run stopped in any way (Ctrl-C, SIGTERM, kill -9, a power cut) resumes
where its last checkpoint stands when started again with the same -state
directory, and no alert is lost or written twice (docs/operations.md).

Input: -events is a JSON-lines file (plain or gzip), a directory of
*.jsonl and *.jsonl.gz files, or - for standard input. Each file of a
directory is a partition with its own position and watermark; the
watermark of the run is the lowest of theirs. Without -follow the files
are read side by side, each next record taken from the file whose
watermark is lowest, so files that cover the same period (exports split
by shard) and files that follow each other (daily exports) both work,
and a resumed run reads them in the same order. With -follow
the files are read as they grow, and new files of the directory as they
appear, until the run is stopped; a line is decoded only once its newline
has arrived. Without -follow the run ends at the end of the input as a
backtest does (final watermark, final checkpoint, exit 0); run again on a
state directory whose run has finished, it exits 0 at once. An input
that held no record (an empty file, stdin closed) finishes the state
directory all the same, with a warning, -q or not.

Output: -alerts DIR receives committed part files alerts-S-N.jsonl
(subtask S, checkpoint N): a reader of DIR/*.jsonl sees every alert once,
whatever moment the process died. Files being written have names that do
not end in .jsonl. -late DIR and -dead-letter DIR work the same way for
late events and undecodable lines. -alerts - writes the alerts to stdout
when their checkpoint completes: at most once after a crash.

Kafka: -input-topic T (with -brokers, default $CEPHEUS_KAFKA_BROKERS)
reads the events from every partition of a topic instead: each
partition has its own offset (its position in the checkpoints) and
watermark; event time is the ruleset's time field; -bounded stops at the
end offsets seen at the start; -start says where a partition without a
checkpoint starts (earliest, latest, committed: -group's offsets, or a
time: the first record whose timestamp is at or after it). The outputs
may be the directories above, exactly once, or Kafka topics:
-alerts-topic A -group G [-late-topic L] [-dead-letter-topic D] makes
every checkpoint one Kafka transaction that holds the alerts (keyed by the
rule key), late events, dead letters, the changed state (the compacted
-changelog-topic, default G-changelog) and
the input offsets, committed to group G: a read_committed consumer sees
every alert once, whatever moment the process died. -instance-id names
the instance (its transactional id and static group member id are
cepheus-G-ID): a restarted instance fences the one it replaces at once.
Scale-out: instances with the same -group and their own -instance-id
share the input's partitions (a consumer group); when partitions move,
their owner commits a final checkpoint and the new owner restores them
from the changelog. An instance silent for -session-timeout (10s) loses
its partitions to the others; a restart within it gets them back. With
-bounded, an instance exits once every partition is committed at its
end. A restart resumes from the checkpoints the group's offsets name,
from -state when it holds them, else from the changelog. -delivery
at-least-once writes the outputs at once instead (lower latency; after a
crash some come twice, with the same alert id).
Rules keyed by the field the input records are keyed by (-record-key)
run beside the partitions they read; rules keyed otherwise are
repartitioned through topics of the job (G-repartition-FIELDS). A record
whose key is not its -record-key field's value is a dead letter; 10 of
100 in a row stop the job with an error naming the first (the topic is
keyed otherwise); -trust-record-keys skips the check.
With -input-topic a rule reads only the velocity aggregates keyed by
its own key fields: each is computed on the partitions of its key.
docs/kafka.md has the details.

State: -state DIR holds the checkpoints (chk-N, the last -keep of them)
and, with -state-backend pebble, the subtasks' Pebble databases. Every
checkpoint names the ruleset version the job runs: a restart with the
rules file of the process that took it resumes with that version (one
deployed into cepheus serve included); a restart with another rules file
deploys it at the restore: rules of the same hash keep their state, a
changed rule's old version drains its partial matches, a removed rule's
state goes (docs/operations.md, "Hot-loading"). A restore that cannot be
honoured (an unknown format, a corrupt checkpoint, another notion of
time or number of key groups; other rules for a checkpoint of a build
before hot-loading) is refused with an error; a torn newest checkpoint
falls back to the one before. -parallelism may change between runs: key
groups are redistributed.

Stop: SIGINT, SIGTERM or SIGHUP (the terminal closed; ignored under
nohup) takes a final checkpoint and exits 0, naming the signal; another
signal more than a second later exits at once (those within the second
are the same stop: GNU timeout signals the process, then its
group). Progress goes to stderr every -progress interval.
`,
}

func init() {
	runCommand.run = func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		return runStream(ctx, runCommand, args, stdout, stderr)
	}
}

type runFlags struct {
	lookups                                  lookupFlags
	rules, events, state, alerts, late, dead string
	follow                                   bool
	poll, closeInactive                      time.Duration
	interval, timeout, minPause              time.Duration
	keep, parallelism, aggWorkers            int
	checkpointRecords                        int64
	backend                                  string
	outOfOrder, idle, maxAhead               time.Duration
	wallClock                                bool
	watermarkEvery                           int
	maxPartial, maxBuffered                  int
	timeUnit, timeMode                       string
	progress                                 time.Duration
	quiet                                    bool
	memoryLimit                              byteSize
	cpuProfile                               string
	brokers, inputTopic, start               string
	bounded                                  bool
	alertsTopic, lateTopic, deadTopic        string
	shadowDir, shadowTopic                   string
	rulesTopic                               string
	changelogTopic, group, instance          string
	recordKey, delivery                      string
	trustRecordKeys                          bool
	txnTimeout, localInterval, session       time.Duration
}

// The defaults of the flags of Kafka mode that a run without it refuses
// when they are given other values (runFlags.kafkaOnly).
const (
	defaultStart          = "earliest"
	defaultDelivery       = "exactly-once"
	defaultInstanceID     = "0"
	defaultSessionTimeout = 10 * time.Second
	defaultLocalInterval  = 10 * time.Second
)

// transactionFlags names the flags of -alerts-topic's transactional job
// (its transactions, changelog and group) given other values than their
// defaults: a job without -alerts-topic ignored them, -delivery
// at-least-once running exactly once and -record-key keying nothing.
func (f *runFlags) transactionFlags() []string {
	var set []string
	for _, k := range []struct {
		flag string
		set  bool
	}{{"-changelog-topic", f.changelogTopic != ""}, {"-record-key", f.recordKey != ""}, {"-trust-record-keys", f.trustRecordKeys},
		{"-delivery", f.delivery != defaultDelivery}, {"-instance-id", f.instance != defaultInstanceID},
		{"-session-timeout", f.session != defaultSessionTimeout}, {"-local-checkpoint-interval", f.localInterval != defaultLocalInterval},
		{"-transaction-timeout", f.txnTimeout != 0}} {
		if k.set {
			set = append(set, k.flag)
		}
	}
	return set
}

// runStream is cepheus run, and with cmd serveCommand cepheus serve: run
// with the operations surface over HTTP (-http).
func runStream(ctx context.Context, cmd *command, args []string, stdout, stderr io.Writer) (result error) {
	var f runFlags
	fs := newFlagSet(cmd, stdout)
	var httpAddr, grpcAddr, logFormat, configPath, rulesDir string
	var printCfg bool
	var rulesDirPoll time.Duration
	rulesUsage := "ruleset file, or a directory holding one *.cep file (required)"
	if cmd == serveCommand {
		fs.StringVar(&configPath, "config", os.Getenv("CEPHEUS_CONFIG"), "a YAML file of settings, named as these flags without the dash (default $CEPHEUS_CONFIG); flags win over the environment (CEPHEUS_FLAG_NAME), which wins over the file")
		fs.BoolVar(&printCfg, "print-config", false, "print the settings in effect, each with where it came from (flag, environment, config file, default), as a config file, and exit")
		fs.StringVar(&httpAddr, "http", "localhost:9464", "serve /metrics (Prometheus), /healthz and /readyz on this address (host:port; port 0 picks one)")
		fs.StringVar(&grpcAddr, "grpc", "localhost:9465", "serve the control API (gRPC cepheus.v1.Control, health, reflection) on this address (host:port, port 0 picking one: any local user may connect; unix:PATH, a Unix socket of mode 0600 that only this user may connect to; off or \"\" for none); it has no authentication of its own")
		fs.StringVar(&logFormat, "log-format", "text", "the log lines on stderr: text (key=value) or json, one object a line (log/slog)")
		fs.StringVar(&rulesDir, "rules-dir", "", "instead of -rules, a directory holding one *.cep file: the ruleset at the start, deployed again whenever the file's content changes (hot-loading; other files are ignored)")
		fs.DurationVar(&rulesDirPoll, "rules-dir-poll", time.Second, "with -rules-dir, how often the directory is looked at")
		rulesUsage = "ruleset file, or a directory holding one *.cep file (this or -rules-dir)"
	}
	f.lookups.register(fs)
	fs.StringVar(&f.rules, "rules", "", rulesUsage)
	fs.StringVar(&f.events, "events", "", "events: a JSON-lines file, .jsonl.gz, a directory of them, or - for stdin (this or -input-topic)")
	fs.StringVar(&f.inputTopic, "input-topic", "", "read the events from this Kafka topic instead (its values, JSON; every partition)")
	fs.StringVar(&f.brokers, "brokers", os.Getenv("CEPHEUS_KAFKA_BROKERS"), "with -input-topic, the Kafka bootstrap brokers, host:port[,host:port] (default $CEPHEUS_KAFKA_BROKERS)")
	fs.BoolVar(&f.bounded, "bounded", false, "with -input-topic, stop at the end offsets seen at the start, with a final checkpoint and exit 0")
	fs.StringVar(&f.start, "start", defaultStart, "with -input-topic, where a partition without a checkpoint starts: earliest, latest, committed (the offsets of -group; earliest where it has none) or an RFC 3339 time (the first record at or after it, by record timestamp)")
	fs.StringVar(&f.alertsTopic, "alerts-topic", "", "with -input-topic, write the alerts to this Kafka topic, one transaction per checkpoint (exactly once for read_committed consumers; needs -group)")
	fs.StringVar(&f.lateTopic, "late-topic", "", "with -alerts-topic, write the late events to this topic (default: only counted)")
	fs.StringVar(&f.deadTopic, "dead-letter-topic", "", "with -alerts-topic, write the dead letters to this topic (default: only counted)")
	fs.StringVar(&f.shadowTopic, "shadow-topic", "", "with -alerts-topic, write the alerts of a shadow version (cepheus rules deploy -shadow, to serve; with -rules-topic, to any serve of the group) to this topic, in each checkpoint's transaction (default: no shadow deploys; a restored shadow is dropped)")
	fs.StringVar(&f.rulesTopic, "rules-topic", "", "with -alerts-topic, the group's rules topic (compacted, created if need be): a deploy to any instance goes into it and every instance of the group deploys it; a restart runs its newest versions (default: each instance deploys on its own)")
	fs.StringVar(&f.group, "group", "", "with -alerts-topic, the consumer group the input offsets are committed to (required with it); with -start committed, the group whose committed offsets the input starts at")
	fs.StringVar(&f.changelogTopic, "changelog-topic", "", "with -alerts-topic, the compacted topic of the state changes (default: GROUP-changelog)")
	fs.StringVar(&f.instance, "instance-id", defaultInstanceID, "with -alerts-topic, this instance's stable name (letters, digits, '.', '_' and '-'): its transactional id is cepheus-GROUP-ID")
	fs.DurationVar(&f.session, "session-timeout", defaultSessionTimeout, "with -alerts-topic, how long the group waits for a silent instance before its partitions move to the others (a restart within it keeps them)")
	fs.DurationVar(&f.localInterval, "local-checkpoint-interval", defaultLocalInterval, "with -alerts-topic, the least time between two local copies of the checkpoints under -state (a restart restores the latest and reads the changelog's changes since; 0: every checkpoint)")
	fs.DurationVar(&f.txnTimeout, "transaction-timeout", 0, "with -alerts-topic, the Kafka transaction timeout (0: checkpoint interval + checkpoint timeout + 30s)")
	fs.StringVar(&f.delivery, "delivery", defaultDelivery, "with -alerts-topic: exactly-once (the outputs in each checkpoint's transaction: visible to read_committed consumers once it commits) or at-least-once (written at once; after a crash some come twice, with the same alert id)")
	fs.StringVar(&f.recordKey, "record-key", "", "with -input-topic and -alerts-topic, the event field the input records are keyed by (default: the keyed rules' key field)")
	fs.BoolVar(&f.trustRecordKeys, "trust-record-keys", false, "with -input-topic and -alerts-topic, do not check that each record's key is its -record-key field's value (as cepheus produce -key writes it); for a topic partitioned by that field but keyed by another encoding of it")
	secFlags := addKafkaSecurityFlags(fs)
	fs.StringVar(&f.state, "state", "", "state directory: checkpoints and working state; created when missing (required)")
	fs.StringVar(&f.alerts, "alerts", "", "directory of committed alert files (exactly once), or - for stdout (at most once) (this or -alerts-topic)")
	fs.StringVar(&f.late, "late", "", "directory of committed late-event files (default: only counted)")
	fs.StringVar(&f.dead, "dead-letter", "", "directory of committed dead-letter files (default: only counted)")
	fs.StringVar(&f.shadowDir, "shadow-alerts", "", "directory of the committed alert files shadow-S-N.jsonl of a shadow version (cepheus rules deploy -shadow, to serve: run has no control API, and keeps the shadow of a state directory that serve ran), exactly once (default: no shadow deploys; a restored shadow is dropped)")
	fs.BoolVar(&f.follow, "follow", false, "keep reading the input as it grows, until stopped")
	fs.DurationVar(&f.poll, "poll", 100*time.Millisecond, "with -follow, how often a file at its end, and the directory, are looked at (a file with nothing new for 100 looks: every 10; 0: the default)")
	fs.DurationVar(&f.closeInactive, "close-inactive", 5*time.Minute, "with -follow, a file of the -events directory with nothing new for this long is closed (its descriptor and goroutine freed) until it grows, which the directory's scan looks for every 10 -poll; its position and watermark stay (0: never)")
	fs.DurationVar(&f.interval, "checkpoint-interval", time.Second, "time between two checkpoints")
	fs.DurationVar(&f.timeout, "checkpoint-timeout", time.Minute, "a checkpoint not complete after this long is aborted (its output joins the next one; with -alerts-topic its transaction fails, and the job starts again from the last committed checkpoint)")
	fs.DurationVar(&f.minPause, "checkpoint-min-pause", 0, "least time between the end of a checkpoint and the next one")
	fs.Int64Var(&f.checkpointRecords, "checkpoint-records", 0, "also take a checkpoint every this many input records, so that checkpoints fall at the same records in every run (0: by time only)")
	fs.IntVar(&f.keep, "keep", 3, "complete checkpoints kept")
	fs.IntVar(&f.parallelism, "parallelism", 0, "subtasks, each owning a share of the keys (0: the number of CPUs)")
	fs.IntVar(&f.aggWorkers, "aggregate-workers", 1, "workers of the velocity aggregates: above 1, each aggregate's windows are spread over this many goroutines and a hot key (more than 20% of the events a watermark releases, at least 64) is salted over them, its partial windows merged exactly: the same values, faster for an aggregate one key dominates (docs/rules.md, Skew); 1: one aggregator; at most 64; in a Kafka group's job, per partition; it may change between runs")
	fs.StringVar(&f.backend, "state-backend", "memory", "where the state lives between checkpoints: memory or pebble")
	fs.DurationVar(&f.outOfOrder, "out-of-orderness", cep.DefaultOutOfOrderness, "watermark bound: how far an event may come behind the newest one without being late")
	fs.IntVar(&f.watermarkEvery, "watermark-every", 256, "events between two watermarks (as backtest's; 0: the default)")
	fs.DurationVar(&f.idle, "idle-timeout", time.Minute, "with -follow or an unbounded -input-topic, a file or partition without new records for this long (a partition: caught up to its end) stops holding the watermark back until its next record (0: never)")
	fs.BoolVar(&f.wallClock, "wall-clock-advance", false, "with -follow or an unbounded -input-topic, advance the watermark by the wall time elapsed while every input is idle, so absence rules fire on a quiet stream")
	fs.IntVar(&f.maxPartial, "max-partial-matches", 0, "per-key cap on partial matches per rule (0: unlimited)")
	fs.IntVar(&f.maxBuffered, "max-buffered-events", 0, "per-key cap on events waiting for the watermark (0: unlimited)")
	fs.StringVar(&f.timeMode, "time", "event", "notion of time: event (the events' timestamps and watermarks) or processing (the wall clock when an event is processed)")
	fs.DurationVar(&f.maxAhead, "max-ahead", cep.DefaultInputPolicy().MaxAhead, "an event further ahead of the stream's newest time goes to the dead letters, unless the next events confirm the jump (0: off; not in -time processing, whose events' times move nothing)")
	fs.StringVar(&f.timeUnit, "time-unit", "", "unit of times written as numbers: ms or s (default: ms, refusing numbers that are no time in 2000..2100; s refuses them too; ms takes any number)")
	fs.DurationVar(&f.progress, "progress", 10*time.Second, "time between two progress lines on stderr")
	fs.BoolVar(&f.quiet, "q", false, "no progress lines, no summary and no informational lines; warnings are still written")
	f.memoryLimit = backtestMemoryLimit
	fs.Var(&f.memoryLimit, "memory-limit", "soft limit of the process's memory, as 384MiB, 2GiB or bytes; the collector works harder near it (0: none; GOMEMLIMIT in the environment wins); the default is raised to twice the live heap when that nears it, and lowered again when it falls")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file (for go tool pprof)")
	if err := fs.parse(args); err != nil {
		return err
	}
	warnCommandLinePasswords(stderr, cmd.name, "-lookup", f.lookups.binds...) // only the command line's, before the config's
	if fs.NArg() > 0 {
		return fs.usagef("unexpected arguments %q", fs.Args())
	}
	var setFrom map[string]string // where serve's settings came from
	if cmd == serveCommand {
		skip := []string{"config", "print-config"}
		var err error
		setFrom, err = applyConfig(fs.FlagSet, configPath, os.Getenv, skip...)
		if err != nil {
			return fs.usagef("%v", err)
		}
		for _, w := range misspeltEnv(fs.FlagSet, os.Environ(), skip...) {
			fmt.Fprintf(stderr, "serve: warning: %s\n", w)
		}
		if printCfg {
			printConfig(stdout, fs.FlagSet, setFrom, skip...)
			return nil
		}
	}
	if (f.rules == "") == (rulesDir == "") || (f.events == "") == (f.inputTopic == "") || f.state == "" || (f.alerts == "") == (f.alertsTopic == "") {
		rulesReq := "-rules"
		if cmd == serveCommand {
			rulesReq = "-rules or -rules-dir (one of them)"
		}
		// Say which are missing, or given together, so that a long
		// command line need not be searched for them.
		var missing, both []string
		pair := func(a, b string, aSet, bSet bool) {
			switch {
			case !aSet && !bSet && b == "":
				missing = append(missing, a)
			case !aSet && !bSet:
				missing = append(missing, a+" or "+b)
			case aSet && bSet:
				both = append(both, a+" and "+b)
			}
		}
		if cmd == serveCommand {
			pair("-rules", "-rules-dir", f.rules != "", rulesDir != "")
		} else {
			pair("-rules", "", f.rules != "", false)
		}
		pair("-events", "-input-topic", f.events != "", f.inputTopic != "")
		pair("-state", "", f.state != "", false)
		pair("-alerts", "-alerts-topic", f.alerts != "", f.alertsTopic != "")
		msg := rulesReq + ", -events or -input-topic (one of them), -state and -alerts or -alerts-topic (one of them) are required"
		if len(missing) > 0 {
			msg += "; missing: " + strings.Join(missing, ", ")
		}
		if len(both) > 0 {
			msg += "; given together: " + strings.Join(both, ", ")
		}
		return fs.usagef("%s", msg)
	}
	var msgs []string
	negative := func(flag string, bad bool, v any) {
		if bad {
			msgs = append(msgs, fmt.Sprintf("%s %v is negative", flag, v))
		}
	}
	negative("-out-of-orderness", f.outOfOrder < 0, formatDuration(f.outOfOrder))
	negative("-idle-timeout", f.idle < 0, formatDuration(f.idle))
	negative("-close-inactive", f.closeInactive < 0, formatDuration(f.closeInactive))
	negative("-poll", f.poll < 0, formatDuration(f.poll))
	negative("-max-ahead", f.maxAhead < 0, formatDuration(f.maxAhead))
	negative("-checkpoint-min-pause", f.minPause < 0, formatDuration(f.minPause))
	negative("-parallelism", f.parallelism < 0, f.parallelism)
	if f.parallelism > cep.MaxParallelism {
		msgs = append(msgs, fmt.Sprintf("-parallelism %d: at most %d (a subtask owns at least one of the %d key groups)", f.parallelism, cep.MaxParallelism, cep.MaxParallelism))
	}
	if f.aggWorkers < 1 || f.aggWorkers > cep.MaxAggregateWorkers {
		msgs = append(msgs, fmt.Sprintf("-aggregate-workers %d: from 1 to %d", f.aggWorkers, cep.MaxAggregateWorkers))
	}
	negative("-checkpoint-records", f.checkpointRecords < 0, f.checkpointRecords)
	negative("-watermark-every", f.watermarkEvery < 0, f.watermarkEvery)
	negative("-max-partial-matches", f.maxPartial < 0, f.maxPartial)
	negative("-max-buffered-events", f.maxBuffered < 0, f.maxBuffered)
	if f.bounded && f.inputTopic == "" {
		msgs = append(msgs, "-bounded goes with -input-topic (a run over files ends at their end, unless -follow)")
	}
	var kafkaIn *cep.KafkaInput
	if f.inputTopic != "" {
		kafkaIn = &cep.KafkaInput{Topic: f.inputTopic, Bounded: f.bounded,
			AlertsTopic: f.alertsTopic, LateTopic: f.lateTopic, DeadTopic: f.deadTopic, ShadowTopic: f.shadowTopic,
			RulesTopic:     f.rulesTopic,
			ChangelogTopic: f.changelogTopic, Group: f.group, InstanceID: f.instance,
			TxnTimeout: f.txnTimeout, RecordKey: f.recordKey, TrustRecordKeys: f.trustRecordKeys,
			LocalInterval: f.localInterval, SessionTimeout: f.session}
		if f.localInterval == 0 {
			kafkaIn.LocalInterval = -1 // every checkpoint
		}
		switch f.delivery {
		case "exactly-once":
		case "at-least-once":
			kafkaIn.AtLeastOnce = true
		default:
			msgs = append(msgs, fmt.Sprintf("-delivery %q: want exactly-once or at-least-once", f.delivery))
		}
		if f.alertsTopic != "" {
			if f.group == "" {
				msgs = append(msgs, "-alerts-topic needs -group (the input offsets are committed to it in each transaction)")
			}
			if err := cep.CheckInstanceID(f.instance); err != nil {
				msgs = append(msgs, fmt.Sprintf("-instance-id %q: %v", f.instance, err))
			}
			if f.late != "" || f.dead != "" {
				msgs = append(msgs, "-alerts-topic writes late events and dead letters to topics: use -late-topic and -dead-letter-topic, not -late and -dead-letter")
			}
			if f.shadowDir != "" {
				msgs = append(msgs, "-alerts-topic writes the shadow alerts to a topic: use -shadow-topic, not -shadow-alerts")
			}
		} else if f.lateTopic != "" || f.deadTopic != "" || f.shadowTopic != "" || f.rulesTopic != "" {
			msgs = append(msgs, "-late-topic, -dead-letter-topic, -shadow-topic and -rules-topic go with -alerts-topic (with -alerts DIR, use -late, -dead-letter and -shadow-alerts)")
		} else if f.group != "" && f.start != "committed" {
			msgs = append(msgs, "-group goes with -alerts-topic (the group the offsets are committed to) or -start committed (the group whose offsets to start at)")
		} else {
			kafkaIn.StartGroup, kafkaIn.Group = f.group, ""
		}
		if set := f.transactionFlags(); f.alertsTopic == "" && len(set) > 0 {
			msgs = append(msgs, fmt.Sprintf("%s: with -alerts-topic (its transactions and group), not with -alerts DIR", strings.Join(set, ", ")))
		}
		switch f.start {
		case defaultStart:
			kafkaIn.Start = cep.KafkaFromEarliest
		case "latest":
			kafkaIn.Start = cep.KafkaFromLatest
		case "committed":
			kafkaIn.Start = cep.KafkaFromCommitted
			if f.group == "" {
				msgs = append(msgs, "-start committed needs -group (whose committed offsets it starts at)")
			}
		default:
			t, err := time.Parse(time.RFC3339, f.start)
			if err != nil {
				msgs = append(msgs, fmt.Sprintf("-start %q: want earliest, latest, committed or an RFC 3339 time", f.start))
				break
			}
			if t.UnixMilli() < 0 {
				msgs = append(msgs, fmt.Sprintf("-start %s is before 1970-01-01T00:00:00Z, where record timestamps begin", f.start))
				break
			}
			kafkaIn.Start, kafkaIn.StartTime = cep.KafkaFromTime, t
		}
		for _, b := range strings.Split(f.brokers, ",") {
			if b = strings.TrimSpace(b); b != "" {
				if msg := brokerProblem(b); msg != "" {
					msgs = append(msgs, msg)
				}
				kafkaIn.Brokers = append(kafkaIn.Brokers, b)
			}
		}
		if len(kafkaIn.Brokers) == 0 {
			msgs = append(msgs, "-input-topic needs -brokers (or CEPHEUS_KAFKA_BROKERS)")
		}
		sec, err := secFlags.security(fs, stderr)
		if err != nil {
			return err
		}
		kafkaIn.Security = sec
		defer func() { result = loginHint(result, sec) }()
		if f.follow {
			msgs = append(msgs, "-follow is for files: an unbounded topic is read as it grows")
		}
	}
	if f.inputTopic == "" && f.alertsTopic != "" {
		msgs = append(msgs, "-alerts-topic needs -input-topic (a transaction commits the input offsets)")
	}
	if f.inputTopic == "" && f.shadowTopic != "" {
		msgs = append(msgs, "-shadow-topic is for Kafka mode (-input-topic and -alerts-topic): with files, use -shadow-alerts DIR")
	}
	if f.inputTopic == "" {
		// A run over files ignored these: late events and dead letters
		// asked for in a topic were only counted, -start TIME read the
		// files from their start, and -delivery took any value. The
		// brokers and the security settings have defaults from the
		// environment, which a run over files ignores: given on the
		// command line, they are refused as well.
		var kafkaOnly []string
		for _, k := range []struct {
			flag string
			set  bool
		}{{"-late-topic", f.lateTopic != ""}, {"-dead-letter-topic", f.deadTopic != ""}, {"-rules-topic", f.rulesTopic != ""},
			{"-group", f.group != ""}, {"-start", f.start != defaultStart}} {
			if k.set {
				kafkaOnly = append(kafkaOnly, k.flag)
			}
		}
		kafkaOnly = append(kafkaOnly, f.transactionFlags()...)
		for _, name := range []string{"brokers", "kafka-config", "tls", "tls-ca", "tls-cert", "tls-key", "sasl", "sasl-user"} {
			// serve's settings from the environment or its config
			// file count as set, but only the command line's are
			// refused ($CEPHEUS_KAFKA_BROKERS refused every serve
			// over files).
			if fs.isSet(name) && (setFrom == nil || setFrom[name] == fromFlag) {
				kafkaOnly = append(kafkaOnly, "-"+name)
			}
		}
		if len(kafkaOnly) > 0 {
			hint := ""
			if f.lateTopic != "" || f.deadTopic != "" {
				hint = " (with files, use -late DIR and -dead-letter DIR)"
			}
			msgs = append(msgs, fmt.Sprintf("%s: for Kafka mode (-input-topic), not a run over files%s", strings.Join(kafkaOnly, ", "), hint))
		}
	}
	if f.shadowDir != "" && filepath.Clean(f.shadowDir) == filepath.Clean(f.alerts) {
		msgs = append(msgs, "-shadow-alerts is -alerts' directory: give the shadow alerts a directory of their own, so that a reader of the alerts never sees them")
	}
	negative("-transaction-timeout", f.txnTimeout < 0, formatDuration(f.txnTimeout))
	negative("-local-checkpoint-interval", f.localInterval < 0, formatDuration(f.localInterval))
	negative("-session-timeout", f.session < 0, formatDuration(f.session))
	if least := f.interval + f.timeout; f.inputTopic != "" && f.alertsTopic != "" && f.txnTimeout > 0 && f.txnTimeout < least {
		// A transaction lasts an interval, then the checkpoint (at most
		// its timeout): the stream would refuse it too, without the flags.
		msgs = append(msgs, fmt.Sprintf("-transaction-timeout %s is below -checkpoint-interval plus -checkpoint-timeout (%s): the broker would abort transactions that may still commit",
			formatDuration(f.txnTimeout), formatDuration(least)))
	}
	if f.wallClock && (!(f.follow || kafkaIn != nil && !f.bounded) || f.idle == 0) {
		msgs = append(msgs, "-wall-clock-advance needs -follow or an unbounded -input-topic, and a positive -idle-timeout (it advances the watermark while every input it follows is idle)")
	}
	if f.interval <= 0 {
		msgs = append(msgs, fmt.Sprintf("-checkpoint-interval %s must be positive", formatDuration(f.interval)))
	}
	if f.timeout <= 0 {
		msgs = append(msgs, fmt.Sprintf("-checkpoint-timeout %s must be positive", formatDuration(f.timeout)))
	}
	if f.keep < 1 {
		msgs = append(msgs, fmt.Sprintf("-keep %d: at least 1", f.keep))
	}
	if f.progress <= 0 {
		msgs = append(msgs, fmt.Sprintf("-progress %s must be positive", formatDuration(f.progress)))
	}
	if rulesDir != "" && rulesDirPoll <= 0 {
		msgs = append(msgs, fmt.Sprintf("-rules-dir-poll %s must be positive", formatDuration(rulesDirPoll)))
	}
	if cmd == serveCommand {
		msgs = append(msgs, checkServeAddrs(httpAddr, grpcAddr)...)
	}
	backend := cep.Backend(f.backend)
	if backend != cep.BackendMemory && backend != cep.BackendPebble {
		msgs = append(msgs, fmt.Sprintf("-state-backend %q: want memory or pebble", f.backend))
	}
	mode := cep.EventTime
	switch f.timeMode {
	case "event":
	case "processing":
		mode = cep.ProcessingTime
	default:
		msgs = append(msgs, fmt.Sprintf("-time %q: want event or processing", f.timeMode))
	}
	input := cep.InputPolicy{MaxAhead: f.maxAhead}
	switch f.timeUnit {
	case "":
		input.CheckNumericTimes = true
	case "ms":
	case "s":
		// Checked as the default: milliseconds read as seconds land tens
		// of thousands of years ahead.
		input.TimeUnit, input.CheckNumericTimes = cep.Seconds, true
	default:
		msgs = append(msgs, fmt.Sprintf("-time-unit %q: want ms or s", f.timeUnit))
	}
	msgs = append(msgs, f.lookups.outOfRange()...)
	if len(msgs) > 0 {
		return fs.usagef("%s", strings.Join(msgs, "\ncepheus: "+cmd.name+": "))
	}
	var log *slog.Logger
	if cmd == serveCommand {
		var err error
		if log, err = newServeLogger(stderr, logFormat); err != nil {
			return fs.usagef("%v", err)
		}
		if logFormat == "json" {
			// From here on every line of stderr is a JSON object, the
			// error that ends the process too.
			defer func() { result = logFinal(log, result) }()
		}
	}
	file, src, err := readRuleset(cmd.name, f.rules, rulesDir)
	if err != nil {
		return err
	}
	rs, err := rules.Load(file, src)
	if err != nil {
		var list rules.ErrorList
		if logFormat == "json" && log != nil && errors.As(err, &list) {
			for _, p := range list {
				log.Error(p.Error(), "file", p.Pos.Filename, "line", p.Pos.Line, "column", p.Pos.Column)
			}
			return fmt.Errorf("%s: %s", file, plural(int64(list.Count()), "problem", "problems"))
		}
		if err := printErrors(stderr, err, true); err != nil {
			return err
		}
		return errFound
	}
	if err := f.lookups.check([]*rules.Ruleset{rs}); err != nil {
		var unknown *unknownLookupError
		if !errors.As(err, &unknown) || unknown.slip {
			return fs.usagef("%v", err) // a malformed binding, or a slip of the name
		}
		// The state may run a version deployed since the start that
		// declares it (the log said to bind it so): its file binds it.
		as := "-rules"
		if cmd == serveCommand {
			as = "-rules (or in -rules-dir)"
		}
		return fs.usagef("%v; a lookup of a version deployed since the rules file was taken is bound by a restart with that version's file as %s", err, as)
	}
	keyRefused, keyWarning := checkRecordKey(rs, f.recordKey)
	if keyRefused != "" {
		return fs.usagef("%s", keyRefused)
	}
	if mode == cep.ProcessingTime && len(rs.Aggregates) > 0 {
		var names []string
		for _, a := range rs.Aggregates {
			names = append(names, a.Name)
		}
		return fs.usagef("-time processing: ruleset %s has velocity aggregates (%s), whose windows are of event time; leave out -time processing",
			rs.Name, strings.Join(names, ", "))
	}
	// A missing or unreadable input fails here, before the state directory
	// is made (a directory with nothing to read fails in Stream, as early).
	if err := checkEvents(cmd.name, f.events); err != nil {
		return err
	}
	// warnf writes a warning: a line on stderr, or serve's log.
	warnf := func(format string, args ...any) { fmt.Fprintf(stderr, cmd.name+": warning: "+format+"\n", args...) }
	if cmd == serveCommand {
		warnf = func(format string, args ...any) { log.Warn(fmt.Sprintf(format, args...)) }
	}
	for _, w := range rs.Warnings {
		warnf("%s: %s", w.Pos, strings.TrimPrefix(w.Msg, "warning: "))
	}
	if keyWarning != "" {
		warnf("%s", keyWarning)
	}
	// Another run on the state directory refuses this one now, not once
	// the lookups have loaded (a large file takes seconds).
	if err := cep.CheckStateDir(f.state); err != nil {
		return err
	}
	loading := time.Now()
	lookups, closeLookups, err := f.lookups.open(ctx, rs, warnf)
	if err != nil {
		return err
	}
	defer closeLookups()
	loaded := time.Since(loading)
	opts := []cep.Option{
		lookups,
		cep.WithRuleset(rs),
		cep.WithOutOfOrderness(f.outOfOrder),
		cep.WithWatermarkEvery(f.watermarkEvery),
		cep.WithLimits(f.maxPartial, f.maxBuffered),
		cep.WithInputPolicy(input),
	}
	// As a backtest's, the heap is mostly short-lived events: collect
	// less often, within the memory limit (GOGC and GOMEMLIMIT win).
	if os.Getenv("GOGC") == "" {
		opts = append(opts, cep.WithGCPercent(backtestGCPercent))
	}
	guardMemory := false
	if f.memoryLimit > 0 && os.Getenv("GOMEMLIMIT") == "" {
		opts = append(opts, cep.WithMemoryLimit(int64(f.memoryLimit)))
		guardMemory = !fs.isSet("memory-limit")
	}
	e, err := cep.New(opts...)
	if err != nil {
		return err
	}
	cfg := cep.StreamConfig{
		Events: f.events, Kafka: kafkaIn, Follow: f.follow, PollInterval: f.poll, CloseInactive: f.closeInactive,
		StateDir: f.state, LateDir: f.late, DeadDir: f.dead, ShadowDir: f.shadowDir,
		CheckpointInterval: f.interval, CheckpointTimeout: f.timeout, MinPause: f.minPause,
		CheckpointRecords: f.checkpointRecords,
		Keep:              f.keep, Parallelism: f.parallelism, Backend: backend,
		AggregateWorkers: f.aggWorkers,
		Time:             mode,
		IdleTimeout:      f.idle, WallClockAdvance: f.wallClock,
		ProgressInterval: f.progress,
	}
	switch f.alerts {
	case "":
	case "-":
		cfg.Alerts = stdout
	default:
		cfg.AlertsDir = f.alerts
	}
	// say writes one of run's own messages (a stop, a summary line).
	say := func(format string, args ...any) { fmt.Fprintf(stderr, "run: "+format+"\n", args...) }
	if cmd == serveCommand {
		say = func(format string, args ...any) { log.Info(fmt.Sprintf(format, args...)) }
		cfg.Logf = engineLogf(f.quiet, func(l string) { log.Info(l) }, func(w string) { log.Warn(w) })
		if !f.quiet {
			var m rateMeter
			cfg.Progress = func(p cep.StreamProgress) { logProgress(log, p, &m, mode == cep.ProcessingTime) }
		}
	}
	if loaded >= time.Second && !f.quiet {
		// A large lookup file is read before the run starts: the restart
		// takes that much more than the run's "first event" line says.
		say("the lookups' sources opened in %v (a file's records read), before the run's start", loaded.Round(time.Millisecond))
	}
	if cmd != serveCommand {
		cfg.Logf = engineLogf(f.quiet, func(l string) { say("%s", l) }, func(w string) { say("warning: %s", w) })
		if !f.quiet {
			var m rateMeter
			cfg.Progress = func(p cep.StreamProgress) {
				fmt.Fprintln(stderr, "run: "+progressLine(p, &m, mode == cep.ProcessingTime))
			}
		}
	}
	if f.cpuProfile != "" {
		if err := clobbered(cmd.name, namedPath{"-cpuprofile", f.cpuProfile}, inputPaths(f.events, []string{file}, &f.lookups)); err != nil {
			return err
		}
		stop, err := startCPUProfile(cmd.name, f.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	if cmd == serveCommand {
		// A second serve given a running one's directories says so
		// first: not that its ports are taken, after serving metrics.
		if err := cfg.CheckLocks(); err != nil {
			return &userError{err: err, msg: stripPrefixes(err.Error())}
		}
		cfg.Monitor = cep.NewStreamMonitor()
		srv, err := metrics.Serve(httpAddr, cfg.Monitor)
		if err != nil {
			return &userError{err: err, msg: err.Error()}
		}
		defer srv.Close()
		if !f.quiet {
			say("metrics on http://%s/metrics, health on /healthz, readiness on /readyz", srv.Addr())
		}
		if grpcAddr == "" || grpcAddr == "off" {
			// An empty variable counts as unset (CEPHEUS_GRPC= keeps the
			// default), so off is how the environment turns it off.
			if !f.quiet {
				say("no control API (-grpc %s)", cmp.Or(grpcAddr, `""`))
			}
		} else {
			g, err := control.Serve(grpcAddr, cfg.Monitor, control.Options{Refused: func(msg string) { log.Warn(msg) }})
			if err != nil {
				return &userError{err: err, msg: err.Error()}
			}
			defer g.Close()
			if !f.quiet {
				say("control API (gRPC) on %s", g.Addr())
			}
		}
		if rulesDir != "" {
			w := &rulesDirWatcher{dir: rulesDir, poll: rulesDirPoll, m: cfg.Monitor, log: log, seen: sha256.Sum256(src)}
			wctx, stopWatch := context.WithCancel(ctx)
			watched := make(chan struct{})
			go func() {
				w.run(wctx)
				close(watched)
			}()
			defer func() {
				stopWatch()
				<-watched
			}()
			if !f.quiet {
				say("watching %s for a new ruleset every %s", file, formatDuration(rulesDirPoll))
			}
		}
	}
	if guardMemory {
		defer goGuardMemoryLimit(ctx, int64(f.memoryLimit), func(format string, args ...any) {
			if !f.quiet {
				say(format, args...)
			}
		})()
	}
	res, err := e.Stream(ctx, cfg)
	if res != nil && !f.quiet && !res.AlreadyFinished && cmd != serveCommand {
		group := "" // whose checkpoints: the group's in its changelog, else the state directory's
		if f.alertsTopic != "" {
			group = f.group
		}
		printRunSummary(stderr, res, f.deadLetterTo(), group)
		if line := uncommittedAlerts(res, f.exactlyOnce()); line != "" {
			fmt.Fprintf(stderr, "run: %s\n", line)
		}
		if line := openTimeouts(rs, res, &f); line != "" && err != nil && errors.Is(err, ctx.Err()) {
			fmt.Fprintf(stderr, "run: %s\n", line)
		}
		if err == nil && res.Finished && f.timeMode == "processing" && res.Stats.PartialMatches > 0 {
			live := "with -follow"
			if f.inputTopic != "" {
				live = "without -bounded"
			}
			fmt.Fprintf(stderr, "run: warning: %s left open will never time out: in processing time a window ends on the wall clock, and the run ended with its input (run %s to have them time out)\n",
				plural(res.Stats.PartialMatches, "partial match", "partial matches"), live)
		}
	}
	if res != nil && !res.AlreadyFinished {
		// Even with -q, as the backtest's (of the events this process
		// decoded).
		for _, a := range res.Absent {
			warnf("%s", absentText(a))
		}
		for _, m := range res.Mixed {
			warnf("%s", mixedText(m))
		}
	}
	if err == nil && res != nil && res.Finished && !res.AlreadyFinished && res.Records == 0 && f.inputTopic == "" {
		// A run that read nothing (stdin closed, a file not yet
		// written) finishes its state directory as any other: every
		// later run on it has nothing to do, whatever its input. Even
		// with -q, say so.
		st, serr := os.Stat(f.events)
		input, why := emptyInput(f.events, serr == nil && st.IsDir())
		warnf("%s holds no events (%s): the run of %s has finished, and a run on that state directory has nothing to do", input, why, f.state)
	}
	if res != nil && !f.quiet && cmd == serveCommand {
		say("ruleset %s: %s, %s, %s, %s late, %s; %s taken, last %d",
			res.Ruleset, plural(res.Records, "record", "records"), plural(res.Decoded, "event", "events"), plural(res.Alerts, "alert", "alerts"),
			humanize.Int(res.Late), plural(res.Dead, "dead letter", "dead letters"), plural(res.Stats.Checkpoints, "checkpoint", "checkpoints"), res.Stats.LastCheckpoint)
		if line := firstDeadLetter(res, f.deadLetterTo()); line != "" {
			say("%s", line)
		}
		if line := uncommittedAlerts(res, f.exactlyOnce()); line != "" {
			say("%s", line)
		}
		logSummary(log, res)
	}
	if err != nil {
		if res != nil && !res.Finished && errors.Is(err, ctx.Err()) && ctx.Err() != nil {
			if !f.quiet {
				say("stopped at checkpoint %d%s; run the same command to resume", res.Stats.LastCheckpoint, stopCause(ctx))
			}
			for _, u := range res.Unended {
				// Even with -q: bytes that no output holds yet.
				say("%s ends with %s and no line end (a line its writer has not ended): read once it is ended, by the run that resumes", u.File, plural(u.Bytes, "byte", "bytes"))
			}
			return nil
		}
		msg := stripPrefixes(err.Error())
		if ke := (*cep.RecordKeyError)(nil); errors.As(err, &ke) {
			msg += recordKeyHint(ke)
		}
		if errors.Is(err, cep.ErrKafkaNoTopic) && f.inputTopic != "" && strings.Contains(msg, "topic "+f.inputTopic+":") {
			// (The Kafka trial's instances, started before the producer
			// made the topic, all ended at once with the bare error.)
			msg += fmt.Sprintf(" (is -input-topic %s spelt as the producers write it? The input topic must exist: create it first, with the partitions the job needs (cepheus produce -partitions N creates it), then start the instances)", f.inputTopic)
		}
		if errors.Is(err, cep.ErrFenced) {
			msg += fmt.Sprintf(" (another process started with -group %s -instance-id %s: each instance of a group needs its own -instance-id; a restart of this instance elsewhere stops this one, as it should)", f.group, f.instance)
		}
		switch {
		case res == nil || res.Finished || errors.Is(err, cep.ErrRestore) || errors.Is(err, cep.ErrFenced):
			// Not a job that ran and failed (a fenced instance has a
			// successor: nothing to resume).
		case res.Stats.LastCheckpoint == 0:
			msg += " (no checkpoint was taken: once the cause is fixed, the same command starts over)"
		default:
			// The job ran and failed: what it took is in its checkpoints.
			msg += fmt.Sprintf(" (the state stands at checkpoint %d: once the cause is fixed, the same command resumes from it)", res.Stats.LastCheckpoint)
		}
		return &userError{err: err, msg: msg}
	}
	return nil
}

// recordKeyHint is what to do about a record's key that its event does
// not match (docs/kafka.md, "Record keys").
func recordKeyHint(ke *cep.RecordKeyError) string {
	switch {
	case ke.Key == nil:
		// Trusting keys that are not there would split each key's state
		// over the instances.
		return " (the producer wrote it without a key: key the records by " + ke.Field + ", as cepheus produce -key " + ke.Field + " does; docs/kafka.md, \"Record keys\")"
	case ke.KeyedBy != "":
		return " (-record-key " + ke.KeyedBy + " if the topic is keyed by it: the rules keyed otherwise are then repartitioned; -trust-record-keys if its keys are another encoding of " + ke.Field + "; docs/kafka.md, \"Record keys\")"
	}
	return " (-trust-record-keys if its keys are another encoding of " + ke.Field + "; docs/kafka.md, \"Record keys\")"
}

// readRuleset reads the ruleset of a run (of command name): the file -rules names (or the
// one *.cep file of the directory it names), or the one of -rules-dir.
func readRuleset(name, rulesPath, rulesDir string) (string, []byte, error) {
	if rulesDir != "" {
		return readRulesDir(rulesDir)
	}
	files, err := rulesetFiles([]string{rulesPath})
	if err != nil {
		return "", nil, err
	}
	switch {
	case len(files) == 0:
		return "", nil, &usageError{cmd: name, msg: fmt.Sprintf("%s: no *.cep files in %s", name, rulesPath)}
	case len(files) > 1:
		// A command line to correct, as backtest's (exit 2).
		return "", nil, &usageError{cmd: name, msg: fmt.Sprintf("%s: %s holds %d rulesets; a run takes one (name the file)", name, rulesPath, len(files))}
	}
	src, err := os.ReadFile(files[0])
	if err != nil {
		return "", nil, err
	}
	return files[0], src, nil
}

// rateMeter gives the records per second of a run since its previous
// reading: the rate of the last progress interval, which a resumed run's
// total or an idle spell does not skew (the rate over the process's
// life did).
type rateMeter struct {
	records int64
	elapsed time.Duration
	// high are the highest counters reported (steady).
	high struct{ records, decoded, dead, late, alerts int64 }
}

// steady keeps p's counters from going down: a job of a Kafka group that
// restores another instance's checkpoint after a rebalance counts from
// that checkpoint's (the Kafka trial's serve log went from records=100374
// to records=0), as the monitor's counters and metrics never do.
func (m *rateMeter) steady(p *cep.StreamProgress) {
	h := &m.high
	h.records, h.decoded, h.dead = max(h.records, p.Records), max(h.decoded, p.Decoded), max(h.dead, p.Dead)
	h.late, h.alerts = max(h.late, p.Late), max(h.alerts, p.Alerts)
	p.Records, p.Decoded, p.Dead, p.Late, p.Alerts = h.records, h.decoded, h.dead, h.late, h.alerts
}

// rate reads p: its rate since the previous reading (since the start at
// the first), and false when no time has passed.
func (m *rateMeter) rate(p cep.StreamProgress) (int64, bool) {
	n, d := p.RunRecords-m.records, p.Elapsed-m.elapsed
	if n < 0 {
		// A new job of the run (a Kafka group's rebalance) counts from
		// its restored checkpoint again: what it read is the interval's
		// (the rate went negative, -421/s in a trial's scale-out).
		n = p.RunRecords
	}
	m.records, m.elapsed = p.RunRecords, p.Elapsed
	if d <= 0 {
		return 0, false
	}
	return int64(float64(n) / d.Seconds()), true
}

// progressLine is a progress report in one line: the totals, and the rate
// since the previous report (m). In processing time (processing) it has
// no watermark: the one of the events' times moves no window there, and
// said the run stood at a time its rules do not run on.
func progressLine(p cep.StreamProgress, m *rateMeter, processing bool) string {
	m.steady(&p)
	st := p.StreamStats
	var b strings.Builder
	b.WriteString(plural(st.Records, "record", "records"))
	if r, ok := m.rate(p); ok {
		fmt.Fprintf(&b, " (%s/s)", humanize.Int(r))
	}
	fmt.Fprintf(&b, ", %s, %s late, %s dead", plural(st.Alerts, "alert", "alerts"), humanize.Int(st.Late), humanize.Int(st.Dead))
	if !processing && st.Watermark > event.MinTime && st.Watermark < event.MaxTime {
		fmt.Fprintf(&b, ", watermark %s (lag %s)", time.UnixMilli(int64(st.Watermark)).UTC().Format(time.RFC3339),
			formatDuration(time.Duration(max(0, st.MaxEventTime-st.Watermark))*time.Millisecond)) // (as status and the metric: a job that took a partition's watermark over and read no event has no later time)
	}
	if st.Checkpoints > 0 {
		fmt.Fprintf(&b, ", %s, %s", plural(st.Keys, "key", "keys"), plural(st.PartialMatches, "partial match", "partial matches"))
	}
	if st.LastCheckpoint > 0 {
		fmt.Fprintf(&b, ", checkpoint %d", st.LastCheckpoint)
		if st.LastDuration > 0 {
			fmt.Fprintf(&b, " (%s, stall %s)", st.LastDuration.Round(time.Millisecond), st.LastStall.Round(time.Millisecond))
		}
	}
	return b.String()
}

// engineLogf is the engine's log of a run (StreamConfig.Logf): its
// warnings (lines starting "warning: ") go to warn, without that prefix,
// even when quiet; its other lines to info, unless quiet.
func engineLogf(quiet bool, info, warn func(string)) func(format string, args ...any) {
	return func(format string, args ...any) {
		line := fmt.Sprintf(format, args...)
		if w, ok := strings.CutPrefix(line, "warning: "); ok {
			warn(w)
		} else if !quiet {
			info(line)
		}
	}
}

// exactlyOnce says whether the run's alerts are written exactly once: at
// the commits of the checkpoints.
func (f *runFlags) exactlyOnce() bool {
	return f.alerts != "-" && (f.alertsTopic == "" || f.delivery == "exactly-once")
}

// deadLetterTo says where the run's dead letters go, for the summary.
func (f *runFlags) deadLetterTo() string {
	switch {
	case f.dead != "":
		return "see " + f.dead
	case f.deadTopic != "":
		return "see topic " + f.deadTopic
	case f.alertsTopic != "":
		return "only counted (-dead-letter-topic T keeps them)" // -dead-letter is for file outputs
	}
	return "only counted (-dead-letter DIR keeps them)"
}

// firstDeadLetter is the summary's line on the dead letters: why the first
// was refused (a run whose every line is a dead letter, of epoch seconds
// read as milliseconds say, would otherwise say only how many), and where
// they are (deadTo); empty without dead letters.
func firstDeadLetter(r *cep.StreamResult, deadTo string) string {
	if r.Stats.Dead == 0 || r.FirstDeadReason == "" {
		return ""
	}
	where := fmt.Sprintf("line %d", r.FirstDeadLine)
	if r.FirstDeadFile != "" {
		where = r.FirstDeadFile + " " + where
	}
	return fmt.Sprintf("%s (first: %s: %s): %s", plural(r.Stats.Dead, "dead letter", "dead letters"), where, r.FirstDeadReason, deadTo)
}

// printRunSummary prints a run's summary; group, for a transactional
// Kafka run, is the group whose checkpoints it resumed from (an instance
// that took another's partitions over resumed from the group's, not its
// own).
func printRunSummary(w io.Writer, r *cep.StreamResult, deadTo, group string) {
	st := r.Stats
	switch {
	case r.Restored > 0 && group != "":
		fmt.Fprintf(w, "run: resumed from checkpoint %d of group %s\n", r.Restored, group)
	case r.Restored > 0:
		fmt.Fprintf(w, "run: resumed from checkpoint %d\n", r.Restored)
	}
	fmt.Fprintf(w, "run: ruleset %s: %s, %s, %s, %s late, %s; %s taken, last %d\n",
		r.Ruleset, plural(st.Records, "record", "records"), plural(st.Decoded, "event", "events"), plural(st.Alerts, "alert", "alerts"),
		humanize.Int(st.Late), plural(st.Dead, "dead letter", "dead letters"), plural(st.Checkpoints, "checkpoint", "checkpoints"), st.LastCheckpoint)
	if line := firstDeadLetter(r, deadTo); line != "" {
		fmt.Fprintf(w, "run: %s\n", line)
	}
	if st.Ahead > 0 {
		// The first's reason may be another's (the telecom trial's event
		// 26h ahead went unsaid): as the backtest's summary does.
		fmt.Fprintf(w, "run: of them, %s more than -max-ahead ahead of the stream\n", plural(st.Ahead, "event was", "events were"))
	}
	if st.Checkpoints > 0 {
		fmt.Fprintf(w, "run: checkpoints took up to %s, subtasks stalled up to %s; %s (%s, %s)\n",
			st.MaxDuration.Round(time.Millisecond), st.MaxStall.Round(time.Millisecond), plural(st.Keys, "key holds state", "keys hold state"),
			plural(st.PartialMatches, "partial match", "partial matches"), plural(st.Buffered, "event buffered", "events buffered"))
	}
	for _, rr := range r.Rules {
		word := "alerts"
		if rr.Alerts == 1 {
			word = "alert"
		}
		fmt.Fprintf(w, "  %-28s %8s %s", rr.Rule, humanize.Int(rr.Alerts), word)
		notes := ruleNotes(rr)
		if rr.Former {
			notes = append([]string{formerNote(rr)}, notes...)
		}
		if len(notes) > 0 {
			fmt.Fprintf(w, "  (%s)", strings.Join(notes, "; "))
		}
		fmt.Fprintln(w)
	}
	printRuleErrors(w, r.Rules)
	printLookupSummary(w, "run", r.Lookups, r.Restored > 0)
	for _, a := range r.Aggregates {
		fmt.Fprintf(w, "run: aggregate %s: ", a.Name)
		if !r.Finished {
			// (A finished run's final watermark passed every window.)
			fmt.Fprintf(w, "%s with events in their window, ", plural(int64(a.Keys), "key", "keys"))
		}
		fmt.Fprintf(w, "%s dropped at the bound\n", plural(int64(a.Dropped), "event", "events"))
	}
}

// uncommittedAlerts is, for a run with exactly-once outputs (exactly) that
// ended with alerts detected after its latest complete checkpoint (a
// failure, a stop cut short), the summary's line saying how many of its
// alerts are written: the others come with the run that resumes, which
// detects them again. Empty otherwise.
func uncommittedAlerts(r *cep.StreamResult, exactly bool) string {
	n := r.Alerts - r.CommittedAlerts
	if !exactly || n <= 0 {
		return ""
	}
	if r.Stats.LastCheckpoint == 0 {
		return fmt.Sprintf("none of these %s is written (no checkpoint was complete): the run that starts over detects and writes them again", plural(r.Alerts, "alert", "alerts"))
	}
	return fmt.Sprintf("written: %s of these %s, those of checkpoint %d, the latest complete (a commit of it cut short is finished by the run that resumes); %s after it, not written: the run that resumes from checkpoint %d detects and writes those again",
		humanize.Int(r.CommittedAlerts), plural(r.Alerts, "alert", "alerts"), r.Stats.LastCheckpoint, plural(n, "alert detected", "alerts detected"), r.Stats.LastCheckpoint)
}

// openTimeouts is, for a live run stopped with partial matches open whose
// ruleset rs has rules with a timeout block, when their timed-out alerts
// come: as the watermark passes their windows' ends, which takes newer
// events (a trial waited for them on a quiet input); "" otherwise.
func openTimeouts(rs *rules.Ruleset, res *cep.StreamResult, f *runFlags) string {
	live := f.follow || f.inputTopic != "" && !f.bounded
	if !live || res.Finished || res.Stats.PartialMatches == 0 || f.timeMode == "processing" || res.Stats.Watermark <= event.MinTime {
		return ""
	}
	var names []string
	for _, r := range rs.Rules {
		if r.Timeout != nil {
			names = append(names, r.Name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	of := "of " + strings.Join(names, ", ")
	if res.RulesetVersion != rs.Hash {
		// Another version runs (deployed): its rules are not rs's.
		of = "of the rules with a timeout block"
	}
	quiet := "on a quiet input, -wall-clock-advance moves it on"
	if f.wallClock {
		quiet = "-wall-clock-advance moves it on while the input is quiet"
	}
	return fmt.Sprintf("the watermark stands at %s: the timed-out alerts %s come as it passes their windows' ends, which newer events move it to (%s)",
		time.UnixMilli(int64(res.Stats.Watermark)).UTC().Format(time.RFC3339), of, quiet)
}

// formerNote says of a rule of a run's summary that the active version
// has not (removed, or of another severity now) that its figures are
// those of earlier versions, and of which severity: the same rule may
// have a line of the active version.
func formerNote(rr cep.RuleSummary) string {
	note := "an earlier version's, severity " + rr.Severity
	if rr.TimeoutSeverity != "" {
		note += ", timeout " + rr.TimeoutSeverity
	}
	return note
}

// checkServeAddrs refuses, as a bad command line, a -http or -grpc address
// that is no host:port, before anything is set up. The listener would
// refuse most of them only once the job was being built, but not "":
// -http "" (-grpc's way of saying none) listened on every interface at a
// port of the kernel's choosing.
func checkServeAddrs(httpAddr, grpcAddr string) []string {
	var msgs []string
	if !hostPort(httpAddr) {
		msgs = append(msgs, fmt.Sprintf("-http %q: want host:port (port 0 picks one); /metrics, /healthz and /readyz are always served", httpAddr))
	}
	if grpcAddr != "" && grpcAddr != "off" {
		if path, ok := strings.CutPrefix(grpcAddr, "unix:"); ok {
			if path == "" {
				msgs = append(msgs, fmt.Sprintf("-grpc %q: want unix:PATH, the path of the socket", grpcAddr))
			}
		} else if !hostPort(grpcAddr) {
			msgs = append(msgs, fmt.Sprintf("-grpc %q: want host:port (port 0 picks one), unix:PATH (a Unix socket), or off for none", grpcAddr))
		}
	}
	return msgs
}

// hostPort reports whether addr is host:port with a port a listener takes
// (a number up to 65535, or a service's name): localhost:99999 failed only
// once the job was being built, exit 1.
func hostPort(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	_, err = net.LookupPort("tcp", port)
	return err == nil
}

// checkRecordKey checks -record-key field against the event fields of
// rs: a field its declared schema lacks is refused (a slip: the record
// keys would not be checked and every rule would be repartitioned, without
// a word); one that no rule of an inferred schema reads is a warning (the
// topic may be keyed by a field the rules do not read, whose keys cannot
// be checked then).
func checkRecordKey(rs *rules.Ruleset, field string) (refused, warning string) {
	if field == "" {
		return "", ""
	}
	var fields []string
	for _, slot := range rs.IDSlots {
		fields = append(fields, rs.Schema.Field(slot).Name)
	}
	if slices.Contains(fields, field) {
		return "", ""
	}
	hint := ""
	if s := rules.Suggest(field, fields); s != "" {
		hint = s
	}
	if rs.Declared {
		return fmt.Sprintf("-record-key %s: ruleset %s declares no event field %s%s", field, rs.Name, field, hint), ""
	}
	return "", fmt.Sprintf("-record-key %s: no rule of ruleset %s reads field %s%s: the records' keys are not checked, and every rule is repartitioned", field, rs.Name, field, hint)
}
