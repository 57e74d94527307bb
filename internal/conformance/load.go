package conformance

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// caseFile is a case file: {"meta": ..., "cases": [...]}; other top-level
// keys are ignored.
type caseFile struct {
	Cases []json.RawMessage `json:"cases"`
}

// LoadDir reads every *.json file of dir, in name order, and returns their
// cases in file order. Case ids must be unique across the files.
func LoadDir(dir string) ([]Case, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, fmt.Errorf("conformance: list %s: %w", dir, err)
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("conformance: no *.json case file in %s", dir)
	}
	sort.Strings(paths)
	var cases []Case
	seen := map[string]string{}
	for _, p := range paths {
		cs, err := LoadFile(p)
		if err != nil {
			return nil, err
		}
		for _, c := range cs {
			if prev, dup := seen[c.ID()]; dup {
				return nil, fmt.Errorf("conformance: %s: case %q already defined in %s", p, c.ID(), prev)
			}
			seen[c.ID()] = p
		}
		cases = append(cases, cs...)
	}
	return cases, nil
}

// LoadFile reads the cases of one case file.
func LoadFile(path string) ([]Case, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("conformance: %w", err)
	}
	var f caseFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("conformance: %s: %w", path, err)
	}
	cases := make([]Case, len(f.Cases))
	for i, raw := range f.Cases {
		c := &cases[i]
		c.File = path
		if err := json.Unmarshal(raw, &c.Input); err != nil {
			return nil, fmt.Errorf("conformance: %s: case %d: %w", path, i, err)
		}
		if c.Input.ID == "" {
			return nil, fmt.Errorf("conformance: %s: case %d has no id", path, i)
		}
		if err := json.Unmarshal(raw, &c.Expect); err != nil {
			return nil, fmt.Errorf("conformance: %s: case %q: %w", path, c.Input.ID, err)
		}
	}
	return cases, nil
}
