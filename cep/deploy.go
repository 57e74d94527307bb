package cep

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/rules"
)

// Deploy is a new ruleset version for a running [Engine.Stream]
// ([StreamMonitor.Deploy]).
type Deploy struct {
	// Name is the file name its problems name ("ruleset.cep" when
	// empty); Source the ruleset file.
	Name   string
	Source []byte
	// DropChanged drops the partial matches of the rules whose content
	// changed at the switch; by default they drain: the old rule goes on
	// with the matches that began before the switch until its window
	// expires (docs/operations.md, "Hot-loading").
	DropChanged bool
	// Origin says where the version came from, for the list of versions
	// and the logs: "grpc", "rules-dir", "rollback" (default "api").
	// [OriginRulesDir] also says that the version is what the process's
	// rules source (the ruleset it was started with) holds now: a
	// restart given that content keeps what was deployed after it.
	Origin string
	// Shadow deploys the version as the shadow: it runs beside the active
	// one on the same events from the switch on, its alerts going to the
	// shadow output (StreamConfig.ShadowDir, KafkaInput.ShadowTopic),
	// never the main one; a shadow deployed earlier is replaced.
	// [StreamMonitor.Promote] makes it active.
	Shadow bool
	// From, when set, is the version that must be the active one when the
	// job takes the call: its content hash, or a prefix of it of at least
	// 6 hex digits (as `cepheus rules list` prints 12). Another active
	// version refuses the call (ErrNotActive) and nothing switches: two
	// rollbacks at once, or one sent again after an unanswered call, do
	// not toggle back.
	From string
}

// SwitchOptions are the options of a rollback or a promote: DropChanged
// and From as a [Deploy]'s.
type SwitchOptions struct {
	DropChanged bool
	From        string
}

// DeployResult is what a deploy did, once the job runs the new version.
type DeployResult struct {
	// Ruleset and Version are the new version's name and content hash
	// (hex); Previous the version it replaced.
	Ruleset, Version, Previous string
	// Checkpoint is the checkpoint at whose barrier the job switched, and
	// Watermark the watermark there: the events at or before it went
	// through the old version, the later ones through the new; a changed
	// rule's matches that begin at or before it are its old version's
	// (draining), the later ones the new version's.
	Checkpoint int64
	Watermark  event.Time
	// The rules, by name: kept (same content hash, their partial matches
	// kept), changed (draining or dropped), added (starting empty) and
	// removed (their state deleted).
	Kept, Changed, Added, Removed []string
	// Unchanged is set when the version was already the active one (the
	// shadow one, for a shadow deploy): nothing switched.
	Unchanged bool
	// Shadow says that the version was deployed as the shadow.
	Shadow bool
	// Took is the time from the call to the switch.
	Took time.Duration
	// Warnings are the deployed ruleset's (rules.Ruleset.Warnings): what
	// it says that is legal but surely not meant. None for a rollback or
	// a promote.
	Warnings rules.ErrorList
	// Unbound are the lookups of the version that no source of the
	// engine binds (WithLookups binds them at New): every event gets
	// their declared defaults. To bind one, start the engine again with
	// the version and a source for it.
	Unbound []string
}

// VersionState is the state of a ruleset version in a running engine.
type VersionState string

// The states of a version.
const (
	VersionActive VersionState = "active"
	VersionShadow VersionState = "shadow"
	// VersionPrevious is a version that was active before (a rollback's
	// target); a shadow that never was active is none.
	VersionPrevious VersionState = "previous"
)

// VersionInfo is one of the versions the engine keeps: the active one,
// the shadow one, and the recent ones that were active before it, newest
// first ([StreamMonitor.Versions]).
type VersionInfo struct {
	Ruleset, Version string
	State            VersionState
	// Deployed is when it last became active (a deploy of the active
	// version again changes nothing; for the shadow, when it was deployed
	// as the shadow); Origin where it came from ("startup",
	// "grpc", "rules-dir", "rollback", ...).
	Deployed time.Time
	Origin   string
	Rules    []string
}

// keptVersions is how many versions an engine lists: the active one and
// the previous ones (the newest sourcesKept of which a rollback may
// return to).
const keptVersions = 8

// ErrNoJob is the error of a deploy while no run goes on: before an
// Engine.Stream call has begun, or after it ended. (A deploy while the
// run's job restores, or between two of its jobs, waits for the next.)
var ErrNoJob = errors.New("cep: no job is running")

// ErrNoPrevious is the error of a rollback without a previous version.
var ErrNoPrevious = errors.New("cep: no previous version to roll back to")

