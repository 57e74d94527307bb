package cep

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/cepheus-cep/cepheus/event"
)

// Labels scores a run's alerts against labelled events: an [EventObserver]
// that records the events whose label field is true (a bool, a non-zero
// number, or "true", "1", "yes") and the scenario each belongs to, then
// counts, per rule, the alerts that hold a labelled event (true
// positives) and the labelled events they caught, and per scenario the
// labelled events some alert caught. It keeps one entry per labelled
// event. Give each engine its own Labels; each run starts it afresh.
// Labels are not part of a checkpoint: after a restore they cover the
// events read since.
type Labels struct {
	field, scenario string
	labelSlot       int
	scenarioSlot    int

	labelled map[uint64]string // seq of each labelled event -> its scenario
	present  int64             // events that have the label field (not null)
	scenPres int64             // labelled events that have the scenario field (not null)
	caught   map[uint64]bool   // labelled events inside some alert
	rules    map[string]*RuleLabels
	order    []string           // rules in the order of their first alert
	caughtBy map[caughtKey]bool // (rule, labelled event) pairs seen in alerts

	// events are the labelled events, by seq, when kept (KeepEvents).
	keep   bool
	events map[uint64]*event.Event

	// caseField names the field of a labelled event's case (CountCases;
	// "" for none), caseSlot its slot, cases the case of each labelled
	// event that has one.
	caseField string
	caseSlot  int
	cases     map[uint64]string

	late int64 // labelled events that came late (OnLate)
}

// OnLate counts ev when it is labelled: behind the watermark, no rule saw
// it, so it is missed whatever the rules.
func (l *Labels) OnLate(ev *event.Event) {
	if _, ok := l.labelled[ev.Seq]; ok {
		l.late++
	}
}

// CountCases makes l also count cases: field names the case (the fraud
// instance) a labelled event belongs to, and a case is caught when some
// alert holds one of its labelled events (recall by instance, where the
// events' recall counts captures and logins no stage takes). Call it
// before the run.
func (l *Labels) CountCases(field string) { l.caseField = field }

// KeepEvents makes l keep the labelled events, for [Labels.AppendMissed]
// (their memory: one event per labelled event of the run).
func (l *Labels) KeepEvents() { l.keep = true }

// Missed returns the labelled events no alert holds, in input order; nil
// unless [Labels.KeepEvents] was called before the run.
func (l *Labels) Missed() []*event.Event {
	var out []*event.Event
	for seq, ev := range l.events {
		if !l.caught[seq] {
			out = append(out, ev)
		}
	}
	slices.SortFunc(out, func(a, b *event.Event) int { return cmp.Compare(a.Seq, b.Seq) })
	return out
}

// AppendMissed appends the labelled events no alert holds (Missed), one
// JSON line each, as e writes an alert's events ("line", then the
// fields), and returns how many.
func (l *Labels) AppendMissed(b []byte, e *Engine) ([]byte, int) {
	missed := l.Missed()
	for _, ev := range missed {
		b = e.encoder.enc.AppendEvent(b, ev)
		b = append(b, '\n')
	}
	return b, len(missed)
}

type caughtKey struct {
	rule string
	seq  uint64
}

// NewLabels returns the label statistics of the field that labels
// (fraudulent) events, and of the field naming a labelled event's
// scenario ("" means "scenario").
func NewLabels(field, scenarioField string) *Labels {
	if scenarioField == "" {
		scenarioField = "scenario"
	}
	return &Labels{field: field, scenario: scenarioField}
}

// Fields returns the label and scenario fields, and the case field when
// cases are counted.
func (l *Labels) Fields() []string {
	if l.caseField != "" {
		return []string{l.field, l.scenario, l.caseField}
	}
	return []string{l.field, l.scenario}
}

// Start resets the statistics and finds the fields in schema.
func (l *Labels) Start(schema *event.Schema) error {
	var ok1, ok2 bool
	l.labelSlot, ok1 = schema.Slot(l.field)
	l.scenarioSlot, ok2 = schema.Slot(l.scenario)
	if !ok1 || !ok2 {
		return fmt.Errorf("cep: labels: fields %q and %q not in the schema", l.field, l.scenario)
	}
	if l.caseField != "" {
		var ok bool
		if l.caseSlot, ok = schema.Slot(l.caseField); !ok {
			return fmt.Errorf("cep: labels: field %q not in the schema", l.caseField)
		}
	}
	l.cases, l.late = map[uint64]string{}, 0
	l.labelled, l.present, l.scenPres = map[uint64]string{}, 0, 0
	l.caught = map[uint64]bool{}
	l.rules = map[string]*RuleLabels{}
	l.order = nil
	l.caughtBy = map[caughtKey]bool{}
	l.events = nil
	if l.keep {
		l.events = map[uint64]*event.Event{}
	}
	return nil
}

// OnEvent records ev when it is labelled.
func (l *Labels) OnEvent(ev *event.Event) {
	v := ev.Field(l.labelSlot)
	if v.Kind() != event.KindNull {
		l.present++
	}
	if !truthy(v) {
		return
	}
	scv := ev.Field(l.scenarioSlot)
	if scv.Kind() != event.KindNull {
		l.scenPres++
	}
	sc, _ := scv.AsString()
	l.labelled[ev.Seq] = sc
	if l.caseField != "" {
		if cv := ev.Field(l.caseSlot); !cv.IsNull() {
			l.cases[ev.Seq] = cv.String()
		}
	}
	if l.events != nil {
		l.events[ev.Seq] = ev // a decoder makes each event anew: it stays as read
	}
}

