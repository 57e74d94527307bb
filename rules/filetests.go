package rules

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/event/jsonev"
)

// compileTests checks the tests of the file and adds them to rs: events
// decoded by the ruleset's schema, expected matches resolved against the
// rules' stages. rs.Rules holds one Rule per rule declaration, in order.
func (c *ruleChecker) compileTests(rs *Ruleset) {
	decls := map[string]*RuleDecl{}
	rules := map[string]*Rule{}
	var ruleNames []string
	for i, rd := range c.rules {
		if _, dup := decls[rd.Name.Value]; !dup {
			decls[rd.Name.Value], rules[rd.Name.Value] = rd, rs.Rules[i]
			ruleNames = append(ruleNames, rd.Name.Value)
		}
	}
	for _, td := range c.tests {
		t := &Test{Name: td.Name, Pos: c.f.src.position(td.Pos), Rules: rs.Rules, Aggregates: rs.Aggregates}
		only := ""
		if td.Rule != nil {
			only = td.Rule.Name.Value
			if r, ok := rules[only]; ok {
				t.Rules = []*Rule{r}
			} else {
				c.errorf(td.Rule.Name.Pos, "unknown rule %s%s", td.Rule.Name, Suggest(only, ruleNames))
				// Reported once: the expected matches are not each
				// said to be of another rule.
				only = ""
			}
		}
		if td.Events != nil && rs.TimeSlot >= 0 {
			// Decoded as a backtest decodes them, in strict mode
			// (Ruleset.DecoderConfig). Without an event time field
			// (already an error) there is nothing to decode with.
			dec, err := jsonev.NewDecoder(rs.DecoderConfig(jsonev.Strict))
			if err != nil && len(*c.errs) == 0 {
				// A bad schema (a time field of another type) is
				// reported by the checker; anything else is a bug.
				c.errorf(td.Pos, "internal error: %v", err)
			}
			// Epoch seconds, read as the milliseconds a test's numbers
			// are (20 minutes become 1.2 s): the first such event of the
			// test is warned of.
			seconds, secondsAt, secondsEv, secondsTime := 0, NoPos, 0, int64(0)
			for i, l := range td.Events.Lines {
				if dec == nil {
					break
				}
				ev, err := dec.Decode([]byte(l.JSON.raw))
				if err != nil {
					// The error's position is the column's: leave
					// the column out of the message.
					var de *jsonev.DecodeError
					if errors.As(err, &de) {
						reason := de.Reason
						if s := Suggest(de.Unknown, eventFields(rs)); de.Unknown != "" && s != "" {
							// " (not in the schema: did you mean x?)"
							reason = strings.TrimSuffix(reason, ")") + ": " + s[len(" ("):]
						}
						err = errors.New(reason)
					}
					off := min(decodeOffset(de), len(l.JSON.raw))
					c.errorf(l.JSON.Pos+Pos(off), "event %d: %v", i+1, err)
					continue
				}
				if a := givenAggregate(rs, ev); a != "" {
					off := max(strings.Index(l.JSON.raw, strconv.Quote(a)), 0)
					c.errorf(l.JSON.Pos+Pos(off), "event %d: %s is an aggregate: the test computes its value from its events; leave it out", i+1, a)
					continue
				}
				if secs := int64(ev.Time); rs.TimeField != "" && secs >= epochSeconds2000 && secs < epochSeconds2100 {
					if seconds++; seconds == 1 {
						secondsAt, secondsEv, secondsTime = l.JSON.Pos+Pos(max(strings.Index(l.JSON.raw, strconv.Quote(rs.TimeField)), 0)), i, secs
					}
				}
				ev.Seq = uint64(i + 1)
				for _, l := range rs.Lookups {
					l.FillDefaults(ev)
				}
				t.Events = append(t.Events, ev)
				t.Sources = append(t.Sources, EventSource{Pos: c.f.src.position(l.JSON.Pos), Text: oneLine(l.JSON.raw)})
			}
			if seconds > 0 {
				more := ""
				if seconds > 1 {
					more = fmt.Sprintf(" (and %d more of the test's events)", seconds-1)
				}
				c.warnf(secondsAt, "event %d: %s %d is read as epoch milliseconds, %v; as epoch seconds it is %v: a test reads a number as milliseconds (write %d000, or the time in RFC 3339)%s",
					secondsEv+1, rs.TimeField, secondsTime, event.Time(secondsTime), event.Time(secondsTime*1000), secondsTime, more)
			}
		}
		nEvents := 0
		if td.Events != nil {
			nEvents = len(td.Events.Lines)
		}
		// The emit fields compared, by rule and kind (matches, timed-out
		// matches).
		type ruleKind struct {
			rd       *RuleDecl
			timedOut bool
		}
		emitNames := map[ruleKind][]string{}
		if td.Expect == nil {
			c.errorf(td.Pos, "test %q has no expect (write 'expect none' when no match is expected)", td.Name)
		} else {
			for _, m := range td.Expect.Matches {
				rd := decls[m.Rule.Value]
				switch {
				case rd == nil:
					c.errorf(m.Rule.Pos, "unknown rule %s%s", m.Rule, Suggest(m.Rule.Value, ruleNames))
					continue
				case only != "" && m.Rule.Value != only:
					c.errorf(m.Rule.Pos, "the test runs rule %s only", quoteName(only))
					continue
				}
				x, ok := c.expectedMatch(rules[m.Rule.Value], rd, m, nEvents)
				if !ok {
					continue
				}
				names := make([]string, len(x.Emits))
				for i, e := range x.Emits {
					names[i] = e.Name
				}
				rk := ruleKind{rd, m.TimedOut}
				if prev, seen := emitNames[rk]; !seen {
					emitNames[rk] = names
				} else if !slices.Equal(prev, names) {
					kind := "matches"
					if m.TimedOut {
						kind = "timed-out matches"
					}
					c.errorf(m.Rule.Pos, "the expected %s of rule %s in a test all give the same emit fields (%s), or none", kind, m.Rule, strings.Join(prev, ", "))
					continue
				}
				t.Expect = append(t.Expect, x)
			}
		}
		rs.Tests = append(rs.Tests, t)
	}
}

