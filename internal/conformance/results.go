package conformance

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
)

// ResultsFormat is the format tag of a results file.
const ResultsFormat = "cepheus-conformance-results/v1"

// Results is what the engine produced for each case, by case id.
type Results struct {
	Cases map[string]*Result
}

// Result is what the engine produced for one case. Slices are never nil
// in a written file (they are written as []).
type Result struct {
	// Matches are every match, in emission order.
	Matches []MatchResult `json:"matches"`
	// Timeouts are the timed-out partial matches, in emission order.
	Timeouts []TimeoutResult `json:"timeouts"`
	// Output is the main output of an operator case, in order.
	Output []OutputItem `json:"output"`
	// Late lists the seqs of the late elements, in arrival order.
	Late []uint64 `json:"late"`
	// Error is set when the case could not be built or processing failed.
	Error *string `json:"error"`
	// ErrorClass says where Error arose: ErrorCompile (the pattern was
	// rejected before any input) or ErrorRun (processing failed). Empty
	// when there is no error, or in files that predate it.
	ErrorClass string `json:"error_class,omitempty"`
	// ErrorStep is the step (see MatchResult.Step) whose call failed, when
	// processing failed.
	ErrorStep *int `json:"error_step,omitempty"`
	// Rules holds, for a case with several rules (Input.Rules), one result
	// per rule in rule order; the other fields then stay empty, but for an
	// Error that stopped the whole case.
	Rules []*Result `json:"rules,omitempty"`
}

// The error classes of Result.ErrorClass.
const (
	ErrorCompile = "compile" // the pattern was rejected before any input was processed
	ErrorRun     = "run"     // processing failed (a throw-on-miss skip that missed, a crash, ...)
)

// Via values: what released a match.
const (
	ViaEvent     = "event"     // processing an event
	ViaTime      = "time"      // advancing time (nfa_harness) or the processing clock (operator)
	ViaWatermark = "watermark" // a watermark (operator)
)

// MatchResult is one match.
type MatchResult struct {
	Via    string    `json:"via"`
	Stages StageSeqs `json:"stages"`
	// Step is the 0-based step whose call released the match: the index
	// of the event in an nfa_harness case, of the operator step in an
	// operator_harness case. Nil in files that predate it.
	Step *int `json:"step,omitempty"`
	// Timestamp is the operator's timestamp of the match (Flink's
	// PatternProcessFunction.Context.timestamp(): the element's or the
	// time advance's timestamp); nil in nfa_harness cases.
	Timestamp *int64 `json:"timestamp,omitempty"`
	// Wake is, for a match released while the operator fired a key's timer,
	// the time of that timer (operator only; nil when an element released
	// it directly).
	Wake *int64 `json:"wake,omitempty"`
}

// TimeoutResult is one timed-out partial match and the timestamp reported
// with it.
type TimeoutResult struct {
	Stages    StageSeqs `json:"stages"`
	Timestamp int64     `json:"timestamp"`
	// Step is the step whose call emitted the timeout (see
	// MatchResult.Step); Wake the timer that woke the key (see
	// MatchResult.Wake).
	Step *int   `json:"step,omitempty"`
	Wake *int64 `json:"wake,omitempty"`
}

// OutputItem is one item of an operator's main output: a watermark (when
// Watermark is set) or a match flattened stage by stage.
type OutputItem struct {
	Watermark *int64
	Match     []uint64
}

