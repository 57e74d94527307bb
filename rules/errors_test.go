package rules

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"
)

// markedFiles runs f with each file of dir/*.cep and the regexps of its
// marked lines (by line number): the lines that end in the marker's
// comment, `# MARKER "regexp"` (in which \" stands for ").
func markedFiles(t *testing.T, dir, marker string, f func(t *testing.T, path string, src []byte, want map[int]*regexp.Regexp)) {
	rx := regexp.MustCompile(`# ` + marker + ` "((?:[^"\\]|\\.)*)"`)
	paths, err := filepath.Glob(filepath.Join(dir, "*.cep"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no files in %s (%v)", dir, err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			want := map[int]*regexp.Regexp{}
			for i, line := range strings.Split(string(src), "\n") {
				if m := rx.FindStringSubmatch(line); m != nil {
					want[i+1] = regexp.MustCompile(strings.ReplaceAll(m[1], `\"`, `"`))
				}
			}
			f(t, path, src, want)
		})
	}
}

// checkMarked checks that list has exactly one entry per marked line of
// path, with a message (less prefix) that matches the line's marker.
func checkMarked(t *testing.T, path, prefix string, list ErrorList, want map[int]*regexp.Regexp) {
	got := map[int]bool{}
	for _, e := range list {
		if e.Pos.Filename != path {
			t.Errorf("%v: file name %q, want %q", e, e.Pos.Filename, path)
		}
		got[e.Pos.Line] = true
		msg, ok := strings.CutPrefix(e.Msg, prefix)
		rx, marked := want[e.Pos.Line]
		switch {
		case !ok:
			t.Errorf("%v does not start with %q", e, prefix)
		case !marked:
			t.Errorf("unexpected %v", e)
		case !rx.MatchString(msg):
			t.Errorf("%v does not match %q", e, rx)
		}
	}
	for line, rx := range want {
		if !got[line] {
			t.Errorf("%s:%d: nothing reported, want a message matching %q", path, line, rx)
		}
	}
}

// TestErrorFiles loads every testdata/errors/*.cep file and checks that the
// errors reported are exactly those its `# ERROR "regexp"` markers expect:
// one per marked line, matching the marker.
func TestErrorFiles(t *testing.T) {
	markedFiles(t, "testdata/errors", "ERROR", func(t *testing.T, path string, src []byte, want map[int]*regexp.Regexp) {
		_, err := Load(path, src)
		var list ErrorList
		if err != nil && !errors.As(err, &list) {
			t.Fatalf("Load: %v is not an ErrorList", err)
		}
		checkMarked(t, path, "", list, want)
	})
}

// TestWarningFiles loads every testdata/warnings/*.cep file, which must
// compile, and checks that its warnings are exactly those its `# WARNING
// "regexp"` markers expect: one per marked line, "warning: " and a
// message that matches the marker.
func TestWarningFiles(t *testing.T) {
	markedFiles(t, "testdata/warnings", "WARNING", func(t *testing.T, path string, src []byte, want map[int]*regexp.Regexp) {
		rs, err := Load(path, src)
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		checkMarked(t, path, "warning: ", rs.Warnings, want)
	})
}

