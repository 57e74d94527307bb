package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cepheus-cep/cepheus/internal/failpoint"
)

// linkTarget returns the file the symbolic link path points to (through
// every link, a dangling one's target included), or path when it is no
// link: an output renamed over the link itself would replace the link by
// a file, and the file it points to, which its user reads, would keep
// the old data.
func linkTarget(path string) string {
	for range 40 { // as the kernel's limit of links followed
		st, err := os.Lstat(path)
		if err != nil || st.Mode()&os.ModeSymlink == 0 {
			return path
		}
		to, err := os.Readlink(path)
		if err != nil {
			return path
		}
		if !filepath.IsAbs(to) {
			// Relative to the link's directory as the kernel finds it:
			// a ".." in to climbs out of the directory a symbolic link
			// there points to, not lexically (data/link -> ../x, data a
			// link to elsewhere/sub, is elsewhere/x, not ./x).
			dir := filepath.Dir(path)
			if real, err := filepath.EvalSymlinks(dir); err == nil {
				dir = real
			}
			to = filepath.Join(dir, to)
		}
		path = to
	}
	return path
}

// partialFile is the hidden file ".NAME.partial" beside the file path
// that replaces path once whole: a command killed or failing while it
// writes leaves path as it was (or missing, if it was), never torn. The
// caller writes to File, then calls commit or abort. path is the file to
// replace, not a symbolic link to it (see linkTarget).
type partialFile struct {
	*os.File
	path, tmp string
}

// createPartial creates the hidden file beside path, mode 0666 before
// the umask, removing first what a killed command left there: the new
// file is made afresh (O_EXCL), never opened through a symbolic link left
// in its place, which would write into the file it points to and rename
// the link over path. Errors name path, not the hidden file, whose name
// would only puzzle.
func createPartial(path string) (*partialFile, error) {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".partial")
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, renamePathError(err, tmp, path)
	}
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
	if err != nil {
		return nil, renamePathError(err, tmp, path)
	}
	return &partialFile{File: f, path: path, tmp: tmp}, nil
}

// commit syncs the hidden file (a power cut after the rename must not
// find it empty), closes it and renames it over path, then syncs the
// directory (so that the rename outlives a power cut where the system
// allows it). On an error it removes the hidden file, if it is still
// its own; path is then as it was. A hidden file of the same name that is
// not its own (another command writing path at the same time removed
// it and made its own) is left alone, and commit fails: renaming it
// would put the other's unfinished file in place.
func (p *partialFile) commit() error {
	own, err := p.Stat()
	if err == nil {
		err = p.Sync()
	}
	if cerr := p.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// The crash tests kill the command here: path is still as it was.
		failpoint.Hit("replace.synced")
		if st, serr := os.Lstat(p.tmp); serr != nil || !os.SameFile(own, st) {
			return fmt.Errorf("%s: another command replaced its unfinished copy (writing the same file at the same time?): %s is left as it was", p.path, p.path)
		}
		err = os.Rename(p.tmp, p.path)
	}
	if err != nil {
		if st, serr := os.Lstat(p.tmp); serr == nil && (own == nil || os.SameFile(own, st)) {
			os.Remove(p.tmp)
		}
		return renamePathError(err, p.tmp, p.path)
	}
	if d, derr := os.Open(filepath.Dir(p.path)); derr == nil {
		_ = d.Sync() // not every system syncs a directory: best effort
		d.Close()
	}
	return nil
}

// abort closes and removes the hidden file; path is as it was.
func (p *partialFile) abort() {
	p.Close()
	os.Remove(p.tmp)
}

// renamePathError returns err with the name tmp in its *os.PathError
// replaced by path ("write big.cep: file too large").
func renamePathError(err error, tmp, path string) error {
	var pe *os.PathError
	if errors.As(err, &pe) && pe.Path == tmp {
		pe.Path = path
	}
	return err
}