// MarshalJSON writes {"watermark": w} or {"match": [seqs]}.
func (o OutputItem) MarshalJSON() ([]byte, error) {
	if o.Watermark != nil {
		return fmt.Appendf(nil, `{"watermark":%d}`, *o.Watermark), nil
	}
	seqs, err := json.Marshal(nonNil(o.Match))
	if err != nil {
		return nil, err
	}
	return append(append([]byte(`{"match":`), seqs...), '}'), nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (o *OutputItem) UnmarshalJSON(b []byte) error {
	var raw struct {
		Watermark *int64   `json:"watermark"`
		Match     []uint64 `json:"match"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if (raw.Watermark == nil) == (raw.Match == nil) {
		return fmt.Errorf("output item %s: want exactly one of watermark and match", b)
	}
	o.Watermark, o.Match = raw.Watermark, raw.Match
	return nil
}

// StageSeqs are the events of a match by stage, in pattern stage order. In
// JSON it is an object whose keys keep that order (encoding/json would
// sort the keys of a map).
type StageSeqs []StageEvents

// StageEvents are the seqs of the events one stage took, in the order it
// took them.
type StageEvents struct {
	Stage string
	Seqs  []uint64
}

// Flat returns the seqs stage by stage.
func (s StageSeqs) Flat() []uint64 {
	var out []uint64
	for _, st := range s {
		out = append(out, st.Seqs...)
	}
	return out
}

// Names returns the stage names in order.
func (s StageSeqs) Names() []string {
	out := make([]string, len(s))
	for i, st := range s {
		out[i] = st.Stage
	}
	return out
}

// MarshalJSON writes the object with its keys in slice order.
func (s StageSeqs) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, st := range s {
		if i > 0 {
			b.WriteByte(',')
		}
		name, err := json.Marshal(st.Stage)
		if err != nil {
			return nil, err
		}
		seqs, err := json.Marshal(nonNil(st.Seqs))
		if err != nil {
			return nil, err
		}
		b.Write(name)
		b.WriteByte(':')
		b.Write(seqs)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads the object keeping its key order.
func (s *StageSeqs) UnmarshalJSON(b []byte) error {
	d := json.NewDecoder(bytes.NewReader(b))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return fmt.Errorf("stages: want an object, got %s", b)
	}
	out := StageSeqs{}
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return fmt.Errorf("stages: %w", err)
		}
		name, _ := t.(string) // object keys are always strings
		var seqs []uint64
		if err := d.Decode(&seqs); err != nil {
			return fmt.Errorf("stages: stage %q: %w", name, err)
		}
		out = append(out, StageEvents{Stage: name, Seqs: seqs})
	}
	if _, err := d.Token(); err != nil {
		return fmt.Errorf("stages: %w", err)
	}
	*s = out
	return nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// normalize replaces nil slices by empty ones, so that they are written as
// [] rather than null.
func (r *Result) normalize() {
	r.Matches = nonNil(r.Matches)
	r.Timeouts = nonNil(r.Timeouts)
	r.Output = nonNil(r.Output)
	r.Late = nonNil(r.Late)
	for _, sub := range r.Rules {
		sub.normalize()
	}
}

// WriteTo writes the results file: the format tag, then one case per line
// in id order.
func (rs *Results) WriteTo(w io.Writer) (int64, error) {
	cw := &countingWriter{w: bufio.NewWriter(w)}
	ids := make([]string, 0, len(rs.Cases))
	for id := range rs.Cases {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	fmt.Fprintf(cw, "{\"format\": %q,\n \"results\": {", ResultsFormat)
	for i, id := range ids {
		r := rs.Cases[id]
		r.normalize()
		key, err := json.Marshal(id)
		if err != nil {
			return cw.n, err
		}
		val, err := json.Marshal(r)
		if err != nil {
			return cw.n, fmt.Errorf("conformance: encode result of %s: %w", id, err)
		}
		sep := ","
		if i == 0 {
			sep = ""
		}
		fmt.Fprintf(cw, "%s\n  %s: %s", sep, key, val)
	}
	fmt.Fprint(cw, "\n }}\n")
	if err := cw.w.Flush(); err != nil && cw.err == nil {
		cw.err = err
	}
	return cw.n, cw.err
}

// WriteFile writes the results file at path (its directory must exist).
func (rs *Results) WriteFile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("conformance: %w", err)
	}
	_, werr := rs.WriteTo(f)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		return fmt.Errorf("conformance: write %s: %w", path, err)
	}
	return nil
}

// countingWriter remembers the first write error, so that WriteTo can
// write without checking each call.
type countingWriter struct {
	w   *bufio.Writer
	n   int64
	err error
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}

// ReadResults reads a results file.
func ReadResults(path string) (*Results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("conformance: %w", err)
	}
	rs, err := DecodeResults(b)
	if err != nil {
		return nil, fmt.Errorf("conformance: %s: %w", path, err)
	}
	return rs, nil
}

// DecodeResults parses the contents of a results file.
func DecodeResults(b []byte) (*Results, error) {
	var f struct {
		Format  string             `json:"format"`
		Results map[string]*Result `json:"results"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, err
	}
	if f.Format != ResultsFormat {
		return nil, fmt.Errorf("format %q, want %q", f.Format, ResultsFormat)
	}
	if f.Results == nil {
		f.Results = map[string]*Result{}
	}
	return &Results{Cases: f.Results}, nil
}