// TestWarningsDocumented checks docs/rules.md's table of warnings against
// the warnings of testdata/warnings: each warning starts as a row of the
// table does (one of the messages in backquotes of the row's first cell,
// up to its first ':' or '(', its placeholders X, Y, Q, d and f standing
// for any text), and each row is met by some warning, so that a new
// warning gets its row and a row goes with its warning.
func TestWarningsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/rules.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "\n| warning | example |\n|---|---|\n")
	table, _, _ = strings.Cut(table, "\n\n")
	if !ok {
		t.Fatal(`docs/rules.md has no table with the header "| warning | example |"`)
	}
	quoted := regexp.MustCompile("`([^`]+)`")
	placeholder := regexp.MustCompile(`\b[XYQdf]\b`)
	type row struct {
		text string
		rxs  []*regexp.Regexp // the row's messages, any of which a warning may start as
		met  bool
	}
	var rows []*row
	for _, line := range strings.Split(table, "\n") {
		first, _, _ := strings.Cut(strings.TrimPrefix(line, "| "), " | ")
		r := &row{text: first}
		for _, m := range quoted.FindAllStringSubmatch(first, -1) {
			head := m[1]
			if i := strings.IndexAny(head, ":("); i >= 0 {
				head = strings.TrimSpace(head[:i])
			}
			if head == "" {
				continue // a detail in parentheses, "(the loop gap, ...)"
			}
			rx := placeholder.ReplaceAllString(regexp.QuoteMeta(head), `.+?`)
			r.rxs = append(r.rxs, regexp.MustCompile("^"+rx))
		}
		if len(r.rxs) == 0 {
			t.Fatalf("docs/rules.md: a row of the warnings table without its message: %s", line)
		}
		rows = append(rows, r)
	}
	paths, err := filepath.Glob("testdata/warnings/*.cep")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no files in testdata/warnings (%v)", err)
	}
	for _, path := range paths {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rs, err := Load(path, src)
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		for _, w := range rs.Warnings {
			msg := strings.TrimPrefix(w.Msg, "warning: ")
			found := false
			for _, r := range rows {
				for _, rx := range r.rxs {
					if rx.MatchString(msg) {
						r.met, found = true, true
					}
				}
			}
			if !found {
				t.Errorf("%v: no row of docs/rules.md's table of warnings starts as this one", w)
			}
		}
	}
	for _, r := range rows {
		if !r.met {
			t.Errorf("docs/rules.md's table of warnings has %q, which no warning of testdata/warnings starts as", r.text)
		}
	}
}

// TestErrorCap checks that a file reports at most MaxErrors errors, plus a
// "too many errors" entry, and that a second error on a line is dropped.
func TestErrorCap(t *testing.T) {
	var b strings.Builder
	b.WriteString("ruleset many\nevent time ts\n")
	for i := range 30 {
		fmt.Fprintf(&b, "bogus%d line with two faults }\n", i)
	}
	_, err := Load("many.cep", []byte(b.String()))
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("Load: %v, want an ErrorList", err)
	}
	if len(list) != MaxErrors+1 {
		t.Fatalf("%d errors, want %d:\n%v", len(list), MaxErrors+1, list)
	}
	for i, e := range list[:MaxErrors] {
		if e.Pos.Line != i+3 {
			t.Errorf("error %d on line %d, want %d (one per line)", i, e.Pos.Line, i+3)
		}
	}
	if last := list[MaxErrors]; last.Msg != "too many errors (10 more)" {
		t.Errorf("last error %v, want too many errors (10 more)", last)
	}
	// The first error and the 29 others: the 19 listed after it and the
	// 10 the cap leaves out (it said 20, counting the cap's entry as one).
	if got := list.Error(); !strings.HasPrefix(got, "many.cep:3:1: ") || !strings.HasSuffix(got, "(and 29 more errors)") {
		t.Errorf("Error() = %q", got)
	}
	if n := list.Count(); n != 30 {
		t.Errorf("Count() = %d, want 30", n)
	}
}

// TestWarningCap checks that a file's warnings are capped as its errors
// are, and that the entry ending a capped list is a warning too: it said
// "too many errors" of a file with none (30 rules without a window).
func TestWarningCap(t *testing.T) {
	var b strings.Builder
	b.WriteString("ruleset many\nevent time ts\n")
	for i := range 30 {
		fmt.Fprintf(&b, "rule r%d {\n  pattern {\n    begin a where x == 1\n    followedBy b where x == 2\n  }\n}\n", i)
	}
	rs, err := Load("many.cep", []byte(b.String()))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	list := rs.Warnings
	if len(list) != MaxErrors+1 {
		t.Fatalf("%d warnings, want %d:\n%v", len(list), MaxErrors+1, list)
	}
	for i, e := range list[:MaxErrors] {
		if want := 6*i + 4; e.Pos.Line != want || !strings.HasPrefix(e.Msg, "warning: rule r") {
			t.Errorf("warning %d: %v, want the window warning of line %d", i, e, want)
		}
	}
	if last := list[MaxErrors]; last.Error() != "many.cep:124:3: warning: too many warnings (10 more)" {
		t.Errorf("last warning %v, want many.cep:124:3: warning: too many warnings (10 more)", last)
	}
	if n := list.Count(); n != 30 {
		t.Errorf("Count() = %d, want 30", n)
	}
}

