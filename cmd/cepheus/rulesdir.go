package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cepheus-cep/cepheus/cep"
)

// readRulesDir reads the ruleset of a -rules-dir directory: its one *.cep
// file (names starting with a dot, as editors' lock files, are ignored).
// None or several is an error naming dir.
func readRulesDir(dir string) (string, []byte, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", nil, fmt.Errorf("-rules-dir: %w", err)
	}
	var names []string
	for _, e := range entries {
		if n := e.Name(); !e.IsDir() && filepath.Ext(n) == ".cep" && !strings.HasPrefix(n, ".") {
			names = append(names, n)
		}
	}
	switch len(names) {
	case 0:
		return "", nil, fmt.Errorf("-rules-dir %s holds no *.cep file: put the ruleset there", dir)
	case 1:
	default:
		return "", nil, fmt.Errorf("-rules-dir %s holds %d *.cep files (%s): it takes one ruleset", dir, len(names), strings.Join(names, ", "))
	}
	file := filepath.Join(dir, names[0])
	src, err := os.ReadFile(file)
	if err != nil {
		return "", nil, fmt.Errorf("-rules-dir: %w", err)
	}
	return file, src, nil
}

// rulesDirEngine is what a rulesDirWatcher deploys into: the run's
// *cep.StreamMonitor.
type rulesDirEngine interface {
	Deploy(context.Context, cep.Deploy) (*cep.DeployResult, error)
	Snapshot() cep.MonitorSnapshot
}

// rulesDirWatcher deploys the ruleset of a -rules-dir directory whenever
// its content differs from what the previous look saw (not from the
// engine's active version, so that a deploy through the control API
// stays until the directory changes).
type rulesDirWatcher struct {
	dir  string
	poll time.Duration
	m    rulesDirEngine
	log  *slog.Logger
	// seen is the SHA-256 of the content the last look dealt with.
	seen [sha256.Size]byte
	// failed is the last reading error logged, not to log it at every
	// look.
	failed string
}

// run looks at the directory every poll until ctx ends.
func (w *rulesDirWatcher) run(ctx context.Context) {
	tick := time.NewTicker(w.poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		w.look(ctx)
	}
}

// look deploys the directory's ruleset when its content changed since
// the last look. Without a running job, or when the deploy met another
// one's switch (an API deploy, the job letting draining rules go), it
// tries again at the next look.
func (w *rulesDirWatcher) look(ctx context.Context) {
	file, src, err := readRulesDir(w.dir)
	if err != nil {
		if err.Error() != w.failed {
			w.failed = err.Error()
			w.log.Warn("rules-dir: "+err.Error()+"; the engine keeps its version", "version", w.active())
		}
		return
	}
	w.failed = ""
	sum := sha256.Sum256(src)
	if sum == w.seen {
		return
	}
	r, err := w.m.Deploy(ctx, cep.Deploy{Name: file, Source: src, Origin: cep.OriginRulesDir})
	var invalid *cep.ValidationError
	switch {
	case ctx.Err() != nil || errors.Is(err, cep.ErrNoJob) || errors.Is(err, cep.ErrSwitching):
		return
	case errors.As(err, &invalid):
		w.log.Warn("rules-dir: the ruleset does not compile; the engine keeps its version", "file", file, "version", w.active())
		if invalid.Err != nil {
			w.log.Warn("rules-dir: " + invalid.Err.Error())
		}
		for _, p := range invalid.Problems {
			w.log.Warn("rules-dir: " + p.Error())
		}
	case err != nil:
		w.log.Error("rules-dir: deploy failed; the engine keeps its version (change the file to try again)", "file", file, "version", w.active(), "err", err)
	}
	if err == nil {
		for _, p := range r.Warnings {
			w.log.Warn("rules-dir: " + p.Error())
		}
	}
	switch {
	case err != nil:
	case r.Unchanged:
		w.log.Info("rules-dir: the ruleset is the active version already", "file", file, "version", fmt.Sprintf("%.12s", r.Version))
	default:
		w.log.Info("rules-dir: deployed", "file", file, "ruleset", r.Ruleset, "version", fmt.Sprintf("%.12s", r.Version),
			"previous", fmt.Sprintf("%.12s", r.Previous), "checkpoint", r.Checkpoint, "took", r.Took.Round(time.Millisecond),
			"kept", strings.Join(keptShown(r.Kept), ","), "changed", strings.Join(r.Changed, ","),
			"added", strings.Join(r.Added, ","), "removed", strings.Join(r.Removed, ","))
	}
	w.seen = sum
}

// active is the first 12 hex digits of the engine's active version.
func (w *rulesDirWatcher) active() string {
	return fmt.Sprintf("%.12s", w.m.Snapshot().RulesetVersion)
}
