package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/cepheus-cep/cepheus/cep"
	"github.com/cepheus-cep/cepheus/event"
)

var serveCommand = &command{
	name:  "serve",
	short: "run as cepheus run does, with metrics, health and the control API (hot-loading)",
	usage: "cepheus serve [the flags of cepheus run] [-rules-dir DIR] [-shadow-alerts DIR | -shadow-topic T] [-http ADDR] [-grpc ADDR]",
	help: `Serve runs a ruleset as a live engine, exactly as cepheus run does (every
flag of run applies: files or Kafka, checkpoints, exactly-once outputs,
scale-out), and serves its operations surface over HTTP on -http
(default localhost:9464):

  /metrics   Prometheus metrics, prefix cepheus_ (docs/operations.md,
             "cepheus serve: metrics, health, readiness"): records,
             events, dead letters, late events, alerts by rule and
             severity, keys and buffered events, queued events
             (backpressure), watermark and its lag, checkpoint
             durations and failures, the ruleset's version; with the
             Go runtime's and the process's
  /healthz   200 while the process serves
  /readyz    200 once the job has restored its state and reads its
             input (in Kafka mode, its share of the group's
             partitions); 503 before, during a ruleset switch,
             between two jobs of a rebalance, and after the end

and its control API over gRPC on -grpc (default localhost:9465; service
cepheus.v1.Control, with health and reflection): cepheus status, and
cepheus rules validate, deploy, list, rollback and promote (hot-loading:
the job switches to a new ruleset version at a checkpoint barrier,
without a restart). In Kafka mode a deploy goes to the instance it is
sent to; with -rules-topic T it goes into the group's rules topic, and
every instance of the group deploys it, at one watermark when it reads
it in time (docs/operations.md, "Hot-loading").

Shadow mode: cepheus rules deploy -shadow runs a new version beside the
active one, on the same events from its switch on, without touching the
main outputs: its alerts go to -shadow-alerts DIR (committed part files
shadow-S-N.jsonl, exactly once, as -alerts DIR's) or, in Kafka mode with
-alerts-topic, to -shadow-topic T (in each checkpoint's transaction). A
job started without either refuses shadow deploys. cepheus status
compares the shadow's rules with the active rules of the same names
(alerts of each, overlap, only-active, only-shadow); cepheus rules
promote makes the shadow the active version.

-rules-dir DIR, instead of -rules, takes the ruleset from the one *.cep
file of DIR (other files are ignored; none or several is an error) and
looks at it every -rules-dir-poll (1s): when its content changed since
the previous look, it is deployed as cepheus rules deploy would. A
ruleset that does not compile is logged with its problems at
file:line:col and the engine keeps its version. Write the new file
elsewhere and rename it into DIR, so that no look sees half of it. A
deploy through the control API stays until the file changes again, also
across a restart on the same -state; a file changed while the process
was down is deployed at the restart.

Settings: every flag may come from a YAML file (-config FILE, or
$CEPHEUS_CONFIG; keys named as the flags without the dash, e.g.
checkpoint-interval: 1s) or the environment (CEPHEUS_ and the flag's
name in capitals, - as _: CEPHEUS_CHECKPOINT_INTERVAL=1s); a flag wins
over the environment, which wins over the file, which wins over the
default. -print-config prints the settings in effect, each with where it
came from, as a config file, and exits.

Its messages go to stderr through log/slog, as key=value text or, with
-log-format json, one JSON object a line (the progress every -progress
with its figures as fields; no event value at info level; at the end,
the totals and a record per rule, lookup and aggregate; the error it
ends with, and a ruleset's problems at the start, as ERROR records).

SIGINT, SIGTERM or SIGHUP stops it as run: a final checkpoint, then exit 0.`,
}

func init() {
	serveCommand.run = func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		return runStream(ctx, serveCommand, args, stdout, stderr)
	}
}

// newServeLogger is serve's logger on w: text (key=value) or json.
func newServeLogger(w io.Writer, format string) (*slog.Logger, error) {
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, nil)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, nil)), nil
	}
	return nil, fmt.Errorf("-log-format %q: want text or json", format)
}

// loggedError is an error serve logged as its last record (-log-format
// json): the exit status is code's, and nothing more is printed.
type loggedError struct {
	err  error
	code int
}

func (e *loggedError) Error() string { return e.err.Error() }
func (e *loggedError) Unwrap() error { return e.err }

