package difftest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cepheus-cep/cepheus/internal/conformance"
)

// FileCase is a case as written to a case file: the input, plus the fields
// a runner never reads (source, notes) and, for a minimal reproducing case,
// what Flink produced as the case's expectation.
type FileCase struct {
	conformance.Input
	Source string `json:"source,omitempty"`
	Notes  string `json:"notes,omitempty"`

	// Flink's result as expectations of the conformance format, so that a
	// minimal case can be run by the conformance runner (make conformance
	// CONFORMANCE_DIR=build/diff-flink) and fails until Cepheus agrees.
	CompareMode          string                     `json:"compare_mode,omitempty"`
	ExpectedMatchesSeq   [][]uint64                 `json:"expected_matches_seq,omitempty"`
	ExpectedTimeoutsSeq  [][]uint64                 `json:"expected_timeouts_seq,omitempty"`
	ExpectedTimeoutTimes []int64                    `json:"expected_timeout_timestamps,omitempty"`
	ExpectedOutput       []conformance.ExpectedItem `json:"expected_output_sequence,omitempty"`
	ExpectedLateSeq      []uint64                   `json:"expected_late_events_seq,omitempty"`
	ExpectedError        string                     `json:"expected_error,omitempty"`
}

// caseSource is the source field of generated cases.
const caseSource = "internal/difftest (generated)"

// WriteCaseFile writes cases to path as a conformance case file,
// {"meta": ..., "cases": [...]}, one case per line, or indented when
// indent is set. Members that are null, false or "" are left out: every
// runner reads a missing member as that default, and the Java runner would
// take an empty string literally.
func WriteCaseFile(path, description string, cases []FileCase, indent bool) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "{\"meta\": {\"format\": \"flink-cep-acceptance/v1\", \"description\": %s, \"case_count\": %d},\n \"cases\": [",
		mustQuote(description), len(cases))
	for i := range cases {
		raw, err := json.Marshal(&cases[i])
		if err != nil {
			return fmt.Errorf("difftest: encode case %s: %w", cases[i].ID, err)
		}
		c, err := compactJSON(raw)
		if err != nil {
			return fmt.Errorf("difftest: encode case %s: %w", cases[i].ID, err)
		}
		if indent {
			var ind bytes.Buffer
			if err := json.Indent(&ind, c, "  ", "  "); err != nil {
				return fmt.Errorf("difftest: encode case %s: %w", cases[i].ID, err)
			}
			c = ind.Bytes()
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n  ")
		b.Write(c)
	}
	b.WriteString("\n ]}\n")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("difftest: %w", err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("difftest: %w", err)
	}
	return nil
}

func mustQuote(s string) string {
	b, err := marshalNoEscape(s)
	if err != nil {
		panic(err) // a string always encodes
	}
	return string(b)
}

// marshalNoEscape is json.Marshal without HTML escaping, so that a
// condition reads "price <= 2.0", not "price \u003c= 2.0".
func marshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// compactJSON re-encodes a JSON value without the object members whose
// value is null, false or "", keeping the order of the others.
func compactJSON(b []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out bytes.Buffer
	if err := copyValue(dec, &out); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func copyValue(dec *json.Decoder, out *bytes.Buffer) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		v, err := marshalNoEscape(tok)
		if err != nil {
			return err
		}
		out.Write(v)
		return nil
	}
	switch d {
	case '{':
		out.WriteByte('{')
		n := 0
		for dec.More() {
			key, err := dec.Token()
			if err != nil {
				return err
			}
			var val bytes.Buffer
			if err := copyValue(dec, &val); err != nil {
				return err
			}
			switch val.String() {
			case "null", "false", `""`:
				continue
			}
			if n > 0 {
				out.WriteByte(',')
			}
			n++
			k, err := marshalNoEscape(key)
			if err != nil {
				return err
			}
			out.Write(k)
			out.WriteByte(':')
			out.Write(val.Bytes())
		}
		out.WriteByte('}')
	case '[':
		out.WriteByte('[')
		for n := 0; dec.More(); n++ {
			if n > 0 {
				out.WriteByte(',')
			}
			if err := copyValue(dec, out); err != nil {
				return err
			}
		}
		out.WriteByte(']')
	}
	_, err = dec.Token() // the closing delimiter
	return err
}