// ErrNoShadow is the error of a promote without a shadow version.
var ErrNoShadow = errors.New("cep: no shadow version to promote")

// ErrShadowActive is the error of a shadow deploy of the active version:
// a shadow is another version, compared with the active one.
var ErrShadowActive = errors.New("cep: the active version cannot be the shadow: a shadow runs another version beside it")

// ErrNoShadowOutput is the error of a shadow deploy into a job that has
// no shadow output (StreamConfig.ShadowDir, KafkaInput.ShadowTopic).
var ErrNoShadowOutput = errors.New("cep: the job has no shadow output: start it with one (cepheus serve -shadow-alerts DIR, or -shadow-topic T in Kafka mode)")

// ErrSwitching is the error of a deploy the job takes while another one's
// switch waits for its checkpoint: it may be sent again at once.
var ErrSwitching = errors.New("cep: another deploy is switching: try again")

// ErrNotActive is what the error of a deploy, a rollback or a promote
// whose From is not the active version when the job takes it is
// (errors.Is): nothing switched.
var ErrNotActive = errors.New("cep: the version the call names is not the active one")

// ErrStandby is the error of a deploy, a rollback or a promote sent to an
// instance that reads no partition of its Kafka group (a standby): it runs
// no job that could take it. The call waited for one until its deadline
// and was told that whether the job switched was not known (a rollback:
// that there was no previous version).
var ErrStandby = errors.New("cep: this instance reads no partition of its group (a standby): it runs no job to take the call; send it to an instance that does (cepheus status says ready), which with a rules topic deploys it for the whole group")

// ErrSuperseded is what the error of a deploy, a rollback or a promote
// is (errors.Is) whose version went into the Kafka rules topic but another
// call's version, written after it, took its place before the job
// switched to it: nothing switched to it (the group runs the newer one).
var ErrSuperseded = errors.New("cep: another version took its place")

// ErrBadFrom is what the error of a Deploy.From (SwitchOptions.From)
// that is not a version's hash or a prefix of it is (errors.Is).
var ErrBadFrom = errors.New("cep: not a version")

// minFromDigits is the shortest prefix of a version's hash a From may
// be: shorter ones would name several versions too easily.
const minFromDigits = 6

// checkFrom checks that from is empty or a prefix of a version's hash
// (hex, minFromDigits digits at least; upper-case is read as lower-case,
// as the hashes are printed).
func checkFrom(from string) error {
	if from == "" {
		return nil
	}
	if len(from) < minFromDigits || len(from) > 64 || strings.Trim(strings.ToLower(from), "0123456789abcdef") != "" {
		return fmt.Errorf("%w: %q: want a version's hash or a prefix of it of %d to 64 hex digits, as cepheus rules list prints", ErrBadFrom, from, minFromDigits)
	}
	return nil
}

// ErrRefused is what the error of a deploy whose version compiles but
// that the running job cannot take is (errors.Is): another event time,
// other velocity aggregates, in Kafka mode other repartitioning. The job
// keeps its version; a restart with the new rules file (or a new -state)
// is the way.
var ErrRefused = errors.New("cep: the running job cannot take the version")

// refused is an error of the job's refusal: its message, and
// errors.Is(err, ErrRefused).
type refused struct{ error }

func (refused) Is(target error) bool { return target == ErrRefused }

// ValidationError is the error of a deploy whose ruleset does not compile:
// Problems are the same positioned errors as cepheus check prints.
type ValidationError struct {
	Problems rules.ErrorList
	Err      error // when the problems are not positioned
}

func (e *ValidationError) Error() string {
	if e.Err != nil {
		return e.Err.Error()
	}
	return e.Problems.Error()
}

func (e *ValidationError) Unwrap() error {
	if e.Err != nil {
		return e.Err
	}
	return e.Problems
}

// validate compiles d's source: a *ValidationError when it does not.
func (d *Deploy) validate() (*Ruleset, error) {
	name := d.Name
	if name == "" {
		name = "ruleset.cep"
	}
	rs, err := rules.Load(name, d.Source)
	if err != nil {
		var list rules.ErrorList
		if errors.As(err, &list) {
			return nil, &ValidationError{Problems: list}
		}
		return nil, &ValidationError{Err: fmt.Errorf("%s: %w", name, err)}
	}
	return rs, nil
}

