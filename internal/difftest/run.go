package difftest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cepheus-cep/cepheus/internal/conformance"
)

// Options configure a differential run.
type Options struct {
	// N is the number of cases to generate; Seed the seed of the run.
	N    int
	Seed uint64
	// Profile names the generator (see [Profiles]); empty means
	// "narrow".
	Profile string
	// Indices, when set, are the only case numbers generated (N is then
	// ignored): to rerun cases of a seed by number.
	Indices []int
	// Jar is the Flink runner's jar (see [FindJar]).
	Jar string
	// Out is the directory of the minimal reproducing cases, one
	// <case id>.json per unexplained disagreement. Created when needed.
	Out string
	// Keep, when set, is a directory to write the agreed cases to, with
	// Flink's results: a regression corpus ([WriteCorpus]).
	Keep string
	// KeepExplained, when set, is a directory to write the explained
	// disagreements to, with Flink's results on them and on their
	// counterfactuals ([WriteExplained]), at most KeepPerExplanation
	// (default 12) per explanation.
	KeepExplained      string
	KeepPerExplanation int
	// Work is a scratch directory for case and results files; a temporary
	// directory (removed afterwards) when empty.
	Work string
	// Cases, when set, are run instead of N generated cases (for example
	// minimal cases written by an earlier run).
	Cases []conformance.Input
	// NoShrink writes the unexplained disagreements as they are.
	NoShrink bool
	// Worker, when set, is an executable that serves as a Cepheus worker
	// ([CepheusWorker], [MaybeServeWorker]): Cepheus then runs in child
	// processes, and a case that crashes it is reported instead of ending
	// the run. Empty runs Cepheus in this process.
	Worker string
	// Progress receives progress lines; nil discards them.
	Progress io.Writer
	// CaseTimeout bounds one case on either engine (default 10s).
	CaseTimeout time.Duration
	// ShrinkRounds bounds the delta-debugging rounds (default 60); each
	// round runs Flink once on the candidates of every disagreement.
	ShrinkRounds int
	// MaxShrink bounds the number of disagreements shrunk (default 8): one
	// per kind (see kindOf) first, in case id order. The others are written
	// as generated, their notes naming the shrunk case of their kind.
	MaxShrink int
}

// Profiles are the case generators by name: "narrow" ([Generate]: small
// cases over the whole feature space) and "wide" ([GenerateWide]: what
// users run, long inputs over many keys and several rules).
var Profiles = map[string]func(seed uint64, i int) conformance.Input{
	"narrow": Generate,
	"wide":   GenerateWide,
}

// Summary is the outcome of a run.
type Summary struct {
	// Profile is the generator's name ("" when the cases were given).
	Profile                        string
	Agreed, Explained, Unexplained int
	// Counterfactuals is the number of counterfactual cases run through
	// Flink to check explanations.
	Counterfactuals int
	// MaxEvents, MaxKeys and MaxRules are the largest number of events,
	// of keys and of rules of a case run (each over all cases).
	MaxEvents, MaxKeys, MaxRules int
	// ByExplanation counts the explained disagreements by explanation id.
	ByExplanation map[string]int
	// BothFailed counts the agreed cases where both engines reported an
	// error (a pattern both reject, a throw-on-miss skip that both throw).
	BothFailed int
	// SlowCepheus are the ids of the cases Cepheus did not finish within
	// CaseTimeout beside the Flink JVM and finished when run again alone
	// with a longer limit (see rerunSlow): compared on those results, in
	// case order. One it does not finish alone either is unexplained.
	SlowCepheus []string
	// Findings are the unexplained disagreements, each shrunk to a minimal
	// case, in case id order.
	Findings []Finding
}

// Line is the summary line: "diff-flink: A agreed, E explained, U
// unexplained (profile P, max E events, K keys, R rules)", the maxima
// taken over all cases, each on its own, and ", S slow" after U when
// Cepheus finished S cases only when run again alone (SlowCepheus): a
// slowdown of the engine shows in the line a campaign ends with.
func (s *Summary) Line() string {
	profile := s.Profile
	if profile == "" {
		profile = "given cases"
	}
	slow := ""
	if len(s.SlowCepheus) > 0 {
		slow = fmt.Sprintf(", %d slow", len(s.SlowCepheus))
	}
	return fmt.Sprintf("diff-flink: %d agreed, %d explained, %d unexplained%s (profile %s, max %d events, %d keys, %d rules)",
		s.Agreed, s.Explained, s.Unexplained, slow, profile, s.MaxEvents, s.MaxKeys, s.MaxRules)
}

