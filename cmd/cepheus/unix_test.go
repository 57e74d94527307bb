//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestFmtWriteFailureKeepsFile runs fmt -w under a file size limit that
// the formatted ruleset exceeds (as a full disk or a quota would stop it
// midway): the rewrite fails with exit 1 and leaves the file as it was.
// Before, fmt -w truncated the file first, and the failed write left the
// first 8 KiB of the formatted rules: the rules after them were lost.
func TestFmtWriteFailureKeepsFile(t *testing.T) {
	bin := buildCepheus(t)
	dir := t.TempDir()
	// ulimit -f counts 512-byte blocks (POSIX): 16 are 8 KiB. The rules
	// are written compactly, so that the file fits and its canonical form,
	// indented, does not.
	const limit = 16 * 512
	var src strings.Builder
	src.WriteString("ruleset big\nevent time ts\n")
	for i := 0; ; i++ {
		r := fmt.Sprintf("rule r%d {\nkey k\npattern {\nbegin a where amount > 1\nfollowedBy b where amount > a.amount\nwithin 10m\n}\n}\n", i)
		if src.Len()+len(r) > limit-100 {
			break
		}
		src.WriteString(r)
	}
	p := writeFile(t, dir, "big.cep", src.String())
	code, formatted, stderr := cepheus(t, "fmt", p)
	if code != 0 || len(formatted) <= limit {
		t.Fatalf("fmt: exit %d, %d bytes (want more than %d)\n%s", code, len(formatted), limit, stderr)
	}
	// Over the limit the rewrite fails: through the hidden file that
	// would replace it, then, with a hard link (which a new file would
	// leave with the old content), in place, where the former content is
	// put back into the file's blocks.
	link := filepath.Join(dir, "link.cep")
	for _, how := range []string{"replaced", "in place"} {
		if how == "in place" {
			if err := os.Link(p, link); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command("sh", "-c", `ulimit -f 16 && exec "$0" fmt -w "$1"`, bin, p)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "cepheus: write "+p+": file too large\n") {
			t.Errorf("fmt -w (%s) over the file size limit: %v, want exit 1 and the write error\n%s", how, err, out)
		}
		if b, err := os.ReadFile(p); err != nil || string(b) != src.String() {
			t.Errorf("after the failed fmt -w (%s) the file has %d bytes (%v), want its former %d:\n%s", how, len(b), err, src.Len(), b[max(0, len(b)-200):])
		}
		if _, err := os.Lstat(filepath.Join(dir, ".big.cep.partial")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("after the failed fmt -w (%s) the hidden file is there (%v)", how, err)
		}
	}
	// Without the limit the same rewrite goes through, in place: a hard
	// link sees it, and the mode stays.
	if err := os.Chmod(p, 0o640); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := cepheus(t, "fmt", "-w", p); code != 0 {
		t.Fatalf("fmt -w: exit %d\n%s", code, stderr)
	}
	for _, name := range []string{p, link} {
		if b, err := os.ReadFile(name); err != nil || string(b) != formatted {
			t.Errorf("%s after fmt -w: %d bytes (%v), want the %d formatted", name, len(b), err, len(formatted))
		}
	}
	if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o640 {
		t.Errorf("the mode after fmt -w: %v (%v), want 0640", st.Mode(), err)
	}
}

// TestBacktestFailingStderr: a backtest whose standard error cannot be
// written (its reader gone, /dev/full) writes its alerts and exits 0 as
// with a working one, its warnings lost as its summary is, and check of a
// ruleset with nothing to say exits 0. Before, the ruleset's warnings
// were written with their error kept: a ruleset with a warning failed the
// backtest before it read anything (exit 1, its message lost), and with
// none an empty write did, on /dev/full (check too).
func TestBacktestFailingStderr(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, dir, "good.cep", goodSrc)
	warned := writeFile(t, dir, "warned.cep", strings.Replace(goodSrc, `followedBy b where name == "b"`, `followedBy b where name == "b" && a.name != ""`, 1)+
		"rule w {\n  key k\n  pattern {\n    begin x where x.name == \"a\"\n  }\n}\n")
	events := writeFile(t, dir, "e.jsonl", abEvents(200, 0, ""))
	if code, _, stderr := cepheus(t, "check", warned); code != 0 || !strings.Contains(stderr, "warning:") {
		t.Fatalf("check %s: exit %d, want 0 and a warning:\n%s", warned, code, stderr)
	}
	for _, rules := range []string{good, warned} {
		code, want, stderr := cepheus(t, "backtest", "-rules", rules, "-events", events)
		if code != 0 || want == "" {
			t.Fatalf("backtest -rules %s: exit %d, %d bytes of alerts\n%s", rules, code, len(want), stderr)
		}
		for _, errno := range []error{syscall.EPIPE, syscall.ENOSPC} {
			var stdout bytes.Buffer
			broken := failingWriter{&os.PathError{Op: "write", Path: "/dev/stderr", Err: errno}}
			err := run(context.Background(), []string{"backtest", "-rules", rules, "-events", events}, &stdout, broken)
			if code := exitCode(err, io.Discard); code != 0 || stdout.String() != want {
				t.Errorf("backtest -rules %s, stderr failing with %v: exit %d (%v), %d bytes of alerts; want 0 and the %d", rules, errno, code, err, stdout.Len(), len(want))
			}
		}
	}
	err := run(context.Background(), []string{"check", good}, io.Discard, failingWriter{syscall.ENOSPC})
	if code := exitCode(err, io.Discard); code != 0 {
		t.Errorf("check of a clean ruleset, stderr failing: exit %d (%v), want 0", code, err)
	}
}

