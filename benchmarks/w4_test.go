package benchmarks

import (
	"flag"
	"os"
	"testing"
)

var update = flag.Bool("update", false, "rewrite workloads/w4.cep from W4Source")

// TestW4Source checks that workloads/w4.cep is W4Source's text; -update
// rewrites it.
func TestW4Source(t *testing.T) {
	const path = "workloads/w4.cep"
	want := W4Source()
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s is not W4Source's text: go test ./benchmarks -run TestW4Source -update", path)
	}
}