// measure records the size of in in the maxima of s.
func (s *Summary) measure(in *conformance.Input) {
	keys := map[int64]bool{}
	for _, e := range in.Events {
		keys[e.ID] = true
	}
	if in.Driver == conformance.DriverNFA {
		keys = map[int64]bool{0: true} // one NFA, no keys
	}
	s.MaxEvents = max(s.MaxEvents, len(in.Events))
	s.MaxKeys = max(s.MaxKeys, len(keys))
	s.MaxRules = max(s.MaxRules, max(1, len(in.Rules)))
}

// Finding is one unexplained disagreement.
type Finding struct {
	// Original is the generated case; Minimal the shrunk case, which still
	// disagrees in the same aspect.
	Original, Minimal conformance.Input
	// Diffs are the differences of the original case; MinimalDiffs those of
	// the minimal one.
	Diffs, MinimalDiffs []Diff
	// Flink is Flink's result on the minimal case; Cepheus Cepheus's.
	Flink, Cepheus *conformance.Result
	// Path is the minimal case file written.
	Path string
	// Shrunk is set when Minimal went through shrinking.
	Shrunk bool
	// SameKindAs names the finding of the same kind that was shrunk when
	// this one was not (Options.MaxShrink).
	SameKindAs string
}

// Run generates opt.N cases from opt.Seed, runs them through Flink and
// Cepheus, compares the results, shrinks every unexplained disagreement to
// a minimal case written under opt.Out, and returns the counts.
func Run(ctx context.Context, opt Options) (*Summary, error) {
	d, err := newDriver(opt)
	if err != nil {
		return nil, err
	}
	defer d.cleanup()

	start := time.Now()
	inputs := opt.Cases
	if inputs == nil && opt.N < 1 && len(opt.Indices) == 0 {
		return nil, fmt.Errorf("difftest: no cases to run")
	}
	profile := ""
	if inputs == nil {
		profile = cmp.Or(opt.Profile, "narrow")
		gen, ok := Profiles[profile]
		if !ok {
			return nil, fmt.Errorf("difftest: unknown profile %q", profile)
		}
		indices := opt.Indices
		if len(indices) == 0 {
			indices = make([]int, opt.N)
			for i := range indices {
				indices[i] = i
			}
		}
		inputs = make([]conformance.Input, len(indices))
		for j, i := range indices {
			inputs[j] = gen(opt.Seed, i)
		}
		d.progressf("generated %d cases (profile %s, seed %d) in %.1fs", len(inputs), profile, opt.Seed, time.Since(start).Seconds())
	}

	start = time.Now()
	flink, cepheus, err := d.evaluate(ctx, "run", inputs)
	if err != nil {
		return nil, err
	}
	d.progressf("ran %d cases through Flink and Cepheus in %.1fs", len(inputs), time.Since(start).Seconds())

	slowCepheus, err := d.rerunSlow(ctx, inputs, flink, cepheus)
	if err != nil {
		return nil, err
	}

	sum := &Summary{Profile: profile, ByExplanation: map[string]int{}, SlowCepheus: slowCepheus}
	var agreed, explained []conformance.Input
	explainedIDs := map[string][]string{}
	kept := map[string]int{}
	var disagreed []Finding
	allDiffs := make([][]Diff, len(inputs))
	var differ []conformance.Input
	for i := range inputs {
		in := &inputs[i]
		sum.measure(in)
		f, c := flink.Cases[in.ID], cepheus.Cases[in.ID]
		if f == nil {
			return nil, fmt.Errorf("difftest: the Flink runner wrote no result for %s", in.ID)
		}
		if allDiffs[i] = Compare(f, c); len(allDiffs[i]) > 0 {
			differ = append(differ, *in)
		}
	}
	cfs, n, err := d.counterfactuals(ctx, "counterfactuals", differ)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		// Without them the explanations that need them do not apply:
		// the run goes on and reports those cases as unexplained.
		d.progressf("COUNTERFACTUALS FAILED: %v", err)
		cfs = map[string]*conformance.Result{}
	}
	sum.Counterfactuals = n
	for i := range inputs {
		in := &inputs[i]
		f, c := flink.Cases[in.ID], cepheus.Cases[in.ID]
		diffs := allDiffs[i]
		var ids []string
		if len(diffs) > 0 {
			ids = ExplainCase(in, f, c, cfs)
		}
		switch {
		case len(diffs) == 0:
			sum.Agreed++
			if f.Error != nil {
				sum.BothFailed++
			}
			agreed = append(agreed, *in)
		case ids != nil:
			sum.Explained++
			keep := false
			for _, id := range ids {
				sum.ByExplanation[id]++
				keep = keep || kept[id] < cmp.Or(opt.KeepPerExplanation, 12)
			}
			if keep {
				for _, id := range ids {
					kept[id]++
				}
				explained = append(explained, *in)
				explainedIDs[in.ID] = ids
			}
			d.progressf("%s: explained by %s: %s", in.ID, explainedBy(ids), diffSummary(diffs))
		default:
			sum.Unexplained++
			disagreed = append(disagreed, Finding{Original: *in, Diffs: diffs, Flink: f, Cepheus: c})
			d.progressf("%s: unexplained: %s", in.ID, diffSummary(diffs))
		}
	}
	if opt.KeepExplained != "" {
		if err := WriteExplained(opt.KeepExplained, explained, flink, cfs, explainedIDs); err != nil {
			return nil, err
		}
		d.progressf("kept %d explained cases in %s", len(explained), opt.KeepExplained)
	}
	if opt.Keep != "" {
		if err := WriteCorpus(opt.Keep, agreed, flink); err != nil {
			return nil, err
		}
		d.progressf("kept %d agreed cases in %s", len(agreed), opt.Keep)
	}
	if len(disagreed) > 0 {
		start = time.Now()
		for i := range disagreed {
			f := &disagreed[i]
			f.Minimal, f.MinimalDiffs = f.Original, f.Diffs
		}
		if !opt.NoShrink {
			pick := d.pickShrink(disagreed)
			sub := make([]Finding, len(pick))
			for j, i := range pick {
				sub[j] = disagreed[i]
			}
			if err := d.shrink(ctx, sub); err != nil {
				return nil, err
			}
			for j, i := range pick {
				disagreed[i] = sub[j]
			}
		}
		d.progressf("shrank %d disagreements in %.1fs", len(disagreed), time.Since(start).Seconds())
		for i := range disagreed {
			if err := writeFinding(opt.Out, &disagreed[i]); err != nil {
				return nil, err
			}
			d.progressf("%s: minimal case %s: %s", disagreed[i].Original.ID, disagreed[i].Path, diffSummary(disagreed[i].MinimalDiffs))
		}
	}
	sum.Findings = disagreed
	return sum, nil
}