// messyRules is a ruleset fmt changes, and formattedRules its canonical
// form.
const (
	messyRules     = "ruleset   m\n\n\n  event time ts # time\nrule r {\n pattern {\n begin a oneOrMore within 120s greedy\n }\n severity low\n}\n"
	formattedRules = "ruleset m\n\nevent time ts # time\nrule r {\n  severity low\n  pattern {\n    begin a oneOrMore within 2m greedy\n  }\n}\n"
)

// checkFile fails t unless the file name holds want with mode perm.
func checkFile(t *testing.T, what, name, want string, perm os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil || string(b) != want {
		t.Errorf("%s: %s holds %q (%v), want %q", what, name, b, err, want)
	}
	if st, err := os.Stat(name); err != nil || st.Mode().Perm() != perm {
		t.Errorf("%s: %s has mode %v (%v), want %v", what, name, st.Mode(), err, perm)
	}
}

// TestFmtWriteKilled: fmt -w killed after it wrote and synced the
// canonical source, before it renamed it over the file (the failpoint
// replace.synced), leaves the file as it was, whole, its mode kept; the
// next fmt -w rewrites it and leaves no hidden file. Before, fmt -w wrote
// over the file in place: a kill midway left it torn, part new, part old
// (and with no such point the command was not killed at all). A
// misspelt point is refused, the file untouched.
func TestFmtWriteKilled(t *testing.T) {
	bin := buildCepheus(t)
	dir := t.TempDir()
	p := writeFile(t, dir, "m.cep", messyRules)
	if err := os.Chmod(p, 0o640); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "fmt", "-w", p)
	cmd.Env = append(os.Environ(), "CEPHEUS_FAILPOINT=replace.synced")
	out, err := cmd.CombinedOutput()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("fmt -w at replace.synced: %v, want killed by SIGKILL\n%s", err, out)
	}
	checkFile(t, "killed before the rename", p, messyRules, 0o640)
	// A misspelt point would arm nothing and let the command run to its
	// end: refused before the command runs.
	cmd = exec.Command(bin, "fmt", "-w", p)
	cmd.Env = append(os.Environ(), "CEPHEUS_FAILPOINT=replace.sync")
	out, err = cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); err == nil || code != 2 || !strings.Contains(string(out), `failpoint: CEPHEUS_FAILPOINT="replace.sync": no point has that name (the points: `) {
		t.Errorf("fmt -w at the misspelt replace.sync: %v (exit status %d), want exit status 2 naming the spec\n%s", err, code, out)
	}
	checkFile(t, "a misspelt point", p, messyRules, 0o640)
	if code, _, stderr := cepheus(t, "fmt", "-w", p); code != 0 {
		t.Fatalf("fmt -w: exit %d\n%s", code, stderr)
	}
	checkFile(t, "fmt -w after", p, formattedRules, 0o640)
	if names, err := filepath.Glob(filepath.Join(dir, "*")); err != nil || len(names) != 1 {
		t.Errorf("the directory after fmt -w holds %q (%v), want the file alone", names, err)
	}
}

