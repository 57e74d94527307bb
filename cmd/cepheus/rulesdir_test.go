package main

import (
	"bytes"
	"context"
	"fmt"
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
	kept     []string // the deploys' kept rules
}

func (e *switchingEngine) Deploy(_ context.Context, d cep.Deploy) (*cep.DeployResult, error) {
	if e.busy > 0 {
		e.busy--
		return nil, cep.ErrSwitching
	}
	e.deployed = append(e.deployed, string(d.Source))
	return &cep.DeployResult{Ruleset: "r", Version: "v2", Kept: e.kept, Changed: []string{"c1"}}, nil
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

// TestRulesDirLogKept: the watcher's log line of a deploy that kept 300
// rules names 10 of them and counts the others (it named all 300, burying
// the changed rule), as `rules deploy`'s answer does.
func TestRulesDirLogKept(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "r.cep"), []byte("v2 source"), 0o644); err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	e := &switchingEngine{}
	for i := range 300 {
		e.kept = append(e.kept, fmt.Sprintf("r%03d", i))
	}
	w := &rulesDirWatcher{dir: dir, m: e, log: slog.New(slog.NewTextHandler(&logged, nil))}
	w.look(context.Background())
	if want := `kept="r000,r001,r002,r003,r004,r005,r006,r007,r008,r009,and 290 more" changed=c1 `; !strings.Contains(logged.String(), want) {
		t.Errorf("the watcher's log: %q; want it to hold %q", logged.String(), want)
	}
}
