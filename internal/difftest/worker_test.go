package difftest

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/internal/conformance"
)

// TestMain lets the test binary serve as a Cepheus worker.
func TestMain(m *testing.M) {
	MaybeServeWorker()
	os.Exit(m.Run())
}

// TestCepheusWorker: the worker gives the in-process results, and a case
// that crashes it is reported as that case's error while the cases after
// it still run.
func TestCepheusWorker(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var inputs []conformance.Input
	var fcs []FileCase
	for i := range 30 {
		in := Generate(1, i)
		inputs = append(inputs, in)
		fcs = append(fcs, FileCase{Input: in})
	}
	dir := t.TempDir()
	if err := WriteCaseFile(filepath.Join(dir, "cases.json"), "worker test", fcs, false); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	want, err := Cepheus(ctx, inputs, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got, err := CepheusWorker(ctx, exe, dir, inputs, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the worker's results differ from the in-process ones")
	}

	crash := inputs[10].ID
	t.Setenv(workerCrashEnv, crash)
	got, err = CepheusWorker(ctx, exe, dir, inputs, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range inputs {
		r := got.Cases[in.ID]
		switch {
		case r == nil:
			t.Errorf("%s: no result", in.ID)
		case in.ID == crash:
			if r.Error == nil || !strings.HasPrefix(*r.Error, "cepheus crashed: ") {
				t.Errorf("%s: crashed the worker, result error %v", in.ID, errText(r))
			}
		case !reflect.DeepEqual(r, want.Cases[in.ID]):
			t.Errorf("%s: result after the crash differs from the in-process one", in.ID)
		}
	}
}