// TestErrorSnippet checks the caret line, with tabs and wide characters
// before the fault.
func TestErrorSnippet(t *testing.T) {
	src := "ruleset x\nevent time ts\nrule r {\n\tdescription \"ünï\" bad\n}\n"
	_, err := Load("s.cep", []byte(src))
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 1 {
		t.Fatalf("Load: %v, want one error", err)
	}
	e := list[0]
	// The first *Error is found in the list, also wrapped.
	var first *Error
	if !errors.As(fmt.Errorf("deploy: %w", err), &first) || first != e {
		t.Errorf("errors.As(*Error) of the wrapped list: %v, want its first error", first)
	}
	if got, want := e.Error(), `s.cep:4:20: unexpected "bad" at the end of the line`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got, want := e.Snippet(), "\tdescription \"ünï\" bad\n\t                  ^"; got != want {
		t.Errorf("Snippet() =\n%s\nwant\n%s", got, want)
	}
	var b strings.Builder
	if err := list.Print(&b, true); err != nil {
		t.Fatal(err)
	}
	if want := "s.cep:4:20: unexpected \"bad\" at the end of the line\n    \tdescription \"ünï\" bad\n    \t                  ^\n"; b.String() != want {
		t.Errorf("Print =\n%q\nwant\n%q", b.String(), want)
	}
}

// TestSnippetOfBinaryLine: what a terminal would not show as itself is
// escaped, and a long line is cut around the caret, with "..." at the cuts.
func TestSnippetOfBinaryLine(t *testing.T) {
	for _, c := range []struct {
		line   string
		column int
		want   string
	}{
		{"a\x00b\x1b[31mc", 3, `a\x00b\x1b[31mc` + "\n" + "     ^"},
		{"\xff\xfeok", 3, `\xff\xfeok` + "\n" + "        ^"},
		{"x\u200by", 3, `x\u200by` + "\n" + "       ^"},
		{strings.Repeat("a", 300), 150, "..." + strings.Repeat("a", 100) + "...\n" + strings.Repeat(" ", 3+50) + "^"},
		{strings.Repeat("a", 300), 2, strings.Repeat("a", 100) + "...\n" + " ^"},
		{strings.Repeat("a", 300), 300, "..." + strings.Repeat("a", 100) + "\n" + strings.Repeat(" ", 3+99) + "^"},
		{strings.Repeat("\x00", 200), 1, strings.Repeat(`\x00`, 25) + "...\n^"},
		{"ab", 5, "ab\n    ^"},
	} {
		if got := caret(c.line, c.column); got != c.want {
			t.Errorf("caret(%q, %d) =\n%s\nwant\n%s", c.line, c.column, got, c.want)
		}
	}
	// A binary file: one error, its snippet short and printable.
	src := "\x7fELF\x02\x01\x01\x00" + strings.Repeat("\x00\x1b[2J", 1000) + "\n"
	_, err := Load("bin.cep", []byte(src))
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 1 {
		t.Fatalf("Load: %v, want one error", err)
	}
	s := list[0].Snippet()
	if len(s) > 2*(maxSnippetWidth+10) || strings.ContainsAny(s, "\x00\x1b\x7f") {
		t.Errorf("snippet of a binary line (%d bytes): %q", len(s), s)
	}
}