func diffSummary(diffs []Diff) string {
	parts := make([]string, len(diffs))
	for i, d := range diffs {
		parts[i] = d.String()
	}
	s := strings.Join(parts, " | ")
	if len(s) > 400 {
		s = s[:400] + "..."
	}
	return s
}

// driver runs batches of cases through both engines.
type driver struct {
	opt     Options
	work    string
	tmp     bool
	batches int
	// flink and cepheus run the cases of a batch directory (inputs are
	// its cases) through each engine: [Flink], and [CepheusWorker] or
	// [Cepheus]; tests replace them.
	flink   func(ctx context.Context, dir string, caseTimeout time.Duration) (*conformance.Results, error)
	cepheus func(ctx context.Context, dir string, inputs []conformance.Input, caseTimeout time.Duration) (*conformance.Results, error)
}

func newDriver(opt Options) (*driver, error) {
	if opt.CaseTimeout <= 0 {
		opt.CaseTimeout = 10 * time.Second
	}
	if opt.ShrinkRounds <= 0 {
		opt.ShrinkRounds = 60
	}
	if opt.MaxShrink <= 0 {
		opt.MaxShrink = 8
	}
	if opt.Out == "" {
		opt.Out = filepath.Join("build", "diff-flink")
	}
	d := &driver{opt: opt, work: opt.Work}
	d.flink = func(ctx context.Context, dir string, caseTimeout time.Duration) (*conformance.Results, error) {
		return Flink(ctx, opt.Jar, dir, caseTimeout, filepath.Join(d.work, "flink.log"))
	}
	d.cepheus = func(ctx context.Context, dir string, inputs []conformance.Input, caseTimeout time.Duration) (*conformance.Results, error) {
		if opt.Worker != "" {
			return CepheusWorker(ctx, opt.Worker, dir, inputs, caseTimeout)
		}
		return Cepheus(ctx, inputs, caseTimeout)
	}
	if d.work == "" {
		dir, err := os.MkdirTemp("", "diff-flink-")
		if err != nil {
			return nil, fmt.Errorf("difftest: %w", err)
		}
		d.work, d.tmp = dir, true
	} else if err := os.MkdirAll(d.work, 0o755); err != nil {
		return nil, fmt.Errorf("difftest: %w", err)
	}
	return d, nil
}

