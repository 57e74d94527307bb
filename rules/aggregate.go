package rules

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/rules/internal/cond"
)

// AggFunc is the function of a velocity aggregate.
type AggFunc uint8

// The functions: the number of events, the sum, mean, least and largest
// of a numeric field, and the number of distinct values of a field.
const (
	AggCount AggFunc = iota
	AggSum
	AggAvg
	AggMin
	AggMax
	AggDistinct
)

var aggFuncNames = [...]string{"count", "sum", "avg", "min", "max", "distinct"}

func (f AggFunc) String() string {
	if int(f) < len(aggFuncNames) {
		return aggFuncNames[f]
	}
	return fmt.Sprintf("aggfunc(%d)", f)
}

// Aggregate is a compiled velocity aggregate (docs/rules.md, "Velocity
// aggregates"): at each event, Func over the events of the event's key
// (KeyFields) that Accepts, in the window of Window before the event's
// time (sliding: (t-Window, t]; tumbling: the window of fixed
// boundaries that holds t, up to t), written into the event's Slot, which
// conditions read as Name. It is immutable.
type Aggregate struct {
	Name      string
	KeyFields []string
	KeySlots  []int
	Func      AggFunc
	// Field is the field Func reads (FieldSlot its slot); "" and -1 for
	// count.
	Field     string
	FieldSlot int
	Window    time.Duration
	Tumbling  bool
	// Slot is the slot the value is written to, of Kind: int for count
	// and distinct, float for the others.
	Slot int
	Kind event.Kind
	// Source is the declaration's canonical source without comments.
	Source string

	where *cond.BoolExpr // nil: every event counts
}

// Accepts reports whether ev counts in the aggregate (its where
// condition; an evaluation that fails counts as false).
func (a *Aggregate) Accepts(ev *event.Event) bool {
	return a.where == nil || a.where.Eval(ev, nil)
}

// aggKind is the kind of an aggregate's value.
func aggKind(fn string) event.Kind {
	if fn == "count" || fn == "distinct" {
		return event.KindInt
	}
	return event.KindFloat
}

// checkAggregates checks the aggregate declarations (after the schema
// and the lookups).
func (c *ruleChecker) checkAggregates() {
	seen := map[string]Pos{}
	for _, d := range c.aggregates {
		n := d.Name
		first, dup := seen[n.Value]
		switch {
		case dup:
			c.twice(n.Pos, first, "aggregate "+n.Value)
		case c.schemaDecl != nil && c.declared(n.Value):
			c.errorf(n.Pos, "aggregate %s has the name of a schema field; rename one", n)
		case slices.Contains(c.lookupNames(), n.Value):
			c.errorf(n.Pos, "aggregate %s has the name of a lookup; rename one", n)
		}
		if !dup {
			seen[n.Value] = n.Pos
		}
		if d.Key == nil {
			c.errorf(n.Pos, "aggregate %s has no key: add 'key FIELD' (the events it counts together: a merchant's, a card's)", n)
		} else {
			c.checkKeyFields(d.Key)
		}
		if d.Func == nil {
			c.errorf(n.Pos, "aggregate %s has no function: add count, or sum, avg, min, max or distinct and a field", n)
		} else if f := d.Func.Field; f != nil && c.schemaDecl != nil {
			typ, ok := c.declaredType(f.Value)
			switch {
			case !ok:
				c.errorf(f.Pos, "unknown field %s%s", f, c.schemaHint(f.Value))
			case d.Func.Func.Value != "distinct" && typ != "int" && typ != "float":
				c.errorf(f.Pos, "%s needs a number, and %s is a %s", d.Func.Func, f, typ)
			}
		}
		if d.Window == nil {
			c.errorf(n.Pos, "aggregate %s has no window: add 'window 10m' (sliding) or 'window 1h tumbling'", n)
		}
	}
}

// declaredType returns the declared type of a schema field.
func (c *ruleChecker) declaredType(field string) (string, bool) {
	for _, fd := range c.schemaDecl.Fields {
		if fd.Name.Value == field {
			return fd.Type.Value, true
		}
	}
	return "", false
}

// aggregateNames returns the names of the file's aggregates.
func (c *ruleChecker) aggregateNames() []string {
	out := make([]string, 0, len(c.aggregates))
	for _, d := range c.aggregates {
		out = append(out, d.Name.Value)
	}
	return out
}

