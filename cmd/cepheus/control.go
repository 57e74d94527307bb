package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cepheus-cep/cepheus/cep"
	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/internal/control"
	"github.com/cepheus-cep/cepheus/internal/humanize"
	"github.com/cepheus-cep/cepheus/rules"
)

var statusCommand = &command{
	name:  "status",
	short: "show the state of a serving engine (cepheus serve)",
	usage: "cepheus status -server ADDR",
	help: `Status asks a running cepheus serve (its -grpc address) what it does:
readiness, the ruleset and its version, records, events, dead letters,
late events and alerts, the watermark and its lag, the latest checkpoint,
keys held, queued events, then each rule's alerts (with a timeout block,
how many of them timed out), condition errors, emit errors, events and
partial matches dropped at the limits, and events without key; the rules
of an earlier version that the active one has not (removed, or of
another severity now), with their last figures; the rules of earlier
versions still draining (a changed rule's old version, going on with
its partial matches of before the deploy), each with its version and
the time the watermark must pass to let it go; each input
partition's watermark, whether it is idle, and a Kafka partition's lag;
each lookup's figures (keys from the cache and
from the source, requests, failures, events given the defaults or sent
to the dead letters, the last error) and each velocity aggregate's
(keys with events in their window, events dropped at a key's bound,
hot keys), counted since the process started. When a shadow version runs
(cepheus rules deploy -shadow), its hash and, for each of its rules, the
alerts of the active rule of its name and of the shadow rule since the
shadow was deployed, the matches both raised (overlap), and those only
the active one or only the shadow raised.`,
}

var rulesCommand = &command{
	name:  "rules",
	short: "validate, deploy, list, roll back or promote rulesets on a serving engine",
	subs:  []string{"validate", "deploy", "list", "rollback", "promote"},
	usage: "cepheus rules validate|deploy|list|rollback|promote -server ADDR [-shadow] [-drop-changed] [-from VERSION] [FILE|DIR]",
	help: `Rules manages the rulesets of a running cepheus serve (its -grpc address).

  validate FILE  checks a ruleset on the server as cepheus check does,
                 without deploying it: prints its version, or its
                 problems at file:line:col (exit 1). It does not ask
                 the running job: a deploy may still be refused for
                 what the job holds (a change of its velocity
                 aggregates, of its event time field)
  deploy FILE    deploys a ruleset: the job switches to it at its next
                 checkpoint barrier (asked for at once). Prints the new
                 version, the checkpoint it switched at, the rules kept
                 (their partial matches kept; ten named, the others
                 counted), changed, added and removed, and the time it
                 took; a ruleset that does not
                 compile is refused with its problems at file:line:col
                 (exit 1) and the job keeps its version. The partial
                 matches of a changed rule drain (the old rule goes on
                 with them until its window expires) unless
                 -drop-changed. With -shadow, the version is deployed
                 as the shadow instead: it runs beside the active one
                 on the same events from the switch on, its alerts
                 going to the shadow output only (cepheus serve
                 -shadow-alerts DIR, or -shadow-topic T in Kafka mode;
                 a job without one refuses it), replacing an earlier
                 shadow; cepheus status compares it with the active
                 version rule by rule. The active version cannot be
                 the shadow
  list           lists the versions the engine keeps, newest first: the
                 active one, the shadow one if any, then the previous
                 ones, those that were active before (hash, state, when
                 deployed, origin, ruleset, rules); a shadow that never
                 was active is none
  rollback       deploys the most recent previous version again, if
                 the version active when the job takes it is the one
                 rollback saw active (it lists the versions first), or
                 the one -from names: after a deploy that switched
                 meanwhile or a second rollback at the same time, it is
                 refused (exit 1) instead of toggling back. To send
                 again a rollback whose answer was lost, give -from the
                 version it rolled back from
  promote        makes the shadow version the active one, as a deploy
                 of it would (the rules it changes drain unless
                 -drop-changed); the shadow goes

-from VERSION (deploy, rollback, promote) names the version that must
be the active one when the job takes the call: its hash, or a prefix of
at least 6 hex digits as list prints; another active version refuses
the call and nothing switches.

FILE is a .cep file, or a directory holding one.
`,
}

