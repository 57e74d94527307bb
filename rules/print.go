package rules

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Format returns the canonical source of f: two-space indentation, one
// item per line, quantifiers and rule items in their fixed order, durations
// and names in canonical form, runs of blank lines collapsed to one, and
// every comment kept. Formatting canonical source changes nothing.
func Format(f *File) []byte {
	p := &printer{comments: true}
	p.file(f)
	return []byte(p.String())
}

// printer prints syntax trees as canonical source.
type printer struct {
	b        strings.Builder
	indent   int
	comments bool // print comments (off for content hashes)
	// marks are the offsets in b where a line's code ends and its line
	// comment follows: String aligns the comments of adjacent lines.
	marks []int
}

// String returns what p printed, the line comments of adjacent lines
// aligned to one column (one space after the longest code among them),
// as gofmt aligns them.
func (p *printer) String() string {
	s := p.b.String()
	if len(p.marks) < 2 {
		return s
	}
	type mark struct{ at, start, end, width int } // the mark, its line's start and end, its code's width
	ms := make([]mark, len(p.marks))
	for i, at := range p.marks {
		start := strings.LastIndexByte(s[:at], '\n') + 1
		end := at + strings.IndexByte(s[at:], '\n')
		ms[i] = mark{at: at, start: start, end: end, width: utf8.RuneCountInString(s[start:at])}
	}
	var b strings.Builder
	done := 0 // s is copied up to here
	for i := 0; i < len(ms); {
		// A run of marks on adjacent lines.
		j, width := i+1, ms[i].width
		for ; j < len(ms) && ms[j].start == ms[j-1].end+1; j++ {
			width = max(width, ms[j].width)
		}
		for _, m := range ms[i:j] {
			b.WriteString(s[done:m.at])
			b.WriteString(strings.Repeat(" ", width-m.width))
			done = m.at
		}
		i = j
	}
	b.WriteString(s[done:])
	return b.String()
}

// printNode returns the canonical source of one node printed at
// indentation 0, with its comments.
func printNode(fn func(p *printer)) string {
	p := &printer{comments: true}
	fn(p)
	return p.String()
}

func (p *printer) pad() {
	for range p.indent {
		p.b.WriteString("  ")
	}
}

// doc prints comment lines ("" is a blank line).
func (p *printer) doc(doc []string) {
	if !p.comments {
		return
	}
	for _, d := range doc {
		if d == "" {
			p.b.WriteByte('\n')
			continue
		}
		p.pad()
		p.b.WriteString(d)
		p.b.WriteByte('\n')
	}
}

// line prints one item: its doc comments, then s (whose continuation lines,
// if any, are indented at the current level), then its line comment.
func (p *printer) line(c Comments, s string) { p.linev(c, s, false) }

// linev is line; when verbatim is set, the continuation lines of s are
// printed as they are (an expression with a multi-line string or comment).
func (p *printer) linev(c Comments, s string, verbatim bool) {
	p.doc(c.Doc)
	if verbatim {
		p.pad()
		p.b.WriteString(s)
	} else {
		p.text(s)
	}
	if p.comments && c.Line != "" {
		p.marks = append(p.marks, p.b.Len())
		p.b.WriteByte(' ')
		p.b.WriteString(c.Line)
	}
	p.b.WriteByte('\n')
}

// text prints s at the current indentation; every line of s after the
// first is indented too (blank lines stay empty).
func (p *printer) text(s string) {
	for i, l := range strings.Split(s, "\n") {
		if i > 0 {
			p.b.WriteByte('\n')
		}
		if l != "" {
			p.pad()
			p.b.WriteString(l)
		}
	}
}

// block prints `header {`, the body one level deeper, the end comments and
// `}`.
func (p *printer) block(c Comments, header string, endDoc []string, body func()) {
	p.line(c, header+" {")
	p.indent++
	body()
	p.doc(endDoc)
	p.indent--
	p.pad()
	p.b.WriteString("}\n")
}

func (p *printer) file(f *File) {
	p.line(f.Comments, "ruleset "+f.Name.String())
	for _, d := range f.Decls {
		p.decl(d)
	}
	p.doc(f.EndDoc)
}

func (p *printer) decl(d Decl) {
	switch d := d.(type) {
	case *EventTimeDecl:
		p.eventTime(d)
	case *SchemaDecl:
		p.schema(d)
	case *LookupDecl:
		p.lookup(d)
	case *AggregateDecl:
		p.aggregate(d)
	case *RuleDecl:
		p.rule(d)
	case *TestDecl:
		p.test(d)
	}
}

func (p *printer) eventTime(d *EventTimeDecl) { p.line(d.Comments, "event time "+d.Field.String()) }