// Deploy validates d and, when it compiles, switches the running job to
// it at its next checkpoint barrier (asked for at once), and returns once
// the job runs it. A ruleset that does not compile returns a
// *ValidationError and changes nothing. Without a run going on it returns
// ErrNoJob; while the run restores or is between two jobs, it waits
// (for ctx). A version the job cannot take returns an error that is
// ErrRefused, one that meets another deploy's switch ErrSwitching.
func (m *StreamMonitor) Deploy(ctx context.Context, d Deploy) (*DeployResult, error) {
	return m.deploy(ctx, d, "")
}

// Rollback deploys the most recent previous version (Origin "rollback"):
// the newest that was active before, never a shadow that was not. The
// job takes that version from its plan when it takes the rollback, not
// from the plan of the call's time: a deploy that switches meanwhile (two
// pipelines at once, or a rollback that waits for the next job) makes its
// version the one rolled back from.
// With o.From, the job refuses it (ErrNotActive) unless that version is
// the active one when it takes it.
func (m *StreamMonitor) Rollback(ctx context.Context, o SwitchOptions) (*DeployResult, error) {
	if err := checkFrom(o.From); err != nil {
		return nil, err
	}
	if m.standby() {
		return nil, ErrStandby
	}
	if v, ok := m.version(VersionPrevious); !ok || v.Source == "" {
		return nil, ErrNoPrevious
	}
	return m.deploy(ctx, Deploy{DropChanged: o.DropChanged, From: o.From, Origin: "rollback"}, VersionPrevious)
}

// Promote makes the shadow version the active one (Origin "promote"): at
// the switch it is deployed as a deploy of it would be, and the shadow
// goes. For the main output the outcome is that of a deploy of the shadow
// version at the switch. As a rollback's, the version is the shadow the
// job runs when it takes the promote, not a shadow replaced meanwhile.
// With o.From, as a rollback's.
func (m *StreamMonitor) Promote(ctx context.Context, o SwitchOptions) (*DeployResult, error) {
	if err := checkFrom(o.From); err != nil {
		return nil, err
	}
	if m.standby() {
		return nil, ErrStandby
	}
	if _, ok := m.version(VersionShadow); !ok {
		return nil, ErrNoShadow
	}
	return m.deploy(ctx, Deploy{DropChanged: o.DropChanged, From: o.From, Origin: "promote"}, VersionShadow)
}

// version returns the newest version in state st that the running plan
// keeps.
func (m *StreamMonitor) version(st VersionState) (planVersion, bool) {
	m.mu.Lock()
	p := m.plan
	m.mu.Unlock()
	if p == nil {
		return planVersion{}, false
	}
	for i, v := range p.Versions {
		if p.stateOf(i) == st {
			return v, true
		}
	}
	return planVersion{}, false
}

// Versions returns the versions the engine keeps: the active one, the
// shadow one if any, then the previous ones, newest first (none before a
// job has run).
func (m *StreamMonitor) Versions() []VersionInfo {
	m.mu.Lock()
	p := m.plan
	m.mu.Unlock()
	if p == nil {
		return nil
	}
	// The plan of an older release may hold the shadow after previous
	// versions: it is listed second all the same.
	order := []int{0}
	if s := p.shadowAt(); s > 0 {
		order = append(order, s)
	}
	for i := 1; i < len(p.Versions); i++ {
		if p.stateOf(i) == VersionPrevious {
			order = append(order, i)
		}
	}
	out := make([]VersionInfo, 0, len(order))
	for _, i := range order {
		v := p.Versions[i]
		out = append(out, VersionInfo{Ruleset: v.Ruleset, Version: v.Version, State: p.stateOf(i), Deployed: v.Deployed, Origin: v.Origin, Rules: slices.Clone(v.Rules)})
	}
	return out
}

// OriginRulesDir is the origin of the versions a watcher of the rules
// source deploys (serve -rules-dir).
const OriginRulesDir = "rules-dir"

// deployReq is a deploy on its way to the job's coordinator.
type deployReq struct {
	d     Deploy
	start time.Time
	done  chan deployDone // buffered: the job never waits for the caller
	// topic is the rules topic offset the deploy comes from (-1: a
	// call's), and point the group's switch point its record names.
	topic int64
	point event.Time
	// target is the state of the version a rollback (VersionPrevious) or
	// a promote (VersionShadow) deploys, found in the plan of the job that
	// takes it (resolveTarget); "" for a deploy of d.Source.
	target VersionState
}

type deployDone struct {
	res *DeployResult
	err error
	// published: the version went into the rules topic (the switch
	// follows when the job reads it back); version is its hash.
	published bool
	// rules and offset: the rules topic and the offset of the record.
	rules   *rulesTopic
	offset  int64
	version string
}

