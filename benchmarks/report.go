package benchmarks

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ReadResults reads JSON lines of [Result] (the output of both engines'
// runs). Blank lines are skipped.
func ReadResults(r io.Reader) ([]*Result, error) {
	var out []*Result
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		res := &Result{}
		if err := json.Unmarshal(line, res); err != nil {
			return nil, fmt.Errorf("results line %d: %w", n, err)
		}
		out = append(out, res)
	}
	return out, sc.Err()
}

// Row is one workload's line of the comparison: the median of each
// engine's finished runs.
type Row struct {
	Workload *Workload
	Cepheus  EngineSummary
	Flink    EngineSummary
	// Problems lists disagreements: between the engines, or between the
	// rounds of one engine. A row with problems fails the report.
	Problems []string
}

// EngineSummary sums up one engine's runs of one workload.
type EngineSummary struct {
	Runs     int // runs recorded
	Finished int // runs that finished
	// Medians over the finished runs.
	EventsPerSec float64
	CPUSeconds   float64
	PeakRSSKiB   int64
	// From the finished runs (they agree, or Problems says otherwise).
	Matches int64
	Hash    string
	// DNFAt is, when no run finished, the most events a run consumed, and
	// DNFEventsPerSec that run's rate over its events after the warm-up
	// (0 when it did not get past the warm-up or did not say).
	DNFAt           int64
	DNFEventsPerSec float64
	Runtime         string
}