// TestSnippetOfHugeLine: the snippet of a 10 MB line is cut as a short
// line's is, and costs no memory per character of the line (it took a
// string header per character: 160 MB, and seconds, for a 10 MB
// expression refused by the nesting bounds).
func TestSnippetOfHugeLine(t *testing.T) {
	const size = 10 << 20
	line := strings.Repeat("(", size/2) + "ü" + strings.Repeat("x", size/2)
	for _, c := range []struct {
		column int
		want   string
	}{
		{1, strings.Repeat("(", 100) + "...\n^"},
		{size/2 + 1, "..." + strings.Repeat("(", 50) + "ü" + strings.Repeat("x", 49) + "...\n" + strings.Repeat(" ", 3+50) + "^"},
		{size + 1, "..." + strings.Repeat("x", 100) + "\n" + strings.Repeat(" ", 3+99) + "^"},
		{size + 2, "..." + strings.Repeat("x", 100) + "\n" + strings.Repeat(" ", 3+100) + "^"},
		{size + 4, "..." + strings.Repeat("x", 100) + "\n" + strings.Repeat(" ", 3+100+2) + "^"},
	} {
		var before, after goruntime.MemStats
		goruntime.ReadMemStats(&before)
		got := caret(line, c.column)
		goruntime.ReadMemStats(&after)
		if got != c.want {
			t.Errorf("caret(10 MB line, %d) =\n%.300s\nwant\n%.300s", c.column, got, c.want)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
			t.Errorf("caret(10 MB line, %d) allocated %d bytes, want under 64 KiB", c.column, n)
		}
	}
}

// TestByteOrderMark: a UTF-8 byte-order mark at the start of a file is
// skipped; columns and snippets of the first line start after it.
func TestByteOrderMark(t *testing.T) {
	src := "\ufeffruleset b\nevent time ts\nrule r {\n  key k\n  pattern {\n    begin a where x > 1\n  }\n}\n"
	rs, err := Load("bom.cep", []byte(src))
	if err != nil {
		t.Fatalf("Load of a file with a byte-order mark: %v", err)
	}
	plain, err := Load("bom.cep", []byte(strings.TrimPrefix(src, "\ufeff")))
	if err != nil || rs.Hash != plain.Hash {
		t.Errorf("versions with and without the mark: %v, %v (%v)", rs.Hash, plain.Hash, err)
	}
	_, err = Load("bom.cep", []byte("\ufeffrulez b\n"))
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 1 {
		t.Fatalf("Load: %v, want one error", err)
	}
	if got, want := list[0].Error()+"\n"+list[0].Snippet(), "bom.cep:1:1: a ruleset file starts with 'ruleset NAME', found \"rulez\"\nrulez b\n^"; got != want {
		t.Errorf("error on the first line:\n%s\nwant\n%s", got, want)
	}
	// The mark is valid only at the very start.
	if _, err := Load("bom.cep", []byte("ruleset b\n\ufeffevent time ts\n")); err == nil {
		t.Error("a byte-order mark inside the file was accepted")
	}
}

// TestBinaryFile: a file with a NUL byte (a compressed events file given
// for a ruleset) is one error at that byte, not a page of stray
// characters.
func TestBinaryFile(t *testing.T) {
	src := []byte("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03rule r {\n")
	_, err := Load("events.jsonl.gz", src)
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 1 {
		t.Fatalf("Load of a binary file: %v, want one error", err)
	}
	const want = "events.jsonl.gz:1:4: not a ruleset: the file holds a NUL byte (a binary or compressed file?); a ruleset is text"
	if got := list[0].Error(); got != want {
		t.Errorf("error %q, want %q", got, want)
	}
}

// TestExprNodeBound checks the error of a condition over expr-lang's bound
// of 10,000 nodes (a list of 9,998 values, 10,001 nodes with the list, the
// field and the operator; one value fewer is accepted): it names the bound
// and the way out, as the bound on tokens does, at the closing bracket, where
// expr's parser passed it. It was expr's "compilation failed: expression
// exceeds maximum allowed nodes", which the error catalogue did not list.
func TestExprNodeBound(t *testing.T) {
	src := func(values int) string {
		var b strings.Builder
		b.WriteString("ruleset big\nevent time ts\nrule r {\n  key card\n  pattern {\n    begin a where kind in [")
		for i := range values {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%q", fmt.Sprint("t", i))
		}
		b.WriteString("]\n  }\n}\n")
		return b.String()
	}
	if _, err := Load("big.cep", []byte(src(9997))); err != nil {
		t.Fatalf("Load of 9,997 values: %v", err)
	}
	s := src(9998)
	_, err := Load("big.cep", []byte(s))
	line := s[strings.Index(s, "    begin") : strings.Index(s, "]\n")+1]
	want := fmt.Sprintf("big.cep:6:%d: an expression of more than 10000 nodes: split it (a long list of values is a lookup)", len(line))
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 1 || list[0].Error() != want {
		t.Fatalf("Load of 9,998 values: %v, want %s", err, want)
	}
}

