package conformance

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
)

// Report is the judgement of every case of a run, in case order.
type Report struct {
	Verdicts []Verdict
}

// JudgeAll judges every case against its result in rs.
func JudgeAll(cases []Case, rs *Results) *Report {
	rep := &Report{Verdicts: make([]Verdict, len(cases))}
	for i := range cases {
		rep.Verdicts[i] = Judge(&cases[i], rs.Cases[cases[i].ID()])
	}
	return rep
}

// Counts returns the number of passed and failed cases.
func (r *Report) Counts() (passed, failed int) {
	for _, v := range r.Verdicts {
		if v.Pass {
			passed++
		} else {
			failed++
		}
	}
	return passed, failed
}

// Failed returns the ids of the failed cases, in case order.
func (r *Report) Failed() []string {
	var ids []string
	for _, v := range r.Verdicts {
		if !v.Pass {
			ids = append(ids, v.ID)
		}
	}
	return ids
}

// Write prints every failed case with its diff (marking those listed in
// known), notes listed cases that now pass, and ends with the line
// "conformance: N passed, M failed".
func (r *Report) Write(w io.Writer, known KnownFailing) error {
	bw := bufio.NewWriter(w)
	for _, v := range r.Verdicts {
		if v.Pass {
			if reason, ok := known[v.ID]; ok {
				fmt.Fprintf(bw, "PASS %s, listed as known failing (%s): remove it from the list\n", v.ID, reason)
			}
			continue
		}
		fmt.Fprintf(bw, "FAIL %s", v.ID)
		if reason, ok := known[v.ID]; ok {
			fmt.Fprintf(bw, " (known failing: %s)", reason)
		}
		fmt.Fprintf(bw, "\n  %s\n", strings.ReplaceAll(v.Diff, "\n", "\n  "))
	}
	passed, failed := r.Counts()
	fmt.Fprintf(bw, "conformance: %d passed, %d failed\n", passed, failed)
	return bw.Flush()
}

// KnownFailing maps the ids of cases known to fail to the reason given for
// each (possibly empty).
type KnownFailing map[string]string

// ReadKnownFailing reads a known-failing list: one case id per line,
// optionally followed by a # comment that gives the reason; blank lines and
// lines that are only a comment are skipped.
func ReadKnownFailing(path string) (KnownFailing, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("conformance: %w", err)
	}
	defer f.Close()
	known, err := ParseKnownFailing(f)
	if err != nil {
		return nil, fmt.Errorf("conformance: %s: %w", path, err)
	}
	return known, nil
}

// ParseKnownFailing parses a known-failing list (see [ReadKnownFailing]).
func ParseKnownFailing(r io.Reader) (KnownFailing, error) {
	known := KnownFailing{}
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		id, reason, _ := strings.Cut(sc.Text(), "#")
		id, reason = strings.TrimSpace(id), strings.TrimSpace(reason)
		if id == "" {
			continue
		}
		if strings.ContainsAny(id, " \t") {
			return nil, fmt.Errorf("line %d: %q is not one case id", line, id)
		}
		if _, dup := known[id]; dup {
			return nil, fmt.Errorf("line %d: %s listed twice", line, id)
		}
		known[id] = reason
	}
	return known, sc.Err()
}
