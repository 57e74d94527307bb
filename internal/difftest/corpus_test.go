package difftest

import (
	"path/filepath"
	"testing"
)

// TestCorpus re-checks Cepheus against the regression corpus: generated
// cases on which Cepheus agreed with Flink, with Flink's stored results
// (make diff-flink-corpus rewrites it). No Java is needed.
func TestCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "corpus")
	n, bad, err := CheckCorpus(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range bad {
		t.Errorf("%s: Cepheus no longer agrees with Flink's stored result:\n  %s", d.ID, diffSummary(d.Diffs))
	}
	if n < 100 {
		t.Errorf("the corpus has %d cases, want a few hundred", n)
	}
	t.Logf("%d corpus cases, %d disagree", n, len(bad))
}
