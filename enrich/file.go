package enrich

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/cepheus-cep/cepheus/event"
)

// FileSource is a [Source] over the records of a JSON-lines lookup file,
// read once by [OpenFile] and held in memory. All its methods may be called
// concurrently.
type FileSource struct {
	path    string
	records table
	dups    Duplicates
	missing []string // the spec's fields no record gives (Missing)
	members []string // with missing, the members of the first line (Missing)
}

// Duplicates tells of the lines of a lookup file that repeat the key of an
// earlier line. The last record of a key is the one used: [OpenFile] keeps
// it, [Load] writes each in turn, the later replacing the earlier.
type Duplicates struct {
	// Count is the number of lines whose key an earlier line had.
	Count int
	// Path, Line and Key are the first such line: the file, its line
	// number (from 1, blank lines counted) and its key ([KeyOf]). They are
	// empty when Count is 0.
	Path string
	Line int
	Key  string
}

// add counts line of path, whose key an earlier line had.
func (d *Duplicates) add(path string, line int, key string) {
	if d.Count == 0 {
		d.Path, d.Line, d.Key = path, line, key
	}
	d.Count++
}

// OpenFile reads the JSON-lines lookup file at path (gunzipped when path
// ends in .gz) into a [FileSource]. Each line is an object with the key
// fields under their event field names (spec.KeyFields) and any of the
// lookup's fields (spec.Fields, by name); other members are ignored, blank
// lines are skipped, and a later line for a key replaces an earlier one
// (counted: [FileSource.Duplicates]).
//
// Values convert to the declared kinds, numbers as they convert in events
// (docs/decisions.md, "JSON events"): int, a number whose exact value is a
// whole number in int64 range however it is written (3, 3.0, 3e0 and 0.3e1
// are 3; 3.5 and 1e19 are errors), or a string of a decimal integer
// ("12"); float, any number; string, a string; bool, true or false; time,
// an RFC 3339 string or a number of epoch milliseconds by the int rule;
// null, for any kind, event.Null.
//
// A key member is a string, a number or a bool, and makes the key part
// [KeyOf] builds from the event value it decodes to: a string as it is, a
// bool as true/false, a number as the event decoder reads it for a key
// field of its declared kind (spec.KeyKinds). An int field's 3.0 and 3e0
// give "3" and 1e6 gives "1000000" (a number that is no whole int64 is an
// error); a float field's 3 gives "3" and 1000000 gives "1e+06"; a field of
// no declared kind takes a number without '.' or exponent that fits int64
// as an int (42 gives "42"; beyond int64 it is an error, as in events) and
// any other as a float (1.50 gives "1.5", 1e6 gives "1e+06"); a time field's (spec.KeyTimes) RFC 3339 string or
// number of epoch milliseconds gives the milliseconds in decimal, as the
// event's time value does.
//
// A line that is not an object, a missing or null key member, or a value
// of the wrong type is an error that names path:line and the member.
func OpenFile(spec Spec, path string) (*FileSource, error) {
	if err := spec.validate(); err != nil {
		return nil, err
	}
	f := &FileSource{path: path, records: make(table)}
	given := make([]bool, len(spec.Fields)) // a record gives the field, not null
	var members []string
	err := readFile(spec, path, &members, func(line int, key string, _ []string, rec []event.Value) error {
		if _, ok := f.records[key]; ok {
			f.dups.add(path, line, key)
		}
		f.records[key] = rec
		for i, v := range rec {
			given[i] = given[i] || !v.IsNull()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i, fd := range spec.Fields {
		if !given[i] && len(f.records) > 0 {
			f.missing = append(f.missing, fd.Name)
		}
	}
	if f.missing != nil {
		f.members = members
	}
	return f, nil
}

// Missing returns the lookup's fields that no record of the file gives
// (each missing or null in every line): a member named otherwise in the
// file (homeCountry for home_country) gives every event the field's
// default, silently. None for an empty file. With them, members are the
// member names of the file's first line, sorted, to find the one meant.
func (f *FileSource) Missing() (fields, members []string) { return f.missing, f.members }

// Len returns the number of records (distinct keys) of the file.
func (f *FileSource) Len() int { return len(f.records) }

// Duplicates returns how many lines of the file repeated the key of an
// earlier line, and the first of them.
func (f *FileSource) Duplicates() Duplicates { return f.dups }

// Fetch implements [Source].
func (f *FileSource) Fetch(ctx context.Context, keys []string) ([][]event.Value, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return f.records.fetch(keys), nil
}

// Close implements [Source]; it does nothing.
func (f *FileSource) Close() error { return nil }

// String implements [Source]: "file PATH".
func (f *FileSource) String() string { return "file " + f.path }

// maxLine bounds the length of one line of a lookup file.
const maxLine = 16 << 20

var utf8BOM = []byte{0xef, 0xbb, 0xbf}

// readFile calls fn with each record of the lookup file at path, in file
// order: its line number (from 1), its key, its key parts (reused between
// calls) and its values, and sets *members (when not nil) to the member
// names of its first record, sorted. An error of fn stops the read and is
// returned as it is.
func readFile(spec Spec, path string, members *[]string, fn func(line int, key string, parts []string, rec []event.Value) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("enrich: lookup %s: %w", spec.Name, err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			return fmt.Errorf("enrich: lookup %s: %s: %w", spec.Name, path, err)
		}
		defer zr.Close()
		r = zr
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	codec := recordCodec{spec: spec}
	parts := make([]string, len(spec.KeyFields))
	line := 0
	for sc.Scan() {
		line++
		data := sc.Bytes()
		if line == 1 {
			// A UTF-8 byte order mark (Windows tools write one) is not
			// JSON: skipped, as the event sources skip it.
			data = bytes.TrimPrefix(data, utf8BOM)
		}
		data = bytes.TrimSpace(data)
		if len(data) == 0 {
			continue
		}
		if members != nil && *members == nil {
			var obj map[string]json.RawMessage
			if json.Unmarshal(data, &obj) == nil {
				*members = slices.Sorted(maps.Keys(obj))
			}
		}
		key, rec, err := codec.decodeObject(data, parts)
		if err != nil {
			if !sc.Scan() && sc.Err() != nil {
				// The line was cut short by the read's error.
				return readError(spec, path, line-1, sc.Err())
			}
			return fmt.Errorf("enrich: lookup %s: %s:%d: %w", spec.Name, path, line, err)
		}
		if err := fn(line, key, parts, rec); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("enrich: lookup %s: %s:%d: line longer than %d MiB", spec.Name, path, line+1, maxLine>>20)
		}
		return readError(spec, path, line, err)
	}
	return nil
}

// readError is the error of a lookup file whose read failed after line.
func readError(spec Spec, path string, line int, err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("enrich: lookup %s: %s: after line %d: %w (the file ends in the middle of a compressed block: a truncated .gz file?)", spec.Name, path, line, err)
	}
	return fmt.Errorf("enrich: lookup %s: %s: after line %d: %w", spec.Name, path, line, err)
}