// logFinal logs err, the error that ends serve, as an ERROR record of log
// with the exit status, instead of the plain "cepheus: ..." line that
// exitCode prints, which a reader of JSON lines does not take (it read
// the last line, why the process ended, as garbage).
func logFinal(log *slog.Logger, err error) error {
	var said strings.Builder
	code := exitCode(err, &said)
	if said.Len() == 0 {
		return err // nothing to say (none, or said already)
	}
	msg := strings.TrimSpace(strings.TrimPrefix(said.String(), "cepheus: "))
	log.Error(msg, "exit_status", code)
	return &loggedError{err: err, code: code}
}

// logProgress logs a progress report with its figures as attributes
// (never an event value), the rate since the previous report (m).
func logProgress(log *slog.Logger, p cep.StreamProgress, m *rateMeter, processing bool) {
	m.steady(&p)
	attrs := []any{
		slog.Int64("records", p.Records), slog.Int64("decoded", p.Decoded), slog.Int64("dead", p.Dead),
		slog.Int64("late", p.Late), slog.Int64("alerts", p.Alerts), slog.Int64("keys", p.Keys), slog.Int64("partial_matches", p.PartialMatches),
		slog.Int64("queued", p.Queued), slog.Int64("checkpoint", p.LastCheckpoint),
		slog.Duration("checkpoint_duration", p.LastDuration), slog.Duration("checkpoint_stall", p.LastStall),
		slog.Duration("elapsed", p.Elapsed.Round(time.Millisecond)),
	}
	if wm := p.Watermark; !processing && wm > event.MinTime && wm < event.MaxTime {
		// As run's progress line: the watermark, and how far it is
		// behind the newest event time read.
		attrs = append(attrs, slog.String("watermark", time.UnixMilli(int64(wm)).UTC().Format(time.RFC3339)),
			slog.Duration("lag", time.Duration(max(0, p.MaxEventTime-wm))*time.Millisecond))
	}
	if r, ok := m.rate(p); ok {
		attrs = append(attrs, slog.Int64("records_per_second", r))
	}
	log.Info("progress", attrs...)
}

// logSummary logs at serve's end what run's summary prints after its
// totals: a record per rule, per lookup and per aggregate, its figures as
// fields (the metrics have them while serve runs; a counter of an event
// that did not happen is left out).
func logSummary(log *slog.Logger, r *cep.StreamResult) {
	for _, rr := range r.Rules {
		attrs := []any{"rule", rr.Rule, "severity", rr.Severity, "alerts", rr.Alerts}
		if rr.Former {
			// Not in the active version (removed, or of another severity
			// now): an earlier version's figures.
			attrs = append(attrs, "former", true)
			if rr.TimeoutSeverity != "" {
				attrs = append(attrs, "timeout_severity", rr.TimeoutSeverity)
			}
		}
		count := func(key string, n int64) {
			if n > 0 {
				attrs = append(attrs, key, n)
			}
		}
		count("timed_out", rr.TimedOut)
		count("condition_errors", int64(rr.ConditionErrors))
		count("emit_errors", int64(rr.EmitErrors))
		count("partial_matches_dropped", rr.Dropped)
		if len(rr.DroppedKeys) > 0 {
			attrs = append(attrs, "partial_matches_dropped_at", droppedAt(rr.DroppedKeys))
		}
		count("events_over_buffer_limit", rr.Overflow)
		count("events_without_key", rr.NoKey)
		if rr.LastConditionError != "" {
			attrs = append(attrs, "last_condition_error", rr.LastConditionError)
		}
		if rr.LastEmitError != "" {
			attrs = append(attrs, "last_emit_error", rr.LastEmitError)
		}
		log.Info("rule summary", attrs...)
	}
	for _, l := range r.Lookups {
		if !l.Bound {
			log.Info("lookup summary", "lookup", l.Name, "bound", false, "note", "unbound, every event got its defaults")
			continue
		}
		attrs := []any{"lookup", l.Name, "bound", true, "keys_from_cache", l.Hits, "keys_looked_up", l.Misses,
			"keys_without_record", l.NotFound, "requests", l.Requests, "failed", l.Failures, "timeouts", l.Timeouts,
			"records_unreadable", l.Unreadable, "events_defaulted", l.Defaulted, "events_rejected", l.Rejected}
		if l.LastError != "" {
			attrs = append(attrs, "last_error", l.LastError)
		}
		log.Info("lookup summary", attrs...)
	}
	for _, a := range r.Aggregates {
		attrs := []any{"aggregate", a.Name, "events_dropped", a.Dropped}
		if !r.Finished {
			attrs = append(attrs, "keys", a.Keys)
		}
		log.Info("aggregate summary", attrs...)
	}
}
