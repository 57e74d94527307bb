package cep

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/nfa"
	"github.com/cepheus-cep/cepheus/runtime/state"
)

// Test events follow Flink's CEPOperatorTest: Event(id, name, price) and
// SubEvent(id, name, price, volume). Slots: name, price, volume (null for a
// plain Event), id (the key).
const (
	slotName = iota
	slotPrice
	slotVolume
	slotID
)

type tev struct {
	id     int64
	name   string
	price  float64
	volume float64 // > 0 makes a SubEvent
	ts     event.Time
}

// mkEvents builds events with Seq = position + 1 and Time = ts.
func mkEvents(in ...tev) []*event.Event {
	out := make([]*event.Event, len(in))
	for i, e := range in {
		vol := event.Null
		if e.volume > 0 {
			vol = event.Float(e.volume)
		}
		out[i] = &event.Event{
			Time:   e.ts,
			Seq:    uint64(i + 1),
			Fields: []event.Value{event.String(e.name), event.Float(e.price), vol, event.Int(e.id)},
		}
	}
	return out
}

func keyByID(e *event.Event) event.Key {
	id, _ := e.Field(slotID).AsInt()
	return event.Key(strconv.FormatInt(id, 10))
}

func name(e *event.Event) string { s, _ := e.Field(slotName).AsString(); return s }

func price(e *event.Event) float64 { f, _ := e.Field(slotPrice).AsFloat(); return f }

func nameIs(n string) nfa.Condition {
	return nfa.CondFunc(func(e *event.Event, _ *nfa.Context) bool { return name(e) == n })
}

var bigSubEvent = nfa.CondFunc(func(e *event.Event, _ *nfa.Context) bool {
	v, ok := e.Field(slotVolume).AsFloat()
	return ok && v > 5
})

func byPrice(a, b *event.Event) bool { return price(a) < price(b) }

