package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPartialFileConcurrentWriter has two writers of one file at once
// share the hidden file's name: the second removes the first's and makes
// its own; the first's commit then fails, leaving the file as it was and
// the second's unfinished copy alone (renaming it would put half a file
// in place), and the second's commit replaces the file.
func TestPartialFileConcurrentWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.cep")
	if err := os.WriteFile(path, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := createPartial(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.WriteString("a, whole\n"); err != nil {
		t.Fatal(err)
	}
	b, err := createPartial(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.WriteString("b, half"); err != nil {
		t.Fatal(err)
	}
	err = a.commit()
	if err == nil || !strings.Contains(err.Error(), "another command replaced its unfinished copy") {
		t.Fatalf("the first writer's commit: %v, want the other command named", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "old\n" {
		t.Fatalf("after the first writer's failed commit the file holds %q, want it as it was", got)
	}
	if _, err := b.WriteString("; b, the rest\n"); err != nil {
		t.Fatal(err)
	}
	if err := b.commit(); err != nil {
		t.Fatalf("the second writer's commit: %v", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "b, half; b, the rest\n" {
		t.Fatalf("after the second writer's commit the file holds %q", got)
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*"))
	if len(left) != 0 {
		t.Fatalf("hidden files left: %v", left)
	}
}
