package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"syscall"

	"github.com/cepheus-cep/cepheus/rules"
)

var fmtCommand = &command{
	name:  "fmt",
	short: "print ruleset files in their canonical form (-w rewrites them)",
	usage: "cepheus fmt [-w] [-d] [-l] [files or directories...]",
	help: `Fmt prints the canonical source of ruleset files: two-space indentation,
one item per line, rule items and quantifiers in their fixed order,
durations and names in canonical form, runs of blank lines collapsed, and
every comment kept (the trailing comments of adjacent lines aligned, as
gofmt aligns them). With no file, or -, it formats standard input. A file with a
syntax error is not formatted; its errors are printed to stderr and the
exit status is 1.

With -w, fmt rewrites each file that is not canonical instead of printing
it: it writes a hidden file beside it (.NAME.partial), syncs it, gives it
the file's mode, owner and group, and renames it over the file (then
syncs the directory), so that a kill or a crash midway leaves the file as
it was; a second fmt -w of the same file at the same time makes the first
fail, the file left to the second. A symbolic link's
target is rewritten, the link kept. A file its user may not write is
refused (permission denied), as gofmt -w does. A file with other hard
links, one whose owner cannot be kept, one in a directory that takes no
new file, or one whose name is too long for the hidden file's is
rewritten in place (its mode, owner and links kept); there a write
that fails (a full disk) puts the former content back and exits 1, but a
kill midway can tear the file. With -d, it prints a
unified diff of the changes instead, and the exit status is 1 when there
are changes (0 when every file is canonical), so a CI job can run fmt -d.
With -l, it lists the files that are not canonical, one a line, instead
(the exit status stays 0, as with gofmt -l). The flags combine: -d -w
prints the diff and rewrites the file; -l -w lists and rewrites.
`,
}

func init() { fmtCommand.run = runFmt }

func runFmt(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet(fmtCommand, stdout)
	write := fs.Bool("w", false, "rewrite the files instead of printing them")
	diff := fs.Bool("d", false, "print a diff of the changes instead of the files; exit 1 if there are changes")
	list := fs.Bool("l", false, "list the files whose formatting differs instead of printing them")
	if err := fs.parse(args); err != nil {
		return err
	}
	names := fs.Args()
	if len(names) == 0 {
		names = []string{"-"}
	}
	if *write && slices.Contains(names, "-") {
		return fs.usagef("-w needs files: it cannot rewrite standard input")
	}
	files, err := rulesetSources(names)
	if err != nil {
		return err
	}
	found := false
	for _, arg := range files {
		name, src, err := readSource(ctx, "fmt", arg)
		if err != nil {
			return err
		}
		changed, err := formatOne(name, src, stdout, stderr, fmtMode{write: *write, diff: *diff, list: *list})
		switch {
		case err == errFound, err == nil && changed && *diff:
			found = true
		case err != nil:
			return err
		}
	}
	if found {
		return errFound
	}
	return nil
}

// fmtMode is what fmt does with a file: print it (none set), or rewrite,
// diff or list it.
type fmtMode struct{ write, diff, list bool }

// formatOne formats one file's source and prints, diffs, lists or writes
// it; changed says whether the canonical source differs from src.
func formatOne(name string, src []byte, stdout, stderr io.Writer, mode fmtMode) (changed bool, err error) {
	f, err := rules.ParseFile(name, src)
	if err != nil {
		if err := printErrors(stderr, err, true); err != nil {
			return false, err
		}
		return false, errFound
	}
	out := rules.Format(f)
	changed = !bytes.Equal(src, out)
	if mode.list && changed {
		if _, err := io.WriteString(stdout, name+"\n"); err != nil {
			return changed, err
		}
	}
	if mode.diff && changed {
		if _, err := io.WriteString(stdout, unifiedDiff(name, string(src), string(out))); err != nil {
			return changed, err
		}
	}
	if mode.write {
		if !changed {
			return false, nil
		}
		return changed, rewriteFile(name, src, out)
	}
	if !mode.diff && !mode.list {
		_, err := stdout.Write(out)
		return changed, err
	}
	return changed, nil
}

// rewriteFile replaces the content of the file name, orig, by out. A
// symbolic link's target is rewritten, the link kept. The file is
// replaced whole (replaceFile): a kill or a crash mid-write leaves it as
// it was. Where a replacement could not stand in for it, the file is
// written in place (rewriteInPlace).
func rewriteFile(name string, orig, out []byte) error {
	path := linkTarget(name)
	err := replaceFile(path, out)
	if errors.Is(err, errInPlace) {
		return rewriteInPlace(name, orig, out)
	}
	return err
}

// errInPlace says that replaceFile cannot stand a new file in for the
// old one and wrote nothing.
var errInPlace = errors.New("write the file in place")

// replaceFile writes out to a hidden file beside path, syncs it, gives it
// path's mode, owner and group, and renames it over path. A file its user
// may not write is refused, as a rewrite in place would be (gofmt -w
// too): a read-only mode says to keep it. It returns errInPlace, having
// written nothing, where the new file could not stand in for path: path
// has other hard links (they would keep the old content), is not a
// regular file, its directory takes no new file (a rewrite needs only
// the file writable), the hidden file's name would be too long, or the
// owner or group cannot be given (a file of another user's that this one
// may write).
func replaceFile(path string, out []byte) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() || fileLinks(st) > 1 {
		return errInPlace
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0) // no O_TRUNC: only asks
	if err != nil {
		return err
	}
	f.Close()
	pf, err := createPartial(path)
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.ENAMETOOLONG) {
		return errInPlace
	} else if err != nil {
		return err
	}
	if err := chownLike(pf.File, st); err != nil {
		pf.abort()
		return errInPlace
	}
	// After the chown, which may clear the set-id bits.
	err = pf.Chmod(st.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky))
	if err == nil {
		_, err = pf.Write(out)
	}
	if err != nil {
		pf.abort()
		return renamePathError(err, pf.tmp, path)
	}
	return pf.commit()
}

// rewriteInPlace replaces the content of the file name, orig, by out. It
// writes in place, as gofmt -w does, so the file keeps its inode, owner,
// mode and links and needs no write access to its directory, and it never
// truncates the file first: a write that fails midway (a full disk, a
// quota, a file size limit) puts orig back into the blocks the file
// already had, so that a failed rewrite leaves the file as it was. Only
// when that fails too is the file torn, and the error says so. A kill
// midway tears it.
func rewriteInPlace(name string, orig, out []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	n, err := f.Write(out)
	if err == nil && len(out) < len(orig) {
		err = f.Truncate(int64(len(out)))
	}
	if err == nil {
		// A file system that reports write errors late (NFS, a quota)
		// reports them here, while orig can still be put back.
		err = f.Sync()
	}
	if err != nil && n > 0 {
		_, rerr := f.WriteAt(orig, 0)
		if rerr == nil {
			rerr = f.Truncate(int64(len(orig)))
		}
		if rerr == nil {
			rerr = f.Sync()
		}
		if rerr != nil {
			err = fmt.Errorf("%w, and putting its former content back failed too (%v): the file is torn", err, rerr)
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