func (d *driver) cleanup() {
	if d.tmp {
		os.RemoveAll(d.work)
	}
}

func (d *driver) progressf(format string, args ...any) {
	if d.opt.Progress != nil {
		fmt.Fprintf(d.opt.Progress, "diff-flink: "+format+"\n", args...)
	}
}

// batchSize is the number of cases per case file.
const batchSize = 500

// evaluate runs inputs through Flink (one JVM) and Cepheus, at the same
// time, and returns both results. name names the batch's directory.
func (d *driver) evaluate(ctx context.Context, name string, inputs []conformance.Input) (flink, cepheus *conformance.Results, err error) {
	return d.evaluateWith(ctx, name, inputs, d.opt.CaseTimeout)
}

// evaluateWith is evaluate with another per-case timeout.
func (d *driver) evaluateWith(ctx context.Context, name string, inputs []conformance.Input, caseTimeout time.Duration) (flink, cepheus *conformance.Results, err error) {
	dir, err := d.writeBatch(name, "generated by internal/difftest", inputs)
	if err != nil {
		return nil, nil, err
	}
	var wg sync.WaitGroup
	var ferr error
	wg.Go(func() {
		flink, ferr = d.flink(ctx, dir, caseTimeout)
	})
	var cerr error
	cepheus, cerr = d.cepheus(ctx, dir, inputs, caseTimeout)
	wg.Wait()
	if err := errors.Join(ferr, cerr); err != nil {
		return nil, nil, err
	}
	return flink, cepheus, nil
}

// slowFactor is how much longer a case that Flink did not finish in time
// may take when it is run again.
const slowFactor = 12

// rerunSlow runs the cases that an engine did not finish in time once
// more, and puts the new results into flink and cepheus. First those
// Cepheus did not finish: beside the Flink JVM, on a busy host of few
// CPUs, a case can pass the case timeout that Cepheus alone finishes
// (narrow seed 4407 case 21460 took 8 s of CPU and, beside the JVM, over
// 10 s), so they run through Cepheus alone, after the JVM has ended,
// with slowFactor times the case timeout. A case Cepheus does not finish
// then either keeps its timeout, a difference no explanation accepts
// (reported unexplained); the ids of those it finished are returned
// (Summary.SlowCepheus: compared on their results, and named). Then the
// cases that Flink did not finish in time, and that Cepheus did finish,
// run through Flink once more (one JVM) with slowFactor times the case
// timeout. A pattern can make Flink's shared buffer slow without making
// it wrong.
func (d *driver) rerunSlow(ctx context.Context, inputs []conformance.Input, flink, cepheus *conformance.Results) (slowCepheus []string, err error) {
	var alone []conformance.Input
	for i := range inputs {
		if timedOut(cepheus.Cases[inputs[i].ID]) {
			alone = append(alone, inputs[i])
		}
	}
	if len(alone) > 0 {
		start := time.Now()
		dir, err := d.writeBatch("alone", "generated by internal/difftest", alone)
		if err != nil {
			return nil, err
		}
		rs, err := d.cepheus(ctx, dir, alone, slowFactor*d.opt.CaseTimeout)
		if err != nil {
			return nil, err
		}
		for _, in := range alone {
			if r := rs.Cases[in.ID]; r != nil {
				cepheus.Cases[in.ID] = r
				if !timedOut(r) {
					slowCepheus = append(slowCepheus, in.ID)
				}
			}
		}
		d.progressf("ran %d cases Cepheus did not finish in %v beside Flink again, alone, with %v each, in %.1fs: finished %v",
			len(alone), d.opt.CaseTimeout, slowFactor*d.opt.CaseTimeout, time.Since(start).Seconds(), slowCepheus)
	}
	var slow []conformance.Input
	for i := range inputs {
		f, c := flink.Cases[inputs[i].ID], cepheus.Cases[inputs[i].ID]
		if timedOut(f) && !crashed(c) {
			slow = append(slow, inputs[i])
		}
	}
	if len(slow) == 0 {
		return slowCepheus, nil
	}
	start := time.Now()
	rs, err := d.flinkOnly(ctx, "slow", slow, slowFactor*d.opt.CaseTimeout)
	if err != nil {
		return nil, err
	}
	for id, r := range rs.Cases {
		flink.Cases[id] = r
	}
	d.progressf("ran %d cases Flink did not finish in %v again, with %v each, in %.1fs",
		len(slow), d.opt.CaseTimeout, slowFactor*d.opt.CaseTimeout, time.Since(start).Seconds())
	return slowCepheus, nil
}

