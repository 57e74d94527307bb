package nfa

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/cepheus-cep/cepheus/event"
)

// TestDataDriven runs the files of testdata (github.com/cockroachdb/datadriven
// format; go test ./nfa -run TestDataDriven -rewrite regenerates the expected
// outputs). Commands:
//
//	pattern [timeouts]  build a pattern from the stage lines of the input and
//	                    compile it (WithTimeouts with the argument); prints
//	                    NFA.String() or the compile error. Later run cases
//	                    of the file use it.
//	run [limit=N]       feed the input to a new run of the last pattern, with
//	                    at most N partial matches; prints what each step
//	                    released, then the partial matches and buffered
//	                    events left.
//
// A stage line is a contiguity (begin, next, followedBy, followedByAny,
// notNext, notFollowedBy), a name, then modifiers applied in order:
//
//	where=a, where=(a,b)   the event's name is one of those (else any event)
//	or=a                   Or(the event's name is a)
//	until=a                Until(the event's name is a)
//	sumBelow=N             And(the prices of the events the stage took, and
//	                       this one's, add up to less than N): an iterative
//	                       condition through Context.Events
//	oneOrMore, times=N, times=(N,M), timesOrMore=N, optional, greedy,
//	consecutive, allowCombinations
//	within=MS, gap=MS      Within, WithinGap
//
// "<contiguity> (" opens a group, ended by a line ") <modifiers>". A line
// "skip pastLast|toNext|toFirst S|toLast S [orThrow]" sets the skip
// strategy.
//
// A run's input lines are events, name@ts or name@ts:price (Seq counts
// from 1; each is AdvanceTime(ts) then Process(ev, ts), the nfa_harness
// protocol), "advance TS" (AdvanceTime alone), or "restore" (the run is
// replaced by the decoding of its encoding, which must encode the same).
// Matches and timeouts print as "stage:seq,seq ..." with their At.
//
// testdata holds the fuzz corpus too (fuzz/), so the files are globbed
// rather than walked.
func TestDataDriven(t *testing.T) {
	paths, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no test files testdata/*.txt (%v)", err)
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			var n *NFA
			datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
				switch d.Cmd {
				case "pattern":
					n = nil
					p, err := ddPattern(d.Input)
					if err != nil {
						d.Fatalf(t, "%v", err)
					}
					var opts []Option
					if d.HasArg("timeouts") {
						opts = append(opts, WithTimeouts())
					}
					n, err = Compile(p, opts...)
					if err != nil {
						return "error: " + err.Error()
					}
					return n.String()
				case "run":
					if n == nil {
						d.Fatalf(t, "run without a compiled pattern")
					}
					limit := 0
					d.MaybeScanArgs(t, "limit", &limit)
					return ddRunNFA(t, d, n, limit)
				}
				d.Fatalf(t, "unknown command %q", d.Cmd)
				return ""
			})
		})
	}
}

// ddPattern builds the pattern of a pattern case's input.
func ddPattern(input string) (*Pattern, error) {
	lines := strings.Split(input, "\n")
	var skip *SkipStrategy
	p, rest, err := ddChain(lines, &skip)
	if err != nil {
		return nil, err
	}
	if len(rest) > 0 {
		return nil, fmt.Errorf("unexpected %q", rest[0])
	}
	if p == nil {
		return nil, fmt.Errorf("no stages")
	}
	if skip != nil {
		p.Skip(*skip)
	}
	return p, nil
}

// ddChain builds one chain of stages from lines, up to a line starting
// with ")" or the end, and returns its last stage and the lines left.
func ddChain(lines []string, skip **SkipStrategy) (*Pattern, []string, error) {
	var p *Pattern
	for len(lines) > 0 {
		line := strings.TrimSpace(lines[0])
		if strings.HasPrefix(line, ")") {
			break
		}
		lines = lines[1:]
		if line == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(line, "skip "); ok {
			s, err := ddSkip(strings.Fields(rest))
			if err != nil {
				return nil, nil, err
			}
			*skip = &s
			continue
		}
		if cont, ok := strings.CutSuffix(line, " ("); ok {
			g, rest, err := ddChain(lines, skip)
			if err != nil {
				return nil, nil, err
			}
			if len(rest) == 0 {
				return nil, nil, fmt.Errorf("group %q not closed", line)
			}
			lines = rest[1:]
			if p, err = ddAddGroup(p, cont, g); err != nil {
				return nil, nil, err
			}
			if err := ddModifiers(p, "", strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest[0]), ")"))); err != nil {
				return nil, nil, err
			}
			continue
		}
		cont, name, _ := strings.Cut(line, " ")
		name, mods, _ := strings.Cut(strings.TrimSpace(name), " ")
		var err error
		if p, err = ddAddStage(p, cont, name); err != nil {
			return nil, nil, err
		}
		if err := ddModifiers(p, name, mods); err != nil {
			return nil, nil, err
		}
	}
	return p, lines, nil
}

func ddAddStage(p *Pattern, cont, name string) (*Pattern, error) {
	if cont == "begin" {
		if p != nil {
			return nil, fmt.Errorf("begin %s after the first stage", name)
		}
		return Begin(name), nil
	}
	if p == nil {
		return nil, fmt.Errorf("%s %s: the first stage is begin", cont, name)
	}
	switch cont {
	case "next":
		return p.Next(name), nil
	case "followedBy":
		return p.FollowedBy(name), nil
	case "followedByAny":
		return p.FollowedByAny(name), nil
	case "notNext":
		return p.NotNext(name), nil
	case "notFollowedBy":
		return p.NotFollowedBy(name), nil
	}
	return nil, fmt.Errorf("unknown contiguity %q", cont)
}

func ddAddGroup(p *Pattern, cont string, g *Pattern) (*Pattern, error) {
	if g == nil {
		return nil, fmt.Errorf("empty group")
	}
	if cont == "begin" {
		if p != nil {
			return nil, fmt.Errorf("begin ( after the first stage")
		}
		return BeginGroup(g), nil
	}
	if p == nil {
		return nil, fmt.Errorf("%s (: the first stage is begin", cont)
	}
	switch cont {
	case "next":
		return p.NextGroup(g), nil
	case "followedBy":
		return p.FollowedByGroup(g), nil
	case "followedByAny":
		return p.FollowedByAnyGroup(g), nil
	}
	return nil, fmt.Errorf("unknown group contiguity %q", cont)
}

// ddModifiers applies the modifiers of a stage line to p, the stage name.
func ddModifiers(p *Pattern, name, mods string) error {
	if mods == "" {
		return nil
	}
	// The modifiers have the syntax of datadriven's arguments.
	_, args, err := datadriven.ParseLine("stage " + mods)
	if err != nil {
		return err
	}
	for _, a := range args {
		ints := func(want int) ([]int, error) {
			if len(a.Vals) != want {
				return nil, fmt.Errorf("%s: want %d values", a.Key, want)
			}
			out := make([]int, want)
			for i, v := range a.Vals {
				if out[i], err = strconv.Atoi(v); err != nil {
					return nil, fmt.Errorf("%s: %v", a.Key, err)
				}
			}
			return out, nil
		}
		var n []int
		switch a.Key {
		case "where":
			p.Where(nameIn(a.Vals...))
		case "or":
			p.Or(nameIn(a.Vals...))
		case "until":
			p.Until(nameIn(a.Vals...))
		case "sumBelow":
			if n, err = ints(1); err == nil {
				p.Where(sumBelow(name, float64(n[0])))
			}
		case "oneOrMore":
			p.OneOrMore()
		case "times":
			if len(a.Vals) == 2 {
				if n, err = ints(2); err == nil {
					p.TimesRange(n[0], n[1])
				}
			} else if n, err = ints(1); err == nil {
				p.Times(n[0])
			}
		case "timesOrMore":
			if n, err = ints(1); err == nil {
				p.TimesOrMore(n[0])
			}
		case "optional":
			p.Optional()
		case "greedy":
			p.Greedy()
		case "consecutive":
			p.Consecutive()
		case "allowCombinations":
			p.AllowCombinations()
		case "within":
			if n, err = ints(1); err == nil {
				p.Within(time.Duration(n[0]) * time.Millisecond)
			}
		case "gap":
			if n, err = ints(1); err == nil {
				p.WithinGap(time.Duration(n[0]) * time.Millisecond)
			}
		default:
			err = fmt.Errorf("unknown modifier %q", a.Key)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func ddSkip(f []string) (SkipStrategy, error) {
	var s SkipStrategy
	if len(f) == 0 {
		return s, fmt.Errorf("skip: no strategy")
	}
	switch f[0] {
	case "none":
		s = NoSkip()
	case "toNext":
		s = SkipToNextEvent()
	case "pastLast":
		s = SkipPastLast()
	case "toFirst", "toLast":
		if len(f) < 2 {
			return s, fmt.Errorf("skip %s: no stage", f[0])
		}
		if f[0] == "toFirst" {
			s = SkipToFirstOf(f[1])
		} else {
			s = SkipToLastOf(f[1])
		}
		f = f[1:]
	default:
		return s, fmt.Errorf("unknown skip strategy %q", f[0])
	}
	switch {
	case len(f) == 2 && f[1] == "orThrow":
		s = s.OrThrow()
	case len(f) > 1:
		return s, fmt.Errorf("skip: unexpected %q", f[1:])
	}
	return s, nil
}

func nameIn(names ...string) Condition {
	return CondFunc(func(e *event.Event, _ *Context) bool {
		s, _ := e.Field(0).AsString()
		for _, n := range names {
			if s == n {
				return true
			}
		}
		return false
	})
}

// sumBelow is an iterative condition: the prices of the events that stage
// has taken in this partial match, plus the current event's, add up to
// less than limit.
func sumBelow(stage string, limit float64) Condition {
	return CondFunc(func(e *event.Event, ctx *Context) bool {
		sum, _ := e.Field(1).AsFloat()
		for _, prev := range ctx.Events(stage) {
			p, _ := prev.Field(1).AsFloat()
			sum += p
		}
		return sum < limit
	})
}

// ddRunNFA runs a run case's input through a new run of n.
func ddRunNFA(t *testing.T, d *datadriven.TestData, n *NFA, limit int) string {
	r := n.NewRun()
	r.SetMaxPartialMatches(limit)
	var res Result
	var b strings.Builder
	seq := uint64(0)
	// step runs one call and prints what it released, so that the lines
	// keep the order of the calls; it reports whether the call succeeded.
	step := func(label string, call func() error) bool {
		res.Reset()
		err := call()
		if err != nil {
			fmt.Fprintf(&b, "%s: error: %v\n", label, err)
		}
		for _, m := range res.Matches {
			fmt.Fprintf(&b, "%s: match %s (at %d)\n", label, format(n, m), m.At)
		}
		for _, to := range res.Timeouts {
			fmt.Fprintf(&b, "%s: timeout %s (at %d)\n", label, format(n, to.Match), to.At)
		}
		if res.Dropped > 0 {
			fmt.Fprintf(&b, "%s: dropped %d\n", label, res.Dropped)
		}
		return err == nil
	}
	for _, line := range strings.Split(d.Input, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
			continue
		case f[0] == "advance" && len(f) == 2:
			ts, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				d.Fatalf(t, "%s: %v", line, err)
			}
			if !step(line, func() error { return r.AdvanceTime(event.Time(ts), &res) }) {
				return b.String()
			}
			continue
		case f[0] == "restore" && len(f) == 1:
			enc := r.AppendBinary(nil)
			r2, rest, err := n.DecodeRun(enc)
			if err != nil || len(rest) != 0 {
				d.Fatalf(t, "DecodeRun: %v (%d bytes left)", err, len(rest))
			}
			if again := r2.AppendBinary(nil); string(again) != string(enc) {
				d.Fatalf(t, "the restored run encodes differently")
			}
			r2.SetMaxPartialMatches(limit)
			r = r2
			continue
		}
		for _, tok := range f {
			name, rest, ok := strings.Cut(tok, "@")
			tsText, priceText, hasPrice := strings.Cut(rest, ":")
			ts, err := strconv.ParseInt(tsText, 10, 64)
			if !ok || err != nil {
				d.Fatalf(t, "bad event %q (want name@ts or name@ts:price)", tok)
			}
			price := 0.0
			if hasPrice {
				if price, err = strconv.ParseFloat(priceText, 64); err != nil {
					d.Fatalf(t, "bad price in %q", tok)
				}
			}
			seq++
			e := ev(seq, name, price, event.Time(ts))
			label := fmt.Sprintf("#%d %s", seq, tok)
			if !step(label, func() error { return r.AdvanceTime(e.Time, &res) }) ||
				!step(label, func() error { return r.Process(e, e.Time, &res) }) {
				return b.String()
			}
		}
	}
	fmt.Fprintf(&b, "left: %d partial, %d buffered\n", r.PartialMatches(), r.BufferedEvents())
	return b.String()
}