func init() {
	statusCommand.run = runStatus
	rulesCommand.run = runRules
}

// controlTimeout bounds a call of the control API from the CLI.
const controlTimeout = 30 * time.Second

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet(statusCommand, stdout)
	server := fs.String("server", "localhost:9465", "the -grpc address of cepheus serve (host:port, or unix:PATH for its Unix socket)")
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
		return &userError{err: err, msg: fmt.Sprintf("status of %s: %s", *server, callMessage(c, err))}
	}
	fmt.Fprintln(stdout, statusHeader(*server, st.GetReady(), st.GetStandby(), st.GetRuleset(), st.GetVersion()))
	n := humanize.Int
	fmt.Fprintf(stdout, "records %s, events %s, dead %s, late %s, alerts %s\n", n(st.GetRecords()), n(st.GetDecoded()), n(st.GetDead()), n(st.GetLate()), n(st.GetAlerts()))
	wm := watermarkText(event.Time(st.GetWatermarkUnixMs()))
	if w := event.Time(st.GetWatermarkUnixMs()); w > event.MinTime && w < event.MaxTime {
		wm += fmt.Sprintf(" (lag %v)", time.Duration(st.GetWatermarkLagMs())*time.Millisecond)
	}
	fmt.Fprintf(stdout, "watermark %s; %s, %s failed; %s keys, %s queued\n", wm,
		checkpointText(st.GetLastCheckpoint(), st.GetLastCheckpointDurationMs()), n(st.GetCheckpointFailures()), n(st.GetKeys()), n(st.GetQueued()))
	for _, r := range st.GetRules() {
		fmt.Fprintln(stdout, ruleLine(r, false))
	}
	for _, r := range st.GetFormer() {
		fmt.Fprintln(stdout, ruleLine(r, true))
	}
	for _, r := range st.GetDraining() {
		// Its alerts are in its rule's line, under its severity.
		fmt.Fprintf(stdout, "  draining: %s of version %.12s, its partial matches of before the switch, until the watermark passes %s\n",
			r.GetRule(), r.GetVersion(), watermarkText(event.Time(r.GetUntilUnixMs())))
	}
	for _, p := range st.GetPartitions() {
		fmt.Fprintln(stdout, partitionLine(p.GetPartition(), p.GetWatermarkUnixMs(), p.GetIdle(), p.Lag))
	}
	printStatusFigures(stdout, control.StatusLookups(st), control.StatusAggregates(st))
	if st.GetShadowVersion() != "" {
		fmt.Fprintf(stdout, "shadow version %.12s, compared with the active rules of the same names since its deploy:\n", st.GetShadowVersion())
		fmt.Fprintf(stdout, "  %-28s %8s %8s %8s %11s %11s\n", "rule", "active", "shadow", "overlap", "only-active", "only-shadow")
		for _, r := range st.GetShadow() {
			unchanged := ""
			if r.GetUnchanged() && (r.GetOnlyActive() != 0 || r.GetOnlyShadow() != 0) {
				// Its differences are its windows filling, not a change
				// of the rule (the trial's dormant_card, 60 days of
				// history: 35 only-active).
				unchanged = "  [unchanged: its state began empty at the deploy]"
			}
			fmt.Fprintf(stdout, "  %-28s %8s %8s %8s %11s %11s%s\n", r.GetRule(), n(r.GetActive()), n(r.GetShadow()), n(r.GetOverlap()), n(r.GetOnlyActive()), n(r.GetOnlyShadow()), unchanged)
		}
	}
	return nil
}

// partitionLine is a partition's line of status: its watermark, whether
// it is idle (it no longer holds the job's watermark back), and a Kafka
// partition's lag (nil for a file).
func partitionLine(name string, wm int64, idle bool, lag *int64) string {
	line := fmt.Sprintf("  partition %s watermark %s", name, watermarkText(event.Time(wm)))
	if idle {
		line += " (idle)"
	}
	if lag != nil {
		line += ", lag " + plural(*lag, "record", "records")
	}
	return line
}