// Summarize builds the rows of the workloads that have results, in table
// order. Results of unknown workloads are an error.
func Summarize(results []*Result) ([]*Row, error) {
	by := map[string][]*Result{}
	for _, r := range results {
		if Lookup(r.Workload) == nil {
			return nil, fmt.Errorf("results of an unknown workload %q", r.Workload)
		}
		if r.Engine != "cepheus" && r.Engine != "flink" {
			return nil, fmt.Errorf("results of an unknown engine %q", r.Engine)
		}
		by[r.Workload] = append(by[r.Workload], r)
	}
	var rows []*Row
	for _, w := range Workloads {
		rs := by[w.Name]
		if len(rs) == 0 {
			continue
		}
		row := &Row{Workload: w}
		row.Cepheus = summarize(w, "Cepheus", filter(rs, "cepheus"), &row.Problems)
		row.Flink = summarize(w, "Flink", filter(rs, "flink"), &row.Problems)
		c, f := row.Cepheus, row.Flink
		if c.Finished > 0 && f.Finished > 0 && (c.Matches != f.Matches || c.Hash != f.Hash) {
			row.Problems = append(row.Problems, fmt.Sprintf(
				"%s: MISMATCH: Cepheus %d matches (hash %s), Flink %d matches (hash %s)",
				w.Name, c.Matches, c.Hash, f.Matches, f.Hash))
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func filter(rs []*Result, engine string) []*Result {
	var out []*Result
	for _, r := range rs {
		if r.Engine == engine {
			out = append(out, r)
		}
	}
	return out
}

func summarize(w *Workload, name string, rs []*Result, problems *[]string) EngineSummary {
	s := EngineSummary{Runs: len(rs)}
	var eps, cpu []float64
	var rss []int64
	for _, r := range rs {
		s.Runtime = r.Runtime
		if r.Events != w.Events || r.Warmup != w.Warmup {
			*problems = append(*problems, fmt.Sprintf("%s: %s ran %d events with warm-up %d, the workload has %d and %d",
				w.Name, name, r.Events, r.Warmup, w.Events, w.Warmup))
		}
		if !r.Finished {
			if r.Processed >= s.DNFAt {
				s.DNFAt, s.DNFEventsPerSec = r.Processed, r.EventsPerSec
			}
			continue
		}
		if s.Finished > 0 && (r.Matches != s.Matches || r.Hash != s.Hash) {
			*problems = append(*problems, fmt.Sprintf("%s: %s disagrees with itself: %d matches (hash %s), then %d (hash %s)",
				w.Name, name, s.Matches, s.Hash, r.Matches, r.Hash))
		}
		s.Finished++
		s.Matches, s.Hash = r.Matches, r.Hash
		eps = append(eps, r.EventsPerSec)
		cpu = append(cpu, r.CPUSeconds)
		rss = append(rss, r.PeakRSSKiB)
	}
	if s.Finished > 0 {
		s.EventsPerSec, s.CPUSeconds, s.PeakRSSKiB = median(eps), median(cpu), median(rss)
	}
	return s
}

// median of a non-empty list; the lower middle one for an even length.
func median[T int64 | float64](xs []T) T {
	slices.Sort(xs)
	return xs[(len(xs)-1)/2]
}

// TableHeader is the header of the results table.
const TableHeader = "| workload | events | matches | Cepheus events/s | Flink events/s | ratio | CPU s (Cepheus / Flink) | peak RSS MiB (Cepheus / Flink) |\n" +
	"|---|---:|---:|---:|---:|---:|---:|---:|\n"

// Table formats the rows as a Markdown pipe table, one row per workload
// whose first cell is its name.
func Table(rows []*Row) string {
	var b strings.Builder
	b.WriteString(TableHeader)
	for _, r := range rows {
		c, f := r.Cepheus, r.Flink
		matches := "—"
		switch {
		case c.Finished > 0:
			matches = group(c.Matches)
		case f.Finished > 0:
			matches = group(f.Matches)
		}
		if c.Finished > 0 && f.Finished > 0 && c.Matches != f.Matches {
			matches = group(c.Matches) + " ≠ " + group(f.Matches)
		}
		ratio := "—"
		if c.Finished > 0 && f.Finished > 0 {
			ratio = fmt.Sprintf("%.2f×", c.EventsPerSec/f.EventsPerSec)
		}
		fspeed := speed(f)
		if f.Runs == 0 && r.Workload.CepheusOnly {
			fspeed = "not run (Cepheus only)"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s / %s | %s / %s |\n",
			r.Workload.Name, group(int64(r.Workload.Events)), matches,
			speed(c), fspeed, ratio,
			cpuCell(c), cpuCell(f), rssCell(c), rssCell(f))
	}
	return b.String()
}

func speed(s EngineSummary) string {
	switch {
	case s.Finished > 0:
		return group(int64(s.EventsPerSec + 0.5))
	case s.Runs > 0 && s.DNFEventsPerSec > 0:
		return fmt.Sprintf("did not finish at %s events (%s events/s until then)", group(s.DNFAt), group(int64(s.DNFEventsPerSec+0.5)))
	case s.Runs > 0:
		return fmt.Sprintf("did not finish at %s events", group(s.DNFAt))
	}
	return "not run"
}

func cpuCell(s EngineSummary) string {
	if s.Finished == 0 {
		return "—"
	}
	return strconv.FormatFloat(s.CPUSeconds, 'f', 1, 64)
}

func rssCell(s EngineSummary) string {
	if s.Finished == 0 {
		return "—"
	}
	return strconv.FormatInt((s.PeakRSSKiB+512)/1024, 10)
}

// group writes n with thousands separators: 2,400,000.
func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// Machine describes this machine in one line: CPU model and count,
// memory, kernel, the runtimes of the rows, and the range of the load
// average when the runs started.
func Machine(rows []*Row, results []*Result) string {
	cpu := firstField("/proc/cpuinfo", "model name", ":")
	if cpu == "" {
		cpu = goruntime.GOARCH
	}
	mem := firstField("/proc/meminfo", "MemTotal", ":")
	if kb, err := strconv.ParseInt(strings.TrimSuffix(mem, " kB"), 10, 64); err == nil {
		mem = fmt.Sprintf("%.0f GiB RAM", float64(kb)/(1<<20))
	}
	parts := []string{fmt.Sprintf("%s, %d logical CPUs", cpu, goruntime.NumCPU())}
	if mem != "" {
		parts = append(parts, mem)
	}
	if k := kernel(); k != "" {
		parts = append(parts, k)
	}
	seen := map[string]bool{}
	for _, r := range rows {
		for _, rt := range []string{r.Cepheus.Runtime, r.Flink.Runtime} {
			if rt != "" && !seen[rt] {
				seen[rt] = true
				parts = append(parts, rt)
			}
		}
	}
	if len(results) > 0 {
		lo, hi := results[0].Load1, results[0].Load1
		for _, r := range results {
			lo, hi = min(lo, r.Load1), max(hi, r.Load1)
		}
		parts = append(parts, fmt.Sprintf("1-min load average %.1f to %.1f at the starts of the runs", lo, hi))
	}
	return strings.Join(parts, "; ")
}

// firstField returns the value of the first "name<sep> value" line of a
// file, trimmed; "" when there is none.
func firstField(path, name, sep string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if k, v, ok := strings.Cut(line, sep); ok && strings.TrimSpace(k) == name {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// ResultsMarkdown is the content of benchmarks/RESULTS.md for a run of
// make bench-compare: a preamble, a line with the date and the machine,
// the table, and how to read it.
func ResultsMarkdown(rows []*Row, date time.Time, machine string, rounds int) string {
	var b strings.Builder
	b.WriteString("# Benchmark results: Cepheus and Flink CEP side by side\n\n")
	b.WriteString("Written by `make bench-compare` (scripts/bench-compare.sh). benchmarks/README.md describes the\n")
	b.WriteString("workloads and how each engine runs them; this file holds the latest run only.\n\n")
	fmt.Fprintf(&b, "%s — %s\n\n", date.UTC().Format("2006-01-02"), machine)
	b.WriteString(Table(rows))
	b.WriteString("\n")
	fmt.Fprintf(&b, "Both engines pinned to one core (`taskset -c 0`); %d rounds, run A B A B (Cepheus, then Flink, per\n", rounds)
	b.WriteString("workload and round); each cell is the median over the rounds that finished. events/s counts the\n")
	b.WriteString("events after the warm-up over the time from the first of them to the end of the final flush,\n")
	b.WriteString("measured inside the process (loading the data and JVM start excluded); CPU s is the process's CPU\n")
	b.WriteString("time over the same span; peak RSS is the process's VmHWM, the input held in memory included.\n")
	b.WriteString("ratio is Cepheus events/s ÷ Flink events/s. Both engines found the same matches (count and\n")
	b.WriteString("signature hash) on every workload that both finished:\n\n")
	for _, r := range rows {
		w := r.Workload
		s := r.Cepheus
		if s.Finished == 0 {
			s = r.Flink
		}
		hash := "—"
		if s.Finished > 0 {
			hash = "`" + s.Hash + "`"
		}
		fmt.Fprintf(&b, "- %s (`%s`, warm-up %s events): signature hash %s. %s.\n",
			w.Name, "benchmarks/workloads/"+w.File, group(int64(w.Warmup)), hash, w.Describe)
	}
	return b.String()
}
