package rules

import (
	"strconv"
	"strings"
)

// This file reads what a user coming from Flink's Pattern API writes into a
// rule (times(2, 4), .consecutive(), skipToFirst("a"), Time.minutes(5)) and
// says how the rule language writes it, for the syntax errors such text
// causes. It recognises; it never accepts: the text stays an error.

// flinkCall is one call name(args) of a chain read from source.
type flinkCall struct {
	name, args string
}

// readCalls reads a chain of calls, name(args) separated by dots, from the
// start of s (a leading dot is allowed), up to the end of the line. It
// returns false when s does not start with such a call.
func readCalls(s string) ([]flinkCall, bool) {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	var calls []flinkCall
	for {
		s = strings.TrimLeft(s, " \t")
		rest, dot := strings.CutPrefix(s, ".")
		if len(calls) > 0 && !dot {
			break
		}
		rest = strings.TrimLeft(rest, " \t")
		n := 0
		for n < len(rest) && (isIdentStart(rune(rest[n])) || n > 0 && '0' <= rest[n] && rest[n] <= '9') {
			n++
		}
		name := rest[:n]
		rest = strings.TrimLeft(rest[n:], " \t")
		if name == "" || !strings.HasPrefix(rest, "(") {
			break
		}
		depth, end := 0, -1
		for i := 0; i < len(rest) && end < 0; i++ {
			switch rest[i] {
			case '(':
				depth++
			case ')':
				depth--
				if depth == 0 {
					end = i
				}
			}
		}
		if end < 0 {
			break
		}
		calls = append(calls, flinkCall{name: name, args: strings.TrimSpace(rest[1:end])})
		s = rest[end+1:]
	}
	return calls, len(calls) > 0
}

// flinkForms gives the rule language's form of a chain of Flink's Pattern
// API calls (times(3).consecutive() is "times 3 consecutive"), or false
// when a call has no form that can be written in its place.
func flinkForms(calls []flinkCall) (string, bool) {
	forms := make([]string, 0, len(calls))
	for _, c := range calls {
		f, ok := flinkForm(c)
		if !ok {
			return "", false
		}
		forms = append(forms, f)
	}
	return strings.Join(forms, " "), true
}

// flinkForm gives the rule language's form of one call of Flink's Pattern
// API that follows a stage.
func flinkForm(c flinkCall) (string, bool) {
	args := splitArgs(c.args)
	switch c.name {
	case "consecutive", "greedy", "optional", "allowCombinations":
		return c.name, len(args) == 0
	case "zeroOrMore":
		return "oneOrMore optional", len(args) == 0
	case "oneOrMore":
		switch len(args) {
		case 0:
			return "oneOrMore", true
		case 1:
			if d, ok := flinkDuration(args[0]); ok {
				return "oneOrMore within " + d, true
			}
		}
	case "times", "timesOrMore":
		if len(args) == 0 || !isInt(args[0]) {
			return "", false
		}
		f := c.name + " " + args[0]
		rest := args[1:]
		if c.name == "times" && len(rest) > 0 && isInt(rest[0]) {
			f += ".." + rest[0]
			rest = rest[1:]
		}
		switch len(rest) {
		case 0:
			return f, true
		case 1:
			if d, ok := flinkDuration(rest[0]); ok {
				return f + " within " + d, true
			}
		}
	case "where", "or", "until":
		if len(args) == 1 && !strings.Contains(args[0], "->") && !strings.HasPrefix(args[0], "new ") {
			return c.name + " " + args[0], true
		}
		return c.name + " CONDITION", true
	case "within":
		if len(args) == 0 {
			return "", false
		}
		d, ok := flinkDuration(args[0])
		if !ok {
			return "", false
		}
		if len(args) == 2 && strings.HasSuffix(args[1], "PREVIOUS_AND_CURRENT") {
			return "within " + d + " of previous", true
		}
		return "within " + d, len(args) == 1
	}
	return "", false
}