// printStatusFigures prints status's lines of the lookups (as run's
// summary gives them) and of the velocity aggregates.
func printStatusFigures(w io.Writer, lookups []cep.LookupStats, aggs []cep.AggregateStats) {
	for _, l := range lookups {
		fmt.Fprintf(w, "  %s\n", lookupText(l))
	}
	for _, a := range aggs {
		fmt.Fprintf(w, "  aggregate %s: %s with events in their window, %s dropped at the bound, %s hot\n",
			a.Name, plural(int64(a.Keys), "key", "keys"), plural(int64(a.Dropped), "event", "events"), plural(int64(a.HotKeys), "key", "keys"))
	}
}

// ruleStatus is a rule's figures in the Status answer (the control API's
// RuleStatus, whose package this one does not import).
type ruleStatus interface {
	GetRule() string
	GetSeverity() string
	GetAlerts() int64
	GetConditionErrors() int64
	GetEmitErrors() int64
	GetDropped() int64
	GetNoKey() int64
	GetTimedOut() int64
	GetTimeoutSeverity() string
}

// ruleLine is a rule's line of status: its counters, and with a timeout
// block how many of its alerts timed out, and their severity. A former
// rule's (one the active version has not: removed, or of another
// severity now) is marked so; without those lines the rules did not add
// up to the alerts of the header.
func ruleLine(r ruleStatus, former bool) string {
	n := humanize.Int
	line := fmt.Sprintf("  rule %-28s %-8s %8s alerts %6s condition errors %6s emit errors %6s dropped %6s without key",
		r.GetRule(), r.GetSeverity(), n(r.GetAlerts()), n(r.GetConditionErrors()), n(r.GetEmitErrors()), n(r.GetDropped()), n(r.GetNoKey()))
	if r.GetTimeoutSeverity() != "" {
		line += fmt.Sprintf(" (%s of them timed out, %s)", n(r.GetTimedOut()), r.GetTimeoutSeverity())
	}
	if former {
		line += "  [earlier version: not in the active one]"
	}
	return line
}

// statusHeader is status's first line: whether the job is ready, and the
// ruleset version it runs; when it is not ready, why and what to do.
// Before a job has published anything (serve restoring its checkpoint)
// there is no version yet: it said "ruleset  version " then. A standby
// of a Kafka group (it reads no partition) said that it restored its state
// and to ask again in a moment, which changed nothing.
func statusHeader(server string, ready, standby bool, ruleset, version string) string {
	switch {
	case ready:
		return fmt.Sprintf("%s: ready, ruleset %s version %.12s", server, ruleset, version)
	case standby:
		return fmt.Sprintf("%s: not ready: a standby, it reads no partition of its Kafka group (the others read them all); it takes partitions over when the group gives it some (an instance leaves or fails)", server)
	case ruleset == "":
		return fmt.Sprintf("%s: not ready: no job has started yet (it restores its state; serve's log says from which checkpoint): ask again in a moment", server)
	}
	return fmt.Sprintf("%s: not ready (a ruleset switch, between two jobs of a rebalance, or the run has ended; ask again in a moment), ruleset %s version %.12s", server, ruleset, version)
}

// checkpointText is the latest checkpoint as status prints it, id and
// duration in milliseconds as the Status answer has them: none yet, or
// one the job restored (at its start, or a switch's: the job that took
// it timed it, this one did not, and its duration is 0), or one the job
// took, with its duration. The restored one read "(0ms)".
func checkpointText(id, ms int64) string {
	switch {
	case id == 0:
		return "no checkpoint yet"
	case ms == 0:
		// A restart's or a switch's: "restored" read as a restart.
		return fmt.Sprintf("checkpoint %d (the job started from it)", id)
	}
	return fmt.Sprintf("checkpoint %d (%sms)", id, humanize.Int(ms))
}

