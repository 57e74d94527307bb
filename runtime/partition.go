package runtime

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Partition is one input of a source, with its own position and
// watermark: a file, or standard input.
type Partition struct {
	// Index numbers the partitions of one reading from 0: in name order
	// for the files of a directory, then (when followed) in the order in
	// which later files were found; a resumed reading numbers them as the
	// reading before did ([NumberPartitions]). A checkpoint names
	// partitions by Name, not by Index.
	Index int
	// Name is the file's base name, "stdin" for standard input; it is the
	// File of the partition's [Position].
	Name string
	// Path is what to open: the file's path, "-" for standard input.
	Path string
}

// OpenPartitions returns the partitions of path, in index order:
//
//   - "-": one partition, standard input;
//   - a directory: one partition per file of it whose name ends in
//     ".jsonl" or ".jsonl.gz", in name order (byte order of the names);
//     hidden files (a name starting with "."), other names, directories
//     and other non-regular entries are skipped, symbolic links to
//     regular files are read; subdirectories are not searched. An empty
//     result is no error (a followed directory may fill later). A
//     symbolic link with such a name whose target is missing is an error
//     unless follow is set (a followed directory reads it once its target
//     appears): read once, its events would be lost without a word;
//   - anything else: one partition, the file (any name; gzip is told by
//     its magic bytes, as in [FileSource]).
//
// It opens no file: each partition is opened when it is read
// ([OpenFileSourceAt], [NewPartitionReader]).
func OpenPartitions(path string, follow bool) ([]Partition, error) {
	if path == "-" {
		return []Partition{{Index: 0, Name: "stdin", Path: "-"}}, nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("runtime: source: %w", err)
	}
	if !fi.IsDir() {
		return []Partition{{Index: 0, Name: partitionName(path), Path: path}}, nil
	}
	names, dangling, err := partitionFiles(path)
	if err != nil {
		return nil, err
	}
	if len(dangling) > 0 && !follow {
		link := filepath.Join(path, dangling[0])
		target, _ := os.Readlink(link)
		return nil, fmt.Errorf("runtime: source: %s is a symbolic link to a missing file (%s): remove it, or make it point to the file to read", link, target)
	}
	parts := make([]Partition, len(names))
	for i, name := range names {
		parts[i] = Partition{Index: i, Name: name, Path: filepath.Join(path, name)}
	}
	return parts, nil
}

// IsPartitionFile reports whether a directory entry named name is read as
// a partition (the regular files of [OpenPartitions]): not hidden, and
// ending in ".jsonl" or ".jsonl.gz".
func IsPartitionFile(name string) bool {
	return !strings.HasPrefix(name, ".") &&
		(strings.HasSuffix(name, ".jsonl") || strings.HasSuffix(name, ".jsonl.gz"))
}

// partitionFiles returns the names of dir's partition files, sorted, and
// those of its symbolic links with a partition file's name whose target
// is missing (no input yet).
func partitionFiles(dir string) (names, dangling []string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("runtime: source: %w", err)
	}
	for _, e := range entries {
		if !IsPartitionFile(e.Name()) {
			continue
		}
		mode := e.Type()
		if mode&os.ModeSymlink != 0 {
			fi, err := os.Stat(filepath.Join(dir, e.Name()))
			if err != nil {
				dangling = append(dangling, e.Name())
				continue
			}
			mode = fi.Mode()
		}
		if mode.IsRegular() {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names) // ReadDir sorts already; say so here too
	return names, dangling, nil
}

// NumberPartitions gives parts, as [OpenPartitions] lists them, their
// indexes: a file that indexes names keeps its index there, the others
// get the next indexes in order, from next and above every index of
// indexes (nil and 0: 0, 1, 2... as OpenPartitions numbers them). It
// returns the next index free after them. An index is part of the Seq of
// every event read from its partition (event.SeqOf), which the events
// held in a checkpoint keep: with the indexes and the next index a
// checkpoint kept, a restart numbers every file as the run before did,
// and never gives a new file the index of a file deleted since (Seqs stay
// unique and in arrival order within a file).
func NumberPartitions(parts []Partition, indexes map[string]int, next int) int {
	for _, i := range indexes {
		next = max(next, i+1)
	}
	for i := range parts {
		if idx, ok := indexes[parts[i].Name]; ok {
			parts[i].Index = idx
			continue
		}
		parts[i].Index = next
		next++
	}
	return next
}