// splitArgs splits a call's arguments at the commas outside brackets.
func splitArgs(s string) []string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	var args []string
	depth, from := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
		case ',':
			if depth == 0 {
				args = append(args, strings.TrimSpace(s[from:i]))
				from = i + 1
			}
		}
	}
	return append(args, strings.TrimSpace(s[from:]))
}

func isInt(s string) bool {
	_, err := strconv.Atoi(strings.TrimSuffix(s, "L"))
	return err == nil
}

// flinkUnits maps the unit names of Flink's Time and Duration factories,
// and the words a user writes after a number, to the rule language's units.
var flinkUnits = map[string]string{
	"milliseconds": "ms", "millisecond": "ms", "millis": "ms", "msec": "ms", "ofmillis": "ms",
	"seconds": "s", "second": "s", "sec": "s", "secs": "s", "ofseconds": "s",
	"minutes": "m", "minute": "m", "min": "m", "mins": "m", "ofminutes": "m",
	"hours": "h", "hour": "h", "hr": "h", "hrs": "h", "ofhours": "h",
	"days": "d", "day": "d", "ofdays": "d",
	"ms": "ms", "s": "s", "m": "m", "h": "h", "d": "d",
}

// flinkDuration converts a duration as Flink's API or English writes it
// (Time.minutes(5), Duration.ofSeconds(10), 10 seconds) to the rule
// language's form (5m, 10s).
func flinkDuration(s string) (string, bool) {
	s = strings.TrimSpace(s)
	for _, p := range []string{"Time.", "Duration.", "java.time.Duration."} {
		if rest, ok := strings.CutPrefix(s, p); ok {
			calls, ok := readCalls(rest)
			if !ok || len(calls) != 1 || !isInt(calls[0].args) {
				return "", false
			}
			u, ok := flinkUnits[strings.ToLower(calls[0].name)]
			if !ok {
				return "", false
			}
			return strings.TrimSuffix(calls[0].args, "L") + u, true
		}
	}
	n, word, ok := strings.Cut(s, " ")
	if !ok || !isInt(n) {
		return "", false
	}
	u, ok := flinkUnits[strings.ToLower(strings.TrimSpace(word))]
	return n + u, ok
}

// flinkSkips maps Flink's names of the after-match skip strategies, as
// AfterMatchSkipStrategy's factories and its SkipStrategy enum write them,
// lowered and without underscores, to the rule language's.
var flinkSkips = map[string]string{
	"noskip":            "noSkip",
	"skiptonext":        "toNext",
	"skippastlastevent": "pastLastEvent",
	"skiptofirst":       "toFirst",
	"skiptolast":        "toLast",
	"tofirst":           "toFirst",
	"tolast":            "toLast",
}

// flinkSkip gives the rule language's form of a skip strategy written as
// Flink writes it (AfterMatchSkipStrategy.skipToFirst("a"), SKIP_TO_NEXT),
// or false.
func flinkSkip(s string) (string, bool) {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimPrefix(strings.TrimSpace(s), "AfterMatchSkipStrategy.")
	calls, ok := readCalls(s)
	name, arg := "", ""
	if ok {
		name, arg = calls[0].name, calls[0].args
	} else {
		n := 0
		for n < len(s) && (isIdentStart(rune(s[n])) || '0' <= s[n] && s[n] <= '9') {
			n++
		}
		name = s[:n]
	}
	kind, ok := flinkSkips[strings.ToLower(strings.ReplaceAll(name, "_", ""))]
	if !ok {
		return "", false
	}
	f := kind
	if kind == "toFirst" || kind == "toLast" {
		stage := "NAME"
		if a, err := strconv.Unquote(arg); err == nil && a != "" {
			stage = a
			if !isIdent(a) {
				stage = strconv.Quote(a)
			}
		}
		f += " " + stage
		if len(calls) > 1 && calls[1].name == "throwExceptionOnMiss" {
			f += " orFail"
		}
	}
	return "skip " + f, true
}

// leadingWord returns the identifier at the start of s, or "".
func leadingWord(s string) string {
	for i, r := range s {
		if !isIdentPart(r) {
			return s[:i]
		}
	}
	return s
}
