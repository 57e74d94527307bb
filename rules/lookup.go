package rules

import (
	"strconv"
	"strings"
	"time"

	"github.com/cepheus-cep/cepheus/event"
)

// Lookup is a compiled lookup declaration: data about an event's key read
// from a source the engine binds at run time (a lookup file or Redis), put
// in the event's slots before it is keyed. Conditions read its fields as
// NAME.field. It is immutable.
type Lookup struct {
	// Name is the lookup's name, the prefix of its fields in expressions.
	Name string
	// KeyFields are the event fields its key is built from; KeySlots their
	// slots; KeyKinds their declared kinds (event.KindNull for a field of
	// an inferred schema); KeyTimes whether each is a time (KindInt, epoch
	// milliseconds).
	KeyFields []string
	KeySlots  []int
	KeyKinds  []event.Kind
	KeyTimes  []bool
	// Fields are its fields in declaration order.
	Fields []LookupField
	// Closed is the failure policy once the Retries are spent: false
	// gives the events the defaults (fail open), true sends them to the
	// dead letters (fail closed).
	Closed  bool
	Retries int
	// Timeout bounds each request; 0 leaves it to the engine.
	Timeout time.Duration
	// Source is the declaration's canonical source without comments.
	Source string
}

// LookupField is one field of a lookup.
type LookupField struct {
	// Name is the field's name in the lookup (home_country); its schema
	// field is Lookup.Name + "." + Name.
	Name string
	// Slot is the slot of its schema field.
	Slot int
	// Kind is its declared kind; a time is KindInt (epoch ms), with Time
	// set.
	Kind event.Kind
	Time bool
	// Default is the value of an event whose key has no record, whose key
	// fields are null, or (fail open) whose lookup failed; null when the
	// declaration gives none.
	Default event.Value
}

// maxLookupRetries bounds `on failure retry N`.
const maxLookupRetries = 10

// longLookupTimeout is the longest lookup timeout without a warning.
const longLookupTimeout = 10 * time.Second

// checkLookups checks the lookup declarations (after the schema: key
// fields must exist in a declared one).
func (c *ruleChecker) checkLookups() {
	seen := map[string]Pos{}
	for _, d := range c.lookups {
		n := d.Name
		first, dup := seen[n.Value]
		switch {
		case dup:
			c.twice(n.Pos, first, "lookup "+n.Value)
		case c.schemaDecl != nil && c.declared(n.Value):
			c.errorf(n.Pos, "lookup %s has the name of a schema field; rename one (%s.x would be ambiguous)", n, n)
		}
		if !dup {
			seen[n.Value] = n.Pos
		}
		if d.Key == nil {
			c.errorf(n.Pos, "lookup %s has no key: add 'key FIELD' (the event fields its records are found by)", n)
		} else {
			c.checkKeyFields(d.Key)
		}
		if d.Fields == nil || len(d.Fields.Fields) == 0 {
			c.errorf(n.Pos, "lookup %s has no fields: add 'fields { name: type default value }'", n)
		} else {
			names := map[string]bool{}
			for _, f := range d.Fields.Fields {
				if names[f.Name.Value] {
					c.errorf(f.Name.Pos, "field %s of lookup %s is declared twice", f.Name, n)
				}
				names[f.Name.Value] = true
				if _, ok := fieldTypes[f.Type.Value]; !ok {
					c.errorf(f.Type.Pos, "unknown type %s (want string, int, float, bool or time)", f.Type)
				} else if f.Default != nil {
					if _, err := lookupDefault(f); err != "" {
						c.errorf(f.Default.Pos, "%s", err)
					}
				}
			}
		}
		if it := d.Failure; it != nil && it.Retries != nil && (it.Retries.Value < 1 || it.Retries.Value > maxLookupRetries) {
			c.errorf(it.Retries.Pos, "retry takes 1 to %d retries, not %d", maxLookupRetries, it.Retries.Value)
		}
		if it := d.Timeout; it != nil && it.Dur.Value > longLookupTimeout {
			c.warnf(it.Dur.Pos, "a lookup timeout of %v stops the stream and its checkpoints for up to that long per attempt while the source does not answer (events wait for their lookups, and a checkpoint is taken between two batches); the default is 250ms", it.Dur)
		}
	}
}