// TestNestingBounds checks that a ruleset built to exhaust the parsers
// (one sent to serve's control API, up to 64 MiB) is refused with an error
// at the place that passes a bound, and that the lines after it are still
// parsed. Without the bounds, 5 million '(' or '-' in a condition overflowed
// the goroutine stack (a fatal error: serve's process died), 20,000 nested
// groups took 10 s and 4.8 GB, and 20,000 stages in a pattern more than 6 GB.
func TestNestingBounds(t *testing.T) {
	const head = "ruleset deep\nevent time ts\nrule r {\n  key card\n  pattern {\n"
	// tail ends the rule and adds a faulty one: its error shows that the
	// parse went on after the bound.
	const tail = "  }\n}\nrule after {\n  colour red\n}\n"
	const afterMsg = `expected description, severity, key, pattern, skip, emit or timeout, found "colour"`
	stages := func(n int) string {
		var b strings.Builder
		b.WriteString("    begin a where amount > 1\n")
		for i := range n - 1 {
			fmt.Fprintf(&b, "    followedBy s%d where amount > 1\n", i)
		}
		return b.String()
	}
	groups := func(n int) string {
		return "    begin a where amount > 1\n    followedBy (\n" + strings.Repeat("    begin (\n", n-1) +
			"    begin b where (amount > 2)\n" + strings.Repeat("    )\n", n)
	}
	for _, tc := range []struct {
		name, pattern string
		ok            bool
		line, col     int
		msg           string
	}{
		{"brackets at the bound", "    begin a where " + strings.Repeat("(", MaxExprDepth) + "amount > 1" + strings.Repeat(")", MaxExprDepth) + "\n", true, 0, 0, ""},
		{"brackets past it", "    begin a where " + strings.Repeat("(", MaxExprDepth+1) + "amount > 1" + strings.Repeat(")", MaxExprDepth+1) + "\n",
			false, 6, len("    begin a where ") + MaxExprDepth + 1, "brackets nested deeper than 100"},
		{"brackets over lines", "    begin a where " + strings.Repeat("(\n", MaxExprDepth+1) + "amount > 1" + strings.Repeat(")\n", MaxExprDepth+1),
			false, 6 + MaxExprDepth, 1, "brackets nested deeper than 100"},
		{"prefix operators", "    begin a where " + strings.Repeat("-", 5_000_000) + "amount > 1\n",
			false, 6, len("    begin a where ") + MaxExprTokens + 1, "an expression of more than 100000 tokens: split it (a long list of values is a lookup)"},
		{"words", "    begin a where " + strings.Repeat("not ", MaxExprTokens) + "true\n",
			false, 6, len("    begin a where ") + 4*MaxExprTokens + 1, "an expression of more than 100000 tokens: split it (a long list of values is a lookup)"},
		{"groups at the bound", groups(MaxGroupDepth), true, 0, 0, ""},
		{"groups past it", groups(MaxGroupDepth + 1), false, 7 + MaxGroupDepth, 11, "groups nested deeper than 32"},
		{"many groups past it", groups(100_000), false, 7 + MaxGroupDepth, 11, "groups nested deeper than 32"},
		{"stages at the bound", stages(MaxStages), true, 0, 0, ""},
		{"stages past it", stages(MaxStages + 1), false, 6 + MaxStages, 16, "a pattern of more than 256 stages"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := head + tc.pattern + tail
			_, err := ParseFile("deep.cep", []byte(src))
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("ParseFile: %v, want an ErrorList", err)
			}
			afterLine := strings.Count(src, "\n") - 1 // colour red
			var got []string
			for _, e := range list {
				got = append(got, fmt.Sprintf("%d:%d: %s", e.Pos.Line, e.Pos.Column, e.Msg))
			}
			want := []string{fmt.Sprintf("%d:3: %s", afterLine, afterMsg)}
			if !tc.ok {
				want = append([]string{fmt.Sprintf("%d:%d: %s", tc.line, tc.col, tc.msg)}, want...)
			}
			if !slices.Equal(got, want) {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}