func (p *printer) schema(d *SchemaDecl) {
	p.block(d.Comments, "schema", d.EndDoc, func() {
		for _, f := range d.Fields {
			p.line(f.Comments, f.Name.String()+": "+f.Type.String())
		}
	})
}

func (p *printer) lookup(d *LookupDecl) {
	p.block(d.Comments, "lookup "+d.Name.String(), d.EndDoc, func() {
		if it := d.Key; it != nil {
			p.line(it.Comments, "key "+joinNames(it.Fields))
		}
		if b := d.Fields; b != nil {
			p.block(b.Comments, "fields", b.EndDoc, func() {
				for _, f := range b.Fields {
					s := f.Name.String() + ": " + f.Type.String()
					if f.Default != nil {
						s += " default " + f.Default.Text
					}
					p.line(f.Comments, s)
				}
			})
		}
		if it := d.Failure; it != nil {
			p.line(it.Comments, it.source())
		}
		if it := d.Timeout; it != nil {
			p.line(it.Comments, "timeout "+it.Dur.String())
		}
	})
}

func (p *printer) aggregate(d *AggregateDecl) {
	p.block(d.Comments, "aggregate "+d.Name.String(), d.EndDoc, func() {
		if it := d.Key; it != nil {
			p.line(it.Comments, "key "+joinNames(it.Fields))
		}
		if it := d.Func; it != nil {
			p.line(it.Comments, it.source())
		}
		if it := d.Window; it != nil {
			s := "window " + it.Dur.String()
			if it.Tumbling.Set {
				s += " tumbling"
			}
			p.line(it.Comments, s)
		}
		if it := d.Where; it != nil {
			p.linev(it.Comments, "where "+it.Expr.Text, it.Expr.verbatim)
		}
	})
}

func (p *printer) rule(d *RuleDecl) {
	p.block(d.Comments, "rule "+d.Name.String(), d.EndDoc, func() {
		if it := d.Description; it != nil {
			p.line(it.Comments, "description "+strconv.Quote(it.Value))
		}
		if it := d.Severity; it != nil {
			p.line(it.Comments, "severity "+it.Name.String())
		}
		if it := d.Key; it != nil {
			p.line(it.Comments, "key "+joinNames(it.Fields))
		}
		if d.Pattern != nil {
			p.pattern(d.Pattern)
		}
		if it := d.Skip; it != nil {
			p.line(it.Comments, it.source())
		}
		p.emit(d.Emit)
		if t := d.Timeout; t != nil {
			p.block(t.Comments, "timeout", t.EndDoc, func() {
				if it := t.Only; it != nil {
					p.line(it.Comments, "only")
				}
				if it := t.Severity; it != nil {
					p.line(it.Comments, "severity "+it.Name.String())
				}
				p.emit(t.Emit)
			})
		}
	})
}

// emit prints an emit block (nil: nothing).
func (p *printer) emit(e *EmitBlock) {
	if e == nil {
		return
	}
	p.block(e.Comments, "emit", e.EndDoc, func() {
		for _, f := range e.Fields {
			p.linev(f.Comments, f.Name.String()+": "+f.Expr.Text, f.Expr.verbatim)
		}
	})
}

func joinNames(ns []Name) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = n.String()
	}
	return strings.Join(s, ", ")
}

func (it *SkipItem) source() string {
	s := "skip " + it.Kind.String()
	if it.Kind == SkipToFirst || it.Kind == SkipToLast {
		s += " " + it.Stage.String()
	}
	if it.OrFail.Set {
		s += " orFail"
	}
	return s
}

func (p *printer) pattern(b *PatternBlock) {
	p.block(b.Comments, "pattern", b.EndDoc, func() {
		p.elems(b.Elems)
		if w := b.Within; w != nil {
			p.line(w.Comments, "within "+w.Dur.String())
		}
	})
}

func (p *printer) elems(es []PatternElem) {
	for _, e := range es {
		switch e := e.(type) {
		case *StageNode:
			p.stage(e)
		case *GroupNode:
			p.group(e)
		}
	}
}

func (p *printer) stage(s *StageNode) {
	h := s.Contiguity.String() + " " + s.Name.String()
	p.headLine(s.Comments, h, &s.elemHead)
}

func (p *printer) group(g *GroupNode) {
	p.line(g.Comments, g.Contiguity.String()+" (")
	p.indent++
	p.elems(g.Elems)
	p.doc(g.EndDoc)
	p.indent--
	p.headLine(Comments{Line: g.CloseLine}, ")", &g.elemHead)
}