// watermarkText is a watermark as status prints it: none yet before the
// first, the end of the input after the last.
func watermarkText(w event.Time) string {
	switch {
	case w <= event.MinTime:
		return "none yet"
	case w >= event.MaxTime:
		return "the end of the input"
	}
	return w.String()
}

func runRules(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet(rulesCommand, stdout)
	server := fs.String("server", "localhost:9465", "the -grpc address of cepheus serve (host:port, or unix:PATH for its Unix socket)")
	dropChanged := fs.Bool("drop-changed", false, "deploy, rollback, promote: drop the partial matches of the rules that changed instead of letting them drain")
	shadow := fs.Bool("shadow", false, "deploy: deploy the version as the shadow (beside the active one, its alerts to the shadow output only)")
	from := fs.String("from", "", "deploy, rollback, promote: the `version` that must be active when the job takes the call (a hash's prefix of 6 hex digits or more); rollback's default is the active one it lists first")
	sub := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	if err := fs.parse(args); err != nil {
		return err
	}
	if sub == "" && fs.NArg() > 0 {
		// The flags came first: cepheus rules -server ADDR list.
		sub, fs.args = fs.args[0], fs.args[1:]
	}
	switch sub {
	case "validate", "deploy":
		if fs.NArg() != 1 {
			return fs.usagef("rules %s takes one ruleset file or directory", sub)
		}
	case "list", "rollback", "promote":
		if fs.NArg() > 0 {
			return fs.usagef("rules %s takes no arguments, not %q", sub, fs.Args())
		}
	case "":
		return fs.usagef("want a subcommand: validate, deploy, list, rollback or promote")
	default:
		return fs.usagef("unknown subcommand %q: want validate, deploy, list, rollback or promote", sub)
	}
	if *dropChanged && (sub == "validate" || sub == "list") {
		return fs.usagef("-drop-changed goes with deploy, rollback and promote")
	}
	if *from != "" && (sub == "validate" || sub == "list") {
		return fs.usagef("-from goes with deploy, rollback and promote")
	}
	if *shadow && sub != "deploy" {
		return fs.usagef("-shadow goes with deploy (rules promote makes the shadow version active)")
	}
	if *shadow && *dropChanged {
		return fs.usagef("-drop-changed goes with a deploy of the active version, not with -shadow (a shadow version drains nothing; rules promote -drop-changed drops at the promotion)")
	}
	c, err := control.Dial(*server)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, controlTimeout)
	defer cancel()
	switch sub {
	case "list":
		return listVersions(ctx, c, *server, stdout)
	case "rollback":
		if *from == "" {
			// The version rolled back from is the one seen active now:
			// a switch before the job takes the call refuses it.
			vs, err := c.ListVersions(ctx)
			if err != nil {
				return &userError{err: err, msg: fmt.Sprintf("rollback on %s: %s", *server, callMessage(c, err))}
			}
			if len(vs) > 0 {
				*from = vs[0].Version
			}
		}
		r, err := c.Rollback(ctx, cep.SwitchOptions{DropChanged: *dropChanged, From: *from})
		if err != nil {
			return &userError{err: err, msg: fmt.Sprintf("rollback on %s: %s", *server, switchMessage(c, err))}
		}
		printDeploy(stdout, "rolled back", r, *dropChanged)
		return nil
	case "promote":
		r, err := c.Promote(ctx, cep.SwitchOptions{DropChanged: *dropChanged, From: *from})
		if err != nil {
			return &userError{err: err, msg: fmt.Sprintf("promote on %s: %s", *server, switchMessage(c, err))}
		}
		printDeploy(stdout, "promoted", r, *dropChanged)
		return nil
	}
	file, src, err := readRulesetArg(fs)
	if err != nil {
		return err
	}
	if sub == "validate" {
		r, err := c.Validate(ctx, filepath.Base(file), src)
		if err != nil {
			return &userError{err: err, msg: fmt.Sprintf("validate on %s: %s", *server, callMessage(c, err))}
		}
		if !r.GetOk() {
			// With the source line and caret, as cepheus check prints them.
			problems := localNames(control.ErrorsOf(r.GetProblems()), file).WithLines(src)
			if err := problems.Print(stderr, true); err != nil {
				return err
			}
			return problemsError(file, problems.Count())
		}
		if err := localNames(control.ErrorsOf(r.GetWarnings()), file).WithLines(src).Print(stderr, true); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s: ruleset %s version %.12s, %d rules: ok\n", file, r.GetRuleset(), r.GetVersion(), len(r.GetRules()))
		return nil
	}
	r, err := c.Deploy(ctx, cep.Deploy{Name: filepath.Base(file), Source: src, DropChanged: *dropChanged, Shadow: *shadow, From: *from})
	var invalid *cep.ValidationError
	if errors.As(err, &invalid) {
		if err := localNames(invalid.Problems, file).WithLines(src).Print(stderr, true); err != nil {
			return err
		}
		return problemsError(file, invalid.Problems.Count())
	}
	if err != nil {
		msg := switchMessage(c, err)
		if strings.HasPrefix(msg, "deploy of version ") {
			// The job's refusal names the version: "deploy of F on S:
			// deploy of version V: ..." said it twice.
			return &userError{err: err, msg: fmt.Sprintf("%s on %s: %s", file, *server, msg)}
		}
		return &userError{err: err, msg: fmt.Sprintf("deploy of %s on %s: %s", file, *server, msg)}
	}
	// The version is deployed: a warning that cannot be written (stderr's
	// reader gone) must not make the exit status say it was not.
	_ = localNames(r.Warnings, file).WithLines(src).Print(stderr, true)
	printDeploy(stdout, "deployed", r, *dropChanged)
	return nil
}

