package state

import (
	"io"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// readFile reads the whole file at path.
func readFile(fs vfs.FS, path string) ([]byte, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// writeFileSync writes data to a new file at path and syncs it (not its
// directory).
func writeFileSync(fs vfs.FS, path string, data []byte) error {
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// syncDir syncs the directory dir: the names it holds become durable.
func syncDir(fs vfs.FS, dir string) error {
	f, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// syncTree syncs every file and directory under root, root included,
// children before their parents.
func syncTree(fs vfs.FS, root string) error {
	names, err := fs.List(root)
	if err != nil {
		return err
	}
	for _, n := range names {
		p := fs.PathJoin(root, n)
		fi, err := fs.Stat(p)
		if err != nil {
			return err
		}
		if fi.IsDir() {
			err = syncTree(fs, p)
		} else {
			err = syncFile(fs, p)
		}
		if err != nil {
			return err
		}
	}
	return syncDir(fs, root)
}

func syncFile(fs vfs.FS, path string) error {
	f, err := fs.Open(path)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