// TestFmtWriteSymlink: fmt -w of a symbolic link (relative, into another
// directory) rewrites the file it points to, mode kept, and leaves the
// link a link; no hidden file is left beside either.
func TestFmtWriteSymlink(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	target := writeFile(t, data, "m.cep", messyRules)
	if err := os.Chmod(target, 0o640); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.cep")
	if err := os.Symlink("data/m.cep", link); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := cepheus(t, "fmt", "-w", link); code != 0 {
		t.Fatalf("fmt -w LINK: exit %d\n%s", code, stderr)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("after fmt -w LINK, the link is %v (%v): replaced", st.Mode(), err)
	}
	checkFile(t, "fmt -w LINK", target, formattedRules, 0o640)
	for _, d := range []string{dir, data} {
		if names, err := filepath.Glob(filepath.Join(d, ".*")); err != nil || len(names) != 0 {
			t.Errorf("hidden files left in %s: %q (%v)", d, names, err)
		}
	}
}

// TestFmtWriteOwnerAndDirectory: fmt -w keeps the file's owner and group
// (as root, which may give a file away), and rewrites in place a file its
// user may write in a directory it may not (a new file there is refused:
// the rewrite needs only the file writable).
func TestFmtWriteOwnerAndDirectory(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("gives files away and runs the command as another user: needs root")
	}
	bin := buildCepheus(t)
	dir := t.TempDir()
	p := writeFile(t, dir, "m.cep", messyRules)
	if err := os.Chown(p, 4321, 4321); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := cepheus(t, "fmt", "-w", p); code != 0 {
		t.Fatalf("fmt -w: exit %d\n%s", code, stderr)
	}
	checkFile(t, "fmt -w of another user's file", p, formattedRules, 0o644)
	if st, err := os.Stat(p); err != nil {
		t.Error(err)
	} else if s := st.Sys().(*syscall.Stat_t); s.Uid != 4321 || s.Gid != 4321 {
		t.Errorf("fmt -w gave the file away: owner %d, group %d; want 4321 and 4321", s.Uid, s.Gid)
	}

	// As nobody (65534): the file is writable by all, its directory (and
	// the binary's, and the test's directory above them) only searchable.
	if err := os.WriteFile(p, []byte(messyRules), 0o666); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, filepath.Dir(bin), filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(p, 0o666); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "fmt", "-w", p)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("fmt -w as nobody: %v\n%s", err, out)
	}
	checkFile(t, "fmt -w where no new file may be made", p, formattedRules, 0o666)
}

// TestFmtWritePartialLink: a symbolic link left where fmt -w writes its
// hidden file (.NAME.partial) is removed, not written through: the file it
// points to keeps its content, and NAME stays a regular file.
func TestFmtWritePartialLink(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "m.cep", messyRules)
	victim := writeFile(t, dir, "victim.txt", "precious\n")
	if err := os.Symlink("victim.txt", filepath.Join(dir, ".m.cep.partial")); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := cepheus(t, "fmt", "-w", p); code != 0 {
		t.Fatalf("fmt -w: exit %d\n%s", code, stderr)
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "precious\n" {
		t.Errorf("fmt -w wrote through the leftover link: victim.txt holds %q (%v)", b, err)
	}
	if st, err := os.Lstat(p); err != nil || !st.Mode().IsRegular() {
		t.Fatalf("m.cep after fmt -w: %v (%v), want a regular file", st, err)
	}
	checkFile(t, "fmt -w over a leftover link", p, formattedRules, 0o644)
	if _, err := os.Lstat(filepath.Join(dir, ".m.cep.partial")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the hidden file is left (%v)", err)
	}
}

// TestFmtWriteLongName: a name so long that .NAME.partial would pass the
// file system's limit (255 bytes) is rewritten in place, as before there
// was a hidden file.
func TestFmtWriteLongName(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, strings.Repeat("x", 250)+".cep", messyRules)
	if code, _, stderr := cepheus(t, "fmt", "-w", p); code != 0 {
		t.Fatalf("fmt -w of a %d-byte name: exit %d\n%s", len(filepath.Base(p)), code, stderr)
	}
	checkFile(t, "fmt -w of a long name", p, formattedRules, 0o644)
}

// TestFmtWriteReadOnly: a file its user may not write (0444), in a
// directory they may, is refused (permission denied) and kept, as gofmt
// -w does, not replaced by a new file. Run as nobody: root ignores modes.
func TestFmtWriteReadOnly(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("runs the command as nobody: needs root")
	}
	bin := buildCepheus(t)
	dir := t.TempDir()
	sub := filepath.Join(dir, "d")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	p := writeFile(t, sub, "m.cep", messyRules)
	for _, d := range []string{filepath.Dir(bin), filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{sub, p} {
		if err := os.Chown(name, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(p, 0o444); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "fmt", "-w", p)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "permission denied") {
		t.Errorf("fmt -w of a read-only file: %v, want exit 1, permission denied\n%s", err, out)
	}
	checkFile(t, "a read-only file after fmt -w", p, messyRules, 0o444)
}
