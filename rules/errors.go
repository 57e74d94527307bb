package rules

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/cepheus-cep/cepheus/rules/internal/cond"
)

// MaxErrors is the most errors reported for one file; an [ErrorList] that
// had more ends with a "too many errors (N more)" entry. It bounds a file's
// warnings too (their list then ends with "warning: too many warnings (N
// more)").
const MaxErrors = 20

// The entries that end a list capped at [MaxErrors].
const (
	tooManyErrors   = "too many errors"
	tooManyWarnings = "warning: too many warnings"
)

// Error is an error in a ruleset file, at a position. Error() is
// "file:line:col: message"; [Error.Snippet] adds the source line and a caret
// under the fault.
type Error struct {
	Pos Position
	Msg string
	// line is the source line of Pos, for the snippet.
	line string
}

func (e *Error) Error() string { return e.Pos.String() + ": " + e.Msg }

// Snippet returns the source line of the error with a caret under its
// column, or "" when the position has no line.
func (e *Error) Snippet() string {
	if !e.Pos.IsValid() {
		return ""
	}
	return caret(e.line, e.Pos.Column)
}

// WithLines returns l with each error's source line, for its snippet,
// taken from src, the source its positions are in: errors that came
// without theirs (over the control API, which sends positions and
// messages only).
func (l ErrorList) WithLines(src []byte) ErrorList {
	lines := strings.Split(string(src), "\n")
	for _, e := range l {
		if e.line == "" && e.Pos.Line >= 1 && e.Pos.Line <= len(lines) {
			e.line = strings.TrimSuffix(lines[e.Pos.Line-1], "\r")
		}
	}
	return l
}

// ErrorList is a list of errors, sorted by position once complete. The
// front end returns one as its error (see [ErrorList.Err]); find it, or
// its first *[Error], with errors.As.
type ErrorList []*Error

// add appends an error at p of f.
func (l *ErrorList) add(f *srcFile, p Pos, msg string) {
	pos := f.position(p)
	*l = append(*l, &Error{Pos: pos, Msg: msg, line: f.lineText(pos.Line)})
}

func (l ErrorList) Len() int      { return len(l) }
func (l ErrorList) Swap(i, j int) { l[i], l[j] = l[j], l[i] }

// Less orders errors by file, line, column, then message.
func (l ErrorList) Less(i, j int) bool {
	a, b := l[i].Pos, l[j].Pos
	if a.Filename != b.Filename {
		return a.Filename < b.Filename
	}
	if a.Line != b.Line {
		return a.Line < b.Line
	}
	if a.Column != b.Column {
		return a.Column < b.Column
	}
	return l[i].Msg < l[j].Msg
}

// Sort sorts the list by position (stable for equal positions).
func (l ErrorList) Sort() { sort.Stable(l) }

// finish sorts the list, keeps only the first error of each line (a second
// error on a line is most often a consequence of the first) and caps the
// list at [MaxErrors] per file, ending a longer one with an entry of the
// message more ("too many errors", or for warnings "warning: too many
// warnings") and how many it leaves out ("(N more)").
func (l ErrorList) finish(more string) ErrorList {
	l.Sort()
	var out ErrorList
	perFile := map[string]int{}
	capped := map[string]*Error{}
	for i, e := range l {
		if i > 0 {
			prev := l[i-1].Pos
			if prev.Filename == e.Pos.Filename && prev.Line == e.Pos.Line {
				continue
			}
		}
		n := perFile[e.Pos.Filename]
		perFile[e.Pos.Filename] = n + 1
		switch {
		case n < MaxErrors:
			out = append(out, e)
		case n == MaxErrors:
			capped[e.Pos.Filename] = &Error{Pos: e.Pos, Msg: more, line: e.line}
			out = append(out, capped[e.Pos.Filename])
		}
	}
	for file, e := range capped {
		e.Msg += fmt.Sprintf(" (%d more)", perFile[file]-MaxErrors)
	}
	return out
}

// Err returns the list as an error, or nil when it is empty.
func (l ErrorList) Err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}

// Error returns the first error, and how many more there are.
func (l ErrorList) Error() string {
	switch len(l) {
	case 0:
		return "no errors"
	case 1:
		return l[0].Error()
	}
	return fmt.Sprintf("%s (and %d more errors)", l[0], l.Count()-1)
}

// Unwrap returns the list's errors, so that errors.As finds the first
// *[Error] in an error that wraps a list (errors.As with an ErrorList
// target finds the list itself).
func (l ErrorList) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// Count is the number of errors (or warnings) the list stands for: its
// entries, the entry that ends a capped list counting as the N it leaves
// out ("too many errors (N more)"). A list rebuilt from the messages of
// another (the control API's problems) counts the same.
func (l ErrorList) Count() int {
	n := 0
	for _, e := range l {
		n += e.count()
	}
	return n
}

// count is how many errors e stands for: the N of the entry that ends a
// capped list, else 1.
func (e *Error) count() int {
	for _, more := range []string{tooManyErrors, tooManyWarnings} {
		rest, ok := strings.CutPrefix(e.Msg, more+" (")
		if !ok {
			continue
		}
		var n int
		if _, err := fmt.Sscanf(rest, "%d more)", &n); err == nil && n > 0 && strings.HasSuffix(rest, " more)") {
			return n
		}
	}
	return 1
}

// Print writes every error on its own line, each followed by its source
// line and a caret when snippets is true. An empty list writes nothing,
// not even an empty write (which /dev/full refuses).
func (l ErrorList) Print(w io.Writer, snippets bool) error {
	if len(l) == 0 {
		return nil
	}
	var b strings.Builder
	for _, e := range l {
		b.WriteString(e.Error())
		b.WriteByte('\n')
		if s := e.Snippet(); snippets && s != "" {
			for line := range strings.Lines(s) {
				b.WriteString("    ")
				b.WriteString(line)
			}
			b.WriteByte('\n')
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Suggest returns " (did you mean x?)" for the candidate x closest to name,
// as the errors of this package say it, or "" when none is close enough
// to be a slip. The command line names its commands with it too.
func Suggest(name string, candidates []string) string { return cond.Suggest(name, candidates) }

// Closest returns the candidate that Suggest names, or "" (the command
// line suggests its flags with it, written with their dash).
func Closest(name string, candidates []string) string { return cond.Closest(name, candidates) }
