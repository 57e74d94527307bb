//go:build unix

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestGenOutputSymlink: -o naming a symbolic link (a dangling one too,
// through a chain of two, relative, and one whose target climbs out of a
// directory reached through a link) writes the file it points to and
// leaves the link: renamed over, the link became a file of its own and the
// file its user reads kept the old events.
func TestGenOutputSymlink(t *testing.T) {
	dir := t.TempDir()
	args, want := genReference(t, dir)
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(data, "today.jsonl")
	for _, c := range []struct {
		name string
		old  bool // the target holds old events before
	}{{"old target", true}, {"dangling", false}} {
		if c.old {
			if err := os.WriteFile(target, []byte("old\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		} else if err := os.Remove(target); err != nil {
			t.Fatal(err)
		}
		mid, link := filepath.Join(data, "latest.jsonl"), filepath.Join(dir, "link.jsonl")
		os.Remove(mid)
		os.Remove(link)
		if err := os.Symlink("today.jsonl", mid); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("data/latest.jsonl", link); err != nil {
			t.Fatal(err)
		}
		if code, _, errOut := cepheus(t, append(args, link)...); code != 0 {
			t.Fatalf("%s: gen -o LINK: exit %d\n%s", c.name, code, errOut)
		}
		for _, l := range []string{link, mid} {
			if st, err := os.Lstat(l); err != nil || st.Mode()&os.ModeSymlink == 0 {
				t.Errorf("%s: after gen -o LINK, %s is %v (%v): replaced", c.name, l, st.Mode(), err)
			}
		}
		if got, err := os.ReadFile(target); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: the link's target holds %d bytes (%v), want the %d of the events", c.name, len(got), err, len(want))
		}
	}
	// A link whose target climbs (..) out of a directory reached through
	// a symbolic link: the kernel climbs out of the directory the link
	// points to. gen wrote dir/today.jsonl, a file the link does not
	// name, and left data/today.jsonl as it was.
	if err := os.WriteFile(target, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "today.jsonl")
	if err := os.WriteFile(other, []byte("not gen's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(data, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../today.jsonl", filepath.Join(sub, "up.jsonl")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("data/sub", filepath.Join(dir, "sub")); err != nil {
		t.Fatal(err)
	}
	up := filepath.Join(dir, "sub", "up.jsonl")
	if code, _, errOut := cepheus(t, append(args, up)...); code != 0 {
		t.Fatalf("gen -o %s: exit %d\n%s", up, code, errOut)
	}
	if got, err := os.ReadFile(target); err != nil || !bytes.Equal(got, want) {
		t.Errorf("gen -o %s: %s holds %d bytes (%v), want the %d of the events", up, target, len(got), err, len(want))
	}
	if got, err := os.ReadFile(other); err != nil || string(got) != "not gen's\n" {
		t.Errorf("gen -o %s: %s holds %d bytes (%v), want its 10 as they were: the events went there", up, other, len(got), err)
	}
}