func (m *StreamMonitor) deploy(ctx context.Context, d Deploy, target VersionState) (*DeployResult, error) {
	// A rollback's or a promote's source is the job's to find; it
	// compiled when it was deployed before.
	var warnings rules.ErrorList
	if err := checkFrom(d.From); err != nil {
		return nil, err
	}
	d.From = strings.ToLower(d.From)
	if target == "" {
		rs, err := d.validate()
		if err != nil {
			return nil, err
		}
		warnings = rs.Warnings
	}
	if d.Origin == "" {
		d.Origin = "api"
	}
	if !m.runs() {
		return nil, ErrNoJob
	}
	if m.standby() {
		return nil, ErrStandby
	}
	req := &deployReq{d: d, start: time.Now(), done: make(chan deployDone, 1), topic: -1, target: target}
	// A job takes it at its next tick: the running one, or, between two
	// jobs of the run (a switch, a rebalance, a restore), the next one. A
	// run that ends meanwhile (the process stopping) never will.
	alive := time.NewTicker(50 * time.Millisecond)
	defer alive.Stop()
send:
	for {
		select {
		case m.deploys <- req:
			break send
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-alive.C:
			if !m.runs() {
				return nil, ErrNoJob
			}
			if m.standby() {
				return nil, ErrStandby // between two jobs, it got no partition
			}
		}
	}
	var r deployDone
	select {
	case r = <-req.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if !r.published {
		if r.res != nil {
			r.res.Warnings = warnings
		}
		return r.res, r.err
	}
	// In the rules topic: this instance deploys it when it reads it back,
	// as every instance of the group does.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	key := rulesActive
	if d.Shadow {
		key = rulesShadow
	}
	for {
		if res := m.switchOf(r.version, d.Shadow, req.start); res != nil {
			res.Took = time.Since(req.start)
			res.Warnings = warnings
			return res, nil
		}
		if err := r.rules.passedOver(r.offset, key, m.rulesNext()); err != nil {
			if res := m.switchOf(r.version, d.Shadow, req.start); res != nil {
				continue // switched meanwhile
			}
			return nil, err
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// takeDeploy returns the deploy waiting, if any.
func (m *StreamMonitor) takeDeploy() *deployReq {
	select {
	case r := <-m.deploys:
		return r
	default:
		return nil
	}
}

// pendingSwitch is a switch of a job's rules: asked for (job.next), its
// checkpoint taken (id, res), then restored by the next job
// (job.switched), which replies.
type pendingSwitch struct {
	req     *deployReq // nil for the job's own (draining rules expired)
	rs      *Ruleset   // the new version, compiled over the job's layout
	res     *DeployResult
	id      int64
	start   time.Time
	replied bool
	// dropShadow: the switch drops the shadow version (the rules topic's
	// shadow ended), nothing else changes.
	dropShadow bool
	// source: the version is the content of the process's rules source
	// (-rules-dir's watcher deployed it): a restart with that content
	// keeps what is deployed after it (job.taken).
	source bool
}

func (sw *pendingSwitch) reply(res *DeployResult, err error) {
	if sw.replied {
		return
	}
	sw.replied = true
	if sw.req != nil {
		sw.req.done <- deployDone{res: res, err: err}
	}
}

// askSwitch starts the switch of req (nil: the job's own, to let go of
// the draining rules whose window has passed): it compiles the new
// version over the job's layout and checks that an engine of it builds,
// then stops the job at its next turn, with a checkpoint whose metadata
// names the next plan (barrier).
func (j *job) askSwitch(req *deployReq) {
	sw := &pendingSwitch{req: req, start: time.Now()}
	cur := j.e.plan
	if req != nil && inputOf(&j.cfg) == "stdin" {
		// A switch starts a job from the switch's checkpoint, reading the
		// input again from its positions: standard input cannot be.
		sw.reply(nil, refused{errors.New("cep: deploy: the run reads standard input, which a switch cannot read again from its checkpoint (a switch starts the job again from there): deploy to a run over a file (-events FILE -follow) or a topic, or restart this one with the new rules")})
		return
	}
	if req == nil {
		sw.rs = j.e.cfg.ruleset
	} else {
		if rt := j.cfg.rules; rt != nil && req.topic < 0 {
			// Before any check against the active version: one pending
			// in the topic is about to replace it.
			if err := j.rulesPending(rt); err != nil {
				sw.reply(nil, err)
				return
			}
		}
		if from, active := req.d.From, cur.Versions[0].Version; from != "" && !strings.HasPrefix(active, from) {
			sw.reply(nil, fmt.Errorf("%w: version %.12s is active, not %s: nothing switched (cepheus rules list shows the versions)", ErrNotActive, active, from))
			return
		}
		if err := resolveTarget(req, cur); err != nil {
			sw.reply(nil, err)
			return
		}
		layout, err := event.NewSchema(cur.Layout...)
		if err == nil {
			sw.rs, err = rules.LoadLayout(req.d.Name, req.d.Source, layout)
		}
		if err != nil {
			sw.reply(nil, &ValidationError{Err: err})
			return
		}
		fromSource := req.d.Origin == OriginRulesDir || req.topic >= 0 && sw.rs.Hash == j.dirAsked
		if req.d.Shadow && sw.rs.Hash == cur.Versions[0].Version {
			sw.reply(nil, fmt.Errorf("%w (version %.12s is the active one)", ErrShadowActive, sw.rs.Hash))
			return
		}
		if same := cur.Versions[0].Version; req.d.Shadow && sw.rs.Hash == cur.Shadow || !req.d.Shadow && sw.rs.Hash == same {
			if fromSource && !req.d.Shadow {
				j.taken = sw.rs // the source holds the active version
			}
			sw.reply(&DeployResult{Ruleset: sw.rs.Name, Version: sw.rs.Hash, Previous: sw.rs.Hash, Unchanged: true, Shadow: req.d.Shadow, Checkpoint: j.stats.LastCheckpoint, Took: time.Since(req.start)}, nil)
			return
		}
		sw.start = req.start
		sw.source = fromSource && !req.d.Shadow
	}
	if req != nil && req.d.Shadow && j.cfg.ShadowDir == "" && (j.kafka == nil || j.kafka.in.ShadowTopic == "") {
		sw.reply(nil, ErrNoShadowOutput)
		return
	}
	if err := sameEventTime(sw.rs, j.e.cfg.ruleset); err != nil {
		sw.reply(nil, refused{fmt.Errorf("cep: deploy of version %.12s: %w", sw.rs.Hash, err)})
		return
	}
	q, _ := j.nextPlan(sw)
	ne, err := j.base.derive(q)
	if err == nil {
		err = j.sameRepartitions(ne)
	}
	if err == nil && aggregateSignature(ne) != aggregateSignature(j.e) {
		err = errors.New("a deploy cannot change the velocity aggregates yet (their windows are state of the running job): restart with the new rules file")
	}
	if err == nil && j.cfg.Kafka != nil && len(ne.Aggregates()) > 0 {
		err = ne.checkKafkaAggregates()
	}
	if err != nil {
		sw.reply(nil, refused{fmt.Errorf("cep: deploy of version %.12s: %w", sw.rs.Hash, err)})
		return
	}
	if rt := j.cfg.rules; rt != nil && req != nil && req.topic < 0 {
		j.publishRules(rt, req, sw, cur)
		return
	}
	j.next = sw
	j.stopAsked = true
}

// publishRules writes a call's deploy into the rules topic, for every
// instance. askSwitch read the topic first (rulesPending: a record this
// job has not taken yet makes the call ErrSwitching; sent again, it is
// checked against that version once the job runs it), and a
// rollback, a promote or a deploy with a From names the version it was
// checked against (rulesEntry.From), so that, written right after
// another's record, it is passed over where it is read.
func (j *job) publishRules(rt *rulesTopic, req *deployReq, sw *pendingSwitch, cur *plan) {
	from := ""
	if req.target != "" || req.d.From != "" {
		from = cur.Versions[0].Version
	}
	at := rulesSwitchPoint(j.stats.Watermark)
	off, err := rt.publish(j.sctx, req.d, at, !req.d.Shadow && sw.rs.Hash == cur.Shadow, from)
	if err == nil && sw.source {
		j.dirAsked = sw.rs.Hash // its switch comes back from the topic
	}
	req.done <- deployDone{published: err == nil, err: err, version: sw.rs.Hash, rules: rt, offset: off}
}

// rulesPending reads the rules topic for a call's deploy, before the job
// checks it against its active version (askSwitch): a record another
// instance (or this one) wrote that the job has not taken yet makes the
// call ErrSwitching, to send again. Taken, a deploy of the version
// active until that record switched answered "unchanged" and a From of
// the version it makes active was refused: the call was lost either way.
func (j *job) rulesPending(rt *rulesTopic) error {
	if err := rt.poll(j.sctx); err != nil {
		return err
	}
	if _, _, ok := j.nextRules(rt); ok {
		return ErrSwitching
	}
	return nil
}

// resolveTarget sets the source of req, a rollback or a promote, to the
// version of plan p it deploys: the newest previous version, the shadow.
// Found at the call, it was that of the plan then, and a deploy switched
// between the call and the job's taking it (two pipelines at once, or a
// call that waited for the next job) was lost: the rollback went back to
// the version before that deploy's previous one, the promote made active
// a shadow already replaced.
func resolveTarget(req *deployReq, p *plan) error {
	if req.target == "" {
		return nil
	}
	for i, v := range p.Versions {
		if p.stateOf(i) != req.target {
			continue
		}
		if v.Source == "" {
			break
		}
		req.d.Name, req.d.Source = fmt.Sprintf("version %.12s", v.Version), []byte(v.Source)
		return nil
	}
	if req.target == VersionShadow {
		return ErrNoShadow
	}
	return ErrNoPrevious
}

// takeRules starts the switch of the next record of the rules topic, if
// any is newer than what the job's plan deployed.
func (j *job) takeRules() {
	rt := j.cfg.rules
	if rt == nil {
		return
	}
	key, e, ok := j.nextRules(rt)
	if !ok {
		return
	}
	held := j.holdForRules(false)
	if e.gone {
		// A tombstone names no switch point: the shadow goes at once,
		// while the watermark holds for the version after it, if any.
		j.rulesSkip = e.Offset + 1
		j.endShadow(rt, e)
		return
	}
	if held {
		if time.Since(j.holdSince) < rulesHoldMax {
			return
		}
		j.logf("warning: rules topic %s: the watermark has not reached the group's switch point %v in %v: switching at %s", rt.k.RulesTopic, e.Watermark, rulesHoldMax, watermarkText(j.stats.Watermark))
	}
	j.rulesSkip = e.Offset + 1 // one try: a refused record is logged once
	req := &deployReq{
		d:     Deploy{Name: e.Name, Source: []byte(e.Source), DropChanged: e.DropChanged, Origin: "rules-topic", Shadow: key == rulesShadow},
		start: time.Now(), done: make(chan deployDone, 1), topic: e.Offset, point: e.Watermark,
	}
	j.askSwitch(req) // the poll compiled it
	if j.next == nil {
		j.holding = false // no switch: the watermark goes on
	}
	select {
	case r := <-req.done: // refused or unchanged: no switch
		if r.err != nil {
			j.logf("warning: rules topic %s: the %s version at offset %d is not deployed: %v", rt.k.RulesTopic, key, e.Offset, r.err)
		}
	default:
	}
}

// nextRules returns the next record of the rules topic the job has to
// take: a tombstone of the shadow key is passed over while the job runs
// no shadow (a promote left none), so that it never stands in for the
// version after it, whose switch point the job holds at.
func (j *job) nextRules(rt *rulesTopic) (key string, e rulesEntry, ok bool) {
	for {
		key, e, ok = rt.pending(max(j.e.plan.RulesNext, j.rulesSkip))
		if !ok || !e.gone || j.e.plan.Shadow != "" {
			return key, e, ok
		}
		j.rulesSkip = e.Offset + 1
	}
}

// endShadow takes the rules topic's tombstone of the shadow key (a
// promote's) in a job that runs a shadow still (it took the promote's
// active version while it ran an older shadow): it drops it at a switch.
// One that runs none, as the promote left the others, passes it over
// (nextRules).
func (j *job) endShadow(rt *rulesTopic, e rulesEntry) {
	req := &deployReq{d: Deploy{Origin: "rules-topic", Shadow: true}, start: time.Now(), done: make(chan deployDone, 1), topic: e.Offset, point: e.Watermark}
	j.logf("rules topic %s: the shadow key ended at offset %d (a tombstone, as a promote writes): dropping shadow version %.12s", rt.k.RulesTopic, e.Offset, j.e.plan.Shadow)
	j.next = &pendingSwitch{req: req, rs: j.e.cfg.ruleset, start: req.start, dropShadow: true}
	j.stopAsked = true
}

// holdForRules reports whether the next record of the rules topic names
// a switch point ahead of the job's watermark (at: or at it, for a job
// that starts, which switches at its first tick); the watermark then
// stops there (streamSource.forward) and the switch waits for it, for a
// while (rulesHoldMax, from the first call for that point). A tombstone
// of the shadow key that the job takes first (it runs a shadow) names no
// point: the record after it does, which the watermark must not pass
// while the job drops its shadow.
func (j *job) holdForRules(at bool) bool {
	rt := j.cfg.rules
	if rt == nil {
		return false
	}
	_, e, ok := j.nextRules(rt)
	if ok && e.gone {
		_, e, ok = rt.pending(e.Offset + 1)
	}
	w := j.stats.Watermark
	if !ok || w == event.MaxTime || e.Watermark < w || e.Watermark == w && (!at || w == event.MinTime) {
		return false
	}
	if !j.holding || j.holdAt != e.Watermark {
		j.holding, j.holdAt, j.holdSince = true, e.Watermark, time.Now()
	}
	return true
}

// sameEventTime checks that version rs reads event time from the field
// the job's version cur does: the job's watermark, its timers and the
// state's timestamps are in that field's time.
func sameEventTime(rs, cur *Ruleset) error {
	if rs.TimeField == cur.TimeField {
		return nil
	}
	return fmt.Errorf("its event time is field %s, the job's is %s: a job's watermark and state are in its event time, which no deploy changes; run the new rules on a new -state", rs.TimeField, cur.TimeField)
}

// sameRepartitions checks, for a transactional Kafka job, that engine e
// repartitions by the same key fields as the job's: the repartition
// topics are set up (and restored) before the job knows which version it
// runs, from the rules it was started with.
func (j *job) sameRepartitions(e *Engine) error {
	ko := j.kafka
	if ko == nil {
		return nil
	}
	_, reps := e.kafkaSpecs(ko.in, ko.parts)
	var want, got []string
	for _, r := range ko.reps {
		want = append(want, r.topic)
	}
	for _, r := range reps {
		got = append(got, r.topic)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(want, got) {
		return fmt.Errorf("in Kafka mode a version must repartition by the key fields the job does (topics %v), not %v: restart with the new rules file to change them", want, got)
	}
	return nil
}

// nextPlan is the plan of switch sw at the job's watermark now.
func (j *job) nextPlan(sw *pendingSwitch) (*plan, *DeployResult) {
	drop, origin := false, "self"
	if sw.req != nil {
		drop, origin = sw.req.d.DropChanged, sw.req.d.Origin
	}
	var q *plan
	var res *DeployResult
	if sw.dropShadow {
		q = j.e.plan.withoutShadow()
		res = &DeployResult{Ruleset: sw.rs.Name, Version: j.e.plan.Shadow, Previous: j.e.plan.Shadow, Shadow: true, Watermark: j.stats.Watermark}
	} else if sw.req != nil && sw.req.d.Shadow {
		q, res = j.e.planShadow(sw.rs, j.stats.Watermark, origin, time.Now())
	} else {
		q, res = j.e.planDeploy(sw.rs, drop, j.stats.Watermark, origin, time.Now())
	}
	if sw.req == nil {
		q.Versions[0] = j.e.plan.Versions[0] // the same version, as deployed then
	}
	q.RulesNext = j.e.plan.RulesNext
	q.Startup = j.taken.Hash
	if sw.source {
		q.Startup = sw.rs.Hash
	}
	if sw.req != nil && sw.req.topic >= 0 {
		q.RulesNext = max(q.RulesNext, sw.req.topic+1)
	}
	return q, res
}

// choosePlan sets the engine the job runs, from the checkpoint it
// restores: a fresh job runs its base engine; a restored one the plan of
// its checkpoint (its Next at a switch), and when the process was started
// with another ruleset than the checkpoint's process, that ruleset is
// deployed over it now (as a deploy at the checkpoint's barrier).
func (j *job) choosePlan() error {
	m := j.meta
	if m == nil || m.Plan == nil {
		e := *j.base
		e.plan = j.base.ownPlan(time.Now())
		j.e = &e
		return nil
	}
	stateE, err := j.base.derive(m.Plan)
	if err != nil {
		return fmt.Errorf("%w: checkpoint %d: %w", ErrRestore, j.restored, err)
	}
	runE := stateE
	if m.Next != nil {
		if runE, err = j.base.derive(m.Next); err != nil {
			return fmt.Errorf("%w: checkpoint %d: the version it switches to: %w", ErrRestore, j.restored, err)
		}
	}
	startup := j.taken
	if runE.plan.Startup != startup.Hash && runE.plan.Versions[0].Version != startup.Hash {
		layout, err := event.NewSchema(runE.plan.Layout...)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrRestore, err)
		}
		rs, err := rules.LoadLayout(startup.Name, []byte(startup.Source), layout)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrRestore, err)
		}
		if err := sameEventTime(rs, runE.cfg.ruleset); err != nil {
			return fmt.Errorf("%w: checkpoint %d runs version %.12s, and the rules given (version %.12s) cannot be deployed over it: %w",
				ErrRestore, j.restored, runE.plan.Versions[0].Version, rs.Hash, err)
		}
		q, res := runE.planDeploy(rs, false, m.Stats.Watermark, "startup", time.Now())
		q.Startup = startup.Hash
		next, err := j.base.derive(q)
		if err == nil && j.sameRepartitions(next) != nil {
			// The changed rules' old versions would need repartitions of
			// their own: they go at once.
			q, res = runE.planDeploy(rs, true, m.Stats.Watermark, "startup", time.Now())
			q.Startup = startup.Hash
			next, err = j.base.derive(q)
		}
		if err != nil {
			return fmt.Errorf("%w: %w", ErrRestore, err)
		}
		runE = next
		// The kept rules counted, not named: among hundreds they would
		// bury what changed.
		j.logf("the rules given (%s version %.12s) are not those of checkpoint %d (version %.12s): deploying them at the restore (%d kept, changed %v, added %v, removed %v)",
			rs.Name, rs.Hash, j.restored, res.Previous, len(res.Kept), res.Changed, res.Added, res.Removed)
	} else if runE.plan.Startup != startup.Hash {
		p := *runE.plan
		p.Startup = startup.Hash
		runE.plan = &p
	}
	if sh := runE.plan.Shadow; sh != "" && j.cfg.ShadowDir == "" && (j.kafka == nil || j.kafka.in.ShadowTopic == "") {
		// No shadow output: the shadow goes (the main output does not
		// depend on it), and its entry too unless it was active before.
		if runE, err = j.base.derive(runE.plan.withoutShadow()); err != nil {
			return fmt.Errorf("%w: %w", ErrRestore, err)
		}
		j.logf("warning: checkpoint %d runs version %.12s as the shadow, and this run has no shadow output (-shadow-alerts, -shadow-topic): the shadow is dropped", j.restored, sh)
	}
	if err := j.sameRepartitions(runE); err != nil {
		return fmt.Errorf("%w: checkpoint %d runs version %.12s: %w", ErrRestore, j.restored, runE.plan.Versions[0].Version, err)
	}
	j.e = runE
	j.took = []*Engine{stateE}
	if !runE.sameRules(stateE) {
		j.prev = stateE
	}
	if ko := j.kafka; ko != nil && ko.clPlans != nil {
		// The changelog's stores: each from the engine of its own
		// checkpoint (instances may have switched at other times).
		engines := map[*plan]*Engine{m.Plan: stateE}
		j.prevs = make([]*Engine, len(ko.clPlans))
		for i, p := range ko.clPlans {
			e, ok := engines[p]
			if !ok {
				if p == nil {
					e = j.base
				} else if e, err = j.base.derive(p); err != nil {
					return fmt.Errorf("%w: %w", ErrRestore, err)
				}
				engines[p] = e
				j.took = append(j.took, e)
			}
			if !runE.sameRules(e) {
				j.prevs[i], j.prev = e, e
			}
		}
		if j.prev == nil {
			j.prevs = nil
		}
	}
	return nil
}

// partEngines are the engines that took the n stores a job restores by
// parts: nil when all took them with the job's own rules.
func (j *job) partEngines(n int) []*Engine {
	if j.prevs != nil {
		out := make([]*Engine, len(j.prevs))
		for i, e := range j.prevs {
			if e != nil && !e.sameRules(j.e) {
				out[i] = e
			}
		}
		return out
	}
	if j.prev == nil {
		return nil
	}
	out := make([]*Engine, n)
	for i := range out {
		out[i] = j.prev
	}
	return out
}

// watermarkText is watermark w in a message: its time, or that there is
// none yet.
func watermarkText(w event.Time) string {
	if w <= event.MinTime {
		return "no watermark yet"
	}
	return w.String()
}

// switchPoint says where a switch happened, for the log: at watermark w,
// and for a version of the rules topic, whether that is the group's
// switch point (docs/operations.md, "In Kafka mode"), so that the logs of
// the group's instances show where each one switched.
func switchPoint(req *deployReq, w event.Time) string {
	s := "watermark " + watermarkText(w)
	switch {
	case req == nil || req.topic < 0:
		return s
	case w == req.point || req.point <= event.MinTime:
		return s + ", the group's switch point"
	case w > req.point:
		return fmt.Sprintf("%s, past the group's switch point %v: switched where it was", s, req.point)
	default:
		return fmt.Sprintf("%s, short of the group's switch point %v: its input did not get there in %v", s, req.point, rulesHoldMax)
	}
}