// lookupDefault returns the default of f as a value of its type, or a
// message saying why the literal does not fit.
func lookupDefault(f *LookupFieldDecl) (event.Value, string) {
	l := f.Default
	if l == nil || l.Kind == LitNull {
		return event.Null, ""
	}
	bad := func() (event.Value, string) {
		return event.Null, "the default " + l.Text + " of " + f.Name.Value + " is not of type " + f.Type.Value
	}
	switch f.Type.Value {
	case "string":
		if l.Kind != LitString {
			return bad()
		}
		s, err := strconv.Unquote(l.Text)
		if err != nil {
			return bad()
		}
		return event.String(s), ""
	case "int":
		if l.Kind != LitInt {
			return bad()
		}
		n, err := strconv.ParseInt(l.Text, 10, 64)
		if err != nil {
			return bad()
		}
		return event.Int(n), ""
	case "float":
		if l.Kind != LitInt && l.Kind != LitFloat {
			return bad()
		}
		x, err := strconv.ParseFloat(l.Text, 64)
		if err != nil {
			return bad()
		}
		return event.Float(x), ""
	case "bool":
		if l.Kind != LitBool {
			return bad()
		}
		return event.Bool(l.Text == "true"), ""
	case "time":
		switch l.Kind {
		case LitInt:
			n, err := strconv.ParseInt(l.Text, 10, 64)
			if err != nil {
				return bad()
			}
			return event.Int(n), ""
		case LitString:
			s, _ := strconv.Unquote(l.Text)
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return event.Null, "the default " + l.Text + " of " + f.Name.Value + " is not an RFC 3339 time or epoch milliseconds"
			}
			return event.Int(t.UnixMilli()), ""
		}
		return bad()
	}
	return bad()
}

// lookupNames returns the names of the file's lookups.
func (c *ruleChecker) lookupNames() []string {
	out := make([]string, 0, len(c.lookups))
	for _, d := range c.lookups {
		out = append(out, d.Name.Value)
	}
	return out
}

// lookupFieldName is the schema field of a lookup's field.
func lookupFieldName(lookup, field string) string { return lookup + "." + field }

// isLookupField reports whether name is a lookup's field (lookup.field).
func (c *ruleChecker) isLookupField(name string) bool {
	ns, _, ok := strings.Cut(name, ".")
	if !ok {
		return false
	}
	for _, d := range c.lookups {
		if d.Name.Value == ns {
			return true
		}
	}
	return false
}

// lookupSchema appends the fields of the lookups to the schema (after the
// event's fields, in declaration order), typed as declared.
func (c *ruleChecker) lookupSchema() {
	if len(c.lookups) == 0 {
		return
	}
	fields := make([]event.Field, 0, c.schema.Len())
	for i := range c.schema.Len() {
		fields = append(fields, c.schema.Field(i))
	}
	for _, d := range c.lookups {
		if _, clash := c.schema.Slot(d.Name.Value); clash && c.schemaDecl == nil {
			c.errorf(d.Name.Pos, "lookup %s has the name of a field the ruleset reads; rename one (%s.x would be ambiguous)", d.Name, d.Name)
		}
		if d.Fields == nil {
			continue
		}
		for _, f := range d.Fields.Fields {
			name := lookupFieldName(d.Name.Value, f.Name.Value)
			if _, dup := c.schema.Slot(name); dup || containsField(fields, name) {
				continue // reported by checkLookups
			}
			if f.Type.Value == "time" {
				c.timeSlots[len(fields)] = true
			}
			fields = append(fields, event.Field{Name: name, Kind: fieldTypes[f.Type.Value]})
		}
	}
	c.schema = event.MustSchema(fields...)
}

func containsField(fields []event.Field, name string) bool {
	for _, f := range fields {
		if f.Name == name {
			return true
		}
	}
	return false
}

// compileLookups builds the Ruleset's lookups over the final schema.
func (c *ruleChecker) compileLookups() []*Lookup {
	var out []*Lookup
	for _, d := range c.lookups {
		l := &Lookup{Name: d.Name.Value}
		p := &printer{}
		p.lookup(d)
		l.Source = p.b.String()
		if d.Key != nil {
			for _, k := range d.Key.Fields {
				if slot, ok := c.schema.Slot(k.Value); ok {
					l.KeyFields = append(l.KeyFields, k.Value)
					l.KeySlots = append(l.KeySlots, slot)
					l.KeyKinds = append(l.KeyKinds, c.schema.Field(slot).Kind)
					l.KeyTimes = append(l.KeyTimes, c.timeSlots[slot])
				}
			}
		}
		if d.Fields != nil {
			for _, f := range d.Fields.Fields {
				slot, ok := c.schema.Slot(lookupFieldName(l.Name, f.Name.Value))
				if !ok {
					continue
				}
				def, _ := lookupDefault(f)
				l.Fields = append(l.Fields, LookupField{
					Name: f.Name.Value, Slot: slot, Kind: fieldTypes[f.Type.Value], Time: f.Type.Value == "time", Default: def,
				})
			}
		}
		if it := d.Failure; it != nil {
			l.Closed = it.Mode.Value == "closed"
			if it.Retries != nil {
				l.Retries = it.Retries.Value
			}
		}
		if it := d.Timeout; it != nil {
			l.Timeout = it.Dur.Value
		}
		out = append(out, l)
	}
	return out
}

// FillDefaults gives every null field of the lookup in ev its default.
// The events of a file's tests carry their lookup fields themselves
// ("customer.home_country": "US"); those they leave out take the
// defaults, as an unbound lookup gives.
func (l *Lookup) FillDefaults(ev *event.Event) {
	for _, f := range l.Fields {
		if f.Slot < len(ev.Fields) && ev.Fields[f.Slot].IsNull() {
			ev.Fields[f.Slot] = f.Default
		}
	}
}
