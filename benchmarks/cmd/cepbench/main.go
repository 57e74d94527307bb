// Command cepbench is the Cepheus side of the benchmark comparison with
// Flink CEP (make bench-compare, make bench-cepheus; benchmarks/README.md).
//
//	cepbench gen [-dir build/bench] [-workload W1]   write the data files <dir>/<workload>.csv
//	cepbench list                                     one line per workload: name events warm-up out-of-orderness-ms engines timeout-s (0: the default)
//	cepbench run -workload W1 -data build/bench/W1.csv [-timeout 120s] [-cpuprofile f]
//	                                                  run one workload, print one JSON result line
//	cepbench report -runs runs.jsonl [-results benchmarks/RESULTS.md] [-rounds 3]
//	                                                  print the table; exit 1 if the engines disagree
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"time"

	"github.com/cepheus-cep/cepheus/benchmarks"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "gen":
		err = gen(args)
	case "list":
		for _, w := range benchmarks.Workloads {
			engines := "cepheus,flink"
			if w.CepheusOnly {
				engines = "cepheus"
			}
			fmt.Printf("%s %d %d %d %s %d\n", w.Name, w.Events, w.Warmup, w.OutOfOrderness.Milliseconds(), engines, int(w.Timeout.Seconds()))
		}
	case "run":
		err = run(args)
	case "report":
		err = report(args)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cepbench:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: cepbench gen|list|run|report [flags] (see the package documentation)")
	os.Exit(2)
}

func workloads(name string) ([]*benchmarks.Workload, error) {
	if name == "" {
		return benchmarks.Workloads, nil
	}
	w := benchmarks.Lookup(name)
	if w == nil {
		return nil, fmt.Errorf("no workload %q", name)
	}
	return []*benchmarks.Workload{w}, nil
}

func gen(args []string) error {
	fs := flag.NewFlagSet("gen", flag.ExitOnError)
	dir := fs.String("dir", "build/bench", "directory of the data files")
	name := fs.String("workload", "", "only this workload")
	fs.Parse(args)
	ws, err := workloads(*name)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	for _, w := range ws {
		start := time.Now()
		path := filepath.Join(*dir, w.Name+".csv")
		if err := w.WriteData(path, 0); err != nil {
			return fmt.Errorf("%s: %w", w.Name, err)
		}
		fmt.Fprintf(os.Stderr, "cepbench: %s: %d events -> %s (%.1fs)\n", w.Name, w.Events, path, time.Since(start).Seconds())
	}
	return nil
}

func run(args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	name := fs.String("workload", "", "the workload (required)")
	data := fs.String("data", "", "its data file (default build/bench/<workload>.csv)")
	timeout := fs.Duration("timeout", 120*time.Second, "cap on the run (warm-up included, loading excluded)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the run (loading excluded) to this file")
	fs.Parse(args)
	w := benchmarks.Lookup(*name)
	if w == nil {
		return fmt.Errorf("no workload %q (-workload)", *name)
	}
	if *data == "" {
		*data = filepath.Join("build/bench", w.Name+".csv")
	}
	rs, rules, err := w.Compile()
	if err != nil {
		return err
	}
	events, err := benchmarks.LoadData(*data, rs)
	if err != nil {
		return fmt.Errorf("%s: %w", *data, err)
	}
	if len(events) != w.Events {
		return fmt.Errorf("%s holds %d events, workload %s has %d: regenerate it (cepbench gen)", *data, len(events), w.Name, w.Events)
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	res, err := benchmarks.Run(w.Name, rules, events, benchmarks.RunConfig{
		Warmup: w.Warmup, OutOfOrderness: w.OutOfOrderness, Timeout: *timeout,
	})
	if err != nil {
		return fmt.Errorf("%s: %w", w.Name, err)
	}
	line, err := json.Marshal(res)
	if err != nil {
		return err
	}
	fmt.Println(string(line))
	if res.Finished {
		fmt.Fprintf(os.Stderr, "cepbench: %s: %.0f events/s, %d matches, hash %s\n", w.Name, res.EventsPerSec, res.Matches, res.Hash)
	} else {
		fmt.Fprintf(os.Stderr, "cepbench: %s: did not finish at %d events (cap %v)\n", w.Name, res.Processed, *timeout)
	}
	return nil
}

func report(args []string) error {
	fs := flag.NewFlagSet("report", flag.ExitOnError)
	runs := fs.String("runs", "", "JSON lines of run results (required)")
	results := fs.String("results", "", "write this results file (RESULTS.md) when the engines agree")
	rounds := fs.Int("rounds", 3, "rounds the runs were made in (for the results file)")
	fs.Parse(args)
	f, err := os.Open(*runs)
	if err != nil {
		return err
	}
	rs, err := benchmarks.ReadResults(f)
	f.Close()
	if err != nil {
		return err
	}
	rows, err := benchmarks.Summarize(rs)
	if err != nil {
		return err
	}
	machine := benchmarks.Machine(rows, rs)
	fmt.Printf("%s — %s\n\n%s", time.Now().UTC().Format("2006-01-02"), machine, benchmarks.Table(rows))
	var problems []string
	for _, r := range rows {
		problems = append(problems, r.Problems...)
	}
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(os.Stderr, "cepbench: "+p)
		}
		return fmt.Errorf("%w on %d counts: %s not written", benchmarks.ErrMismatch, len(problems), *results)
	}
	if *results == "" {
		return nil
	}
	md := benchmarks.ResultsMarkdown(rows, time.Now(), machine, *rounds)
	if err := os.WriteFile(*results, []byte(md), 0o644); err != nil {
		return errors.Join(errors.New("cannot write the results file"), err)
	}
	fmt.Fprintf(os.Stderr, "cepbench: wrote %s\n", *results)
	return nil
}