// aggregateSchema appends the aggregates' fields to the schema, after the
// lookups'.
func (c *ruleChecker) aggregateSchema() {
	if len(c.aggregates) == 0 {
		return
	}
	fields := make([]event.Field, 0, c.schema.Len()+len(c.aggregates))
	for i := range c.schema.Len() {
		fields = append(fields, c.schema.Field(i))
	}
	for _, d := range c.aggregates {
		_, dup := c.schema.Slot(d.Name.Value)
		if dup && c.schemaDecl == nil {
			// An inferred field: the aggregate's value would replace it.
			c.errorf(d.Name.Pos, "aggregate %s has the name of an event field the ruleset reads (as a key, an aggregate's field or the event time); rename one", d.Name)
		}
		if dup || containsField(fields, d.Name.Value) || d.Func == nil {
			continue // reported by checkAggregates, or above
		}
		fields = append(fields, event.Field{Name: d.Name.Value, Kind: aggKind(d.Func.Func.Value)})
	}
	c.schema = event.MustSchema(fields...)
}

// compileAggregates builds the Ruleset's aggregates over the final
// schema; their where conditions read the event (its lookups' fields
// too, not the aggregates').
func (c *ruleChecker) compileAggregates() []*Aggregate {
	var out []*Aggregate
	env := &cond.Env{Schema: c.schema, Declared: c.schemaDecl != nil, Lookups: c.lookupNames()}
	for _, d := range c.aggregates {
		if d.Func == nil || d.Window == nil {
			continue
		}
		a := &Aggregate{Name: d.Name.Value, FieldSlot: -1, Window: d.Window.Dur.Value, Tumbling: d.Window.Tumbling.Set}
		p := &printer{}
		p.aggregate(d)
		a.Source = p.b.String()
		for i, name := range aggFuncNames {
			if name == d.Func.Func.Value {
				a.Func = AggFunc(i)
			}
		}
		if d.Key != nil {
			for _, k := range d.Key.Fields {
				if slot, ok := c.schema.Slot(k.Value); ok {
					a.KeyFields = append(a.KeyFields, k.Value)
					a.KeySlots = append(a.KeySlots, slot)
				}
			}
		}
		if f := d.Func.Field; f != nil {
			a.Field = f.Value
			if slot, ok := c.schema.Slot(f.Value); ok {
				a.FieldSlot = slot
			}
		}
		a.Slot, _ = c.schema.Slot(a.Name)
		a.Kind = aggKind(d.Func.Func.Value)
		if w := d.Where; w != nil {
			ids, _ := cond.Identifiers(w.Expr.raw, c.lookupNames()...)
			if i := slices.IndexFunc(ids, func(id string) bool { return slices.Contains(c.aggregateNames(), id) }); i >= 0 {
				c.errorf(w.Expr.Pos, "the where of aggregate %s reads aggregate %s: an aggregate counts events as they come, before any aggregate", d.Name, ids[i])
				continue
			}
			b, err := cond.CompileBoolExpr(w.Expr.raw, env)
			if err != nil {
				var ce *cond.Error
				if !errors.As(err, &ce) {
					c.errorf(w.Expr.Pos, "internal error: %v", err)
					continue
				}
				off := min(max(ce.Offset, 0), len(w.Expr.raw))
				c.errorf(w.Expr.Pos+Pos(off), "%s", exprHint(ce.Msg, w.Expr.raw[:off], w.Expr.raw[off:]))
				continue
			}
			a.where = b
		}
		out = append(out, a)
	}
	return out
}

// inferredAggregateFields are the fields the aggregates read: key fields,
// the function's field and those of the where conditions (for a file
// without a schema).
func (c *ruleChecker) inferredAggregateFields(names map[string]bool) {
	for _, d := range c.aggregates {
		if d.Key != nil {
			for _, k := range d.Key.Fields {
				names[k.Value] = true
			}
		}
		if d.Func != nil && d.Func.Field != nil {
			names[d.Func.Field.Value] = true
		}
		if d.Where != nil {
			ids, _ := cond.Identifiers(d.Where.Expr.raw, c.lookupNames()...)
			for _, id := range ids {
				if !c.isLookupField(id) && !slices.Contains(c.aggregateNames(), id) {
					names[id] = true
				}
			}
		}
	}
}

// Empty is the value of the aggregate over no event: 0 for count,
// distinct and sum, null for avg, min and max.
func (a *Aggregate) Empty() event.Value {
	switch a.Func {
	case AggCount, AggDistinct:
		return event.Int(0)
	case AggSum:
		return event.Float(0)
	}
	return event.Null
}