// headLine prints a stage header (or a group's closing line) with its
// quantifiers and inline clause, then its clause lines one level deeper.
func (p *printer) headLine(c Comments, h string, e *elemHead) {
	if q := e.Quant.String(); q != "" {
		h += " " + q
	}
	clauses := e.Clauses
	verbatim := false
	if e.Inline && len(clauses) > 0 {
		h += " " + clauses[0].source()
		verbatim = clauses[0].verbatim()
		clauses = clauses[1:]
	}
	p.linev(c, h, verbatim)
	p.indent++
	for _, cl := range clauses {
		p.linev(cl.Comments, cl.source(), cl.verbatim())
	}
	p.indent--
}

// String prints the quantifiers in canonical order ("" for none).
func (q Quantifier) String() string {
	var parts []string
	switch q.Kind {
	case QuantOneOrMore:
		parts = append(parts, "oneOrMore")
	case QuantTimes:
		if q.Min == q.Max {
			parts = append(parts, "times "+strconv.Itoa(q.Min))
		} else {
			parts = append(parts, "times "+strconv.Itoa(q.Min)+".."+strconv.Itoa(q.Max))
		}
	case QuantTimesOrMore:
		parts = append(parts, "timesOrMore "+strconv.Itoa(q.Min))
	}
	if q.Gap != nil {
		parts = append(parts, "within "+q.Gap.String())
	}
	if q.Consecutive.Set {
		parts = append(parts, "consecutive")
	}
	if q.AllowCombinations.Set {
		parts = append(parts, "allowCombinations")
	}
	if q.Optional.Set {
		parts = append(parts, "optional")
	}
	if q.Greedy.Set {
		parts = append(parts, "greedy")
	}
	return strings.Join(parts, " ")
}

func (c *Clause) verbatim() bool { return c.Expr != nil && c.Expr.verbatim }

// source prints the clause without comments.
func (c *Clause) source() string {
	if c.Kind == ClauseGap {
		return "within " + c.Dur.String() + " of previous"
	}
	return c.Kind.String() + " " + c.Expr.Text
}

func (p *printer) test(d *TestDecl) {
	p.block(d.Comments, "test "+strconv.Quote(d.Name), d.EndDoc, func() {
		if it := d.Rule; it != nil {
			p.line(it.Comments, "rule "+it.Name.String())
		}
		if ev := d.Events; ev != nil {
			p.block(ev.Comments, "events", ev.EndDoc, func() {
				for _, l := range ev.Lines {
					p.linev(l.Comments, l.JSON.Text, l.JSON.verbatim)
				}
			})
		}
		if x := d.Expect; x != nil {
			if len(x.Matches) == 0 && len(x.EndDoc) == 0 {
				p.line(x.Comments, "expect none")
				return
			}
			p.block(x.Comments, "expect", x.EndDoc, func() {
				for _, m := range x.Matches {
					p.line(m.Comments, m.source())
				}
			})
		}
	})
}

// source prints the expected match without comments.
func (m *ExpectLine) source() string {
	var b strings.Builder
	b.WriteString(m.Rule.String())
	if m.TimedOut {
		b.WriteString(" timedOut")
	}
	if len(m.Key) > 0 {
		b.WriteString(" key ")
		for i, k := range m.Key {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(k.Text)
		}
	}
	b.WriteString(" {")
	for i, s := range m.Stages {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte(' ')
		b.WriteString(s.Stage.String())
		b.WriteString(": [")
		for j, e := range s.Events {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString(strconv.Itoa(e.Value))
		}
		b.WriteByte(']')
	}
	b.WriteString(" }")
	for i, e := range m.Emits {
		if i == 0 {
			b.WriteString(" emit {")
		} else {
			b.WriteByte(',')
		}
		b.WriteString(" " + e.Name.String() + ": " + e.Value.Text)
	}
	if len(m.Emits) > 0 {
		b.WriteString(" }")
	}
	return b.String()
}

// String methods: every node prints its canonical source, comments
// included, at indentation 0.

func (f *File) String() string          { return string(Format(f)) }
func (d *EventTimeDecl) String() string { return printNode(func(p *printer) { p.eventTime(d) }) }
func (d *SchemaDecl) String() string    { return printNode(func(p *printer) { p.schema(d) }) }
func (d *RuleDecl) String() string      { return printNode(func(p *printer) { p.rule(d) }) }
func (d *TestDecl) String() string      { return printNode(func(p *printer) { p.test(d) }) }
func (s *StageNode) String() string     { return printNode(func(p *printer) { p.stage(s) }) }
func (g *GroupNode) String() string     { return printNode(func(p *printer) { p.group(g) }) }
func (b *PatternBlock) String() string  { return printNode(func(p *printer) { p.pattern(b) }) }
func (c *Clause) String() string        { return c.source() }
func (it *SkipItem) String() string     { return it.source() }
func (m *ExpectLine) String() string    { return m.source() }
func (l Literal) String() string        { return l.Text }
