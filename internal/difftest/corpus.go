package difftest

import (
	"fmt"
	"path/filepath"

	"github.com/cepheus-cep/cepheus/internal/conformance"
)

// The files of a regression corpus directory.
const (
	CorpusCases   = "cases.json"         // the cases, a conformance case file
	CorpusResults = "flink-results.json" // what Flink produced for them, a results file
)

// WriteCorpus writes cases and Flink's results for them to dir as a
// regression corpus: dir/cases.json (a case file, one case per line) and
// dir/flink-results.json (a results file). [CheckCorpus] re-checks Cepheus
// against it without Java.
func WriteCorpus(dir string, cases []conformance.Input, flink *conformance.Results) error {
	fcs := make([]FileCase, len(cases))
	kept := &conformance.Results{Cases: map[string]*conformance.Result{}}
	for i := range cases {
		fcs[i] = FileCase{Input: cases[i], Source: caseSource}
		r := flink.Cases[cases[i].ID]
		if r == nil {
			return fmt.Errorf("difftest: corpus: no Flink result for %s", cases[i].ID)
		}
		kept.Cases[cases[i].ID] = r
	}
	desc := "generated cases on which Cepheus agreed with Flink CEP 2.3.0; " + CorpusResults + " holds Flink's results (internal/difftest)"
	if err := WriteCaseFile(filepath.Join(dir, CorpusCases), desc, fcs, false); err != nil {
		return err
	}
	return kept.WriteFile(filepath.Join(dir, CorpusResults))
}

// CorpusDisagreement is a corpus case on which Cepheus no longer agrees
// with the stored Flink result.
type CorpusDisagreement struct {
	ID    string
	Diffs []Diff
}

// CheckCorpus runs the cases of a regression corpus through Cepheus and
// compares each result with Flink's stored one. It returns the number of
// cases and every disagreement (explained or not: the corpus holds only
// cases that agreed).
func CheckCorpus(dir string) (int, []CorpusDisagreement, error) {
	cases, err := conformance.LoadFile(filepath.Join(dir, CorpusCases))
	if err != nil {
		return 0, nil, err
	}
	flink, err := conformance.ReadResults(filepath.Join(dir, CorpusResults))
	if err != nil {
		return 0, nil, err
	}
	var out []CorpusDisagreement
	for i := range cases {
		in := &cases[i].Input
		f := flink.Cases[in.ID]
		if f == nil {
			return 0, nil, fmt.Errorf("difftest: %s: no Flink result for %s", dir, in.ID)
		}
		c := roundTrip(in.ID, conformance.RunCase(in))
		if diffs := Compare(f, c); len(diffs) > 0 {
			out = append(out, CorpusDisagreement{ID: in.ID, Diffs: diffs})
		}
	}
	return len(cases), out, nil
}

// roundTrip passes one result through the results file format.
func roundTrip(id string, r *conformance.Result) *conformance.Result {
	back, err := throughFile(&conformance.Results{Cases: map[string]*conformance.Result{id: r}})
	if err != nil || back.Cases[id] == nil {
		return r
	}
	return back.Cases[id]
}