// counterfactuals runs the counterfactual cases of the inputs (see
// [Counterfactuals]) through Flink, in one JVM, and returns Flink's
// results by counterfactual case id, their steps translated to the
// original cases' steps, and how many cases were run.
func (d *driver) counterfactuals(ctx context.Context, name string, inputs []conformance.Input) (map[string]*conformance.Result, int, error) {
	return d.counterfactualsWith(ctx, name, inputs, d.opt.CaseTimeout)
}

// counterfactualsWith is counterfactuals with another per-case timeout.
func (d *driver) counterfactualsWith(ctx context.Context, name string, inputs []conformance.Input, caseTimeout time.Duration) (map[string]*conformance.Result, int, error) {
	var cases []conformance.Input
	steps := map[string][]int{}
	for i := range inputs {
		for _, id := range slices.Sorted(maps.Keys(Counterfactuals(&inputs[i]))) {
			cf := Counterfactuals(&inputs[i])[id]
			cases = append(cases, cf.Input)
			steps[id] = cf.Steps
		}
	}
	out := map[string]*conformance.Result{}
	if len(cases) == 0 {
		return out, 0, nil
	}
	start := time.Now()
	rs, err := d.flinkOnly(ctx, name, cases, caseTimeout)
	if err != nil {
		return nil, 0, err
	}
	for id, r := range rs.Cases {
		if st, ok := steps[id]; ok {
			TranslateSteps(r, st)
			out[id] = r
		}
	}
	d.progressf("ran %d counterfactual cases through Flink in %.1fs", len(cases), time.Since(start).Seconds())
	return out, len(cases), nil
}

// flinkOnly runs inputs through Flink alone (one JVM).
func (d *driver) flinkOnly(ctx context.Context, name string, inputs []conformance.Input, caseTimeout time.Duration) (*conformance.Results, error) {
	dir, err := d.writeBatch(name, "counterfactual cases generated by internal/difftest", inputs)
	if err != nil {
		return nil, err
	}
	return d.flink(ctx, dir, caseTimeout)
}

