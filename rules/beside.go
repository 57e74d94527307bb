package rules

import (
	"errors"
	"slices"

	"github.com/cepheus-cep/cepheus/event"
)

// besideSyntax returns synErr, the syntax errors of f, with the errors of
// the rules beside them: those with no syntax error of their own, checked
// and compiled without the rules that have one and without the tests, so
// that a file's expression and type errors do not wait for its syntax to
// be fixed (one slip hid them all). It adds nothing when a declaration
// other than a rule has a syntax error (the event time, the schema, a
// lookup or an aggregate: every rule depends on them), and keeps only the
// errors inside the clean rules (a test may name a rule left out).
func besideSyntax(f *File, synErr error, layout *event.Schema) error {
	var syn ErrorList
	if !errors.As(synErr, &syn) || f == nil || f.src == nil || len(syn) == 0 || syn[len(syn)-1].Msg != "" && isCapped(syn) {
		return synErr
	}
	// Each declaration spans from its position to the next one's.
	type span struct {
		d          Decl
		start, end int
	}
	var spans []span
	for i, d := range f.Decls {
		end := len(f.src.src)
		if i+1 < len(f.Decls) {
			end = declPos(f.Decls[i+1]).Offset()
		}
		spans = append(spans, span{d, declPos(d).Offset(), end})
	}
	if len(spans) == 0 {
		return synErr
	}
	bad := map[Decl]bool{}
	for _, e := range syn {
		off := e.Pos.Offset
		if off < spans[0].start {
			return synErr // the ruleset line
		}
		for _, s := range spans {
			if off >= s.start && off < s.end {
				bad[s.d] = true
			}
		}
	}
	clean := *f
	clean.Decls = nil
	for _, s := range spans {
		switch s.d.(type) {
		case *RuleDecl:
			if !bad[s.d] {
				clean.Decls = append(clean.Decls, s.d)
			}
		case *TestDecl:
		default:
			if bad[s.d] {
				return synErr
			}
			clean.Decls = append(clean.Decls, s.d)
		}
	}
	_, err := compileLayout(&clean, layout, true)
	var more ErrorList
	if !errors.As(err, &more) {
		return synErr
	}
	all := slices.Clone(syn)
	for _, e := range more {
		for _, s := range spans {
			if _, ok := s.d.(*RuleDecl); ok && !bad[s.d] && e.Pos.Offset >= s.start && e.Pos.Offset < s.end {
				all = append(all, e)
				break
			}
		}
	}
	return all.finish(tooManyErrors).Err()
}

// isCapped reports whether l ends with the entry of a capped list.
func isCapped(l ErrorList) bool {
	last := l[len(l)-1].Msg
	return len(last) >= len(tooManyErrors) && last[:len(tooManyErrors)] == tooManyErrors
}

// declPos is the position of d.
func declPos(d Decl) Pos {
	switch d := d.(type) {
	case *EventTimeDecl:
		return d.Pos
	case *SchemaDecl:
		return d.Pos
	case *RuleDecl:
		return d.Pos
	case *TestDecl:
		return d.Pos
	case *LookupDecl:
		return d.Pos
	case *AggregateDecl:
		return d.Pos
	}
	return 0
}
