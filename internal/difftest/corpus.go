package difftest

import (
	"encoding/json"
	"fmt"
	"os"
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

// The files of an explained corpus directory (see [WriteExplained]).
const (
	ExplainedCases   = "cases.json"         // the cases, a conformance case file
	ExplainedResults = "flink-results.json" // Flink's results on them and on their counterfactuals
	ExplainedIDs     = "explained.json"     // the explanations of each case, {"<case id>": ["<id>", ...]}
)

// WriteExplained writes explained disagreements to dir: the cases, Flink's
// results on them and on their counterfactual cases, and the ids of the
// explanations that accounted for each. TestExplanationsRejectFaults
// re-checks the explanations against it without Java, and checks that each
// rejects fabricated, dropped and altered items.
func WriteExplained(dir string, cases []conformance.Input, flink *conformance.Results, cfs map[string]*conformance.Result, ids map[string][]string) error {
	fcs := make([]FileCase, len(cases))
	kept := &conformance.Results{Cases: map[string]*conformance.Result{}}
	for i := range cases {
		in := &cases[i]
		fcs[i] = FileCase{Input: *in, Source: caseSource}
		r := flink.Cases[in.ID]
		if r == nil {
			return fmt.Errorf("difftest: explained corpus: no Flink result for %s", in.ID)
		}
		kept.Cases[in.ID] = r
		for id := range Counterfactuals(in) {
			if cf := cfs[id]; cf != nil {
				kept.Cases[id] = cf
			}
		}
	}
	desc := "explained disagreements between Cepheus and Flink CEP 2.3.0; " + ExplainedResults +
		" holds Flink's results on them and on their counterfactual cases (internal/difftest)"
	if err := WriteCaseFile(filepath.Join(dir, ExplainedCases), desc, fcs, false); err != nil {
		return err
	}
	if err := kept.WriteFile(filepath.Join(dir, ExplainedResults)); err != nil {
		return err
	}
	b, err := json.MarshalIndent(ids, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ExplainedIDs), append(b, '\n'), 0o644)
}

// ReadExplained reads what WriteExplained wrote.
func ReadExplained(dir string) ([]conformance.Input, *conformance.Results, map[string][]string, error) {
	cases, err := conformance.LoadFile(filepath.Join(dir, ExplainedCases))
	if err != nil {
		return nil, nil, nil, err
	}
	flink, err := conformance.ReadResults(filepath.Join(dir, ExplainedResults))
	if err != nil {
		return nil, nil, nil, err
	}
	b, err := os.ReadFile(filepath.Join(dir, ExplainedIDs))
	if err != nil {
		return nil, nil, nil, err
	}
	var ids map[string][]string
	if err := json.Unmarshal(b, &ids); err != nil {
		return nil, nil, nil, fmt.Errorf("difftest: %s: %w", ExplainedIDs, err)
	}
	return conformance.Inputs(cases), flink, ids, nil
}