// OnAlert scores a.
func (l *Labels) OnAlert(a *Alert) {
	r := l.rules[a.Rule]
	if r == nil {
		r = &RuleLabels{Rule: a.Rule}
		l.rules[a.Rule] = r
		l.order = append(l.order, a.Rule)
	}
	r.Alerts++
	hit := false
	for _, evs := range a.Matched {
		for _, e := range evs {
			if _, ok := l.labelled[e.Seq]; !ok {
				continue
			}
			hit = true
			l.caught[e.Seq] = true
			k := caughtKey{rule: a.Rule, seq: e.Seq}
			if !l.caughtBy[k] {
				l.caughtBy[k] = true
				r.Caught++
			}
		}
	}
	if hit {
		r.TruePositives++
	} else {
		r.FalsePositives++
	}
}

// truthy reports whether a label value marks an event: true, a non-zero
// number, or the strings "true"/"1"/"yes".
func truthy(v event.Value) bool {
	if b, ok := v.AsBool(); ok {
		return b
	}
	if f, ok := v.AsFloat(); ok {
		return f != 0
	}
	if s, ok := v.AsString(); ok {
		return s == "true" || s == "1" || s == "yes"
	}
	return false
}

// LabelSummary is what a [Labels] counted in a run.
type LabelSummary struct {
	Field   string // the label field
	Present int64  // events that have the label field, true or not
	// ScenarioField is the field naming a labelled event's scenario, and
	// ScenarioPresent the labelled events that have it.
	ScenarioField   string
	ScenarioPresent int64
	Labelled        int64 // labelled events in the input
	Caught          int64 // of them, inside at least one alert
	Late            int64 // of them, late: behind the watermark, seen by no rule
	// CaseField is the field naming a labelled event's case ("" when
	// cases are not counted: CountCases); Cases the cases of the labelled
	// events that name one, CasesCaught those some alert holds an event of.
	CaseField          string
	Cases, CasesCaught int64
	// Rules are the rules that alerted, in the order of their first alert.
	Rules     []RuleLabels
	Scenarios []ScenarioSummary // by scenario name
}

// Rule returns the statistics of the rule named name (zero when it did
// not alert).
func (s *LabelSummary) Rule(name string) RuleLabels {
	for _, r := range s.Rules {
		if r.Rule == name {
			return r
		}
	}
	return RuleLabels{Rule: name}
}

// CaseRecall is CasesCaught / Cases over all scenarios (0 without cases).
func (s *LabelSummary) CaseRecall() float64 { return ratio(s.CasesCaught, s.Cases) }

// Recall is Caught / Labelled over all scenarios.
func (s *LabelSummary) Recall() float64 { return ratio(s.Caught, s.Labelled) }

// RuleLabels are the label statistics of one rule.
type RuleLabels struct {
	Rule           string
	Alerts         int64
	TruePositives  int64 // alerts with at least one labelled event
	FalsePositives int64
	Caught         int64 // distinct labelled events inside this rule's alerts
}

// Precision is TruePositives / Alerts (0 when there are no alerts).
func (r RuleLabels) Precision() float64 { return ratio(r.TruePositives, r.Alerts) }

// ScenarioSummary is the outcome for one labelled scenario.
type ScenarioSummary struct {
	Scenario string
	Labelled int64 // labelled events of the scenario
	Caught   int64 // of them, inside at least one alert
	// Cases and CasesCaught are the scenario's cases and those caught
	// (LabelSummary.CaseField).
	Cases, CasesCaught int64
	// ByRule counts, per rule, the scenario's events its alerts caught.
	ByRule map[string]int64
}

// Recall is Caught / Labelled.
func (s ScenarioSummary) Recall() float64 { return ratio(s.Caught, s.Labelled) }

// Missed is Labelled - Caught.
func (s ScenarioSummary) Missed() int64 { return s.Labelled - s.Caught }

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// Summary returns the statistics of the run so far (of the last run, once
// it returned).
func (l *Labels) Summary() *LabelSummary {
	s := &LabelSummary{Field: l.field, Present: l.present, Labelled: int64(len(l.labelled)), Caught: int64(len(l.caught)), Late: l.late,
		ScenarioField: l.scenario, ScenarioPresent: l.scenPres}
	for _, name := range l.order {
		s.Rules = append(s.Rules, *l.rules[name])
	}
	byScenario := map[string]*ScenarioSummary{}
	var order []string
	for seq, sc := range l.labelled {
		ss := byScenario[sc]
		if ss == nil {
			ss = &ScenarioSummary{Scenario: sc, ByRule: map[string]int64{}}
			byScenario[sc] = ss
			order = append(order, sc)
		}
		ss.Labelled++
		if l.caught[seq] {
			ss.Caught++
		}
	}
	for k := range l.caughtBy {
		byScenario[l.labelled[k.seq]].ByRule[k.rule]++
	}
	if l.caseField != "" {
		s.CaseField = l.caseField
		// A case counts in the scenario its labelled events name (in
		// each, should they name several), caught when any is.
		type caseKey struct{ scenario, id string }
		caught := map[caseKey]bool{}
		for seq, id := range l.cases {
			k := caseKey{l.labelled[seq], id}
			caught[k] = caught[k] || l.caught[seq]
		}
		for k, c := range caught {
			ss := byScenario[k.scenario]
			ss.Cases++
			s.Cases++
			if c {
				ss.CasesCaught++
				s.CasesCaught++
			}
		}
	}
	slices.Sort(order)
	for _, sc := range order {
		s.Scenarios = append(s.Scenarios, *byScenario[sc])
	}
	return s
}
