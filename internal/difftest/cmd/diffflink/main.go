// Command diffflink is the differential tester against Flink CEP (make
// diff-flink): it generates -n random cases from -seed, runs them through
// the Flink runner (benchmarks/flinkcep) and through Cepheus, shrinks every
// unexplained disagreement to a minimal case in -out, and ends with the
// line
//
//	diff-flink: A agreed, E explained, U unexplained
//
// It exits with status 1 when U > 0 or the run could not be done.
//
// Flags:
//
//	-n      number of cases (200)
//	-seed   seed of the run (1)
//	-jar    the Flink runner's jar (default: scripts/flinkcep-jar.sh, which
//	        builds it when missing; that needs mvn)
//	-out    directory of the minimal reproducing cases (build/diff-flink)
//	-keep   directory to write the agreed cases with Flink's results to
//	        (a regression corpus); none by default
//	-work   scratch directory, kept afterwards (default: a temporary one)
//	-cases  run the cases of this case file or directory (for example
//	        minimal cases of an earlier run) instead of generated ones
//	-noshrink  write the unexplained disagreements without shrinking them
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cepheus-cep/cepheus/internal/conformance"
	"github.com/cepheus-cep/cepheus/internal/difftest"
)

// loadCases reads a case file, or every case file of a directory.
func loadCases(path string) ([]conformance.Case, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return conformance.LoadDir(path)
	}
	return conformance.LoadFile(path)
}

func main() {
	// Cepheus runs in child processes of this command (difftest.CepheusWorker).
	difftest.MaybeServeWorker()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, errUnexplained) {
			fmt.Fprintln(os.Stderr, "diff-flink:", err)
		}
		os.Exit(1)
	}
}

// errUnexplained is returned when the run found unexplained disagreements;
// the output already lists them.
var errUnexplained = errors.New("unexplained disagreements")

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("diffflink", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("n", 200, "number of cases to generate")
	seed := fs.Uint64("seed", 1, "seed of the run")
	profile := fs.String("profile", "narrow", "generator profile: narrow (small cases over the whole feature space) or wide (long inputs, many keys, several rules)")
	jar := fs.String("jar", "", "Flink runner jar (default: built or found by scripts/flinkcep-jar.sh)")
	out := fs.String("out", "build/diff-flink", "directory of the minimal reproducing cases")
	keep := fs.String("keep", "", "directory to keep the agreed cases and Flink's results in (a regression corpus)")
	keepExplained := fs.String("keep-explained", "", "directory to keep explained disagreements in, with Flink's results and counterfactual results (testdata for the fault-injection test)")
	index := fs.String("index", "", "comma-separated case numbers of the seed to run instead of the first N (e.g. 2098,4287)")
	work := fs.String("work", "", "scratch directory, kept (default: a temporary directory, removed)")
	casesPath := fs.String("cases", "", "run the cases of this case file or directory instead of generated ones")
	noShrink := fs.Bool("noshrink", false, "write the disagreements without shrinking them")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *n < 1 {
		return fmt.Errorf("-n must be at least 1")
	}
	var indices []int
	if *index != "" {
		for _, f := range strings.Split(*index, ",") {
			i, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || i < 0 {
				return fmt.Errorf("-index: %q is not a case number", f)
			}
			indices = append(indices, i)
		}
	}
	start := time.Now()
	if *jar == "" {
		j, err := difftest.FindJar(ctx, ".", os.Stderr)
		if err != nil {
			return err
		}
		*jar = j
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	opt := difftest.Options{
		N: *n, Seed: *seed, Profile: *profile, Indices: indices, Jar: *jar, Out: *out, Keep: *keep, KeepExplained: *keepExplained, Work: *work, NoShrink: *noShrink,
		Worker: exe, Progress: stdout,
	}
	if *casesPath != "" {
		cases, err := loadCases(*casesPath)
		if err != nil {
			return err
		}
		opt.Cases = conformance.Inputs(cases)
		fmt.Fprintf(stdout, "diff-flink: %d cases from %s, jar %s\n", len(cases), *casesPath, *jar)
	} else {
		fmt.Fprintf(stdout, "diff-flink: %d cases, profile %s, seed %d, jar %s\n", *n, *profile, *seed, *jar)
	}
	sum, err := difftest.Run(ctx, opt)
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(sum.ByExplanation))
	for id := range sum.ByExplanation {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	// Every explanation is listed, with 0 when it explained nothing, so
	// that a jump from one run to the next shows.
	for _, e := range difftest.Explanations {
		if !slices.Contains(ids, e.ID) {
			ids = append(ids, e.ID)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		fmt.Fprintf(stdout, "diff-flink: explained by %s: %d\n", id, sum.ByExplanation[id])
	}
	fmt.Fprintf(stdout, "diff-flink: %d counterfactual cases rerun through Flink\n", sum.Counterfactuals)
	if len(sum.SlowCepheus) > 0 {
		fmt.Fprintf(stdout, "diff-flink: SLOW: Cepheus finished %d cases only when run again alone with a longer limit: %s\n",
			len(sum.SlowCepheus), strings.Join(sum.SlowCepheus, " "))
	}
	for _, f := range sum.Findings {
		fmt.Fprintf(stdout, "diff-flink: UNEXPLAINED %s -> %s\n", f.Original.ID, f.Path)
	}
	fmt.Fprintf(stdout, "diff-flink: %d agreed cases had an error on both sides; %.1fs in all\n",
		sum.BothFailed, time.Since(start).Seconds())
	fmt.Fprintln(stdout, sum.Line())
	if sum.Unexplained > 0 {
		return errUnexplained
	}
	return nil
}