// The epoch seconds of 2000-01-01 and 2100-01-01: a test event's time
// between them is read as a time of January 1970 in milliseconds.
const (
	epochSeconds2000 = 946684800
	epochSeconds2100 = 4102444800
)

// eventFields are the fields a test's event may give: the schema's but
// the aggregates' (givenAggregate), which an unknown field's suggestion
// must not offer.
func eventFields(rs *Ruleset) []string {
	return slices.DeleteFunc(rs.Schema.Names(), func(name string) bool {
		return slices.ContainsFunc(rs.Aggregates, func(a *Aggregate) bool { return a.Name == name })
	})
}

// givenAggregate returns the name of an aggregate whose value a test
// event gives (not null), or "".
func givenAggregate(rs *Ruleset, ev *event.Event) string {
	for _, a := range rs.Aggregates {
		if slot, ok := rs.Schema.Slot(a.Name); ok && !ev.Field(slot).IsNull() {
			return a.Name
		}
	}
	return ""
}

// expectedMatch resolves one expected match of rule r (declared by rd) in
// a test with nEvents events.
func (c *ruleChecker) expectedMatch(r *Rule, rd *RuleDecl, m *ExpectLine, nEvents int) (ExpectedMatch, bool) {
	pos := m.Rule.Pos
	x := ExpectedMatch{Pos: c.f.src.position(pos), Rule: r, TimedOut: m.TimedOut}
	ok := true
	// The emit block the expected values are of.
	emit := rd.Emit
	if m.TimedOut {
		if rd.Timeout == nil {
			c.errorf(pos, "rule %s has no timeout block, so it reports no timed-out match", m.Rule)
			ok = false
		} else {
			emit = rd.Timeout.Emit
		}
	} else if rd.Timeout != nil && rd.Timeout.Only != nil {
		c.errorf(pos, "rule %s raises no alert for a completed match: its timeout block says only (expect its timed-out partial matches: %s timedOut ...)", m.Rule, m.Rule)
		ok = false
	}
	nKeys := 0
	if rd.Key != nil {
		nKeys = len(rd.Key.Fields)
	}
	if len(m.Key) != nKeys {
		if nKeys == 0 {
			c.errorf(pos, "rule %s has no key fields, so a match of it has no key", m.Rule)
		} else {
			fields := make([]string, nKeys)
			for i, k := range rd.Key.Fields {
				fields[i] = k.Value
			}
			c.errorf(pos, "rule %s has %s (%s), the match gives %s", m.Rule, howMany(nKeys, "key field"), strings.Join(fields, ", "), howMany(len(m.Key), "value"))
		}
		ok = false
	}
	for _, k := range m.Key {
		x.Key = append(x.Key, literalValue(k))
	}
	leaves := leafStages(rd)
	counts := stageCounts(rd)
	x.Stages = make([][]int, len(leaves))
	given := make([]bool, len(leaves))
	used := map[int]bool{}
	for _, se := range m.Stages {
		i := -1
		for j, s := range leaves {
			if s.Name.Value == se.Stage.Value {
				i = j
			}
		}
		switch {
		case i < 0:
			c.errorf(se.Stage.Pos, "rule %s has no stage %s%s", m.Rule, se.Stage, Suggest(se.Stage.Value, stageNames(leaves)))
			ok = false
			continue
		case given[i]:
			c.errorf(se.Stage.Pos, "stage %s is given twice", se.Stage)
			ok = false
			continue
		case leaves[i].Contiguity.IsNot():
			c.errorf(se.Stage.Pos, "stage %s is a %s stage: it takes no events", se.Stage, leaves[i].Contiguity)
			ok = false
			continue
		}
		given[i] = true
		if n := counts[leaves[i]]; len(se.Events) > n.max && n.max >= 0 || len(se.Events) < n.min && !m.TimedOut {
			c.errorf(se.Stage.Pos, "stage %s takes %s in a match, the test gives %d", se.Stage, n, len(se.Events))
			ok = false
		}
		for _, n := range se.Events {
			switch {
			case n.Value < 1 || n.Value > nEvents:
				c.errorf(n.Pos, "event %d: the test has events 1 to %d", n.Value, nEvents)
				ok = false
			case used[n.Value]:
				c.errorf(n.Pos, "event %d is given twice in the match", n.Value)
				ok = false
			}
			used[n.Value] = true
			x.Stages[i] = append(x.Stages[i], n.Value)
		}
	}
	for i, s := range leaves {
		// Once the stages given are right: an error of one of them
		// would hide behind this one, earlier on the line.
		if n := counts[s]; ok && !given[i] && n.min > 0 && !m.TimedOut && !s.Contiguity.IsNot() {
			c.errorf(m.Rule.Pos, "stage %s takes %s in a match, the test gives none", s.Name, n)
			ok = false
		}
	}
	if len(m.Emits) > 0 {
		given := map[string]Literal{}
		for _, e := range m.Emits {
			if _, dup := given[e.Name.Value]; dup {
				c.errorf(e.Name.Pos, "emit field %s is given twice", e.Name)
				ok = false
			}
			given[e.Name.Value] = e.Value
			if emit == nil || !slices.ContainsFunc(emit.Fields, func(f *EmitField) bool { return f.Name.Value == e.Name.Value }) {
				what := "rule"
				if m.TimedOut {
					what = "the timeout block of rule"
				}
				c.errorf(e.Name.Pos, "%s %s emits no field %s", what, m.Rule, e.Name)
				ok = false
			}
		}
		if emit != nil {
			for _, f := range emit.Fields {
				if v, ok := given[f.Name.Value]; ok {
					x.Emits = append(x.Emits, NamedValue{Name: f.Name.Value, Value: literalValue(v)})
				}
			}
		}
	}
	return x, ok
}

