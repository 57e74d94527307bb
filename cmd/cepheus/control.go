package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/internal/control"
)

var statusCommand = &command{
	name:  "status",
	usage: "cepheus status -server ADDR",
	help: `Status asks a running cepheus serve (its -grpc address) what it does:
readiness, the ruleset and its version, records, events, dead letters,
late events and alerts, the watermark and its lag, the latest checkpoint,
keys held, queued events, then each rule's alerts, condition errors and
drops, and each input partition's watermark.`,
}

var rulesCommand = &command{
	name:  "rules",
	usage: "cepheus rules validate -server ADDR FILE|DIR",
	help: `Rules manages the rulesets of a running cepheus serve (its -grpc address).

  validate   checks a ruleset on the server as cepheus check does, without
             deploying it: prints its version, or its problems at
             file:line:col (exit 1)

Not yet: deploy, list, rollback, promote (hot-loading).`,
}

func init() {
	statusCommand.run = runStatus
	rulesCommand.run = runRules
}

// controlTimeout bounds a call of the control API from the CLI.
const controlTimeout = 30 * time.Second

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet(statusCommand, stdout)
	server := fs.String("server", "localhost:9465", "the -grpc address of cepheus serve")
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fs.usagef("unexpected arguments %q", fs.Args())
	}
	c, err := control.Dial(*server)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, controlTimeout)
	defer cancel()
	st, err := c.Status(ctx)
	if err != nil {
		return &userError{err: err, msg: fmt.Sprintf("status of %s: %v", *server, err)}
	}
	ready := "not ready"
	if st.GetReady() {
		ready = "ready"
	}
	fmt.Fprintf(stdout, "%s: %s, ruleset %s version %.12s\n", *server, ready, st.GetRuleset(), st.GetVersion())
	fmt.Fprintf(stdout, "records %d, events %d, dead %d, late %d, alerts %d\n", st.GetRecords(), st.GetDecoded(), st.GetDead(), st.GetLate(), st.GetAlerts())
	wm := "none yet"
	if w := event.Time(st.GetWatermarkUnixMs()); w > event.MinTime {
		wm = w.String() + fmt.Sprintf(" (lag %v)", time.Duration(st.GetWatermarkLagMs())*time.Millisecond)
	}
	fmt.Fprintf(stdout, "watermark %s; checkpoint %d (%dms), %d failed; %d keys, %d queued\n", wm,
		st.GetLastCheckpoint(), st.GetLastCheckpointDurationMs(), st.GetCheckpointFailures(), st.GetKeys(), st.GetQueued())
	for _, r := range st.GetRules() {
		fmt.Fprintf(stdout, "  rule %-28s %-8s %8d alerts %6d condition errors %6d dropped\n", r.GetRule(), r.GetSeverity(), r.GetAlerts(), r.GetConditionErrors(), r.GetDropped())
	}
	for _, p := range st.GetPartitions() {
		fmt.Fprintf(stdout, "  partition %s watermark %s\n", p.GetPartition(), event.Time(p.GetWatermarkUnixMs()))
	}
	return nil
}

func runRules(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet(rulesCommand, stdout)
	server := fs.String("server", "localhost:9465", "the -grpc address of cepheus serve")
	sub := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	if err := fs.parse(args); err != nil {
		return err
	}
	if sub != "validate" {
		return fs.usagef("want a subcommand: validate (deploy, list, rollback and promote are to come)")
	}
	if fs.NArg() != 1 {
		return fs.usagef("rules validate takes one ruleset file or directory")
	}
	files, err := rulesetFiles(fs.Args())
	if err != nil {
		return err
	}
	if len(files) != 1 {
		return fs.usagef("%s holds %d rulesets; name the file", fs.Arg(0), len(files))
	}
	src, err := os.ReadFile(files[0])
	if err != nil {
		return err
	}
	c, err := control.Dial(*server)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, controlTimeout)
	defer cancel()
	r, err := c.Validate(ctx, filepath.Base(files[0]), src)
	if err != nil {
		return &userError{err: err, msg: fmt.Sprintf("validate on %s: %v", *server, err)}
	}
	if r.GetOk() {
		fmt.Fprintf(stdout, "%s: ruleset %s version %.12s, %d rules: ok\n", files[0], r.GetRuleset(), r.GetVersion(), len(r.GetRules()))
		return nil
	}
	for _, p := range r.GetProblems() {
		fmt.Fprintf(stderr, "%s:%d:%d: %s\n", p.GetFile(), p.GetLine(), p.GetColumn(), p.GetMessage())
	}
	return &userError{err: fmt.Errorf("%d problems", len(r.GetProblems())), msg: fmt.Sprintf("%s: %d problems", files[0], len(r.GetProblems()))}
}
