package event

import (
	"fmt"
	"strings"
)

// Field describes one field of a [Schema].
type Field struct {
	Name string
	// Kind is the declared kind; KindNull means "any kind" (no declaration).
	Kind Kind
}

// Schema maps field names to slots. A Schema is immutable after
// [NewSchema] and safe for concurrent use.
type Schema struct {
	fields []Field
	index  map[string]int
}

// NewSchema builds a schema from fields in slot order. Names must be unique
// and non-empty.
func NewSchema(fields ...Field) (*Schema, error) {
	s := &Schema{fields: append([]Field(nil), fields...), index: make(map[string]int, len(fields))}
	for i, f := range fields {
		if f.Name == "" {
			return nil, fmt.Errorf("event: field %d has no name", i)
		}
		if _, dup := s.index[f.Name]; dup {
			return nil, fmt.Errorf("event: duplicate field %q", f.Name)
		}
		s.index[f.Name] = i
	}
	return s, nil
}

// MustSchema is [NewSchema] for static schemas; it panics on error.
func MustSchema(fields ...Field) *Schema {
	s, err := NewSchema(fields...)
	if err != nil {
		panic(err)
	}
	return s
}

// Len returns the number of fields.
func (s *Schema) Len() int { return len(s.fields) }

// Field returns the field in slot i.
func (s *Schema) Field(i int) Field { return s.fields[i] }

// Slot returns the slot of the named field.
func (s *Schema) Slot(name string) (int, bool) {
	i, ok := s.index[name]
	return i, ok
}

// Names returns the field names in slot order.
func (s *Schema) Names() []string {
	out := make([]string, len(s.fields))
	for i, f := range s.fields {
		out[i] = f.Name
	}
	return out
}

// String lists the fields as "name:kind".
func (s *Schema) String() string {
	var b strings.Builder
	for i, f := range s.fields {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(f.Name)
		if f.Kind != KindNull {
			b.WriteString(":" + f.Kind.String())
		}
	}
	return b.String()
}