// stageCount is how many events a stage takes in one match: min to max
// (max < 0: no bound).
type stageCount struct{ min, max int }

func (c stageCount) String() string {
	switch {
	case c.max < 0:
		return "at least " + howMany(c.min, "event")
	case c.min == 0:
		return "at most " + howMany(c.max, "event")
	case c.min == c.max:
		return howMany(c.min, "event")
	}
	return fmt.Sprintf("%d to %d events", c.min, c.max)
}

// stageCounts returns the events each stage of r takes in one match (a
// timed-out partial match may hold fewer): its quantifier's count times
// those of the groups around it, none when it or one of them is
// optional.
func stageCounts(r *RuleDecl) map[*StageNode]stageCount {
	out := map[*StageNode]stageCount{}
	var walk func(es []PatternElem, outer stageCount)
	walk = func(es []PatternElem, outer stageCount) {
		for _, e := range es {
			c := quantCount(e.head().Quant)
			c.min *= outer.min
			if c.max < 0 || outer.max < 0 {
				c.max = -1
			} else {
				c.max *= outer.max
			}
			switch e := e.(type) {
			case *StageNode:
				out[e] = c
			case *GroupNode:
				walk(e.Elems, c)
			}
		}
	}
	if r.Pattern != nil {
		walk(r.Pattern.Elems, stageCount{1, 1})
	}
	return out
}

