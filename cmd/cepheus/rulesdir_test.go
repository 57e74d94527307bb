package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cepheus-cep/cepheus/cep"
)

// switchingEngine answers its first deploys as a job whose other switch
// waits for its checkpoint, then deploys.
type switchingEngine struct {
	busy     int // deploys answered cep.ErrSwitching, before the others go through
	deployed []string
}

func (e *switchingEngine) Deploy(_ context.Context, d cep.Deploy) (*cep.DeployResult, error) {
	if e.busy > 0 {
		e.busy--
		return nil, cep.ErrSwitching
	}
	e.deployed = append(e.deployed, string(d.Source))
	return &cep.DeployResult{Ruleset: "r", Version: "v2"}, nil
}

func (e *switchingEngine) Snapshot() cep.MonitorSnapshot {
	return cep.MonitorSnapshot{RulesetVersion: "v1"}
}

// TestRulesDirSwitching: a file whose deploy met another deploy's switch
// (an API deploy, the job letting draining rules go: "another deploy is
// switching: try again") is deployed at the next look; the watcher took
// it as failed for good, logged "change the file to try again" and never
// deployed it.
func TestRulesDirSwitching(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "r.cep"), []byte("v2 source"), 0o644); err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	e := &switchingEngine{busy: 2}
	w := &rulesDirWatcher{dir: dir, m: e, log: slog.New(slog.NewTextHandler(&logged, nil))}
	for range 3 {
		w.look(context.Background())
	}
	if len(e.deployed) != 1 || e.deployed[0] != "v2 source" {
		t.Errorf("deployed %q after two looks met a switch and a third did not; want the file once", e.deployed)
	}
	if strings.Contains(logged.String(), "deploy failed") || !strings.Contains(logged.String(), "rules-dir: deployed") {
		t.Errorf("the watcher's log: %q; want the deploy, no failure", logged.String())
	}
	w.look(context.Background())
	if len(e.deployed) != 1 {
		t.Errorf("deployed %q after a fourth look at the same file; want it once", e.deployed)
	}
}