// callMessage is the message of the error of a call of c: the server's
// (without the engine's package prefixes), or that no server answers.
func callMessage(c *control.Client, err error) string { return stripPrefixes(c.Message(err)) }

// switchMessage is callMessage for a deploy, a rollback or a promote: when
// the connection was lost during the call, or the call ended before the
// server answered (its 30 s, an interrupt: a deploy the job took goes on
// without it), whether the job switched is not known, and the message
// says how to find out.
func switchMessage(c *control.Client, err error) string {
	msg := callMessage(c, err)
	switch {
	case c.Lost(err):
		msg += "; whether the job switched is not known: once it runs again, cepheus rules list names the active version"
	case c.Unanswered(err):
		msg += "; whether the job switched is not known (a deploy it took goes on without the call): cepheus rules list names the active version once cepheus status says ready"
	}
	return msg
}

// readRulesetArg reads the ruleset fs's argument names: a .cep file, or a
// directory holding exactly one.
func readRulesetArg(fs *flagSet) (string, []byte, error) {
	files, err := rulesetFiles(fs.Args())
	if err != nil {
		return "", nil, err
	}
	if len(files) != 1 {
		return "", nil, fs.usagef("%s holds %d rulesets; name the file", fs.Arg(0), len(files))
	}
	src, err := os.ReadFile(files[0])
	if err != nil {
		return "", nil, err
	}
	return files[0], src, nil
}

// problemsError is the error (exit status 1) of a ruleset file the server
// found n problems in, once they are printed.
func problemsError(file string, n int) error {
	problems := plural(int64(n), "problem", "problems")
	return &userError{err: errors.New(problems), msg: file + ": " + problems}
}