// quantCount is the count of one quantifier.
func quantCount(q Quantifier) stageCount {
	c := stageCount{1, 1}
	switch q.Kind {
	case QuantOneOrMore:
		c.max = -1
	case QuantTimes:
		c = stageCount{q.Min, q.Max}
	case QuantTimesOrMore:
		c = stageCount{q.Min, -1}
	}
	if q.Optional.Set {
		c.min = 0
	}
	return c
}

// literalValue is the value of a key literal.
func literalValue(l Literal) event.Value {
	switch l.Kind {
	case LitString:
		s, _ := strconv.Unquote(l.Text)
		return event.String(s)
	case LitInt:
		i, _ := strconv.ParseInt(l.Text, 10, 64)
		return event.Int(i)
	case LitFloat:
		f, _ := strconv.ParseFloat(l.Text, 64)
		return event.Float(f)
	case LitBool:
		return event.Bool(l.Text == "true")
	}
	return event.Null
}

// FormatMatch writes a match of rule r in the notation of a test's expect
// line: `r [timedOut] key v1, v2 { stage: [1, 2], ... } emit { f: v, ...
// }`, with timedOut for a timed-out partial match, stages (indexed as
// r.NFA.Stages()) in pattern order, stages without events left out, events
// by number (Event.Seq in a test), and the emit part only when emits is
// not empty.
func FormatMatch(r *Rule, timedOut bool, key []event.Value, stages [][]int, emits []NamedValue) string {
	var b strings.Builder
	b.WriteString(quoteName(r.Name))
	if timedOut {
		b.WriteString(" timedOut")
	}
	for i, k := range key {
		if i == 0 {
			b.WriteString(" key ")
		} else {
			b.WriteString(", ")
		}
		b.WriteString(k.String())
	}
	b.WriteString(" {")
	first := true
	for i, evs := range stages {
		if len(evs) == 0 {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		name := "#" + strconv.Itoa(i)
		if r.NFA != nil && i < len(r.NFA.Stages()) {
			name = r.NFA.Stages()[i]
		}
		b.WriteString(" " + quoteName(name) + ": [")
		for j, n := range evs {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString(strconv.Itoa(n))
		}
		b.WriteByte(']')
	}
	b.WriteString(" }")
	for i, e := range emits {
		if i == 0 {
			b.WriteString(" emit {")
		} else {
			b.WriteByte(',')
		}
		b.WriteString(" " + quoteName(e.Name) + ": " + e.Value.String())
	}
	if len(emits) > 0 {
		b.WriteString(" }")
	}
	return b.String()
}

// String writes the expected match as [FormatMatch] does.
func (x *ExpectedMatch) String() string {
	return FormatMatch(x.Rule, x.TimedOut, x.Key, x.Stages, x.Emits)
}

// howMany writes n things: "no value", "1 value", "2 values".
func howMany(n int, thing string) string {
	switch n {
	case 0:
		return "no " + thing
	case 1:
		return "1 " + thing
	}
	return strconv.Itoa(n) + " " + thing + "s"
}

// oneLine joins the lines of an event written over several with single
// spaces (a JSON string holds no line break, so none is inside one).
func oneLine(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	return strings.Join(lines, " ")
}

// stageNames returns the names of stages, for a suggestion.
func stageNames(stages []*StageNode) []string {
	names := make([]string, len(stages))
	for i, s := range stages {
		names[i] = s.Name.Value
	}
	return names
}
