package rulesets_test

import (
	"bytes"
	"io/fs"
	"testing"

	"github.com/cepheus-cep/cepheus/internal/rulestest"
	"github.com/cepheus-cep/cepheus/rules"
	"github.com/cepheus-cep/cepheus/rulesets"
)

// TestExamples compiles every example ruleset, checks that it is in
// canonical form, and runs its tests.
func TestExamples(t *testing.T) {
	names, err := fs.Glob(rulesets.FS, "*.cep")
	if err != nil || len(names) == 0 {
		t.Fatalf("no example rulesets (%v)", err)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			src, err := fs.ReadFile(rulesets.FS, name)
			if err != nil {
				t.Fatal(err)
			}
			f, err := rules.ParseFile(name, src)
			if err != nil {
				t.Fatal(err)
			}
			if out := rules.Format(f); !bytes.Equal(out, src) {
				t.Errorf("%s is not in canonical form (run cepheus fmt -w rulesets/%s)", name, name)
			}
			rs, err := rules.Compile(f)
			if err != nil {
				t.Fatal(err)
			}
			if len(rs.Tests) == 0 {
				t.Errorf("%s has no tests", name)
			}
			for _, r := range rulestest.RunAll(rs) {
				if !r.Pass() {
					t.Errorf("test %q (%s) fails:\n%s", r.Test.Name, r.Test.Pos, r.Diff())
				}
			}
		})
	}
}
