package rules

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Pos is a position in a ruleset file: its byte offset plus one, so that
// the zero Pos ([NoPos]) means "no position". An [Error] carries its
// position resolved to a line and column ([Position]).
type Pos int

// NoPos is the zero Pos: no position.
const NoPos Pos = 0

// IsValid reports whether p is a position.
func (p Pos) IsValid() bool { return p > 0 }

// Offset returns the byte offset of p in its file (-1 for NoPos).
func (p Pos) Offset() int { return int(p) - 1 }

// posAt returns the Pos of byte offset off.
func posAt(off int) Pos { return Pos(off + 1) }

// Position is a resolved position: file name, byte offset, and 1-based line
// and column. The column counts characters (runes), not bytes, so that a
// caret printed under the source line lands on the fault.
type Position struct {
	Filename string
	Offset   int
	Line     int
	Column   int
}

// IsValid reports whether the position has a line.
func (p Position) IsValid() bool { return p.Line > 0 }

// String formats the position as file:line:col (file may be empty; an
// invalid position prints as the file name alone, or "-").
func (p Position) String() string {
	s := p.Filename
	if p.IsValid() {
		if s != "" {
			s += ":"
		}
		s += fmt.Sprintf("%d:%d", p.Line, p.Column)
	}
	if s == "" {
		s = "-"
	}
	return s
}

// srcFile is the text of one ruleset file with the offsets of its lines, to
// turn a Pos into a line and column.
type srcFile struct {
	name  string
	src   string
	lines []int // byte offset of the first character of each line
}

func newSrcFile(name string, src string) *srcFile {
	// A byte-order mark is not part of the first line: columns and
	// snippets start after it.
	first := 0
	if strings.HasPrefix(src, "\ufeff") {
		first = len("\ufeff")
	}
	f := &srcFile{name: name, src: src, lines: []int{first}}
	for i := 0; i < len(src); i++ {
		if src[i] == '\n' {
			f.lines = append(f.lines, i+1)
		}
	}
	return f
}

// position resolves p. Offsets past the end of the file resolve to the end.
func (f *srcFile) position(p Pos) Position {
	if !p.IsValid() {
		return Position{Filename: f.name}
	}
	off := max(min(p.Offset(), len(f.src)), f.lines[0])
	line := sort.Search(len(f.lines), func(i int) bool { return f.lines[i] > off }) - 1
	start := f.lines[line]
	return Position{
		Filename: f.name,
		Offset:   off,
		Line:     line + 1,
		Column:   utf8.RuneCountInString(f.src[start:off]) + 1,
	}
}

// lineText returns the text of the 1-based line, without its line break.
func (f *srcFile) lineText(line int) string {
	if line < 1 || line > len(f.lines) {
		return ""
	}
	start := f.lines[line-1]
	end := len(f.src)
	if line < len(f.lines) {
		end = f.lines[line] - 1
	}
	return strings.TrimSuffix(f.src[start:end], "\r")
}

// maxSnippetWidth is the most characters of a source line a snippet
// shows; a longer line is cut around the caret, with "..." marking the
// cuts.
const maxSnippetWidth = 100

// caret returns the source line of pos and, under it, a caret at the
// column: "  where amout > 5\n        ^". Tabs before the column are kept so
// that the caret lines up on a terminal. What a terminal would not show
// as itself is escaped (a NUL as \x00, an invalid UTF-8 byte as \xff, an
// escape character as \x1b, a byte-order mark as \ufeff), and a line
// longer than maxSnippetWidth is cut around the caret: a binary file
// must not spill its bytes onto the terminal.
func caret(line string, column int) string {
	// One piece per character (column), as it is shown; only the pieces
	// within maxSnippetWidth characters of the caret can show, so a long
	// line costs a scan, not a piece per character.
	chars := utf8.RuneCountInString(line)
	want := min(max(column-1, 0), chars)  // the character under the caret
	first := max(want-maxSnippetWidth, 0) // the character of pieces[0]
	var pieces []string
	for i, c := 0, 0; i < len(line) && c <= want+maxSnippetWidth; c++ {
		r, n := utf8.DecodeRuneInString(line[i:])
		if c >= first {
			pieces = append(pieces, shown(line[i:i+n], r))
		}
		i += n
	}
	at := want - first // the piece under the caret
	lo, hi, width := at, at, 0
	for grew := true; grew; {
		grew = false
		if hi < len(pieces) && width+utf8.RuneCountInString(pieces[hi]) <= maxSnippetWidth {
			width += utf8.RuneCountInString(pieces[hi])
			hi++
			grew = true
		}
		if lo > 0 && width+utf8.RuneCountInString(pieces[lo-1]) <= maxSnippetWidth {
			lo--
			width += utf8.RuneCountInString(pieces[lo])
			grew = true
		}
	}
	var b, pad strings.Builder
	if first+lo > 0 {
		b.WriteString("...")
		pad.WriteString("   ")
	}
	for i, p := range pieces[lo:hi] {
		b.WriteString(p)
		if lo+i >= at {
			continue
		}
		if p == "\t" {
			pad.WriteByte('\t')
		} else {
			pad.WriteString(strings.Repeat(" ", utf8.RuneCountInString(p)))
		}
	}
	if first+hi < chars {
		b.WriteString("...")
	}
	for i := chars; i < column-1; i++ {
		pad.WriteByte(' ') // a column past the end of the line
	}
	b.WriteByte('\n')
	b.WriteString(pad.String())
	b.WriteByte('^')
	return b.String()
}

// shown returns the character r, the bytes c of a line, as a snippet
// shows it: itself, or escaped when a terminal would not show it so.
func shown(c string, r rune) string {
	switch {
	case r == utf8.RuneError && len(c) == 1:
		return fmt.Sprintf(`\x%02x`, c[0])
	case r == '\t' || r != '\ufeff' && unicode.IsPrint(r):
		return c
	}
	q := strconv.QuoteRuneToASCII(r)
	return q[1 : len(q)-1]
}