func mustCompile(t testing.TB, p *nfa.Pattern, opts ...nfa.Option) *nfa.NFA {
	t.Helper()
	n, err := nfa.Compile(p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// flinkNFA is the pattern of CEPOperatorTest's NFAFactory: start
// followedByAny middle (a SubEvent with volume > 5) followedByAny end,
// within 10 ms.
func flinkNFA(t testing.TB, opts ...nfa.Option) *nfa.NFA {
	p := nfa.Begin("start").Where(nameIs("start")).
		FollowedByAny("middle").Where(bigSubEvent).
		FollowedByAny("end").Where(nameIs("end")).
		Within(10 * time.Millisecond)
	return mustCompile(t, p, opts...)
}

// render prints an item compactly: kind:key:seqs@at.
func render(it Item) string {
	seqs := func(m nfa.Match) string {
		var s []string
		for _, st := range m.Events {
			for _, e := range st {
				s = append(s, strconv.FormatUint(e.Seq, 10))
			}
		}
		return "[" + strings.Join(s, " ") + "]"
	}
	switch it.Kind {
	case ItemWatermark:
		return fmt.Sprintf("wm:%d", int64(it.Watermark))
	case ItemMatch, ItemTimeout:
		return fmt.Sprintf("%s:%s:%s@%d", it.Kind, it.Key, seqs(it.Match), int64(it.At))
	case ItemLate, ItemOverflow:
		return fmt.Sprintf("%s:%s:%d@%d", it.Kind, it.Key, it.Event.Seq, int64(it.At))
	}
	return fmt.Sprintf("bad item %+v", it)
}

// script runs steps against an operator. Steps: "e<seq>" processes that
// event at its own timestamp, "w<t>" a watermark ("wMIN" is event.MinTime,
// "wMAX" event.MaxTime), "p<t>" sets the processing time, "r" snapshots the
// operator and restores it into a new one.
type script struct {
	t      testing.TB
	cfg    OperatorConfig
	events []*event.Event
	op     *Operator
	out    Output
}

func newScript(t testing.TB, cfg OperatorConfig, events []*event.Event) *script {
	t.Helper()
	op, err := NewOperator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &script{t: t, cfg: cfg, events: events, op: op}
}

func parseTime(s string) event.Time {
	switch s {
	case "MIN":
		return event.MinTime
	case "MAX":
		return event.MaxTime
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		panic(err)
	}
	return event.Time(n)
}

func (s *script) step(st string) error {
	switch st[0] {
	case 'e':
		ev := s.events[parseTime(st[1:])-1]
		return s.op.ProcessElement(ev, ev.Time, &s.out)
	case 'w':
		return s.op.ProcessWatermark(parseTime(st[1:]), &s.out)
	case 'p':
		return s.op.SetProcessingTime(parseTime(st[1:]), &s.out)
	case 'r':
		s.restore()
		return nil
	}
	panic("bad step " + st)
}

func (s *script) restore() {
	s.t.Helper()
	snap, err := s.op.Snapshot()
	if err != nil {
		s.t.Fatalf("snapshot: %v", err)
	}
	op, err := RestoreOperator(s.cfg, snap)
	if err != nil {
		s.t.Fatalf("restore: %v", err)
	}
	again, err := op.Snapshot()
	if err != nil {
		s.t.Fatalf("snapshot after restore: %v", err)
	}
	if !slices.Equal(snap, again) {
		s.t.Fatalf("snapshot of the restored operator differs:\n%x\n%x", snap, again)
	}
	if got, want := op.Stats(), s.op.Stats(); got != want {
		s.t.Fatalf("stats after restore = %+v, want %+v", got, want)
	}
	s.op = op
}

func (s *script) run(steps string) []string {
	s.t.Helper()
	for _, st := range strings.Fields(steps) {
		if err := s.step(st); err != nil {
			s.t.Fatalf("step %s: %v", st, err)
		}
	}
	out := make([]string, len(s.out.Items))
	for i, it := range s.out.Items {
		out[i] = render(it)
	}
	s.out.Reset()
	return out
}

func checkOutput(t *testing.T, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("output:\n  got  %q\n  want %q", got, want)
	}
}

// checkClean asserts that the operator holds no state at all.
func checkClean(t *testing.T, op *Operator) {
	t.Helper()
	st := op.Stats()
	if st.Keys != 0 || st.BufferedEvents != 0 || len(op.keys) != 0 || op.timers.len() != 0 {
		t.Errorf("state left: %d keys, %d buffered, %d timers", st.Keys, st.BufferedEvents, op.timers.len())
	}
}

// The Flink conformance cases of CEPOperatorTest, with timeouts and late
// elements shown inline.
func TestFlinkOperatorCases(t *testing.T) {
	cleanup := mkEvents(
		tev{id: 42, name: "foobar", price: 1, ts: 2},
		tev{id: 42, name: "foo1", price: 1, volume: 10, ts: 2},
		tev{id: 42, name: "barfoo", price: 1, volume: 5, ts: 3},
		tev{id: 42, name: "start", price: 1, ts: 1},
		tev{id: 43, name: "start", price: 1, ts: 1},
		tev{id: 42, name: "start", price: 2, ts: 4},
		tev{id: 42, name: "foo2", price: 1, volume: 10, ts: 5},
		tev{id: 42, name: "end", price: 1, ts: 6},
		tev{id: 42, name: "foo3", price: 1, volume: 10, ts: 12},
		tev{id: 42, name: "end", price: 2, ts: 13},
	)
	comparator := mkEvents(
		tev{id: 42, name: "start", price: 1, ts: 1},
		tev{id: 43, name: "start", price: 1, ts: 1},
		tev{id: 42, name: "foobar", price: 1, ts: 2},
		tev{id: 42, name: "barfoo", price: 1, volume: 5, ts: 3},
		tev{id: 42, name: "start", price: 2, ts: 4},
		tev{id: 42, name: "foo2", price: 2, volume: 10, ts: 5},
		tev{id: 42, name: "foo1", price: 1, volume: 10, ts: 5},
		tev{id: 42, name: "end", price: 1, ts: 6},
	)
	procComparator := mkEvents(
		tev{id: 42, name: "start", price: 1},
		tev{id: 43, name: "start", price: 1},
		tev{id: 42, name: "foobar", price: 1},
		tev{id: 42, name: "barfoo", price: 1, volume: 5},
		tev{id: 42, name: "foo2", price: 4, volume: 10, ts: 3},
		tev{id: 42, name: "foo1", price: 3, volume: 10, ts: 3},
		tev{id: 42, name: "start", price: 2, ts: 3},
		tev{id: 42, name: "end", price: 1, ts: 5},
	)
	sideOutput := mkEvents(
		tev{id: 41, name: "c", price: 1, ts: 6},
		tev{id: 41, name: "a", price: 2, ts: 4},
		tev{id: 41, name: "a", price: 3, ts: 5},
		tev{id: 41, name: "a", price: 4, ts: 7},
	)
	tests := []struct {
		name     string
		timeouts bool
		mode     TimeMode
		less     func(a, b *event.Event) bool
		events   []*event.Event
		steps    string
		want     []string
		clean    bool
	}{{
		name:     "KeyedAdvancingTimeWithoutElements",
		timeouts: true,
		events:   mkEvents(tev{id: 42, name: "start", price: 1, ts: 3}),
		steps:    "e1 w5 w13",
		want:     []string{"wm:5", "timeout:42:[1]@13", "wm:13"},
		clean:    true,
	}, {
		name:   "CleanupEventTime",
		events: cleanup,
		steps:  "wMIN e1 e2 e3 e4 e5 w2 e6 e7 r e8 w11 w12 e9 e10 w20 w21",
		want: []string{
			"wm:-9223372036854775808", "wm:2",
			"match:42:[4 2 8]@6", "match:42:[4 7 8]@6", "match:42:[6 7 8]@6", "wm:11",
			"wm:12", "late:42:9@12",
			"match:42:[6 7 10]@13", "wm:20", "wm:21",
		},
		clean: true,
	}, {
		name:   "ComparatorEventTime",
		less:   byPrice,
		events: comparator,
		steps:  "w0 e1 e2 e3 e4 w3 e5 e6 e7 r e8 w6",
		want: []string{
			"wm:0", "wm:3",
			"match:42:[1 7 8]@6", "match:42:[1 6 8]@6", "match:42:[5 7 8]@6", "match:42:[5 6 8]@6",
			"wm:6",
		},
	}, {
		name:   "ComparatorProcessTime",
		mode:   ProcessingTime,
		less:   byPrice,
		events: procComparator,
		steps:  "p0 e1 e2 e3 e4 p3 e5 e6 e7 r p4 e8 p5",
		want: []string{
			"match:42:[1 6 8]@4", "match:42:[1 5 8]@4", "match:42:[7 6 8]@4", "match:42:[7 5 8]@4",
		},
	}, {
		name:   "SideOutputLateElementsEventTime",
		events: sideOutput,
		steps:  "wMIN e1 w6 e2 e3 e4",
		want:   []string{"wm:-9223372036854775808", "wm:6", "late:41:2@4", "late:41:3@5"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var opts []nfa.Option
			if tc.timeouts {
				opts = append(opts, nfa.WithTimeouts())
			}
			cfg := OperatorConfig{NFA: flinkNFA(t, opts...), Key: keyByID, TimeMode: tc.mode, Less: tc.less}
			s := newScript(t, cfg, tc.events)
			checkOutput(t, s.run(tc.steps), tc.want)
			if tc.clean {
				checkClean(t, s.op)
			}
		})
	}
}

// seqPattern is a strict sequence a next b next c.
func seqPattern(t testing.TB) *nfa.NFA {
	p := nfa.Begin("a").Where(nameIs("a")).Next("b").Where(nameIs("b")).Next("c").Where(nameIs("c"))
	return mustCompile(t, p)
}

func TestEventTimeOrdering(t *testing.T) {
	byName := func(a, b *event.Event) bool { return name(a) < name(b) }
	tests := []struct {
		name   string
		less   func(a, b *event.Event) bool
		events []tev
		steps  string
		want   []string
	}{{
		name:   "out of order, sorted on watermark",
		events: []tev{{name: "c", ts: 5}, {name: "a", ts: 3}, {name: "b", ts: 4}},
		steps:  "e1 e2 e3 w4 w5",
		want:   []string{"wm:4", "match::[2 3 1]@5", "wm:5"},
	}, {
		name:   "one watermark releases several timestamps",
		events: []tev{{name: "b", ts: 20}, {name: "c", ts: 30}, {name: "a", ts: 10}},
		steps:  "e1 e2 e3 w100",
		want:   []string{"match::[3 1 2]@30", "wm:100"},
	}, {
		name:   "nothing before the watermark passes",
		events: []tev{{name: "a", ts: 1}, {name: "b", ts: 2}, {name: "c", ts: 3}},
		steps:  "e1 e2 e3 w2",
		want:   []string{"wm:2"},
	}, {
		name:   "equal timestamps keep arrival order",
		events: []tev{{name: "a", ts: 1}, {name: "c", ts: 2}, {name: "b", ts: 2}},
		steps:  "e1 e2 e3 w2",
		want:   []string{"wm:2"},
	}, {
		name:   "comparator breaks ties",
		less:   byName,
		events: []tev{{name: "a", ts: 1}, {name: "c", ts: 2}, {name: "b", ts: 2}},
		steps:  "e1 e2 e3 w2",
		want:   []string{"match::[1 3 2]@2", "wm:2"},
	}, {
		name:   "comparator orders only equal timestamps",
		less:   byName,
		events: []tev{{name: "c", ts: 1}, {name: "b", ts: 2}, {name: "a", ts: 3}},
		steps:  "e1 e2 e3 w3",
		want:   []string{"wm:3"},
	}, {
		name:   "comparator is stable",
		less:   func(a, b *event.Event) bool { return false },
		events: []tev{{name: "a", ts: 1}, {name: "b", ts: 1}, {name: "c", ts: 1}},
		steps:  "e1 e2 e3 w1",
		want:   []string{"match::[1 2 3]@1", "wm:1"},
	}, {
		name:   "at the watermark is late",
		events: []tev{{name: "a", ts: 5}, {name: "a", ts: 4}, {name: "a", ts: 6}},
		steps:  "w5 e1 e2 e3",
		want:   []string{"wm:5", "late::1@5", "late::2@4"},
	}, {
		name:   "nothing is late before the first watermark but MinTime",
		events: []tev{{name: "a", ts: event.MinTime}, {name: "a", ts: event.MinTime + 1}},
		steps:  "e1 e2",
		want:   []string{"late::1@-9223372036854775808"},
	}, {
		// As in Flink (docs/flink-differences.md, backwards-watermark): the
		// watermark is set, so elements behind the old watermark but ahead
		// of the new one are on time, and one at the new one is late.
		name:   "a watermark going back is set: elements after it are on time, one at it is late",
		events: []tev{{name: "a", ts: 3}, {name: "b", ts: 4}, {name: "c", ts: 5}, {name: "a", ts: 2}},
		steps:  "w10 w2 e4 e1 e2 e3 w5",
		want:   []string{"wm:10", "wm:2", "late::4@2", "match::[1 2 3]@5", "wm:5"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := OperatorConfig{NFA: seqPattern(t), Less: tc.less}
			s := newScript(t, cfg, mkEvents(tc.events...))
			checkOutput(t, s.run(tc.steps), tc.want)
		})
	}
}

func TestLateCounted(t *testing.T) {
	cfg := OperatorConfig{NFA: seqPattern(t)}
	s := newScript(t, cfg, mkEvents(tev{name: "a", ts: 5}, tev{name: "a", ts: 1}, tev{name: "a", ts: 6}))
	s.run("w5 e1 e2 e3")
	if st := s.op.Stats(); st.Late != 2 || st.BufferedEvents != 1 || st.Keys != 1 {
		t.Errorf("stats = %+v, want 2 late, 1 buffered, 1 key", st)
	}
}

// timeoutPattern is a followedBy b within 10 ms, reporting timeouts.
func timeoutPattern(t testing.TB) *nfa.NFA {
	p := nfa.Begin("a").Where(nameIs("a")).FollowedBy("b").Where(nameIs("b")).Within(10 * time.Millisecond)
	return mustCompile(t, p, nfa.WithTimeouts())
}

func TestTimeouts(t *testing.T) {
	tests := []struct {
		name   string
		events []tev
		steps  string
		want   []string
	}{{
		name:   "timeout at start plus window",
		events: []tev{{id: 1, name: "a", ts: 3}},
		steps:  "e1 w12 w13",
		want:   []string{"wm:12", "timeout:1:[1]@13", "wm:13"},
	}, {
		name:   "reported at start plus window whatever the watermark",
		events: []tev{{id: 1, name: "a", ts: 3}},
		steps:  "e1 w100",
		want:   []string{"timeout:1:[1]@13", "wm:100"},
	}, {
		name:   "keys fire in due order",
		events: []tev{{id: 1, name: "a", ts: 5}, {id: 2, name: "a", ts: 3}, {id: 3, name: "x", ts: 4}},
		steps:  "e1 e2 e3 w100",
		want:   []string{"timeout:2:[2]@13", "timeout:1:[1]@15", "wm:100"},
	}, {
		name:   "equal due times fire in first-seen order",
		events: []tev{{id: 2, name: "a", ts: 3}, {id: 1, name: "a", ts: 3}},
		steps:  "e1 e2 w100",
		want:   []string{"timeout:2:[1]@13", "timeout:1:[2]@13", "wm:100"},
	}, {
		name:   "a deadline fires a key that buffers nothing",
		events: []tev{{id: 1, name: "a", ts: 3}, {id: 1, name: "b", ts: 20}},
		steps:  "e1 w4 e2 w13",
		want:   []string{"wm:4", "timeout:1:[1]@13", "wm:13"},
	}, {
		name:   "a match inside the window, then nothing",
		events: []tev{{id: 1, name: "a", ts: 3}, {id: 1, name: "b", ts: 12}},
		steps:  "e1 e2 w12 w100",
		want:   []string{"match:1:[1 2]@12", "wm:12", "wm:100"},
	}, {
		name:   "timeouts of an element's time advance come before its matches",
		events: []tev{{id: 1, name: "a", ts: 1}, {id: 1, name: "a", ts: 5}, {id: 1, name: "b", ts: 11}},
		steps:  "e1 e2 e3 w11",
		want:   []string{"timeout:1:[1]@11", "match:1:[2 3]@11", "wm:11"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := OperatorConfig{NFA: timeoutPattern(t), Key: keyByID}
			s := newScript(t, cfg, mkEvents(tc.events...))
			checkOutput(t, s.run(tc.steps), tc.want)
			s.run("wMAX")
			checkClean(t, s.op)
		})
	}
}

// A notFollowedBy at the end of a pattern is released by time: the
// watermark passing start + window emits the match.
func TestPendingMatchReleasedByWatermark(t *testing.T) {
	p := nfa.Begin("a").Where(nameIs("a")).NotFollowedBy("b").Where(nameIs("b")).Within(10 * time.Millisecond)
	cfg := OperatorConfig{NFA: mustCompile(t, p), Key: keyByID}
	events := mkEvents(
		tev{id: 1, name: "a", ts: 1},
		tev{id: 2, name: "a", ts: 2},
		tev{id: 2, name: "b", ts: 5},
	)
	s := newScript(t, cfg, events)
	checkOutput(t, s.run("e1 e2 e3 w10 w11 w20"), []string{"wm:10", "match:1:[1]@11", "wm:11", "wm:20"})
	checkClean(t, s.op)
}

func TestProcessingTime(t *testing.T) {
	byName := func(a, b *event.Event) bool { return name(a) < name(b) }
	tests := []struct {
		name   string
		nfa    func(testing.TB) *nfa.NFA
		less   func(a, b *event.Event) bool
		events []tev
		steps  string
		want   []string
	}{{
		name:   "processed on arrival at the processing time",
		nfa:    timeoutPattern,
		events: []tev{{id: 1, name: "a", ts: 100}, {id: 1, name: "b", ts: 0}},
		steps:  "p7 e1 p9 e2",
		want:   []string{"match:1:[1 2]@9"},
	}, {
		name:   "record timestamps are ignored, nothing is late",
		nfa:    timeoutPattern,
		events: []tev{{id: 1, name: "a", ts: 100}, {id: 1, name: "b", ts: -5}},
		steps:  "w200 p7 e1 e2",
		want:   []string{"wm:200", "match:1:[1 2]@7"},
	}, {
		name:   "window measured in processing time, on arrival",
		nfa:    timeoutPattern,
		events: []tev{{id: 1, name: "a"}, {id: 1, name: "b"}},
		steps:  "p0 e1 p10 e2",
		want:   []string{"timeout:1:[1]@10"},
	}, {
		name:   "window expires when the clock moves, without elements",
		nfa:    timeoutPattern,
		events: []tev{{id: 1, name: "a"}},
		steps:  "p3 e1 p12 p13 p20",
		want:   []string{"timeout:1:[1]@13"},
	}, {
		name:   "watermarks only pass through",
		nfa:    timeoutPattern,
		events: []tev{{id: 1, name: "a"}},
		steps:  "p3 e1 w100",
		want:   []string{"wm:100"},
	}, {
		name:   "comparator: buffered until the clock moves on",
		nfa:    seqPattern,
		less:   byName,
		events: []tev{{name: "c"}, {name: "b"}, {name: "a"}},
		steps:  "p5 e1 e2 e3 p5",
		want:   nil,
	}, {
		name:   "comparator: sorted when the clock moves on",
		nfa:    seqPattern,
		less:   byName,
		events: []tev{{name: "c"}, {name: "b"}, {name: "a"}},
		steps:  "p5 e1 e2 e3 p6",
		want:   []string{"match:0:[3 2 1]@5"},
	}, {
		name:   "comparator: ticks are sorted by time first",
		nfa:    seqPattern,
		less:   byName,
		events: []tev{{name: "c"}, {name: "b"}, {name: "a"}},
		steps:  "p1 e1 p2 e2 e3 p9",
		want:   nil,
	}, {
		name:   "comparator: earlier tick drained whole",
		nfa:    seqPattern,
		less:   byName,
		events: []tev{{name: "b"}, {name: "a"}, {name: "c"}},
		steps:  "p1 e1 e2 p2 e3 p3",
		want:   []string{"match:0:[2 1 3]@2"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := OperatorConfig{NFA: tc.nfa(t), Key: keyByID, TimeMode: ProcessingTime, Less: tc.less}
			s := newScript(t, cfg, mkEvents(tc.events...))
			checkOutput(t, s.run(tc.steps), tc.want)
		})
	}
}

func TestStateCleanup(t *testing.T) {
	// Many keys, each completing or timing out: nothing may be left.
	var in []tev
	for k := range int64(50) {
		in = append(in, tev{id: k, name: "a", ts: event.Time(k)})
		if k%2 == 0 {
			in = append(in, tev{id: k, name: "b", ts: event.Time(k + 5)})
		}
		in = append(in, tev{id: k, name: "x", ts: event.Time(k + 1)})
	}
	events := mkEvents(in...)
	for _, mode := range []TimeMode{EventTime, ProcessingTime} {
		t.Run(mode.String(), func(t *testing.T) {
			cfg := OperatorConfig{NFA: timeoutPattern(t), Key: keyByID, TimeMode: mode}
			s := newScript(t, cfg, events)
			var steps []string
			for i, ev := range events {
				if mode == ProcessingTime {
					steps = append(steps, fmt.Sprintf("p%d", ev.Time))
				}
				steps = append(steps, fmt.Sprintf("e%d", i+1))
			}
			if mode == EventTime {
				steps = append(steps, "w60")
			} else {
				steps = append(steps, "p60")
			}
			out := s.run(strings.Join(steps, " "))
			st := s.op.Stats()
			if st.Matches != 25 || st.Timeouts != 25 {
				t.Errorf("matches %d, timeouts %d, want 25 each; output %q", st.Matches, st.Timeouts, out)
			}
			checkClean(t, s.op)
			if s.op.timers.entries() > 64 {
				t.Errorf("timer heap holds %d stale entries", s.op.timers.entries())
			}
		})
	}
}

func TestMaxBufferedEvents(t *testing.T) {
	events := mkEvents(
		tev{id: 1, name: "a", ts: 1},
		tev{id: 1, name: "b", ts: 2},
		tev{id: 1, name: "c", ts: 3},
		tev{id: 2, name: "a", ts: 3},
		tev{id: 1, name: "c", ts: 4},
	)
	cfg := OperatorConfig{NFA: seqPattern(t), Key: keyByID, MaxBufferedEvents: 2}
	s := newScript(t, cfg, events)
	checkOutput(t, s.run("e1 e2 e3 e4 w2 e5 w10"), []string{
		"overflow:1:3@3", "wm:2", "match:1:[1 2 5]@4", "wm:10",
	})
	st := s.op.Stats()
	if st.Overflow != 1 || st.BufferedEvents != 0 {
		t.Errorf("stats = %+v, want 1 overflow, nothing buffered", st)
	}

	// The same in processing time with a comparator.
	cfg.TimeMode, cfg.Less = ProcessingTime, byPrice
	s = newScript(t, cfg, events)
	checkOutput(t, s.run("e1 e2 e3 e4 p1 e3 p2"), []string{"overflow:1:3@0", "match:1:[1 2 3]@1"})
}

func TestPartialMatchLimit(t *testing.T) {
	p := nfa.Begin("a").Where(nameIs("a")).FollowedByAny("b").Where(nameIs("b"))
	cfg := OperatorConfig{NFA: mustCompile(t, p), Key: keyByID, MaxPartialMatches: 2}
	events := mkEvents(
		tev{name: "a", ts: 1}, tev{name: "a", ts: 2}, tev{name: "a", ts: 3}, tev{name: "a", ts: 4},
		tev{name: "b", ts: 5},
	)
	s := newScript(t, cfg, events)
	checkOutput(t, s.run("e1 e2 e3 e4 e5 w5"), []string{"match:0:[1 5]@5", "match:0:[2 5]@5", "wm:5"})
	if got := s.op.Stats().DroppedPartialMatches; got != 2 {
		t.Errorf("DroppedPartialMatches = %d, want 2", got)
	}
}

func TestRunErrorFailsOperator(t *testing.T) {
	p := nfa.Begin("a").Where(nameIs("a")).FollowedBy("b").Where(nameIs("b")).
		Skip(nfa.SkipToFirstOf("a").OrThrow())
	cfg := OperatorConfig{NFA: mustCompile(t, p), Key: keyByID}
	events := mkEvents(tev{id: 7, name: "a", ts: 1}, tev{id: 7, name: "b", ts: 2})
	s := newScript(t, cfg, events)
	for _, st := range []string{"e1", "e2"} {
		if err := s.step(st); err != nil {
			t.Fatal(err)
		}
	}
	err := s.step("w5")
	var ke *KeyError
	if !errors.As(err, &ke) || ke.Key != "7" || !errors.Is(err, nfa.ErrSkipMiss) {
		t.Fatalf("err = %v, want a KeyError for key 7 wrapping nfa.ErrSkipMiss", err)
	}
	if err2 := s.step("w6"); err2 != err {
		t.Errorf("after failure: %v, want the same error", err2)
	}
	if _, err2 := s.op.Snapshot(); err2 != err {
		t.Errorf("snapshot after failure: %v, want the same error", err2)
	}
}

func TestConfigValidation(t *testing.T) {
	n := seqPattern(t)
	for _, cfg := range []OperatorConfig{
		{},
		{NFA: n, TimeMode: 7},
		{NFA: n, MaxBufferedEvents: -1},
	} {
		if _, err := NewOperator(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("NewOperator(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
		if _, err := RestoreOperator(cfg, nil); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("RestoreOperator(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
}

// testSeeds returns the fixed seeds, or the one in CEPHEUS_SEED.
func testSeeds(t *testing.T) []uint64 {
	if s := os.Getenv("CEPHEUS_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CEPHEUS_SEED: %v", err)
		}
		return []uint64{seed}
	}
	return []uint64{1, 2, 3, 4, 5, 6, 7, 8, 42, 1234}
}

// randomScenario returns events over a few keys with timestamps that go
// forward with some disorder, and a script mixing them with watermarks
// (or processing-time ticks) behind the elements.
func randomScenario(rng *rand.Rand, mode TimeMode) ([]*event.Event, []string) {
	names := []string{"start", "foo", "end", "x", "a", "b", "b"}
	var in []tev
	var steps []string
	clock := event.Time(0)
	for i := range 120 {
		clock += event.Time(rng.IntN(2))
		e := tev{
			id:    int64(rng.IntN(3)),
			name:  names[rng.IntN(len(names))],
			price: float64(rng.IntN(3)),
			ts:    clock - event.Time(rng.IntN(4)),
		}
		if e.name == "foo" {
			e.volume = 10
		}
		in = append(in, e)
		if mode == ProcessingTime && rng.IntN(4) == 0 {
			steps = append(steps, fmt.Sprintf("p%d", clock))
		}
		steps = append(steps, fmt.Sprintf("e%d", i+1))
		if mode == EventTime && rng.IntN(5) == 0 {
			// Mostly behind the disorder, sometimes not: some late elements.
			steps = append(steps, fmt.Sprintf("w%d", clock-2-event.Time(rng.IntN(3))))
		}
	}
	if mode == EventTime {
		steps = append(steps, "wMAX")
	} else {
		steps = append(steps, fmt.Sprintf("p%d", clock+100))
	}
	return mkEvents(in...), steps
}

func randomConfigs(t testing.TB) map[string]OperatorConfig {
	loop := nfa.Begin("a").Where(nameIs("a")).
		FollowedBy("b").Where(nameIs("b")).OneOrMore().
		FollowedBy("end").Where(nameIs("end")).
		Within(8 * time.Millisecond)
	notAtEnd := nfa.Begin("start").Where(nameIs("start")).
		NotFollowedBy("x").Where(nameIs("x")).Within(5 * time.Millisecond)
	return map[string]OperatorConfig{
		"flink": {NFA: flinkNFA(t, nfa.WithTimeouts()), Key: keyByID},
		"flink comparator": {
			NFA: flinkNFA(t, nfa.WithTimeouts()), Key: keyByID,
			Less: byPrice, MaxBufferedEvents: 8, MaxPartialMatches: 6,
		},
		"loop skip": {
			NFA: mustCompile(t, loop.Skip(nfa.SkipPastLast()), nfa.WithTimeouts()), Key: keyByID,
		},
		"not at end global": {NFA: mustCompile(t, notAtEnd)},
	}
}

// TestSnapshotRestoreEquivalence runs random scenarios plainly, with a
// snapshot and restore after every step, and at random steps: all runs must
// produce the same output.
func TestSnapshotRestoreEquivalence(t *testing.T) {
	quiet := map[bool]int{}
	defer func() {
		if quiet[true] > quiet[false]/4 {
			t.Errorf("%d of %d scenarios emit almost nothing", quiet[true], quiet[true]+quiet[false])
		}
	}()
	for cname, cfg := range randomConfigs(t) {
		for _, mode := range []TimeMode{EventTime, ProcessingTime} {
			cfg.TimeMode = mode
			for _, seed := range testSeeds(t) {
				rng := rand.New(rand.NewPCG(seed, 0))
				events, steps := randomScenario(rng, mode)
				plain := newScript(t, cfg, events).run(strings.Join(steps, " "))

				every := newScript(t, cfg, events)
				var got []string
				for _, st := range steps {
					got = append(got, every.run(st+" r")...)
				}
				sometimes := newScript(t, cfg, events)
				var got2 []string
				for _, st := range steps {
					if rng.IntN(10) == 0 {
						st += " r"
					}
					got2 = append(got2, sometimes.run(st)...)
				}
				if !slices.Equal(got, plain) || !slices.Equal(got2, plain) {
					t.Errorf("%s, %v, seed %d (CEPHEUS_SEED=%d): outputs differ with snapshot/restore:\n"+
						"plain   %q\nevery   %q\nrandom  %q", cname, mode, seed, seed, plain, got, got2)
				}
				quiet[len(plain) < 4]++
			}
		}
	}
}

func TestSnapshotDeterministic(t *testing.T) {
	cfg := randomConfigs(t)["flink comparator"]
	rng := rand.New(rand.NewPCG(9, 9))
	events, steps := randomScenario(rng, EventTime)
	a, b := newScript(t, cfg, events), newScript(t, cfg, events)
	half := strings.Join(steps[:len(steps)/2], " ")
	a.run(half)
	b.run(half)
	sa, err := a.op.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sb, err := b.op.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sa, sb) {
		t.Error("two operators in the same state encode differently")
	}
}

func TestCorruptSnapshot(t *testing.T) {
	cfg := randomConfigs(t)["flink comparator"]
	rng := rand.New(rand.NewPCG(7, 7))
	events, steps := randomScenario(rng, EventTime)
	s := newScript(t, cfg, events)
	s.run(strings.Join(steps[:len(steps)/2], " "))
	snap, err := s.op.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if s.op.Stats().BufferedEvents == 0 || s.op.Stats().Keys < 2 {
		t.Fatalf("snapshot too small to be a test: %+v", s.op.Stats())
	}
	for n := range len(snap) {
		if _, err := RestoreOperator(cfg, snap[:n]); !errors.Is(err, ErrCorruptSnapshot) {
			t.Fatalf("truncated to %d of %d bytes: err = %v, want ErrCorruptSnapshot", n, len(snap), err)
		}
	}
	for name, bad := range map[string][]byte{
		"trailing byte":   append(slices.Clip(snap), 0),
		"earlier version": append([]byte{snapshotVersion - 1}, snap[1:]...),
	} {
		if _, err := RestoreOperator(cfg, bad); !errors.Is(err, ErrCorruptSnapshot) {
			t.Errorf("%s: err = %v, want ErrCorruptSnapshot", name, err)
		}
	}
	// A later build's version is refused as such, not as corrupt.
	later := append([]byte{snapshotVersion + 1}, snap[1:]...)
	if _, err := RestoreOperator(cfg, later); !errors.Is(err, state.ErrCheckpointVersion) || errors.Is(err, ErrCorruptSnapshot) ||
		!strings.Contains(err.Error(), fmt.Sprintf("operator snapshot of version %d, this build reads up to %d", snapshotVersion+1, snapshotVersion)) {
		t.Errorf("a later version: err = %v, want a later build's record", err)
	}
	// A snapshot of a pattern with another automaton does not decode.
	other := cfg
	other.NFA = mustCompile(t, nfa.Begin("a").Where(nameIs("a")))
	if _, err := RestoreOperator(other, snap); !errors.Is(err, ErrCorruptSnapshot) {
		t.Errorf("other pattern: err = %v, want ErrCorruptSnapshot", err)
	}
	// Flipped bytes may decode to some other state, but must never panic.
	for range 2000 {
		bad := slices.Clone(snap)
		bad[rng.IntN(len(bad))] ^= byte(1 + rng.IntN(255))
		_, _ = RestoreOperator(cfg, bad)
	}
}

// refOperator is the operator's specification written naively: on every
// watermark (or clock tick) it scans all keys for due ones and sorts them.
// The differential test below holds the real operator's timer heap to it.
type refOperator struct {
	cfg       OperatorConfig
	keys      map[event.Key]*refKey
	nextOrder uint64
	wm, pt    event.Time
	res       nfa.Result
	out       []string
}

type refKey struct {
	key   event.Key
	order uint64
	run   *nfa.Run
	buf   map[event.Time][]*event.Event
}

func (r *refOperator) bufDue(ts event.Time) event.Time {
	if r.cfg.TimeMode == ProcessingTime {
		return ts + 1
	}
	return ts
}

func (r *refOperator) due(k *refKey) (event.Time, bool) {
	due, ok := event.MaxTime, false
	for ts := range k.buf {
		if d := r.bufDue(ts); d <= due {
			due, ok = d, true
		}
	}
	if d, has := k.run.NextDeadline(); has && d < due {
		due, ok = d, true
	}
	return due, ok
}

func (r *refOperator) keyOf(ev *event.Event) event.Key {
	if r.cfg.Key == nil {
		return ""
	}
	return r.cfg.Key(ev)
}

func (r *refOperator) key(ev *event.Event) *refKey {
	k := r.keyOf(ev)
	rk := r.keys[k]
	if rk == nil {
		rk = &refKey{key: k, order: r.nextOrder, run: r.cfg.NFA.NewRun(), buf: map[event.Time][]*event.Event{}}
		r.nextOrder++
		r.keys[k] = rk
	}
	return rk
}

func (r *refOperator) emit(k *refKey, at event.Time) {
	for _, m := range r.res.Matches {
		r.out = append(r.out, render(Item{Kind: ItemMatch, Key: k.key, Match: m, At: at}))
	}
	for _, to := range r.res.Timeouts {
		r.out = append(r.out, render(Item{Kind: ItemTimeout, Key: k.key, Match: to.Match, At: to.At}))
	}
	r.res.Reset()
}

func (r *refOperator) feed(k *refKey, ts event.Time) {
	_ = k.run.AdvanceTime(ts, &r.res)
	r.emit(k, ts)
	evs := k.buf[ts]
	if r.cfg.Less != nil {
		slices.SortStableFunc(evs, func(a, b *event.Event) int {
			switch {
			case r.cfg.Less(a, b):
				return -1
			case r.cfg.Less(b, a):
				return 1
			}
			return 0
		})
	}
	for _, ev := range evs {
		_ = k.run.Process(ev, ts, &r.res)
		r.emit(k, ts)
	}
	delete(k.buf, ts)
}

func (r *refOperator) element(ev *event.Event) {
	switch {
	case r.cfg.TimeMode == ProcessingTime && r.cfg.Less == nil:
		k := r.key(ev)
		_ = k.run.AdvanceTime(r.pt, &r.res)
		r.emit(k, r.pt)
		_ = k.run.Process(ev, r.pt, &r.res)
		r.emit(k, r.pt)
		r.cleanup(k)
	case r.cfg.TimeMode == ProcessingTime:
		k := r.key(ev)
		k.buf[r.pt] = append(k.buf[r.pt], ev)
	case ev.Time > r.wm:
		k := r.key(ev)
		k.buf[ev.Time] = append(k.buf[ev.Time], ev)
	default:
		r.out = append(r.out, render(Item{Kind: ItemLate, Key: r.keyOf(ev), Event: ev, At: ev.Time}))
	}
}

func (r *refOperator) cleanup(k *refKey) {
	if len(k.buf) == 0 && k.run.Empty() {
		delete(r.keys, k.key)
	}
}

func (r *refOperator) fire(t event.Time) {
	type due struct {
		k *refKey
		t event.Time
	}
	var dues []due
	for _, k := range r.keys {
		if d, ok := r.due(k); ok && d <= t {
			dues = append(dues, due{k, d})
		}
	}
	slices.SortFunc(dues, func(a, b due) int {
		if a.t != b.t {
			return int(a.t - b.t)
		}
		return int(a.k.order) - int(b.k.order)
	})
	for _, d := range dues {
		k := d.k
		ts := slices.Sorted(func(yield func(event.Time) bool) {
			for ts := range k.buf {
				if !yield(ts) {
					return
				}
			}
		})
		drainAll := r.cfg.TimeMode == ProcessingTime && len(ts) > 0 && r.bufDue(ts[0]) <= t
		for _, x := range ts {
			if r.cfg.TimeMode == EventTime && x <= t || drainAll {
				r.feed(k, x)
			}
		}
		_ = k.run.AdvanceTime(t, &r.res)
		r.emit(k, t)
		r.cleanup(k)
	}
}

func (r *refOperator) step(events []*event.Event, st string) {
	switch st[0] {
	case 'e':
		r.element(events[parseTime(st[1:])-1])
	case 'w':
		r.wm = parseTime(st[1:])
		if r.cfg.TimeMode == EventTime {
			r.fire(r.wm)
		}
		r.out = append(r.out, fmt.Sprintf("wm:%d", int64(r.wm)))
	case 'p':
		r.pt = parseTime(st[1:])
		if r.cfg.TimeMode == ProcessingTime {
			r.fire(r.pt)
		}
	}
}

// TestAgainstReference compares the operator with refOperator on many keys,
// enough to make the timer heap re-arm and compact.
func TestAgainstReference(t *testing.T) {
	for cname, cfg := range randomConfigs(t) {
		if cfg.MaxBufferedEvents > 0 {
			continue // the reference has no limits
		}
		keyFns := []func(*event.Event) event.Key{cfg.Key}
		if cfg.Key != nil {
			// Many short-lived keys: the timer heap re-arms and compacts.
			keyFns = append(keyFns, func(e *event.Event) event.Key {
				return keyByID(e) + event.Key(fmt.Sprintf("/%d", e.Seq%40))
			})
		}
		for ki, key := range keyFns {
			cfg.Key = key
			for _, mode := range []TimeMode{EventTime, ProcessingTime} {
				cfg.TimeMode = mode
				for _, less := range []func(a, b *event.Event) bool{nil, byPrice} {
					cfg.Less = less
					for _, seed := range testSeeds(t) {
						rng := rand.New(rand.NewPCG(seed, 1))
						events, steps := randomScenario(rng, mode)
						got := newScript(t, cfg, events).run(strings.Join(steps, " "))
						ref := &refOperator{cfg: cfg, keys: map[event.Key]*refKey{}, wm: event.MinTime}
						for _, st := range steps {
							ref.step(events, st)
						}
						if !slices.Equal(got, ref.out) {
							t.Errorf("%s, key %d, %v, less %v, seed %d (CEPHEUS_SEED=%d): "+
								"operator and reference differ:\noperator  %q\nreference %q",
								cname, ki, mode, less != nil, seed, seed, got, ref.out)
						}
					}
				}
			}
		}
	}
}

func TestTimerHeap(t *testing.T) {
	// In order, most timers are armed in the order they come due and go to
	// the FIFO lanes; the rest, and most random ones, go to the heap. A
	// key has two timers (buffer and deadline) and fires once, at the
	// earlier.
	for _, inOrder := range []bool{false, true} {
		for _, seed := range testSeeds(t) {
			testTimerHeap(t, seed, inOrder)
		}
	}
}

func testTimerHeap(t *testing.T, seed uint64, inOrder bool) {
	rng := rand.New(rand.NewPCG(seed, 2))
	var h timerHeap
	keys := make([]*keyState, 300)
	for i := range keys {
		keys[i] = &keyState{order: uint64(i)}
	}
	clock := event.Time(0)
	dueOf := func(k timerKind) event.Time {
		if !inOrder {
			return event.Time(rng.IntN(1000))
		}
		clock += event.Time(rng.IntN(2))
		d := clock
		if k == deadlineTimer {
			d += 50
		}
		if rng.IntN(10) == 0 {
			d -= event.Time(rng.IntN(20))
		}
		return d
	}
	dueOfKey := func(ks *keyState) (event.Time, bool) {
		switch {
		case ks.timer.armed && ks.deadline.armed:
			return min(ks.timer.due, ks.deadline.due), true
		case ks.timer.armed:
			return ks.timer.due, true
		case ks.deadline.armed:
			return ks.deadline.due, true
		}
		return 0, false
	}
	compacted, usedQ, usedH := false, false, false
	for round := range 20 {
		for range 400 {
			ks := keys[rng.IntN(len(keys))]
			before := h.entries()
			switch k := timerKind(rng.IntN(int(timerKinds))); {
			case rng.IntN(10) == 0:
				h.disarm(ks)
			case rng.IntN(10) == 0:
				h.disarmKind(ks, k)
			case k == deadlineTimer:
				h.armDeadline(ks, dueOf(k))
			default:
				h.arm(ks, dueOf(k))
			}
			compacted = compacted || h.entries() < before
			usedQ = usedQ || h.entries() > len(h.h[bufferTimer])+len(h.h[deadlineTimer])
			usedH = usedH || len(h.h[bufferTimer])+len(h.h[deadlineTimer]) > 0
		}
		// Pop everything due up to a bound; it must come out in
		// (due, order) order and be exactly the armed keys.
		now := event.Time(rng.IntN(1000))
		if inOrder {
			now = clock - event.Time(rng.IntN(100))
		}
		var want []*keyState
		for _, ks := range keys {
			if d, ok := dueOfKey(ks); ok && d <= now {
				want = append(want, ks)
			}
		}
		slices.SortFunc(want, func(a, b *keyState) int {
			da, _ := dueOfKey(a)
			db, _ := dueOfKey(b)
			if da != db {
				return int(da - db)
			}
			return int(a.order) - int(b.order)
		})
		var got []*keyState
		for ks, due := h.popDue(now); ks != nil; ks, due = h.popDue(now) {
			// A popped key keeps only its timer due later, if any.
			if d, ok := dueOfKey(ks); due > now || ok && d <= now {
				t.Fatalf("seed %d in order %v round %d: popped at %d, a timer due at %d left armed", seed, inOrder, round, due, d)
			}
			got = append(got, ks)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("seed %d in order %v round %d: popped %d keys, want %d, or in the wrong order", seed, inOrder, round, len(got), len(want))
		}
		armed := 0
		for _, ks := range keys {
			if ks.timer.armed {
				armed++
			}
			if ks.deadline.armed {
				armed++
			}
		}
		if h.n != h.entries() {
			t.Fatalf("seed %d in order %v: heap counts %d entries, holds %d", seed, inOrder, h.n, h.entries())
		}
		if h.len() != armed {
			t.Fatalf("seed %d in order %v: heap holds %d live timers, %d keys armed", seed, inOrder, h.len(), armed)
		}
	}
	if !compacted && !inOrder { // in order, popping drops most stale entries first
		t.Errorf("seed %d: the heap never compacted", seed)
	}
	if inOrder && (!usedQ || !usedH) {
		t.Errorf("seed %d: FIFO used %v, heap used %v", seed, usedQ, usedH)
	}
}

// BenchmarkEventTime feeds 1,000 keys in slightly disordered event time
// with a watermark every 100 elements; most elements start nothing. The
// input repeats, shifted in time, for as long as the benchmark runs.
func BenchmarkEventTime(b *testing.B) {
	cfg := OperatorConfig{NFA: flinkNFA(b, nfa.WithTimeouts()), Key: keyByID}
	names := []string{"start", "foo", "end", "x", "x", "x", "x", "x"}
	const n, span = 100_000, 10_000
	in := make([]tev, n)
	for i := range in {
		in[i] = tev{id: int64(i*7919) % 1000, name: names[i%len(names)], ts: event.Time(i/10 - i%3)}
		if in[i].name == "foo" {
			in[i].volume = 10
		}
	}
	events := mkEvents(in...)
	op, err := NewOperator(cfg)
	if err != nil {
		b.Fatal(err)
	}
	var out Output
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		ev := events[i%n]
		ts := ev.Time + event.Time(i/n*span)
		i++
		if err := op.ProcessElement(ev, ts, &out); err != nil {
			b.Fatal(err)
		}
		if i%100 == 0 {
			if err := op.ProcessWatermark(ts-5, &out); err != nil {
				b.Fatal(err)
			}
			out.Reset()
		}
	}
}