// printDeploy prints what a deploy, a rollback or a promote (done) did.
func printDeploy(w io.Writer, done string, r *cep.DeployResult, dropChanged bool) {
	role := "active"
	if r.Shadow {
		role = "shadow"
	}
	if r.Unchanged {
		fmt.Fprintf(w, "ruleset %s version %.12s is the %s one already: nothing changed\n", r.Ruleset, r.Version, role)
		return
	}
	wm := "before the first watermark"
	if r.Watermark > event.MinTime {
		wm = "watermark " + r.Watermark.String()
	}
	// was is the version replaced: the active one's, or for a shadow
	// deploy the previous shadow, if any.
	was := fmt.Sprintf(" (was %.12s)", r.Previous)
	if r.Shadow {
		was = " as the shadow"
		if r.Previous != "" {
			was += fmt.Sprintf(" (replacing the shadow %.12s)", r.Previous)
		}
	}
	fmt.Fprintf(w, "%s ruleset %s version %.12s%s at checkpoint %d (%s) in %v\n", done, r.Ruleset, r.Version,
		was, r.Checkpoint, wm, r.Took)
	for _, l := range []struct {
		what  string
		rules []string
	}{{"kept", r.Kept}, {"changed", r.Changed}, {"added", r.Added}, {"removed", r.Removed}} {
		names := l.rules
		if l.what == "kept" {
			names = keptShown(names)
		}
		if len(names) == 0 {
			continue
		}
		fmt.Fprintf(w, "  %-8s %s", l.what, strings.Join(names, ", "))
		switch {
		case l.what != "changed" || r.Shadow:
		case dropChanged:
			// A drain and a drop read alike otherwise.
			fmt.Fprint(w, " (their old versions' partial matches dropped: -drop-changed)")
		default:
			fmt.Fprint(w, " (their old versions drain: they finish the matches begun before the switch)")
		}
		fmt.Fprintln(w)
	}
	if !r.Shadow && len(r.Kept)+len(r.Changed) == 0 && len(r.Removed) > 0 {
		// Another ruleset deployed by mistake reads as any deploy.
		fmt.Fprintf(w, "warning: no rule of the version replaced is kept: its %s and their state are gone (another ruleset deployed in its place?)\n",
			plural(int64(len(r.Removed)), "rule", "rules"))
	}
}

// maxKeptShown is the most kept rules a deploy's answer or log line
// names; it counts the others. The changed, added and removed ones are
// all named.
const maxKeptShown = 10

// keptShown is what a deploy's answer or log line says of the rules it
// kept: at most maxKeptShown names, then "and N more". What a deploy
// changed is the news; among hundreds of rules the kept ones would bury
// it.
func keptShown(kept []string) []string {
	if len(kept) <= maxKeptShown {
		return kept
	}
	return append(slices.Clip(kept[:maxKeptShown]), fmt.Sprintf("and %d more", len(kept)-maxKeptShown))
}

// listVersions prints the versions server keeps, one a line.
func listVersions(ctx context.Context, c *control.Client, server string, w io.Writer) error {
	vs, err := c.ListVersions(ctx)
	if err != nil {
		return &userError{err: err, msg: fmt.Sprintf("list of %s: %s", server, callMessage(c, err))}
	}
	if len(vs) == 0 {
		// It printed nothing, as if the command had not reached it.
		fmt.Fprintf(w, "%s: no versions: it runs no job yet (it restores its state, or, a standby of a Kafka group, reads no partition: cepheus status says which)\n", server)
	}
	for _, v := range vs {
		fmt.Fprintln(w, versionLine(v))
	}
	return nil
}

// versionLine is v as rules list prints it, in columns: the origin's is
// as wide as the longest origin, rules-topic (it was 9 wide, and a
// version deployed through a Kafka rules topic pushed its ruleset and
// rules out of their columns).
func versionLine(v cep.VersionInfo) string {
	return fmt.Sprintf("%.12s  %-8s  %s  %-11s  %s  %d rules", v.Version, v.State,
		v.Deployed.UTC().Format(time.RFC3339), v.Origin, v.Ruleset, len(v.Rules))
}

// localName is the name the server gave a problem's file (the base name
// the client sent) as the user gave it (path), so that an editor finds
// it; another name is left as it is.
func localName(name, path string) string {
	if name == filepath.Base(path) {
		return path
	}
	return name
}

// localNames returns ps with each file name the server gave (the base
// name sent) replaced by path as given (localName): a warning said
// abs.cep where an error said r/abs.cep.
func localNames(ps rules.ErrorList, path string) rules.ErrorList {
	for _, p := range ps {
		p.Pos.Filename = localName(p.Pos.Filename, path)
	}
	return ps
}