// writeBatch writes inputs to the case files of a new batch directory,
// named after the batch's number and name, and returns it.
func (d *driver) writeBatch(name, description string, inputs []conformance.Input) (string, error) {
	d.batches++
	dir := filepath.Join(d.work, fmt.Sprintf("%03d-%s", d.batches, name))
	for i := 0; i < len(inputs); i += batchSize {
		chunk := inputs[i:min(i+batchSize, len(inputs))]
		fcs := make([]FileCase, len(chunk))
		for j := range chunk {
			fcs[j] = FileCase{Input: chunk[j], Source: caseSource}
		}
		path := filepath.Join(dir, fmt.Sprintf("cases-%04d.json", i/batchSize))
		if err := WriteCaseFile(path, description, fcs, false); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// pickShrink chooses the findings to shrink: the first of each kind, then
// more in id order, up to MaxShrink, leaving out the cases Flink did not
// finish. The others get a note naming the shrunk finding of their kind.
func (d *driver) pickShrink(fs []Finding) []int {
	var pick []int
	first := map[string]int{}
	// A case on which Flink hung is not shrunk: most of its candidates
	// would hang as well, each for the shrink timeout.
	hung := func(i int) bool { return timedOut(fs[i].Flink) }
	for i := range fs {
		if hung(i) {
			continue
		}
		k := kindOf(&fs[i])
		if _, ok := first[k]; !ok && len(pick) < d.opt.MaxShrink {
			first[k] = i
			pick = append(pick, i)
		}
	}
	for i := range fs {
		if len(pick) >= d.opt.MaxShrink {
			break
		}
		if !hung(i) && !slices.Contains(pick, i) {
			pick = append(pick, i)
		}
	}
	for i := range fs {
		if !slices.Contains(pick, i) {
			if j, ok := first[kindOf(&fs[i])]; ok {
				fs[i].SameKindAs = fs[j].Original.ID
			}
		}
	}
	slices.Sort(pick)
	return pick
}

// kindOf is a rough classification of a disagreement, to spread shrinking
// over different problems: the driver, the time characteristic, whether
// the case restores a snapshot, and the aspects that differ.
func kindOf(f *Finding) string {
	in := &f.Original
	k := in.Driver + "/" + in.TimeCharacteristic
	if slices.ContainsFunc(in.OperatorSteps, func(s conformance.Step) bool { return s.SnapshotRestore != nil }) {
		k += "/restore"
	}
	for _, df := range f.Diffs {
		k += "/" + df.Aspect
	}
	return k
}

// writeFinding writes the minimal case of f to dir/<id>.json, with notes
// saying what differs and Flink's result as its expectation.
func writeFinding(dir string, f *Finding) error {
	fc := FileCase{Input: f.Minimal, Source: caseSource}
	fc.ID = f.Original.ID
	var notes []string
	if f.SameKindAs == "" && !f.Shrunk && timedOut(f.Flink) {
		notes = append(notes, fmt.Sprintf("The generated case %s, not shrunk because Flink did not finish it.", f.Original.ID))
	} else if f.SameKindAs != "" {
		notes = append(notes, fmt.Sprintf("The generated case %s, not shrunk: it disagrees like %s, which was.", f.Original.ID, f.SameKindAs))
	} else if f.Shrunk {
		notes = append(notes, fmt.Sprintf("Minimal reproducing case of the generated case %s (make diff-flink): Flink and Cepheus disagree.", f.Original.ID))
	} else {
		notes = append(notes, fmt.Sprintf("The case %s, not shrunk: Flink and Cepheus disagree.", f.Original.ID))
	}
	for _, df := range f.MinimalDiffs {
		notes = append(notes, df.String())
	}
	notes = append(notes, "The expected_* fields are what Flink 2.3.0 produced.")
	fc.Notes = strings.Join(notes, "\n")
	setExpectations(&fc, f.Flink)
	f.Path = filepath.Join(dir, fc.ID+".json")
	return WriteCaseFile(f.Path, "a minimal case on which Cepheus and Flink CEP disagree (internal/difftest)", []FileCase{fc}, true)
}

// setExpectations records Flink's result r as the case's expectations in
// the conformance format.
func setExpectations(fc *FileCase, r *conformance.Result) {
	if r.Error != nil {
		fc.CompareMode = conformance.ModeExpectsError
		fc.ExpectedError = *r.Error
		return
	}
	if fc.Driver == conformance.DriverOperator {
		fc.CompareMode = conformance.ModeOrdered
		fc.ExpectedOutput = []conformance.ExpectedItem{}
		for _, it := range r.Output {
			fc.ExpectedOutput = append(fc.ExpectedOutput, conformance.ExpectedItem{Watermark: it.Watermark, MatchSeq: it.Match})
		}
		fc.ExpectedLateSeq = r.Late
	} else {
		fc.CompareMode = conformance.ModeMultiset
	}
	fc.ExpectedMatchesSeq = [][]uint64{}
	for _, m := range r.Matches {
		fc.ExpectedMatchesSeq = append(fc.ExpectedMatchesSeq, m.Stages.Flat())
	}
	if fc.TimeoutHandling {
		fc.ExpectedTimeoutsSeq = [][]uint64{}
		for _, t := range r.Timeouts {
			fc.ExpectedTimeoutsSeq = append(fc.ExpectedTimeoutsSeq, t.Stages.Flat())
			fc.ExpectedTimeoutTimes = append(fc.ExpectedTimeoutTimes, t.Timestamp)
		}
	}
}
