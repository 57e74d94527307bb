package benchmarks

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/cepheus-cep/cepheus/cep"
	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/internal/gen"
)

// WriteData generates the workload's data (n events; n <= 0: all) and
// writes it as CSV to path.
func (w *Workload) WriteData(path string, n int) (err error) {
	recs, err := w.Generate(n)
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	return gen.WriteBenchCSV(f, w.Columns, recs)
}

// ReadData reads a workload data file: CSV with a header line naming
// fields of rs's schema, one of them its event time field (epoch ms). The
// events come out decoded by the schema, in file order, with Seq the
// 1-based row number (the header is row 0), which is how match signatures
// name them on both engines. An empty cell is null. Equal strings share
// one copy, and events and values are allocated in blocks, so the input
// costs the heap few objects.
func ReadData(r io.Reader, rs *cep.Ruleset) ([]*event.Event, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	header, err := br.ReadSlice('\n')
	if err != nil {
		return nil, fmt.Errorf("data: no header line: %w", err)
	}
	type column struct {
		slot int
		kind event.Kind
		time bool
	}
	var cols []column
	hasTime := false
	for _, name := range bytes.Split(bytes.TrimRight(header, "\r\n"), []byte{','}) {
		slot, ok := rs.Schema.Slot(string(name))
		if !ok {
			return nil, fmt.Errorf("data: column %q is not in the schema of ruleset %s", name, rs.Name)
		}
		isTime := string(name) == rs.TimeField
		hasTime = hasTime || isTime
		cols = append(cols, column{slot: slot, kind: rs.Schema.Field(slot).Kind, time: isTime})
	}
	if !hasTime {
		return nil, fmt.Errorf("data: no %s column (the event time)", rs.TimeField)
	}
	const block = 1 << 14
	nf := rs.Schema.Len()
	var (
		evs     []*event.Event
		evBlock []event.Event
		vBlock  []event.Value
		strs    = map[string]string{}
	)
	for row := 1; ; row++ {
		line, err := br.ReadSlice('\n')
		if err == io.EOF && len(line) == 0 {
			break
		}
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("data: row %d: %w", row, err)
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(evBlock) == 0 {
			evBlock = make([]event.Event, block)
			vBlock = make([]event.Value, block*nf)
		}
		ev := &evBlock[0]
		evBlock = evBlock[1:]
		ev.Fields, vBlock = vBlock[:nf:nf], vBlock[nf:]
		ev.Seq = uint64(row)
		for i, c := range cols {
			var cell []byte
			if j := bytes.IndexByte(line, ','); j >= 0 {
				cell, line = line[:j], line[j+1:]
			} else {
				cell, line = line, nil
				if i < len(cols)-1 {
					return nil, fmt.Errorf("data: row %d: %d cells, want %d", row, i+1, len(cols))
				}
			}
			if len(cell) == 0 {
				continue // null
			}
			v, err := cellValue(cell, c.kind, c.time, strs)
			if err != nil {
				return nil, fmt.Errorf("data: row %d, column %d: %w", row, i+1, err)
			}
			ev.Fields[c.slot] = v
			if c.time {
				ms, _ := v.AsInt()
				ev.Time = event.Time(ms)
			}
		}
		if line != nil {
			return nil, fmt.Errorf("data: row %d: more than %d cells", row, len(cols))
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

func cellValue(cell []byte, kind event.Kind, isTime bool, strs map[string]string) (event.Value, error) {
	switch {
	case isTime || kind == event.KindInt:
		i, err := strconv.ParseInt(string(cell), 10, 64)
		return event.Int(i), err
	case kind == event.KindFloat:
		f, err := strconv.ParseFloat(string(cell), 64)
		return event.Float(f), err
	case kind == event.KindBool:
		b, err := strconv.ParseBool(string(cell))
		return event.Bool(b), err
	}
	s, ok := strs[string(cell)]
	if !ok {
		s = string(cell)
		strs[s] = s
	}
	return event.String(s), nil
}

// LoadData reads the data file at path (see [ReadData]).
func LoadData(path string, rs *cep.Ruleset) ([]*event.Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadData(f, rs)
}
